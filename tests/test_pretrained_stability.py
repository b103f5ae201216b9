"""The shipped pretrained optimizer is stable from its first step on a Flax conv net.

A learned optimizer dropped into a user's loop must not blow the loss up before it has
seen enough gradients to adapt: on a small conv net over the bundled 8x8 digits, the
training loss of the first steps stays within 10% of its initial value (issue 17).
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from sklearn.datasets import load_digits

from learnopt import pretrained

FIRST_STEPS = 20
RUN_STEPS = 1000  # the run length the optimizer is told (it reads t / T)


class ConvNet(nn.Module):
    """Two 3x3 convolutions (8, 16 channels), global mean pool, a linear head."""

    @nn.compact
    def __call__(self, x):
        x = nn.relu(nn.Conv(8, (3, 3))(x))
        x = nn.relu(nn.Conv(16, (3, 3), strides=2)(x))
        return nn.Dense(10)(x.mean(axis=(1, 2)))


def _first_losses(tx: optax.GradientTransformationExtraArgs) -> np.ndarray:
    """The training losses of the first FIRST_STEPS steps of ConvNet on the digits."""
    digits = load_digits()
    images = (digits.data.astype(np.float32) / 16.0).reshape(-1, 8, 8, 1)
    labels = digits.target.astype(np.int32)
    model = ConvNet()
    params = model.init(jax.random.PRNGKey(0), images[:1])["params"]

    def loss_fn(p, x, y):
        logits = model.apply({"params": p}, x)
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

    @jax.jit
    def steps(params, xs, ys):
        def body(carry, batch):
            p, s = carry
            loss, g = jax.value_and_grad(loss_fn)(p, *batch)
            u, s = tx.update(g, s, p, value=loss)
            return (optax.apply_updates(p, u), s), loss

        return jax.lax.scan(body, (params, tx.init(params)), (xs, ys))[1]

    idx = np.random.default_rng(0).integers(0, len(images), (FIRST_STEPS, 128))
    return np.asarray(steps(params, jnp.asarray(images[idx]), jnp.asarray(labels[idx])))


def _raised(first_losses: np.ndarray) -> bool:
    return bool(first_losses.max() > 1.1 * first_losses[0])


def test_the_shipped_optimizer_never_raises_the_loss_10_percent_in_its_first_steps():
    first_losses = _first_losses(pretrained.load().as_optax(num_steps=RUN_STEPS))
    assert np.all(np.isfinite(first_losses))
    worst = first_losses.max()
    assert worst <= 1.1 * first_losses[0], (
        f"loss {first_losses[0]:.3f} at step 0 rose to {worst:.3f} at step "
        f"{int(first_losses.argmax())} (first {FIRST_STEPS} steps: {np.round(first_losses, 3)})"
    )


def test_the_stability_check_catches_an_optimizer_that_jumps():
    # Adam at rate 1 throws the conv net off at once: what the check must refuse.
    assert _raised(_first_losses(optax.with_extra_args_support(optax.adam(1.0))))
    assert not _raised(_first_losses(optax.with_extra_args_support(optax.adam(1e-3))))
