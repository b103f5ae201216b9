"""Width sweep: does the best learning rate stay put as an MLP grows wider? (muP check)

Trains the same two-hidden-layer MLP on the shipped MNIST digits (``mnist5k``, 4,000
training images resized to 14x14) at several widths, with Adam over a grid of learning
rates, twice: with Adam's own steps, and with width-aware steps
(:class:`learnopt.learned_optimizers.width_aware.WidthAwareSteps`, muP's rule: the hidden and
output matrices' steps scaled by ``base_width / fan_in``). The readout is initialized at
zero in both arms (muP's initialization; ``--readout standard`` keeps the task's
``1/sqrt(fan_in)`` one), so the arms differ only in the steps. Each run's figure is the
training loss over the whole training set after ``--steps`` steps; the best rate of
each width is the grid point with the lowest one.

muP's claim (Yang et al. 2021, arXiv 2203.03466) is that with its steps the best rate
moves by at most one grid point across widths, and without them by more: this script
prints, for each arm, the best rate's index per width and the largest move, and writes
``width_sweep.csv`` and ``width_sweep.png`` (loss against rate, one line per width, one
panel per arm) to ``--out``.

    python benchmarks/width_sweep.py --out runs/width-sweep
    python benchmarks/width_sweep.py --widths 32,128 --steps 50 --out /tmp/ws  # a smoke run

The rates of one width train together (``jax.vmap``), so each width and arm compiles
once; the 2048-wide runs dominate the time.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from learnopt.learned_optimizers.width_aware import WidthAwareSteps
from learnopt.optimizers.adam import Adam
from learnopt.tasks.datasets import _readers
from learnopt.tasks.datasets.images import resize_images
from learnopt.tasks.fixed.image_mlp_models import ImageMLPTask

ARMS = ("adam", "muP")


def load_digits(image_size: int) -> tuple[jax.Array, jax.Array]:
    """The shipped MNIST training split, resized to ``image_size`` square, as arrays."""
    images, labels = _readers.read_mnist5k_splits()["train"]
    images = resize_images(images, (image_size, image_size))
    return jnp.asarray(images), jnp.asarray(labels, jnp.int32)


def make_task(width: int, image_size: int) -> ImageMLPTask:
    """The two-hidden-layer ReLU MLP of this width (its datasets are never read)."""

    def no_datasets():
        raise RuntimeError("the width sweep feeds its own batches")

    return ImageMLPTask(
        no_datasets,
        hidden_sizes=(width, width),
        num_classes=10,
        image_shape=(image_size, image_size, 1),
    )


def sweep_width(
    arm: str,
    width: int,
    rates: np.ndarray,
    images: jax.Array,
    labels: jax.Array,
    *,
    steps: int,
    batch_size: int,
    base_width: float,
    readout: str,
    seed: int,
) -> np.ndarray:
    """Final full-training-set losses of one width, one per rate.

    Args:
      arm: ``"adam"`` or ``"muP"``.
      width: the hidden layers' width.
      rates: the learning rates.
      images, labels: the training set.
      steps: training steps per run.
      batch_size: examples per step (drawn with replacement).
      base_width: muP's base width (the arm ``"muP"``).
      readout: ``"zero"`` or ``"standard"`` initialization of the last layer.
      seed: the runs' seed (the same initial params and batches for every rate).

    Returns:
      The losses, in the order of ``rates``.
    """
    task = make_task(width, int(images.shape[1]))
    key = jax.random.PRNGKey(seed)
    params = task.init(key)
    if readout == "zero":
        last = task._linear_names()[-1]
        params[last] = {**params[last], "w": jnp.zeros_like(params[last]["w"])}
    n = images.shape[0]
    batch_keys = jax.random.split(jax.random.fold_in(key, 1), steps)

    def loss_fn(p, idx):
        return task.loss(p, None, {"image": images[idx], "label": labels[idx]})

    def run(lr):
        opt = Adam(lr)
        if arm == "muP":
            opt = WidthAwareSteps(opt, base_width)
        state = opt.init(params, num_steps=steps)

        def step(state, k):
            idx = jax.random.randint(k, (batch_size,), 0, n)
            loss, grads = jax.value_and_grad(loss_fn)(opt.get_params(state), idx)
            return opt.update(state, grads, loss=loss), None

        state, _ = jax.lax.scan(step, state, batch_keys)
        return loss_fn(opt.get_params(state), jnp.arange(n))

    losses = jax.jit(jax.vmap(run))(jnp.asarray(rates, jnp.float32))
    return np.asarray(losses)


def best_index(losses: np.ndarray) -> int:
    """The grid index of the lowest loss (a non-finite loss never wins)."""
    return int(np.argmin(np.where(np.isfinite(losses), losses, np.inf)))


def plot(rows: list[dict], rates: np.ndarray, widths: list[int], path: Path) -> None:
    """Loss against rate, one line per width, one panel per arm, the best rates marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(ARMS), figsize=(11, 4), sharey=True)
    for ax, arm in zip(axes, ARMS, strict=True):
        for width in widths:
            losses = np.array([r["loss"] for r in rows if r["arm"] == arm and r["width"] == width])
            (line,) = ax.plot(rates, losses, marker="o", label=f"width {width}")
            i = best_index(losses)
            ax.plot(rates[i], losses[i], marker="*", markersize=14, color=line.get_color())
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("learning rate")
        ax.set_title("Adam" if arm == "adam" else "Adam with width-aware (muP) steps")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("final training loss (whole training set)")
    axes[-1].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--widths", default="32,128,512,2048")
    parser.add_argument(
        "--rates",
        default=None,
        help="comma-separated rates (default: 12 points, factor 2 apart, 1.2e-4 to 0.25)",
    )
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--image-size", type=int, default=14)
    parser.add_argument("--base-width", type=float, default=128.0)
    parser.add_argument("--readout", choices=("zero", "standard"), default="zero")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    widths = [int(w) for w in args.widths.split(",")]
    if args.rates:
        rates = np.array([float(r) for r in args.rates.split(",")])
    else:
        rates = 0.25 * 2.0 ** -np.arange(11, -1, -1)
    args.out.mkdir(parents=True, exist_ok=True)
    images, labels = load_digits(args.image_size)
    rows, best = [], {arm: {} for arm in ARMS}
    total, done, start = len(ARMS) * len(widths), 0, time.time()
    for arm in ARMS:
        for width in widths:
            t0 = time.time()
            losses = sweep_width(
                arm,
                width,
                rates,
                images,
                labels,
                steps=args.steps,
                batch_size=args.batch_size,
                base_width=args.base_width,
                readout=args.readout,
                seed=args.seed,
            )
            done += 1
            best[arm][width] = best_index(losses)
            rows += [
                dict(arm=arm, width=width, rate=float(r), loss=float(v))
                for r, v in zip(rates, losses, strict=True)
            ]
            print(
                f"[{done}/{total}] {arm:5s} width {width:5d}: best rate "
                f"{rates[best[arm][width]]:.3g} (index {best[arm][width]}), loss "
                f"{losses[best[arm][width]]:.4g}, {time.time() - t0:.0f} s "
                f"({time.time() - start:.0f} s in all)",
                flush=True,
            )
    with open(args.out / "width_sweep.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["arm", "width", "rate", "loss"])
        writer.writeheader()
        writer.writerows(rows)
    plot(rows, rates, widths, args.out / "width_sweep.png")
    print(f"\nbest rate per width (grid index; grid factor {rates[1] / rates[0]:.3g}):")
    for arm in ARMS:
        idx = [best[arm][w] for w in widths]
        move = max(idx) - min(idx)
        text = ", ".join(f"{w}: {rates[i]:.3g} [{i}]" for w, i in zip(widths, idx, strict=True))
        print(f"  {arm:5s} {text}; largest move {move} grid point{'s' if move != 1 else ''}")
    print(f"wrote {args.out / 'width_sweep.csv'} and {args.out / 'width_sweep.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
