"""A check, before anything compiles, that one outer step's batches fit in memory.

The batches of an outer step are fetched on the host and passed to the compiled step, so
they are held twice while it runs: as numpy arrays on the host and as the program's
arguments on the device (on the CPU backend both are host memory: ``jax.device_put``
copies). For the truncated estimators they are a truncation's worth and small; for the
full-run estimators (``FullES``, ``FullGrad``) they are a whole inner run's, and grow with
its length and the population: 1,000 steps of two runs of the 20x20-pixel MLP bucket on
the training and outer-valid splits take 1.23 GB (``benchmarks/bench_whole_run_memory.py``),
so ``--total-length 20000`` takes 24.6 GB of batches, 49 GB held twice. Without a check
such a run is ended by the operating system's out-of-memory killer after its compile,
with nothing said; :func:`check_batches_fit` raises first, naming the bytes, the
estimators and what to change.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import jax

__all__ = [
    "SKIP_ENV",
    "BatchesDoNotFitError",
    "available_host_bytes",
    "check_batches_fit",
    "nbytes",
    "skipped",
    "whole_run_bytes",
]


#: Environment variable that turns the check off (``LEARNOPT_SKIP_MEMORY_CHECK=1``), for a
#: machine whose reported available memory is wrong (swap, overcommit).
SKIP_ENV = "LEARNOPT_SKIP_MEMORY_CHECK"


def skipped() -> bool:
    """Whether :data:`SKIP_ENV` turns the check off.

    Returns:
      True where the variable is set to anything but "" or "0".
    """
    return os.environ.get(SKIP_ENV, "") not in ("", "0")


class BatchesDoNotFitError(ValueError):
    """One outer step's batches need more memory than the machine has available."""


def _read_int(path: str) -> int | None:
    try:
        with open(path) as f:
            text = f.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def available_host_bytes() -> int | None:
    """Bytes of host memory a new allocation can have, or None where it cannot be read.

    Linux's ``MemAvailable`` (``/proc/meminfo``), lowered to the room left under this
    process's cgroup limit (v2 ``memory.max``, v1 ``memory.limit_in_bytes``) where one is set.

    Returns:
      The smaller of the two, or None off Linux.
    """
    available = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    available = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        return None
    for limit_file, used_file in (
        ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
        (
            "/sys/fs/cgroup/memory/memory.limit_in_bytes",
            "/sys/fs/cgroup/memory/memory.usage_in_bytes",
        ),
    ):
        limit, used = _read_int(limit_file), _read_int(used_file)
        if limit is not None and used is not None and limit < (1 << 60):
            room = max(limit - used, 0)
            available = room if available is None else min(available, room)
            break
    return available


def _device_free_bytes(device: Any) -> int | None:
    """Free bytes of an accelerator's memory (None on the CPU or where not reported)."""
    if device.platform == "cpu":
        return None
    try:
        stats = device.memory_stats()
    except Exception:  # noqa: BLE001 - a backend without memory statistics: no check
        return None
    if not stats or "bytes_limit" not in stats:
        return None
    return int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0))


def _gb(n: float) -> str:
    return f"{n / 1e9:.2f} GB"


def _describe(estimator: Any) -> str:
    name = type(estimator).__name__
    horizon = getattr(estimator, "horizon", None)
    step = getattr(estimator, "truncated_step", None)
    runs = getattr(step, "num_tasks", None)
    parts = [name]
    if horizon is not None:
        parts.append(f"whole runs of {horizon} steps")
    if runs is not None:  # task samples (ES: antithetic pairs, which share batches)
        parts.append(f"num_tasks={runs}")
    return ", ".join(parts)


def nbytes(tree: Any) -> int:
    """Bytes of the arrays of a pytree.

    Args:
      tree: batches as ``get_datas()`` returns them (numpy or JAX arrays; other leaves
        count 0).

    Returns:
      The sum of the leaves' ``nbytes``.
    """
    return sum(int(getattr(leaf, "nbytes", 0)) for leaf in jax.tree_util.tree_leaves(tree))


def whole_run_bytes(learner: Any) -> list[int] | None:
    """The bytes of each estimator's batches of one outer step, before they are fetched.

    A full-run estimator (one with a ``horizon``) takes a whole run's batches per step;
    its bytes are those of one step's batch times the horizon (plus its recompute
    batches), measured on one fetched step, after which the learner's datasets are moved
    back (the learner's ``get_data_state`` / ``set_data_state``),
    so the run sees the batches it would have seen. Other estimators count 0 here (their
    batches are a truncation's, checked once fetched).

    Args:
      learner: a learner with ``gradient_estimators`` and ``get_data_state`` /
        ``set_data_state``.

    Returns:
      One figure per estimator, or None where a dataset cannot report its position (then
      nothing is fetched ahead).
    """
    estimators = learner.gradient_estimators
    if not any(getattr(e, "horizon", None) for e in estimators):
        return [0] * len(estimators)
    states, missing = learner.get_data_state()
    if missing:
        return None
    sizes = []
    try:
        for est in estimators:
            horizon = getattr(est, "horizon", None)
            step = getattr(est, "truncated_step", None)
            if not horizon or not hasattr(step, "get_batch"):
                sizes.append(0)
                continue
            size = nbytes(step.get_batch(1)) * int(horizon)
            if getattr(est, "loss_type", None) == "last_recompute":
                size += nbytes(step.get_outer_batch(est.recompute_samples))
            sizes.append(size)
    finally:
        learner.set_data_state(states)
    return sizes


def check_batches_fit(
    sizes: Sequence[int],
    estimators: Sequence[Any],
    *,
    num_devices: int = 1,
    host_bytes: int | None = None,
    device: Any = None,
) -> int:
    """Raises if one outer step's batches cannot be held; returns their bytes.

    Args:
      sizes: the bytes of one step's batches, one figure per estimator (:func:`nbytes`
        of its ``get_datas()``, or :func:`whole_run_bytes` before they are fetched).
      estimators: the gradient estimators, in the same order (named in the message).
      num_devices: devices the population's batches are split over (each device holds
        its share).
      host_bytes: the host memory available (None: :func:`available_host_bytes`).
      device: the device the step runs on (None: ``jax.devices()[0]``).

    Returns:
      The bytes of the batches.

    Raises:
      BatchesDoNotFitError: the host copy and the device copy together (on the CPU
        backend), the host copy, or a device's share (on an accelerator) exceed the
        memory available. The message gives the bytes of each estimator's batches and
        the settings that size them.
    """
    sizes = [int(n) for n in sizes]
    total = sum(sizes)
    if total == 0:
        return 0
    device = jax.devices()[0] if device is None else device
    host = available_host_bytes() if host_bytes is None else host_bytes
    on_cpu = device.platform == "cpu"
    need_host = 2 * total if on_cpu else total
    problem = None
    if host is not None and need_host > host:
        held = "twice (on the host and as the compiled step's arguments)" if on_cpu else "once"
        problem = (
            f"they are held {held}: {_gb(need_host)}, more than the {_gb(host)} of host "
            "memory available"
        )
    free = _device_free_bytes(device)
    share = total / max(int(num_devices), 1)
    if problem is None and free is not None and share > free:
        problem = (
            f"each of the {num_devices} device(s) would hold {_gb(share)}, more than the "
            f"{_gb(free)} free on {device.platform}"
        )
    if problem is None:
        return total
    each = "; ".join(
        f"{_describe(est)}: {_gb(size)}" for est, size in zip(estimators, sizes, strict=True)
    )
    raise BatchesDoNotFitError(
        f"one outer step's batches take {_gb(total)} ({each}) and {problem}. They grow "
        "with total_length (the full-run estimators full_es and full_grad take a whole "
        "run's batches every step), trunc_length (the truncated ones take a "
        "truncation's), num_tasks (the runs) and the task's batch size: lower one, or use "
        f"a truncated estimator (pes) for a long horizon ({SKIP_ENV}=1 skips this check)"
    )
