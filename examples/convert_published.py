"""Converts a published learned optimizer's released weights into a ``learnopt.pretrained`` entry.

::

    python examples/convert_published.py Celo --source /path/to/amoudgl/celo
    python examples/convert_published.py Celo --source /path/to/amoudgl/celo --check

``--source`` is a clone of the release's repository (a work tree, or a bare git
directory such as the one ``git clone --mirror`` makes): the file is read at the pinned
commit (``git show COMMIT:PATH``), or from the work tree when the folder is not a git
repository, and refused unless its sha256 is the one recorded below. Nothing is
downloaded and nothing is unpickled: the Celo release stores theta with Flax's msgpack
serialization, which is read into the structure of learnopt's ``Celo().init`` (the
same Haiku-style names, one for one) and cast to float32.

Writes ``learnopt/pretrained/NAME.msgpack`` (theta, with metadata: the architecture and
its configuration, the source repository, commit, path and sha256, the licence, the
paper and the compute it reports) and ``LICENSE-<source>.txt`` (the release's licence
text, as it is at that commit). The metadata's dates are the source commit's, so the
conversion is deterministic: ``--check`` converts again into a temporary folder and
compares with the shipped files (theta bit for bit; metadata equal but for
``learnopt_version``; the whole file byte for byte when the versions match). The model
card ``NAME.md`` (with learnopt's own evaluation) is written by hand.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tempfile
from pathlib import Path

import flax.serialization
import jax
import jax.numpy as jnp
import numpy as np

from learnopt import checkpoints
from learnopt.learned_optimizers import base as lopt_base
from learnopt.learned_optimizers import theta_files

PRETRAINED = Path(__file__).resolve().parents[1] / "learnopt" / "pretrained"

#: The released files this script converts, with every fact the entry records.
SOURCES = {
    "Celo": dict(
        architecture="Celo",
        config={},  # learnopt's Celo defaults are the release's "celo" (meta-test) ones
        repository="github.com/amoudgl/celo",
        commit="66d976116f39da286951f0c5e0a18eee8d1fd66b",
        committed="2026-03-24T23:00:42+00:00",
        path="algoperf/submissions/celo/theta.state",
        sha256="35683c6123069c101d62ec1f8b2e6d70d50a43e67ebe09953b27620a7dcb836b",
        licence="MIT",
        licence_path="LICENSE",
        licence_file="LICENSE-celo.txt",
        paper=(
            "Abhinav Moudgil, Boris Knyazev, Guillaume Lajoie, Eugene Belilovsky. Celo: "
            "Training Versatile Learned Optimizers on a Compute Diet. arXiv:2501.12670, 2025."
        ),
        compute=(
            "meta-trained in two phases (update rule, then LSTM scheduler) for about 24 "
            "GPU-hours on small MLP tasks (the paper)"
        ),
        deploy=(
            "reads the run length: as_optax(num_steps=T) with T the planned number of "
            "steps; no external schedule or weight decay needed"
        ),
    ),
    "CeloAdam": dict(
        architecture="CeloAdam",
        config={},  # learnopt's CeloAdam defaults are the release's "celo_adam" ones
        repository="github.com/amoudgl/celo",
        commit="66d976116f39da286951f0c5e0a18eee8d1fd66b",
        committed="2026-03-24T23:00:42+00:00",
        path="algoperf/submissions/celo_adam/theta.state",
        sha256="99c65fa0218a739c32eac4e8a99523b6fed92e2926d0c5d64e83835637b75d38",
        licence="MIT",
        licence_path="LICENSE",
        licence_file="LICENSE-celo.txt",
        paper=(
            "Abhinav Moudgil, Boris Knyazev, Guillaume Lajoie, Eugene Belilovsky. Celo: "
            "Training Versatile Learned Optimizers on a Compute Diet. arXiv:2501.12670, 2025."
        ),
        compute=(
            "Celo's learned LSTM scheduler meta-trained on Adam's update with Celo's "
            "recipe (small MLP tasks; the release's AlgoPerf submission)"
        ),
        deploy=(
            "reads the run length: as_optax(num_steps=T) with T the planned number of "
            "steps; Adam's update (betas 0.9, 0.999) under the learned schedule"
        ),
    ),
}


def _read(source: Path, commit: str, path: str) -> bytes:
    """``path`` at ``commit`` from a git clone (work tree or bare), else from the folder."""
    git_dir = source / ".git" if (source / ".git").exists() else source
    if (git_dir / "HEAD").exists():
        return subprocess.run(
            ["git", f"--git-dir={git_dir}", "show", f"{commit}:{path}"],
            capture_output=True,
            check=True,
        ).stdout
    return (source / path).read_bytes()


def read_source(source: Path, spec: dict) -> bytes:
    """The released file's bytes at the pinned commit, checked against its sha256."""
    data = _read(source, spec["commit"], spec["path"])
    digest = hashlib.sha256(data).hexdigest()
    if digest != spec["sha256"]:
        raise SystemExit(
            f"{spec['path']}: sha256 {digest}, expected {spec['sha256']} (commit "
            f"{spec['commit']}): not the released file"
        )
    return data


def read_licence(source: Path, spec: dict) -> bytes:
    """The release's licence text at the pinned commit."""
    return _read(source, spec["commit"], spec["licence_path"])


def convert(name: str, source: Path, out: Path) -> Path:
    """Writes entry ``name`` (theta file and licence text) into ``out``; returns the theta file."""
    spec = SOURCES[name]
    lopt = lopt_base.get_learned_optimizer(spec["architecture"], **spec["config"])
    template = lopt.init(jax.random.PRNGKey(0))
    restored = flax.serialization.from_bytes(template, read_source(source, spec))
    theta = jax.tree_util.tree_map(lambda x: jnp.asarray(np.asarray(x), jnp.float32), restored)
    theta_files._check_fits(lopt, theta, name)
    metadata = theta_files.make_metadata(
        lopt,
        theta,
        licence=spec["licence"],
        meta_training={
            "published": True,
            "source": {k: spec[k] for k in ("repository", "commit", "path", "sha256")},
            "licence_file": spec["licence_file"],
            "paper": spec["paper"],
            "compute": spec["compute"],
            "deploy": spec["deploy"],
            "converted_by": f"python examples/convert_published.py {name} --source DIR",
        },
        description=f"{name} as released at {spec['repository']}@{spec['commit'][:7]}",
    )
    metadata["created"] = spec["committed"]  # the source's date: the conversion is repeatable
    out.mkdir(parents=True, exist_ok=True)
    (out / spec["licence_file"]).write_bytes(read_licence(source, spec))
    return checkpoints.save_theta(out / f"{name}.msgpack", theta, metadata=metadata)


def check(name: str, source: Path) -> bool:
    """Converts again into a temporary folder and compares with the shipped entry."""
    spec = SOURCES[name]
    with tempfile.TemporaryDirectory() as tmp:
        fresh = convert(name, source, Path(tmp))
        shipped = theta_files.load(PRETRAINED / f"{name}.msgpack")
        again = theta_files.load(fresh)
        same_theta = jax.tree_util.tree_structure(shipped.theta) == jax.tree_util.tree_structure(
            again.theta
        ) and all(
            np.array_equal(np.asarray(a), np.asarray(b))
            and np.asarray(a).dtype == np.asarray(b).dtype
            for a, b in zip(
                jax.tree_util.tree_leaves(shipped.theta),
                jax.tree_util.tree_leaves(again.theta),
                strict=True,
            )
        )

        def strip(md):
            return {k: v for k, v in md.items() if k != "learnopt_version"}

        same_metadata = strip(shipped.metadata) == strip(again.metadata)
        same_version = shipped.metadata.get("learnopt_version") == again.metadata.get(
            "learnopt_version"
        )
        same_bytes = fresh.read_bytes() == (PRETRAINED / f"{name}.msgpack").read_bytes()
        same_licence = (Path(tmp) / spec["licence_file"]).read_bytes() == (
            PRETRAINED / spec["licence_file"]
        ).read_bytes()
    print(
        f"{name}: theta bit for bit {same_theta}; metadata (but learnopt_version) "
        f"{same_metadata}; file byte for byte {same_bytes}"
        + ("" if same_version else " (written by another learnopt version)")
        + f"; licence text {same_licence}"
    )
    return same_theta and same_metadata and same_licence and (same_bytes or not same_version)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", choices=sorted(SOURCES))
    parser.add_argument("--source", required=True, type=Path, help="the release's clone")
    parser.add_argument("--out", type=Path, default=PRETRAINED)
    parser.add_argument("--check", action="store_true", help="compare with the shipped entry")
    args = parser.parse_args(argv)
    if args.check:
        return 0 if check(args.name, args.source) else 1
    path = convert(args.name, args.source, args.out)
    print(f"wrote {path} and {args.out / SOURCES[args.name]['licence_file']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
