"""A learner in the browser: open a widget lesson in JupyterLab (headless Chromium), run it, use it.

:func:`use_lesson_like_a_learner` is the body of the browser tests (``test_lessons_in_browser_*_third.py``,
every third lesson of :func:`browser_lessons` in each, so that `make test`'s three workers each take one third). For a notebook that displays
widgets: Run All, then move sliders, click toggle buttons, pick dropdown values, tick boxes and
press Reveal, and check that the verdict rendered in the page changes to what the real runtime
says. Fails on "Error displaying widget", on widget-manager console errors and on tracebacks.
Saves a screenshot per lesson under test-output/screenshots/ and records the reaction time of
every interaction (summarised at the end of the run).
"""

from __future__ import annotations

import importlib
import json
import os
import re
import threading
import urllib.request

from .conftest import OUTPUT, record_first_verdict, record_latencies
from .lab import ROOT, LessonPage

# A parity verdict (ParityExplorer) or the export doctor's (DoctorExplorer in lesson 11).
VERDICTS = re.compile(r"^(match|diverge|rejected|refused|eager error|outside contract \((match|diverge)\)|pass|fail)$")
# What a page must not show before the learner acts: a judged prediction, a solution, a model answer.
REVEALED_TEXT = re.compile(r"✓ right|✗ you predicted|✗ not quite|you predicted")
REVEALED_ELEMENTS = "[data-solution='shown'], .exportlab-model-answer, .exportlab-reveal .exportlab-verdict"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
# Widget interactions timed per lesson: 8 under `make test` (the suite's time budget), 14 for the benchmark
# (benchmarks/bench_browser.py sets EXPORTLAB_BROWSER_INTERACTIONS), whose figures the README quotes.
INTERACTIONS_PER_LESSON = int(os.environ.get("EXPORTLAB_BROWSER_INTERACTIONS", "8"))


# The widgets every lesson shares: a prediction, an exercise's check, an interview card (the same code everywhere).
GENERIC_WIDGET_CELL = re.compile(r"\b(questions\.ask|interview\.ask|exercises\.check)\(")


def _widget_cells(name: str) -> list[str]:
    """The sources of the cells of lesson ``name`` whose stored outputs include a widget."""
    nb = json.loads((ROOT / "notebooks" / name).read_text())
    return ["".join(cell["source"]) for cell in nb["cells"]
            if any(WIDGET_MIME in out.get("data", {}) for out in cell.get("outputs", []))]


def widget_notebooks() -> list[str]:
    """The lessons whose stored outputs include a widget, in lesson order."""
    return [path.name for path in sorted((ROOT / "notebooks").glob("*.ipynb")) if _widget_cells(path.name)]


def generic_only(name: str) -> bool:
    """Every widget lesson ``name`` shows is a generic one (a prediction, an exercise's check, a card)."""
    return all(GENERIC_WIDGET_CELL.search(source) for source in _widget_cells(name))


def browser_lessons() -> list[str]:
    """The lessons `make test` uses in the browser: every one with a widget of its own (an explorer, the doctor,
    the mock interview), and the newest of those whose widgets are all generic. The generic widgets are the same
    code in every lesson; every lesson's predictions and cards render together on one page
    (``test_every_prediction_and_card_renders_on_one_page``), and every exercise's solution is checked against the
    names its lesson defines (``tests/test_exercise_namespaces.py``). The benchmark sets
    ``EXPORTLAB_BROWSER_ALL_LESSONS=1`` to use every widget lesson."""
    every = widget_notebooks()
    if os.environ.get("EXPORTLAB_BROWSER_ALL_LESSONS") == "1":
        return every
    generic = [name for name in every if generic_only(name)]
    return [name for name in every if name not in generic or name == generic[-1]]


def shutdown_kernels(server, wait: bool = True) -> None:
    """Shut down the kernels of the sessions open now. ``wait=False``: in a background thread (the server waits
    for each kernel process to exit, 1.5-2 s, while the next lesson opens); the sessions are listed first, so a
    session opened later is never shut down by it."""
    headers = {"Authorization": f"token {server.token}"}
    with urllib.request.urlopen(urllib.request.Request(f"{server.url}/api/sessions", headers=headers)) as r:
        sessions = json.load(r)

    def delete() -> None:
        for s in sessions:
            try:
                urllib.request.urlopen(urllib.request.Request(f"{server.url}/api/sessions/{s['id']}",
                                                              headers=headers, method="DELETE"))
            except OSError:  # the server stopped first (the end of the test session): nothing left to shut down
                if wait:
                    raise

    if wait:
        delete()
    else:
        threading.Thread(target=delete, name="shutdown-kernels", daemon=True).start()


def close_lesson(lesson: LessonPage | None, page, server) -> None:
    """Close the lesson's tab (or, if it never opened or will not close, the page: the next test must not inherit
    it), and shut its kernel down in the background."""
    try:
        if lesson is None:
            raise RuntimeError("the lesson did not open")
        lesson.close()
    except Exception:  # noqa: BLE001 - whatever went wrong, the next lesson must not inherit this page
        page.close()
    shutdown_kernels(server, wait=False)


def assert_nothing_revealed(lesson: LessonPage, name: str) -> None:
    """Before the learner acts, the page holds questions, not answers."""
    texts = lesson.panel.locator(".jp-OutputArea-output").all_inner_texts()
    shown = [t for t in texts if REVEALED_TEXT.search(t)]
    assert not shown, f"{name}: an answer is visible before the learner acted: {shown[0][:300]}"
    assert lesson.panel.locator(REVEALED_ELEMENTS).count() == 0, f"{name}: a solution or model answer is shown"


def _wrong_answers() -> dict:
    return importlib.import_module("test_exercises_lessons").WRONG


def practise_exercises(lesson: LessonPage, name: str) -> int:
    """For each exercise: type the solution into the starter cell, run it and the check (pass: the solution works
    in the lesson's own kernel, with the names the lesson defined), then press Show solution. The lesson's first
    exercise gets a plausible wrong answer first (fail: the check's feedback renders). Every wrong answer of every
    exercise is graded by tests/test_exercises_lessons.py.
    Returns how many exercises were done."""
    from helpers import exercises

    wrong = _wrong_answers()
    starters = lesson.starter_cells()
    for position, (index, exercise_id) in enumerate(starters):
        exercise = exercises.get(exercise_id)
        marker = f"{exercise.marker} — edit this cell, then run the check below.\n"
        if position == 0:
            text = lesson.type_and_check(index, marker + wrong[exercise_id][0].code.strip() + "\n")
            assert "✗ not yet" in text and "✓ passed" not in text, \
                f"{name}/{exercise_id}: a wrong answer passed: {text}"
        text = lesson.type_and_check(index, marker + exercise.solution_source)
        assert "✓ passed" in text, f"{name}/{exercise_id}: the solution did not pass in the browser: {text}"
        check = lesson.panel.locator(".jp-Notebook .jp-Cell").nth(index + 1)
        check.locator("button", has_text="Show solution").click()
        check.locator("[data-solution='shown']").wait_for(timeout=30_000)
    return len(starters)


def verdict_of(scope) -> str:
    return scope.locator(".exportlab-verdict").first.get_attribute("data-verdict")


# ----- one learner action per control type ---------------------------------------------------------
def slider_action(lesson: LessonPage, handle):
    now = float(handle.get_attribute("aria-valuenow"))
    top = float(handle.get_attribute("aria-valuemax"))
    key = "ArrowLeft" if now >= top else "ArrowRight"

    def act():
        handle.evaluate("h => h.focus()")
        lesson.page.keyboard.press(key)
    return act


def toggle_action(group):
    def act():
        group.locator("button:not(.mod-active)").first.click()
    return act


def dropdown_action(select):
    options = select.locator("option").all_inner_texts()
    current = select.evaluate("s => s.selectedIndex")

    def act():
        select.select_option(index=(current + 1) % len(options))
    return act


def checkbox_action(box):
    def act():
        box.click()
    return act


def actions_for(lesson: LessonPage, explorer) -> list:
    found = []
    for handle in explorer.locator(".widget-slider .noUi-handle").all():
        found.append(lambda h=handle: slider_action(lesson, h))
    for group in explorer.locator(".widget-toggle-buttons").all():
        found.append(lambda g=group: toggle_action(g))
    for select in explorer.locator(".widget-dropdown select").all():
        found.append(lambda s=select: dropdown_action(s))
    for box in explorer.locator(".widget-checkbox input[type=checkbox]").all():
        found.append(lambda b=box: checkbox_action(b))
    return found


# ----- the learner's session --------------------------------------------------------------------
def use_lesson_like_a_learner(lab_server, page, name: str) -> None:
    """``page``: the worker's JupyterLab page (the ``lab_page`` fixture); the lesson is closed in it afterwards."""
    lesson = None
    try:
        lesson = LessonPage(page, lab_server, name)
        record_first_verdict("warm", name.removesuffix(".ipynb"), lesson.run_all_timing_first_verdict())
        lesson.run_all(start=False)  # waits for the rest of the lesson
        assert not lesson.cell_errors(), f"{name}: a cell raised in the browser: {lesson.cell_errors()[:1]}"
        assert_nothing_revealed(lesson, name)
        assert not lesson.garbled_progress_lines(), f"{name}: {lesson.garbled_progress_lines()}"
        assert not lesson.cut_button_labels(), f"{name}: labels cut short: {lesson.cut_button_labels()}"
        explorers = lesson.panel.locator(".exportlab-explorer").all()
        reveals = lesson.panel.locator(".exportlab-reveal").all()
        assert explorers or reveals or lesson.starter_cells() or lesson.panel.locator(
            ".exportlab-mock-interview, .exportlab-interview").count(), f"{name}: shows widgets but none of exportlab's"
        for explorer in explorers:
            assert VERDICTS.match(verdict_of(explorer) or ""), f"{name}: no verdict rendered"
        latencies: list[float] = []
        expected = SPECIFIC.get(name)
        if expected:
            latencies += expected(lesson)
        plans = [(e, actions_for(lesson, e)) for e in explorers]
        plans = [(e, a) for e, a in plans if a]
        step = 0
        while plans and len(latencies) < INTERACTIONS_PER_LESSON:
            explorer, actions = plans[step % len(plans)]
            make_action = actions[(step // len(plans)) % len(actions)]
            explorer.scroll_into_view_if_needed()
            output = explorer.locator(".exportlab-output").first
            latencies.append(lesson.interact(output, make_action()))
            assert VERDICTS.match(verdict_of(output) or ""), f"{name}: odd verdict {verdict_of(output)!r}"
            step += 1
        answers: dict[int, str] = {}
        first_reveals: list[float] = []  # a question's first Reveal runs the real pipeline (then it is known)
        step = 0
        while reveals and (step < len(reveals) or len(latencies) < INTERACTIONS_PER_LESSON):
            which = step % len(reveals)
            reveal = reveals[which]
            box = reveal.locator("xpath=..")
            box.scroll_into_view_if_needed()
            options = box.locator(".widget-toggle-buttons button")
            option = options.nth((step // len(reveals)) % options.count())  # predict each option in turn
            picked = option.inner_text().strip()
            option.click()
            # The kernel acknowledges the prediction before Reveal may judge it (the browser can hold a
            # toggle's new value back while it sends a button click at once).
            # a CSS string in double quotes (an option may hold an apostrophe: "the cache's own 16 KB")
            reveal.locator(f"[data-prediction={json.dumps(picked, ensure_ascii=False)}]").wait_for(timeout=30_000)
            took = lesson.interact(reveal, lambda b=box: b.locator("button", has_text="Reveal").click())
            (latencies if which in answers else first_reveals).append(took)
            actual = verdict_of(reveal)
            assert answers.setdefault(which, actual) == actual, f"{name}: the same question revealed two answers"
            text = reveal.inner_text()
            assert ("✓ right" in text) == (picked == actual), f"{name}: picked {picked!r}, actual {actual!r}: {text}"
            assert "✓ right" in text or f"✗ you predicted {picked}" in text
            step += 1
        practise_exercises(lesson, name)
        if name in AFTER_EXERCISES:
            AFTER_EXERCISES[name](lesson)
        assert not lesson.widget_errors(), f"{name}: widget errors: {lesson.widget_errors()[:3]}"
        (explorers or reveals or [lesson.panel])[0].scroll_into_view_if_needed()
        (OUTPUT / "screenshots").mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(OUTPUT / "screenshots" / f"{name.removesuffix('.ipynb')}.png"))
        record_latencies(name.removesuffix(".ipynb"), latencies, first_reveals)
    finally:
        close_lesson(lesson, page, lab_server)


# ----- what specific lessons must show ---------------------------------------------------------------
def start_here(lesson: LessonPage) -> list[float]:
    explorer = lesson.panel.locator(".exportlab-explorer").first
    output = explorer.locator(".exportlab-output")
    handle = explorer.locator(".noUi-handle").first
    assert verdict_of(output) == "match"

    def to_batch_3():
        handle.evaluate("h => h.focus()")
        lesson.page.keyboard.press("ArrowRight")
    took = [lesson.interact(output, to_batch_3)]
    assert verdict_of(output) == "rejected"
    text = output.inner_text()
    assert "Expected shape (2, 4), but received (3, 4)" in text  # the runtime's own words
    assert "static size" in text and "Fix:" in text  # and the helpful explanation

    def back_to_2():
        handle.evaluate("h => h.focus()")
        lesson.page.keyboard.press("ArrowLeft")
    took.append(lesson.interact(output, back_to_2))
    assert verdict_of(output) == "match"
    took.append(lesson.interact(output, lambda: explorer.locator("button", has_text="negative").click()))
    assert verdict_of(output) == "match"
    return took


def camera_picker(lesson: LessonPage) -> list[float]:
    """06: a 16:9 frame is rejected by the runtime (its words and the fix shown); letterboxing on the host fixes it."""
    explorer = lesson.panel.locator(".exportlab-explorer").filter(has_text="camera").first
    output = explorer.locator(".exportlab-output")
    explorer.scroll_into_view_if_needed()
    assert verdict_of(output) == "match"  # the lesson's last cell left it at the export's 64×64
    select = explorer.locator(".widget-dropdown select")
    took = [lesson.interact(output, lambda: select.select_option(label="36×64 (16:9 landscape)"))]
    assert verdict_of(output) == "rejected"
    text = output.inner_text()
    assert "Expected shape (1, 3, 64, 64), but received (1, 3, 36, 64)" in text  # the runtime's own words
    assert "expected 64, got 36" in text and "Fix:" in text  # and which axis, and what to do
    took.append(lesson.interact(output, lambda: explorer.locator("button", has_text="letterbox on host").click()))
    assert verdict_of(output) == "match"
    return took


def bucket_slider(lesson: LessonPage) -> list[float]:
    """09: End drags the length past the largest bucket (rejected, and why); Home brings it back to bucket 128."""
    explorer = lesson.panel.locator(".exportlab-explorer").filter(has=lesson.page.locator(".exportlab-bucket")).first
    output = explorer.locator(".exportlab-output")
    handle = explorer.locator(".noUi-handle").first
    explorer.scroll_into_view_if_needed()

    def bucket() -> str | None:
        return explorer.locator(".exportlab-bucket").get_attribute("data-bucket")

    def press(key: str):
        def act():
            handle.evaluate("h => h.focus()")
            lesson.page.keyboard.press(key)
        return act

    assert verdict_of(output) == "match" and bucket() == "128"  # the lesson leaves it at 100 tokens
    took = [lesson.interact(output, press("End"))]
    assert verdict_of(output) == "rejected" and bucket() == ""
    assert "600 tokens are longer than the largest bucket (512)" in output.inner_text()
    took.append(lesson.interact(output, press("Home")))
    assert verdict_of(output) == "match" and bucket() == "128"
    assert "1 real tokens + 127 padding" in output.inner_text()
    return took


def mock_interview(lesson: LessonPage) -> list[float]:
    """12: answer a question in the box, reveal the model answer, tick a rubric point, move on."""
    box = lesson.panel.locator(".exportlab-mock-interview").first
    box.scroll_into_view_if_needed()
    answer_area = box.locator(".exportlab-interview-answer")
    assert answer_area.inner_text().strip() == "" and box.locator(".exportlab-rubric-point").count() == 0
    box.locator("textarea").fill("Export traces forward() once; decisions on shapes and flags are taken then.")
    took = [lesson.interact(answer_area, lambda: box.locator("button", has_text="Reveal model answer").click())]
    assert box.locator(".exportlab-model-answer").count() == 1
    follow_up = box.locator("details.exportlab-follow-up").first  # the interviewer's next question, answer folded
    assert follow_up.get_attribute("open") is None and follow_up.locator("p").is_hidden()
    follow_up.locator("summary").click()
    follow_up.locator("p").wait_for(state="visible", timeout=10_000)
    score = box.locator(".exportlab-interview-score")
    took.append(lesson.interact(score, lambda: box.locator(".exportlab-rubric-point input").first.click()))
    assert score.locator("[data-covered='1']").count() == 1
    (OUTPUT / "screenshots").mkdir(parents=True, exist_ok=True)
    box.screenshot(path=str(OUTPUT / "screenshots" / "12_mock_interview_question.png"))  # answered, revealed, ticked
    header = box.locator("[data-index]").first
    took.append(lesson.interact(box, lambda: box.locator("button", has_text="Next question").click()))
    box.locator("[data-index='1']").wait_for(timeout=30_000)
    assert header.count() == 1 and box.locator(".exportlab-model-answer").count() == 0  # the next one is hidden
    return took


def mock_interview_summary(lesson: LessonPage) -> None:
    """12, after the live tasks were failed then passed: re-run the summary cell and read it."""
    cells = lesson.panel.locator(".jp-Notebook .jp-CodeCell")
    last = cells.nth(cells.count() - 1)
    last.scroll_into_view_if_needed()
    last.locator(".cm-content").click()
    lesson.page.keyboard.press("Shift+Enter")
    summary = last.locator(".exportlab-interview-summary[data-answered='1']")
    summary.wait_for(timeout=60_000)
    assert summary.locator("li[data-passed='true']").count() == 3, summary.inner_text()
    assert "Revisit" in summary.inner_text()


SPECIFIC = {"00_start_here.ipynb": start_here, "06_static_shapes.ipynb": camera_picker,
            "09_normalize_or_bucket.ipynb": bucket_slider, "12_mock_interview.ipynb": mock_interview}
AFTER_EXERCISES = {"12_mock_interview.ipynb": mock_interview_summary}


# ----- the generic widgets of every lesson, on one page -----------------------------------------------
ONE_PAGE = "every_prediction_and_card.ipynb"


def every_prediction_and_card_on_one_page(lab_server, page) -> None:
    """Every lesson's predictions and interview cards, asked on one page in a fresh kernel (no lesson runs): each
    renders, shows no answer before the learner acts, and no option's label is cut short. (A prediction's Reveal
    runs its pipeline: tests/test_questions.py checks every one, and the browser lessons click theirs.)"""
    from helpers import interview, questions

    question_ids = [q.id for q in questions.catalog()]
    card_ids = [c.id for c in interview.cards()]
    sources = ["from helpers import interview, questions"]
    sources += [f'questions.ask("{i}")' for i in question_ids] + [f'interview.ask("{i}")' for i in card_ids]
    notebook = {"cells": [{"cell_type": "code", "execution_count": None, "id": f"c{n}", "metadata": {},
                           "outputs": [], "source": source} for n, source in enumerate(sources)],
                "metadata": json.loads((ROOT / "notebooks" / "00_start_here.ipynb").read_text())["metadata"],
                "nbformat": 4, "nbformat_minor": 5}
    (lab_server.root / "notebooks" / ONE_PAGE).write_text(json.dumps(notebook))
    lesson = None
    try:
        lesson = LessonPage(page, lab_server, ONE_PAGE)
        lesson.run_all(polling_ms=200)
        assert not lesson.cell_errors(), f"a cell raised: {lesson.cell_errors()[:1]}"
        assert lesson.panel.locator(".exportlab-reveal").count() == len(question_ids)
        assert lesson.panel.locator(".exportlab-interview").count() == len(card_ids)
        assert_nothing_revealed(lesson, ONE_PAGE)
        assert not lesson.cut_button_labels(), f"labels cut short: {lesson.cut_button_labels()}"
        assert not lesson.widget_errors(), f"widget errors: {lesson.widget_errors()[:3]}"
    finally:
        close_lesson(lesson, page, lab_server)
