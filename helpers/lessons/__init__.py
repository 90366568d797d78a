"""The lessons' own material: ``NN_name.py``, one module per lesson, named like its notebook (its questions,
exercises, interview cards, and the models and widgets only it uses; found by :mod:`helpers.course`), and modules
several lessons share (``control_flow``, ``control_flow_fixes``, ``shapes``, ``bucketing``: models, widgets,
measurements). One exception: ``doctor``, lesson 11's gallery of models, keeps a name a learner can type, because
the lesson runs them from the shell (``python -m helpers.doctor helpers.lessons.doctor:MedianCenter …``).

Building blocks of the whole course live one level up (``helpers.models``, ``helpers.widgets``, ``helpers.plots``).

Convention for widgets (used by ``benchmarks/bench_widgets.py`` and the browser tests): a
lesson module with a widget defines ``widget_demo()`` returning ``(explorer, interactions)``,
where ``explorer`` has ``.widget``, ``.set(**values) -> row`` and ``.verdict``, and
``interactions`` is a list of ``(values, expected_verdict)`` pairs a learner might try.
"""
