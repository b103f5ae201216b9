"""Converts a published learned optimizer's released weights into a ``learnopt.pretrained`` entry.

::

    python examples/convert_published.py Celo --source /path/to/amoudgl/celo
    python examples/convert_published.py Celo --source /path/to/amoudgl/celo --check
    python examples/convert_published.py Celo2 --source /path/to/Belilovsky-Lab/pylo

``--source`` is a clone of the release's repository (a work tree, or a bare git
directory such as the one ``git clone --mirror`` makes): the file is read at the pinned
commit (``git show COMMIT:PATH``), or from the work tree when the folder is not a git
repository, and refused unless its sha256 is the one recorded below. Nothing is
downloaded and nothing is unpickled: the Celo release stores theta with Flax's msgpack
serialization, which is read into the structure of learnopt's ``Celo().init`` (the
same Haiku-style names, one for one) and cast to float32. PyLO ships Celo2's weights as
a torch zip (``torch.save`` of a state dict): its ``data.pkl`` is read by a restricted
unpickler (:class:`TorchStateDictUnpickler`: no import, no call but rebuilding float32
tensors from the zip's raw storages) without torch, and its tensors are transposed into
learnopt's ``Celo2`` layout (``reader`` in the entry's spec).

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
import collections
import hashlib
import io
import pickle
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

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
    "Celo2": dict(
        architecture="Celo2",
        # PyLO's Celo2_naive at faf6fcb with its defaults (lr 1e-3, no weight decay): AdamW
        # at the same rate on vectors, "embed" tensors and the first and last matrices.
        config=dict(
            step_mult=1e-3,
            weight_decay=0.0,
            mult_1d=1.0,
            adam_b1=0.9,
            adam_b2=0.95,
            adam_epsilon=1e-8,
            adam_bias_correction=True,
            adam_eps_inside_sqrt=False,
            adam_first_last=True,
            weight_decay_after_step=True,
        ),
        reader="pylo_celo2_torch_zip",
        repository="github.com/Belilovsky-Lab/pylo",
        commit="faf6fcb3665a9e7a3096521db027c639bc284e82",
        committed="2026-04-01T15:17:42-04:00",
        path="pylo/models/celo2_weights.pt",
        sha256="eda7504f89616e60036c49aa1cf7b7d7a7212d5dfecdca3679249843268b8979",
        licence="BSD-3-Clause",
        licence_path="LICENSE",
        licence_file="LICENSE-pylo.txt",
        paper=(
            "Abhinav Moudgil, Boris Knyazev, Eugene Belilovsky. Celo2: Towards Learned "
            "Optimization Free Lunch. arXiv:2602.19142, 2026."
        ),
        compute=(
            "meta-trained with PES for 4.5 GPU-hours on small image-classification MLP "
            "tasks (the paper)"
        ),
        deploy=(
            "as PyLO's Celo2_naive by default: learning rate 1e-3 (step_mult), constant "
            "(PyLO has no schedule of its own; an external one scales it), no weight "
            "decay; AdamW at the same rate on tensors of rank <= 1, 'embed' tensors and "
            "the first and last tensors of rank >= 2 (leaf order); no run length needed"
        ),
    ),
}


# ------------------------------------------------------------------ reading the files


class _FloatStorage:
    """What the restricted unpickler gives for ``torch.FloatStorage``: a float32 marker."""

    __slots__ = ()  # no attributes: a pickle cannot BUILD state into it


class TorchStateDictUnpickler(pickle.Unpickler):
    """Reads the ``data.pkl`` of a ``torch.save`` zip into numpy, without torch.

    ``find_class`` admits only ``torch._utils._rebuild_tensor_v2`` (answered by a
    function that copies the tensor out of its raw storage by offset, size and stride),
    ``collections.OrderedDict`` (the state dict and the empty hook dicts), and the
    storage type ``torch.FloatStorage`` that each persistent id names (a float32 marker,
    never a class); any other global raises ``pickle.UnpicklingError``.
    ``persistent_load`` answers ``("storage", FloatStorage, key, location, numel)`` with
    the zip's ``<folder>/data/<key>``: ``numel`` little-endian float32 values.

    Args:
      file: the ``data.pkl`` stream.
      archive: the open zip.
      folder: the folder of ``data.pkl`` inside the zip.
    """

    def __init__(self, file: io.BytesIO, archive: zipfile.ZipFile, folder: str):
        super().__init__(file)
        self._archive = archive
        self._folder = folder
        self._storages: dict[str, np.ndarray] = {}

    def find_class(self, module: str, name: str) -> Any:
        """The only globals a state dict of float32 tensors needs; every other is refused."""
        if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
            return _rebuild_tensor
        if (module, name) == ("collections", "OrderedDict"):
            return collections.OrderedDict
        if (module, name) == ("torch", "FloatStorage"):
            return _FloatStorage()
        raise pickle.UnpicklingError(f"refused global {module}.{name} (not a float32 tensor)")

    def persistent_load(self, pid: Any) -> np.ndarray:
        """A storage of the zip, as a read-only float32 array."""
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise pickle.UnpicklingError(f"refused persistent id {pid!r}")
        _, kind, key, _location, numel = pid
        if type(kind) is not _FloatStorage:
            raise pickle.UnpicklingError(f"refused storage type {kind!r} (float32 only)")
        if not (isinstance(key, str) and key.isdigit() and type(numel) is int and numel >= 0):
            raise pickle.UnpicklingError(f"refused persistent id {pid!r}")
        if key not in self._storages:
            raw = self._archive.read(f"{self._folder}/data/{key}")
            if len(raw) != 4 * numel:
                raise pickle.UnpicklingError(
                    f"storage {key}: {len(raw)} bytes for {numel} float32 values"
                )
            self._storages[key] = np.frombuffer(raw, "<f4")
        return self._storages[key]


def _rebuild_tensor(
    storage: Any,
    storage_offset: Any,
    size: Any,
    stride: Any,
    requires_grad: Any = False,
    backward_hooks: Any = None,
    metadata: Any = None,
) -> np.ndarray:
    """``torch._utils._rebuild_tensor_v2`` in numpy: a float32 copy of the strided view."""

    def ints(x):
        return isinstance(x, tuple) and all(type(i) is int and i >= 0 for i in x)

    if not (
        isinstance(storage, np.ndarray)
        and type(storage_offset) is int
        and storage_offset >= 0
        and ints(size)
        and ints(stride)
        and len(size) == len(stride)
        and isinstance(requires_grad, bool)
        and (backward_hooks is None or backward_hooks == collections.OrderedDict())
        and metadata is None
    ):
        raise pickle.UnpicklingError("refused tensor: not a plain float32 tensor")
    if 0 in size:
        return np.zeros(size, np.float32)
    last = storage_offset + sum((n - 1) * s for n, s in zip(size, stride, strict=True))
    if last >= storage.size:
        raise pickle.UnpicklingError(f"refused tensor: index {last} past its storage")
    view = np.lib.stride_tricks.as_strided(
        storage[storage_offset:],
        shape=size,
        strides=tuple(4 * s for s in stride),
        writeable=False,
    )
    return np.array(view, np.float32)


def read_torch_state_dict(data: bytes) -> dict[str, np.ndarray]:
    """The float32 tensors of a ``torch.save`` zip, by name, read without torch.

    Args:
      data: the zip's bytes (``torch.save(state_dict, f)`` with the default zip format).

    Returns:
      ``{name: float32 array}`` in the file's order.

    Raises:
      pickle.UnpicklingError: the pickle names a global other than those
        :class:`TorchStateDictUnpickler` admits, or holds anything but a dict of
        float32 tensors.
      ValueError: not a torch zip (no single ``data.pkl``, or a big-endian file).
    """
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        pickles = [n for n in archive.namelist() if n.endswith("/data.pkl") and n.count("/") == 1]
        if len(pickles) != 1:
            raise ValueError(f"not a torch zip: data.pkl entries {pickles}")
        folder = pickles[0].split("/")[0]
        if f"{folder}/byteorder" in archive.namelist():
            order = archive.read(f"{folder}/byteorder").decode()
            if order != "little":
                raise ValueError(f"a {order}-endian torch zip (only little-endian is read)")
        unpickler = TorchStateDictUnpickler(io.BytesIO(archive.read(pickles[0])), archive, folder)
        state = unpickler.load()
    if not (
        isinstance(state, dict)
        and all(isinstance(k, str) and isinstance(v, np.ndarray) for k, v in state.items())
    ):
        raise pickle.UnpicklingError("refused: not a dict of tensors by name")
    return dict(state)


def _theta_from_flax_msgpack(data: bytes, template: Any) -> Any:
    """The Celo release's theta (Flax msgpack), restored into ``template``'s structure."""
    return flax.serialization.from_bytes(template, data)


def _theta_from_pylo_celo2(data: bytes, template: Any) -> Any:
    """PyLO's ``Celo2MLP`` state dict in learnopt's ``Celo2`` layout.

    PyLO's ``first_layer_weights.i`` (``[8, width_i]``, torch's ``[out, in]``) is
    ``w0__i`` transposed, ``first_layer_bias`` is ``b0``, ``hidden`` is ``w1, b1`` and
    ``output`` is ``w2, b2`` (weights transposed).
    """
    state = read_torch_state_dict(data)
    layer = template["ff_mod_stack"]["~"]
    groups = sum(1 for k in layer if k.startswith("w0__"))
    names = {f"w0__{i}": (f"first_layer_weights.{i}", True) for i in range(groups)}
    names.update(
        b0=("first_layer_bias", False),
        w1=("hidden.weight", True),
        b1=("hidden.bias", False),
        w2=("output.weight", True),
        b2=("output.bias", False),
    )
    if set(names) != set(layer) or {n for n, _ in names.values()} != set(state):
        raise SystemExit(
            f"PyLO's Celo2 weights {sorted(state)} do not map onto Celo2's {sorted(layer)}"
        )
    theta = {}
    for key, (name, transpose) in names.items():
        value = state[name].T if transpose else state[name]
        if value.shape != np.shape(layer[key]):
            expected = np.shape(layer[key])
            raise SystemExit(f"{name}: shape {value.shape}, Celo2's {key} is {expected}")
        theta[key] = value
    return {"ff_mod_stack": {"~": theta}}


#: How each entry's released file becomes a theta (the spec's ``reader``).
READERS = {
    "flax_msgpack": _theta_from_flax_msgpack,
    "pylo_celo2_torch_zip": _theta_from_pylo_celo2,
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
    reader = READERS[spec.get("reader", "flax_msgpack")]
    restored = reader(read_source(source, spec), template)
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
