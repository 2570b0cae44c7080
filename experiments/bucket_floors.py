"""Per-iteration cost of the bucket floors (issue 42, item 3's floors): a fit on a tiny corpus with
its shapes padded to the floors (``TOPICJAX_BUCKETS=on``, the default) against the same fit at its
exact shapes (``off``) and with buckets but no floors, for PLSA, ARTM, PTM and TTMM.

Per-iteration time = (time of a fit of ``--long`` iterations - time of one of ``--short``) / the
difference of their iteration counts, after a warm-up fit of each (no compilation timed), the
each fit's time the minimum over ``--repeats`` interleaved rounds (the machine may be shared:
the minimum is the least disturbed).  Prints a markdown table in microseconds.

    python experiments/bucket_floors.py --docs 20 --repeats 30
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

import topicjax as tj
from topicjax import regularizers as R
from topicjax.core import layout
from topicjax.ptm import layout as ptm_layout

#: the floors, and none (the buckets of issue 42 item 3 alone): the third column of the table
FLOORS = {"floored": (layout.PIECE_FLOOR, layout.DOC_FLOOR, layout.WORD_FLOOR, ptm_layout.PTM_DOC_FLOOR,
                      ptm_layout.PTM_WORD_FLOOR), "no floor": (0, 0, 0, 0, 0)}


def _set_floors(name: str) -> None:
    (layout.PIECE_FLOOR, layout.DOC_FLOOR, layout.WORD_FLOOR, ptm_layout.PTM_DOC_FLOOR,
     ptm_layout.PTM_WORD_FLOOR) = FLOORS[name]


def _makers(n_iter: int):
    return {
        "PLSA": lambda: tj.PLSA(4, max_iter=n_iter, tol=0.0, random_state=0, progress=False),
        "ARTM": lambda: tj.ARTM(4, max_iter=n_iter, regularizers=[(R.smooth_phi(), 0.1)], scores=(),
                                random_state=0, progress=False),
        "PTM": lambda: tj.PTM(4, max_iter=n_iter, tol=0.0, random_state=0, progress=False),
        "TTMM": lambda: tj.TTMM(4, n_themes=2, max_iter=n_iter, tol=0.0, random_state=0, progress=False),
    }


def _timed(family: str, n_iter: int, corpus, setting: str):
    """Seconds and iterations of one fit; ``setting``: ``off`` (exact shapes), ``floored`` or ``no floor``."""
    os.environ["TOPICJAX_BUCKETS"] = "off" if setting == "off" else "on"
    if setting != "off":
        _set_floors(setting)
    model = _makers(n_iter)[family]()
    t0 = time.perf_counter()
    model.fit(corpus)
    return time.perf_counter() - t0, int(model.n_iter_)


SETTINGS = ("off", "no floor", "floored")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=20)
    ap.add_argument("--short", type=int, default=10)
    ap.add_argument("--long", type=int, default=110)
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--families", default="PLSA,ARTM,PTM,TTMM")
    args = ap.parse_args(argv)
    corpus = tj.datasets.make_bars(n_docs=args.docs, doc_length=40, seed=0)[0]
    print(f"corpus: {corpus.n_docs} documents, {corpus.n_words} words, {corpus.nnz} non-zeros\n")
    print("| family | exact µs/iter | buckets, no floor µs/iter | floored µs/iter | floored - exact µs |")
    print("|---|---|---|---|---|")
    for family in args.families.split(","):
        best = {}  # (setting, length) -> (least seconds, iterations)
        for setting in SETTINGS:  # warm-up: compile both lengths at both shapes
            for n in (args.short, args.long):
                _timed(family, n, corpus, setting)
        for _ in range(args.repeats):
            for setting in SETTINGS:
                for n in (args.short, args.long):
                    t, n_iter = _timed(family, n, corpus, setting)
                    best[setting, n] = min(best.get((setting, n), (np.inf, n_iter)), (t, n_iter))

        def per_iter(setting):
            (t1, n1), (t2, n2) = best[setting, args.short], best[setting, args.long]
            return (t2 - t1) / max(n2 - n1, 1) * 1e6

        off, bare, on = (per_iter(s) for s in SETTINGS)
        print(f"| {family} | {off:.0f} | {bare:.0f} | {on:.0f} | {on - off:+.0f} |", flush=True)
    os.environ.pop("TOPICJAX_BUCKETS", None)
    _set_floors("floored")


if __name__ == "__main__":
    main()
