"""The course: its lessons, in order, found where they live — one registry for every engine.

Each lesson's own material is one module of ``helpers/lessons/``, named like its notebook:
``helpers/lessons/03_torch_cond.py`` belongs to ``notebooks/03_torch_cond.ipynb``. A lesson module may define

- ``QUESTIONS``: predictions (:class:`helpers.questions.Question`);
- ``EXERCISES``: graded exercises (:class:`helpers.exercises.Exercise`), their solutions as code;
- ``CARDS``: interview cards (:class:`helpers.interview.Card`).

The engines (:mod:`helpers.questions`, :mod:`helpers.exercises`, :mod:`helpers.interview`) hold no lesson
content: they ask this registry for every lesson's ``QUESTIONS``, ``EXERCISES`` and ``CARDS``. Adding a lesson
is adding its module: nothing else names it.

A lesson's name starts with two digits, so Python's ``import`` statement cannot spell it; use :func:`lesson`
(``lesson(3)``, ``lesson("03")`` or ``lesson("03_torch_cond")``). Lesson N may use lessons before N this way,
never one after it (``tests/test_course.py`` checks it).
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from dataclasses import dataclass
from types import ModuleType
from typing import Any

__all__ = ["Lesson", "LESSONS_PACKAGE", "lessons", "lesson", "collect", "by_id", "refresh"]

LESSONS_PACKAGE = "helpers.lessons"
_NAME = re.compile(r"^(\d{2})_[a-z0-9_]+$")
_FOUND: list[Lesson] | None = None


@dataclass(frozen=True)
class Lesson:
    """One lesson: its number and its name (the notebook's stem); its module lives in ``helpers.lessons``."""

    number: int
    name: str

    @property
    def module_name(self) -> str:
        return f"{LESSONS_PACKAGE}.{self.name}"

    @property
    def module(self) -> ModuleType:
        """The lesson's module (imported on first use)."""
        return importlib.import_module(self.module_name)

    @property
    def notebook(self) -> str:
        """The notebook's file name, e.g. ``03_torch_cond.ipynb``."""
        return f"{self.name}.ipynb"


def lessons() -> list[Lesson]:
    """Every lesson module found in ``helpers.lessons`` (its whole search path), in lesson order."""
    global _FOUND
    if _FOUND is None:
        package = importlib.import_module(LESSONS_PACKAGE)
        found: dict[int, Lesson] = {}
        for info in pkgutil.iter_modules(list(package.__path__)):
            match = _NAME.match(info.name)
            if not match:
                continue  # a module shared by several lessons (control_flow, shapes, …)
            number = int(match.group(1))
            if number in found:
                raise ValueError(f"two lessons are numbered {number:02d}: {found[number].name} and {info.name}")
            found[number] = Lesson(number, info.name)
        _FOUND = [found[n] for n in sorted(found)]
    return list(_FOUND)


def lesson(key: int | str) -> ModuleType:
    """A lesson's module by number (``3``, ``"03"``) or name (``"03_torch_cond"``)."""
    for item in lessons():
        if key in (item.number, f"{item.number:02d}", item.name):
            return item.module
    raise KeyError(f"no lesson {key!r}; there are: {', '.join(item.name for item in lessons())}")


def collect(attribute: str) -> list[Any]:
    """Every lesson's ``attribute`` (``"QUESTIONS"``, ``"EXERCISES"``, ``"CARDS"``), in lesson order.

    Each item must belong to the lesson that lists it (its ``lesson`` is the lesson's name)."""
    items: list[Any] = []
    for item in lessons():
        for entry in getattr(item.module, attribute, ()):
            owner = getattr(entry, "lesson", item.name)
            if owner != item.name:
                raise ValueError(f"{item.name}.{attribute} lists {getattr(entry, 'id', entry)!r} of lesson {owner}")
            items.append(entry)
    return items


def by_id(attribute: str) -> dict[str, Any]:
    """Every lesson's ``attribute`` keyed by id, sorted by id (ids start with the lesson's number)."""
    found: dict[str, Any] = {}
    for entry in collect(attribute):
        if entry.id in found:
            raise ValueError(f"two {attribute.lower()} share the id {entry.id!r}")
        found[entry.id] = entry
    return dict(sorted(found.items()))


def refresh() -> None:
    """Forget the lessons found so far (after a folder was added to the package's path, e.g. by a test)."""
    global _FOUND
    _FOUND = None
