"""Where ``make lab``'s background warm-up stands, read from its log.

The warm-up (``tools/notebooks.py warm --background``, started by ``make lab`` beside JupyterLab) builds every
lesson's programs into the cache, lesson by lesson at the lowest CPU priority, and appends one line per step to
``<cache>/warm.log``: ``YYYY-MM-DD HH:MM:SS message``. :func:`warm_up_status` turns its last line into a sentence
for a lesson's reader (lesson 00 prints it); the tool writes the log, this module only reads it.
"""

from __future__ import annotations

import time
from pathlib import Path

from .cache import cache_dir

LOG_NAME = "warm.log"


def log_path() -> Path:
    """The warm-up's log, in the cache this kernel uses."""
    return cache_dir() / LOG_NAME


def _ago(seconds: float) -> str:
    if seconds < 90:
        return f"{max(0, round(seconds))} s ago"
    if seconds < 90 * 60:
        return f"{round(seconds / 60)} min ago"
    if seconds < 36 * 3600:
        return f"{round(seconds / 3600)} h ago"
    return f"{round(seconds / 86400)} days ago"


def warm_up_status(path: Path | None = None, now: float | None = None) -> str:
    """One sentence: what the background warm-up said last, and how long ago (from ``path``, default
    :func:`log_path`). A lesson the warm-up has not reached builds its own programs on its first run."""
    path = log_path() if path is None else path
    try:
        lines = path.read_text(encoding="utf-8").strip().splitlines()
        written = path.stat().st_mtime
    except OSError:
        lines = []
    if not lines:
        return ("No background warm-up has run with this cache (`make lab` starts one): each lesson builds its "
                "programs on its first run, a few seconds each, and loads them from the cache after that.")
    last = lines[-1]
    message = last[20:] if len(last) > 20 and last[4] == "-" and last[19] == " " else last
    when = _ago((time.time() if now is None else now) - written)
    if message.endswith(" …"):  # a lesson being built: the ones before it (lesson order) are ready
        return f"Background warm-up, {when}: {message[:-2]} being built; the lessons before it are ready."
    if message.startswith("stopped"):
        return (f"The background warm-up {message} ({when}); lessons it had not reached build their programs on "
                f"their first run.")
    return f"Background warm-up, {when}: {message}."
