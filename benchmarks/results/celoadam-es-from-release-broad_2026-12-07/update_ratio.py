"""Is there a spike for a guard to catch? Celo-Adam's step on one task, every 50 steps.

A diagnostic (not a tuning): trains the task (heldout's ``ImageMLP_Mnist5k_28_Relu128``
by default) for 1000 steps from seed 0 with a Celo-Adam theta file and prints, per
50-step window, the mean training loss, the window's maximum and median of the largest
per-tensor RMS of Adam's normalized gradient ``sqrt(mean(g^2 / v_hat))`` (several when
the second moment lags a sudden large gradient), the median over tensors of the effective step (the
parameters' change projected on Adam's direction ``m_hat / (sqrt(v_hat) + eps)``) and
the outer-valid loss (5 batches) at the window's end.

Usage: python update_ratio.py THETA [TASK]
"""

import sys

import jax
import jax.numpy as jnp
import numpy as np
from _diagnostics import STEPS as T
from _diagnostics import load_theta, start, valid_loss_fn


def main():
    trained = load_theta(sys.argv[1])
    opt = trained.lopt.opt_fn(trained.theta)
    b1 = trained.lopt.initial_momentum_decays[-1]
    task_name = sys.argv[2] if len(sys.argv) > 2 else "ImageMLP_Mnist5k_28_Relu128"
    task, state, train, valid_batches = start(task_name, opt, 0)
    valid_loss = valid_loss_fn(task, valid_batches)

    @jax.jit
    def step(state, batch, key):
        p, ms = opt.get_params_state(state)
        grad_fn = jax.value_and_grad(task.loss_with_state, has_aux=True)
        (loss, ms), g = grad_fn(p, ms, key, batch)
        new = opt.update(state, g, loss, model_state=ms)
        t1 = state.iteration + 1.0
        b2 = 0.999  # the bias correction's decay (the release's; ~1 after a few hundred steps)

        def ratio(g, v):
            return jnp.sqrt(jnp.mean(jnp.square(g) / (v / (1 - b2**t1) + 1e-16)))

        def lr_of(p0, p1, m, v):
            d = (m / (1 - b1**t1)) / (1e-8 + jnp.sqrt(v / (1 - b2**t1) + 1e-10))
            return -jnp.sum((p1 - p0) * d) / jnp.sum(d * d)

        ratios = jax.tree_util.tree_leaves(jax.tree_util.tree_map(ratio, g, new.v))
        lrs = jax.tree_util.tree_leaves(
            jax.tree_util.tree_map(lr_of, state.params, new.params, new.m, new.v)
        )
        return new, loss, jnp.max(jnp.stack(ratios)), jnp.median(jnp.stack(lrs))

    rows = []
    for t in range(T):
        state, loss, r, lr = step(state, next(train), jax.random.PRNGKey(t))
        rows.append([float(loss), float(r), float(lr)])
        if t % 50 == 49:
            a = np.array(rows[-50:])
            print(
                f"{t + 1:5d} loss {np.mean(a[:, 0]):.4g} ratio max {np.max(a[:, 1]):.3g} "
                f"med {np.median(a[:, 1]):.3g} lr {np.median(a[:, 2]):.3g} "
                f"valid {float(valid_loss(*opt.get_params_state(state))):.4g}",
                flush=True,
            )


if __name__ == "__main__":
    main()
