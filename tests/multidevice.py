"""Multi-device and multi-process runs for the tests: several CPU devices need
``XLA_FLAGS=--xla_force_host_platform_device_count=N`` before JAX starts, so they run in
subprocesses; two ``jax.distributed`` processes on localhost (gloo collectives) with two devices
each stand for two hosts."""

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
N_ITER = 6
T = 8

# The model every check compares with: ARTM.fit on one device, with and without a plain
# two-argument regularizer (smoothing Φ, ARTM eq. 23, and sparsing Θ).
COMMON = textwrap.dedent(
    f"""
    import json, sys
    import numpy as np, jax, jax.numpy as jnp
    import topicjax as tj
    from topicjax import datasets
    from topicjax.scale import distributed

    corpus, _, _ = datasets.make_bars(n_docs=70, doc_length=40, seed=3)

    def reg(phi, theta):
        return 0.01 * jnp.sum(jnp.log(phi)) - 0.02 * jnp.sum(jnp.log(theta))

    KW = dict(max_iter={N_ITER}, progress=False, random_state=0, scores=("perplexity",))
    REGS = {{"plsa": None, "artm": [reg]}}
    """
)


def env(n_devices: int) -> dict:
    env = dict(os.environ)
    # after the caller's flags (the suite's quick-compile ones, tests/conftest.py)
    env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={n_devices}".strip()
    env["JAX_PLATFORMS"] = "cpu"
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def run(code: str, n_devices: int, timeout: float = 180) -> dict:
    out = subprocess.run([sys.executable, "-c", code], env=env(n_devices), capture_output=True, text=True,
                         timeout=timeout, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_pair(code: str, n_local: int) -> list[dict]:
    """Run ``code`` as processes 0 and 1 (``sys.argv[1]``), each with ``n_local`` devices; returns
    the JSON each printed last."""
    procs = [subprocess.Popen([sys.executable, "-c", code, str(i)], env=env(n_local), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd=ROOT) for i in range(2)]
    outs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=180)
            assert p.returncode == 0, err[-3000:]
            outs.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    return outs


def run_two_processes(tmp_path, regs_name: str):
    """Fit ``REGS[regs_name]`` with the documents sharded over 2 processes x 2 devices; returns the
    two processes' saved ``phi``, ``theta``."""
    port = free_port()
    code = COMMON.replace("import json, sys\n", "import json, sys\npid = int(sys.argv[1])\n", 1)
    code = "import sys\nfrom topicjax.scale import distributed as _d\n" + textwrap.dedent(
        f"""
        _d.initialize("127.0.0.1:{port}", num_processes=2, process_id=int(sys.argv[1]))
        """
    ) + code + textwrap.dedent(
        f"""
        assert jax.process_count() == 2 and len(jax.devices()) == 4 and len(jax.local_devices()) == 2
        m = distributed.fit(corpus, {T}, regularizers=REGS["{regs_name}"], **KW)
        # host_array's blockwise gather is checked in the shared two-process run (tests/two_process_run.py)
        np.savez("{tmp_path}/out%d.npz" % pid, phi=m.phi_, theta=m.theta_, ll=m.history_[-1]["objective"])
        print(json.dumps(dict(pid=pid, n=len(m.history_))))
        jax.distributed.shutdown()
        """
    )
    outs = run_pair(code, 2)
    assert sorted(o["pid"] for o in outs) == [0, 1] and all(o["n"] == N_ITER for o in outs)
    return [np.load(tmp_path / f"out{i}.npz") for i in range(2)]


# ---------------------------------------------------------------------------- a store over 2 processes
STORE_BATCH = 20  # documents per batch of the store: 70 documents make 4 batches, the last of 10
ONLINE_KW = dict(passes=2, learning_offset=4.0, doc_passes=5)


def store_corpus():
    """The corpus of the store checks (that of :data:`COMMON`)."""
    from topicjax import datasets

    return datasets.make_bars(n_docs=70, doc_length=40, seed=3)[0]


def owned_documents(offsets, n_processes: int, n_local: int, batch_size: int | None = None) -> list[np.ndarray]:
    """Which documents each process reads: those of its devices' ranges (devices in process order,
    ``n_local`` each) of the whole corpus (``batch_size=None``, the sharded fit: equal blocks of
    documents, Θ split by documents) or of every batch (the online fit: ranges of equal non-zeros)."""
    from topicjax.core.sharding import device_ranges, document_blocks

    D = offsets.size - 1
    owned = [np.zeros(D, bool) for _ in range(n_processes)]
    spans = [(0, D)] if batch_size is None else [(f, min(D, f + batch_size)) for f in range(0, D, batch_size)]
    for first, last in spans:
        off = offsets[first:last + 1] - offsets[first]
        if batch_size is not None:  # the last batch is padded with empty documents, as fit_online pads it
            off = np.concatenate([off, np.full(batch_size - (last - first), off[-1])])
        n_dev = n_processes * n_local
        ranges = document_blocks(D, n_dev) if batch_size is None else device_ranges(off, n_dev)
        for i, (a, b) in enumerate(ranges):
            owned[i // n_local][first + min(a, last - first):first + min(b, last - first)] = True
    return owned


def garbage_copy(folder: Path, out: Path, keep: np.ndarray) -> Path:
    """A copy of the store ``folder`` whose entries of the documents not in ``keep`` are garbage
    (word id 2^31 - 1, count -1): reading any of them is a CorpusError, so a fit of the copy
    succeeds only if it never reads them."""
    import shutil

    shutil.copytree(folder, out)
    offsets = np.fromfile(out / "offsets.bin", np.int64)
    lengths = np.diff(offsets)
    foreign = np.repeat(~keep, lengths)
    for name, value in (("words.bin", np.iinfo(np.int32).max), ("counts.bin", -1)):
        arr = np.fromfile(out / name, np.int32)
        arr[foreign] = value
        arr.tofile(out / name)
    return out


def run_two_processes_store(tmp_path, n_local: int = 2):
    """Two ``jax.distributed`` processes with ``n_local`` devices each fit a batch store that each
    reads only its own part of (every process has its own copy of the store, the other process's
    part garbage): the sharded ARTM fit of :data:`COMMON`'s settings (``distributed.fit``) and the
    online fit with ``mesh=`` (:data:`ONLINE_KW`).  Returns ``(store folder, [process 0's
    results, process 1's])``, each a dict of ``phi``, ``theta``, ``online_phi``."""
    from topicjax.scale.store import write_store

    folder = tmp_path / "store"
    store = write_store([store_corpus()], folder, batch_size=STORE_BATCH)
    offsets = store.doc_offsets()
    whole = owned_documents(offsets, 2, n_local)
    batches = owned_documents(offsets, 2, n_local, STORE_BATCH)
    for p in range(2):
        garbage_copy(folder, tmp_path / f"fit{p}", whole[p])
        garbage_copy(folder, tmp_path / f"online{p}", batches[p])
    port = free_port()
    code = textwrap.dedent(
        f"""
        import json, sys
        from topicjax.scale import distributed
        pid = int(sys.argv[1])
        distributed.initialize("127.0.0.1:{port}", num_processes=2, process_id=pid)
        import jax, numpy as np
        from topicjax.scale import online
        assert jax.process_count() == 2 and len(jax.local_devices()) == {n_local}
        mesh = distributed.make_mesh()
        assert [d.process_index for d in mesh.devices.flat] == sorted(d.process_index for d in mesh.devices.flat)
        m = distributed.fit("{tmp_path}/fit%d" % pid, {T}, max_iter={N_ITER}, progress=False, random_state=0,
                            scores=("perplexity",))
        o = online.fit_online("{tmp_path}/online%d" % pid, {T}, mesh=mesh, progress=False, random_state=0,
                              **{ONLINE_KW!r})
        np.savez("{tmp_path}/out%d.npz" % pid, phi=m.phi_, theta=m.theta_, online_phi=o.phi_,
                 perplexity=m.history_[-1]["perplexity"], online_ll=[r["objective"] for r in o.history_])
        print(json.dumps(dict(pid=pid, n=len(m.history_), n_online=len(o.history_))))
        jax.distributed.shutdown()
        """
    )
    outs = run_pair(code, n_local)
    n_batches = -(-store.n_docs // STORE_BATCH)
    assert sorted(o["pid"] for o in outs) == [0, 1]
    assert all(o["n"] == N_ITER and o["n_online"] == ONLINE_KW["passes"] * n_batches for o in outs)
    return folder, [dict(np.load(tmp_path / f"out{i}.npz")) for i in range(2)]
