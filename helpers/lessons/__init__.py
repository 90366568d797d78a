"""Lesson-specific pieces: one module per lesson (its extra models, widgets, measurements).

Shared building blocks live one level up (``helpers.models``, ``helpers.widgets``,
``helpers.plots``); a lesson module holds only what its lesson alone needs.

Convention for widgets (used by ``benchmarks/bench_widgets.py`` and the browser tests): a
lesson module with a widget defines ``widget_demo()`` returning ``(explorer, interactions)``,
where ``explorer`` has ``.widget``, ``.set(**values) -> row`` and ``.verdict``, and
``interactions`` is a list of ``(values, expected_verdict)`` pairs a learner might try.
"""
