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


def run_child(system, corpus, T, threads, a) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", system, "--corpus", corpus, "--topics", str(T),
           "--threads", str(threads), "--rounds", str(a.rounds), "--per-round", str(a.per_round),
           "--warmup", str(a.warmup), "--seed", str(a.seed)]
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
    p.add_argument("--child", choices=["numba", "ours"], help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.quick:
        a.corpus, a.topics, a.threads, a.repeats, a.rounds, a.per_round, a.warmup = ["bars"], [10], [1], 1, 3, 2, 1
    return a


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    a = parse(argv)
    if a.child:
        return child(a.child, a.corpus[0], a.topics[0], a.threads[0], a.rounds, a.per_round, a.warmup, a.seed)
    load0 = os.getloadavg()
    rows = []
    for corpus in a.corpus:
        for T in a.topics:
            for n in a.threads:
                runs = {"numba": [], "ours": []}
                for _ in range(a.repeats):
                    for system in ("numba", "ours"):
                        runs[system].append(run_child(system, corpus, T, n, a))
                med = {k: statistics.median(r["median_ms"] for r in v) for k, v in runs.items()}
                rows.append(dict(corpus=corpus, T=T, threads=n, runs=runs, ratio=med["ours"] / med["numba"], **med))
                print(f"{corpus} T={T} threads={n}: ours {med['ours']:.2f} ms, numba {med['numba']:.2f} ms, "
                      f"ours/numba {rows[-1]['ratio']:.2f}", flush=True)
    load1 = os.getloadavg()
    text = render(rows, argv, load0, load1)
    print(text)
    if a.out:
        if load0[0] >= 1 and not a.force:
            print(f"not written: the load at the start was {load0[0]:.2f} (>= 1); --force to write anyway")
            return 1
        Path(a.out).write_text(text, encoding="utf-8")
        print(f"written to {a.out}")
    return rows


def render(rows, argv, load0, load1) -> str:
    def runs(v):
        return ", ".join(f"{r['median_ms']:.2f} (load {r['load']:.2f})" for r in v)

    lines = ["# Our PLSA pass against the plain fused numba reference, each in its own process (issue 27, item 5)", "",
             f"Command: `python experiments/{Path(__file__).name} {shlex.join(argv)}`; "
             f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC.",
             "Load average (1, 5, 15 min) at the start " + " ".join(f"{x:.2f}" for x in load0) + ", at the end "
             + " ".join(f"{x:.2f}" for x in load1) + ".",
             "Every run a fresh process pinned to `threads` cores; milliseconds per EM pass (median over rounds), "
             "the systems alternating; the 1-minute load before each run in brackets.", "",
             "| corpus | T | threads | ours: runs (ms) | numba: runs (ms) | ours / numba (medians) |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['corpus']} | {r['T']} | {r['threads']} | {runs(r['runs']['ours'])} | "
                     f"{runs(r['runs']['numba'])} | **{r['ratio']:.2f}** |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    out = main()
    sys.exit(out if isinstance(out, int) else 0)
