"""Peak memory and health of a long default meta-training run (``learnopt meta-train``).

Runs :func:`learnopt.train.meta_train` with the command line's defaults (LearnableAdam on
the digits MLP, full_grad, T=4, outer Adam 1e-2, checkpoints every 500 steps) for
``--steps`` meta-steps (default 50,000), sampling the process's resident memory every
``--every`` steps from a callback. Prints the memory table, then the summary: RSS after
warm-up (step 2,000) vs at the end (the ratio should be ~1.0: flat memory), peak RSS
(``ru_maxrss``), the mean meta-loss of steps 1,901-2,000 vs of the last 100 steps, and
whether the final theta is finite.

    python benchmarks/bench_memory.py                  # about 5-10 minutes on 2 CPU cores
    python benchmarks/bench_memory.py --steps 5000     # a quick look
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def rss_mb() -> float:
    """Current resident set size of this process, in MiB (from /proc)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def paired_meta_loss(thetas: dict, runs: int = 512, horizon: int = 4, seed: int = 123) -> dict:
    """The walkthrough's meta-loss (mean training loss of a fresh ``horizon``-step inner run)
    of each theta, on the same ``runs`` inits and batches (common random numbers)."""
    import jax
    import jax.numpy as jnp

    from learnopt.learned_optimizers import base as lopt_base
    from learnopt.tasks import base as tasks_base

    task = tasks_base.get_task("ImageMLP_Digits8_Relu32")
    lopt = lopt_base.LearnableAdam()
    batches = task.datasets.train.take(runs, horizon)  # a fresh stream: same for every theta
    keys = jax.random.split(jax.random.PRNGKey(seed), runs)

    @jax.jit
    def meta_loss(theta):
        def one(key, batch):
            opt = lopt.opt_fn(theta)
            state = opt.init(task.init(key))

            def step(s, b):
                loss, g = jax.value_and_grad(task.loss)(opt.get_params(s), None, b)
                return opt.update(s, g, loss), loss

            return jnp.mean(jax.lax.scan(step, state, batch)[1])

        return jnp.mean(jax.vmap(one)(keys, batches))

    return {name: float(meta_loss(theta)) for name, theta in thetas.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50_000)
    parser.add_argument("--every", type=int, default=1000, help="sample memory every N steps")
    parser.add_argument("--out", default=None, help="run folder (default: a temporary one)")
    args = parser.parse_args(argv)

    from learnopt import train

    samples: list[tuple[int, float]] = [(0, rss_mb())]

    def sample(info: train.StepInfo) -> None:
        if info.step % args.every == 0 or info.step == info.num_steps:
            samples.append((info.step, rss_mb()))

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.out) if args.out else Path(tmp) / "run"
        t0 = time.perf_counter()
        result = train.meta_train(
            steps=args.steps, out_dir=out, callbacks=[sample], progress=False, plots=False
        )
        seconds = time.perf_counter() - t0
        cols = result.columns
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux

    print("step      rss_MiB")
    for step, mb in samples:
        print(f"{step:>7d}  {mb:8.1f}")
    warm = next((mb for step, mb in samples if step >= min(2000, args.steps)), samples[-1][1])
    end = samples[-1][1]
    loss = np.asarray(cols["meta_loss"], np.float64)
    at_2000 = loss[max(0, min(2000, len(loss)) - 100) : min(2000, len(loss))]
    last = loss[-100:]
    finite = all(np.all(np.isfinite(np.asarray(v))) for v in result.theta.values())
    print(
        f"\n{result.step} steps in {seconds:.0f} s ({result.step / seconds:.0f} steps/s), "
        f"status {result.status}"
    )
    print(
        f"RSS after warm-up (step {min(2000, args.steps)}): {warm:.1f} MiB; at the end: "
        f"{end:.1f} MiB; ratio end/warm-up: {end / warm:.3f}"
    )
    print(f"peak RSS (ru_maxrss): {peak:.1f} MiB")
    print(
        f"mean meta-loss, steps {max(1, min(2000, len(loss)) - 99)}-{min(2000, len(loss))}: "
        f"{np.nanmean(at_2000):.4f}; last 100 steps: {np.nanmean(last):.4f}; "
        f"ratio last/2000: {np.nanmean(last) / np.nanmean(at_2000):.3f}"
    )
    print(f"skipped steps: {int(np.nansum(cols['skipped']))}; final theta finite: {finite}")
    at = min(2000, len(loss)) - 1
    thetas = {
        f"step {at + 1}": {k: np.float32(cols[f"theta/{k}"][at]) for k in result.theta},
        "final": {k: np.float32(v) for k, v in result.theta.items()},
    }
    paired = paired_meta_loss(thetas)
    print(
        "paired meta-loss (512 fresh 4-step runs on the same training batches): "
        + ", ".join(f"{k}: {v:.4f}" for k, v in paired.items())
    )
    print("final theta:", {k: float(v) for k, v in result.theta.items()})
    return 0 if result.ok and finite else 1


if __name__ == "__main__":
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    sys.exit(main())
