"""The ExecuTorch runtime's compiled module, loaded without the rest of ExecuTorch.

``executorch.runtime`` (the public API a lesson shows) wraps the compiled extension
``executorch.extension.pybindings._C``. Importing it goes through ``portable_lib``, which imports
``executorch.exir`` (the whole ahead-of-time compiler, ~3.7 s) only to emit a warning. Running a
program that is already lowered needs none of that: this module calls the same compiled functions
with the same defaults as ``executorch.runtime.Runtime.load_program`` (``InternalConsistency``
verification, no ETDump) and loads in a few milliseconds once torch is imported.

Only :mod:`helpers` uses it; lessons show the public ``executorch.runtime`` API.
"""

from __future__ import annotations

from typing import Any

from ._quiet import captured_output

__all__ = ["compiled_runtime", "load_program", "LoadedProgram", "registered_backends", "registered_operators"]

_MODULE: Any = None


def compiled_runtime() -> Any:
    """``executorch.extension.pybindings._C``, imported once (torch first: it provides libtorch)."""
    global _MODULE
    if _MODULE is None:
        import torch  # noqa: F401 - the extension links against libtorch

        with captured_output():  # the first start prints CPU-probing chatter
            from executorch.extension.pybindings import _C
        _MODULE = _C
    return _MODULE


class LoadedProgram:
    """A program loaded from bytes, holding those bytes: the runtime reads the buffer in place, so it
    must live as long as the program (``executorch.runtime.Program`` keeps it for the same reason)."""

    def __init__(self, data: bytes):
        runtime = compiled_runtime()
        self.data = bytes(data)
        with captured_output():
            self.program = runtime._load_program_from_buffer(
                self.data, enable_etdump=False, debug_buffer_size=0,
                program_verification=runtime.Verification.InternalConsistency, data_path=None)

    @property
    def method_names(self) -> list[str]:
        return [self.program.get_method_name(i) for i in range(self.program.num_methods())]

    def load_method(self, name: str) -> Any:
        """An ``ExecuTorchMethod``: call it with a list of inputs; ``method_meta()`` gives its ``MethodMeta``."""
        return self.program.load_method(name)

    def method_meta(self, name: str) -> Any:
        return self.program.method_meta(name)


def load_program(data: bytes) -> LoadedProgram:
    """Load a serialized ``.pte`` (what ``executorch.runtime.Runtime.get().load_program(data)`` does)."""
    return LoadedProgram(data)


def runtime_threads() -> int:
    """How many threads the runtime's own thread pool has (XNNPACK runs on it). It is sized to the machine's
    cores when the runtime starts; ``torch.set_num_threads`` does not change it."""
    return int(compiled_runtime()._threadpool_get_thread_count())


def registered_backends() -> list[str]:
    """The delegates compiled into this runtime (e.g. ``XnnpackBackend``)."""
    return list(compiled_runtime()._get_registered_backend_names())


def registered_operators() -> list[str]:
    """The operators this runtime has kernels for, as a program names them (``aten::add.out``), sorted."""
    return sorted(compiled_runtime()._get_operator_names())
