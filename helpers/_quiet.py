"""Keep library noise out of notebooks and reports — only where the caller asks for it.

torch, torchao and the ExecuTorch runtime print things a learner should not have to read:
deprecation warnings, log lines stamped with a time and a PID, and the runtime's C++ log
(which arrives through Python's ``sys.stderr``). Those lines change from run to run, so they
also break strict output comparison (nbval).

Two kinds of help live here:

- :func:`silence_library_noise` changes *process-wide* warning filters and log levels. Importing
  ``helpers`` never calls it: a lesson kernel opts in (``tools/kernelspec.py`` writes the kernel's
  start-up lines) and so does the doctor's ``main``; inside someone else's program nothing global changes.
- :func:`captured_output`, :func:`log_records`, :func:`import_executorch_quietly` and :func:`draft_export_trace`
  are scoped:
  they *capture* what is information (the runtime's reason for refusing an input) for the duration of
  one call, so the rest of ``helpers`` can put that text into an exception or a report, and leave the
  process's settings as they were afterwards.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import tempfile
import warnings
from collections.abc import Callable, Iterator
from typing import Any

_SILENCED = False


def silence_library_noise() -> None:
    """Filter warnings and log lines from torch/torchao/executorch for the rest of the process. Idempotent.

    Process-wide on purpose: call it in a lesson kernel or a command-line tool, never from library code."""
    global _SILENCED
    if _SILENCED:
        return
    _SILENCED = True
    os.environ.setdefault("TORCHDYNAMO_VERBOSE", "0")
    for category in (FutureWarning, DeprecationWarning, UserWarning):
        warnings.filterwarnings("ignore", category=category, module=r"(torch|torchao|executorch|copyreg)(\.|$)")
    # The pytree "LeafSpec is deprecated" warning is raised with copyreg as its module.
    warnings.filterwarnings("ignore", message=r".*LeafSpec.*")
    warnings.filterwarnings("ignore", message=r".*is an Enum subclass.*")
    # nn.GRU/LSTM re-assign their flattened weights while export traces them (torch warns, attributing it
    # to contextlib, with a machine-specific path): nothing a learner can act on. The singular form ("self.mean was
    # assigned") is lesson 17's subject: it shows it on purpose (its export_warnings records every warning).
    warnings.filterwarnings("ignore", message=r".*(was|were) assigned during export.*")
    for name in ("torch", "torchao", "executorch", "root"):
        logging.getLogger(name).setLevel(logging.ERROR)
    silence_library_noise_after_import()
    # torch.export logs the "graph so far" for a failed export at WARNING on the torch logger
    # tree; the exception itself carries everything the learner needs.
    logging.getLogger("torch._export").setLevel(logging.CRITICAL)
    logging.getLogger("torch.fx.experimental.symbolic_shapes").setLevel(logging.CRITICAL)
    logging.getLogger("torch._dynamo").setLevel(logging.CRITICAL)


@contextlib.contextmanager
def captured_output() -> Iterator[io.StringIO]:
    """Capture everything written to ``sys.stdout`` and ``sys.stderr`` (including the runtime's C++ log).

    The ExecuTorch runtime routes its log through Python's ``sys.stderr``, so
    ``contextlib.redirect_stderr`` is enough; ``os.dup2`` on file descriptor 2 would miss it.
    """
    buffer = io.StringIO()
    with contextlib.redirect_stderr(buffer), contextlib.redirect_stdout(buffer):
        yield buffer


@contextlib.contextmanager
def native_stderr_captured() -> Iterator[None]:
    """Send what C++ writes to file descriptor 2 to a scratch file for the duration: torch's own warnings from
    inside an ``ExportedProgram.module()`` call (``[W… ReduceOps.cpp] Warning: std(): degrees of freedom…``)
    bypass Python's warnings and ``sys.stderr`` and would land, timestamped, in the middle of a report."""
    import sys

    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as scratch:
        os.dup2(scratch.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def runtime_log_lines(text: str) -> list[str]:
    """Clean C++ log text into a list of messages, dropping the ``[file.cpp:123]`` prefixes
    and the CPU-probing chatter printed when the runtime first starts."""
    lines = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or "cpuinfo" in line or re.search(r"\barg \d+ with type id \d+", line):
            continue
        if line.startswith("[") and "] " in line:
            line = line.split("] ", 1)[1]
        lines.append(line)
    return lines


_IMPORTED = False


def import_executorch_quietly() -> None:
    """Import the ExecuTorch modules we use, swallowing what they print while loading
    (torchao reports optional CUDA kernels it cannot load, with paths that differ per machine)."""
    global _IMPORTED
    if _IMPORTED:
        return
    # Log handlers keep a reference to the real stderr, so redirecting it is not enough: switch
    # logging off below ERROR while torchao/executorch register themselves.
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        with captured_output():
            import executorch.backends.xnnpack.partition.xnnpack_partitioner  # noqa: F401
            import executorch.devtools.backend_debug  # noqa: F401
            import executorch.exir  # noqa: F401
            import executorch.runtime  # noqa: F401
    finally:
        logging.disable(previous)
    silence_library_noise_after_import()
    _IMPORTED = True


# torch's structured trace log: it prints nothing by itself, and ``torch.export.draft_export`` reads the
# issues it reports from it. Raising its level would make draft_export report "no issues" for any model.
_KEEP_LEVEL = ("torch.__trace",)


def silence_library_noise_after_import() -> None:
    """Some libraries install their own log handlers on import: quiet them again — only in a process that
    opted in with :func:`silence_library_noise` (otherwise this changes nothing)."""
    if not _SILENCED:
        return
    for name in list(logging.root.manager.loggerDict):
        if name.startswith(("torch", "torchao", "executorch", "transformers")) and not name.startswith(_KEEP_LEVEL):
            logging.getLogger(name).setLevel(logging.ERROR)
    for name in ("torch._export", "torch.export._trace", "torch.fx.experimental.symbolic_shapes", "torch._dynamo",
                 "torch._subclasses.fake_tensor"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


@contextlib.contextmanager
def log_records(name: str, level: int,
                keep: Callable[[logging.LogRecord], Any] = lambda record: record) -> Iterator[list[Any]]:
    """Every record the logger ``name`` (or one of its children) emits at ``level`` or above while the block runs,
    as ``keep(record)`` taken when it is emitted (a record may refer to objects that change later: the partitioner's
    refer to graph nodes) and appended to the yielded list unless ``None``; printed nowhere. For the block, the logger's own handlers are set aside (torch gives
    some loggers a stderr handler of their own), it does not propagate, its children defer to its level, and
    logging is not paused (a lesson kernel pauses it); all of it is restored after."""
    records: list[Any] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            kept = keep(record)
            if kept is not None:
                records.append(kept)

    logger = logging.getLogger(name)
    children = [logging.getLogger(n) for n in list(logging.root.manager.loggerDict) if n.startswith(name + ".")]
    saved = (logger.level, logger.propagate, logger.handlers, logging.root.manager.disable,
             [child.level for child in children])
    logger.handlers = [Keep(level)]
    logger.setLevel(level)
    logger.propagate = False
    for child in children:
        child.setLevel(logging.NOTSET)  # defer to the parent's level
    logging.disable(logging.NOTSET)
    try:
        yield records
    finally:
        logger.setLevel(saved[0])
        logger.propagate = saved[1]
        logger.handlers = saved[2]
        logging.disable(saved[3])
        for child, child_level in zip(children, saved[4]):
            child.setLevel(child_level)


@contextlib.contextmanager
def draft_export_trace() -> Iterator[None]:
    """Run ``torch.export.draft_export`` inside this block: it reads the issues it reports from torch's
    structured trace log (``torch.__trace``), so that logger is at DEBUG and logging is not paused, and the
    log file it also writes goes to a temporary folder (``TORCH_DTRACE``) deleted afterwards."""
    trace = logging.getLogger("torch.__trace")
    saved = (trace.level, logging.root.manager.disable, os.environ.get("TORCH_DTRACE"))
    trace.setLevel(logging.DEBUG)
    logging.disable(logging.NOTSET)
    try:
        with tempfile.TemporaryDirectory(prefix="exportlab-draft-") as folder:
            os.environ["TORCH_DTRACE"] = folder
            yield
    finally:
        trace.setLevel(saved[0])
        logging.disable(saved[1])
        if saved[2] is None:
            os.environ.pop("TORCH_DTRACE", None)
        else:
            os.environ["TORCH_DTRACE"] = saved[2]
