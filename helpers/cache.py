"""A content-addressed cache of lowered programs.

Exporting and lowering take seconds; a widget interaction must take milliseconds. The cache
key covers everything that changes the program: every parameter and buffer, every plain
attribute of every submodule (a config flag changes the graph!), the code of the model's
classes (and the values of simple globals that code reads), the example inputs' shapes and
dtypes (and the values of Python scalars, which export bakes in), the dynamic shapes, the
backend and the library versions. Two models that differ in any of these never share an
entry.

Entries are a ``<key>.pte`` plus a ``<key>.json`` written atomically (temporary file +
``os.replace``); the JSON records the ``.pte``'s size and SHA-256, so a truncated or corrupt
entry is detected, deleted and rebuilt rather than loaded. The location is
``$EXPORTLAB_CACHE_DIR`` or ``~/.cache/exportlab``.

Several processes may share the cache (the kernels of a test run, a JupyterLab session):
:func:`build_lock` lets one of them build an entry while the others wait and then load it,
instead of all building the same program at once.
"""

from __future__ import annotations

import contextlib
import enum
import fcntl
import hashlib
import json
import os
import platform
import re
import sys
import tempfile
import types
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

__all__ = ["cache_dir", "fingerprint", "load_entry", "store_entry", "build_lock", "clear_cache"]

FORMAT_VERSION = "3"
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_SKIP_ATTRS = {"_parameters", "_buffers", "_modules", "_non_persistent_buffers_set"}


def cache_dir() -> Path:
    """Where lowered programs are kept (``$EXPORTLAB_CACHE_DIR`` overrides the default)."""
    path = Path(os.environ.get("EXPORTLAB_CACHE_DIR") or Path.home() / ".cache" / "exportlab")
    path.mkdir(parents=True, exist_ok=True)
    return path


def clear_cache() -> int:
    """Delete every cached entry; return how many files were removed."""
    removed = 0
    for entry in [*cache_dir().glob("*"), *cache_dir().glob("locks/*")]:
        if entry.suffix in {".pte", ".json", ".tmp", ".lock"}:
            entry.unlink(missing_ok=True)
            removed += 1
    return removed


# ----- fingerprinting ------------------------------------------------------------------------
class _Hasher:
    def __init__(self) -> None:
        self._h = hashlib.sha256()
        self._seen_code: set[int] = set()
        self._seen_classes: set[int] = set()

    def add(self, *parts: Any) -> None:
        for part in parts:
            data = part if isinstance(part, bytes) else str(part).encode()
            self._h.update(len(data).to_bytes(8, "little"))
            self._h.update(data)

    def hexdigest(self) -> str:
        return self._h.hexdigest()

    # values ------------------------------------------------------------------------------
    def value(self, v: Any, depth: int = 0) -> None:
        if depth > 6:
            self.add("<deep>", type(v).__qualname__)
        elif v is None or isinstance(v, (bool, int, float, complex, str, bytes)):
            self.add(type(v).__name__, repr(v))
        elif isinstance(v, enum.Enum):
            self.add("enum", type(v).__qualname__, v.name)
        elif isinstance(v, torch.Tensor):
            self.tensor(v)
        elif isinstance(v, (torch.dtype, torch.device, torch.Size, torch.memory_format)):
            self.add(type(v).__name__, str(v))
        elif isinstance(v, dict):
            self.add("dict", len(v))
            for k in sorted(v, key=repr):
                self.value(k, depth + 1)
                self.value(v[k], depth + 1)
        elif isinstance(v, (list, tuple)):
            self.add(type(v).__name__, len(v))
            for item in v:
                self.value(item, depth + 1)
        elif isinstance(v, (set, frozenset)):
            self.add("set", len(v))
            for item in sorted(v, key=repr):
                self.value(item, depth + 1)
        elif isinstance(v, (types.FunctionType, types.MethodType)):
            self.function(v.__func__ if isinstance(v, types.MethodType) else v)
        elif isinstance(v, torch.nn.Module):
            self.add("module", type(v).__qualname__)  # reached through an attribute; its state is hashed as a submodule
        elif isinstance(v, type):
            self.add("class", v.__module__, v.__qualname__)
            self.class_code(v)
        elif hasattr(v, "__dict__"):
            self.add("object", type(v).__module__, type(v).__qualname__)
            self.class_code(type(v))
            self.value({k: x for k, x in vars(v).items()}, depth + 1)
        else:
            self.add("repr", type(v).__qualname__, _ADDRESS.sub("", repr(v)))

    def tensor(self, t: torch.Tensor) -> None:
        t = t.detach()
        self.add("tensor", t.dtype, tuple(t.shape))
        if t.numel():
            data = t.contiguous().cpu()
            if data.dtype in (torch.bfloat16,):
                data = data.view(torch.int16)
            self.add(data.numpy().tobytes() if data.dtype != torch.bool else data.to(torch.uint8).numpy().tobytes())

    # code --------------------------------------------------------------------------------
    def code(self, code: types.CodeType) -> None:
        if id(code) in self._seen_code:
            return
        self._seen_code.add(id(code))
        self.add("code", code.co_name, code.co_code, code.co_names, code.co_varnames)
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                self.code(const)
            else:
                self.value(const)

    def function(self, fn: types.FunctionType) -> None:
        self.code(fn.__code__)
        self.value(fn.__defaults__)
        for cell in fn.__closure__ or ():
            try:
                self.value(cell.cell_contents)
            except ValueError:  # an empty cell
                self.add("<empty cell>")
        # Simple globals the code reads (a module-level flag changes the traced graph too).
        for name in _all_names(fn.__code__):
            g = fn.__globals__.get(name, None)
            if isinstance(g, (bool, int, float, str)) or (isinstance(g, tuple) and all(
                    isinstance(x, (bool, int, float, str)) for x in g)):
                self.add("global", name, repr(g))

    def class_code(self, cls: type) -> None:
        for klass in cls.__mro__:
            if klass is object or klass.__module__.startswith(("torch.", "builtins")):
                continue
            if id(klass) in self._seen_classes:
                self.add("class-again", klass.__qualname__)
                continue
            self._seen_classes.add(id(klass))
            self.add("class", klass.__module__, klass.__qualname__)
            for name, member in sorted(vars(klass).items()):
                fn = member.__func__ if isinstance(member, (staticmethod, classmethod)) else member
                if isinstance(fn, property):
                    fn = fn.fget
                if isinstance(fn, types.FunctionType):
                    self.add(name)
                    self.function(fn)
                elif isinstance(fn, (bool, int, float, str, tuple)) and not name.startswith("__"):
                    self.add(name, repr(fn))


def _all_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _all_names(const)
    return names


def _module_state(h: _Hasher, model: torch.nn.Module) -> None:
    for name, mod in model.named_modules(remove_duplicate=False):
        h.add("submodule", name, type(mod).__module__, type(mod).__qualname__)
        h.class_code(type(mod))
        for attr, val in sorted(vars(mod).items()):
            if attr in _SKIP_ATTRS:
                continue
            h.add("attr", attr)
            h.value(val)
    for name, p in model.named_parameters(remove_duplicate=False):
        h.add("param", name)
        h.tensor(p)
    for name, b in model.named_buffers(remove_duplicate=False):
        h.add("buffer", name)
        h.tensor(b)


def _dynamic_shapes_repr(spec: Any) -> Any:
    from torch.export.dynamic_shapes import _DimHint

    if spec is None or isinstance(spec, (int, str)):
        return spec
    if isinstance(spec, _DimHint):
        return ("hint", spec.type.name, spec.min, spec.max)
    if isinstance(spec, dict):
        return {str(k): _dynamic_shapes_repr(v) for k, v in spec.items()}
    if isinstance(spec, (list, tuple)):
        return [_dynamic_shapes_repr(v) for v in spec]
    root = getattr(spec, "root", None)
    return ("dim", getattr(spec, "__name__", repr(spec)), str(getattr(spec, "min", None)),
            str(getattr(spec, "max", None)), _dynamic_shapes_repr(root) if root is not None else None)


def _versions() -> dict[str, str]:
    def version(pkg: str) -> str:
        try:
            return metadata.version(pkg)
        except metadata.PackageNotFoundError:
            return "absent"

    lowering = Path(__file__).with_name("lowering.py")
    return {"format": FORMAT_VERSION, "torch": torch.__version__, "executorch": version("executorch"),
            "python": sys.version.split()[0], "machine": platform.machine(),
            "lowering": hashlib.sha256(lowering.read_bytes()).hexdigest()[:16]}


def fingerprint(methods: dict[str, tuple[torch.nn.Module, tuple[Any, ...], Any]], backend: str) -> str:
    """The cache key of a set of methods lowered together for ``backend``."""
    h = _Hasher()
    h.value(_versions())
    h.add("backend", backend)
    for name in sorted(methods):
        model, args, dynamic_shapes = methods[name]
        h.add("method", name)
        _module_state(h, model)
        for arg in args:
            if isinstance(arg, torch.Tensor):
                h.add("arg-tensor", arg.dtype, tuple(arg.shape))
            else:
                h.add("arg-value")
                h.value(arg)
        h.add("dynamic", json.dumps(_dynamic_shapes_repr(dynamic_shapes), sort_keys=True, default=str))
    return h.hexdigest()[:32]


# ----- storage -------------------------------------------------------------------------------
def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def store_entry(key: str, pte: bytes, meta: dict[str, Any]) -> None:
    """Write one entry: the program first, then its description (whose presence marks it complete)."""
    root = cache_dir()
    record = {**meta, "pte_size": len(pte), "pte_sha256": hashlib.sha256(pte).hexdigest()}
    _atomic_write(root / f"{key}.pte", pte)
    _atomic_write(root / f"{key}.json", json.dumps(record, sort_keys=True).encode())


def load_entry(key: str) -> tuple[bytes, dict[str, Any]] | None:
    """Return ``(pte, meta)`` for a complete, intact entry; delete and return None otherwise."""
    root = cache_dir()
    pte_path, meta_path = root / f"{key}.pte", root / f"{key}.json"
    if not meta_path.exists():
        return None
    try:
        meta = json.loads(meta_path.read_text())
        pte = pte_path.read_bytes()
        intact = (len(pte) == meta["pte_size"] and hashlib.sha256(pte).hexdigest() == meta["pte_sha256"])
    except (OSError, ValueError, KeyError, TypeError):
        intact = False
    if not intact:
        pte_path.unlink(missing_ok=True)
        meta_path.unlink(missing_ok=True)
        return None
    return pte, meta


@contextlib.contextmanager
def build_lock(key: str) -> Iterator[None]:
    """Hold the cache-wide lock for building entry ``key`` (an advisory ``flock`` on a lock file).

    Another process building the same entry makes this wait; afterwards call :func:`load_entry`
    again before building. The lock is released when the block ends, or when the process dies.
    """
    locks = cache_dir() / "locks"
    locks.mkdir(exist_ok=True)
    with open(locks / f"{key}.lock", "a") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        except OSError:  # a filesystem without flock: build without the lock (worst case: built twice)
            yield
            return
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
