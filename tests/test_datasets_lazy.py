"""Lazy ``Datasets``: shapes without data, failing at the first batch, library-style splits.

Building a ``Datasets`` (and a task on it) touches no file: ``abstract_batch`` and
``extra_info`` come from the dataset's spec. The data is checked at the first batch (or
``check_available()``), where a missing dataset raises ``DatasetNotFoundError`` with
the usual instructions. Plain iterators (as the library's ``Datasets`` took them) get
``take`` by stacking ``next``.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

from learnopt.tasks.datasets import base as datasets_base


@pytest.fixture
def empty_dirs(tmp_path, monkeypatch):
    monkeypatch.setenv(datasets_base.ENV_DATA_DIR, str(tmp_path / "data"))
    monkeypatch.setenv(datasets_base.ENV_MANUAL_DIR, str(tmp_path / "manual"))
    return tmp_path


@pytest.mark.parametrize("name", ["mnist", "fashion_mnist", "cifar10"])
def test_missing_data_fails_at_the_first_batch_not_before(name, empty_dirs):
    ds = datasets_base.image_classification_datasets(
        name, image_size=(8, 8), batch_size=4, convert_to_black_and_white=True
    )
    assert ds.abstract_batch == {
        "image": jax.ShapeDtypeStruct((4, 8, 8, 1), np.float32),
        "label": jax.ShapeDtypeStruct((4,), np.int32),
    }
    assert ds.extra_info["num_classes"] == 10 and ds.extra_info["name"] == name
    assert not ds.loaded
    for fail in (ds.check_available, lambda: next(ds.train), lambda: ds.inner_valid.take(3)):
        with pytest.raises(datasets_base.DatasetNotFoundError) as info:
            fail()
        assert info.value.dataset == name and f"{name!r} is not available" in str(info.value)
    assert not any(empty_dirs.iterdir()), "nothing may be written"


def test_embedded_data_is_available_and_prepared_at_the_first_batch(empty_dirs):
    ds = datasets_base.digits8_datasets(8)
    assert ds.check_available() is ds  # embedded: always available, nothing prepared yet
    assert not (empty_dirs / "data").exists()
    batch = next(ds.train)
    assert batch["image"].shape == (8, 8, 8, 1) and (empty_dirs / "data").is_dir()
    assert ds.loaded and ds.check_available() is ds


def test_plain_iterators_get_take():
    def counter(start):
        i = start
        while True:
            yield {"x": np.full((2,), i, np.float32), "n": np.int32(i)}
            i += 1

    ds = datasets_base.Datasets(counter(0), counter(100), counter(200), counter(300))
    assert ds.extra_info == {} and ds.abstract_batch is None
    assert ds.loaded and ds.check_available() is ds  # in-memory data is always there
    assert int(next(ds.train)["n"]) == 0
    stacked = ds.train.take(2, 3)
    assert stacked["x"].shape == (2, 3, 2) and stacked["n"].shape == (2, 3)
    np.testing.assert_array_equal(stacked["n"], [[1, 2, 3], [4, 5, 6]])
    assert int(next(ds.train)["n"]) == 7
    assert int(ds.split("test").take(1)["n"][0]) == 300
    with pytest.raises(ValueError, match="positive"):
        ds.inner_valid.take(0)


def test_black_and_white_is_the_mean_of_the_channels():
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (5, 6, 6, 3), dtype=np.uint8)
    labels = np.arange(5)
    for size in ((6, 6), (3, 3)):
        color, _ = datasets_base._process(images, labels, size, 1, False)
        bw, out_labels = datasets_base._process(images, labels, size, 1, False, True)
        assert bw.shape == (5, *size, 1) and bw.dtype == np.float32
        color = color / 255.0 if color.dtype == np.uint8 else color
        np.testing.assert_allclose(bw[..., 0], color.mean(-1), rtol=1e-6, atol=1e-7)
        np.testing.assert_array_equal(out_labels, labels)
    stacked, _ = datasets_base._process(images, labels, (6, 6), 3, False, True)
    assert stacked.shape == (5, 6, 6, 3)
    np.testing.assert_array_equal(stacked[..., 0], stacked[..., 2])
