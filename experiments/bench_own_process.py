"""Our PLSA pass against the plain fused numba reference, **each system in a process of its own**
(issue 27, item 5): the ratios of ``bench_threads.md`` re-stated with nothing shared between the
two (no JIT caches, allocator, thread pools or pinned cores of the other system in the process).

For every corpus, T and thread count, the two systems run alternately, ``--repeats`` times each,
every run a fresh ``python`` process pinned to the first ``threads`` cores:

* ``numba``: ``experiments/numba_reference.py`` (:class:`numba_reference.NumbaEStep`'s
  ``em_pass``: the E-step and the in-place M-step fused, float32, ``fastmath``, ``prange`` over
  work-balanced document blocks, per-thread ``n_wt`` slabs);
* ``ours``: one jit-compiled PLSA EM iteration (``topicjax.artm.algorithm.make_step``) with the C++
  E-step at ``threads`` threads (``bench_threads.OursCompiled``).

Both start from random Φ, Θ on the same 90 % training split (``bench_em.split``) and are timed by
the same :func:`numba_reference.time_rounds` (``--warmup`` untimed passes, then ``--rounds`` rounds
of ``--per-round`` back-to-back passes; the median over rounds).  Reported: each run's median,
the median of the ``--repeats`` runs per system, ``ours / numba`` and the 1-minute load before
each run.  Timings mean something only on a quiet machine (load < 1: printed; the table is not
written with ``--write`` otherwise unless ``--force``).

    python experiments/bench_own_process.py --corpus kos 20ng --topics 50 100 200 --threads 1 2 \\
        --out experiments/results/bench_own_process.md
    python experiments/bench_own_process.py --quick      # a small corpus, seconds

``--lda`` (issue 41, item 6) times instead LDA by Gibbs sampling **as a user runs it**, against
tomotopy's ``LDAModel`` (comparison only, never a dependency), each run a fresh process pinned to
``threads`` cores (tomotopy: ``workers = threads``):

* ``ours``: ``tj.LIDA(K, variant="lda", max_iter=S)`` with its defaults (α and β sampled every
  sweep, the training log-likelihood every 10 sweeps, posterior averaging after the burn-in), after
  a 3-sweep fit of the same sizes in the same process (so that its programs are compiled: a
  notebook's second fit; the first process's compilation is ``bench_coldstart.py``'s subject);
* ``tomotopy``: ``LDAModel(k=K, seed)`` with its defaults (α optimised every 10 iterations), the
  documents added as word lists, ``train(S)``.

Timed: the whole fit (the model made, the documents added or the token stream built, S sweeps),
reported as milliseconds per sweep (fit / S), with the training log-likelihood per token at the end
(ours: under the posterior means; tomotopy's ``ll_per_word``).  ``ours / tomotopy`` < 1 is ours
faster.

    python experiments/bench_own_process.py --lda --corpus kos --topics 50 100 200 --threads 2 \\
        --sweeps 200 --out experiments/results/bench_lda_own_process.md
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def child(system: str, corpus: str, T: int, threads: int, rounds: int, per_round: int, warmup: int, seed: int):
    """One system timed in this process; prints one JSON line ``{"median_ms", "min_ms", "cpu_ms"}``."""
    sys.path[:0] = [str(ROOT), str(HERE)]
    import numba_reference as nr

    if system == "numba":
        res = nr.main(["--time", corpus, "--topics", str(T), "--threads", str(threads), "--rounds", str(rounds),
                       "--per-round", str(per_round), "--warmup", str(warmup), "--seed", str(seed)])
        med, lo, cpu = res["pass_ms"]
    else:
        import bench_em
        import bench_threads as bt

        train = bench_em.split(bench_em.load_corpus(corpus, quick=False), seed)[0]
        bt.pin(threads)  # before the kernel's pool and XLA's threads are started
        s = bt.OursCompiled(train, T, threads, seed)
        s.before()
        med, lo, cpu = nr.time_rounds(s.step, rounds, per_round, warmup)  # step() waits for its result
    print("RESULT " + json.dumps(dict(median_ms=med, min_ms=lo, cpu_ms=cpu)), flush=True)


def child_lda(system: str, corpus: str, K: int, threads: int, sweeps: int, seed: int):
    """One LDA fit timed in this process (``--lda``); prints one JSON line ``{"median_ms" (per sweep),
    "total_s", "cpu_s", "ll_per_token"}``."""
    import time

    sys.path[:0] = [str(ROOT), str(HERE)]
    import bench_em
    import bench_threads as bt

    bt.pin(threads)
    data = bench_em.load_corpus(corpus, quick=False)
    if system == "ours":
        import topicjax as tj

        tj.LIDA(K, variant="lda", max_iter=3, random_state=seed, progress=False).fit(data)  # compiles
        t0, c0 = time.perf_counter(), time.process_time()
        model = tj.LIDA(K, variant="lda", max_iter=sweeps, random_state=seed, progress=False).fit(data)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        ll = model.history_[-1]["log_likelihood"] / data.n_tokens
    else:
        import tomotopy as tp

        vocab = data.vocab
        docs = [[vocab[w] for w, n in doc for _ in range(n)] for doc in data.to_lists()]
        warm = tp.LDAModel(k=K, seed=seed)  # loads and starts what a first train() would
        for d in docs[:50]:
            warm.add_doc(d)
        warm.train(2, workers=threads)
        t0, c0 = time.perf_counter(), time.process_time()
        model = tp.LDAModel(k=K, seed=seed)
        for d in docs:
            model.add_doc(d)
        model.train(sweeps, workers=threads)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        ll = float(model.ll_per_word)
    print("RESULT " + json.dumps(dict(median_ms=1000 * wall / sweeps, total_s=wall, cpu_s=cpu, ll_per_token=ll)),
          flush=True)


def run_child(system, corpus, T, threads, a) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", system, "--corpus", corpus, "--topics", str(T),
           "--threads", str(threads), "--rounds", str(a.rounds), "--per-round", str(a.per_round),
           "--warmup", str(a.warmup), "--seed", str(a.seed), "--sweeps", str(a.sweeps)] + (["--lda"] if a.lda else [])
    env = dict(os.environ, JAX_PLATFORMS="cpu", TOPICJAX_THREADS=str(threads))
    load = os.getloadavg()[0]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    lines = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"{system} {corpus} T={T} threads={threads} failed (exit {proc.returncode}):\n"
                           f"{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return dict(json.loads(lines[-1][len("RESULT "):]), load=load)


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", nargs="+", default=["kos", "20ng"], help="kos, 20ng or bars (bench_em.load_corpus)")
    p.add_argument("--topics", nargs="+", type=int, default=[50, 100, 200])
    p.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    p.add_argument("--repeats", type=int, default=2, help="processes per system and setting, alternating")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--per-round", type=int, default=5)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="the bars corpus, T = 10, 1 thread, 1 repeat, 3 rounds")
    p.add_argument("--out", help="write the table (with the command and the load) here")
    p.add_argument("--force", action="store_true", help="write even when the machine was loaded at the start")
    p.add_argument("--lda", action="store_true", help="LDA by Gibbs sampling end to end against tomotopy")
    p.add_argument("--sweeps", type=int, default=200, help="--lda: sweeps of each timed fit")
    p.add_argument("--child", choices=["numba", "ours", "tomotopy"], help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.quick:
        a.corpus, a.topics, a.threads, a.repeats, a.rounds, a.per_round, a.warmup = ["bars"], [10], [1], 1, 3, 2, 1
        a.sweeps = 5
    return a


def peer_missing(a) -> str | None:
    """Why the peer of this comparison cannot run here (``None`` where it can)."""
    import importlib.util

    name = "tomotopy" if a.lda else "numba"
    return None if importlib.util.find_spec(name) else f"{name} is not installed (pip install {name})"


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    a = parse(argv)
    if a.child:
        if a.lda:
            return child_lda(a.child, a.corpus[0], a.topics[0], a.threads[0], a.sweeps, a.seed)
        return child(a.child, a.corpus[0], a.topics[0], a.threads[0], a.rounds, a.per_round, a.warmup, a.seed)
    missing = peer_missing(a)
    if missing:
        print(f"the comparison needs its peer: {missing}")
        return 2
    peer = "tomotopy" if a.lda else "numba"
    load0 = os.getloadavg()
    rows = []
    for corpus in a.corpus:
        for T in a.topics:
            for n in a.threads:
                runs = {peer: [], "ours": []}
                for _ in range(a.repeats):
                    for system in (peer, "ours"):
                        runs[system].append(run_child(system, corpus, T, n, a))
                med = {k: statistics.median(r["median_ms"] for r in v) for k, v in runs.items()}
                rows.append(dict(corpus=corpus, T=T, threads=n, runs=runs, ratio=med["ours"] / med[peer], **med))
                print(f"{corpus} T={T} threads={n}: ours {med['ours']:.2f} ms, {peer} {med[peer]:.2f} ms, "
                      f"ours/{peer} {rows[-1]['ratio']:.2f}", flush=True)
    load1 = os.getloadavg()
    text = render_lda(rows, argv, load0, load1) if a.lda else render(rows, argv, load0, load1)
    print(text)
    if a.out:
        if load0[0] >= 1 and not a.force:
            print(f"not written: the load at the start was {load0[0]:.2f} (>= 1); --force to write anyway")
            return 1
        Path(a.out).write_text(text, encoding="utf-8")
        print(f"written to {a.out}")
    return rows


def _table(title, how, header, peer, rows, runs, argv, load0, load1) -> str:
    """The written table: ``title``, the command, the load, ``how`` the runs were made, one row a
    setting with ``runs(list of runs)`` for ours and for ``peer`` and the ratio of the medians."""
    lines = [f"# {title}", "", f"Command: `python experiments/{Path(__file__).name} {shlex.join(argv)}`; "
             f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC.",
             "Load average (1, 5, 15 min) at the start " + " ".join(f"{x:.2f}" for x in load0) + ", at the end "
             + " ".join(f"{x:.2f}" for x in load1) + ".", how, "", header, "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['corpus']} | {r['T']} | {r['threads']} | {runs(r['runs']['ours'])} | "
                     f"{runs(r['runs'][peer])} | **{r['ratio']:.2f}** |")
    return "\n".join(lines) + "\n"


def render(rows, argv, load0, load1) -> str:
    return _table(
        "Our PLSA pass against the plain fused numba reference, each in its own process (issue 27, item 5)",
        "Every run a fresh process pinned to `threads` cores; milliseconds per EM pass (median over rounds), "
        "the systems alternating; the 1-minute load before each run in brackets.",
        "| corpus | T | threads | ours: runs (ms) | numba: runs (ms) | ours / numba (medians) |", "numba", rows,
        lambda v: ", ".join(f"{r['median_ms']:.2f} (load {r['load']:.2f})" for r in v), argv, load0, load1)


def render_lda(rows, argv, load0, load1) -> str:
    return _table(
        "LDA by Gibbs sampling end to end, ours against tomotopy, each in its own process (issue 41, item 6)",
        "Every run a fresh process pinned to `threads` cores (tomotopy: that many workers); milliseconds per "
        "sweep of a whole fit as a user runs it (model made, documents in, every sweep; ours with α, β sampled "
        "every sweep and the training log-likelihood every 10, tomotopy with α optimised every 10), the "
        "training log-likelihood per token at the end (not the same quantity for the two systems) and the "
        "1-minute load before each run in brackets.",
        "| corpus | K | threads | ours: runs (ms/sweep) | tomotopy: runs (ms/sweep) | ours / tomotopy (time) |",
        "tomotopy", rows,
        lambda v: ", ".join(f"{r['median_ms']:.1f} (LL {r['ll_per_token']:.3f}, load {r['load']:.2f})" for r in v),
        argv, load0, load1)


if __name__ == "__main__":
    out = main()
    sys.exit(out if isinstance(out, int) else 0)
