"""A lowered ``.pte`` program, loaded in the real ExecuTorch runtime, with what we know about it.

:class:`PteArtifact` is what :func:`helpers.lower` returns. It runs the program with the
ExecuTorch runtime (the compiled module behind ``executorch.runtime``, see :mod:`helpers._runtime`),
either behind a host-side contract check (:meth:`PteArtifact.run`) or with only the runtime's own
checks (:meth:`PteArtifact.run_raw`, which refuses a few inputs that are undefined behaviour), and it
answers questions about the program: its input contract, how much of it the delegate took,
how big the memory plan's arena is, and the graph export recorded.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ._quiet import captured_output, runtime_log_lines
from ._runtime import load_program
from .contract import InputContract
from .operators import CONTROL_FLOW, SIZE_OPS
from .records import MethodRecord, ProgramRecord

__all__ = ["PteArtifact", "DelegationReport", "RuntimeRejectedError", "HostRefusedError"]


class RuntimeRejectedError(RuntimeError):
    """The ExecuTorch runtime refused to run: its own words are in ``reason`` (and ``log``)."""

    def __init__(self, method: str, error: str, log: list[str]):
        self.method = method
        self.error = error
        self.log = log
        self.reason = _sentences(log) if log else error
        super().__init__(f"the ExecuTorch runtime refused method '{method}': {self.reason} [{_short_error(error)}]")


class HostRefusedError(RuntimeRejectedError):
    """:meth:`PteArtifact.run_raw` refused an input *on the host*, before the runtime saw it.

    These are inputs that the ExecuTorch runtime would accept and hand to the XNNPACK delegate,
    where they are undefined behaviour (see :meth:`PteArtifact._refuse_undefined_behaviour`). It
    is not the runtime's refusal: reports count it apart (status ``"refused"``, not ``"rejected"``).
    """


def _sentences(lines: list[str]) -> str:
    """Join log lines into readable prose: "A. B." rather than "A.; B"."""
    parts = []
    for line in lines:
        line = line.strip().rstrip(";:").strip()
        if line:
            parts.append(line if line[-1] in ".!?" else line + ".")
    return " ".join(parts)


def _short_error(error: str) -> str:
    return error.split("\n", 1)[0].strip()


# ----- delegation ---------------------------------------------------------------------------------


@dataclass
class DelegationReport:
    """How many graph nodes the backend took (delegated) and how many run on portable kernels.

    ``rows`` holds one dict per (region, operator): ``region`` is ``"main"`` for the
    straight-line graph or e.g. ``"cond#0 true branch"`` for a ``torch.cond`` branch.
    Memory bookkeeping nodes (``alloc``, ``getitem``) are not counted, nor is a ``torch.cond`` itself:
    it becomes jump instructions, not a kernel (``control_flow`` counts those nodes).
    """

    method: str
    backend: str
    rows: list[dict[str, Any]]
    delegated_subgraphs: int
    notes: list[str] = field(default_factory=list)
    declined: list[dict[str, str]] = field(default_factory=list)
    control_flow: int = 0  # torch.cond / scan / map nodes: jumps in the program, not kernels (not counted as nodes)
    control_flow_kinds: tuple[str, ...] = ()  # their operators ("cond", "scan", "map_impl"), one per node
    size_ops: int = 0  # arithmetic on symbolic sizes (sym_size, operator.add, …): runtime prim ops, not kernels
    rules: list[str] = field(default_factory=list)  # the operators XNNPACK has a partitioner rule for

    @property
    def delegated_nodes(self) -> int:
        return sum(r["delegated"] for r in self.rows)

    @property
    def portable_nodes(self) -> int:
        return sum(r["portable"] for r in self.rows)

    @property
    def coverage(self) -> float:
        """Delegated share of the compute nodes (0..1)."""
        total = self.delegated_nodes + self.portable_nodes
        return self.delegated_nodes / total if total else 0.0

    def by_op(self) -> dict[str, tuple[int, int]]:
        """``{operator: (delegated, portable)}`` summed over regions."""
        out: dict[str, tuple[int, int]] = {}
        for r in self.rows:
            d, p = out.get(r["op"], (0, 0))
            out[r["op"]] = (d + r["delegated"], p + r["portable"])
        return dict(sorted(out.items()))

    def portable_ops(self) -> list[str]:
        """Operators that (at least once) were not delegated."""
        return [op for op, (_, p) in self.by_op().items() if p]

    def reasons(self) -> dict[str, list[str]]:
        """Per operator left on portable kernels, why: the partitioner's own words where it gave any.

        XNNPACK's rules report a reason for the nodes they check and decline (e.g. *dynamic output
        sizes are not supported*). Without such a reason: either XNNPACK has no rule for the operator
        at all, or it has one and still did not take these nodes without saying why (the report says
        which). Operators inside a ``torch.cond`` branch are never taken: ExecuTorch's lowering visits the
        branch graphs, but ``XnnpackPartitioner`` picks nodes by walking the top-level graph only.
        """
        given: dict[str, list[str]] = {}
        for d in self.declined:
            given.setdefault(_norm_op(d["op"]), []).append(d["reason"])
        rules = {_norm_op(r) for r in self.rules}
        in_branches = {r["op"] for r in self.rows if r["region"] != "main" and r["portable"]}
        in_main = {r["op"] for r in self.rows if r["region"] == "main" and r["portable"]}
        out: dict[str, list[str]] = {}
        for op in self.portable_ops():
            if self.backend != "xnnpack":
                out[op] = [f"backend {self.backend}: nothing is delegated"]
                continue
            words = list(dict.fromkeys(given.get(_norm_op(op), [])))
            if op in in_main and not words:
                if not rules:
                    words.append("the partitioner logged no reason for these nodes")
                elif _norm_op(op) in rules:
                    words.append("XNNPACK has a rule for this operator, but did not take these nodes and logged no "
                                 "reason")
                else:
                    words.append("XNNPACK has no rule for this operator")
            if op in in_branches:
                words.append("inside a torch.cond branch, which the partitioner never looks into")
            out[op] = words
        return out

    def summary(self) -> str:
        text = (f"{self.method}: {self.delegated_nodes} nodes delegated to {self.backend} in "
                f"{self.delegated_subgraphs} subgraph(s), {self.portable_nodes} on portable kernels "
                f"({self.coverage:.0%} delegated)")
        kinds = self.control_flow_kinds or ("cond",) * self.control_flow
        for kind in sorted(set(kinds)):
            what = {"cond": "torch.cond region(s)", "scan": "scan loop(s)", "map_impl": "map loop(s)"}.get(
                kind, f"{kind} region(s)")
            text += f"; {kinds.count(kind)} {what} as jumps"
        return text

    def to_dataframe(self):  # -> pandas.DataFrame
        import pandas as pd

        return pd.DataFrame(self.rows, columns=["region", "op", "delegated", "portable"])

    def _repr_html_(self) -> str:
        body = "".join(
            f"<tr><td>{html.escape(r['region'])}</td><td><code>{html.escape(r['op'])}</code></td>"
            f"<td style='text-align:right'>{r['delegated']}</td><td style='text-align:right'>{r['portable']}</td></tr>"
            for r in self.rows)
        notes = "".join(f"<li>{html.escape(n)}</li>" for n in self.notes)
        return (f"<div><b>{html.escape(self.summary())}</b>"
                "<table><tr><th>region</th><th>operator</th><th>delegated</th><th>portable</th></tr>"
                f"{body}</table>{f'<ul>{notes}</ul>' if notes else ''}</div>")

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        return f"<DelegationReport {self.summary()}>"


def _norm_op(op: str) -> str:
    """One spelling for an operator however it is named: ``aten.mean.dim``, ``mean.dim``, ``aten_mean_dim``,
    ``aten_add_tensor`` and ``add.Tensor`` become ``mean_dim``, ``add_tensor``."""
    op = op.lower().replace(".", "_")
    return op[len("aten_"):] if op.startswith("aten_") else op


# ----- the artifact -------------------------------------------------------------------------------
# Every program loaded in this process stays loaded until the process ends. Freeing one while a
# method, a MethodMeta or the delegate's caches still point into it is a use-after-free in the
# runtime bindings (seen as rare segfaults and XNNPACK "invalid_state" errors in *other* programs);
# a lesson's programs are a few kilobytes, so keeping them is the safe trade.
_LIVE_PROGRAMS: list[Any] = []

class PteArtifact:
    """A ``.pte`` program loaded in the ExecuTorch runtime, plus its recorded metadata."""

    def __init__(self, pte: bytes, meta: ProgramRecord):
        self._pte = bytes(pte)
        self._meta = meta
        with captured_output():  # the runtime's first start prints CPU-probing chatter
            self._program = load_program(self._pte)
        _LIVE_PROGRAMS.append(self._program)
        self._loaded: dict[str, Any] = {}
        self._contracts = {m: InputContract.from_dict(d["contract"]) for m, d in meta["methods"].items()}

    def reloaded(self) -> PteArtifact:
        """The same program loaded again: its mutable buffers (a KV cache) start from their initial values. Loading
        a method again on the same program does not reset them (ExecuTorch's Python runtime gives every method of a
        program one set of arenas)."""
        return PteArtifact(self._pte, self._meta)

    # ----- facts -------------------------------------------------------------------------------
    @property
    def methods(self) -> tuple[str, ...]:
        """The method names in the program, in the order they were given."""
        return tuple(self._meta["method_order"])

    @property
    def backend(self) -> str:
        return self._meta["backend"]

    @property
    def key(self) -> str:
        """The cache key (content address) of this program."""
        return self._meta["key"]

    @property
    def nbytes(self) -> int:
        """Size of the serialized ``.pte`` in bytes."""
        return len(self._pte)

    @property
    def pte_bytes(self) -> bytes:
        """The serialized program (what :meth:`save` writes and a device loads)."""
        return self._pte

    @property
    def notes(self) -> list[str]:
        """What the lowering had to do differently (e.g. control flow left to portable kernels)."""
        return [n for d in self._meta["methods"].values() for n in d["notes"]]

    def _info(self, method: str) -> MethodRecord:
        if method not in self._meta["methods"]:
            raise KeyError(f"no method '{method}' in this program; it has: {', '.join(self.methods)}")
        return self._meta["methods"][method]

    def instructions(self, method: str = "forward") -> list[tuple[str, str]]:
        """``method``'s instructions in the order the runtime walks them, ``(kind, detail)`` each
        (``KernelCall`` and its operator, ``DelegateCall``, ``JumpFalseCall`` and its target, ``MoveCall``).

        Read from the serialized ``.pte`` when it was built (:mod:`helpers.serialized`)."""
        return [(kind, detail) for kind, detail in self._info(method)["serialized"]["instructions"]]

    def memory_plan(self, method: str = "forward") -> list[dict[str, Any]]:
        """Every memory-planned tensor of ``method``: its number (``#``, from 1), what produced it, its
        shape, bytes, arena and offset in that arena, as ``to_executorch()`` fixed them in the ``.pte``.

        Read from the serialized ``.pte`` when it was built (:mod:`helpers.serialized`)."""
        columns = ("#", "made by", "value", "shape", "bytes", "arena", "offset")  # the cache stores keys sorted
        return [{c: tuple(row[c]) if c == "shape" else row[c] for c in columns}
                for row in self._info(method)["serialized"]["memory_plan"]]

    def input_contract(self, method: str = "forward") -> InputContract:
        """The inputs ``method`` accepts: dtypes, static sizes, named ``Dim`` ranges and ties."""
        self._info(method)
        return self._contracts[method]

    def delegation(self, method: str = "forward") -> DelegationReport:
        """Delegated vs portable nodes per operator (from ``get_delegation_info``)."""
        info = self._info(method)
        every = info["delegation"]
        rows = [dict(r) for r in every if r["op"] not in CONTROL_FLOW and r["op"] not in SIZE_OPS]
        return DelegationReport(method=method, backend=self.backend, rows=rows,
                                delegated_subgraphs=info["delegated_subgraphs"], notes=list(info["notes"]),
                                declined=[dict(d) for d in info["declined"]],
                                control_flow=sum(r["delegated"] + r["portable"] for r in every
                                                 if r["op"] in CONTROL_FLOW),
                                control_flow_kinds=tuple(r["op"] for r in every if r["op"] in CONTROL_FLOW
                                                         for _ in range(r["delegated"] + r["portable"])),
                                size_ops=sum(r["delegated"] + r["portable"] for r in every if r["op"] in SIZE_OPS),
                                rules=list(info["xnnpack_rules"]))

    def planned_memory_bytes(self, method: str = "forward") -> int:
        """Bytes of the memory plan's arena for activations and inputs/outputs (excludes weights and
        the delegate's private workspace)."""
        return int(sum(self._info(method)["planned_buffer_sizes"]))

    def graph(self, method: str = "forward") -> str:
        """The graph export recorded, as code (before lowering): only what tracing actually executed."""
        return self._info(method)["graph"]

    def save(self, path: str | Path) -> Path:
        """Write the ``.pte`` file (what you would ship to the device)."""
        path = Path(path)
        path.write_bytes(self._pte)
        return path

    # ----- running -----------------------------------------------------------------------------
    def _method(self, method: str):
        self._info(method)
        if method not in self._loaded:
            with captured_output() as log:
                try:
                    self._loaded[method] = self._program.load_method(method)
                except Exception as exc:  # noqa: BLE001 - the runtime's refusal, re-raised with its log
                    raise RuntimeRejectedError(method, str(exc), runtime_log_lines(log.getvalue())) from None
        return self._loaded[method]

    def bare_call(self, method: str = "forward") -> Callable[[list[Any]], list[Any]]:
        """The loaded method's own call: a list of inputs in, the runtime's outputs out, as an app's
        ``execute()``. No contract check, no capture of the runtime's log, no copy of the outputs (they
        are the runtime's buffers, overwritten by the next call): use it to time the runtime, and
        :meth:`run_raw` or :meth:`run` for everything else."""
        return self._method(method)

    def runtime_input_shapes(self, method: str = "forward") -> list[tuple[int, ...] | None]:
        """Per input, the shape the ``.pte`` itself records (``MethodMeta``): the *maximum* shape."""
        meta = self._method(method).method_meta()
        return _recorded_shapes(meta.num_inputs(), meta.input_tensor_meta)

    def runtime_output_shapes(self, method: str = "forward") -> list[tuple[int, ...] | None]:
        """Per runtime output, the shape the ``.pte`` records (``MethodMeta``): the largest the memory plan holds,
        for an output whose size depends on an input's size or on a value (an ``.item()``, a mask)."""
        meta = self._method(method).method_meta()
        return _recorded_shapes(meta.num_outputs(), meta.output_tensor_meta)

    def run_raw(self, *args: Any, method: str = "forward", all_outputs: bool = False) -> tuple[Any, ...]:
        """Run with the runtime's own checks only, as a device app that skips validation would.

        What the runtime checks itself: an input without dynamic axes must have exactly the recorded
        shape and dtype; an input with a dynamic axis only its rank and dtype, and that it fits the
        memory plan's capacity (the max shape). It does *not* check a ``Dim``'s min, the static axes of
        a dynamic input, or that two axes sharing a ``Dim`` are equal. One class of inputs is refused on the host
        first, because on a delegated dynamic program it is undefined behaviour (zero-size inputs,
        broken ties, a changed static axis on one of several inputs): :class:`HostRefusedError`
        (see :meth:`_refuse_undefined_behaviour`). Everything else goes to the runtime.

        Returns the user outputs (or every runtime output with ``all_outputs=True``).
        Raises :class:`RuntimeRejectedError` with the runtime's message when it refuses.
        """
        m = self._method(method)
        self._refuse_undefined_behaviour(method, args)
        with captured_output() as log:
            try:
                outs = m(list(args))
            except Exception as exc:  # noqa: BLE001 - the runtime's refusal, re-raised with its log
                raise RuntimeRejectedError(method, str(exc), runtime_log_lines(log.getvalue())) from None
        outs = [o.clone() if isinstance(o, torch.Tensor) else o for o in outs]
        if all_outputs:
            return tuple(outs)
        picks = self._info(method)["user_outputs"]
        if len(outs) != self._info(method)["runtime_outputs"]:
            return tuple(outs)
        return tuple(outs[i] for i in picks)

    def _refuse_undefined_behaviour(self, method: str, args: tuple[Any, ...]) -> None:
        """The inputs ``run_raw`` refuses before the runtime sees them (ExecuTorch 1.5.1 + XNNPACK).

        On a method with a dynamic axis the runtime checks only rank and element capacity, so it
        hands the XNNPACK delegate shapes that contradict each other: two axes that share a
        ``Dim`` but differ, a static axis changed on one of several inputs, or a zero-size tensor.
        The delegate then reads uninitialised sizes or fails its shape propagation, and such a
        failure can leave process-wide XNNPACK state broken: programs loaded *afterwards* fail with
        ``xnn_status_invalid_state``, or the process crashes. That is undefined behaviour on a
        device too, so an app must refuse these inputs itself; here they are refused on the host,
        with this explanation, instead of poisoning the rest of the session. Everything else
        (a size below a ``Dim``'s min, a changed static axis on a single input, anything the
        runtime refuses by itself) still goes to the runtime.
        """
        info = self._info(method)
        contract = self.input_contract(method)
        if info["delegated_subgraphs"] == 0 or all(ax.size is not None for i in contract.inputs for ax in i.axes):
            return
        if any(isinstance(a, torch.Tensor) and a.numel() == 0 for a in args):
            what = "a zero-size input"
        else:
            several = sum(i.kind == "tensor" for i in contract.inputs) > 1
            risky = [v for v in contract.violations(args) if v.kind == "tie" or (several and v.kind == "static")]
            if not risky:
                return
            what = risky[0].describe().split(". Fix:")[0]
        raise HostRefusedError(method, "refused before the runtime (undefined behaviour)", [
            f"refused on the host: {what}. The runtime would pass it to the XNNPACK delegate (it checks only "
            "rank and capacity), whose failed reshape can leave process-wide state broken: undefined behaviour, "
            "so an app must refuse it first"])

    def run(self, *args: Any, method: str = "forward") -> tuple[Any, ...]:
        """Check ``args`` against the input contract, then run.

        Raises :class:`helpers.InputContractError` for any input the export did not cover
        (with the input, axis, expectation and fix), and :class:`RuntimeRejectedError` if the
        runtime still refuses. Tensors are detached and made contiguous first.
        """
        self.input_contract(method).check(args)
        prepared = [a.detach().contiguous() if isinstance(a, torch.Tensor) else a for a in args]
        return self.run_raw(*prepared, method=method)

    # ----- display -----------------------------------------------------------------------------
    def __repr__(self) -> str:
        return f"<PteArtifact {', '.join(self.methods)} · {self.backend} · {self.nbytes:,} bytes>"

    def _repr_html_(self) -> str:
        parts = [f"<div><b>.pte program</b> · backend <code>{html.escape(self.backend)}</code> · "
                 f"{self.nbytes:,} bytes · {len(self.methods)} method(s)<table>"
                 "<tr><th>method</th><th>inputs</th><th>delegated</th><th>arena</th></tr>"]
        for m in self.methods:
            d = self.delegation(m)
            parts.append(
                f"<tr><td><code>{html.escape(m)}</code></td>"
                f"<td><code>{html.escape(self.input_contract(m).signature())}</code></td>"
                f"<td>{d.delegated_nodes}/{d.delegated_nodes + d.portable_nodes} nodes ({d.coverage:.0%})</td>"
                f"<td>{self.planned_memory_bytes(m):,} B</td></tr>")
        parts.append("</table>")
        if self.notes:
            parts.append("<ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in self.notes) + "</ul>")
        parts.append("</div>")
        return "".join(parts)


def _recorded_shapes(count: int, tensor_meta: Callable[[int], Any]) -> list[tuple[int, ...] | None]:
    """``MethodMeta``'s sizes for values ``0 … count-1`` (None for a non-tensor value, a baked-in Python scalar)."""
    shapes: list[tuple[int, ...] | None] = []
    with captured_output():  # the runtime logs each non-tensor value it is asked about
        for i in range(count):
            try:
                shapes.append(tuple(tensor_meta(i).sizes()))
            except Exception:  # noqa: BLE001 - a non-tensor value
                shapes.append(None)
    return shapes
