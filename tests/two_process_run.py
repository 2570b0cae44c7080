"""One run of two ``jax.distributed`` processes (gloo collectives on localhost, two CPU devices
each) that the multi-process tests share: tests/scale/test_startup.py (a start-up that fails and
one in either order), tests/scale/test_two_process_output.py (who reports) and
tests/scale/test_distributed.py (sharded fits of a corpus and of a batch store).

Each process starts JAX, initialises ``jax.distributed`` and connects gloo once for all of them,
instead of one pair of fresh interpreters per test (each pair cost 2 x 2-3 s of start-up and its
own compilations).  What the processes do, in order (process 1 is started first; process 0 only
once process 1 has said it is about to join, so the peer always waits for its coordinator):

1. a start-up that must fail, first thing in the process: process 1 as the peer of a coordinator
   that never comes (``STARTUP_TIMEOUT`` s), process 0 as the coordinator of 3 processes of which
   2 never come; each prints ``StartupError: <message>``;
2. the real start (``initialize``), then ``started <index> <count>``;
3. a fit with the progress bar on (the default): ``fitted <index> <n iterations>``;
4. :data:`multidevice.COMMON`'s corpus with its regularizer sharded over the 4 devices, and
   Θ gathered to the host in blocks (``host_array``) against the whole of it;
5. a batch store of that corpus that each process reads only its own part of (its own copy of
   the store, the other part garbage): the sharded ARTM fit and the online fit with ``mesh=``.

Nothing but the lines of 1-3 goes to the standard output (so a gloo connection line anywhere in
the run shows); the fits' results go to ``out<pid>.npz`` and ``report<pid>.json``.

It runs once per pytest run, shared by the run's xdist workers (tests/run_once.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from multidevice import (COMMON, N_ITER, ONLINE_KW, ROOT, STORE_BATCH, T, env, free_port, garbage_copy,
                         owned_documents, store_corpus)
from run_once import once

#: the start-up timeout of the runs that must fail (step 1), seconds
STARTUP_TIMEOUT = 2

#: the settings of step 3's fit (its corpus: make_bars(n_docs=16, doc_length=10, seed=0))
REPORT_T, REPORT_ITER = 3, 2

# steps 1-3 (str.format fields: the ports, the settings)
_START = textwrap.dedent(
    """
    import json, sys, time
    pid, folder = int(sys.argv[1]), sys.argv[2]
    from topicjax.scale import distributed

    # 1. a start-up that fails, first thing in the process
    t0 = time.monotonic()
    try:
        if pid == 1:  # a peer whose coordinator never comes
            distributed.initialize("127.0.0.1:{lone_peer}", num_processes=2, process_id=1, timeout={timeout})
        else:  # a coordinator whose 2 peers never come
            distributed.initialize("127.0.0.1:{lone_coordinator}", num_processes=3, process_id=0, timeout={timeout})
        print("started without its partners", flush=True)
    except distributed.StartupError as e:
        print("StartupError:", e, flush=True)
    report = dict(failed_start_s=time.monotonic() - t0)

    # 2. the real start; process 1 says it is about to join (its parent starts process 0 then)
    if pid == 1:
        print("connecting", flush=True)
    distributed.initialize("127.0.0.1:{port}", num_processes=2, process_id=pid, timeout=120)
    import jax
    print("started", jax.process_index(), jax.process_count(), flush=True)
    assert jax.process_count() == 2 and len(jax.devices()) == 4 and len(jax.local_devices()) == 2

    # 3. a fit that reports: the progress bar of process 0 only
    from topicjax import datasets
    small = datasets.make_bars(n_docs=16, doc_length=10, seed=0).corpus
    model = distributed.fit(small, {report_t}, max_iter={report_iter}, random_state=0, scores=())
    print("fitted", jax.process_index(), len(model.history_), flush=True)
    """
)

# steps 4-5, after multidevice.COMMON (str.format fields: the settings)
_FITS = textwrap.dedent(
    """
    # 4. the corpus with a regularizer of Θ, Θ split over the 4 devices (blocks of 18, 2 padding columns)
    m = distributed.fit(corpus, {T}, regularizers=REGS["artm"], **KW)
    # Θ gathered from both processes in blocks of 3 rows (host_array's way with a large Θ; the last
    # block of 2), against the whole array gathered at once
    from jax.experimental import multihost_utils
    from topicjax.artm import algorithm as em
    sh = distributed.shard(corpus, shard_theta=True)
    theta0 = em.place(em.init(jax.random.key(0), corpus.n_words, 0, {T}), sh).theta
    theta = jax.jit(lambda t: t + jnp.arange(t.size, dtype=t.dtype).reshape(t.shape),
                    out_shardings=sh.theta_sharding)(theta0)  # every entry distinct
    whole = np.asarray(multihost_utils.process_allgather(theta, tiled=True))
    blocks = distributed.host_array(theta, block_bytes=3 * sh.theta_width * 4)
    assert blocks.shape == whole.shape == ({T}, sh.theta_width) and np.array_equal(blocks, whole)
    assert len(np.unique(whole)) == whole.size

    # 5. a store of which this process reads only its own part: the sharded fit and the online fit
    from topicjax.scale import online
    mesh = distributed.make_mesh()
    assert [d.process_index for d in mesh.devices.flat] == sorted(d.process_index for d in mesh.devices.flat)
    s = distributed.fit(f"{{folder}}/fit{{pid}}", {T}, max_iter={n_iter}, progress=False, random_state=0,
                        scores=("perplexity",))
    o = online.fit_online(f"{{folder}}/online{{pid}}", {T}, mesh=mesh, progress=False, random_state=0,
                          **{online_kw!r})
    np.savez(f"{{folder}}/out{{pid}}.npz", phi=m.phi_, theta=m.theta_, ll=m.history_[-1]["objective"],
             store_phi=s.phi_, store_theta=s.theta_, perplexity=s.history_[-1]["perplexity"],
             online_phi=o.phi_, online_ll=[r["objective"] for r in o.history_])
    report.update(pid=pid, n=len(m.history_), n_store=len(s.history_), n_online=len(o.history_))
    with open(f"{{folder}}/report{{pid}}.json", "w") as fh:
        json.dump(report, fh)
    jax.distributed.shutdown()
    """
)


def process_code(lone_peer: int, lone_coordinator: int, port: int) -> str:
    """The program of both processes (``python -c CODE PID FOLDER``)."""
    return (_START.format(lone_peer=lone_peer, lone_coordinator=lone_coordinator, port=port, timeout=STARTUP_TIMEOUT,
                          report_t=REPORT_T, report_iter=REPORT_ITER)
            + COMMON.replace("import json, sys\n", "", 1)
            + _FITS.format(T=T, n_iter=N_ITER, online_kw=ONLINE_KW))


@dataclass(frozen=True)
class Run:
    """What the two processes left: ``rc``, ``out`` (standard output), ``err`` (standard error)
    and ``report`` (``report<pid>.json``, None if not written) indexed by process id; the ports
    of step 1; the folder of the store (``store``), its copies (``fit<pid>``, ``online<pid>``)
    and ``out<pid>.npz``."""

    folder: Path
    rc: list
    out: list
    err: list
    report: list
    lone_peer: int  # the port of step 1's coordinator that never comes
    lone_coordinator: int  # the port of step 1's lone coordinator

    @property
    def store(self) -> Path:
        return self.folder / "store"

    def ok(self) -> None:
        """Assert that both processes exited cleanly, with the end of their standard error."""
        for pid in range(2):
            assert self.rc[pid] == 0 and self.report[pid] is not None, (pid, self.rc[pid], self.err[pid][-3000:])
            assert self.report[pid]["pid"] == pid

    def results(self, pid: int) -> dict:
        self.ok()
        return dict(np.load(self.folder / f"out{pid}.npz"))


def _distinct_ports(n: int) -> list[int]:
    ports: list[int] = []
    while len(ports) < n:
        p = free_port()
        if p not in ports:
            ports.append(p)
    return ports


def _run(folder: Path) -> dict:
    """Write the store and its copies in ``folder``, run the two processes there; their exit
    codes and output as a dict (what :class:`Run` holds)."""
    from topicjax.scale.store import write_store

    store = write_store([store_corpus()], folder / "store", batch_size=STORE_BATCH)
    offsets = store.doc_offsets()
    whole, batches = owned_documents(offsets, 2, 2), owned_documents(offsets, 2, 2, STORE_BATCH)
    for p in range(2):
        garbage_copy(folder / "store", folder / f"fit{p}", whole[p])
        garbage_copy(folder / "store", folder / f"online{p}", batches[p])
    lone_peer, lone_coordinator, port = _distinct_ports(3)
    code = process_code(lone_peer, lone_coordinator, port)
    procs: dict[int, subprocess.Popen] = {}
    errs = {p: open(folder / f"err{p}.txt", "wb") for p in (0, 1)}
    outs = {0: b"", 1: b""}
    try:
        for pid in (1, 0):  # the peer first: process 0 once process 1 has printed "connecting" (or ended)
            procs[pid] = subprocess.Popen([sys.executable, "-c", code, str(pid), str(folder)], env=env(2), cwd=ROOT,
                                          stdout=subprocess.PIPE, stderr=errs[pid])
            while pid == 1 and b"connecting\n" not in outs[1]:
                chunk = os.read(procs[1].stdout.fileno(), 4096)  # unbuffered: communicate() reads the rest
                if not chunk:
                    break
                outs[1] += chunk
        for pid in (1, 0):
            outs[pid] += procs[pid].communicate(timeout=600)[0]
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
        for fh in errs.values():
            fh.close()
    reports = [json.loads((folder / f"report{p}.json").read_text()) if (folder / f"report{p}.json").exists()
               else None for p in (0, 1)]
    return dict(rc=[procs[p].returncode for p in (0, 1)], out=[outs[p].decode() for p in (0, 1)],
                err=[(folder / f"err{p}.txt").read_text(errors="replace") for p in (0, 1)], report=reports,
                lone_peer=lone_peer, lone_coordinator=lone_coordinator)


def two_process_run(tmp_path_factory) -> Run:
    """The run, once per pytest run (:func:`run_once.once`: shared by its xdist workers)."""
    folder, done = once(tmp_path_factory, "two-processes", _run)
    return Run(folder, done["rc"], done["out"], done["err"], done["report"], done["lone_peer"],
               done["lone_coordinator"])
