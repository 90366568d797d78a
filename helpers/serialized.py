"""Read a serialized ``.pte``: each method's instruction stream and its memory plan.

Reading the flatbuffer needs the ahead-of-time compiler's deserializer (``executorch.exir``, ~3 s to
import), so :func:`helpers.lower` reads every program it builds once, right after ``to_executorch()``,
and keeps the result beside the program in the cache. A cached program then answers
:meth:`PteArtifact.instructions` and :meth:`PteArtifact.memory_plan` without the compiler.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["read_methods", "input_dynamism"]

# ExecuTorch's ScalarType numbering (executorch/runtime/core/portable_type/scalar_type.h)
_SCALAR_TYPES = {0: torch.uint8, 1: torch.int8, 2: torch.int16, 3: torch.int32, 4: torch.int64,
                 5: torch.float16, 6: torch.float32, 7: torch.float64, 11: torch.bool, 15: torch.bfloat16}


def read_methods(pte: bytes) -> dict[str, dict[str, Any]]:
    """``{method: {"instructions": [[kind, detail], ...], "memory_plan": [row, ...]}}`` read from ``pte``.

    An instruction is ``(kind, detail)``: ``KernelCall`` with its operator, ``DelegateCall`` (a delegated
    subgraph), ``JumpFalseCall`` with its target, ``MoveCall``, …, in the order the runtime walks them.
    A memory-plan row is one planned tensor, in value order: its number (``#``, from 1), what produced it
    (``input``, an operator, ``delegate`` for an output of a delegated subgraph, ``view`` for a tensor that
    shares another's bytes), its shape, bytes, arena and offset in that arena.
    """
    program = _deserialize(pte)
    return {plan.name: {"instructions": _instructions(plan), "memory_plan": _memory_plan(plan)}
            for plan in program.execution_plan}


def input_dynamism(pte: bytes) -> dict[str, list[str]]:
    """Per method, each tensor input's ``TensorShapeDynamism`` as the program's flatbuffer records it:
    ``STATIC`` (exactly this shape), ``DYNAMIC_BOUND`` (any shape up to the recorded one) or
    ``DYNAMIC_UNBOUND``.

    The runtime's ``MethodMeta`` does not expose it (its ``sizes()`` are the largest shape either way), so
    this reads the serialized program with the ahead-of-time compiler's deserializer.
    """
    program = _deserialize(pte)
    return {plan.name: [plan.values[i].val.shape_dynamism.name for i in plan.inputs
                        if type(plan.values[i].val).__name__ == "Tensor"]
            for plan in program.execution_plan}


def program_operators(pte: bytes) -> dict[str, list[str]]:
    """Per method, the operators its instructions call by name (``aten::sort.values``): what ``load_method`` looks
    up in the runtime's kernel registry. Delegated work is not listed (it is the delegate's)."""
    methods = {}
    for plan in _deserialize(pte).execution_plan:
        names = [f"{o.name}.{o.overload}" if o.overload else o.name for o in plan.operators]
        methods[plan.name] = sorted(set(names))
    return methods


def _deserialize(pte: bytes) -> Any:
    """The program's flatbuffer as the ahead-of-time compiler reads it (imported quietly: a run that only loads
    cached programs does not otherwise import it)."""
    from ._quiet import import_executorch_quietly

    import_executorch_quietly()
    from executorch.exir._serialize._program import deserialize_pte_binary

    program = deserialize_pte_binary(bytes(pte))
    return getattr(program, "program", program)


def _instructions(plan: Any) -> list[list[str]]:
    ops = [o.name for o in plan.operators]
    steps = []
    for chain in plan.chains:
        for instruction in chain.instructions:
            args = instruction.instr_args
            kind = type(args).__name__
            if kind == "KernelCall":
                detail = ops[args.op_index]
            elif kind == "JumpFalseCall":
                detail = f"if false, jump to {args.destination_instruction}"
            elif kind == "DelegateCall":
                detail = "the XNNPACK subgraph"
            else:
                detail = ""
            steps.append([kind, detail])
    return steps


def _memory_plan(plan: Any) -> list[dict[str, Any]]:
    producers: dict[int, str] = {int(i): "input" for i in plan.inputs}
    for chain in plan.chains:
        for instruction in chain.instructions:
            call = instruction.instr_args
            if type(call).__name__ == "KernelCall" and call.args:
                producers.setdefault(int(call.args[-1]), plan.operators[call.op_index].name.replace("aten::", ""))
            elif type(call).__name__ == "DelegateCall":  # its arguments not produced before are its outputs
                for arg in call.args:
                    producers.setdefault(int(arg), "delegate")
    rows: list[dict[str, Any]] = []
    for index, value in enumerate(plan.values):
        tensor = value.val
        info = getattr(tensor, "allocation_info", None)
        if type(tensor).__name__ != "Tensor" or info is None:
            continue
        numel = 1
        for s in tensor.sizes:
            numel *= s
        elem = torch.empty((), dtype=_SCALAR_TYPES.get(int(tensor.scalar_type), torch.float32)).element_size()
        rows.append({"#": len(rows) + 1, "made by": producers.get(index, "view"), "value": index,
                     "shape": list(tensor.sizes), "bytes": numel * elem,
                     "arena": int(info.memory_id), "offset": int(info.memory_offset_low)})
    return rows
