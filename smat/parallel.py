"""Data parallelism over devices (design §8): a 1-D device mesh, batch sharding, multi-host.

Training and evaluation run SPMD: every batch is split along its example axis over the
``"data"`` axis of a :class:`jax.sharding.Mesh` (``NamedSharding(mesh, P("data"))``), the
parameters and optimizer states are replicated (``P()``), and ``jax.jit`` partitions each
step over the devices, inserting the gradient all-reduce itself. One device is the same code
path with a one-device mesh.

A mesh reaches the library either explicitly (``mesh=`` of :func:`smat.training.loop.fit`,
:func:`smat.training.teacher.train_teacher`,
:func:`smat.training.student.train_student`, ...) or as JAX's
ambient mesh, ``with jax.set_mesh(data_mesh()): ...``, which is how the ``smat`` command
line applies ``--devices``; :func:`resolve_mesh` picks between them.

Multi-host (a TPU pod slice, several GPU nodes): every process runs the same program on
the same global batches (the batch order is a function of seed and epoch only) after
:func:`initialize_distributed`; each process places only the shards of its own devices.
A teacher's training rows can instead be dealt out into data shards
(:class:`smat.data.DataShards`): each process then holds only its own rows of every
global batch (``shard_batch(..., process_local=True)``). Data sets that are explained rather
than trained on are dealt out in contiguous blocks (:func:`process_block`): each process
tokenizes its block, every global batch takes an equal part from each block, and the
outputs (or the blocks themselves, :func:`gather_blocks`) are joined on every process.

Example:
  >>> mesh = data_mesh()  # every device
  >>> batch = shard_batch({"x": np.ones((8 * mesh.size, 4))}, mesh)  # doctest: +SKIP
  >>> params = replicate(params, mesh)  # doctest: +SKIP
"""

from __future__ import annotations

import math
import os
import socket
import sys
import time
from collections.abc import Mapping
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

__all__ = [
    "DATA_AXIS",
    "commit",
    "data_mesh",
    "finish_distributed",
    "gather_blocks",
    "initialize_distributed",
    "is_primary",
    "process_block",
    "process_blocks",
    "process_max",
    "replicate",
    "resolve_mesh",
    "shard_batch",
    "to_host",
]

PyTree = Any

DATA_AXIS = "data"
# Seconds the processes of a multi-host run wait for each other to join.
JOIN_TIMEOUT = 300
"""Name of the mesh axis that batches are split over."""

_CPU_HINT = ("on CPU, set XLA_FLAGS=--xla_force_host_platform_device_count=N before JAX is "
             "imported to get N host devices")


def data_mesh(num_devices: int | None = None) -> Mesh:
    """A 1-D mesh with one ``"data"`` axis over the first `num_devices` devices.

    Args:
      num_devices: devices to use; None takes every device (of every process when running
        multi-host). Several processes must use all devices.

    Returns:
      ``Mesh`` of shape ``{"data": num_devices}``.

    Raises:
      ValueError: `num_devices` < 1, more than the visible devices, or fewer than all
        devices in a multi-process run.
    """
    devices = jax.devices()
    if num_devices is None:
        num_devices = len(devices)
    if isinstance(num_devices, bool) or not isinstance(num_devices, int) or num_devices < 1:
        raise ValueError(f"num_devices must be an int >= 1 or None (all devices); got "
                         f"{num_devices!r}")
    if num_devices > len(devices):
        raise ValueError(f"asked for {num_devices} devices but only {len(devices)} "
                         f"{devices[0].platform} device(s) are visible; use at most "
                         f"{len(devices)} ({_CPU_HINT})")
    if jax.process_count() > 1 and num_devices != len(devices):
        raise ValueError(f"a {jax.process_count()}-process run shards over all "
                         f"{len(devices)} devices; got num_devices={num_devices}")
    return jax.make_mesh((num_devices,), (DATA_AXIS,), devices=devices[:num_devices],
                         axis_types=(jax.sharding.AxisType.Auto,))


def resolve_mesh(mesh: Mesh | None = None) -> Mesh | None:
    """The mesh to shard over: `mesh`, else JAX's ambient mesh (``jax.set_mesh``), else None.

    An ambient mesh without a ``"data"`` axis is not ours to use and gives None.

    Raises:
      ValueError: an explicit `mesh` without a ``"data"`` axis.
    """
    if mesh is not None:
        if DATA_AXIS not in mesh.axis_names:
            raise ValueError(f"the mesh needs a {DATA_AXIS!r} axis to shard batches over; got "
                             f"axes {mesh.axis_names} (build one with smat.parallel.data_mesh)")
        return mesh
    ambient = jax.sharding.get_mesh()
    if ambient.empty or DATA_AXIS not in ambient.axis_names:
        return None
    return ambient


def _place(x: Any, sharding: NamedSharding) -> jax.Array:
    """``x`` with `sharding`; across processes each one builds only its own shards."""
    if sharding.is_fully_addressable:
        return jax.device_put(x, sharding)
    if isinstance(x, jax.Array) and x.sharding == sharding:
        return x
    if isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
        data = _place(jax.random.key_data(x), sharding)
        return jax.random.wrap_key_data(data, impl=jax.random.key_impl(x))
    host = np.asarray(x)
    return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])


def shard_batch(tree: PyTree, mesh: Mesh, *, axis: int = 0,
                process_local: bool = False) -> PyTree:
    """Split every array of `tree` along `axis` (its example axis) over the mesh's data axis.

    Every leaf gets ``NamedSharding(mesh, P(None,) * axis + ("data",))``: device i holds
    rows ``[i * B / n, (i + 1) * B / n)`` of a batch of B examples over n devices. Inputs
    are numpy or jax arrays (None leaves are kept as is).

    Args:
      tree: a pytree of arrays that share the example axis, e.g. ``Encoded`` or a dict batch.
      mesh: a mesh with a ``"data"`` axis (:func:`data_mesh`).
      axis: the example axis (1 for seed-stacked batches ``(S, B, ...)``).
      process_local: every leaf holds only this process's rows of the global batch (its
        devices' rows, in their order; :class:`smat.data.DataShards`), and the global batch
        is assembled from every process's (``jax.make_array_from_process_local_data``).

    Returns:
      The same pytree of ``jax.Array``s, sharded.

    Raises:
      ValueError: a leaf with no `axis`, or whose size along it does not divide over the
        devices (naming the leaf, the batch size and the device count).
    """
    devices = mesh.shape[DATA_AXIS]
    sharding = NamedSharding(mesh, P(*(None,) * axis, DATA_AXIS))
    assemble = process_local and not sharding.is_fully_addressable
    if assemble:  # each process holds the rows of its own devices
        devices = len(mesh.local_devices)

    def place(path, leaf):
        name = jax.tree_util.keystr(path) or "the batch"
        shape = np.shape(leaf)
        if len(shape) <= axis:
            raise ValueError(f"{name} has shape {shape}: no example axis {axis} to shard over "
                             f"the {devices} devices")
        if shape[axis] % devices:
            raise ValueError(
                f"{name} has a batch of {shape[axis]} examples (axis {axis} of shape {shape}), "
                f"which does not divide over {devices} devices; use a batch size that is a "
                f"multiple of {devices} (e.g. {devices * max(1, math.ceil(shape[axis] / devices))})"
                f" or fewer devices")
        if assemble:
            return jax.make_array_from_process_local_data(sharding, np.asarray(leaf))
        return _place(leaf, sharding)

    return jax.tree_util.tree_map_with_path(place, tree)


def process_max(value: int) -> int:
    """The largest of every process's `value` (one all-gather; `value` itself in a
    one-process run): what processes that hold different rows agree on, such as the
    length a global batch is cut to."""
    if jax.process_count() == 1:
        return value
    from jax.experimental import multihost_utils

    return int(np.max(multihost_utils.process_allgather(np.asarray(value, np.int32))))


def process_blocks(num_rows: int) -> list[slice]:
    """Every process's contiguous block of `num_rows` rows, process 0's first (their
    sizes differ by at most one row)."""
    count = jax.process_count()
    return [slice(q * num_rows // count, (q + 1) * num_rows // count) for q in range(count)]


def process_block(num_rows: int) -> slice:
    """This process's block of `num_rows` rows (:func:`process_blocks`)."""
    return process_blocks(num_rows)[jax.process_index()]


def gather_blocks(tree: PyTree, num_rows: int) -> PyTree:
    """Every process's block (:func:`process_block` of `num_rows`) of each array of `tree`,
    joined in process order: all `num_rows` rows, on every process (one all-gather per
    array, a collective: every process must call it)."""
    if jax.process_count() == 1:
        return tree
    from jax.experimental import multihost_utils

    blocks = process_blocks(num_rows)
    largest = max(block.stop - block.start for block in blocks)

    def gather(leaf):
        leaf = np.asarray(leaf)
        padded = np.zeros((largest, *leaf.shape[1:]), np.uint8 if leaf.dtype == bool
                          else leaf.dtype)
        padded[:len(leaf)] = leaf
        every = np.asarray(multihost_utils.process_allgather(padded))  # (processes, largest, ...)
        return np.concatenate([every[q, :block.stop - block.start]
                               for q, block in enumerate(blocks)]).astype(leaf.dtype)

    return jax.tree.map(gather, tree)


def replicate(tree: PyTree, mesh: Mesh) -> PyTree:
    """A full copy of every array of `tree` on every device of `mesh` (``P()``).

    Used for parameters, optimizer states and step counters; with them replicated and the
    batch sharded, a jitted step computes per-device gradients and all-reduces them.
    """
    sharding = NamedSharding(mesh, P())
    return jax.tree.map(lambda leaf: _place(leaf, sharding), tree)


def commit(tree: PyTree) -> PyTree:
    """Every array of `tree` committed to JAX's default device.

    A jitted step's outputs are committed to their device, and ``jax.jit`` keys its compiled
    programs on whether each argument is: a loop whose first state is committed only in part
    (fresh ``jnp`` values beside the outputs of a jitted function, as in a model loaded from a
    run) compiles its step a second time at the second step.
    """
    device = jax.config.jax_default_device
    if not isinstance(device, jax.Device):  # unset, or a platform name
        device = jax.devices(device)[0] if device else jax.devices()[0]
    return jax.device_put(tree, device)


def to_host(tree: PyTree) -> PyTree:
    """Every array of `tree` as a NumPy array on this host, whole.

    An array sharded over the devices of several processes is gathered from all of them
    (``process_allgather``, a collective: every process must call it); others are fetched
    as ``jax.device_get`` does.
    """
    from jax.experimental import multihost_utils

    def fetch(leaf):
        if isinstance(leaf, jax.Array) and not leaf.is_fully_addressable:
            return np.asarray(multihost_utils.process_allgather(leaf, tiled=True))
        return jax.device_get(leaf)

    return jax.tree.map(fetch, tree)


def is_primary() -> bool:
    """Whether this is process 0 of the run (always, in one process): the process that
    writes what every process would write alike."""
    return jax.process_index() == 0


def finish_distributed() -> None:
    """End a multi-process run once every process has finished its work (a no-op in one
    process): JAX's own shutdown at exit waits only a short while for the others."""
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices("smat finished")
        jax.distributed.shutdown()


def initialize_distributed(
    *,
    coordinator_address: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
    auto: bool = False,
    environ: Mapping[str, str] | None = None,
    timeout: int = JOIN_TIMEOUT,
) -> bool:
    """Start JAX's multi-host runtime (``jax.distributed.initialize``) when it is asked for.

    Each value comes from its argument, else from the environment variables
    ``JAX_COORDINATOR_ADDRESS`` (``host:port`` of process 0), ``JAX_NUM_PROCESSES`` and
    ``JAX_PROCESS_ID``. With none of them set (and not `auto`) this is a single-process run
    and nothing is called, as with one process. `auto` lets JAX detect the cluster itself
    (Cloud TPU pod slices, SLURM, Open MPI), where no value is needed.

    Args:
      coordinator_address: ``host:port`` that process 0 listens on.
      num_processes: processes taking part (one per host, or per GPU).
      process_id: this process, in ``[0, num_processes)``.
      auto: call ``jax.distributed.initialize()`` with JAX's cluster auto-detection for the
        values not given.
      environ: the environment to read (default ``os.environ``).
      timeout: seconds every process waits for the others to join; a process other than
        0 first waits that long for the coordinator to listen.

    Returns:
      True when the distributed runtime is running (started now or before), else False.

    Raises:
      ValueError: some but not all of the three values are given without `auto`, they
        are out of range (naming the flag and the environment variable), or the
        coordinator does not listen within `timeout` seconds.
    """
    environ = os.environ if environ is None else environ
    values = {
        "coordinator_address": (coordinator_address, "JAX_COORDINATOR_ADDRESS", str),
        "num_processes": (num_processes, "JAX_NUM_PROCESSES", int),
        "process_id": (process_id, "JAX_PROCESS_ID", int),
    }
    resolved = {}
    for name, (value, variable, kind) in values.items():
        if value is None and environ.get(variable):
            try:
                value = kind(environ[variable])
            except ValueError:
                raise ValueError(f"{variable}={environ[variable]!r} is not a valid "
                                 f"{kind.__name__}") from None
        resolved[name] = value
    if jax.distributed.is_initialized():
        return True
    given = {name for name, value in resolved.items() if value is not None}
    if not given and not auto:
        return False
    if not auto and len(given) < 3:
        missing = [f"--{name.replace('_', '-')} / {values[name][1]}" for name in values
                   if name not in given]
        raise ValueError(f"a multi-host run needs all of coordinator address, number of "
                         f"processes and process id; missing {', '.join(missing)} (or let JAX "
                         f"detect a TPU pod / SLURM / MPI cluster with --distributed)")
    count, index = resolved["num_processes"], resolved["process_id"]
    if count is not None and count < 1:
        raise ValueError(f"num_processes must be >= 1; got {count}")
    if index is not None and (index < 0 or (count is not None and index >= count)):
        raise ValueError(f"process_id must lie in [0, {count}); got {index}")
    if not auto and count == 1:
        return False  # one process: nothing to coordinate
    if index and resolved["coordinator_address"]:
        _wait_for_coordinator(resolved["coordinator_address"], timeout=timeout,
                              process=f"process {index} of {count}")
    # JAX ends the process itself (no Python error) when the others do not join in time:
    # say beforehand what that would mean
    print(f"smat: joining {count or 'the'} processes at "
          f"{resolved['coordinator_address'] or 'the detected cluster'} (waiting up to "
          f"{timeout} s; a 'DEADLINE_EXCEEDED' abort means a process did not start or "
          "names another count: start every process with the same --coordinator and "
          "--num-processes, then rerun the same command, which resumes)", file=sys.stderr)
    jax.distributed.initialize(**resolved, initialization_timeout=timeout)
    return True


def _wait_for_coordinator(address: str, *, timeout: float, process: str) -> None:
    """Return once something listens at `address` (``host:port``), trying for `timeout`
    seconds: a process that is not the coordinator checks this before JAX, which would
    abort the process without a Python error when it cannot register.

    Raises:
      ValueError: nothing listens there in time (naming the address and what to do).
    """
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"--coordinator {address!r} must be HOST:PORT")
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=2):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise ValueError(
                    f"{process} could not reach the coordinator at {address} within "
                    f"{timeout:g} s: start process 0 (--process-id 0) with the same "
                    "--coordinator and --num-processes, check the host and port are "
                    "reachable from here, then rerun this command") from None
            time.sleep(0.5)
