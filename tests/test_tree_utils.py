"""learnopt.tree_utils.partition / partition_unflatten: the library's semantics.

Leaves are split by the first filter ``f(key, leaf)`` that accepts them, with ``key``
the leaf's index (as a string) in ``tree_leaves`` order; a last catch-all partition
unless ``strict``; the unflattener rebuilds the tree from transformed partitions.
"""

from __future__ import annotations

from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import pytest

from learnopt import tree_utils


@flax.struct.dataclass
class _Pair:
    val1: Any
    val2: Any


def test_library_case_transform_one_partition_and_rebuild():
    c = {"a": 2, "b": _Pair(1, 2.0)}
    partitions, unflattener = tree_utils.partition(
        [lambda k, v: jnp.asarray(v).dtype == jnp.int32], c
    )
    assert partitions == [[2, 1], [2.0]]
    partitions[1] = jax.tree_util.tree_map(lambda x: x * 2, partitions[1])
    assert tree_utils.partition_unflatten(unflattener, partitions) == unflattener(partitions)
    data = unflattener(partitions)
    assert data["b"].val2 == 4.0
    assert data["b"].val1 == 1


def test_filters_see_leaf_indices_and_the_first_match_wins():
    seen = []

    def record(k, v):
        seen.append(k)
        return False

    tree = {"x": [10, 20], "y": 30}
    parts, _ = tree_utils.partition([record, lambda k, v: v >= 20, lambda k, v: True], tree)
    assert seen == ["0", "1", "2"]
    assert parts == [[], [20, 30], [10], []]


def test_strict_partition_rejects_unclaimed_leaves():
    with pytest.raises(ValueError, match="leaf 1"):
        tree_utils.partition([lambda k, v: v < 1], [0, 5], strict=True)
    filters = [lambda k, v: v < 1, lambda k, v: True]
    parts, unflatten = tree_utils.partition(filters, [0, 5], strict=True)
    assert parts == [[0], [5]] and unflatten([[1], [6]]) == [1, 6]


def test_the_unflattener_crosses_jit_and_checks_lengths():
    params = {"w": jnp.ones((2, 2)), "b": jnp.zeros(2)}
    parts, unflatten = tree_utils.partition([lambda k, v: v.ndim == 2], params)

    @jax.jit
    def scale_matrices(parts):
        return unflatten([[x * 3 for x in parts[0]], parts[1]])

    out = scale_matrices(parts)
    assert float(out["w"][0, 0]) == 3.0 and float(out["b"][0]) == 0.0
    with pytest.raises(ValueError, match="expected 2 partitions"):
        unflatten([parts[0]])
    with pytest.raises(ValueError, match="partition 0 has 0 values"):
        unflatten([[], parts[1]])
