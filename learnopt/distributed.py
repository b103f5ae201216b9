"""One meta-training run over many processes and machines, with JAX's own runtime.

learnopt scales meta-training by sharding, not by a home-made RPC layer
(``docs/design.md``, "the same result on 1 or N devices"). Within one process,
``SingleMachineGradientLearner(..., mesh=...)`` splits every estimator's population of
inner runs over the process's devices. Across processes and machines the same learner
runs under JAX's *multi-controller* runtime: every process runs the same program,
:func:`initialize` connects them (``jax.distributed``: a coordination service on process
0, gloo collectives between CPUs, NCCL between GPUs), and the mesh spans the devices of
all processes (:func:`population_mesh`)::

    from learnopt import distributed, train

    distributed.initialize("10.0.0.1:8476", num_processes=2, process_id=0)  # 1 on the other
    result = train.meta_train(trainer="pes", num_tasks=64, out_dir="runs/pes")

or ``learnopt meta-train --coordinator 10.0.0.1:8476 --num-processes 2 --process-id I``
on every host (``--distributed`` alone takes them from SLURM, Open MPI, ...).

What each process does in such a run:

* **Population**: the leading axis of every estimator state and axis 1 of the batches
  (``[steps, num_tasks, ...]``) are split over the global mesh; process ``p`` holds the
  rows of its devices (:func:`local_rows`), a contiguous block.
* **Data**: each process draws only the batch rows of its own tasks
  (``VectorizedLOptTruncatedStep.local_rows``); batches are a pure function of the data
  iterator's position, so the global batch is exactly the single-process one, and every
  process advances its iterators as if it had drawn all of it.
* **theta and the outer state** are replicated: identical on every process after every
  step (one program computes the global mean meta-gradient with collectives).
* **Output**: process 0 alone owns the output folder (metrics, plots, theta, the
  checkpoints); the others never touch it, so it need not be on a shared file system.
  A checkpoint is the same file as a single-process run's: the state is gathered to
  process 0 to write it, and on resume process 0 reads it and sends it to the others,
  so a run checkpointed on N processes resumes on any number of processes.
* **Decisions** that end the loop (a signal, divergence, a failed write) are agreed at
  every metrics flush, so all processes stop at the same step.
* **Faults**: a process that dies makes the others stop within ``peer_timeout`` seconds
  (JAX's coordination service stops sending its heartbeats on), with a non-zero exit;
  a job scheduler restarts the job and ``--resume`` continues from the last checkpoint.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from learnopt._joining import (  # re-exported: joining is part of this API
    DEFAULT_INIT_TIMEOUT,
    DEFAULT_PEER_TIMEOUT,
    DistributedError,
    initialize,
    is_initialized,
)

__all__ = [
    "DistributedError",
    "DEFAULT_INIT_TIMEOUT",
    "DEFAULT_PEER_TIMEOUT",
    "initialize",
    "is_initialized",
    "process_index",
    "process_count",
    "is_primary",
    "population_mesh",
    "spans_processes",
    "local_rows",
    "to_host",
    "put_like",
    "host_zeros_like",
    "broadcast_from_primary",
    "broadcast_json",
    "all_gather_ints",
    "run_on_primary",
    "check_everywhere",
    "check_same",
]


def process_index() -> int:
    """This process's index (0 in a single-process run).

    Returns:
      ``jax.process_index()``, in ``[0, process_count())``.
    """
    return jax.process_index()


def process_count() -> int:
    """The number of processes of the run (1 in a single-process run).

    Returns:
      ``jax.process_count()``.
    """
    return jax.process_count()


def is_primary() -> bool:
    """Whether this process writes the run's output (process 0).

    Returns:
      True on process 0 (always, in a single-process run).
    """
    return jax.process_index() == 0


def population_mesh(
    devices: Sequence[Any] | None = None, axis_name: str = "tasks"
) -> jax.sharding.Mesh:
    """A one-axis mesh for ``SingleMachineGradientLearner(mesh=...)``.

    Args:
      devices: the devices to split populations over (default: every device of every
        process, ``jax.devices()``, ordered by process so that each process holds a
        contiguous block of rows).
      axis_name: the mesh axis's name.

    Returns:
      A ``jax.sharding.Mesh`` with one axis ``axis_name`` over ``devices``.

    Raises:
      ValueError: ``devices`` is empty.
    """
    devices = list(jax.devices() if devices is None else devices)
    if not devices:
        raise ValueError("devices must hold at least one device, got none")
    devices.sort(key=lambda d: (d.process_index, d.id))
    return jax.sharding.Mesh(np.array(devices), (axis_name,))


def spans_processes(mesh: jax.sharding.Mesh | None) -> bool:
    """Whether ``mesh`` holds devices of other processes (a multi-process run).

    Args:
      mesh: a device mesh, or None (no mesh: one device).

    Returns:
      True if some device of ``mesh`` belongs to another process.
    """
    if mesh is None:
        return False
    me = jax.process_index()
    return any(d.process_index != me for d in mesh.devices.flat)


def local_rows(mesh: jax.sharding.Mesh, size: int) -> tuple[int, int]:
    """``(start, stop)``: the rows of a ``[size]`` axis split over ``mesh`` held here.

    Raises ValueError if ``size`` does not split evenly or if this process's devices hold
    a non-contiguous set of rows (build the mesh with :func:`population_mesh`).

    Args:
      mesh: the population mesh (its first axis splits the rows).
      size: the length of the split axis (e.g. ``num_tasks``), a multiple of
        ``mesh.size``.

    Returns:
      ``(start, stop)`` with ``stop - start == size // mesh.size * (local devices)``:
      this process holds rows ``start:stop``.
    """
    if size % mesh.size:
        raise ValueError(f"size must be a multiple of the mesh's {mesh.size} devices, got {size}")
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(mesh.axis_names[0]))
    starts = sorted(
        {idx[0].start or 0 for idx in sharding.addressable_devices_indices_map((size,)).values()}
    )
    if not starts:
        raise ValueError("the mesh holds no device of this process")
    per = size // mesh.size
    if starts != list(range(starts[0], starts[0] + per * len(starts), per)):
        raise ValueError(
            "this process's devices hold non-contiguous rows of the mesh; order the mesh's "
            "devices by process (learnopt.distributed.population_mesh does)"
        )
    return starts[0], starts[0] + per * len(starts)


# --------------------------------------------------------------------- host transfers


def _is_key(x: Any) -> bool:
    return hasattr(x, "dtype") and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def to_host(tree: Any) -> Any:
    """Every array leaf of ``tree`` as a numpy array holding the *global* value.

    Sharded leaves of a multi-process run are gathered (a collective: every process must
    call this with the same tree; one leaf at a time, so the peak extra device memory is
    one leaf's global size). Typed PRNG keys come back as their raw ``uint32`` data.

    Args:
      tree: a pytree of JAX arrays (sharded or not) and other leaves.

    Returns:
      The same tree with every ``jax.Array`` leaf replaced by a numpy array of its
      global value; other leaves unchanged.
    """
    from jax.experimental import multihost_utils

    def leaf(x: Any) -> Any:
        if not isinstance(x, jax.Array):
            return x
        if _is_key(x):
            x = jax.random.key_data(x)
        if x.is_fully_addressable or x.is_fully_replicated:
            return np.asarray(x.addressable_data(0) if x.is_fully_replicated else x)
        return np.asarray(multihost_utils.process_allgather(x, tiled=True))

    return jax.tree_util.tree_map(leaf, tree)


def put_like(host_tree: Any, target: Any) -> Any:
    """``host_tree`` (numpy, global values) placed like ``target``'s arrays.

    Each process copies only the slices its devices hold onto them (no collective).
    Leaves of ``target`` that are not arrays are taken from ``host_tree`` as they are.

    Args:
      host_tree: global values (numpy arrays or array-likes) with the structure of
        ``target``; typed-key leaves given as their raw ``uint32`` data.
      target: a pytree of JAX arrays whose shapes, dtypes (weak types included) and
        shardings the result takes.

    Returns:
      A tree of JAX arrays like ``target``'s, holding ``host_tree``'s values.

    Raises:
      ValueError: a leaf's shape differs from its target's.
    """

    from learnopt.tree_utils import cast_leaf_like

    def leaf(value: Any, ref: Any) -> Any:
        if not isinstance(ref, jax.Array):
            return value
        if _is_key(ref):
            data = put_like(np.asarray(value), jax.random.key_data(ref))
            return jax.random.wrap_key_data(data, impl=jax.random.key_impl(ref))
        value = np.asarray(value, dtype=ref.dtype)
        if value.shape != ref.shape:
            raise ValueError(f"value has shape {value.shape}, target expects {ref.shape}")
        out = jax.make_array_from_callback(ref.shape, ref.sharding, lambda idx: value[idx])
        return cast_leaf_like(out, ref)  # weak types too: the step does not recompile

    return jax.tree_util.tree_map(leaf, host_tree, target)


def host_zeros_like(tree: Any) -> Any:
    """numpy zeros shaped like ``tree``'s arrays (typed keys: their raw data).

    What a process other than 0 passes to :func:`broadcast_from_primary`.

    Args:
      tree: a pytree of JAX arrays and other leaves.

    Returns:
      The same tree with each ``jax.Array`` leaf replaced by numpy zeros of its global
      shape and dtype (``uint32`` key data for typed keys); other leaves unchanged.
    """

    def leaf(x: Any) -> Any:
        if not isinstance(x, jax.Array):
            return x
        if _is_key(x):
            return np.zeros(jax.eval_shape(jax.random.key_data, x).shape, np.uint32)
        return np.zeros(x.shape, x.dtype)

    return jax.tree_util.tree_map(leaf, tree)


def broadcast_from_primary(tree: Any) -> Any:
    """Process 0's values of ``tree`` (numpy leaves) on every process.

    Every process passes a tree of the same structure, shapes and dtypes (the values of
    the other processes are ignored). One leaf at a time. In a single-process run the
    tree is returned as numpy arrays.

    Args:
      tree: a pytree of numpy (or host) arrays; process 0's values are the ones sent.

    Returns:
      The tree with process 0's values, as numpy arrays, on every process.
    """
    from jax.experimental import multihost_utils

    if jax.process_count() == 1:
        return jax.tree_util.tree_map(np.asarray, tree)

    def leaf(x: Any) -> Any:
        x = np.asarray(x)
        if x.dtype == np.bool_:  # summed across processes: as integers
            return np.asarray(multihost_utils.broadcast_one_to_all(x.astype(np.uint8)), bool)
        return np.asarray(multihost_utils.broadcast_one_to_all(x))

    return jax.tree_util.tree_map(leaf, tree)


def broadcast_json(value: Any) -> Any:
    """Process 0's JSON-able ``value`` on every process (others may pass anything).

    A collective: every process calls it at the same point.

    Args:
      value: on process 0, the value to send (``json.dumps`` must accept it); ignored
        on the others.

    Returns:
      Process 0's value after a JSON round trip (tuples become lists); ``value``
      itself in a single-process run.
    """
    if jax.process_count() == 1:
        return value
    data = json.dumps(value).encode() if jax.process_index() == 0 else b""
    size = int(broadcast_from_primary(np.asarray(len(data), np.int32)))
    buf = np.zeros(size, np.uint8)
    if jax.process_index() == 0:
        buf[:] = np.frombuffer(data, np.uint8)
    return json.loads(broadcast_from_primary(buf).tobytes().decode())


def all_gather_ints(values: Sequence[int]) -> np.ndarray:
    """``[process_count, len(values)]`` int32: every process's ``values`` (a collective).

    Args:
      values: this process's integers (int32 range); every process passes as many.

    Returns:
      An int32 array whose row ``i`` holds process ``i``'s values.
    """
    from jax.experimental import multihost_utils

    arr = np.asarray(values, np.int32).reshape(-1)
    if jax.process_count() == 1:
        return arr[None]
    return np.asarray(multihost_utils.process_allgather(arr)).reshape(jax.process_count(), -1)


# ------------------------------------------------------------------------- agreement


def _error_class(name: str, errors: Sequence[type]) -> type:
    known = {c.__name__: c for c in (*errors, ValueError, TypeError, FileNotFoundError, OSError)}
    return known.get(name, DistributedError)


def run_on_primary(fn: Any, *args: Any, errors: Sequence[type] = ()) -> Any:
    """``fn(*args)`` on process 0 only; its JSON-able result on every process.

    If it raises on process 0, every process raises: process 0 the exception itself, the
    others one of the same class (looked up in ``errors`` and the built-in ``ValueError``,
    ``TypeError``, ``FileNotFoundError``, ``OSError``; else :class:`DistributedError`)
    with the same message, so all processes exit alike. A collective.

    Args:
      fn: the function to run on process 0 (e.g. reading a checkpoint's metadata).
      *args: its arguments.
      errors: exception classes the other processes may re-raise by name.

    Returns:
      ``fn(*args)``'s result (JSON round trip on processes other than 0).
    """
    if jax.process_count() == 1:
        return fn(*args)
    result, error = None, None
    if is_primary():
        try:
            result = fn(*args)
        except Exception as e:
            error = e
    reply = broadcast_json(
        {"result": result}
        if error is None
        else {"error": type(error).__name__, "message": str(error).strip("'\"")}
    )
    if error is not None:
        raise error
    if "error" in reply:
        raise _error_class(reply["error"], errors)(reply["message"])
    return reply["result"]


def check_everywhere(fn: Any, *args: Any) -> Any:
    """``fn(*args)`` on every process; if it raises on any, every process raises.

    The failing processes raise their own exception; the others a
    :class:`DistributedError` naming them (instead of waiting for them in a collective).

    Args:
      fn: the function every process runs (e.g. a check of its own arguments).
      *args: its arguments.

    Returns:
      This process's ``fn(*args)``.
    """
    error, result = None, None
    try:
        result = fn(*args)
    except Exception as e:
        if jax.process_count() == 1:
            raise
        error = e
    if jax.process_count() == 1:
        return result
    failed = np.flatnonzero(all_gather_ints([error is not None])[:, 0])
    if error is not None:
        raise error
    if failed.size:
        raise DistributedError(
            f"process{'es' if failed.size > 1 else ''} {', '.join(map(str, failed))} of the "
            "run failed (see their output); stopping this one too"
        )
    return result


def check_same(value: Any, what: str) -> None:
    """Raises ``ValueError`` on every process unless all pass an equal JSON-able ``value``.

    Processes that disagree on what to run would wait for each other in different
    collectives forever; this says so instead. A collective.

    Args:
      value: this process's value (compared by a CRC32 of its sorted JSON).
      what: what the value is, in the message (plural, e.g. "the meta_train arguments").

    Raises:
      ValueError: some process's value differs from process 0's.
    """
    if jax.process_count() == 1:
        return
    digest = zlib.crc32(json.dumps(value, sort_keys=True, default=repr).encode())
    digests = all_gather_ints([digest - 2**31])[:, 0]
    differ = [i for i, d in enumerate(digests) if d != digests[0]]
    if differ:
        raise ValueError(
            f"{what} differ between processes: process{'es' if len(differ) > 1 else ''} "
            f"{', '.join(map(str, differ))} and process 0 were given different values; every "
            "process of a run must run the same command"
        )
