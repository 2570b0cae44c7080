"""One PLSA/ARTM model on many devices and hosts: documents sharded, counts reduced with ``psum``.

:func:`fit` ``(corpus, n_components, *, mesh=None, **artm_params)`` returns an
:class:`~topicjax.artm.ARTM` fitted with the documents sharded over ``mesh`` (default:
:func:`make_mesh`, every device of every process), the same model in every process: the
single-device model up to float round-off (bits may differ between CPU and GPU).  ``corpus`` is a
:class:`~topicjax.data.Corpus` held whole by every process, or a batch store
(:mod:`topicjax.scale.store`, or its folder) of which each process reads only its own devices'
documents (:func:`store_corpus`); with a store, labels, modality weights and scores or
regularizers that read every entry (``background_ratio``, coherence against the training corpus,
``improve_coherence`` without ``cooc``) are refused with an error that says so.
``ARTM.fit(corpus, mesh=mesh)`` is the same fit.

:func:`initialize` joins a multi-process run (``jax.distributed``, gloo collectives on CPU); call
it in every process before anything else touches JAX, with the coordinator's ``host:port``, the
number of processes and this process's id, or with no arguments under SLURM / Open MPI.  A
coordinator or peer that does not come within ``timeout`` is a :class:`StartupError`; bad
arguments are ``ValueError`` s.  The layout (:class:`ShardedCounts`, :class:`RangeCorpus`,
:func:`shard`, :func:`replicate`, :func:`host_array`, :data:`AXIS`) is
:mod:`topicjax.core.sharding`'s, re-exported.  Several devices in one CPU process:
``XLA_FLAGS=--xla_force_host_platform_device_count=4`` set before JAX starts.

How it works (memory and traffic, several processes, each process reading its own documents,
the online algorithm across processes): ``docs/guides/internals.md``, "Sharded fits: documents
over devices and hosts"; its use on a cluster: ``docs/scale.md``, "Running on a cluster".

>>> import topicjax as tj
>>> from topicjax.scale import distributed
>>> corpus, _, _ = tj.datasets.make_bars(n_docs=40, seed=0)
>>> model = distributed.fit(corpus, n_components=10, max_iter=3, progress=False)
>>> model.phi_.shape, model.theta_.shape
((25, 10), (10, 40))
"""

from __future__ import annotations

import contextlib
import math
import os
import socket
import time

import jax
from jax.sharding import Mesh

from topicjax.artm import ARTM
from topicjax.core.sharding import AXIS, RangeCorpus, ShardedCounts, host_array, make_mesh, replicate, shard
from topicjax.scale.store import BatchStore

__all__ = ["ShardedCounts", "RangeCorpus", "initialize", "StartupError", "make_mesh", "shard", "replicate", "host_array",
           "store_corpus", "fit", "AXIS"]


class StartupError(RuntimeError):
    """A multi-process run could not start: the coordinator or a peer did not come within the
    timeout.  The message names the coordinator's address, this process's id and who is missing."""


def initialize(coordinator_address: str | None = None, num_processes: int | None = None,
               process_id: int | None = None, *, timeout: float = 120.0, **kwargs) -> None:
    """Join a multi-process JAX run (``jax.distributed.initialize``) with CPU collectives on.

    Call it first thing in every process, before any JAX computation.  With no arguments JAX
    detects the cluster (SLURM, Open MPI, Kubernetes/TPU environments).  On CPU the
    cross-process ``psum`` needs a collectives library: gloo is selected here, and connected here
    too, with the standard output muted meanwhile (:func:`_connect_quietly`: gloo's connection
    lines do not show).

    With an explicit ``coordinator_address`` (``host:port``), ``num_processes`` > 1 and
    ``process_id``, the processes first meet at that address (:func:`_rendezvous`, a plain TCP
    exchange in Python: process 0 listens, every other process connects and says its id), so that a
    coordinator or a peer that never comes is a :class:`StartupError` after ``timeout`` seconds
    naming the address, this process and who is missing -- JAX's own start-up would wait five
    minutes and then abort the process with a C++ stack, which Python cannot catch.  JAX's
    ``initialization_timeout`` is set to ``timeout`` too, unless given in ``kwargs``.

    Raises:
        StartupError: the coordinator or a peer did not arrive within ``timeout`` seconds, or (on
            CPU) a sum over every device of every process did not count them all.
        ValueError: ``timeout`` not a number > 0, ``process_id`` outside ``[0, num_processes)``, or an
            address that is not ``host:port``.
    """
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ValueError(f"timeout must be a number of seconds > 0, got {timeout!r}")
    explicit = coordinator_address is not None and num_processes is not None and process_id is not None
    if explicit and num_processes > 1:
        _rendezvous(coordinator_address, int(num_processes), int(process_id), float(timeout))
    kwargs.setdefault("initialization_timeout", max(1, int(math.ceil(timeout))))
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=coordinator_address, num_processes=num_processes,
                               process_id=process_id, **kwargs)
    if jax.process_count() > 1 and jax.default_backend() == "cpu":
        _connect_quietly()


def _connect_quietly() -> None:
    """Connect the processes' gloo collectives now, with this process's standard output (file
    descriptor 1) sent to the null device meanwhile.  Gloo writes one line per process when it
    connects (``[Gloo] Rank 1 is connected to 1 peer ranks. ...``) from C++ to ``std::cout``;
    no setting, environment variable or log level of gloo or JAX turns it off (jaxlib 0.10), so
    the connections are made here rather than in the middle of the first fit: gloo keeps one per
    group of devices, and the groups are those of the fits' reductions, every device of
    :func:`make_mesh` (the counts' ``psum``) and one device per process (the gathers to the
    host).  Nothing else runs meanwhile: ``initialize`` is the first thing a process does.
    Errors still go to the standard error."""
    import ctypes
    import sys

    import jax.numpy as jnp
    import numpy as np
    from jax.experimental import multihost_utils
    from jax.sharding import NamedSharding, PartitionSpec

    from topicjax.core.compiled import jit

    mesh = make_mesh()
    ones = jax.make_array_from_callback((mesh.devices.size,), NamedSharding(mesh, PartitionSpec(AXIS)),
                                        lambda index: np.ones(1, np.int32))
    total = jit(jnp.sum, out_shardings=NamedSharding(mesh, PartitionSpec()))
    sys.stdout.flush()
    libc = ctypes.CDLL(None)
    saved, null = os.dup(1), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        multihost_utils.sync_global_devices("topicjax.scale.distributed.initialize")
        n = int(total(ones))
        libc.fflush(None)  # C stdio's buffer of the lines, written while they still go nowhere
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(null)
    if n != mesh.devices.size:
        raise StartupError(f"the devices of the {jax.process_count()} processes added up to {n}, expected "
                           f"{mesh.devices.size}: the collectives do not reach every device")


def _rendezvous(address: str, n: int, pid: int, timeout: float) -> None:
    """Meet the other processes at ``address`` before JAX does.  Process 0 listens there, takes one
    connection from each other process (which sends its id), then tells each to go on and waits
    for it to hang up (the peers close first, so the port is free again for JAX's service at once);
    the others retry connecting until ``timeout``."""
    if not 0 <= pid < n:
        raise ValueError(f"process_id must be in [0, {n}) for num_processes={n}, got {pid}")
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"coordinator_address must be 'host:port', got {address!r}")
    host, port_no = host.strip("[]"), int(port)
    who = f"process {pid} of {n}"
    deadline = time.monotonic() + timeout
    if pid == 0:
        peers: dict[int, socket.socket] = {}
        try:
            with socket.create_server(("" if host in ("0.0.0.0", "::") else host, port_no), reuse_port=False) as srv:
                srv.settimeout(0.2)
                while len(peers) < n - 1:
                    if time.monotonic() > deadline:
                        missing = sorted(set(range(1, n)) - set(peers))
                        raise StartupError(f"coordinator {address} ({who}): process(es) {_ids(missing)} did not "
                                           f"connect within {timeout:g} s; start every process with the same "
                                           "coordinator address and num_processes")
                    try:
                        conn, _ = srv.accept()
                    except socket.timeout:
                        continue
                    conn.settimeout(max(0.1, deadline - time.monotonic()))
                    try:
                        msg = conn.recv(64).decode("ascii", "replace").strip()
                    except OSError:
                        conn.close()
                        continue
                    if not (msg.startswith("topicjax ") and msg[9:].isdigit()) or not 0 < int(msg[9:]) < n:
                        conn.close()  # something else knocked: not one of ours
                        continue
                    old = peers.pop(int(msg[9:]), None)
                    if old is not None:
                        old.close()
                    peers[int(msg[9:])] = conn
            for conn in peers.values():
                conn.sendall(b"go\n")
            for conn in peers.values():  # the peer hangs up first
                with contextlib.suppress(OSError):
                    conn.settimeout(max(0.1, deadline - time.monotonic()))
                    conn.recv(16)
        except OSError as e:
            raise StartupError(f"coordinator {address} ({who}): cannot listen there ({e})") from None
        finally:
            for conn in peers.values():
                conn.close()
        return
    last = "no answer"
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port_no), timeout=max(0.1, min(2.0, deadline - time.monotonic()))) as c:
                c.sendall(f"topicjax {pid}\n".encode("ascii"))
                c.settimeout(max(0.1, deadline - time.monotonic()))
                if c.recv(16).startswith(b"go"):
                    return
                last = "the coordinator hung up"
        except OSError as e:
            last = e.strerror or type(e).__name__
        time.sleep(0.2)
    raise StartupError(f"coordinator {address} did not answer {who} within {timeout:g} s (last: {last}); start "
                       "process 0 there, with the same num_processes")


def _ids(ids: list[int]) -> str:
    return ", ".join(map(str, ids[:8])) + (f" and {len(ids) - 8} more" if len(ids) > 8 else "")


def store_corpus(store: BatchStore | str | os.PathLike) -> RangeCorpus:
    """A batch store (or its folder) as a :class:`~topicjax.core.sharding.RangeCorpus`: its
    offsets (the whole ``offsets.bin``), vocabulary and number of tokens, and its entries read
    by document range (:meth:`BatchStore.documents <topicjax.scale.store.BatchStore.documents>`)
    when :func:`shard` asks for a device's range; nothing else is read."""
    store = store if isinstance(store, BatchStore) else BatchStore(store)

    def read(a: int, b: int):
        batch = store.documents(a, b)
        return batch.words, batch.counts

    return RangeCorpus(store.doc_offsets(), read, vocab=tuple(store.vocab()), n_tokens=store.n_tokens,
                       source=str(store.folder))


def fit(corpus, n_components: int, *, mesh: Mesh | None = None, checkpoint=None, checkpoint_every: int = 10,
        **params):
    """An :class:`~topicjax.artm.ARTM` fitted with the documents sharded over ``mesh`` (default:
    every device of every process); ``params`` are ARTM's (``regularizers``, ``max_iter``,
    ``random_state``, ...), validated as ``ARTM.fit`` does.  The same model in every process;
    with one device it equals ``ARTM(...).fit(corpus)``, with several up to round-off.

    ``corpus``: a :class:`~topicjax.data.Corpus` (every process holds it whole), or a batch store
    (a :class:`~topicjax.scale.store.BatchStore` or its folder), of which every process reads only
    its own devices' documents (see the module docstring; the model of
    ``ARTM(...).fit(store.corpus())`` up to round-off).  ``checkpoint``, ``checkpoint_every``: as
    in ``ARTM.fit`` (single-process fits of a Corpus only)."""
    if isinstance(corpus, (BatchStore, str, os.PathLike)):
        corpus = store_corpus(corpus)
    return ARTM(n_components, **params).fit(corpus, mesh=make_mesh() if mesh is None else mesh,
                                            checkpoint=checkpoint, checkpoint_every=checkpoint_every)
