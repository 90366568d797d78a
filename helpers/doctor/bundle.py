"""``--bundle FILE.bpte``: an ExecuTorch BundledProgram of the exact ``.pte`` the doctor ran.

A BundledProgram is the ``.pte`` plus test cases (inputs and expected outputs) for its methods. The
doctor bundles every probe *inside* the input contract that matched eager, with **eager's** outputs
as the expectation, so a device (or the Python bindings) can prove that the very program it runs
reproduces eager PyTorch. The program bytes are the artifact's own (``pte_file_path``): nothing is
re-lowered, so the bundle cannot drift from what was examined. The bundle is loaded back and every
test case verified in the runtime here before the report is written.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import torch

from .report import BundleInfo

__all__ = ["write_bundle", "load_bundle", "verify_case"]

_LIVE: list[Any] = []  # bundles stay loaded until the process ends (see helpers.artifact._LIVE_PROGRAMS)


def load_bundle(data: bytes) -> Any:
    """A ``BundledModule`` of the compiled runtime (what ``portable_lib._load_bundled_program_from_buffer`` gives)."""
    from .._quiet import captured_output
    from .._runtime import compiled_runtime

    with captured_output():
        bundle = compiled_runtime()._load_bundled_program_from_buffer(bytes(data))
    _LIVE.append((data, bundle))
    return bundle


def verify_case(bundle: Any, index: int, *, rtol: float, atol: float, method: str = "forward") -> str | None:
    """Run test case ``index`` of the bundle in the runtime and compare with its expected outputs:
    ``None`` when they agree, else the runtime's message."""
    from .._quiet import captured_output, runtime_log_lines

    with captured_output() as log:
        try:
            bundle.verify_result_with_bundled_expected_output(method, index, rtol, atol)
        except Exception as exc:  # noqa: BLE001 - a mismatch is reported as a RuntimeError
            lines = runtime_log_lines(log.getvalue())
            return " ".join(lines + [str(exc)]).strip()
    return None


def _finite(outputs: tuple[Any, ...]) -> bool:
    return all(isinstance(o, torch.Tensor) and (not o.is_floating_point() or bool(torch.isfinite(o).all()))
               for o in outputs)


def write_bundle(artifact: Any, model: torch.nn.Module, probes: list[Any], parity: Any, *, path: str | Path | None,
                 atol: float, rtol: float, method: str = "forward") -> BundleInfo:
    """Bundle the in-contract probes that match eager (with eager's outputs) into ``path`` and verify them."""
    from .._quiet import import_executorch_quietly

    import_executorch_quietly()  # the compiler: not loaded by a run whose programs came from the cache
    from executorch.devtools import BundledProgram
    from executorch.devtools.bundled_program.config import MethodTestCase, MethodTestSuite
    from executorch.devtools.bundled_program.serialize import serialize_from_bundled_program_to_flatbuffer

    from .._quiet import captured_output
    from .._runtime import load_program

    with tempfile.TemporaryDirectory() as tmp:
        pte_file = artifact.save(Path(tmp) / "program.pte")
        pte = pte_file.read_bytes()
    runtime_outputs = load_program(pte).method_meta(method).num_outputs()
    cases, labels, left_out = [], [], []
    for probe, row in zip(probes, parity.rows):
        if not row.within_contract or row.status != "match":
            continue
        expected = tuple(row.eager_output or ())
        if len(expected) != runtime_outputs or not _finite(expected):
            left_out.append(row.label)
            continue
        cases.append(MethodTestCase(inputs=list(probe.args), expected_outputs=[t.detach().clone() for t in expected]))
        labels.append(row.label)
    target = str(path) if path is not None else None
    if not cases:
        problem = ("nothing to bundle: no probe inside the contract matches eager with finite outputs the program "
                   "returns one for one")
        return BundleInfo(target, 0, [], rtol, [], [], [], left_out, problem)
    # eager's outputs are the expectation; the tolerance scales with the largest value, as compare() does
    atols = []
    for case in cases:
        scale = max((float(t.abs().max()) for t in case.expected_outputs
                     if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel()), default=1.0)
        atols.append(float(f"{atol * max(1.0, scale):.3g}"))
    with tempfile.TemporaryDirectory() as tmp:
        pte_file = Path(tmp) / "program.pte"
        pte_file.write_bytes(pte)
        with captured_output():
            program = BundledProgram(None, [MethodTestSuite(method, cases)], pte_file_path=str(pte_file))
            data = serialize_from_bundled_program_to_flatbuffer(program)
    if target is not None:
        Path(target).write_bytes(data)
        data = Path(target).read_bytes()  # verify what was written
    bundle = load_bundle(data)
    verified: list[str] = []
    failed: list[str] = []
    for i, label in enumerate(labels):
        (failed if verify_case(bundle, i, rtol=rtol, atol=atols[i], method=method) else verified).append(label)
    return BundleInfo(target, len(data), labels, rtol, atols, verified, failed, left_out)
