"""Joining a multi-process run: :func:`initialize` and its checks, timeouts and errors.

The join half of :mod:`learnopt.distributed` (which re-exports these names): the
coordinator address and process ids are checked before JAX is called, a watchdog turns
a join that hangs into a :class:`DistributedError` naming the missing peers' likely
causes, and a process that already joined is not joined twice.
"""

from __future__ import annotations

import os
import re
import sys
import threading
from collections.abc import Sequence
from typing import Any

import jax

#: Seconds :func:`initialize` waits for every process to join.
DEFAULT_INIT_TIMEOUT = 300
#: Seconds without heartbeats after which a process is declared dead and the run stops.
DEFAULT_PEER_TIMEOUT = 100

_ADDRESS = re.compile(r"^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})$")


class DistributedError(RuntimeError):
    """A multi-process run that cannot proceed: a peer is missing, unreachable or failed."""


def _check_address(address: Any) -> str:
    if not isinstance(address, str) or not _ADDRESS.match(address):
        raise ValueError(
            f"coordinator_address must be 'HOST:PORT' (e.g. '10.0.0.1:8476'), got {address!r}"
        )
    port = int(address.rsplit(":", 1)[1])
    if not 0 < port < 65536:
        raise ValueError(f"coordinator_address: port must be in [1, 65535], got {port}")
    return address


def is_initialized() -> bool:
    """Whether :func:`initialize` (or ``jax.distributed.initialize``) has run.

    Returns:
      True once this process has joined a multi-process run.
    """
    return jax.distributed.is_initialized()


def initialize(
    coordinator_address: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
    *,
    local_device_ids: Sequence[int] | None = None,
    init_timeout: int = DEFAULT_INIT_TIMEOUT,
    peer_timeout: int = DEFAULT_PEER_TIMEOUT,
    num_cpu_devices: int | None = None,
    verbose: bool = True,
) -> None:
    """Joins this process to a multi-process run (``jax.distributed.initialize``).

    Call it once, first thing, on every process, before any JAX computation. With no
    arguments the values come from the cluster's environment where JAX detects one
    (SLURM, Open MPI, Kubernetes, Cloud TPU, ``JAX_COORDINATOR_ADDRESS`` ...). CPU
    processes use gloo collectives; GPU processes NCCL.

    Args:
      coordinator_address: ``HOST:PORT`` of process 0, where it starts the coordination
        service (every process passes the same address; the port must be reachable
        from every machine).
      num_processes: the number of processes of the run.
      process_id: this process's index in ``[0, num_processes)``; process 0 writes the
        run's output.
      local_device_ids: the local accelerators this process uses (default: all).
      init_timeout: seconds to wait for every process to join; then this process exits
        with status 1 and a message saying who is missing.
      peer_timeout: seconds without heartbeats after which a process is declared dead:
        the other processes then stop (non-zero exit status) instead of waiting forever.
      num_cpu_devices: on CPU, the number of host devices this process exposes (the
        population is split over them; ``jax_num_cpu_devices``). Default: JAX's (1).
      verbose: print one line per process to stderr while joining.

    Raises:
      ValueError or TypeError: a bad argument (named).
      DistributedError: no cluster environment was found and no address given, the
        runtime was already initialized differently, or JAX's backends already started.
    """
    num_processes, process_id, init_timeout, peer_timeout, num_cpu_devices = _check_join(
        coordinator_address, num_processes, process_id, init_timeout, peer_timeout, num_cpu_devices
    )
    if _already_joined(coordinator_address, process_id):
        return
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    if num_cpu_devices is not None:
        jax.config.update("jax_num_cpu_devices", num_cpu_devices)
    where = coordinator_address or "the coordinator found in the environment"
    who = f"process {process_id} of {num_processes}" if process_id is not None else "process"
    if verbose:
        print(
            f"learnopt: {who} joining the run at {where} (waiting up to {init_timeout} s for "
            f"all processes; a process silent for {peer_timeout} s stops the run)",
            file=sys.stderr,
            flush=True,
        )
    joined = _start_join_watchdog(who, where, num_processes, init_timeout)
    try:
        jax.distributed.initialize(
            coordinator_address,
            num_processes,
            process_id,
            local_device_ids=local_device_ids,
            initialization_timeout=init_timeout + 30,  # the watchdog speaks first
            heartbeat_timeout_seconds=peer_timeout,
            shutdown_timeout_seconds=peer_timeout,
        )
        jax.devices()  # exchanges the global topology: every process is there
    except (ValueError, RuntimeError) as e:
        raise DistributedError(f"cannot join the multi-process run: {_join_error(e)}") from None
    finally:
        joined.set()
    if verbose:
        print(
            f"learnopt: process {jax.process_index()} of {jax.process_count()} joined: "
            f"{jax.local_device_count()} local and {jax.device_count()} global "
            f"{jax.default_backend()} devices",
            file=sys.stderr,
            flush=True,
        )


def _check_join(coordinator_address, num_processes, process_id, init_timeout, peer_timeout,
                num_cpu_devices):  # fmt: skip
    """:func:`initialize`'s arguments, checked (each error names its argument)."""
    from learnopt import _validate

    given = (coordinator_address, num_processes, process_id)
    if any(v is not None for v in given) and any(v is None for v in given):
        raise ValueError(
            "coordinator_address, num_processes and process_id go together: pass all three "
            "(or none, to take them from the cluster's environment)"
        )
    if coordinator_address is not None:
        _check_address(coordinator_address)
        num_processes = _validate.positive_int("num_processes", num_processes)
        process_id = _validate.integer("process_id", process_id, 0, num_processes - 1)
    init_timeout = _validate.positive_int("init_timeout", init_timeout)
    peer_timeout = _validate.positive_int("peer_timeout", peer_timeout)
    if num_cpu_devices is not None:
        num_cpu_devices = _validate.positive_int("num_cpu_devices", num_cpu_devices)
    return num_processes, process_id, init_timeout, peer_timeout, num_cpu_devices


def _already_joined(coordinator_address: str | None, process_id: int | None) -> bool:
    """True if this process already joined the same run; raises if it joined another."""
    if not is_initialized():
        return False
    state = jax._src.distributed.global_state  # the address JAX was initialized with
    same = coordinator_address in (None, state.coordinator_address) and process_id in (
        None,
        state.process_id,
    )
    if same:
        return True
    raise DistributedError(
        f"jax.distributed is already initialized (process {state.process_id} at "
        f"{state.coordinator_address}); initialize once per process"
    )


def _start_join_watchdog(
    who: str, where: str, num_processes: int | None, init_timeout: int
) -> threading.Event:
    """A thread that exits the process with a clear message if joining takes too long.

    JAX aborts the process with a bare DEADLINE_EXCEEDED when peers are missing; the
    watchdog says what happened first, and exits with status 1. Set the returned event
    once joined.
    """
    joined = threading.Event()

    def watchdog() -> None:
        if not joined.wait(init_timeout):
            print(
                f"learnopt: {who}: not every process joined the run at {where} within "
                f"{init_timeout} s. Start all {num_processes or 'N'} processes with the same "
                "coordinator address and number of processes and process ids 0..N-1, and "
                "check that process 0's host and port are reachable from this machine.",
                file=sys.stderr,
                flush=True,
            )
            os._exit(1)

    threading.Thread(target=watchdog, name="learnopt-join-watchdog", daemon=True).start()
    return joined


def _join_error(error: Exception) -> str:
    """The first line of JAX's error, or what to do when no cluster was detected."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    if "coordinator_address should be defined" in text:
        text = (
            "no cluster environment detected (SLURM, Open MPI, ...): pass "
            "coordinator_address, num_processes and process_id "
            "(--coordinator HOST:PORT --num-processes N --process-id I)"
        )
    return text
