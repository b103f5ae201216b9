"""Train a Flax Linen model with a learned optimizer through a ``TrainState``.

::

    python examples/flax_linen_trainstate.py --steps 500                  # the shipped theta
    python examples/flax_linen_trainstate.py --steps 500 --lopt HyperV2   # VeLO's architecture

Flax's ``TrainState.apply_gradients`` cannot pass the loss to the optimizer, which
learned optimizers such as ``HyperV2`` (VeLO) and ``RNNMLPLOpt`` read as a feature;
``learnopt.flax_utils.TrainState`` is the same state with
``apply_gradients(grads=..., loss=...)``. ``--lopt`` is ``pretrained`` (the theta that
ships with learnopt, ``learnopt.pretrained.load()``) or a registered learned optimizer
at its initial theta (``HyperV2`` at its initial theta is untrained: its loss stays
finite but need not fall). The data are scikit-learn's bundled 8x8 digits (offline).
"""

from __future__ import annotations

import argparse
from typing import Any

import flax.linen as nn
import jax
import numpy as np
import optax
from sklearn.datasets import load_digits

from learnopt import pretrained
from learnopt.flax_utils import TrainState
from learnopt.learned_optimizers import base as lopt_base


class MLP(nn.Module):
    """A 64-``hidden``-10 ReLU network."""

    hidden: int = 64

    @nn.compact
    def __call__(self, x):
        x = nn.relu(nn.Dense(self.hidden)(x))
        return nn.Dense(10)(x)


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
    model = MLP()
    params = model.init(jax.random.PRNGKey(seed), images[:1])["params"]
    tx = make_tx(lopt, steps, seed=seed, name=name, **lopt_kwargs)
    state = TrainState.create(apply_fn=model.apply, params=params, tx=tx)

    @jax.jit
    def train_step(state, x, y):
        def loss_fn(params):
            logits = state.apply_fn({"params": params}, x)
            return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

        loss, grads = jax.value_and_grad(loss_fn)(state.params)
        return state.apply_gradients(grads=grads, loss=loss), loss

    rng = np.random.default_rng(seed)
    losses = []
    for _ in range(steps):
        idx = rng.integers(0, len(images), batch_size)
        state, loss = train_step(state, images[idx], labels[idx])
        losses.append(float(loss))
    return losses[0], float(np.mean(losses[-max(1, steps // 10) :]))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--lopt", default="pretrained", help="pretrained or an architecture")
    parser.add_argument("--name", default=None, help="a pretrained theta (default: the default)")
    args = parser.parse_args()
    first, last = main(args.steps, args.lopt, name=args.name)
    print(f"{args.lopt}: loss {first:.3f} -> {last:.4f} (mean of the last 10% of steps)")
