"""Nothing on a lesson's page answers a question before the learner is asked it.

A model's docstring on the page says what the model *does*; what export, lowering or the runtime will do to it is
what the questions ask, so it is explained after the reveal, never above the question. This reads every lesson as a
learner sees it (the stored notebook): the class docstrings it shows before each question, whether shown with
``show_source`` (the stored output) or defined in a cell, must not speak of export, lowering, delegation or the
runtime. (That no stored output reveals a prediction or a solution is tests/test_notebooks_hold_questions.py.)"""

from __future__ import annotations

import ast
import json
import re
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))

# What the pipeline does to a model: the subject of the questions. A model's docstring must not say it.
PIPELINE_WORDS = re.compile(
    r"\bexport|\blower(s|ed|ing)?\b|\bruntime|xnnpack|delegat|partition|\bkernel|unroll|speciali[sz]|\.pte\b|"
    r"\bbake[sd]?\b|\brecord(s|ed)?\b|\btrac(e|es|ed|ing)\b|\bguard|\bportable\b|\bthe graph\b|always computed|"
    r"straight-line", re.IGNORECASE)
ASKS = re.compile(r"questions\.(?:ask|reveal)\(\"([0-9]{2}\.\w+)\"")
HEADER = re.compile(r"^── (.+) ──$", re.MULTILINE)


def _text(value: str | list[str]) -> str:
    return value if isinstance(value, str) else "".join(value)


def _class_docstrings(code: str) -> list[tuple[str, str]]:
    """``(class name, docstring)`` of every class in ``code`` (code that does not parse gives none)."""
    try:
        tree = ast.parse(textwrap.dedent(code))
    except SyntaxError:
        return []
    return [(node.name, ast.get_docstring(node) or "") for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]


def _shown_docstrings(cell: dict) -> list[tuple[str, str]]:
    """Class docstrings a code cell puts in front of the learner: classes it defines, and what it shows."""
    found = _class_docstrings(_text(cell["source"]))
    for output in cell.get("outputs", []):
        shown = _text(output.get("data", {}).get("text/plain", ""))
        if HEADER.search(shown):  # helpers.display.show_source: "── Name ──" above each object's source
            for chunk in HEADER.split(shown)[2::2]:
                found += _class_docstrings(chunk)
    return found


def docstrings_before_questions(path: Path) -> dict[str, list[tuple[str, str]]]:
    """``{question id: [(class, docstring) shown on the page before the question is asked]}``."""
    shown: list[tuple[str, str]] = []
    before: dict[str, list[tuple[str, str]]] = {}
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] != "code":
            continue
        for question in ASKS.findall(_text(cell["source"])):
            before.setdefault(question, list(shown))
        shown += _shown_docstrings(cell)
    return before


def leaks(path: Path) -> list[str]:
    """Every class docstring shown before a question that speaks of what the pipeline does."""
    found = []
    for question, shown in docstrings_before_questions(path).items():
        for name, doc in shown:
            match = PIPELINE_WORDS.search(doc)
            if match:
                found.append(f"{question}: {name}'s docstring says {match.group(0)!r}: {' '.join(doc.split())[:160]}")
    return sorted(set(found))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_docstring_above_a_question_says_what_the_pipeline_does(path):
    found = leaks(path)
    assert not found, "\n".join(found)


def test_the_check_sees_a_docstring_that_answers(tmp_path):
    answered = {"cells": [
        {"cell_type": "code", "source": "show_source(models.Flag)", "outputs": [{"data": {"text/plain": (
            "── Flag ──\nclass Flag(nn.Module):\n    \"\"\"Export records only the branch the flag took.\"\"\"\n")}}]},
        {"cell_type": "code", "source": "class Loop(nn.Module):\n    \"\"\"The loop is unrolled.\"\"\"\n", "outputs": []},
        {"cell_type": "code", "source": 'questions.ask("01.flag")', "outputs": []},
        {"cell_type": "code", "source": "class Later(nn.Module):\n    \"\"\"Export bakes it in.\"\"\"\n", "outputs": []},
    ]}
    path = tmp_path / "01_x.ipynb"
    path.write_text(json.dumps(answered))
    found = leaks(path)
    assert len(found) == 2 and "Flag" in found[0] and "Loop" in found[1], found  # Later is shown after the question
