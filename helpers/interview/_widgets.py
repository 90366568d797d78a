"""A lesson's interview question: answer it yourself first, then reveal the model answer."""

from __future__ import annotations

import html
from typing import Any


class InterviewQuestion:
    """The question, a box for your own answer, and a button that reveals the model answer and rubric."""

    def __init__(self, card: Any):
        import ipywidgets as w

        from . import _render_answer

        self.card = card
        self._render = _render_answer
        self.text = w.Textarea(placeholder="Your answer, as you would say it (about 30 seconds)…",
                               layout=w.Layout(width="100%", height="6em"))
        self.button = w.Button(description="Show model answer", icon="eye", layout=w.Layout(width="auto"))
        self.output = w.HTML("")
        self.output.add_class("exportlab-interview")
        self.button.on_click(lambda _b: self.reveal())
        self.widget = w.VBox([w.HTML(f"<b>Interview question:</b> {html.escape(card.question)}"), self.text,
                              self.button, self.output])
        self.shown = False

    def reveal(self) -> str:
        self.output.value = self._render(self.card)
        self.shown = True
        return self.card.answer

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle = self.widget._repr_mimebundle_(**kwargs)
        bundle["text/plain"] = (f"Interview question: {self.card.question}\n"
                                "(answer it yourself, then press “Show model answer”)")
        return bundle
