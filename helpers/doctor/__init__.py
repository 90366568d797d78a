"""``export-doctor``: the diagnosis workflow of the lessons, as a command for an export CI job.

Installed (``pip install <this project>``) it is the command ``export-doctor`` and the package ``exportlab.doctor``;
in this checkout it is also ``python -m helpers.doctor``.

    export-doctor MODULE_OR_FILE:FACTORY --example SHAPE[:DTYPE[:HIGH]] ...
        [--dim INPUT:AXIS:NAME:MIN:MAX ...] [--arg KEY=VALUE ...] [--backend xnnpack|portable]
        [--int-high N] [--seed N] [--atol X] [--rtol X] [--strict] [--min-delegated PCT]
        [--max-arena-bytes N] [--allow-portable OP,OP] [--max-subgraphs N] [--max-pte-bytes N]
        [--inputs FILE.pt] [--pte FILE.pte] [--bundle FILE.bpte] [--draft-export]
        [--report out.html] [--json out.json] [--junit out.xml] [--quiet] [--traceback]
    export-doctor --spec MODULE_OR_FILE:FUNCTION [the same options, without --example, --dim, --arg, --int-high]

It imports the factory (an ``nn.Module`` class, a function returning one, or a module instance),
builds seeded example inputs, and runs the library's pipeline: ``torch.export`` (once) → lowering
and loading the ``.pte`` in the ExecuTorch runtime → :func:`helpers.probe_inputs` on the ``.pte``'s
input contract → :func:`helpers.compare` against eager → delegation (with the partitioner's own
reasons) and memory plan. It prints a report (verdict first, then the evidence) and can write it as
HTML, JSON (a stable schema, :mod:`helpers.doctor.render`) and JUnit XML.

Exit status: **0** pass; **1** the model does not export / lower / load, a probe inside the contract
did not match eager, or a requested check failed; **2** bad arguments (one line on stderr, never a
traceback); **3** an internal error of the doctor itself (never reported as the model's failure).
Progress goes to stderr.

The package: :mod:`~helpers.doctor.cli` (arguments, loading the model, exit statuses),
:mod:`~helpers.doctor.spec` (``--spec``: a model and inputs as ``torch.export.export`` takes them, made flat),
:mod:`~helpers.doctor.examine` (the pipeline), :mod:`~helpers.doctor.report` (:class:`DoctorReport`: what
the pipeline found, exit statuses, the verdict's rules), :mod:`~helpers.doctor.render` (text, HTML, JSON,
JUnit, reading the report), :mod:`~helpers.doctor.shipped` (``--pte``), :mod:`~helpers.doctor.bundle`
(``--bundle``), :mod:`~helpers.doctor.draft` (``--draft-export``).

From Python (a notebook, a test): :func:`prepare` turns command-line arguments into a model and
inputs, :func:`examine` turns a model and inputs into a :class:`DoctorReport`, and :func:`to_text`
(:func:`to_html`, :func:`to_json`, :func:`to_junit`, :func:`to_dict`) shows one.
"""

from __future__ import annotations

from .cli import (
    DEFAULT_INT_HIGH,
    DTYPES,
    DimSpec,
    ExampleSpec,
    Prepared,
    UsageError,
    build_dynamic_shapes,
    forward_inputs,
    integer_highs,
    load_model,
    main,
    make_examples,
    parse_dim,
    parse_example,
    parse_kwarg,
    prepare,
)
from .examine import examine, examine_methods
from .render import (
    SCHEMA_VERSION,
    program_to_dict,
    program_to_html,
    program_to_json,
    program_to_junit,
    program_to_text,
    to_dict,
    to_html,
    to_json,
    to_junit,
    to_text,
)
from .report import (
    EXIT_ERROR,
    EXIT_FAIL,
    EXIT_PASS,
    EXIT_USAGE,
    STAGE_NAMES,
    VERDICTS,
    BundleInfo,
    Check,
    DoctorReport,
    DraftFindings,
    Stage,
    program_verdict,
)

__all__ = ["EXIT_PASS", "EXIT_FAIL", "EXIT_USAGE", "EXIT_ERROR", "VERDICTS", "STAGE_NAMES", "SCHEMA_VERSION",
           "UsageError", "Prepared", "DoctorReport", "Stage", "Check", "DraftFindings", "BundleInfo", "prepare",
           "examine", "main", "ExampleSpec", "DimSpec", "parse_example", "parse_dim", "parse_kwarg", "load_model",
           "make_examples", "forward_inputs", "build_dynamic_shapes", "integer_highs", "DEFAULT_INT_HIGH", "DTYPES",
           "to_text", "to_html", "to_json", "to_junit", "to_dict", "examine_methods", "program_verdict",
           "program_to_text", "program_to_html", "program_to_json", "program_to_junit", "program_to_dict"]
