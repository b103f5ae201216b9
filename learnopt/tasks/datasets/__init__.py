"""Datasets for learnopt tasks; the public API is :mod:`learnopt.tasks.datasets.base`."""
