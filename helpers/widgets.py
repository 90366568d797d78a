"""Widgets that put the real ``.pte`` next to eager PyTorch while the learner changes the input.

The artifact is lowered *before* the widget is built (and cached), so an interaction costs one
eager forward, one host-side contract check and one run in the ExecuTorch runtime: a few
milliseconds. Observers only set the ``value`` of an ``HTML`` widget (never print), which keeps
notebook outputs stable under nbval and works the same in JupyterLab.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

import torch

from .artifact import PteArtifact
from .display import fmt
from .parity import ParityRow, check_one, format_diff

__all__ = ["ParityExplorer", "PredictThenReveal", "render_row", "VERDICT_COLOURS"]

VERDICT_COLOURS = {"match": "#2e7d32", "diverge": "#c62828", "rejected": "#ef6c00", "refused": "#8e5a00",
                   "eager error": "#616161"}


def render_row(row: ParityRow, explanation: str = "") -> str:
    """HTML for one verdict: the badge (with a ``data-verdict`` attribute), outputs and messages."""
    colour = VERDICT_COLOURS.get(row.status if row.within_contract else "rejected", "#6a1b9a")
    if not row.within_contract and row.status in ("match", "diverge"):
        colour = "#6a1b9a"
    parts = [f"<div class='exportlab-row'><span class='exportlab-verdict' data-verdict='{html.escape(row.verdict)}' "
             f"style='background:{colour};color:white;padding:2px 8px;border-radius:4px;font-weight:bold'>"
             f"{html.escape(row.verdict)}</span> <code>{html.escape(row.shapes)}</code>"]
    rows = []
    def outputs(values: tuple) -> str:
        return fmt(values[0]) if len(values) == 1 else fmt(values)

    if row.eager_output is not None:
        rows.append(("eager", outputs(row.eager_output)))
    if row.pte_output is not None:
        rows.append((".pte", outputs(row.pte_output)))
    if row.status == "diverge":
        rows.append(("max |Δ|", format_diff(row.max_abs_diff) if row.max_abs_diff is not None else row.runtime_message))
    if row.status == "rejected":
        rows.append(("runtime says", row.runtime_message))
    if row.status == "refused":
        rows.append(("refused on the host", row.runtime_message))
    if row.status == "eager_error":
        rows.append(("eager says", row.eager_message))
    if not row.within_contract:
        rows.append(("contract", row.contract_message))
    if explanation:
        rows.append(("why", explanation))
    parts.append("<table style='margin-top:4px'>" + "".join(
        f"<tr><th style='text-align:left;vertical-align:top;padding-right:8px'>{html.escape(k)}</th>"
        f"<td style='text-align:left;font-family:monospace;white-space:pre-wrap'>{html.escape(v)}</td></tr>"
        for k, v in rows) + "</table></div>")
    return "".join(parts)


class ParityExplorer:
    """Controls → input → eager vs the real ``.pte`` → a live verdict.

    ``make_args(**values)`` turns the current control values into the model's positional
    arguments. ``explain(row, **values)`` may return a sentence shown under the verdict.
    ``model_for(**values)`` may return a different eager model per setting (e.g. a config flag
    flipped in the app while the ``.pte`` stays as exported). Use :meth:`set` from code or tests.
    """

    def __init__(self, model: torch.nn.Module, artifact: PteArtifact, make_args: Callable[..., Any],
                 controls: dict[str, Any], *, method: str = "forward", title: str = "",
                 explain: Callable[..., str] | None = None, model_for: Callable[..., torch.nn.Module] | None = None):
        import ipywidgets as w

        self.model = model
        self.artifact = artifact
        self.make_args = make_args
        self.controls = controls
        self.method = method
        self.explain = explain
        self.model_for = model_for
        self.output = w.HTML()
        self.output.add_class("exportlab-output")
        header = [w.HTML(f"<b>{html.escape(title)}</b>")] if title else []
        self.widget = w.VBox(header + [w.HBox(list(controls.values())), self.output])
        self.widget.add_class("exportlab-explorer")
        self.row: ParityRow | None = None
        self.refreshes = 0
        self._holding = False
        for control in controls.values():
            control.observe(self._on_change, names="value")
        self.refresh()

    def values(self) -> dict[str, Any]:
        return {name: control.value for name, control in self.controls.items()}

    def _on_change(self, _change: dict[str, Any]) -> None:
        if not self._holding:  # set() refreshes once after changing several controls
            self.refresh()

    def refresh(self) -> ParityRow:
        """Recompute the verdict for the current control values."""
        values = self.values()
        args = self.make_args(**values)
        if not isinstance(args, tuple):
            args = (args,)
        model = self.model_for(**values) if self.model_for else self.model
        self.row = check_one(model, self.artifact, args, method=self.method)
        explanation = self.explain(self.row, **values) if self.explain else ""
        self.show(render_row(self.row, explanation))
        return self.row

    def show(self, body: str) -> None:
        """Put ``body`` (HTML) in the output; every call changes the page, even with the same verdict."""
        self.refreshes += 1
        self.output.value = f"<div data-refresh='{self.refreshes}'>{body}</div>"

    def set(self, **values: Any) -> ParityRow:
        """Set controls (as a learner would) and return the resulting verdict."""
        unknown = set(values) - set(self.controls)
        if unknown:
            raise KeyError(f"no control named {sorted(unknown)}; controls are {sorted(self.controls)}")
        self._holding = True
        try:
            for name, value in values.items():
                self.controls[name].value = value
        finally:
            self._holding = False
        return self.refresh()

    @property
    def verdict(self) -> str:
        return self.row.verdict if self.row else ""

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle = self.widget._repr_mimebundle_(**kwargs)
        bundle["text/plain"] = f"ParityExplorer — verdict now: {self.verdict}"
        return bundle


def _yours_first(explanation: str, picked: Any) -> list[str]:
    """The explanation's lines as HTML, the reason against the learner's own wrong pick ("Not '<pick>': …") moved
    right under why, in bold: the first thing a wrong prediction reads is why it was wrong."""
    lines = [html.escape(line) for line in explanation.split("\n")]
    mine = html.escape(f"Not {picked!r}:") if picked is not None else None
    for i, line in enumerate(lines[1:], 1):
        if mine is not None and line.startswith(mine):
            return [lines[0], f"<b class='exportlab-your-pick'>{line}</b>", *lines[1:i], *lines[i + 1:]]
    return lines


class PredictThenReveal:
    """Ask first, then show what the real runtime says.

    The learner picks an answer from ``options``; pressing *Reveal* calls ``reveal()`` (which
    runs the real thing and returns ``(actual, explanation)``) and shows whether the prediction
    was right. From code: ``.answer(choice)`` does the same and returns True/False.
    """

    def __init__(self, question: str, options: list[str], reveal: Callable[[], tuple[str, str]]):
        import ipywidgets as w

        self.reveal_fn = reveal
        self.choice = w.ToggleButtons(options=list(options), value=None, description="",
                                     style={"button_width": "auto"})  # whole option texts, not cut
        self.button = w.Button(description="Reveal", button_style="primary")
        self.result = w.HTML("<i>make a prediction, then reveal</i>")
        self.result.add_class("exportlab-reveal")
        self.button.on_click(lambda _b: self._show())
        # The kernel acknowledges every prediction in the result: the browser sends a click on Reveal
        # at once but may hold back a toggle's new value for a moment, so a learner (and the browser
        # test) can see which prediction Reveal will judge. A new prediction hides the last answer.
        self.choice.observe(lambda _change: self._acknowledge(), names="value")
        self.widget = w.VBox([w.HTML(f"<b>Predict:</b> {html.escape(question)}"), self.choice, self.button,
                              self.result])
        self.correct: bool | None = None
        self.actual: str | None = None
        self.renders = 0

    def _render(self, body: str) -> None:
        self.renders += 1  # every render changes the DOM, even when the same text is shown again
        picked = "" if self.choice.value is None else html.escape(str(self.choice.value))
        self.result.value = f"<span data-refresh='{self.renders}' data-prediction='{picked}'>{body}</span>"

    def _acknowledge(self) -> None:
        if self.choice.value is not None:
            self._render(f"<i>your prediction: {html.escape(str(self.choice.value))} — now press Reveal</i>")

    def _show(self) -> None:
        actual, explanation = self.reveal_fn()
        self.actual = actual
        picked = self.choice.value
        if picked is None:
            self.correct = None
            verdict = "no prediction made"
        else:
            self.correct = picked == actual
            verdict = "✓ right" if self.correct else f"✗ you predicted {html.escape(str(picked))}"
        self._render(f"<span class='exportlab-verdict' data-verdict='{html.escape(actual)}'>"
                     f"<b>{html.escape(actual)}</b></span> — {verdict}<br>"
                     + "<br>".join(_yours_first(explanation, picked)))

    def answer(self, choice: str) -> bool:
        """Record ``choice`` and reveal; returns whether it was right."""
        self.choice.value = choice
        self._show()
        return bool(self.correct)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle = self.widget._repr_mimebundle_(**kwargs)
        bundle["text/plain"] = "PredictThenReveal — make a prediction, then press Reveal"
        return bundle
