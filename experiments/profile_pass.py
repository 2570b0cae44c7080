"""Where a PLSA pass's thread scaling goes: the step against its two parts (issue 12).

``bench_threads.py`` times whole passes and finds that 2 threads scale a KOS pass 1.7-1.8x, under
the 1.8 target.  This script splits one pass into the parts that could be the cause, all compiled
in one process from the same state (the state after ``--warm`` PLSA passes, so the figures are a
running fit's, not a fresh start's) and timed alternately at every thread count (medians over
``--rounds`` rounds of 5 calls).  The variants are:

- ``step``: the jitted PLSA step (``em.make_step``), what a fit runs;
- ``E+M``: the same pass as two separate compiled calls, first the E-step (our fused kernel:
  the counts n_wt, n_td) and then the M-step (eq. 15-16 on those counts, XLA's operations);
- ``E`` and ``M``: each part alone.

If ``step`` costs what ``E+M`` costs, putting the parts in one program adds nothing. Then the
step's scaling follows from its parts' times by Amdahl's law (printed as "predicted"), and the
part that scales worst is the cause.  The whole process is pinned to k cores for a k-thread
variant (``bench_threads.pin``).  Run it on a quiet machine only (``uptime`` < 1): the load
average is printed.

    TOPICJAX_DATA=... python experiments/profile_pass.py --corpus kos --topics 50 100
    JAX_PLATFORMS=cpu python experiments/profile_pass.py --quick      # seconds-long smoke run
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import bench_em  # noqa: E402  (corpus loading and the train/test split)
import bench_threads  # noqa: E402  (the parts compiled apart, round-robin timing, pinning, load)

PARTS = ("step", "E+M", "E", "M")


def pass_parts(train, T: int, counts, rounds: int, warm: int, per_turn: int = 5) -> dict:
    """``{(part, threads): median seconds}`` for one PLSA pass on ``train`` at ``T`` topics."""
    import jax

    from topicjax.artm import algorithm as em
    from topicjax.core import kernels, layout

    data = layout.prepare(train)
    state = em.init(jax.random.key(0), train.n_words, train.n_docs, T)
    step = jax.jit(em.make_step(jit=False)).lower(state, data, None).compile()
    for _ in range(warm):
        state = step(state, data, None)
    phi, theta = jax.block_until_ready((state.phi, state.theta))
    e, m = bench_threads.compile_pass_parts(phi, theta, data)
    n_phi, n_theta = e(phi, theta, data)

    def both():
        a, b = e(phi, theta, data)
        return m(phi, theta, a, b)

    calls = {"step": lambda: step(state, data, None), "E+M": both,
             "E": lambda: e(phi, theta, data), "M": lambda: m(phi, theta, n_phi, n_theta)}
    old = kernels.get_threads()
    runs = {(p, n): (lambda n=n: (bench_threads.pin(n), kernels.set_threads(n)),
                     lambda f=calls[p]: jax.block_until_ready(f()))
            for n in counts for p in PARTS}
    try:
        return bench_threads.round_robin(runs, rounds, per_turn)
    finally:
        kernels.set_threads(old)


def table(med: dict, T: int, counts) -> list[str]:
    """Rows ``| T | step | E+M | E | M | predicted |``: ms at each thread count with the scaling
    (first count / last count); "predicted" is Amdahl's law on the parts: (E + M at the first
    count) / (E + M at the last)."""
    lo, hi = counts[0], counts[-1]
    cells = []
    for p in PARTS:
        ms = " / ".join(f"{med[p, n] * 1e3:.2f}" for n in counts)
        cells.append(f"{ms} ({med[p, lo] / med[p, hi]:.2f})")
    predicted = (med["E", lo] + med["M", lo]) / (med["E", hi] + med["M", hi])
    return [f"| {T} | " + " | ".join(cells) + f" | {predicted:.2f} |"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", default="kos", help="kos, 20ng, bars or a corpus path")
    ap.add_argument("--topics", type=int, nargs="+", default=[50, 100])
    ap.add_argument("--threads", type=int, nargs="+", default=None,
                    help="thread counts compared (default: 1 and every usable core)")
    ap.add_argument("--rounds", type=int, default=25)
    ap.add_argument("--warm", type=int, default=20, help="PLSA passes before the state is timed")
    ap.add_argument("--quick", action="store_true", help="a small synthetic corpus, few rounds")
    ap.add_argument("--out", default=None, help="also write the table to this markdown file")
    args = ap.parse_args(argv)
    if args.quick:
        args.corpus, args.topics, args.rounds, args.warm = "bars", [8], 2, 2
    counts = args.threads or sorted({1, bench_threads.usable_cores()})
    corpus = bench_em.load_corpus(args.corpus, args.quick)
    train, _, _ = bench_em.split(corpus, 0)
    command = "python experiments/profile_pass.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    head = " / ".join(str(n) for n in counts)
    lines = ["# A PLSA pass against its parts (issue 12, thread scaling)", "", f"Command: `{command}`", "",
             f"{args.corpus}: {train.n_docs} training documents, {train.n_words} words; state after "
             f"{args.warm} passes; medians of {args.rounds} rounds x 5 calls; load average at start "
             f"{bench_threads.load()}.", "",
             f"ms at {head} threads (scaling {counts[0]} -> {counts[-1]} in brackets); predicted = "
             "Amdahl's law on the parts' times.", "",
             "| T | step | E-step + M-step (two calls) | E-step alone | M-step alone | predicted |",
             "|---|---|---|---|---|---|"]
    results = {}
    for T in args.topics:
        results[T] = pass_parts(train, T, counts, args.rounds, args.warm)
        lines += table(results[T], T, counts)
        print(lines[-1], flush=True)
    lines += ["", f"Load average at the end: {bench_threads.load()}."]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return results


if __name__ == "__main__":
    main()
