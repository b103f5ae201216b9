"""Fixtures that more than one test file needs.

JAX is imported inside the fixtures, so test files that do not use them (the structure
and command-line tests) do not pay for it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

#: The run that the resume, fault and multi-process tests meta-train: PES on a quadratic
#: family with noise data, so that inner states, PES accumulators and a host-side data
#: stream all live in the checkpoint, and nothing needs a dataset on disk. Each file sets
#: its own lengths and cadence on top (``dict(PES_QUADRATIC, trunc_length=..., ...)``).
PES_QUADRATIC = dict(task="FixedDimQuadraticFamilyData", trainer="pes", num_tasks=4)


def _fast_compile_options() -> dict[str, Any] | None:
    """XLA options that only make CPU compilation faster (the tests check values, not speed)."""
    import jax

    if jax.default_backend() != "cpu":
        return None
    return {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}


@pytest.fixture(scope="session")
def fast_jit() -> Callable[..., Any]:
    """``jax.jit`` with XLA options that compile faster on CPU (same values computed).

    Use it as ``fast_jit(fn, **jit_kwargs)`` or as a decorator ``@fast_jit``.

    Returns:
      A function ``(fn, **kwargs) -> jax.jit(fn, compiler_options=..., **kwargs)``.
    """
    import jax

    options = _fast_compile_options()

    def jit(fn: Callable[..., Any], **kwargs: Any) -> Callable[..., Any]:
        return jax.jit(fn, compiler_options=options, **kwargs)

    return jit
