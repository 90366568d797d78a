"""Nothing on a lesson's page answers a question before the learner is asked it.

A model's docstring on the page says what the model *does*; what export, lowering or the runtime will do to it is
what the questions ask, so it is explained after the reveal, never above the question. This reads every lesson as a
learner sees it (the stored notebook): the class docstrings it shows before each question, whether shown with
``show_source`` (the stored output) or defined in a cell, must not speak of export, lowering, delegation or the
runtime. And no sentence of the page's prose or of those docstrings states a question's right option (its words or
its number) about the question's subject, nor does the prose just above the question. (That no stored output reveals
a prediction or a solution is tests/test_notebooks_hold_questions.py.)"""

from __future__ import annotations

import ast
import json
import re
import textwrap
from pathlib import Path

import pytest
from test_questions import EXPECTED

from helpers import questions

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


# How a page gives a right option away: its words, a synonym, or its number. An option not listed here gives itself
# away by its own words.
GIVEAWAY = {
    "match": r"\bmatch(es|ed)?\b|\bthe same (answer|result|output)|\bidentical|\bagree",
    "diverge": r"\bdiverg|\bdiffer|\bwrong|\bsilently|\bnot what",
    "rejected": r"\breject|\brefus", "rejects it": r"\breject|\brefus",
    "refuses it": r"\breject|\brefus|\bdo(es)? not fit",
    "runs it": r"\bruns? (it|them)\b|\baccept|\bunnoticed",
    "pass": r"\bpass", "fail": r"\bfail|\bships?\b",
    "ok": r"\bno error|\bexports? (fine|cleanly|without)|\bok\b",
    "0": r"\b(0|zero|none|no)\b", "1": r"\b(1|one|a single)\b", "2": r"\b(2|two|both)\b", "6": r"\b(6|six|all)\b",
    "all": r"\ball\b|\bevery\b|\b100 ?%", "all of it": r"\ball of it\b|\bevery node|\b100 ?%|\bentirely",
    "false": r"\bfalse\b", "load": r"\bload",
    "only the add": r"\bonly the add|\bthe add (is|was) recorded|\bno branch",
    "a static batch, silently": r"\bstatic\b.*\b(without an? (error|word)|silent)|\bsilent\b.*\bstatic",
    "all but one operator": r"\ball but one|\bone operator|\ba single operator|\bone node",
    "only the arena": r"\bonly the arena|\barena\b.*\b(grows|changes|larger)",
    "seq_512": r"\bseq_512|\b512\b", "a few KB": r"\bfew (KB|kilobytes)|\bshare the weights",
    "about three quarters": r"\bthree quarters|\b7\d ?%",
    "torch.where": r"\btorch\.where\b.*\bfaster|\bfaster\b.*torch\.where",
    "input outside the export contract": r"\boutside the (export )?contract",
}
# What a question is about: the models and APIs its prompt names, or, for a prompt that names none, these words.
SUBJECT = re.compile(r"\b[A-Z][a-z]+[A-Z]\w*\b|\bDim\.AUTO\b|\btorch\._check\b")
SUBJECT_WORDS = {"08.raise_max": r"\bmax\b", "09.pad_to_512": r"\bpad", "09.bucket_257": r"\b257\b",
                 "09.fourth_bucket": r"\bfourth|\bnew method"}


def giveaway(option: str) -> re.Pattern[str]:
    return re.compile(GIVEAWAY.get(option, re.escape(option)), re.IGNORECASE)


def _subject(question: questions.Question) -> re.Pattern[str] | None:
    if question.id in SUBJECT_WORDS:
        return re.compile(SUBJECT_WORDS[question.id], re.IGNORECASE)
    names = sorted(set(SUBJECT.findall(question.prompt)))
    return re.compile("|".join(re.escape(n) for n in names)) if names else None


def _sentences(text: str) -> list[str]:
    return [" ".join(s.split()) for s in re.split(r"(?<=[.!?:;])\s+|\n\s*[-*|]\s+|\n\n", text) if s.strip()]


def _quotes_the_prompt(sentence: str, match: re.Match[str], prompt: str) -> bool:
    """The match is part of a phrase the prompt itself says ("a 6-layer MLP" above "how many layers run?")."""
    around = re.search(r"\S*" + re.escape(match.group(0)) + r"\S*(\s+\S+)?", sentence[max(0, match.start() - 20):])
    return around is not None and around.group(0).lower().strip("`*.,:;") in prompt.lower()


def _states(sentence: str, question: questions.Question) -> str | None:
    """The words of ``sentence`` that state the question's right option, unless it lists several options."""
    if sum(bool(giveaway(option).search(sentence)) for option in question.options) > 1:
        return None  # "a match, a divergence, or a rejection?" offers the options, it does not pick one
    for match in giveaway(EXPECTED[question.id]).finditer(sentence):
        if not _quotes_the_prompt(sentence, match, question.prompt):
            return match.group(0)
    return None


def prose_leaks(path: Path) -> list[str]:
    """Sentences before a question that state its right option: anywhere above it about the question's subject
    (markdown or a docstring shown), or in the prose just above it (the markdown after the last code cell)."""
    page: list[str] = []
    lead: list[str] = []
    found = []
    for cell in json.loads(path.read_text())["cells"]:
        source = _text(cell["source"])
        if cell["cell_type"] == "markdown":
            lead += _sentences(source)
            continue
        for question_id in ASKS.findall(source):
            question = questions.get(question_id)
            subject = _subject(question)
            about = [s for s in page if subject is not None and subject.search(s)]
            for sentence in dict.fromkeys(about + lead):
                words = _states(sentence, question)
                if words:
                    found.append(f"{question_id} (right: {EXPECTED[question_id]!r}) {words!r} in: {sentence[:200]}")
        page += lead + [s for _name, doc in _shown_docstrings(cell) for s in _sentences(doc)]
        lead = []
    return found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_prose_above_a_question_states_its_answer(path):
    found = prose_leaks(path)
    assert not found, "\n".join(found)


def test_the_check_sees_prose_that_answers(tmp_path):
    """Sentences the lessons held before they were fixed (02, 07 and 11 at 46ab81a), and two that do not answer."""
    def markdown(text):
        return {"cell_type": "markdown", "source": text}

    def ask(question_id):
        return {"cell_type": "code", "source": f'questions.ask("{question_id}")', "outputs": []}

    page = {"cells": [
        markdown("When is `torch._check` the wrong fix? `ScaleOrShiftChecked` silences the error."), ask("02.check_promise"),
        markdown("`Dim.AUTO` can also come out **static without an error**."),
        markdown("`BatchLoop` loops over `range(x.shape[0])`."), {"cell_type": "code", "source": "x = 1", "outputs": []},
        markdown("**Predict** what export does with `Dim.AUTO` on its batch:"), ask("07.auto_loop"),
        markdown("## What a passing doctor does not prove"), ask("11.config_branch"),
        markdown("Is the device's answer a match, a divergence, or a rejection?"), ask("01.counted_four"),
        markdown("`HeavyWhere` chooses between a 6-layer MLP and a cheap `x * 0.5`."), ask("04.heavy_count"),
    ]}
    path = tmp_path / "99_x.ipynb"
    path.write_text(json.dumps(page))
    found = prose_leaks(path)
    assert [f.split(" ", 1)[0] for f in found] == ["02.check_promise", "07.auto_loop", "11.config_branch"], found
