"""exportlab helpers: export → lower → ``.pte`` → run in the real ExecuTorch runtime → parity with eager.

The public API (used by every lesson, the tests and ``python -m helpers.doctor``):

- :func:`lower`, :func:`lower_methods` → :class:`PteArtifact`
- :class:`InputContractError` (raised by :meth:`PteArtifact.run` for inputs outside the contract)
- :func:`compare` → :class:`ParityReport`, :func:`probe_inputs`
- :func:`diagnose_export` → :class:`Diagnosis`
"""

from __future__ import annotations

from ._quiet import silence_library_noise

silence_library_noise()

from .artifact import DelegationReport, PteArtifact, RuntimeRejectedError  # noqa: E402
from .cache import cache_dir, clear_cache  # noqa: E402
from .contract import AxisSpec, InputContract, InputContractError, InputSpec, Violation  # noqa: E402
from .diagnose import Diagnosis, diagnose_export  # noqa: E402
from .display import error_excerpt, fmt, show_error  # noqa: E402
from .lowering import lower, lower_methods, set_progress  # noqa: E402
from .parity import ParityReport, ParityRow, Probe, check_one, compare, probe_inputs  # noqa: E402

__all__ = [
    "lower", "lower_methods", "PteArtifact", "DelegationReport", "RuntimeRejectedError",
    "InputContract", "InputContractError", "InputSpec", "AxisSpec", "Violation",
    "compare", "check_one", "probe_inputs", "Probe", "ParityReport", "ParityRow",
    "diagnose_export", "Diagnosis", "fmt", "show_error", "error_excerpt",
    "cache_dir", "clear_cache", "set_progress",
]
