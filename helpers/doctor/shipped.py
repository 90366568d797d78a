"""``--pte FILE``: examine a shipped ``.pte`` against the eager model, without lowering anything.

The model is exported with the given examples and Dims (that gives the input contract and the
probes), but the program that runs is the file's own bytes. What the file records is read from it:
its input signature (``MethodMeta``), its memory plan, and, by deserializing the program, which
instructions call a delegate and which call a portable kernel. XNNPACK's payloads are read to
count the operators each delegate runs. What a file does *not* record is said so: the partitioner's
reasons for declining an operator exist only while lowering.
"""

from __future__ import annotations

import hashlib
import re
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import torch

from ..artifact import DelegationReport, PteArtifact
from ..records import ProgramRecord

__all__ = ["load_shipped", "read_program", "FileDelegation", "SCALAR_TYPES"]

# c10::ScalarType codes, as MethodMeta reports them
SCALAR_TYPES: dict[int, torch.dtype] = {
    0: torch.uint8, 1: torch.int8, 2: torch.int16, 3: torch.int32, 4: torch.int64, 5: torch.float16,
    6: torch.float32, 7: torch.float64, 11: torch.bool, 15: torch.bfloat16,
}

NOT_KNOWN = ("not known from a .pte file: the partitioner's reasons exist only while lowering (run the doctor "
             "without --pte to see them)")


class FileDelegation(DelegationReport):
    """Delegation read from a ``.pte`` file: XNNPACK operators inside the delegate payloads (layout
    transposes included) vs portable kernel calls of the plan. Not the graph-node counts of a lowering."""

    def reasons(self) -> dict[str, list[str]]:
        return {op: [NOT_KNOWN] for op in self.portable_ops()}

    def summary(self) -> str:
        return (f"{self.method} (read from the file): {self.delegated_nodes} operators inside "
                f"{self.delegated_subgraphs} delegate call(s), {self.portable_nodes} portable kernel call(s) "
                f"({self.coverage:.0%} delegated)")


def _xnnpack_operators(blob: bytes) -> list[str] | None:
    """The operator types in one XNNPACK payload (``XNNConv2d``…), or None if it cannot be read."""
    try:
        from executorch.backends.xnnpack.serialization.xnnpack_graph_serialize import XNNHeader, _get_schema_bytes
        from executorch.exir._serialize._flatbuffer import _flatc_decompile

        header = XNNHeader.from_bytes(blob[:XNNHeader.EXPECTED_LENGTH])
        flat = blob[header.flatbuffer_offset:header.flatbuffer_offset + header.flatbuffer_size]
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "schema.fbs").write_bytes(_get_schema_bytes())
            (Path(tmp) / "graph.bin").write_bytes(flat)
            _flatc_decompile(tmp, str(Path(tmp) / "schema.fbs"), str(Path(tmp) / "graph.bin"))
            text = (Path(tmp) / "graph.json").read_text()
        return re.findall(r'"xnode_union_type"\s*:\s*"(\w+)"', text)
    except Exception:  # noqa: BLE001 - an unreadable payload: its operators are unknown
        return None


def read_program(pte: bytes, method: str = "forward") -> dict[str, Any]:
    """What the file records about ``method``: delegate calls, portable kernel calls, memory plan."""
    from .._quiet import import_executorch_quietly

    import_executorch_quietly()  # the compiler's deserializer
    from executorch.exir._serialize._program import deserialize_pte_binary

    program = deserialize_pte_binary(bytes(pte)).program
    plan = next((p for p in program.execution_plan if p.name == method), None)
    if plan is None:
        return {"methods": [p.name for p in program.execution_plan]}
    kernels: Counter[str] = Counter()
    delegate_calls: Counter[int] = Counter()
    for chain in plan.chains:
        for instruction in chain.instructions:
            args = instruction.instr_args
            if type(args).__name__ == "KernelCall":
                op = plan.operators[args.op_index]
                kernels[f"{op.name}.{op.overload}" if op.overload else op.name] += 1
            elif type(args).__name__ == "DelegateCall":
                delegate_calls[args.delegate_index] += 1
    delegates = []
    for index, delegate in enumerate(plan.delegates):
        blob = None
        ref = delegate.processed
        if int(ref.location) == 0 and ref.index < len(program.backend_delegate_data):
            blob = bytes(program.backend_delegate_data[ref.index].data)
        operators = _xnnpack_operators(blob) if blob is not None and "xnnpack" in delegate.id.lower() else None
        delegates.append({"backend": delegate.id, "calls": delegate_calls[index], "operators": operators})
    return {"methods": [p.name for p in program.execution_plan], "kernels": dict(kernels), "delegates": delegates,
            "planned_buffer_sizes": list(plan.non_const_buffer_sizes)}


def _file_delegation(info: dict[str, Any], method: str) -> FileDelegation:
    rows: list[dict[str, Any]] = []
    xnn: Counter[str] = Counter()
    notes = ["read from the .pte file: delegated counts are the operators inside the delegate payloads (layout "
             "transposes included), portable counts are the plan's kernel calls; a lowering counts graph nodes"]
    calls = 0
    for d in info["delegates"]:
        calls += d["calls"] or 1
        if d["operators"] is None:
            xnn[f"{d['backend']} call (operators unknown)"] += d["calls"] or 1
            notes.append(f"the payload of a {d['backend']} call could not be read: it counts as one operator")
        else:
            xnn.update(d["operators"])
    rows += [{"region": "main", "op": op, "delegated": n, "portable": 0} for op, n in sorted(xnn.items())]
    rows += [{"region": "main", "op": op, "delegated": 0, "portable": n} for op, n in sorted(info["kernels"].items())]
    backend = "xnnpack" if any("xnnpack" in d["backend"].lower() for d in info["delegates"]) else "portable"
    return FileDelegation(method=method, backend=backend, rows=rows, delegated_subgraphs=calls, notes=notes)


def _signature(inputs: list[tuple[torch.dtype | None, tuple[int, ...]] | None]) -> str:
    parts = []
    for spec in inputs:
        if spec is None:
            parts.append("(not a tensor)")
        else:
            dtype, sizes = spec
            parts.append(f"{str(dtype).replace('torch.', '') if dtype else '?'}[{', '.join(map(str, sizes))}]")
    return f"({', '.join(parts)})"


def _signature_problems(file_inputs: list[Any], example_args: tuple[Any, ...], contract: Any, names: list[str]
                        ) -> list[str]:
    """How the file's inputs disagree with the examples (static axes must be equal, dynamic ones must fit)."""
    if len(file_inputs) != len(example_args):
        return [f"the file's forward takes {len(file_inputs)} input(s), --example gives {len(example_args)}"]
    problems = []
    for i, (spec, arg) in enumerate(zip(file_inputs, example_args)):
        name = names[i] if i < len(names) else f"input {i}"
        if spec is None or not isinstance(arg, torch.Tensor):
            if (spec is None) != (not isinstance(arg, torch.Tensor)):
                problems.append(f"{name}: a tensor on one side only")
            continue
        dtype, sizes = spec
        if dtype is not None and dtype != arg.dtype:
            problems.append(f"{name}: dtype {str(dtype).replace('torch.', '')} in the file, "
                            f"{str(arg.dtype).replace('torch.', '')} here")
        if len(sizes) != arg.dim():
            problems.append(f"{name}: rank {len(sizes)} in the file, {arg.dim()} here")
            continue
        axes = contract.inputs[i].axes if i < len(contract.inputs) else ()
        for axis, (size, here) in enumerate(zip(sizes, arg.shape)):
            dynamic = axis < len(axes) and axes[axis].size is None
            if (not dynamic and size != here) or (dynamic and here > size):
                problems.append(f"{name} axis {axis}: {size} in the file, {int(here)} here"
                                + (" (a dynamic axis larger than the file's capacity)" if dynamic else ""))
    return problems


def load_shipped(pte: bytes, *, model: torch.nn.Module, example_args: tuple[Any, ...], dynamic_shapes: Any,
                 exported: Any, name: str, method: str = "forward") -> tuple[PteArtifact | None, str | None]:
    """Load a shipped ``.pte`` as a :class:`PteArtifact` whose contract comes from the model's export.

    Returns ``(artifact, None)``, or ``(None, what is wrong)`` when the file does not load or its
    input signature disagrees with the examples.
    """
    from torch.export.graph_signature import OutputKind

    from .._quiet import captured_output, runtime_log_lines
    from .._runtime import load_program
    from ..contract import contract_from_export, forward_parameter_names
    from ..serialized import read_methods

    with captured_output() as log:
        try:
            program = load_program(pte)
        except Exception as exc:  # noqa: BLE001 - a file the runtime refuses is the finding
            why = " ".join(runtime_log_lines(log.getvalue())) or str(exc)
            return None, f"the ExecuTorch runtime cannot load {name}: {why}"
    if method not in program.method_names:
        return None, f"{name} has no method '{method}' (it has: {', '.join(program.method_names) or 'none'})"
    meta = program.method_meta(method)
    file_inputs: list[tuple[torch.dtype | None, tuple[int, ...]] | None] = []
    with captured_output():
        for i in range(meta.num_inputs()):
            try:
                tensor = meta.input_tensor_meta(i)
                file_inputs.append((SCALAR_TYPES.get(int(tensor.dtype())), tuple(tensor.sizes())))
            except Exception:  # noqa: BLE001 - a non-tensor input
                file_inputs.append(None)
    planned = [spec[1] if spec is not None else None for spec in file_inputs]
    names = forward_parameter_names(model)
    contract = contract_from_export(method, model, example_args, dynamic_shapes, exported, planned)
    problems = _signature_problems(file_inputs, example_args, contract, names)
    if problems:
        here = _signature([(a.dtype, tuple(a.shape)) if isinstance(a, torch.Tensor) else None for a in example_args])
        return None, (f"{name} does not take the inputs of --example: the file's forward{_signature(file_inputs)}, "
                      f"--example forward{here}: {'; '.join(problems)}")
    info = read_program(pte, method)
    delegation = _file_delegation(info, method)
    specs = [s for s in exported.graph_signature.output_specs if s.kind != OutputKind.BUFFER_MUTATION]
    graph = "\n".join(line for line in exported.graph_module.code.strip().splitlines() if line.strip())
    meta_dict: ProgramRecord = {
        "key": "pte-" + hashlib.sha256(pte).hexdigest()[:16], "backend": delegation.backend,
        "method_order": [method],
        "methods": {method: {
            "contract": contract.to_dict(), "delegation": delegation.rows,
            "delegated_subgraphs": delegation.delegated_subgraphs, "notes": delegation.notes,
            "planned_buffer_sizes": info["planned_buffer_sizes"], "graph": graph,
            "user_outputs": [i for i, s in enumerate(specs) if s.kind == OutputKind.USER_OUTPUT],
            "runtime_outputs": meta.num_outputs(), "declined": [], "xnnpack_rules": [],
            "serialized": read_methods(pte)[method]}},
    }
    return _ShippedArtifact(pte, meta_dict, delegation), None


class _ShippedArtifact(PteArtifact):
    """A shipped ``.pte``: its delegation is the one read from the file."""

    def __init__(self, pte: bytes, meta: ProgramRecord, delegation: FileDelegation):
        super().__init__(pte, meta)
        self._file_delegation = delegation

    def delegation(self, method: str = "forward") -> DelegationReport:
        self._info(method)
        return self._file_delegation
