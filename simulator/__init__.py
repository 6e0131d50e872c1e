"""The bundled product-API simulator: the demo's target, the tests' and the benchmarks' server.

Run it with ``python -m simulator`` or, from Python, with
``SimulatorProcess``; compute what it answers with ``product`` and ``is_missing``.
"""

from __future__ import annotations

from .catalog import current_version, is_missing, product, variant
from .faults import MODES, FaultConfig, FaultRule
from .process import SimulatorProcess

__all__ = [
    "MODES",
    "FaultConfig",
    "FaultRule",
    "SimulatorProcess",
    "current_version",
    "is_missing",
    "product",
    "variant",
]
