"""Small pytree helpers used across learnopt.

Where ``optax.tree_utils`` computes the same thing, the name here is optax's function
(``tree_sub``, ``tree_zeros_like``). The others are kept because optax's version differs
in a way that matters here; each says how. All names importable before stay importable.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np
import optax.tree_utils as optax_tree

PyTree = Any

__all__ = [
    "tree_map_multi",
    "tree_add",
    "tree_sub",
    "tree_scale",
    "tree_zeros_like",
    "tree_vdot",
    "tree_norm",
    "tree_all_finite",
    "tree_cast_like",
    "cast_leaf_like",
    "tree_path_str",
    "partition",
    "partition_unflatten",
    "PartitionUnflatten",
    # learned_optimization's names, with its semantics (research code imports them):
    "tree_mean_abs",
    "tree_mean",
    "tree_div",
    "tree_mul",
    "tree_dot",
    "tree_zip_onp",
    "tree_zip_jnp",
    "first_dim",
    "match_type",
    "map_named",
    "strip_weak_type",
]


def tree_map_multi(fn: Callable[..., tuple], tree: PyTree, *rest: PyTree) -> tuple[PyTree, ...]:
    """Maps ``fn`` returning a tuple over trees and returns one tree per output.

    ``jax.tree_util.tree_map`` returns a single tree; mapping a function that
    returns ``(next_p, next_m)`` gives a tree of tuples, not a tuple of trees (the
    "caution" of the notes). This helper transposes the result:

    >>> p, m = tree_map_multi(lambda p, g: (p - g, g), {"a": 1.0}, {"a": 0.5})
    >>> p, m
    ({'a': 0.5}, {'a': 0.5})

    Args:
      fn: called on the matching leaves of ``tree`` and ``rest``; returns a tuple of
        the same length for every leaf.
      tree: the tree whose structure the outputs take.
      *rest: trees with ``tree``'s structure (or with subtrees where it has leaves).

    Returns:
      One tree per output of ``fn`` (an empty tuple for a tree without leaves).
    """
    treedef = jax.tree_util.tree_structure(tree)
    leaves = treedef.flatten_up_to(tree)
    rest_leaves = [treedef.flatten_up_to(r) for r in rest]
    outs = [fn(*args) for args in zip(leaves, *rest_leaves, strict=True)]
    if not outs:
        return ()
    n = len(outs[0])
    return tuple(treedef.unflatten([o[i] for o in outs]) for i in range(n))


def tree_add(a: PyTree, b: PyTree) -> PyTree:
    """``a + b`` leaf by leaf (``jnp.add``).

    Not optax's ``tree_add``: that one is Python's ``sum``, ``0 + a + b``, which turns
    ``-0.0 + -0.0`` into ``+0.0`` outside ``jit`` and returns Python numbers for Python
    leaves; this one keeps the sign of zero and always returns arrays.

    Args:
      a: a tree.
      b: a tree like ``a``.

    Returns:
      The tree of sums.
    """
    return jax.tree_util.tree_map(jnp.add, a, b)


def tree_sub(a: PyTree, scalar_or_tree: Any) -> PyTree:
    """``a - b`` leaf by leaf: optax's ``tree_sub`` for two trees (NumPy and Python leaves
    stay NumPy and Python values); a scalar ``b`` is subtracted from every leaf, as in
    learned_optimization's ``tree_sub``.

    Args:
      a: a tree.
      scalar_or_tree: a tree with ``a``'s structure, or a number or array.

    Returns:
      A tree with ``a``'s structure.
    """
    if _is_scalar_like(scalar_or_tree) and not _is_scalar_like(a):
        return jax.tree_util.tree_map(lambda x: x - scalar_or_tree, a)
    return optax_tree.tree_sub(a, scalar_or_tree)


def tree_scale(s: Any, a: PyTree) -> PyTree:
    """``s * x`` for every leaf ``x``, in ``x``'s dtype.

    Not optax's ``tree_scale``: that one returns ``s * x`` in the promoted dtype, so a
    float32 scalar turns bfloat16 leaves into float32 (and a carried state would change
    dtype, which recompiles); this one casts back to each leaf's dtype.

    Args:
      s: a scalar.
      a: a tree of arrays.

    Returns:
      The scaled tree, each leaf in its own dtype.
    """
    return jax.tree_util.tree_map(lambda x: (s * x).astype(x.dtype), a)


#: ``jnp.zeros_like`` of every leaf: optax's ``tree_zeros_like`` (with an optional dtype).
tree_zeros_like = optax_tree.tree_zeros_like


def tree_vdot(a: PyTree, b: PyTree) -> jax.Array:
    """Sum of elementwise products over all leaves, accumulated in float32 or wider.

    Not optax's ``tree_vdot``: that one accumulates in the leaves' dtype (bfloat16
    leaves give a bfloat16 result) and returns the integer 0 for a tree without leaves;
    this one promotes each product to at least float32 and returns a float32 zero.

    Args:
      a: a tree of arrays.
      b: a tree like ``a``.

    Returns:
      The scalar inner product (float32, or float64 for float64 leaves).
    """
    prods = [
        jnp.vdot(x.astype(jnp.promote_types(x.dtype, jnp.float32)), y)
        for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True)
    ]
    return sum(prods, jnp.zeros((), jnp.float32))


def tree_norm(a: PyTree) -> jax.Array:
    """The Euclidean norm of all leaves, ``sqrt(tree_vdot(a, a))``.

    Not optax's ``tree_norm``: that one squares and sums in the leaves' dtype (300
    bfloat16 values of 1.01 give 17.375 instead of 17.456); this one accumulates in
    float32 as :func:`tree_vdot` does (gradient clipping relies on it).

    Args:
      a: a tree of arrays.

    Returns:
      The scalar norm (float32, or float64 for float64 leaves).
    """
    return jnp.sqrt(tree_vdot(a, a))


def tree_all_finite(a: PyTree) -> jax.Array:
    """Whether every element of every leaf is finite (optax has no such helper).

    Args:
      a: a tree of arrays.

    Returns:
      A boolean scalar (True for a tree without leaves).
    """
    leaves = jax.tree_util.tree_leaves(a)
    if not leaves:
        return jnp.asarray(True)
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in leaves]))


def _weak(x: Any) -> bool:
    return bool(getattr(x, "weak_type", False))


def cast_leaf_like(x: Any, ref: Any) -> Any:
    """Casts ``x`` to the dtype *and weak-typedness* of ``ref`` (an array or ShapeDtypeStruct).

    Args:
      x: a value.
      ref: the reference leaf; without a dtype (or a typed PRNG key), ``x`` is returned
        as is.

    Returns:
      ``x`` as an array of ``ref``'s dtype, weakly typed if ``ref`` is.
    """
    if not hasattr(ref, "dtype"):
        return x
    if jax.dtypes.issubdtype(ref.dtype, jax.dtypes.extended):
        return x  # typed PRNG keys: nothing to cast (a different key type is a user error)
    dtype = np.dtype(ref.dtype)
    x = jnp.asarray(x)
    if x.dtype == dtype and _weak(x) == _weak(ref):
        return x
    if _weak(ref):
        from jax._src.lax import lax as lax_internal  # no public API creates weak arrays

        return lax_internal._convert_element_type(x, dtype, weak_type=True)
    return jnp.asarray(x, dtype=dtype)


def tree_cast_like(tree: PyTree, ref: PyTree) -> PyTree:
    """Casts every leaf of ``tree`` to the dtype and weak type of the matching leaf of ``ref``.

    Not optax's ``tree_cast_like``: that one is ``x.astype(ref.dtype)``, which drops weak
    types (a weakly typed carry would then change type and recompile) and does not
    skip typed PRNG keys; this one keeps both (see :func:`cast_leaf_like`).

    Args:
      tree: the tree to cast.
      ref: a tree like ``tree`` of arrays or ``jax.ShapeDtypeStruct``.

    Returns:
      The cast tree.
    """
    return jax.tree_util.tree_map(cast_leaf_like, tree, ref)


def tree_path_str(path: tuple, separator: str | None = None) -> str:
    """A key path's name: ``['linear_0']['w']`` for messages, or ``linear_0/w``.

    The one helper learnopt names paths with: messages show the full form; theta keys
    (frozen keys, Celo2's Adam-tensor patterns) match the entries joined by a separator
    (dict keys, attribute names and indices; Haiku's ``"mlp/~/linear_0"`` stays whole).

    Args:
      path: a key path from ``jax.tree_util.tree_flatten_with_path``.
      separator: None for ``jax.tree_util.keystr(path)`` (``"<root>"`` for the empty
        path), or the string to join the bare entries with, e.g. ``"/"``.

    Returns:
      The name.
    """
    if separator is None:
        return jax.tree_util.keystr(path) or "<root>"
    return jax.tree_util.keystr(tuple(path), simple=True, separator=separator)


FilterFn = Callable[[str, Any], bool]


@flax.struct.dataclass
class PartitionUnflatten:
    """What :func:`partition` needs to rebuild the tree; call it on the partitions.

    ``data`` is ``(keys, names, treedef)`` and is static (not a pytree leaf), so an
    unflattener can be closed over or passed through ``jax.jit``.

    Attributes:
      data: ``(keys, names, treedef)``: every leaf's path name in tree order, the path
        names of each partition's leaves, and the tree's structure (static).
    """

    data: Any = flax.struct.field(pytree_node=False)

    def __call__(self, partitioned_values: Sequence[Sequence[Any]]) -> PyTree:
        """Rebuilds the tree (see :func:`partition_unflatten`).

        Args:
          partitioned_values: one sequence per partition.

        Returns:
          The tree.
        """
        return partition_unflatten(self, partitioned_values)


def partition(
    functions: Sequence[FilterFn], values: PyTree, strict: bool = False
) -> tuple[list[list[Any]], PartitionUnflatten]:
    """Splits the leaves of ``values`` into disjoint lists by the first filter that accepts them.

    As in learned_optimization: each filter is called as ``f(key, leaf)`` with ``key``
    the leaf's position in ``jax.tree_util.tree_leaves`` order as a string (``"0"``,
    ``"1"``, ...); a leaf goes to the partition of the first filter that returns True.
    Unless ``strict``, a last partition collects the leaves no filter accepted; with
    ``strict``, such a leaf raises ``ValueError``.

    >>> parts, unflatten = partition([lambda k, v: v > 1], {"a": 1, "b": 2, "c": 3})
    >>> parts
    [[2, 3], [1]]
    >>> unflatten([[20, 30], [10]])
    {'a': 10, 'b': 20, 'c': 30}

    Args:
      functions: filters ``(key, leaf) -> bool``.
      values: the pytree to split.
      strict: require every leaf to be accepted by one of ``functions``.

    Returns:
      ``(partitions, unflattener)``: one list of leaves per filter (plus the rest unless
      ``strict``), and a :class:`PartitionUnflatten` that rebuilds the tree from lists
      of the same lengths (see :func:`partition_unflatten`).
    """
    leaves, treedef = jax.tree_util.tree_flatten(values)
    keys = [str(i) for i in range(len(leaves))]
    functions = list(functions)
    if not strict:
        functions.append(lambda k, v: True)
    partitions: list[list[Any]] = [[] for _ in functions]
    names: list[list[str]] = [[] for _ in functions]
    for key, leaf in zip(keys, leaves, strict=True):
        for i, fn in enumerate(functions):
            if fn(key, leaf):
                partitions[i].append(leaf)
                names[i].append(key)
                break
        else:
            raise ValueError(
                f"partition(strict=True): no filter accepts leaf {key} "
                f"(a {type(leaf).__name__}); add a filter for it or pass strict=False"
            )
    data = (tuple(keys), tuple(tuple(n) for n in names), treedef)
    return partitions, PartitionUnflatten(data)


def partition_unflatten(
    unflattener: PartitionUnflatten, part_values: Sequence[Sequence[Any]]
) -> PyTree:
    """Rebuilds the tree split by :func:`partition` from (possibly transformed) partitions.

    Args:
      unflattener: the second output of :func:`partition`.
      part_values: one sequence per partition, each as long as the partition it replaces.

    Returns:
      The tree, with each leaf taken from its place in ``part_values``.
    """
    keys, names, treedef = unflattener.data
    if len(part_values) != len(names):
        raise ValueError(
            f"partition_unflatten: expected {len(names)} partitions, got {len(part_values)}"
        )
    position = {k: i for i, k in enumerate(keys)}
    filled: list[Any] = [None] * len(keys)
    for i, (part_names, part) in enumerate(zip(names, part_values, strict=True)):
        if len(part) != len(part_names):
            raise ValueError(
                f"partition_unflatten: partition {i} has {len(part)} values, "
                f"expected {len(part_names)}"
            )
        for name, value in zip(part_names, part, strict=True):
            filled[position[name]] = value
    return jax.tree_util.tree_unflatten(treedef, filled)


# ----------------------------------------------- learned_optimization's tree helpers
#
# The notes' library exposes these in ``learned_optimization.tree_utils``; research code
# written on it (Celo's, muLO's) imports them, so they keep its names and semantics.


def _num_elements(tree: PyTree) -> int:
    return int(sum(np.size(x) for x in jax.tree_util.tree_leaves(tree)))


def tree_mean_abs(tree: PyTree) -> jax.Array:
    """The mean of ``|x|`` over every element of every leaf.

    Args:
      tree: a tree of arrays.

    Returns:
      A scalar.
    """
    total = sum(jnp.sum(jnp.abs(x)) for x in jax.tree_util.tree_leaves(tree))
    return total / _num_elements(tree)


def tree_mean(tree: PyTree) -> jax.Array:
    """The mean over every element of every leaf.

    Args:
      tree: a tree of arrays.

    Returns:
      A scalar.
    """
    return sum(jnp.sum(x) for x in jax.tree_util.tree_leaves(tree)) / _num_elements(tree)


def _is_scalar_like(x: Any) -> bool:
    """Whether ``x`` is one value (a number or an array), not a tree of several."""
    return jax.tree_util.treedef_is_leaf(jax.tree_util.tree_structure(x)) and x is not None


def _elementwise(op: Callable[[Any, Any], Any], a: PyTree, b: Any) -> PyTree:
    if _is_scalar_like(b):
        return jax.tree_util.tree_map(lambda x: op(x, b), a)
    return jax.tree_util.tree_map(op, a, b)


def tree_div(a: PyTree, scalar_or_tree: Any) -> PyTree:
    """``a / b`` leaf by leaf; ``b`` a scalar (every leaf divided by it) or a tree like ``a``.

    Args:
      a: a tree of arrays.
      scalar_or_tree: a number or array, or a tree with ``a``'s structure.

    Returns:
      A tree with ``a``'s structure.
    """
    return _elementwise(jnp.divide, a, scalar_or_tree)


def tree_mul(a: PyTree, scalar_or_tree: Any) -> PyTree:
    """``a * b`` leaf by leaf; arguments as :func:`tree_div`'s."""
    return _elementwise(jnp.multiply, a, scalar_or_tree)


def tree_dot(a: PyTree, b: PyTree) -> jax.Array:
    """``sum(a * b)`` over every element of every leaf (no conjugation; see :func:`tree_vdot`).

    Args:
      a: a tree of arrays.
      b: a tree with ``a``'s structure.

    Returns:
      A scalar.
    """
    products = jax.tree_util.tree_leaves(jax.tree_util.tree_map(jnp.multiply, a, b))
    return sum(jnp.sum(x) for x in products)


def _zip(trees: Any, stack: Callable[[list], Any]) -> PyTree:
    trees = list(trees)
    if not trees:
        raise ValueError("tree_zip: no trees to zip")
    leaves = [jax.tree_util.tree_leaves(t) for t in trees]
    treedef = jax.tree_util.tree_structure(trees[0])
    return jax.tree_util.tree_unflatten(
        treedef, [stack(list(col)) for col in zip(*leaves, strict=True)]
    )


def tree_zip_onp(trees: Any) -> PyTree:
    """Trees of the same structure stacked leaf by leaf into numpy arrays (a new first axis).

    Args:
      trees: an iterable of trees with one structure.

    Returns:
      The tree of ``np.asarray([leaf_0, leaf_1, ...])``.
    """
    return _zip(trees, np.asarray)


def tree_zip_jnp(trees: Any) -> PyTree:
    """As :func:`tree_zip_onp`, into JAX arrays (``jnp.asarray([leaf_0, leaf_1, ...])``)."""
    return _zip(trees, jnp.asarray)


def first_dim(tree: PyTree) -> int:
    """The size of the first axis of the tree's first leaf (a batch size).

    Args:
      tree: a tree whose first leaf has at least one axis.

    Returns:
      That size.
    """
    return int(np.shape(jax.tree_util.tree_leaves(tree)[0])[0])


def match_type(tree: PyTree, like: PyTree) -> PyTree:
    """``tree``'s leaves as arrays of the dtypes of ``like``'s leaves.

    Args:
      tree: a tree of values.
      like: a tree with the same structure whose leaves have a ``dtype``.

    Returns:
      ``tree`` with every leaf ``jnp.asarray(leaf, like_leaf.dtype)``.

    Raises:
      ValueError: a leaf of ``like`` has no dtype (it names the value).
    """
    for leaf in jax.tree_util.tree_leaves(like):
        if not hasattr(leaf, "dtype"):
            raise ValueError(f"match_type: a leaf of the target has no dtype: {leaf!r}")
    return jax.tree_util.tree_map(lambda x, y: jnp.asarray(x, dtype=y.dtype), tree, like)


def map_named(fn: Callable[[str, Any], Any], tree: PyTree, key: str = "") -> PyTree:
    """Maps ``fn(path, leaf)`` over a tree of dicts, sequences and dataclasses.

    Paths are the library's: ``key`` then ``"/" + name`` per level, so the leaf ``c`` of
    ``{"a": 1, "b": {"c": 1}}`` gets ``"/b/c"``; sequence items are named by their index;
    a (flax) dataclass field by ``"<ClassName>.<field>"``.

    Args:
      fn: called with each leaf's path and value; returns the new leaf.
      tree: mappings, lists, tuples (named or not) and dataclasses, down to leaves.
      key: the path of ``tree`` itself.

    Returns:
      A tree of the same structure.
    """
    if isinstance(tree, dict) or (hasattr(tree, "items") and hasattr(tree, "keys")):
        return type(tree)(**{k: map_named(fn, v, f"{key}/{k}") for k, v in tree.items()})
    if isinstance(tree, tuple | list):
        items = [map_named(fn, v, f"{key}/{i}") for i, v in enumerate(tree)]
        return type(tree)(*items) if hasattr(tree, "_fields") else type(tree)(items)
    if hasattr(tree, "__dataclass_fields__"):
        cls = type(tree).__name__
        return type(tree)(
            **{
                k: map_named(fn, getattr(tree, k), f"{key}/{cls}.{k}")
                for k in tree.__dataclass_fields__
            }
        )
    return fn(key, tree)


def strip_weak_type(tree: PyTree) -> PyTree:
    """Every leaf as a JAX array with a definite dtype (``weak_type=False``).

    A Python number becomes a weakly typed array (it adopts the dtype of what it meets),
    which makes a jitted function that gets it in one call and a strongly typed array in
    the next compile twice; this fixes the leaves' dtypes once.

    Args:
      tree: a tree of numbers and arrays.

    Returns:
      The same tree of strongly typed ``jax.Array`` leaves.
    """

    def strong(x: Any) -> jax.Array:
        x = jnp.asarray(x)
        return jnp.asarray(x, dtype=x.dtype)

    return jax.tree_util.tree_map(strong, tree)
