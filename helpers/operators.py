"""Graph operators the library counts apart when it says what runs where (one list, read by lowering, the
delegation report and the exercises' checks)."""

from __future__ import annotations

__all__ = ["CONTROL_FLOW", "BOOKKEEPING", "SIZE_OPS"]

# Higher-order control flow. The ExecuTorch emitter turns a cond into jump instructions around its branches' own
# nodes (both branches are inlined), not into a kernel: it is neither delegated nor a portable operator.
CONTROL_FLOW = frozenset({"cond", "while_loop", "map_impl", "scan"})

# Nodes that are not computation: memory planning's allocations and tuple access to a node's outputs.
BOOKKEEPING = frozenset({"alloc", "getitem"})

# Arithmetic on symbolic sizes (a dynamic program reads a size, adds, multiplies): the runtime runs these as prim
# ops on integers. They are not operators a delegate could take, so they are not counted as nodes.
SIZE_OPS = frozenset({"sym_size", "sym_numel", "sym_stride", "sym_storage_offset", "add", "sub", "mul", "floordiv",
                      "truediv", "mod", "neg", "eq", "ne", "lt", "le", "gt", "ge", "sym_max", "sym_min", "sym_float",
                      "sym_not"})
