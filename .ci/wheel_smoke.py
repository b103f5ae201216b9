"""Smoke test of an installed learnopt wheel (run by .ci/wheel_smoke.sh in a fresh venv).

Checks, against the installed package only: it imports from site-packages (not from the
checkout), ``import learnopt`` does not import TensorFlow, the version agrees everywhere
(``learnopt.__version__`` as written in the checkout, the distribution's metadata and
``learnopt --version``), the licence is the SPDX expression, ``py.typed`` and the package
data are installed, ``learnopt.pretrained.load()`` rebuilds the shipped optimizer and three
steps of its optax transformation on a tiny parameter tree are finite and move the params.
Exits non-zero with the reason on the first failure.
"""

from __future__ import annotations

import argparse
import ast
import importlib.metadata
import subprocess
import sys
from pathlib import Path


def _check(ok: bool, what: str) -> None:
    if not ok:
        sys.exit(f"wheel_smoke: FAILED: {what}")
    print(f"wheel_smoke: ok: {what}")


def _source_version(source: Path) -> str:
    """``__version__`` as written in the checkout's ``learnopt/__init__.py`` (not imported)."""
    tree = ast.parse((source / "learnopt" / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__version__" for t in node.targets
        ):
            return ast.literal_eval(node.value)
    raise SystemExit("wheel_smoke: FAILED: no __version__ in learnopt/__init__.py")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, required=True, help="the checkout")
    parser.add_argument("--script", required=True, help="the venv's learnopt console script")
    args = parser.parse_args()
    source = args.source.resolve()

    import learnopt

    package = Path(learnopt.__file__).resolve().parent
    _check(source not in package.parents, f"learnopt imports from {package}, not the checkout")
    _check("tensorflow" not in sys.modules, "import learnopt does not import TensorFlow")

    version = _source_version(source)
    _check(learnopt.__version__ == version, f"learnopt.__version__ == {version!r}")
    dist = importlib.metadata.distribution("learnopt")
    _check(dist.version == version, f"distribution version {dist.version!r}")
    _check(
        dist.metadata.get("License-Expression") == "Apache-2.0",
        f"License-Expression {dist.metadata.get('License-Expression')!r}",
    )
    cli = subprocess.run([args.script, "--version"], capture_output=True, text=True)
    _check(
        cli.returncode == 0 and cli.stdout.strip() == f"learnopt {version}",
        f"learnopt --version printed {cli.stdout.strip() or cli.stderr.strip()!r}",
    )

    _check((package / "py.typed").is_file(), "py.typed is installed")
    for pattern in (
        "pretrained/*.msgpack",
        "pretrained/*.md",
        "pretrained/LICENSE-*.txt",
        "optimizers/data/*.json",
    ):
        installed = sorted(p.relative_to(package) for p in package.glob(pattern))
        expected = sorted(
            p.relative_to(source / "learnopt") for p in (source / "learnopt").glob(pattern)
        )
        _check(
            bool(expected) and installed == expected, f"{pattern}: {[str(p) for p in installed]}"
        )

    import jax
    import jax.numpy as jnp
    import numpy as np

    from learnopt import pretrained

    trained = pretrained.load()
    tx = trained.as_optax(num_steps=100)  # the run length, for optimizers that read t / T
    params = {"w": jnp.full((3, 2), 0.5, jnp.float32), "b": jnp.zeros((2,), jnp.float32)}
    grads = jax.tree.map(lambda p: jnp.linspace(-1.0, 1.0, p.size).reshape(p.shape), params)
    state = tx.init(params)
    update = jax.jit(tx.update)
    for _ in range(3):  # a warmup may start at a zero step
        updates, state = update(grads, state, params)
    leaves = [np.asarray(u) for u in jax.tree.leaves(updates)]
    _check(all(np.all(np.isfinite(u)) for u in leaves), "as_optax updates are finite")
    _check(any(np.any(u != 0) for u in leaves), "as_optax updates move the params")
    print(f"wheel_smoke: learnopt {version} from {package} (jax {jax.__version__})")


if __name__ == "__main__":
    main()
