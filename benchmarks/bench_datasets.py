"""Throughput of learnopt's in-memory batch iterators.

    python benchmarks/bench_datasets.py [--data-dir DIR] [--dataset digits8] [--batch-size 128]

Prints batches/s for ``next(ds.train)`` and for the vectorized ``ds.train.take(n)``,
plus the one-time prepare and load costs. Without ``--data-dir`` the dataset is
prepared into a temporary directory (digits8 only needs scikit-learn).
"""

from __future__ import annotations

import argparse
import tempfile
import time

from learnopt.tasks.datasets import base as datasets_base


def _rate(fn, batches_per_call: int, min_seconds: float = 1.0) -> float:
    calls, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < min_seconds:
        fn()
        calls += 1
    return calls * batches_per_call / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--dataset", default="digits8", choices=datasets_base.dataset_names())
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--image-size", type=int, nargs=2, default=(8, 8))
    parser.add_argument("--take", type=int, default=100, help="batches per take() call")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        data_dir = args.data_dir or tmp
        start = time.perf_counter()
        datasets_base.prepare_dataset(args.dataset, data_dir)
        prepared = time.perf_counter() - start

        start = time.perf_counter()
        ds = datasets_base.image_classification_datasets(
            args.dataset, tuple(args.image_size), args.batch_size, data_dir=data_dir
        ).load()
        loaded = time.perf_counter() - start

        shape = ds.abstract_batch["image"].shape
        print(f"dataset {args.dataset}: batches of {shape}, data dir {data_dir}")
        print(f"prepare (once per data dir): {prepared:.2f} s")
        print(f"load + resize (once per process): {loaded:.2f} s")
        print(f"next(ds.train): {_rate(lambda: next(ds.train), 1):,.0f} batches/s")
        rate = _rate(lambda: ds.train.take(args.take), args.take)
        print(f"ds.train.take({args.take}): {rate:,.0f} batches/s")


if __name__ == "__main__":
    main()
