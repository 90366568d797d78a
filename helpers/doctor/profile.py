"""How much of the measured run time the portable operators take (``--max-portable-time``; issue 20 §3).

A node count says how much of the graph a delegate took, not how long the rest runs: lesson 08's segmenter is
"83 % delegated" while its one portable upsample dominates the latency. ExecuTorch 1.5.1's Python runtime can
say it: a program loaded with ``enable_etdump=True`` records an event per operator call (ETDump), and
``executorch.devtools.Inspector`` reads them back. :func:`measure` runs the example ``runs`` times after one
warm-up call and, per run, adds up the ``OPERATOR_CALL`` events (each call into a portable kernel) and the
``DELEGATE_CALL`` events against ``Method::execute``; the share reported is the median over the runs. The
portable kernels' own names come from their ``native_call_<op>`` events. Everything here is ExecuTorch's own
profiling; only the adding up is ours. Times are the runtime's clock on this machine, with the runtime's thread
pool (:func:`helpers._runtime.runtime_threads`): a share, not a device's latency.
"""

from __future__ import annotations

import statistics
import tempfile
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

__all__ = ["RuntimeProfile", "measure", "RUNS"]

RUNS = 7  # timed calls of the example, after one warm-up call


@dataclass
class RuntimeProfile:
    """The measured run time of one method on its example input: medians over :attr:`runs` calls, in ms."""

    runs: int
    threads: int
    total_ms: float  # Method::execute
    portable_ms: float  # the OPERATOR_CALL events (portable kernels)
    delegate_ms: float  # the DELEGATE_CALL events
    share: float  # median over the runs of portable / total (0..1)
    by_operator: dict[str, float] = field(default_factory=dict)  # native_call_<op> → median ms per run

    def summary(self) -> str:
        return (f"portable operators {self.share:.0%} of the measured run time ({self.portable_ms:.3f} of "
                f"{self.total_ms:.3f} ms; delegate calls {self.delegate_ms:.3f} ms; median of {self.runs} runs, "
                f"{self.threads} runtime thread(s))")


def _per_run(events: list[Any], runs: int) -> list[float]:
    """The sum of ``events``' durations in each run (an event is one call site; its ``raw`` has one value per run)."""
    totals = [0.0] * runs
    for event in events:
        raw = list(event.perf_data.raw) if event.perf_data is not None else []
        for i, value in enumerate(raw[-runs:]):  # the warm-up call is the first value: left out
            totals[i] += float(value)
    return totals


def measure(pte: bytes, args: Sequence[Any], *, method: str = "forward", runs: int = RUNS) -> RuntimeProfile:
    """Run ``method`` of the program ``pte`` on ``args`` once to warm up, then ``runs`` times with ETDump on, and
    read the events back with ExecuTorch's Inspector."""
    from .._quiet import captured_output, import_executorch_quietly
    from .._runtime import compiled_runtime, runtime_threads

    import_executorch_quietly()  # the Inspector needs the compiler: not loaded by a run whose programs were cached
    from executorch.devtools import Inspector

    runtime = compiled_runtime()
    with captured_output():
        program = runtime._load_program_from_buffer(
            bytes(pte), enable_etdump=True, debug_buffer_size=0,
            program_verification=runtime.Verification.InternalConsistency, data_path=None)
        loaded = program.load_method(method)
        for _ in range(runs + 1):
            loaded.call([a.clone() if isinstance(a, torch.Tensor) else a for a in args])
    with tempfile.TemporaryDirectory(prefix="export-doctor-etdump-") as tmp:
        etdump = Path(tmp) / "run.etdp"
        program.write_etdump_result_to_file(str(etdump), str(Path(tmp) / "debug.bin"))
        with warnings.catch_warnings(), captured_output():
            warnings.simplefilter("ignore")  # "Output Buffer not found": no tensor debug data was asked for
            inspector = Inspector(etdump_path=str(etdump))
    events = [e for block in inspector.event_blocks if block.name == "Execute" for e in block.events]
    total = _per_run([e for e in events if e.name == "Method::execute"], runs)
    portable = _per_run([e for e in events if e.name == "OPERATOR_CALL"], runs)
    delegate = _per_run([e for e in events if e.name == "DELEGATE_CALL"], runs)
    names = sorted({e.name for e in events if e.name.startswith("native_call_")})
    by_operator = {name.removeprefix("native_call_"): statistics.median(
        _per_run([e for e in events if e.name == name], runs)) for name in names}
    shares = [p / t for p, t in zip(portable, total) if t > 0]
    return RuntimeProfile(runs=runs, threads=runtime_threads(), total_ms=statistics.median(total),
                          portable_ms=statistics.median(portable), delegate_ms=statistics.median(delegate),
                          share=statistics.median(shares) if shares else 0.0, by_operator=by_operator)
