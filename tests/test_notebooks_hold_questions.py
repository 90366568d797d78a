"""A saved notebook holds questions, not answers (every lesson, as stored in the repository).

Before the learner acts, nothing may show a judged prediction, an exercise's solution or an interview's
model answer: those appear only after a click or a deliberate call. Code predictions start empty.
"""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

import pytest

from helpers import exercises, interview

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
SOURCES = sorted((ROOT / "notebooks" / "src").glob("*.py"))
REVEALED = re.compile(r"✓ right|✗ you predicted|✗ not quite|you predicted|the tools say:|data-solution='shown'|"
                      r"exportlab-model-answer")


def _given(exercise) -> str:
    """What the exercise shows the learner anyway: its starter, and the source of the models it gives."""
    shown = [exercise.starter_source]
    for value in exercise.context().values():
        if (inspect.isclass(value) or inspect.isfunction(value)) and value.__module__.startswith("helpers"):
            shown.append(inspect.getsource(value))
    return "\n".join(shown)


def _solution_lines() -> dict[str, list[str]]:
    """Per exercise, the lines only its solution contains (not headers, comments, imports, seeds, nor code the
    exercise itself shows, such as a branch of the reference model the solution reuses)."""
    out = {}
    for e in exercises.catalog():
        given = _given(e)
        lines = [line.strip() for line in e.solution_source.splitlines()]
        out[e.id] = [line for line in lines if len(line) > 30 and line not in given and "manual_seed" not in line
                     and not line.startswith(("#", '"""', "answer", "class ", "def ", "import ", "from "))]
    return out


def _most_of(found: list[str], lines: list[str]) -> bool:
    """Half or more of a solution's own lines: the solution is there (one line that coincides with code the
    course shows elsewhere, e.g. an API call lesson 06 teaches, is not)."""
    return bool(found) and 2 * len(found) >= len(lines)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_stored_outputs_reveal_nothing(path):
    nb = json.loads(path.read_text())
    text = json.dumps([c.get("outputs", []) for c in nb["cells"]], ensure_ascii=False)
    found = REVEALED.search(text)
    assert not found, f"{path.stem}: a stored output reveals an answer: {text[max(0, found.start() - 80):found.end()]}"
    for card in interview.cards():
        assert json.dumps(card.answer[:100])[1:-1] not in text, f"{path.stem}: {card.id}'s model answer is stored"
    for exercise_id, lines in _solution_lines().items():
        found = [line for line in lines if json.dumps(line)[1:-1] in text]
        assert not _most_of(found, lines), f"{path.stem}: {exercise_id}'s solution is in its outputs: {found}"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.stem)
def test_sources_ask_before_they_answer(path):
    source = path.read_text()
    assert ".answer(" not in source, f"{path.stem}: a notebook answers its own quiz"
    assert "check_prediction" not in source and "PredictThenReveal(" not in source, path.stem
    for value in re.findall(r"^my_prediction\s*=\s*([^#\n]+)", source, flags=re.MULTILINE):
        assert value.strip() == "None", f"{path.stem}: a prediction ships filled in: {value}"
    answers = re.search(r"^my_answers = \{(.*?)^\}", source, flags=re.MULTILINE | re.DOTALL)
    if answers:
        values = re.findall(r":\s*([^,#\n]+),", answers.group(1))
        assert values and all(v.strip() == "None" for v in values), f"{path.stem}: drill answers ship filled in"
    for exercise_id, lines in _solution_lines().items():
        found = [line for line in lines if line in source]
        assert not _most_of(found, lines), f"{path.stem}: {exercise_id}'s solution is in the lesson: {found}"
