"""``learnopt doctor``: what learnopt finds on this machine, in one screen.

The versions and where learnopt runs from; JAX's backend and devices; the fused CPU
kernel (on, or off and why, and what that costs); the data folder and which datasets are
prepared there or can be (from a package, or from files the user places); the caches; and
whether TensorFlow is imported (it never should be by ``import learnopt``). Reads and
checks only: it prepares no data and writes nothing except the kernel's library, which
it compiles once if the machine has a compiler and the library is not built yet.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import sys
from pathlib import Path
from typing import TextIO

__all__ = ["report", "run"]


def _size(folder: Path) -> tuple[int, int]:
    """(files, bytes) under ``folder``; (0, 0) when it does not exist."""
    files = [p for p in folder.rglob("*") if p.is_file()] if folder.is_dir() else []
    return len(files), sum(p.stat().st_size for p in files)


def _mb(nbytes: int) -> str:
    return f"{nbytes / 1e6:.1f} MB"


def report() -> list[str]:
    """The lines of the report.

    Returns:
      One line per fact, indented lines under their heading.
    """
    import jax

    import learnopt
    from learnopt.evaluation import cache
    from learnopt.learned_optimizers.blocks import fused_kernel
    from learnopt.tasks.datasets import _sources, storage

    lines = [
        f"learnopt {learnopt.__version__} from {Path(learnopt.__file__).parent}",
        f"Python {platform.python_version()} on {platform.system()} {platform.machine()}, "
        f"{os.cpu_count()} CPU cores",
    ]
    devices = jax.devices()
    kinds = sorted({d.device_kind for d in devices})
    lines.append(
        f"JAX {jax.__version__}: backend {jax.default_backend()}, {len(devices)} "
        f"device{'s' * (len(devices) != 1)} ({', '.join(kinds)})"
    )
    kernel = fused_kernel.status()
    if kernel["on"]:
        lines.append(f"fused CPU kernel: on ({kernel['library']}, built by {kernel['compiler']})")
    else:
        lines.append(
            f"fused CPU kernel: off ({kernel['reason']}); the per-element MLPs use the "
            "blocked matmuls: same values, updates about 2.3-2.6x slower on ~2M parameters"
        )
    data_dir = storage.default_data_dir()
    manual = _sources.resolve_manual_dir(None, data_dir)
    lines.append(f"data folder: {data_dir} (${_sources.ENV_DATA_DIR} sets it)")
    for name in storage.dataset_names():
        spec = storage.dataset_spec(name)
        if _sources.is_prepared_on_disk(spec, data_dir):
            state = "prepared"
        elif not spec.sha256 and spec.package is None:
            state = "not prepared yet: embedded, prepared at first use"
        elif spec.package is not None:
            found = importlib.util.find_spec(spec.package) is not None
            state = (
                f"not prepared yet: from the installed package {spec.package}, at first use"
                if found
                else f"not available: needs the package {spec.package} ({spec.pip_install})"
            )
        else:
            have = [f for f in spec.sha256 if (manual / f).is_file()]
            state = (
                f"not prepared yet: its files are in {manual}, prepared at first use"
                if len(have) == len(spec.sha256)
                else f"not available: place its files in {manual} ({spec.homepage})"
            )
        lines.append(f"  {name:<14} {state}")
    baselines = cache.default_cache_dir()
    n, nbytes = _size(baselines)
    lines.append(f"baseline cache: {baselines}: {n} files, {_mb(nbytes)}")
    kernels = Path(fused_kernel._cache_dir())
    n, nbytes = _size(kernels)
    lines.append(f"kernel cache: {kernels}: {n} files, {_mb(nbytes)}")
    tf = (
        "imported (it should not be: report this)"
        if "tensorflow" in sys.modules
        else "not imported"
    )
    lines.append(f"TensorFlow: {tf} by learnopt")
    return lines


def run(out: TextIO | None = None) -> int:
    """Prints :func:`report`.

    Args:
      out: where to print (default: stdout).

    Returns:
      0.
    """
    out = out or sys.stdout
    for line in report():
        print(line, file=out, flush=True)
    return 0
