"""Lowering's survey of the operator registry, done once per state of the registry instead of on every call.

``torch.export``'s ``run_decompositions`` (which ``to_edge_transform_and_lower`` and ``to_executorch`` call several
times per program) begins by listing every *CompositeImplicitAutograd* operator it may keep undecomposed:
``torch._export.utils._collect_all_valid_cia_ops``. torch caches that list for the ``aten`` namespace but walks the
other ~40 namespaces again on every call, each walk re-reading the whole C++ registry (torch does not cache them
because a custom operator may be registered later). For the small models of the lessons that survey is about a
quarter of a lowering's time.

:func:`registry_survey_memoized` keeps torch's answer while the registry is unchanged: the memo's key is the list of
operator namespaces and the set of CompositeImplicitAutograd registrations in the C++ dispatcher, where
``torch.library`` registers a custom operator's kernel, so registering one (or dropping a ``Library``) makes the next
call ask torch again. The answer is torch's own, computed by torch's function; only its repetition is skipped.

The memo is installed only for the duration of the library's own lowering calls (nested and from several threads
alike) and removed after, so importing :mod:`helpers` changes nothing in torch. If torch's private function moves
(another torch than the pinned one), nothing is installed and lowering runs as it always did.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import torch

_FUNCTION = "_collect_all_valid_cia_ops"
# the modules that hold a reference to torch's function (the first defines it, the others import it by name)
_HOLDERS = ("torch._export.utils", "torch.export.exported_program", "torch.export.decomp_utils")

_lock = threading.Lock()
_depth = 0
_originals: dict[str, Callable[[], Any]] = {}
_memo: dict[tuple[tuple[str, ...], frozenset[str]], Any] = {}


def _registry_state() -> tuple[tuple[str, ...], frozenset[str]]:
    """What torch's survey depends on that can change at run time: the operator namespaces and the
    CompositeImplicitAutograd registrations of the C++ dispatcher (about 0.2 ms to read)."""
    registrations = torch._C._dispatch_get_registrations_for_dispatch_key("CompositeImplicitAutograd")
    return tuple(torch.ops._dir), frozenset(registrations)


def _memoized(original: Callable[[], Any]) -> Callable[[], Any]:
    def survey() -> Any:
        state = _registry_state()
        with _lock:
            if state in _memo:
                return _memo[state]
        found = original()
        with _lock:  # keyed on the state after the survey: torch's survey itself adds namespaces to torch.ops
            _memo.clear()  # one state at a time
            _memo[_registry_state()] = found
        return found

    survey.__wrapped__ = original  # type: ignore[attr-defined]
    return survey


def _holders() -> list[Any]:
    modules = []
    for name in _HOLDERS:
        try:
            module = importlib.import_module(name)
        except ImportError:
            return []
        if not callable(getattr(module, _FUNCTION, None)):
            return []
        modules.append(module)
    return modules


@contextlib.contextmanager
def registry_survey_memoized() -> Iterator[None]:
    """Inside the block, torch's CompositeImplicitAutograd survey answers from the memo while the registry is
    unchanged (see the module's docstring); outside it, torch's own function is back in place."""
    global _depth
    with _lock:
        if _depth == 0:
            modules = _holders()
            if modules:
                original = getattr(modules[0], _FUNCTION)
                memoized = _memoized(original)
                for module in modules:
                    _originals[module.__name__] = getattr(module, _FUNCTION)
                    setattr(module, _FUNCTION, memoized)
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                for name, function in _originals.items():
                    setattr(importlib.import_module(name), _FUNCTION, function)
                _originals.clear()
