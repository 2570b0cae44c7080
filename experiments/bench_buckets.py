"""Per-iteration cost of a fit whose shapes are rounded up to buckets against the same fit at the
corpus's exact shapes (issue 42 item 3; ``TOPICJAX_BUCKETS``, :func:`topicjax.core.layout.bucket_size`).

PLSA on KOS, T = 50, 60 iterations, each setting compiled once first (warm), then 5 fits of each,
alternating, the median reported: CPU seconds of the process (all threads, less sensitive to a
busy machine than wall time) and wall seconds per iteration, with the 1-minute load average of
each run, and how far the two models are apart.  Cases: ``full`` (KOS), ``split`` (the 90 %
training part of ``train_test_split(0.1, seed=0)``) and ``worst`` (the fewest documents whose
pieces pass 16,384: the bucket holds 12.5 % more)::

    python experiments/bench_buckets.py full split worst

Results: ``experiments/results/bench_buckets.md``.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

import numpy as np

import topicjax as tj
from topicjax.core import layout


def corpus_of(case: str, full):
    if case == "full":
        return full
    if case == "split":
        return full.train_test_split(0.1, seed=0)[0]
    if case == "worst":
        pieces = np.cumsum(-(-np.diff(full.doc_offsets) // layout.PIECE))
        return full.subset(range(int(np.searchsorted(pieces, 16385)) + 1))
    raise SystemExit(f"unknown case {case!r}: full, split or worst")


def fit(corpus, mode: str):
    os.environ["TOPICJAX_BUCKETS"] = mode
    wall, cpu = time.perf_counter(), time.process_time()
    model = tj.PLSA(50, max_iter=60, tol=0, random_state=0, progress=False).fit(corpus)
    return (time.process_time() - cpu) / 60, (time.perf_counter() - wall) / 60, model


def main(cases):
    full = tj.Corpus.from_uci(os.path.join(tj.datasets.shared_data_dir(), "kos"))
    for case in cases:
        corpus = corpus_of(case, full)
        P = int(np.sum(-(-np.diff(corpus.doc_offsets) // layout.PIECE)))
        print(f"{case}: D = {corpus.n_docs} (bucket {layout.bucket_size(corpus.n_docs, layout.DOC_STEP)}), "
              f"{corpus.nnz} non-zeros, {P} pieces (bucket {layout.bucket_size(P, layout.PIECE_STEP)})")
        for mode in ("on", "off"):
            fit(corpus, mode)  # compiled once: warm
        runs, models = {"on": [], "off": []}, {}
        for _ in range(5):
            for mode in ("on", "off"):
                cpu, wall, models[mode] = fit(corpus, mode)
                runs[mode].append((cpu, wall, os.getloadavg()[0]))
        for mode in ("on", "off"):
            cpu = statistics.median(r[0] for r in runs[mode])
            wall = statistics.median(r[1] for r in runs[mode])
            print(f"  buckets {mode:3s}: CPU {1e3 * cpu:.1f} ms/iteration, wall {1e3 * wall:.1f} ms/iteration "
                  f"(load {min(r[2] for r in runs[mode]):.1f}-{max(r[2] for r in runs[mode]):.1f})")
        a, b = models["on"], models["off"]
        print(f"  max |Δφ| {np.abs(a.phi_ - b.phi_).max():.3g}, max |Δθ| {np.abs(a.theta_ - b.theta_).max():.3g}, "
              f"final objectives {a.history_[-1]['objective']:.6g} / {b.history_[-1]['objective']:.6g}")
    os.environ.pop("TOPICJAX_BUCKETS")


if __name__ == "__main__":
    main(sys.argv[1:] or ["full", "split", "worst"])
