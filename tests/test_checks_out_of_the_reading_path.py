"""CI's checks are not for the learner: they stay in the lessons, out of the reading path.

A lesson's own claims are asserted in one section at its end, "Checked for CI", whose heading JupyterLab shows
collapsed and whose code cells are tagged ``ci-check`` with their source hidden. Nowhere else does a lesson's
cell assert at top level or switch progress lines; nbval's markers are cell tags, not comments in the code."""

from __future__ import annotations

import ast
import json
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
HEADING = "## Checked for CI: "


def _source(cell: dict) -> str:
    return cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])


def _ci_statements(code: str) -> list[str]:
    """Top-level asserts and progress switches in a cell (an assert inside a model's method is the model's)."""
    try:
        tree = ast.parse(textwrap.dedent(code))
    except SyntaxError:
        return []
    found = []
    for node in tree.body:
        if isinstance(node, ast.Assert):
            found.append(ast.unparse(node)[:80])
        elif "set_progress(" in ast.unparse(node):
            found.append(ast.unparse(node)[:80])
    return found


def problems(path: Path) -> list[str]:
    cells = json.loads(path.read_text())["cells"]
    found = [f"cell {i}: an nbval comment marker (use the cell tag)" for i, c in enumerate(cells)
             if "NBVAL_" in _source(c)]
    starts = [i for i, c in enumerate(cells) if c["cell_type"] == "markdown" and _source(c).startswith(HEADING)]
    end = starts[0] if starts else len(cells)
    found += [f"cell {i}, in the reading path: {s}" for i, c in enumerate(cells[:end]) if c["cell_type"] == "code"
              for s in _ci_statements(_source(c))]
    if not starts:
        return found
    if len(starts) > 1:
        found.append(f"{len(starts)} '{HEADING}' sections; a lesson has one, at its end")
    if cells[end].get("metadata", {}).get("jp-MarkdownHeadingCollapsed") is not True:
        found.append(f"cell {end}: the '{HEADING}' heading is not collapsed")
    for i, cell in enumerate(cells[end + 1:], end + 1):
        if cell["cell_type"] != "code":
            found.append(f"cell {i}: prose after the CI checks (they end the lesson)")
            continue
        metadata = cell.get("metadata", {})
        if "ci-check" not in metadata.get("tags", []) or not metadata.get("jupyter", {}).get("source_hidden"):
            found.append(f"cell {i}: a CI check that is not tagged ci-check with its source hidden")
    return found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_ci_checks_are_out_of_the_reading_path(path):
    assert not problems(path), "\n".join(problems(path))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_lesson_that_asks_predictions_checks_its_claims(path):
    cells = json.loads(path.read_text())["cells"]
    if not any("questions.ask(" in _source(c) or "questions.reveal(" in _source(c) for c in cells):
        return  # the mock interview asks no prediction and states no measured claim of its own
    checks = [c for c in cells if "ci-check" in c.get("metadata", {}).get("tags", [])]
    assert checks and any(_ci_statements(_source(c)) for c in checks), path.stem


def test_the_check_sees_a_check_in_the_reading_path(tmp_path):
    def code(source, **metadata):
        return {"cell_type": "code", "source": source, "metadata": metadata, "outputs": []}

    page = {"cells": [
        code("# NBVAL_IGNORE_OUTPUT\nprint(1)"),
        code("helpers.set_progress(False)\nx = 1"),
        code("class M:\n    def forward(self, x):\n        assert x.ndim == 2\n        return x"),  # the model's
        {"cell_type": "markdown", "source": HEADING + "claims", "metadata": {}},
        code("assert x == 1"),
    ]}
    path = tmp_path / "99_x.ipynb"
    path.write_text(json.dumps(page))
    assert problems(path) == [
        "cell 0: an nbval comment marker (use the cell tag)",
        "cell 1, in the reading path: helpers.set_progress(False)",
        "cell 3: the '## Checked for CI: ' heading is not collapsed",
        "cell 4: a CI check that is not tagged ci-check with its source hidden",
    ]
