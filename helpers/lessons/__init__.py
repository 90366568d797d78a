"""The lessons' own material: ``NN_name.py``, one module per lesson, named like its notebook (its questions,
exercises and interview cards; found by :mod:`helpers.course`), and modules several lessons share
(``control_flow``, ``control_flow_fixes``, ``shapes``, ``bucketing``, ``drills``, ``doctor``: models, widgets,
measurements).

Building blocks of the whole course live one level up (``helpers.models``, ``helpers.widgets``, ``helpers.plots``).

Convention for widgets (used by ``benchmarks/bench_widgets.py`` and the browser tests): a
lesson module with a widget defines ``widget_demo()`` returning ``(explorer, interactions)``,
where ``explorer`` has ``.widget``, ``.set(**values) -> row`` and ``.verdict``, and
``interactions`` is a list of ``(values, expected_verdict)`` pairs a learner might try.
"""
