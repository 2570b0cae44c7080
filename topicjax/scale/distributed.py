"""One PLSA/ARTM model on many devices and hosts: documents sharded, counts reduced with ``psum``.

The E-step is a sum over documents, so it splits over devices exactly: :func:`shard` (of
:mod:`topicjax.core.sharding`, where the equations are) gives each device a contiguous block of
documents, a :class:`ShardedCounts` layout with its own E-step (``shard_map`` + ``psum``).
Everything else is the one EM step of :mod:`topicjax.core.em`: ``ARTM.fit(corpus, mesh=mesh)``
(or :func:`fit`) runs the same M-step, regularizers (any that ``ARTM`` accepts), removal of
over-regularized topics and documents, driver and checks on global arrays, which XLA's
partitioner splits over the devices.  The result is the single-device model up to float
round-off (the order of the additions differs); bits may differ between CPU and GPU.

Memory and traffic: each device stores its documents' counts, Φ (W x T, replicated) and its
block of Θ's columns (T x D / n: Θ is split by documents, so are the M-step's Θ-sized
temporaries); one pass all-reduces the W x T counts n_wt.  The blocks hold equal numbers of
documents (``ceil(D / n)``, the last padded with columns that are no document and that no
regularizer or score sees), so the devices' work is as even as the documents' lengths along the
corpus's order.  A regularizer ``R(Φ, Θ)`` is written for the whole Θ as always; what it sums over
documents, XLA adds up across the devices.

Several devices in one process
------------------------------
On CPU, ask XLA for several host devices *before JAX starts*::

    XLA_FLAGS=--xla_force_host_platform_device_count=4 python fit.py

and in ``fit.py``::

    from topicjax.scale import distributed
    model = distributed.fit(corpus, n_components=100, max_iter=50)   # an ARTM, all devices

On a machine with several GPUs the same code uses them all (``jax.devices()``).  On one
multi-core CPU, N host devices are also the way to run one model on N threads (XLA runs each
device's share on its own thread; the single-device E-step is mostly single-threaded), at the
price of the all-reduce of the counts; ``experiments/bench_em.py`` reports this as
``ours-Ndev`` when started with the flag above.

Several processes or hosts (``jax.distributed``)
-------------------------------------------------
Start one process per host (or per GPU) with the same script; each calls
:func:`initialize` before anything else touches JAX, with the same coordinator (``host:port`` of
process 0, reachable by all), the number of processes and its own id ``0 .. n - 1``::

    # host 0 (the coordinator, reachable by the others on port 12345):
    python fit.py --coordinator 10.0.0.1:12345 --num-processes 2 --process-id 0
    # host 1:
    python fit.py --coordinator 10.0.0.1:12345 --num-processes 2 --process-id 1

    # fit.py
    from topicjax.scale import distributed
    distributed.initialize(args.coordinator, args.num_processes, args.process_id)
    model = distributed.fit("nytimes-store", n_components=100, regularizers=[...], max_iter=50)
    if jax.process_index() == 0:
        model.save("model")

The mesh then spans the devices of all processes; :func:`shard` builds, in each process, only
the shards of its own devices (``jax.make_array_from_callback``), and every process ends with the
same model.  Under SLURM or Open MPI, ``jax.distributed.initialize()`` without arguments finds the
coordinator itself: call ``distributed.initialize()`` with no arguments from ``srun python
fit.py``.  On CPU the cross-process reductions use the gloo collectives, which
:func:`initialize` switches on.  ``tests/scale/test_distributed.py`` runs two processes on localhost.

Each process reads its own documents only
-----------------------------------------
Given a batch store (:mod:`topicjax.scale.store`: its folder, on a shared file system or copied
to every host), :func:`fit` reads in every process the whole ``offsets.bin`` (D + 1 numbers),
cuts the documents into the devices' blocks (:func:`~topicjax.core.sharding.document_blocks`) and
reads from ``words.bin`` and ``counts.bin`` only the byte ranges of its own devices
(:meth:`BatchStore.documents <topicjax.scale.store.BatchStore.documents>`).  What the fit needs of
the whole corpus comes from the store's ``meta.json`` and ``vocab.txt`` (D, W, the vocabulary,
the number of tokens) and from sums over documents that every device computes on its own entries
and ``psum`` adds up: the document lengths ``n_d`` and word totals ``n_w`` (for regularizers such
as topic selection and smoothing towards the background, and for the scores), which also check the
store (every document has a token, the tokens add up to ``meta.json``'s).  Θ starts uniform and Φ
from ``random_state``, so every process starts from the same model without reading anything.
The result is the model ``ARTM(...).fit(store.corpus())`` gives in one process, up to round-off
(the E-step's additions run in another order; duplicate (d, w) entries, which a
:class:`~topicjax.data.Corpus` merges, are added by the E-step).  Memory per process: its
documents' layout (about 1/P of the entries), Φ and 1/P of Θ (gathered whole into every process
once, at the end, as the model's ``theta_``).  Not with this path: labels, modality
weights, and scores or regularizers that read every entry (``background_ratio``, coherence against
the training corpus, ``improve_coherence`` without ``cooc``): they say so.

The online algorithm across processes
-------------------------------------
:func:`topicjax.scale.online.fit_online` ``(store, ..., mesh=mesh)`` splits every batch the same
way: each device gets a contiguous share of the batch's documents, each process reads only its
devices' shares, the Θ passes of a document need only its own entries and Φ (replicated), and the
batch's counts ``n̂_wt`` are the devices' partial counts added with ``psum``; every process then
applies the same update ``n_wt ← (1 - ρ) n_wt + ρ n̂_wt`` and M-step, so all hold the same Φ:
the one-process online model up to round-off.  Every batch has one sharded shape (the most chunks
any device needs in any batch), so the step compiles once.

>>> import topicjax as tj
>>> from topicjax.scale import distributed
>>> corpus, _ = tj.datasets.make_bars(n_docs=40, seed=0)
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
    cross-process ``psum`` needs a collectives library: gloo is selected here.

    With an explicit ``coordinator_address`` (``host:port``), ``num_processes`` > 1 and
    ``process_id``, the processes first meet at that address (:func:`_rendezvous`, a plain TCP
    exchange in Python: process 0 listens, every other process connects and says its id), so that a
    coordinator or a peer that never comes is a :class:`StartupError` after ``timeout`` seconds
    naming the address, this process and who is missing -- JAX's own start-up would wait five
    minutes and then abort the process with a C++ stack, which Python cannot catch.  JAX's
    ``initialization_timeout`` is set to ``timeout`` too, unless given in ``kwargs``.

    Raises:
        StartupError: the coordinator or a peer did not arrive within ``timeout`` seconds.
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
