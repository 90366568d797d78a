"""Several models in one run (``--config``): ``[tool.export-doctor]`` in the project's ``pyproject.toml``.

Each model is a table of ``[tool.export-doctor.models]``, its keys the command's own options without the dashes
(``target`` for ``MODULE_OR_FILE:FACTORY``; ``example``, ``dim``, ``arg``, ``value-range`` and ``positions`` take a list; ``allow-portable``,
``atol`` and ``rtol`` a list or one value; a flag is ``true``); keys set directly in ``[tool.export-doctor]`` apply
to every model that does not set them itself::

    [tool.export-doctor]
    strict = true

    [tool.export-doctor.models.vision]
    target = "mypkg.models:build_model"
    example = ["1x3x224x224"]
    dim = ["x:2:h:112:448", "x:3:w:112:448"]
    min-delegated = 95

    [tool.export-doctor.models.tracker]
    spec = "mypkg.specs:tracker"
    allow-portable = ["aten_sum_dim_int_list"]

:func:`read_config` turns each table into the command-line arguments it stands for, so a model in the file and the
same options on the command line are checked by the same code (:func:`helpers.doctor.cli.prepare`). What the run
writes (``--json``, ``--junit``, ``--report``, ``--github``) and how it talks (``--quiet``, ``--traceback``) stay on
the command line: one file each for the whole run, one JUnit ``testsuite`` per model (per method of a program).
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["ConfigError", "ModelEntry", "read_config", "RUN_WIDE", "REPEATED", "JOINED"]

RUN_WIDE = ("json", "junit", "report", "github", "quiet", "traceback", "config")  # command line only
REPEATED = ("example", "dim", "arg", "value-range", "positions")  # one flag per item
JOINED = ("allow-portable", "atol", "rtol")  # one flag, the items joined with commas


class ConfigError(ValueError):
    """The configuration cannot be read: the message names the file and the table."""


@dataclass(frozen=True)
class ModelEntry:
    """One model of the configuration: its table's name and the command-line arguments the table stands for."""

    name: str
    argv: tuple[str, ...]


def _scalar(where: str, key: str, value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ConfigError(f"{where}: {key} = {value!r}: expected a string or a number")
    return str(value)


def _arguments(where: str, options: dict[str, Any], flags: dict[str, bool]) -> list[str]:
    """``options`` (one model's keys) as command-line arguments. ``flags``: option name → takes no value."""
    argv: list[str] = []
    for raw_key, value in options.items():
        key = raw_key.replace("_", "-")
        if key == "target":
            argv.insert(0, _scalar(where, raw_key, value))
        elif key in RUN_WIDE:
            raise ConfigError(f"{where}: {raw_key} is set for the whole run, on the command line (--{key})")
        elif key not in flags:
            known = ", ".join(sorted(["target", *(k for k in flags if k not in RUN_WIDE)]))
            raise ConfigError(f"{where}: unknown key {raw_key!r}; a model's keys are the command's options: {known}")
        elif flags[key]:
            if not isinstance(value, bool):
                raise ConfigError(f"{where}: {raw_key} = {value!r}: expected true or false")
            if value:
                argv.append(f"--{key}")
        elif key == "arg" and isinstance(value, dict):
            argv += [a for k, v in value.items() for a in ("--arg", f"{k}={v!r}")]
        elif key in REPEATED:
            items = value if isinstance(value, list) else [value]
            argv += [a for item in items for a in (f"--{key}", _scalar(where, raw_key, item))]
        elif key in JOINED and isinstance(value, list):
            argv += [f"--{key}", ",".join(_scalar(where, raw_key, item) for item in value)]
        else:
            argv += [f"--{key}", _scalar(where, raw_key, value)]
    return argv


def read_config(path: str | Path, flags: dict[str, bool], only: Iterable[str] = ()) -> list[ModelEntry]:
    """The models of ``[tool.export-doctor]`` in ``path``, in the file's order (``only``: these names, in that
    order). ``flags``: the command's options (name without dashes → takes no value). Raises :class:`ConfigError`."""
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"--config {str(path)!r}: no such file")
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--config {str(path)!r}: not valid TOML: {exc}") from None
    table = data.get("tool", {}).get("export-doctor")
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: no [tool.export-doctor] table")
    models = table.get("models")
    if not isinstance(models, dict) or not models or not all(isinstance(m, dict) for m in models.values()):
        raise ConfigError(f"{path}: [tool.export-doctor] has no models: add a table per model, "
                          "[tool.export-doctor.models.NAME], with target and example (or spec)")
    defaults = {k: v for k, v in table.items() if k != "models"}
    for key in ("target", "spec", "example", "dim", "arg", "inputs", "pte", "bundle"):
        if key in defaults:
            raise ConfigError(f"{path} [tool.export-doctor]: {key} belongs to one model: set it in its "
                              "[tool.export-doctor.models.NAME] table")
    _arguments(f"{path} [tool.export-doctor]", defaults, flags)  # the shared keys are checked where they are
    names = list(only) or list(models)
    unknown = [n for n in names if n not in models]
    if unknown:
        raise ConfigError(f"{path}: no model {', '.join(map(repr, unknown))} in [tool.export-doctor.models] "
                          f"(models: {', '.join(models)})")
    entries = []
    for name in names:
        merged = {k.replace("_", "-"): v for k, v in defaults.items()}
        merged.update({k.replace("_", "-"): v for k, v in models[name].items()})  # the model's own keys win
        entries.append(ModelEntry(name, tuple(_arguments(f"{path} [tool.export-doctor.models.{name}]", merged,
                                                         flags))))
    return entries
