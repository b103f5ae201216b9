"""Train a Flax NNX model with a learned optimizer through ``nnx.Optimizer``.

::

    python examples/flax_nnx.py --steps 500                  # the shipped theta
    python examples/flax_nnx.py --steps 500 --lopt HyperV2   # VeLO's architecture

``nnx.Optimizer.update(model, grads, **kwargs)`` passes its keyword arguments on to the
optax update, so a learned optimizer that reads the loss gets it as
``optimizer.update(model, grads, value=loss)``; nothing else changes. ``--lopt`` is
``pretrained`` (``learnopt.pretrained.load()``) or a registered learned optimizer at its
initial theta (``HyperV2`` at its initial theta is untrained: its loss stays finite but
need not fall). The data are scikit-learn's bundled 8x8 digits (offline).
"""

from __future__ import annotations

import argparse
from typing import Any

import jax
import numpy as np
import optax
from flax import nnx
from sklearn.datasets import load_digits

from learnopt import pretrained
from learnopt.learned_optimizers import base as lopt_base


class MLP(nnx.Module):
    """A 64-``hidden``-10 ReLU network."""

    def __init__(self, hidden: int = 64, *, rngs: nnx.Rngs):
        self.hidden = nnx.Linear(64, hidden, rngs=rngs)
        self.out = nnx.Linear(hidden, 10, rngs=rngs)

    def __call__(self, x):
        return self.out(nnx.relu(self.hidden(x)))


def make_tx(
    lopt: str, steps: int, seed: int = 0, name: str | None = None, **lopt_kwargs: Any
) -> optax.GradientTransformationExtraArgs:
    """The optax form of a learned optimizer for a ``steps``-step run.

    Args:
      lopt: ``"pretrained"`` (a shipped theta) or a registered learned optimizer name
        (built with ``lopt_kwargs``, at its initial theta from ``seed``).
      steps: the planned number of steps (architectures that read ``t / T`` use it).
      seed: the seed of the initial theta.
      name: the pretrained entry (None: ``pretrained.DEFAULT``).
      **lopt_kwargs: constructor arguments of the registered learned optimizer.

    Returns:
      An ``optax.GradientTransformationExtraArgs``.
    """
    if lopt == "pretrained":
        return pretrained.load(name or pretrained.DEFAULT).as_optax(num_steps=steps)
    learned = lopt_base.get_learned_optimizer(lopt, **lopt_kwargs)
    theta = learned.init(jax.random.PRNGKey(seed))
    return learned.as_optax(theta, num_steps=steps)


def loss_fn(model: MLP, x: jax.Array, y: jax.Array) -> jax.Array:
    """Mean softmax cross-entropy of ``model`` on the batch ``(x, y)``."""
    return optax.softmax_cross_entropy_with_integer_labels(model(x), y).mean()


@nnx.jit
def train_step(model: MLP, optimizer: nnx.Optimizer, x: jax.Array, y: jax.Array) -> jax.Array:
    """One step in place on ``model`` and ``optimizer``; returns the loss before it."""
    loss, grads = nnx.value_and_grad(loss_fn)(model, x, y)
    optimizer.update(model, grads, value=loss)  # the loss reaches the learned optimizer
    return loss


def main(
    steps: int = 500,
    lopt: str = "pretrained",
    batch_size: int = 128,
    seed: int = 0,
    name: str | None = None,
    **lopt_kwargs: Any,
) -> tuple[float, float]:
    """Trains the MLP for ``steps`` steps.

    Args:
      steps: training steps.
      lopt: ``"pretrained"`` or a registered learned optimizer name (see :func:`make_tx`).
      batch_size: examples per step, drawn with replacement.
      seed: the seed of the model, the batches and an initial theta.
      name: the pretrained entry (None: the default).
      **lopt_kwargs: constructor arguments of the registered learned optimizer.

    Returns:
      ``(first_loss, last_loss)``: the loss of the first step and the mean loss of the
      last 10% of steps.
    """
    digits = load_digits()
    images = digits.data.astype(np.float32) / 16.0
    labels = digits.target.astype(np.int32)
    model = MLP(rngs=nnx.Rngs(seed))
    tx = make_tx(lopt, steps, seed=seed, name=name, **lopt_kwargs)
    optimizer = nnx.Optimizer(model, tx, wrt=nnx.Param)

    rng = np.random.default_rng(seed)
    losses = []
    for _ in range(steps):
        idx = rng.integers(0, len(images), batch_size)
        losses.append(float(train_step(model, optimizer, images[idx], labels[idx])))
    return losses[0], float(np.mean(losses[-max(1, steps // 10) :]))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--lopt", default="pretrained", help="pretrained or an architecture")
    parser.add_argument("--name", default=None, help="a pretrained theta (default: the default)")
    args = parser.parse_args()
    first, last = main(args.steps, args.lopt, name=args.name)
    print(f"{args.lopt}: loss {first:.3f} -> {last:.4f} (mean of the last 10% of steps)")
