"""Hand-written single-jit JAX baselines for the benchmarks (no learnopt code inside).

The same maths as learnopt's walkthrough and gradient estimators on the 8x8 digits MLP
(64-32-10 ReLU, softmax cross-entropy clipped to [0, 1.5 log 10]) trained by Adam with
hyperparameters from ``theta`` (LearnableAdam), written directly as one jitted function
per outer step, as an expert would write it by hand. Used only as the reference that
learnopt's per-step time is divided by.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

SIZES = (64, 32, 10)
MAX_LOSS = 1.5 * math.log(10)


def mlp_init(key):
    keys = jax.random.split(key, len(SIZES) - 1)
    params = {}
    for i, (k, fi, fo) in enumerate(zip(keys, SIZES[:-1], SIZES[1:], strict=True)):
        w = jax.random.truncated_normal(k, -2.0, 2.0, (fi, fo), jnp.float32) / math.sqrt(fi)
        params[f"linear_{i}"] = {"w": w, "b": jnp.zeros((fo,), jnp.float32)}
    return params


def mlp_loss(params, batch):
    x = batch["image"].reshape(batch["image"].shape[0], -1)
    x = jax.nn.relu(x @ params["linear_0"]["w"] + params["linear_0"]["b"])
    logits = x @ params["linear_1"]["w"] + params["linear_1"]["b"]
    logp = jax.nn.log_softmax(logits)
    return -jnp.mean(jnp.take_along_axis(logp, batch["label"][:, None], axis=1))


def _sqrt0(x):
    pos = x > 0
    return jnp.where(pos, jnp.sqrt(jnp.where(pos, x, 1.0)), 0.0)


def inner_init(key):
    p = mlp_init(key)
    z = jax.tree.map(jnp.zeros_like, p)
    return {"p": p, "m": z, "v": z, "t": jnp.zeros((), jnp.int32)}


def inner_step(theta, st, batch):
    """One Adam step with LearnableAdam's hyperparameters; returns (state, meta-loss)."""
    lr, eps = jnp.exp(theta["log_lr"]), jnp.exp(theta["log_epsilon"])
    b1, b2 = 1 - jnp.exp(theta["one_minus_beta1"]), 1 - jnp.exp(theta["one_minus_beta2"])
    loss, g = jax.value_and_grad(mlp_loss)(st["p"], batch)
    t = st["t"] + 1
    m = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g, st["m"], g)
    v = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * g * g, st["v"], g)
    c1, c2 = 1 - b1 ** t.astype(jnp.float32), 1 - b2 ** t.astype(jnp.float32)
    p = jax.tree.map(lambda p, m, v: p - lr * (m / c1) / (_sqrt0(v / c2) + eps), st["p"], m, v)
    return {"p": p, "m": m, "v": v, "t": t}, jnp.clip(loss, 0.0, MAX_LOSS)


def unroll(theta, st, batches):
    """``lax.scan`` of inner steps over ``batches`` ``[K, B, ...]``; returns (state, losses)."""
    return jax.lax.scan(lambda s, b: inner_step(theta, s, b), st, batches)


def outer_adam(theta, m, v, t, g, lr=1e-2, b1=0.9, b2=0.999, eps=1e-8):
    t = t + 1
    m = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g, m, g)
    v = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * g * g, v, g)
    c1, c2 = 1 - b1 ** t.astype(jnp.float32), 1 - b2 ** t.astype(jnp.float32)
    theta = jax.tree.map(lambda p, m, v: p - lr * (m / c1) / (jnp.sqrt(v / c2) + eps), theta, m, v)
    return theta, m, v, t


def init_theta():
    f = lambda x: jnp.asarray(x, jnp.float32)
    return {
        "log_epsilon": f(math.log(1e-8)),
        "log_lr": f(math.log(1e-3)),
        "one_minus_beta1": f(math.log(0.1)),
        "one_minus_beta2": f(math.log(0.001)),
    }


def outer_init():
    theta = init_theta()
    z = jax.tree.map(jnp.zeros_like, theta)
    return {"theta": theta, "m": z, "v": z, "t": jnp.zeros((), jnp.int32)}


def _apply(outer, g):
    theta, m, v, t = outer_adam(outer["theta"], outer["m"], outer["v"], outer["t"], g)
    return {"theta": theta, "m": m, "v": v, "t": t}


# ----------------------------------------------------------------------- estimators
def full_grad_step(outer, key, data):
    """Walkthrough / FullGrad: backprop through one fresh K-step run per task."""

    def meta_loss(theta):
        n = data["label"].shape[1]
        st = jax.vmap(inner_init)(jax.random.split(key, n))
        batches = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), data)  # [n, K, B...]
        _, losses = jax.vmap(unroll, in_axes=(None, 0, 0))(theta, st, batches)
        return jnp.mean(losses)

    loss, g = jax.value_and_grad(meta_loss)(outer["theta"])
    return _apply(outer, g), loss


def _population_unroll(theta_vec, st, data):
    batches = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), data)
    return jax.vmap(unroll, in_axes=(0, 0, 0))(theta_vec, st, batches)


def _reset(st, steps, lengths, key):
    done = steps >= lengths
    fresh = jax.vmap(inner_init)(jax.random.split(key, done.shape[0]))

    def sel(a, b):
        return jnp.where(done.reshape(done.shape + (1,) * (a.ndim - 1)), a, b)

    st = jax.lax.cond(jnp.any(done), lambda: jax.tree.map(sel, fresh, st), lambda: st)
    return st, jnp.where(done, 0, steps), done


def tbptt_step(outer, est, key, data, length):
    theta = outer["theta"]
    n = data["label"].shape[1]

    def meta_loss(theta):
        theta_vec = jax.tree.map(lambda x: jnp.broadcast_to(x, (n,)), theta)
        st, losses = _population_unroll(theta_vec, est["st"], data)
        return jnp.mean(losses), st

    (loss, st), g = jax.value_and_grad(meta_loss, has_aux=True)(theta)
    steps = est["steps"] + data["label"].shape[0]
    st, steps, _ = _reset(st, steps, length, key)
    return _apply(outer, g), {"st": st, "steps": steps}, loss


def _perturb(theta, key, n, std):
    leaves, tdef = jax.tree.flatten(theta)
    ks = jax.random.split(key, len(leaves))
    eps = [std * jax.random.normal(k, (n,), jnp.float32) for k in ks]
    return jax.tree.unflatten(tdef, eps)


def _antithetic(theta, eps, pos, neg, data):
    both = jax.tree.map(lambda t, e: jnp.concatenate([t + e, t - e]), theta, eps)
    st = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), pos, neg)
    data2 = jax.tree.map(lambda x: jnp.concatenate([x, x], axis=1), data)
    st, losses = _population_unroll(both, st, data2)
    n = eps["log_lr"].shape[0]
    ml = jnp.mean(losses, axis=1)
    half = lambda t, i: jax.tree.map(lambda x: x[i * n : (i + 1) * n], t)
    return half(st, 0), half(st, 1), ml[:n], ml[n:]


def _es(eps, lp, ln, std):
    c = (lp - ln) / (2 * std**2)
    return jax.tree.map(lambda e: jnp.mean(c * e), eps)


def full_es_step(outer, key, data, std):
    theta = outer["theta"]
    n = data["label"].shape[1]
    k1, k2 = jax.random.split(key)
    eps = _perturb(theta, k1, n, std)
    st = jax.vmap(inner_init)(jax.random.split(k2, n))
    _, _, lp, ln = _antithetic(theta, eps, st, st, data)
    return _apply(outer, _es(eps, lp, ln, std)), jnp.mean((lp + ln) / 2)


def tes_step(outer, est, key, data, std, length):
    theta = outer["theta"]
    n = data["label"].shape[1]
    k1, k2 = jax.random.split(key)
    eps = _perturb(theta, k1, n, std)
    pos, _, lp, ln = _antithetic(theta, eps, est["st"], est["st"], data)
    steps = est["steps"] + data["label"].shape[0]
    st, steps, _ = _reset(pos, steps, length, k2)
    return _apply(outer, _es(eps, lp, ln, std)), {"st": st, "steps": steps}, jnp.mean(lp)


def pes_step(outer, est, key, data, std, length):
    theta = outer["theta"]
    n = data["label"].shape[1]
    k1, k2 = jax.random.split(key)
    eps = _perturb(theta, k1, n, std)
    pos, neg, lp, ln = _antithetic(theta, eps, est["pos"], est["neg"], data)
    acc = jax.tree.map(jnp.add, est["acc"], eps)
    g = _es(acc, lp, ln, std)
    steps = est["steps"] + data["label"].shape[0]
    pos, new_steps, done = _reset(pos, steps, length, k2)
    neg, _, _ = _reset(neg, steps, length, k2)
    acc = jax.tree.map(lambda a: jnp.where(done, 0.0, a), acc)
    est = {"pos": pos, "neg": neg, "acc": acc, "steps": new_steps}
    return _apply(outer, g), est, jnp.mean(lp)


def nres_step(outer, est, key, data, std, length):
    theta = outer["theta"]
    n = data["label"].shape[1]
    k1, k2 = jax.random.split(key)
    eps = est["eps"]
    pos, neg, lp, ln = _antithetic(theta, eps, est["pos"], est["neg"], data)
    g = _es(eps, lp, ln, std)
    steps = est["steps"] + data["label"].shape[0]
    pos, new_steps, done = _reset(pos, steps, length, k2)
    neg, _, _ = _reset(neg, steps, length, k2)
    fresh = _perturb(theta, k1, n, std)
    eps = jax.tree.map(lambda f, e: jnp.where(done, f, e), fresh, eps)
    est = {"pos": pos, "neg": neg, "eps": eps, "steps": new_steps}
    return _apply(outer, g), est, jnp.mean(lp)


def init_truncated(key, n, kind, std):
    k1, k2, k3 = jax.random.split(key, 3)
    st = jax.vmap(inner_init)(jax.random.split(k1, n))
    steps = jax.random.randint(k2, (n,), 0, 50, jnp.int32)
    if kind in ("tbptt", "tes"):
        return {"st": st, "steps": steps}
    if kind == "pes":
        acc = jax.tree.map(lambda t: jnp.zeros((n,), jnp.float32), init_theta())
        return {"pos": st, "neg": st, "acc": acc, "steps": steps}
    return {"pos": st, "neg": st, "eps": _perturb(init_theta(), k3, n, std), "steps": steps}
