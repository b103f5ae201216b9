"""Tests for learnopt.tasks.datasets: TFDS builders (without TF), splits and iterators."""

from __future__ import annotations

import gzip
import io
import pickle
import shutil
import struct
import sys
import tarfile
import time

import jax
import numpy as np
import pytest

from learnopt.tasks.datasets import _readers, _sources
from learnopt.tasks.datasets import base as datasets_base

B = 128


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """A data dir with digits8 prepared once for the module (never the home dir)."""
    d = tmp_path_factory.mktemp("tfds_data")
    datasets_base.prepare_dataset("digits8", d)
    return d


@pytest.fixture(scope="module")
def digits(data_dir):
    return datasets_base.digits8_datasets(B, data_dir=data_dir).load()


def _first_batches(it, n):
    return [next(it) for _ in range(n)]


# ---------------------------------------------------------------------------- digits8


def test_digits8_splits_shapes_dtypes_and_range(digits):
    sizes = {name: it.num_examples for name, it in digits.splits.items()}
    assert sizes == {"train": 1200, "inner_valid": 150, "outer_valid": 150, "test": 297}
    for name in datasets_base.SPLITS:
        batch = next(digits.split(name))
        assert set(batch) == {"image", "label"}
        assert batch["image"].shape == (B, 8, 8, 1) and batch["image"].dtype == np.float32
        assert batch["label"].shape == (B,) and batch["label"].dtype == np.int32
        assert 0.0 <= batch["image"].min() and batch["image"].max() <= 1.0
        assert batch["image"].max() == 1.0  # digits use the full 0..16 range
        assert 0 <= batch["label"].min() and batch["label"].max() < 10
    assert digits.extra_info == {
        "name": "digits8",
        "num_classes": 10,
        "image_shape": (8, 8, 1),
        "batch_size": B,
    }
    ab = digits.abstract_batch
    assert ab["image"] == jax.ShapeDtypeStruct((B, 8, 8, 1), np.float32)
    assert ab["label"] == jax.ShapeDtypeStruct((B,), np.int32)
    assert "tensorflow" not in sys.modules


def test_digits8_is_real_sklearn_data(data_dir):
    from sklearn.datasets import load_digits

    raw = datasets_base.load_split_arrays("digits8", data_dir)
    assert raw["train"][0].shape == (1500, 8, 8, 1) and raw["train"][0].dtype == np.uint8
    assert raw["test"][0].shape == (297, 8, 8, 1)
    ref = load_digits()
    ref_images = np.round(ref.images * 255 / 16).astype(np.uint8)[..., None]
    images = np.concatenate([raw["train"][0], raw["test"][0]])
    labels = np.concatenate([raw["train"][1], raw["test"][1]])
    # Same multiset of (image, label) pairs as scikit-learn's digits.
    key = lambda x, y: sorted(a.tobytes() + bytes([b]) for a, b in zip(x, y, strict=True))
    assert key(images, labels) == key(ref_images, ref.target)


def test_lazy_construction(data_dir):
    ds = datasets_base.digits8_datasets(32, data_dir=data_dir)
    assert not ds.loaded
    assert ds.abstract_batch["image"].shape == (32, 8, 8, 1)
    next(ds.test)
    assert ds.loaded


def test_deterministic_for_a_seed_and_different_across_seeds(data_dir):
    a = datasets_base.digits8_datasets(B, seed=3, data_dir=data_dir)
    b = datasets_base.digits8_datasets(B, seed=3, data_dir=data_dir)
    c = datasets_base.digits8_datasets(B, seed=4, data_dir=data_dir)
    for name in datasets_base.SPLITS:
        xs = _first_batches(a.split(name), 5)
        ys = _first_batches(b.split(name), 5)
        zs = _first_batches(c.split(name), 5)
        for x, y in zip(xs, ys, strict=True):
            np.testing.assert_array_equal(x["image"], y["image"])
            np.testing.assert_array_equal(x["label"], y["label"])
        assert any(not np.array_equal(x["image"], z["image"]) for x, z in zip(xs, zs, strict=True))
    # Splits draw different streams.
    assert not np.array_equal(next(a.inner_valid)["image"], next(a.outer_valid)["image"])


def test_take_matches_repeated_next(data_dir):
    a = datasets_base.digits8_datasets(B, seed=1, data_dir=data_dir)
    b = datasets_base.digits8_datasets(B, seed=1, data_dir=data_dir)
    taken = a.train.take(4)
    assert taken["image"].shape == (4, B, 8, 8, 1) and taken["image"].dtype == np.float32
    assert taken["label"].shape == (4, B) and taken["label"].dtype == np.int32
    nexts = _first_batches(b.train, 4)
    np.testing.assert_array_equal(taken["image"], np.stack([x["image"] for x in nexts]))
    np.testing.assert_array_equal(taken["label"], np.stack([x["label"] for x in nexts]))
    # 2-D take, crossing several epochs of the 150-example inner_valid split.
    taken2 = a.inner_valid.take(4, 8)
    assert taken2["image"].shape == (4, 8, B, 8, 8, 1)
    assert taken2["label"].shape == (4, 8, B)
    flat = _first_batches(b.inner_valid, 32)
    np.testing.assert_array_equal(
        taken2["label"].reshape(32, B), np.stack([x["label"] for x in flat])
    )
    # The streams stay in lockstep afterwards.
    np.testing.assert_array_equal(next(a.train)["label"], next(b.train)["label"])
    with pytest.raises(ValueError):
        a.train.take(0)


def _id_datasets(n=50, batch_size=8, seed=0):
    """Datasets whose every image encodes its example id (pixel value = id)."""
    ids = np.arange(n, dtype=np.uint8)
    images = np.broadcast_to(ids[:, None, None, None], (n, 2, 2, 1)).copy()
    labels = ids % 10
    splits = {"train": (images, labels), "test": (images[:20], labels[:20])}
    return datasets_base.datasets_from_arrays(splits, batch_size, seed=seed, num_classes=10)


def _ids(batch):
    return np.round(batch["image"][..., 0, 0, 0] * 255).astype(int).ravel()


def test_every_example_once_per_epoch_and_reshuffled():
    ds = _id_datasets(n=50, batch_size=8)
    n_train = ds.train.num_examples
    assert n_train == 40  # 50 - 2 * 10% carved for inner_valid / outer_valid
    epochs = 4
    stream = np.concatenate([_ids(next(ds.train)) for _ in range(n_train * epochs // 8)])
    blocks = stream.reshape(epochs, n_train)
    for block in blocks:
        np.testing.assert_array_equal(np.sort(block), np.arange(n_train))
    assert len({tuple(block) for block in blocks}) == epochs  # a fresh order each epoch
    # Validation splits are the disjoint tail of the train split.
    inner = set(_ids(ds.inner_valid.take(2)))
    outer = set(_ids(ds.outer_valid.take(2)))
    assert inner == set(range(40, 45)) and outer == set(range(45, 50))


def test_batch_larger_than_split():
    ds = _id_datasets(n=50, batch_size=12)
    batch = next(ds.inner_valid)  # the split has 5 examples
    assert batch["image"].shape == (12, 2, 2, 1)
    ids = _ids(batch)
    assert set(ids) == set(range(40, 45))
    np.testing.assert_array_equal(np.sort(ids[:5]), np.arange(40, 45))


def test_resize_matches_jax_image_resize():
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (3, 28, 28, 2), dtype=np.uint8)
    x = images.astype(np.float32) / 255
    for size, antialias in [((8, 8), True), ((8, 8), False), ((14, 10), True), ((40, 33), True)]:
        ours = datasets_base.resize_images(images, size, antialias=antialias)
        ref = jax.image.resize(
            x, (3, *size, 2), "linear", antialias=antialias, precision=jax.lax.Precision.HIGHEST
        )
        np.testing.assert_allclose(ours, np.asarray(ref), atol=2e-6)
        assert ours.dtype == np.float32
    same = datasets_base.resize_images(images, (28, 28))
    np.testing.assert_array_equal(same, x)


def test_image_size_and_stack_channels(data_dir):
    ds = datasets_base.digits8_datasets(16, (4, 6), data_dir=data_dir, stack_channels=3)
    batch = next(ds.train)
    assert batch["image"].shape == (16, 4, 6, 3)
    assert ds.abstract_batch["image"].shape == (16, 4, 6, 3)
    np.testing.assert_array_equal(batch["image"][..., 0], batch["image"][..., 2])
    assert 0.0 <= batch["image"].min() and batch["image"].max() <= 1.0


# --------------------------------------------------------------------- missing data


def test_missing_dataset_raises_fast_with_instructions(tmp_path, monkeypatch):
    monkeypatch.setenv(datasets_base.ENV_DATA_DIR, str(tmp_path / "data"))
    monkeypatch.delenv(datasets_base.ENV_MANUAL_DIR, raising=False)
    for name in ("fashion_mnist", "mnist", "cifar10"):
        start = time.perf_counter()
        ds = datasets_base.image_classification_datasets(name)  # lazy: touches no file
        with pytest.raises(datasets_base.DatasetNotFoundError) as info:
            next(ds.train)
        assert time.perf_counter() - start < 5
        err = info.value
        assert isinstance(err, RuntimeError)
        msg = str(err)
        assert name in msg and str(tmp_path / "data") in msg
        assert datasets_base.ENV_MANUAL_DIR in msg and datasets_base.ENV_DATA_DIR in msg
        for fname in _sources.SPECS[name].files:
            assert fname in msg
        assert err.dataset == name and err.data_dir == tmp_path / "data"
    # Loading / preparing directly fails the same way, and nothing is downloaded.
    with pytest.raises(datasets_base.DatasetNotFoundError):
        datasets_base.prepare_dataset("fashion_mnist", manual_dir=tmp_path / "nothing")
    with pytest.raises(datasets_base.DatasetNotFoundError):
        datasets_base.load_split_arrays("mnist")
    assert not (tmp_path / "data" / "learnopt_mnist").exists()
    with pytest.raises(ValueError, match="Unknown dataset"):
        datasets_base.image_classification_datasets("imagenet")


def test_corrupted_dataset_info_names_the_file_and_the_folder_to_delete(tmp_path, monkeypatch):
    data = tmp_path / "data"
    folder = datasets_base.prepare_dataset("digits8", data)
    info = folder / "dataset_info.json"
    good = info.read_bytes()
    monkeypatch.setenv(datasets_base.ENV_DATA_DIR, str(data))
    broken = {
        "truncated": (good[: len(good) // 2], "is not valid JSON"),
        "garbage": (b"\x00\xffgarbage", "is not valid JSON"),
        "a list": (b"[1, 2]", "holds a list, not a JSON object"),
        "wrong fields": (b'{"name": 5}', "TFDS cannot read .*ParseError"),
    }
    for case, (content, problem) in broken.items():
        info.write_bytes(content)
        datasets_base.clear_cache()
        attempts = [lambda: next(datasets_base.digits8_datasets(8).train)]  # LEARNOPT_DATA_DIR
        if case != "wrong fields":  # valid JSON: only TFDS finds out, when loading
            attempts += [
                lambda: datasets_base.check_available("digits8", data),
                lambda: datasets_base.prepare_dataset("digits8", data),
                lambda: datasets_base.digits8_datasets(8, data_dir=data).check_available(),
            ]
        for attempt in attempts:
            with pytest.raises(datasets_base.DatasetCorruptedError, match=problem) as e:
                attempt()
            msg = str(e.value)
            assert f"{info} " in msg and f"Delete the folder {folder} so that it" in msg, case
            assert isinstance(e.value, datasets_base.DatasetNotFoundError)
            assert e.value.dataset == "digits8" and e.value.data_dir == data
    shutil.rmtree(folder)  # what the message says to do
    datasets_base.clear_cache()
    assert next(datasets_base.digits8_datasets(8).train)["label"].shape == (8,)
    datasets_base.clear_cache()


# ------------------------------------------------------------------ source-file builders


def _write_idx(path, array):
    header = bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    with gzip.open(path, "wb") as f:
        f.write(header + array.astype(np.uint8).tobytes())


def _fake_idx_files(folder, n_train=60, n_test=20, seed=0):
    """Writes small fake MNIST-format files; image i has pixel [0, 0] = i (its id)."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    out = {}
    for split, prefix, n in (("train", "train", n_train), ("test", "t10k", n_test)):
        images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        images[:, 0, 0] = np.arange(n)
        labels = rng.integers(0, 10, n).astype(np.uint8)
        _write_idx(folder / f"{prefix}-images-idx3-ubyte.gz", images)
        _write_idx(folder / f"{prefix}-labels-idx1-ubyte.gz", labels)
        out[split] = (images[..., None], labels)
    return out


def _trust(monkeypatch, name, folder):
    """Test-only: make the published-hash table accept the fake files in ``folder``."""
    for fname in _sources.SPECS[name].files:
        monkeypatch.setitem(_sources.SHA256[name], fname, _sources.sha256_of(folder / fname))


def _sorted_by_id(images, labels):
    order = np.argsort(images[:, 0, 0, 0], kind="stable")
    return images[order], labels[order]


@pytest.mark.parametrize("name", ["fashion_mnist", "mnist"])
def test_idx_builder_on_fake_files(tmp_path, monkeypatch, name):
    manual = tmp_path / "manual"
    fake = _fake_idx_files(manual / name)
    _trust(monkeypatch, name, manual / name)
    data = tmp_path / "data"
    path = datasets_base.prepare_dataset(name, data, manual)
    assert path == data / f"learnopt_{name}" / "1.0.0"
    assert sorted(p.name for p in path.glob("*.array_record*"))  # TFDS array_record files
    raw = datasets_base.load_split_arrays(name, data)
    for split in ("train", "test"):
        images, labels = _sorted_by_id(*raw[split])
        assert images.dtype == np.uint8 and labels.dtype == np.int32
        np.testing.assert_array_equal(images, fake[split][0])
        np.testing.assert_array_equal(labels, fake[split][1])
    # Prepared data is used without the source files.
    for f in manual.rglob("*.gz"):
        f.unlink()
    fn = getattr(datasets_base, f"{name}_datasets")
    ds = fn(16, data_dir=data)
    assert next(ds.train)["image"].shape == (16, 28, 28, 1)
    ds8 = datasets_base.image_classification_datasets(name, (8, 8), 16, data_dir=data)
    assert ds8.train.take(2)["image"].shape == (2, 16, 8, 8, 1)
    assert {k: v.num_examples for k, v in ds8.splits.items()} == {
        "train": 48,
        "inner_valid": 6,
        "outer_valid": 6,
        "test": 20,
    }
    assert "tensorflow" not in sys.modules


def test_manual_dir_from_env_and_flat_layout(tmp_path, monkeypatch):
    manual = tmp_path / "flat"
    _fake_idx_files(manual, n_train=30, n_test=10)
    _trust(monkeypatch, "mnist", manual)
    monkeypatch.setenv(datasets_base.ENV_MANUAL_DIR, str(manual))
    monkeypatch.setenv(datasets_base.ENV_DATA_DIR, str(tmp_path / "data"))
    ds = datasets_base.mnist_datasets(8, (8, 8))
    assert next(ds.test)["image"].shape == (8, 8, 8, 1)
    assert (tmp_path / "data" / "learnopt_mnist" / "1.0.0" / "dataset_info.json").is_file()


def test_checksum_mismatch_is_a_clear_error(tmp_path):
    manual = tmp_path / "manual"
    _fake_idx_files(manual / "fashion_mnist", n_train=10, n_test=5)
    data = tmp_path / "data"
    # Construction only checks that files exist; preparing checks their sha256.
    ds = datasets_base.fashion_mnist_datasets(8, data_dir=data, manual_dir=manual)
    with pytest.raises(datasets_base.ChecksumMismatchError) as info:
        next(ds.train)
    err = info.value
    assert isinstance(err, RuntimeError)
    msg = str(err)
    assert "fashion_mnist" in msg and "-idx" in msg and "sha256" in msg
    assert err.expected in msg and err.actual in msg
    assert err.expected in _sources.SHA256["fashion_mnist"].values()
    assert not (data / "learnopt_fashion_mnist" / "1.0.0").exists()


def test_read_idx_rejects_garbage(tmp_path):
    bad = tmp_path / "bad-idx.gz"
    with gzip.open(bad, "wb") as f:
        f.write(b"\x00\x00\x0d\x01\x00\x00\x00\x02ab")
    with pytest.raises(ValueError, match="magic"):
        _readers.read_idx(bad)
    short = tmp_path / "short-idx.gz"
    with gzip.open(short, "wb") as f:
        f.write(b"\x00\x00\x08\x01\x00\x00\x00\x05ab")
    with pytest.raises(ValueError, match="holds 2 bytes"):
        _readers.read_idx(short)


def _fake_cifar_archive(path, per_batch=4):
    rng = np.random.default_rng(0)
    arrays = {}
    with tarfile.open(path, "w:gz") as tar:
        names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
        for name in names:
            data = rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8)
            labels = rng.integers(0, 10, per_batch).tolist()
            arrays[name] = (data, labels)
            blob = pickle.dumps({b"data": data, b"labels": labels})
            info = tarfile.TarInfo(f"cifar-10-batches-py/{name}")
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
    return arrays


def test_cifar10_builder_on_fake_archive(tmp_path, monkeypatch):
    manual = tmp_path / "manual"
    (manual / "cifar10").mkdir(parents=True)
    arrays = _fake_cifar_archive(manual / "cifar10" / "cifar-10-python.tar.gz")
    _trust(monkeypatch, "cifar10", manual / "cifar10")
    raw = datasets_base.load_split_arrays("cifar10", tmp_path / "data", manual)
    assert raw["train"][0].shape == (20, 32, 32, 3) and raw["test"][0].shape == (4, 32, 32, 3)
    # Channel-major rows become HWC: pixel (r, c) of channel k is data[k*1024 + r*32 + c].
    test_data, test_labels = arrays["test_batch"]
    want = {
        d.reshape(3, 32, 32).transpose(1, 2, 0).tobytes(): y
        for d, y in zip(test_data, test_labels, strict=True)
    }
    got = {im.tobytes(): int(y) for im, y in zip(*raw["test"], strict=True)}
    assert got == want
    ds = datasets_base.cifar10_datasets(4, (8, 8), data_dir=tmp_path / "data")
    assert next(ds.train)["image"].shape == (4, 8, 8, 3)


def test_preparing_says_it_uses_local_files_and_shows_no_download_wording(tmp_path, capsys):
    folder = datasets_base.prepare_dataset("digits8", tmp_path / "data")
    out, err = capsys.readouterr()
    assert "Downloading" not in out + err and "Shuffling" not in out + err
    assert out == ""  # TFDS's own lines went nowhere
    lines = [x for x in err.splitlines() if x.startswith("learnopt:")]
    assert lines[0].startswith("learnopt: preparing dataset digits8 from files installed")
    assert "nothing is downloaded" in lines[0] and str(folder) in lines[0]
    assert lines[1].startswith("learnopt: dataset digits8 prepared in ")
    datasets_base.prepare_dataset("digits8", tmp_path / "data")  # prepared: says nothing
    assert capsys.readouterr() == ("", "")
