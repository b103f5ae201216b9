"""Where a memorizing net's validation loss comes from: accuracy or confidence on errors.

A diagnostic (not a tuning): every optimizer named on the command line trains an image
MLP (``--task``; heldout's ``ImageMLP_Mnist5k_28_Relu128`` by default) for 1000
steps from the same initial parameters and batches per seed; then, on 5 outer-valid
batches (640 images), it reports the mean validation loss, the accuracy, the share of the
validation loss carried by the misclassified images and the first and last weight
matrices' Frobenius norms. Optimizers: ``wc<lr>`` (warmup-cosine Adam), ``adam<lr>``
(constant Adam), a theta file or a ``learnopt.pretrained`` entry's name.

Usage (from the repository root, learnopt installed):
  python valid_confidence.py [--task NAME] [--seeds 0,1] wc0.0316 adam0.01 theta.msgpack
"""

import argparse
import sys

import jax
import jax.numpy as jnp
import numpy as np
from _diagnostics import STEPS, load_theta, start

from learnopt.optimizers import nadamw
from learnopt.optimizers.base import OPTIMIZERS


def make_opt(spec):
    if spec.startswith("wc"):
        return nadamw.adam_warmup_cosine(float(spec[2:]))
    if spec.startswith("adam"):
        return OPTIMIZERS.get("Adam", learning_rate=float(spec[4:]))
    trained = load_theta(spec)
    return trained.lopt.opt_fn(trained.theta)


def run(spec, seed, task_name):
    opt = make_opt(spec)
    task, state, train, valid_batches = start(task_name, opt, seed)

    @jax.jit
    def step(state, batch, key):
        p, ms = opt.get_params_state(state)
        grad_fn = jax.value_and_grad(task.loss_with_state, has_aux=True)
        (loss, ms), grads = grad_fn(p, ms, key, batch)
        return opt.update(state, grads, loss, model_state=ms), loss

    losses = []
    for t in range(STEPS):
        state, loss = step(state, next(train), jax.random.PRNGKey(STEPS * seed + t))
        losses.append(float(loss))
        if t % 250 == 249:
            print(f"{spec} seed {seed}: step {t + 1}", file=sys.stderr, flush=True)
    p = opt.get_params_state(state)[0]
    nll, right = [], []
    for batch in valid_batches:
        logp = jax.nn.log_softmax(task.logits(p, batch["image"]))
        nll.append(-jnp.take_along_axis(logp, batch["label"][:, None], 1)[:, 0])
        right.append(jnp.argmax(logp, -1) == batch["label"])
    nll, right = np.concatenate(nll), np.concatenate(right)
    norms = [float(jnp.linalg.norm(p[n]["w"])) for n in task._linear_names()]
    return {
        "final_train": np.mean(losses[-100:]),
        "valid_loss": nll.mean(),
        "accuracy": right.mean(),
        "share_on_errors": nll[~right].sum() / nll.sum(),
        "norm_input": norms[0],
        "norm_output": norms[-1],
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("optimizers", nargs="+")
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--task", default="ImageMLP_Mnist5k_28_Relu128")
    args = parser.parse_args()
    keys = None
    for spec in args.optimizers:
        for seed in (int(s) for s in args.seeds.split(",")):
            row = run(spec, seed, args.task)
            if keys is None:
                keys = list(row)
                print(",".join(["optimizer", "seed", *keys]))
            print(",".join([spec.split("/")[-1], str(seed), *(f"{row[k]:.5g}" for k in keys)]))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
