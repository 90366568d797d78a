"""exportlab helpers: export → lower → ``.pte`` → run in the real ExecuTorch runtime → parity with eager.

The public API (used by every lesson, the tests and ``python -m helpers.doctor``):

- :func:`lower`, :func:`lower_methods` → :class:`PteArtifact`
- :class:`InputContractError` (raised by :meth:`PteArtifact.run` for inputs outside the contract)
- :func:`compare` → :class:`ParityReport`, :func:`probe_inputs` (:class:`PositionRange`: a range of positions in order)
- :func:`diagnose_export` → :class:`Diagnosis`
- :func:`silence_library_noise`: quiet torch's and ExecuTorch's warnings and logs for the whole process
  (lesson kernels and the doctor's command line call it; importing ``helpers`` changes nothing global)
"""

from __future__ import annotations

from ._quiet import silence_library_noise
from ._runtime import runtime_threads
from .artifact import DelegationReport, PteArtifact, RuntimeRejectedError
from .cache import cache_dir, clear_cache
from .contract import AxisSpec, InputContract, InputContractError, InputSpec, Violation
from .diagnose import Diagnosis, diagnose_export
from .display import error_excerpt, fmt, show_error
from .lowering import lower, lower_methods, set_progress
from .parity import ParityReport, ParityRow, PositionRange, Probe, check_one, compare, probe_inputs
from .warmup import warm_up_status

__all__ = [
    "lower", "lower_methods", "PteArtifact", "DelegationReport", "RuntimeRejectedError",
    "InputContract", "InputContractError", "InputSpec", "AxisSpec", "Violation",
    "compare", "check_one", "probe_inputs", "Probe", "PositionRange", "ParityReport", "ParityRow",
    "diagnose_export", "Diagnosis", "fmt", "show_error", "error_excerpt",
    "cache_dir", "clear_cache", "set_progress", "silence_library_noise", "runtime_threads",
    "warm_up_status",
]
