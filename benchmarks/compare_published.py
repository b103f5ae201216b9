"""The published learned optimizers in learnopt against the releases' own code, step by step.

Runs the Celo release's ``celo/optimizers/celo.py``, ``celo_adam.py`` and ``celo2.py``
(github.com/amoudgl/celo at 66d9761, read from a clone or the fetched mirror) **on
learnopt**, with only the import prefix ``learned_optimization`` -> ``learnopt`` changed,
beside learnopt's own ``Celo``, ``CeloAdam`` and ``Celo2``, with the same weights, on the
same fixed inputs: a 1-D, a 2-D and a 4-D (conv kernel) tensor, one gradient and one
loss per step, the run length set. Prints, per entry and tensor kind, the largest
relative difference of the parameters over the steps (``max |a - b| / max |b|`` per
tensor after each step) and of the distance moved from the start (the same on
``p_t - p_0``, which the parameters' own float32 rounding bounds at about 1e-5 for a
move 100x smaller than the parameters), and exits 1 if a parameter difference is
above ``--tol`` (1e-5). That the three files import and run here is itself the port
check.

::

    python benchmarks/compare_published.py --source /path/to/amoudgl/celo
    python benchmarks/compare_published.py --source DIR --record   # the pinned tests' numbers

``--source`` is a clone (work tree or bare, e.g. the ``fetch`` mirror); the files are
read at the pinned commit. The release needs haiku, gin, chex and absl, which learnopt
does not depend on (``pip install dm-haiku gin-config chex absl-py``). Each reference is
built by the release's own ``celo/factory.py`` (``get_optimizer("celo")``,
``("celo_adam")``, ``("celo2")`` with its default flags), which imports on learnopt too
(its tasks module included).

``--mulo-source DIR`` (a clone of bentherien/mu_learned_optimization, muLO, arXiv
2406.00153) adds a port check of its optimizer files: ``src/mup_adafac_mlp_lopt.py``,
``mup_hyper.py``, ``fed_adafac_mlp_lopt.py`` and ``fed_mlp_lopt.py`` imported on learnopt
with the prefix changed, and muLO's two learned optimizers run 10 steps on the fixed case
(learnopt has no muLO architecture to compare them with: the check is that they run
and move the parameters, finitely).

``--record`` prints the reference's parameters after the 10 steps of the pinned case
(the same case as ``tests/test_celo.py``'s and ``tests/test_celo_adam.py``'s pinned
tests): the numbers those tests hold.
"""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

import numpy as np

COMMIT = "66d976116f39da286951f0c5e0a18eee8d1fd66b"
DEFAULT_SOURCE = Path("/work/.mirror/amoudgl+celo/repo")
MULO_COMMIT = "e160d5481c5445f30996f308009ab07ba3d339e7"
MULO_FILES = ("mup_adafac_mlp_lopt", "mup_hyper", "fed_adafac_mlp_lopt", "fed_mlp_lopt")

#: The release's factory names (``celo/factory.py``'s ``get_optimizer``) of each entry.
RELEASE = {"Celo": "celo", "CeloAdam": "celo_adam", "Celo2": "celo2"}


#: The tensor kinds of the fixed case, by their place in the params tree.
KINDS = {"1-D": ("bias", "b"), "2-D": ("dense", "w"), "4-D conv": ("conv", "w")}


def case(steps: int = 10, seed: int = 29):
    """The fixed inputs: params, ``steps`` gradients and losses, run length ``2 * steps``.

    Returns:
      ``(params, grads, losses, num_steps)``; params ``{"bias": {"b": [7]}, "dense":
      {"w": [5, 3]}, "conv": {"w": [3, 3, 2, 4]}}`` (the 1-D tensor is named ``b`` so that
      Celo2's ``/b$`` rule sends it to Adam), float32.
    """
    rng = np.random.default_rng(seed)
    shapes = {"bias": (7,), "dense": (5, 3), "conv": (3, 3, 2, 4)}
    names = {"bias": "b", "dense": "w", "conv": "w"}

    def draw(scale):
        return {
            k: {names[k]: (rng.normal(size=s) * scale).astype(np.float32)}
            for k, s in shapes.items()
        }

    params = draw(0.3)
    grads = [draw(0.1) for _ in range(steps)]
    losses = [np.float32(2.0 * 0.9**i) for i in range(steps)]
    return params, grads, losses, 2 * steps


def extract_release(source: Path, dest: Path, commit: str = COMMIT, folder: str = "celo") -> Path:
    """``folder`` of ``source`` at ``commit`` in ``dest``, imports re-prefixed to learnopt."""
    git_dir = source / ".git" if (source / ".git").exists() else source
    data = subprocess.run(
        ["git", f"--git-dir={git_dir}", "archive", "--format=tar", commit, folder],
        capture_output=True,
        check=True,
    ).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")
    for path in (dest / folder).rglob("*.py"):
        path.write_text(path.read_text().replace("learned_optimization", "learnopt"))
    return dest


def mulo_port_check(source: Path, dest: Path) -> bool:
    """Imports muLO's optimizer files on learnopt and runs its two learned optimizers."""
    import jax
    import jax.numpy as jnp

    sys.path.insert(0, str(extract_release(source, dest, MULO_COMMIT, "src") / "src"))
    modules = {name: importlib.import_module(name) for name in MULO_FILES}
    print(f"muLO (mu_learned_optimization@{MULO_COMMIT[:7]}): {', '.join(MULO_FILES)} import")
    params, grads, losses, num_steps = case(10)
    ok = True
    for module, cls in (("mup_adafac_mlp_lopt", "MuAdafacMLPLOpt"), ("mup_hyper", "MuHyperV2")):
        lopt = getattr(modules[module], cls)()
        opt = lopt.opt_fn(lopt.init(jax.random.PRNGKey(0)))
        p = jax.tree_util.tree_map(jnp.asarray, params)
        # muLO reads each tensor's muP step multiplier from the model state (1: standard).
        model_state = {"mup_lrs_to_use": jax.tree_util.tree_map(lambda _: 1.0, p)}
        state = opt.init(p, model_state=model_state, num_steps=num_steps)
        for i, (g, loss) in enumerate(zip(grads, losses, strict=True)):
            g = jax.tree_util.tree_map(jnp.asarray, g)
            state = opt.update(
                state, g, loss=jnp.float32(loss), model_state=model_state, key=jax.random.key(i)
            )
        new = opt.get_params(state)
        moved = sum(
            float(jnp.abs(a - b).sum())
            for a, b in zip(
                jax.tree_util.tree_leaves(new), jax.tree_util.tree_leaves(p), strict=True
            )
        )
        finite = all(bool(jnp.all(jnp.isfinite(x))) for x in jax.tree_util.tree_leaves(new))
        ok &= finite and moved > 0
        print(f"  {cls}: 10 steps, finite {finite}, summed |change| {moved:.4g}")
    return ok


def released_theta(source: Path, name: str, template):
    """The entry's theta: the shipped learnopt entry, restored into ``template``'s layout."""
    import flax.serialization

    from learnopt import pretrained

    if name not in pretrained.names():
        return None
    import jax

    theta = pretrained.load(name).theta
    as_bytes = flax.serialization.to_bytes(jax.tree_util.tree_map(np.asarray, theta))
    # learnopt's layout is the release's (the same Haiku names), so the bytes restore into
    # the release's template; a mismatch raises here.
    return flax.serialization.from_bytes(template, as_bytes)


def release_optimizer(name: str):
    """The release's learned optimizer for entry ``name``, built by its own factory."""
    from absl import flags

    factory = importlib.import_module("celo.factory")
    if not flags.FLAGS.is_parsed():
        flags.FLAGS(["compare_published"])  # the factory's default flags
    return factory.get_optimizer(RELEASE[name])


def run(opt, params, grads, losses, num_steps, jit):
    """The parameters after each step of ``opt`` on the fixed inputs."""
    import jax
    import jax.numpy as jnp

    state = opt.init(jax.tree_util.tree_map(jnp.asarray, params), num_steps=num_steps)
    update = jax.jit(lambda s, g, loss: opt.update(s, g, loss=loss)) if jit else opt.update
    out = []
    for g, loss in zip(grads, losses, strict=True):
        state = update(state, jax.tree_util.tree_map(jnp.asarray, g), jnp.float32(loss))
        out.append(jax.tree_util.tree_map(np.asarray, opt.get_params(state)))
    return out


def compare(name: str, source: Path, steps: int) -> dict[str, tuple[float, float]]:
    """``{kind: (max param rel. difference, max move rel. difference)}`` for one entry."""
    import jax

    from learnopt import pretrained
    from learnopt.learned_optimizers import base as lopt_base

    release = release_optimizer(name)
    template = release.init(jax.random.PRNGKey(0))
    theta = released_theta(source, name, template)
    if theta is None:  # no shipped entry yet: a random theta, the same for both sides
        theta = template
        ours = lopt_base.get_learned_optimizer(name).opt_fn(template)
        print(f"{name}: no shipped entry; comparing with a random theta")
    else:
        # The architecture's defaults are the release factory's configuration; an entry
        # deployed with other settings (Celo2's, as PyLO deploys it) is compared here in
        # the release's configuration with the entry's weights.
        ours = lopt_base.get_learned_optimizer(name).opt_fn(pretrained.load(name).theta)
    params, grads, losses, num_steps = case(steps)
    theirs_steps = run(release.opt_fn(theta), params, grads, losses, num_steps, jit=False)
    ours_steps = run(ours, params, grads, losses, num_steps, jit=True)
    result = {}
    for kind, (layer, leaf) in KINDS.items():
        p0 = params[layer][leaf]
        worst_p = worst_move = 0.0
        for a, b in zip(ours_steps, theirs_steps, strict=True):
            a, b = a[layer][leaf], b[layer][leaf]
            worst_p = max(worst_p, float(np.max(np.abs(a - b)) / np.max(np.abs(b))))
            move = np.max(np.abs(b - p0))
            worst_move = max(worst_move, float(np.max(np.abs(a - b)) / max(move, 1e-30)))
        result[kind] = (worst_p, worst_move)
    return result


def record(name: str, source: Path) -> None:
    """Prints the reference's params after the pinned case's 10 steps (for the tests)."""
    import jax

    release = release_optimizer(name)
    theta = released_theta(source, name, release.init(jax.random.PRNGKey(0)))
    params, grads, losses, num_steps = case(10)
    last = run(release.opt_fn(theta), params, grads, losses, num_steps, jit=False)[-1]
    print(f"PINNED_{name.upper()} = {{  # the release's celo code at {COMMIT[:7]}")
    for layer, leaf in KINDS.values():
        new = np.asarray(last[layer][leaf], np.float64)
        moved = float(np.abs(new - params[layer][leaf]).sum())
        print(f'    "{layer}": ({new.ravel()[:3].tolist()!r}, {moved:.12f}),')
    print("}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="the release's clone")
    parser.add_argument("--entries", nargs="+", default=list(RELEASE), choices=list(RELEASE))
    parser.add_argument("--steps", type=int, default=12, help="steps compared (>= 10)")
    parser.add_argument("--tol", type=float, default=1e-5)
    parser.add_argument("--record", action="store_true", help="print the pinned tests' numbers")
    parser.add_argument("--mulo-source", type=Path, help="a clone of muLO's release, to port-check")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        sys.path.insert(0, str(extract_release(args.source, Path(tmp))))
        for module in ("celo", "celo_adam", "celo2"):
            importlib.import_module(f"celo.optimizers.{module}")
        importlib.import_module("celo.factory")
        print(
            f"the release's celo.py, celo_adam.py, celo2.py and factory.py "
            f"(amoudgl/celo@{COMMIT[:7]}) import on learnopt with only the prefix changed"
        )
        if args.record:
            for name in args.entries:
                record(name, args.source)
            return 0
        worst = 0.0
        print(f"{'entry':9s} {'tensor':9s} {'params rel. diff':>17s} {'move rel. diff':>15s}")
        for name in args.entries:
            start = time.perf_counter()
            for kind, (dp, dm) in compare(name, args.source, args.steps).items():
                print(f"{name:9s} {kind:9s} {dp:17.2e} {dm:15.2e}")
                worst = max(worst, dp)
            print(
                f"{name:9s} ({args.steps} steps, run length {2 * args.steps}, "
                f"{time.perf_counter() - start:.0f} s)"
            )
        mulo_ok = True
        if args.mulo_source is not None:
            mulo_ok = mulo_port_check(args.mulo_source, Path(tmp))
    verdict = "within" if worst <= args.tol else "ABOVE"
    print(f"largest parameter difference {worst:.2e}: {verdict} the tolerance {args.tol:g}")
    return 0 if worst <= args.tol and mulo_ok else 1


if __name__ == "__main__":
    sys.exit(main())
