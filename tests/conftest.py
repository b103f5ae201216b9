"""Fixtures that more than one test file needs.

JAX is imported inside the fixtures, so test files that do not use them (the structure
and command-line tests) do not pay for it.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

#: learnopt's cache folder variable (``learnopt.evaluation.cache.ENV_CACHE_DIR``, written
#: out so that this file imports no JAX).
ENV_CACHE_DIR = "LEARNOPT_CACHE_DIR"

#: The run that the resume, fault and multi-process tests meta-train: PES on a quadratic
#: family with noise data, so that inner states, PES accumulators and a host-side data
#: stream all live in the checkpoint, and nothing needs a dataset on disk. Each file sets
#: its own lengths and cadence on top (``dict(PES_QUADRATIC, trunc_length=..., ...)``).
PES_QUADRATIC = dict(task="FixedDimQuadraticFamilyData", trainer="pes", num_tasks=4)

#: The repository's root: the scripts under benchmarks/, docs/ and examples/ are not in
#: the package, so the tests load them from their files.
ROOT = Path(__file__).resolve().parents[1]
_SCRIPTS: dict[str, ModuleType] = {}


#: XLA options for every JAX process of the session (the tests' and their subprocesses'):
#: they only make CPU compilation faster, and compilation is most of the suite's time
#: (2026-12-07: test_per_element and test_celo_adam 151 s -> 101 s with them). The
#: tests check values and compile counts, never speed; the benchmarks run without them.
FAST_XLA_FLAGS = ("--xla_backend_optimization_level=0", "--xla_llvm_disable_expensive_passes=true")


def pytest_configure(config: pytest.Config) -> None:
    """Adds :data:`FAST_XLA_FLAGS` to ``XLA_FLAGS`` (kept: what the user set) before JAX
    starts; xdist's workers inherit them from the controller."""
    flags = os.environ.get("XLA_FLAGS", "").split()
    missing = [f for f in FAST_XLA_FLAGS if f.split("=")[0] not in {g.split("=")[0] for g in flags}]
    if missing:
        os.environ["XLA_FLAGS"] = " ".join([*flags, *missing])


def _load_script(path: str, register: bool = False) -> ModuleType:
    """The script at ``ROOT / path`` as a module, loaded once per test session.

    ``register`` also puts it in ``sys.modules`` under its file's stem (Flax Linen modules
    are dataclasses, whose module must be importable by name).
    """
    if path not in _SCRIPTS:
        name = Path(path).stem
        spec = importlib.util.spec_from_file_location(name, ROOT / path)
        module = importlib.util.module_from_spec(spec)
        if register:
            sys.modules[name] = module
        spec.loader.exec_module(module)
        _SCRIPTS[path] = module
    return _SCRIPTS[path]


@pytest.fixture(scope="session")
def repo_script() -> Callable[..., ModuleType]:
    """Loads a script of the repository by its path from the root (e.g.
    ``repo_script("benchmarks/recipe_table.py")``), once per session."""
    return _load_script


@pytest.fixture(scope="session", autouse=True)
def _session_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """learnopt's cache in a fresh folder for the session, never the user's home.

    Session-wide so that module-scoped fixtures (which run before function-scoped ones)
    are covered too; subprocesses inherit it.
    """
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(ENV_CACHE_DIR, str(tmp_path_factory.mktemp("learnopt_cache")))
        # The fused kernel's compiled library (learned_optimizers.fused_kernel).
        mp.setenv("LEARNOPT_KERNEL_CACHE", str(tmp_path_factory.mktemp("learnopt_kernels")))
        yield


@pytest.fixture(autouse=True)
def _test_cache_dir(
    _session_cache_dir: None, tmp_path_factory: pytest.TempPathFactory, monkeypatch
) -> None:
    """A fresh cache folder for every test: no test reads baselines another one trained."""
    monkeypatch.setenv(ENV_CACHE_DIR, str(tmp_path_factory.mktemp("learnopt_cache")))


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
