"""Train a Flax model with learnopt's pretrained learned optimizer in a plain Optax loop.

::

    python examples/pretrained_flax_mlp.py --steps 1000

The learned optimizer is one line away (``learnopt.pretrained.load``) and behaves like
any optax transformation: here it is chained with decoupled weight decay. ``update``
gets the loss as ``value=loss``: the default entry ignores it, but entries that read it
(``Celo``, ``CeloAdam``: ``pretrained.reads(name)`` says which) need it, so the loop
passes it always; ``as_optax(num_steps=...)`` tells entries that condition on training
progress how long the run is. The data are scikit-learn's bundled 8x8 digits (offline).
"""

from __future__ import annotations

import argparse

import flax.linen as nn
import jax
import numpy as np
import optax
from sklearn.datasets import load_digits

from learnopt import pretrained


class MLP(nn.Module):
    """A 64-128-10 ReLU network."""

    @nn.compact
    def __call__(self, x):
        x = nn.relu(nn.Dense(128)(x))
        return nn.Dense(10)(x)


def main(steps: int = 1000, batch_size: int = 128, seed: int = 0, name: str | None = None):
    """Trains the MLP for ``steps`` steps; returns ``(first_loss, last_loss, accuracy)``."""
    digits = load_digits()
    images = digits.data.astype(np.float32) / 16.0
    labels = digits.target.astype(np.int32)
    model = MLP()
    params = model.init(jax.random.PRNGKey(seed), images[:1])["params"]

    trained = pretrained.load(name or pretrained.DEFAULT)  # the learned optimizer and theta
    tx = trained.as_optax(num_steps=steps, weight_decay=1e-4)
    opt_state = tx.init(params)

    def loss_fn(params, x, y):
        logits = model.apply({"params": params}, x)
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

    @jax.jit
    def train_step(params, opt_state, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        updates, opt_state = tx.update(grads, opt_state, params, value=loss)
        return optax.apply_updates(params, updates), opt_state, loss

    rng = np.random.default_rng(seed)
    losses = []
    for _ in range(steps):
        idx = rng.integers(0, len(images), batch_size)
        params, opt_state, loss = train_step(params, opt_state, images[idx], labels[idx])
        losses.append(float(loss))
    logits = model.apply({"params": params}, images)
    accuracy = float(np.mean(np.argmax(logits, -1) == labels))
    return losses[0], float(np.mean(losses[-max(1, steps // 10) :])), accuracy


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--name", default=None, help="a pretrained theta (default: the default)")
    args = parser.parse_args()
    first, last, acc = main(args.steps, name=args.name)
    print(f"loss {first:.3f} -> {last:.4f} (mean of the last 10% of steps); accuracy {acc:.3f}")
