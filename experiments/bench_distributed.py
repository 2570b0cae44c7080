"""One PLSA model fitted by one process and by two processes that each read half of a batch store
(issue 28, item 3): per-process peak memory, time per iteration, and the two models' difference.

The corpus is the generator's (:func:`topicjax.datasets.lda_corpus_parts`, ``preset="nytimes"``:
300,000 documents, 102,660 words, ~67 M non-zeros; T = 100 planted topics, seed 0) written once
into an on-disk batch store (:func:`topicjax.scale.store.write_store`) cached under ``--workdir``
(default ``/tmp/topicjax_bench_distributed``).  Then, each child a fresh process under
``/usr/bin/time -v`` (its peak resident memory) with one CPU device:

* ``1proc``: :func:`topicjax.scale.distributed.fit` of the store in one process (it reads every
  document);
* ``2proc``: the same call in two processes on localhost joined by
  :func:`topicjax.scale.distributed.initialize` (``jax.distributed``, gloo collectives), each
  reading from the store only its device's half of the documents.

Both fit ``--iterations`` PLSA iterations (ARTM without regularizers) with ``--topics`` topics from
the same ``random_state``.  A fit's iterations run as one compiled block, so every child fits three
times: 1 iteration (compiles; its wall time is reported as the first fit: reading the store,
layout, totals, compilation), 1 iteration again (t_1) and N iterations (t_N, reported as the fit);
the time per iteration is (t_N - t_1) / (N - 1).  Reported: every process's peak RSS (over the
three fits, which run one after the other), those times, and
``max |phi_1proc - phi_2proc|`` (float32 round-off: the E-step's sums in another order).  The
compiled E-step kernel of each child gets ``cores / processes`` threads (``TOPICJAX_THREADS``),
so the two runs use the same cores.  Timings mean something only on a quiet machine (1-minute
load < 1, printed); memory does not depend on the load.

    python experiments/bench_distributed.py                  # NYTimes size, 5 iterations
    python experiments/bench_distributed.py --iterations 10
    python experiments/bench_distributed.py --quick          # a small corpus, seconds
    python experiments/bench_distributed.py --docs 2000      # NYTimes's vocabulary, 2,000 documents:
                                                             # the part that does not grow with the corpus
    python experiments/bench_distributed.py --store /tmp/topicjax-bench-online/pubmed_D8200000_W141043_T100_s0_b10000_h2000/store --iterations 2
                                                             # PubMed size: the store bench_online.py writes
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_scale as bs  # noqa: E402 - the /usr/bin/time -v reader shared by the benchmarks

ROOT = Path(__file__).resolve().parents[1]
GIB = 1024 ** 3
#: the generator's arguments of each size (``preset`` names :data:`topicjax.data.synthetic.PRESETS`)
SIZES = {"nytimes": dict(preset="nytimes"),
         "quick": dict(n_docs=600, n_words=400, mean_length=40.0)}
BATCH = 1000  # documents per batch of the store (the sharded fit reads by device range, not by batch)


# ============================================================================ the store
def store_folder(a) -> Path:
    docs = "" if a.docs is None else f"-D{a.docs}"
    return Path(a.workdir) / f"store-{a.size}{docs}-T{a.corpus_topics}-s{a.seed}"


def prepare_store(a) -> Path:
    """The cached store, written on first use (a folder without ``meta.json`` is rewritten)."""
    import topicjax as tj
    from topicjax.scale.store import write_store

    if a.store is not None:
        return Path(a.store)
    folder = store_folder(a)
    if (folder / "meta.json").is_file():
        return folder
    t0 = time.perf_counter()
    size = dict(SIZES[a.size], **({} if a.docs is None else dict(n_docs=a.docs)))
    parts = tj.datasets.lda_corpus_parts(**size, n_topics=a.corpus_topics, seed=a.seed).parts
    store = write_store(parts, folder, batch_size=BATCH)
    print(f"store {folder}: {store.n_docs} documents, {store.n_words} words, {store.nnz} non-zeros, "
          f"{store.n_tokens} tokens, written in {time.perf_counter() - t0:.1f} s", flush=True)
    return folder


# ============================================================================ a child
def child_main(cfg: dict) -> None:
    """One process of a fit: join the run (several processes), fit, write its result."""
    import resource

    from topicjax.scale import distributed

    if cfg["n_processes"] > 1:
        distributed.initialize(cfg["coordinator"], cfg["n_processes"], cfg["process_id"])
    import jax

    def timed(n_iter):
        t0 = time.perf_counter()
        model = distributed.fit(cfg["store"], cfg["topics"], max_iter=n_iter, random_state=0, scores=(),
                                progress=False)
        return model, time.perf_counter() - t0

    # The iterations of a fit run as one compiled block (no host scores), so the time of one
    # iteration is the difference of a fit of N and a fit of 1 (after a first fit that compiles).
    first_s = timed(1)[1]
    one_s = timed(1)[1]
    model, wall = timed(cfg["iterations"])
    per = (wall - one_s) / max(cfg["iterations"] - 1, 1)
    out = dict(process_id=cfg["process_id"], n_processes=cfg["n_processes"], devices=len(jax.devices()),
               first_fit_s=first_s, fit_s=wall, iteration_s=per,
               ru_maxrss=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
               objective=model.history_[-1]["objective"])
    if cfg["process_id"] == 0:
        np.save(cfg["phi"], model.phi_)
    Path(cfg["result"]).write_text(json.dumps(out))
    if cfg["n_processes"] > 1:
        jax.distributed.shutdown()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_fit(name: str, n_processes: int, a, folder: Path) -> list[dict]:
    """``n_processes`` children (one device each) fitting the store together; their results."""
    work = Path(a.workdir) / name
    work.mkdir(parents=True, exist_ok=True)
    threads = max(1, (os.cpu_count() or 1) // n_processes)
    # one device per process; the caller's other XLA flags are kept (the test suite's quicker compiler settings)
    device_flag = "--xla_force_host_platform_device_count"
    flags = [f for f in os.environ.get("XLA_FLAGS", "").split() if not f.startswith(device_flag)]
    env = dict(os.environ, XLA_FLAGS=" ".join([*flags, f"{device_flag}=1"]), JAX_PLATFORMS="cpu",
               TOPICJAX_THREADS=str(threads),
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    port = _free_port()
    procs = []
    for pid in range(n_processes):
        cfg = dict(store=str(folder), n_processes=n_processes, process_id=pid, coordinator=f"127.0.0.1:{port}",
                   topics=a.topics, iterations=a.iterations, result=str(work / f"result{pid}.json"),
                   phi=str(work / "phi.npy"))
        Path(cfg["result"]).unlink(missing_ok=True)
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(cfg)]
        tv = work / f"time{pid}.txt"
        if Path("/usr/bin/time").exists():
            cmd = ["/usr/bin/time", "-v", "-o", str(tv)] + cmd
        procs.append((pid, cfg, tv, subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                                     text=True)))
    results = []
    try:
        for pid, cfg, tv, proc in procs:
            output, _ = proc.communicate(timeout=a.timeout)
            if proc.returncode != 0 or not Path(cfg["result"]).is_file():
                raise RuntimeError(f"{name} process {pid} failed (exit {proc.returncode}):\n{output[-3000:]}")
            res = json.loads(Path(cfg["result"]).read_text())
            res["time_v_peak"] = bs._time_v_peak(tv)
            results.append(res)
    finally:
        for *_, proc in procs:
            if proc.poll() is None:
                proc.kill()
    return results


# ============================================================================ the report
def report(a, folder: Path, runs: dict) -> str:
    meta = json.loads((folder / "meta.json").read_text())
    phi1 = np.load(Path(a.workdir) / "1proc" / "phi.npy")
    phi2 = np.load(Path(a.workdir) / "2proc" / "phi.npy")
    label = a.size if a.store is None else f"the store {a.store}"
    lines = [f"corpus: {label} ({meta['n_docs']} documents, {meta['n_words']} words, {meta['nnz']} non-zeros, "
             f"{meta['n_tokens']} tokens), T = {a.topics}, {a.iterations} PLSA iterations, "
             f"load {os.getloadavg()[0]:.2f}",
             "| run | process | peak RSS (GiB, time -v) | first fit of 1 iteration (s) | fit (s) | s / iteration |",
             "|---|---|---|---|---|---|"]
    for name, results in runs.items():
        for r in results:
            peak = r["time_v_peak"] if r["time_v_peak"] is not None else r["ru_maxrss"]
            lines.append(f"| {name} | {r['process_id']} | {peak / GIB:.3f} | {r['first_fit_s']:.2f} | "
                         f"{r['fit_s']:.2f} | {r['iteration_s']:.4f} |")
    lines.append(f"max |phi_1proc - phi_2proc| = {float(np.abs(phi1 - phi2).max()):.3g}; "
                 f"objective 1proc {runs['1proc'][0]['objective']:.8g}, 2proc {runs['2proc'][0]['objective']:.8g}")
    return "\n".join(lines)


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="a small corpus (600 documents, 10 topics, 3 iterations)")
    p.add_argument("--iterations", type=int, default=None, help="PLSA iterations (default 5; 3 with --quick)")
    p.add_argument("--topics", type=int, default=None, help="topics of the fit (default 100; 10 with --quick)")
    p.add_argument("--seed", type=int, default=0, help="seed of the generated corpus")
    p.add_argument("--workdir", default="/tmp/topicjax_bench_distributed", help="cache of the store and results")
    p.add_argument("--docs", type=int, default=None,
                   help="the first N documents' worth of the size (same vocabulary and lengths): with few "
                        "documents the peaks are the part that does not grow with the corpus")
    p.add_argument("--store", default=None, help="an existing batch store to fit instead of the generated one "
                                                 "(e.g. the PubMed-sized store of bench_online.py)")
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds per fit before it is killed")
    p.add_argument("--child", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    a.size = "quick" if a.quick else "nytimes"
    a.corpus_topics = 10 if a.quick else 100
    a.iterations = a.iterations if a.iterations is not None else (3 if a.quick else 5)
    a.topics = a.topics if a.topics is not None else (10 if a.quick else 100)
    return a


def main(argv=None) -> dict:
    a = parse(argv)
    if a.child is not None:
        child_main(json.loads(a.child))
        return {}
    Path(a.workdir).mkdir(parents=True, exist_ok=True)
    folder = prepare_store(a)
    runs = {"1proc": run_fit("1proc", 1, a, folder), "2proc": run_fit("2proc", 2, a, folder)}
    text = report(a, folder, runs)
    print(text, flush=True)
    return runs


if __name__ == "__main__":
    main()
