"""The solution, one click away and never in a saved notebook (widget state is not stored)."""

from __future__ import annotations

import html
from typing import Any

from .grading import Exercise


class SolutionButton:
    """A *Show solution* button: the first click shows the library's solution source for the exercise."""

    def __init__(self, exercise: Exercise):
        import ipywidgets as w

        self.exercise = exercise
        self.button = w.Button(description="Show solution", icon="eye", tooltip="reveals one way to pass the check",
                               layout=w.Layout(width="auto"))
        self.output = w.HTML("")
        self.output.add_class("exportlab-solution")
        self.button.on_click(lambda _b: self.reveal())
        self.widget = w.VBox([self.button, self.output])
        self.shown = False

    def reveal(self) -> str:
        """Show the solution (what a click does); returns its source."""
        source = self.exercise.solution_source
        self.output.value = (
            "<div data-solution='shown'><b>One solution</b> (load it with "
            f"<code>answer = exercises.solution({self.exercise.id!r})</code>):"
            f"<pre style='font-size:90%'>{html.escape(source)}</pre></div>")
        self.shown = True
        return source

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle = self.widget._repr_mimebundle_(**kwargs)
        bundle["text/plain"] = f"(solution to {self.exercise.id} hidden: press “Show solution”)"
        return bundle
