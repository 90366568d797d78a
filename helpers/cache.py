"""A content-addressed cache of lowered programs, keyed on what ``torch.export`` produced.

Lowering a program takes seconds; a widget interaction must take milliseconds. So every lowered
``.pte`` is kept, under a key computed from the *exported program* (:func:`program_key`): its
graphs, recorded shapes and dtypes, signature, symbolic ranges and every parameter, buffer and
constant, plus the backend, the library versions and the library code that records the entry's
metadata. Export runs on every :func:`helpers.lower` call (a fraction of the lowering's cost), so
no Python object is ever walked to guess what the program depends on: a value read through an
imported module, a default argument, a closure, a global of any type or an in-place edit of the
model changes the key exactly when it changes the program.

Entries are a ``<key>.pte`` plus a ``<key>.json`` written atomically (temporary file +
``os.replace``); the JSON records the ``.pte``'s size and SHA-256, so a truncated or corrupt
entry is detected, deleted and rebuilt rather than loaded. The location is
``$EXPORTLAB_CACHE_DIR`` or ``~/.cache/exportlab``.

A lowering that *fails* is recorded too (``<key>.failed.json``: the exception's type, its message and its
traceback as text), because it fails the same way every time for the same exported program, versions and
code: :func:`store_failure` / :func:`load_failure`. Only an error torch or ExecuTorch raised while lowering
is recorded, and only one whose type can be raised again with the same message; and a load the runtime refused
because it has no kernel for an operator (``OperatorMissing``, a fact of the runtime build).

Several processes may share the cache (the kernels of a test run, a JupyterLab session):
:func:`build_lock` lets one of them build an entry while the others wait and then load it,
instead of all building the same program at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import platform
import re
import sys
import tempfile
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any, cast

import torch

from .records import ProgramRecord

__all__ = ["cache_dir", "program_key", "dynamic_shapes_repr", "load_entry", "store_entry", "load_failure", "store_failure",
           "build_lock", "clear_cache"]

FORMAT_VERSION = "6"
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
# The library code that writes what an entry records beside the program (contract, delegation, notes; _quiet.py
# collects the partitioner's reasons as they are logged).
_RECORDING_CODE = ("lowering.py", "contract.py", "cache.py", "serialized.py", "records.py", "operators.py",
                   "_quiet.py")


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


# ----- the key: the exported program itself ----------------------------------------------------
def _tensor_digest(h: Any, t: Any) -> None:
    if not isinstance(t, torch.Tensor):  # a script object or opaque constant: its repr is what we have
        h.update(_ADDRESS.sub("", repr(t)).encode())
        return
    t = t.detach()
    h.update(f"{t.dtype}{tuple(t.shape)}".encode())
    if t.numel():
        data = t.contiguous().cpu()
        if data.dtype == torch.bool:
            data = data.to(torch.uint8)
        h.update(data.reshape(-1).view(torch.uint8).numpy().tobytes())


def _value_summary(value: Any) -> str:
    """A node's recorded value: dtype and (symbolic) shape for a tensor, else its text."""
    if isinstance(value, torch.Tensor):
        return f"T[{value.dtype}]({', '.join(str(s) for s in value.shape)})"
    if isinstance(value, (list, tuple)):
        return "(" + ", ".join(_value_summary(v) for v in value) + ")"
    return _ADDRESS.sub("", str(value))


def _program_digest(h: Any, ep: torch.export.ExportedProgram) -> None:
    """Everything that decides what lowering an ``ExportedProgram`` produces."""
    for name, module in ep.graph_module.named_modules():
        if not isinstance(module, torch.fx.GraphModule):
            continue
        h.update(f"graph {name}\n{module.code}".encode())
        for node in module.graph.nodes:
            h.update(f"{node.op} {node.name} {_value_summary(node.meta.get('val'))}\n".encode())
    h.update(str(ep.graph_signature).encode())
    h.update(repr(sorted((str(k), str(v.lower), str(v.upper)) for k, v in ep.range_constraints.items())).encode())
    for name in sorted(ep.state_dict):
        h.update(f"state {name}".encode())
        _tensor_digest(h, ep.state_dict[name])
    for name in sorted(ep.constants):
        h.update(f"constant {name}".encode())
        _tensor_digest(h, ep.constants[name])


def program_key(exported: dict[str, torch.export.ExportedProgram], described: dict[str, Any], backend: str) -> str:
    """The cache key of programs lowered together for ``backend``.

    It is computed from what ``torch.export`` produced, not from the Python objects that produced it:
    the graphs (and every ``torch.cond`` branch), each node's recorded dtype and shape, the graph
    signature (inputs, outputs, baked-in Python scalars), the range of every symbolic size, and the
    bytes of every parameter, buffer and lifted constant. Whatever ``forward()`` read while tracing
    (an attribute, a global of another module, a default argument, a closure) is in there if it
    changed the program, so a cached ``.pte`` is served only when a fresh export would lower to the
    same program. ``described`` adds what the library records beside the program (method order, the
    user's ``Dim`` names, ``forward()``'s parameter names, and the example's shapes when a size has no upper
    bound: memory planning gives it the example's value); backend and versions complete the key.
    """
    h = hashlib.sha256()
    h.update(json.dumps(_versions(), sort_keys=True).encode())
    h.update(f"backend {backend}".encode())
    h.update(json.dumps(described, sort_keys=True, default=str).encode())
    for name in sorted(exported):
        h.update(f"method {name}".encode())
        _program_digest(h, exported[name])
    return h.hexdigest()[:32]


def dynamic_shapes_repr(spec: Any) -> Any:
    """``dynamic_shapes`` as plain data (Dim names and bounds), for the key and the records."""
    from torch.export.dynamic_shapes import _DimHint

    if spec is None or isinstance(spec, (int, str)):
        return spec
    if isinstance(spec, _DimHint):
        return ("hint", spec.type.name, spec.min, spec.max)
    if isinstance(spec, dict):
        return {str(k): dynamic_shapes_repr(v) for k, v in spec.items()}
    if isinstance(spec, (list, tuple)):
        return [dynamic_shapes_repr(v) for v in spec]
    root = getattr(spec, "root", None)
    return ("dim", getattr(spec, "__name__", repr(spec)), str(getattr(spec, "min", None)),
            str(getattr(spec, "max", None)), dynamic_shapes_repr(root) if root is not None else None)


def _versions() -> dict[str, str]:
    def version(pkg: str) -> str:
        try:
            return metadata.version(pkg)
        except metadata.PackageNotFoundError:
            return "absent"

    return {"format": FORMAT_VERSION, "torch": torch.__version__, "executorch": version("executorch"),
            "python": sys.version.split()[0], "machine": platform.machine(), "helpers": _recording_code_hash()}


@functools.cache
def _recording_code_hash() -> str:
    """The hash of the code that writes an entry's metadata, read once per process: the code this process
    runs (an edit made while it runs belongs to the next process, and to its keys)."""
    here = Path(__file__).parent
    return hashlib.sha256(b"".join((here / f).read_bytes() for f in _RECORDING_CODE)).hexdigest()[:16]


# ----- recipes: a program known by how it is made, before it is exported --------------------------
def _recipe_path(recipe: str) -> Path:
    digest = hashlib.sha256(json.dumps([recipe, _versions()], sort_keys=True).encode()).hexdigest()[:32]
    return cache_dir() / f"recipe-{digest}.json"


def recipe_program(recipe: str) -> str | None:
    """The key of the program ``recipe`` produced before (see :func:`note_recipe`), or ``None``."""
    path = _recipe_path(recipe)
    if not path.exists():
        return None
    try:
        return str(json.loads(path.read_text())["program"])
    except (ValueError, KeyError, TypeError):  # a damaged note: as if there were none
        path.unlink(missing_ok=True)
        return None


def note_recipe(recipe: str, key: str) -> None:
    """Note that ``recipe`` produced the program ``key``. A recipe is a string naming everything the program
    depends on besides the library's recording code and the versions of torch and ExecuTorch (added here): the
    caller's own source, its arguments, other libraries' versions."""
    _atomic_write(_recipe_path(recipe), json.dumps({"program": key}).encode())


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


def store_entry(key: str, pte: bytes, meta: ProgramRecord) -> None:
    """Write one entry: the program first, then its description (whose presence marks it complete)."""
    root = cache_dir()
    record = {**meta, "pte_size": len(pte), "pte_sha256": hashlib.sha256(pte).hexdigest()}
    _atomic_write(root / f"{key}.pte", pte)
    _atomic_write(root / f"{key}.json", json.dumps(record, sort_keys=True).encode())


def load_entry(key: str) -> tuple[bytes, ProgramRecord] | None:
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
    return pte, cast(ProgramRecord, meta)  # written by store_entry, by the code this key names


def store_failure(key: str, failure: dict[str, str]) -> None:
    """Record that building entry ``key`` failed: ``{"type": "module:qualname" (or "load"), "message": …,
    "traceback": …}`` and, for a load, the refusal's ``method``, ``error`` and ``log`` (all strings)."""
    _atomic_write(cache_dir() / f"{key}.failed.json", json.dumps(failure, sort_keys=True).encode())


def load_failure(key: str) -> dict[str, str] | None:
    """The recorded failure of entry ``key`` (see :func:`store_failure`), or None; an unreadable record is deleted."""
    path = cache_dir() / f"{key}.failed.json"
    if not path.exists():
        return None
    try:
        failure = json.loads(path.read_text())
        if all(isinstance(value, str) for value in failure.values()) and {"type", "message", "traceback"} <= set(failure):
            return cast(dict[str, str], failure)
    except (OSError, ValueError, AttributeError):
        pass
    path.unlink(missing_ok=True)
    return None


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
