"""What the estimator costs over the compiled step it runs (issue 11, item 6).

For PLSA at ``--topics`` topics on each corpus, seconds per iteration of

* ``step``: the bare compiled EM step (``topicjax.artm.algorithm.make_step()``) called in a Python loop,
  waiting for every step (the kernel's cost);
* ``fit``: ``tj.PLSA(...).fit`` with its default scores (perplexity every iteration), measured
  as the difference between a fit of ``--long`` and one of ``--short`` iterations divided by the
  difference in iterations, so that compilation and the initial state cancel;
* ``artm``: ``tj.ARTM`` with two regularizers and its default scores (perplexity, sparsity),
  measured the same way.

Rounds alternate the systems (step, fit, artm, step, ...) so that load hits all alike; medians
are printed with the ratios fit/step and artm/step and the load average.  Check ``uptime`` first:
timings under load are not results.  Results go to ``experiments/results/bench_driver_overhead.md``.

Example::

    JAX_PLATFORMS=cpu python experiments/bench_driver_overhead.py --corpus kos 20ng --topics 100
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))


def step_time(corpus, T, n):
    import jax

    from topicjax.artm import algorithm as em
    from topicjax.core import layout

    data = layout.prepare(corpus)
    step = em.make_step()
    state = em.init(jax.random.key(0), corpus.n_words, corpus.n_docs, T)
    state = jax.block_until_ready(step(state, data))
    t0 = time.perf_counter()
    for _ in range(n):
        state = jax.block_until_ready(step(state, data))
    return (time.perf_counter() - t0) / n


def fit_time(make, corpus, short, long):
    times = []
    for n in (short, long):
        t0 = time.perf_counter()
        make(n).fit(corpus)
        times.append(time.perf_counter() - t0)
    return (times[1] - times[0]) / (long - short)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", nargs="+", default=["kos", "20ng"])
    ap.add_argument("--topics", type=int, default=100)
    ap.add_argument("--short", type=int, default=5)
    ap.add_argument("--long", type=int, default=25)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="bars corpus, tiny sizes (a smoke run)")
    ap.add_argument("--out", default=str(HERE / "results" / "bench_driver_overhead.md"))
    args = ap.parse_args(argv)
    import topicjax as tj
    from bench_em import load_corpus
    from topicjax import regularizers as R

    if args.quick:
        args.corpus, args.topics, args.short, args.long, args.rounds = ["bars"], 5, 2, 4, 1
    load0 = os.getloadavg()[0]
    rows = []
    for name in args.corpus:
        corpus = load_corpus(name, args.quick)
        T = args.topics

        def plsa(n):
            return tj.PLSA(T, max_iter=n, tol=0, progress=False)

        def artm(n):
            return tj.ARTM(T, max_iter=n, progress=False,
                           regularizers=[(R.smooth_phi(), 0.01), (R.sparse_theta(), 0.05)])

        res = {"step": [], "fit": [], "artm": []}
        fit_time(plsa, corpus, 1, 2), fit_time(artm, corpus, 1, 2)  # compile everything once
        for _ in range(args.rounds):
            res["step"].append(step_time(corpus, T, args.long - args.short))
            res["fit"].append(fit_time(plsa, corpus, args.short, args.long))
            res["artm"].append(fit_time(artm, corpus, args.short, args.long))
        med = {k: statistics.median(v) for k, v in res.items()}
        rows.append((name, T, med))
        print(f"{name} T={T}: step {med['step']:.4f} s, PLSA.fit {med['fit']:.4f} s ({med['fit'] / med['step']:.2f}x), "
              f"ARTM.fit {med['artm']:.4f} s ({med['artm'] / med['step']:.2f}x)", flush=True)
    load1 = os.getloadavg()[0]
    cmd = " ".join(shlex.quote(a) for a in [os.path.relpath(sys.argv[0]) if sys.argv[0] else "bench_driver_overhead.py"]
                   + (argv if argv is not None else sys.argv[1:]))
    lines = ["# The estimator's cost over its compiled step (issue 11, item 6)", "",
             f"Command: `JAX_PLATFORMS=cpu python {cmd}`", "",
             f"Machine: {platform.machine()}, {os.cpu_count()} cores; load average {load0:.2f} before, {load1:.2f} after; "
             f"medians of {args.rounds} rounds; per-iteration times from fits of {args.short} and {args.long} iterations.",
             "", "| corpus | T | step (s/it) | PLSA.fit (s/it) | fit/step | ARTM.fit (s/it) | artm/step |",
             "|---|---|---|---|---|---|---|"]
    for name, T, m in rows:
        lines.append(f"| {name} | {T} | {m['step']:.4f} | {m['fit']:.4f} | {m['fit'] / m['step']:.2f} | "
                     f"{m['artm']:.4f} | {m['artm'] / m['step']:.2f} |")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines) + "\n")
    return rows


if __name__ == "__main__":
    main()
