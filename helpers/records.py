"""What a lowered program's metadata holds: one typed record per program and per method.

:func:`helpers.lowering.lower` writes it (and the cache stores it as JSON beside the ``.pte``), the export
doctor writes it for a shipped ``.pte`` (:mod:`helpers.doctor.shipped`), and :class:`helpers.PteArtifact` reads it.
Every key is always present: the cache key includes the code that writes these records, so an entry written by
older code is never read.
"""

from __future__ import annotations

from typing import Any, TypedDict

__all__ = ["MethodRecord", "ProgramRecord"]


class MethodRecord(TypedDict):
    """One method of the program."""

    contract: dict[str, Any]  # InputContract.to_dict(): the inputs the method accepts
    delegation: list[dict[str, Any]]  # one row per operator and region: op, region, delegated, portable
    delegated_subgraphs: int
    notes: list[str]  # what the lowering had to do differently (e.g. control flow left to portable kernels)
    planned_buffer_sizes: list[int]  # bytes of each memory-planned arena
    graph: str  # the exported graph's code, as torch.export printed it
    user_outputs: list[int]  # which of the runtime's outputs are forward()'s (the rest are buffer mutations)
    runtime_outputs: int
    declined: list[dict[str, str]]  # the XNNPACK partitioner's reasons for the nodes it declined
    xnnpack_rules: list[str]  # the operators the XNNPACK partitioner has a rule for (empty for portable)
    serialized: dict[str, Any]  # read back from the .pte: instructions and memory plan (helpers.serialized)


class ProgramRecord(TypedDict):
    """The whole program: its cache key, backend and methods (in the order they were given)."""

    key: str
    backend: str
    method_order: list[str]
    methods: dict[str, MethodRecord]
