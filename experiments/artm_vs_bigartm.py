"""Time per EM iteration: topicjax ARTM/PLSA vs BigARTM on the same corpus and machine.

BigARTM is a comparison only, never a dependency of topicjax.  It runs in its own Python
environment (it needs ``protobuf<=3.20.3``), created for example with::

    python -m venv /tmp/bigartm_venv
    /tmp/bigartm_venv/bin/pip install bigartm six 'protobuf<=3.20.3'

and is called as a subprocess (``--bigartm-python``; by default the current interpreter if it can
``import artm``, else ``/tmp/bigartm_venv/bin/python``).  Both libraries fit the same corpus
(written as UCI files to a temporary folder) with the same number of topics:

* ``plsa``: no regularizers (topicjax ``PLSA``; BigARTM ``ARTM`` with no regularizers);
* ``artm``: smoothing of Φ, sparsing of Θ and decorrelation (topicjax ``smooth_phi``,
  ``sparse_theta``, ``decorrelate``; BigARTM ``SmoothSparsePhiRegularizer``,
  ``SmoothSparseThetaRegularizer`` with negative τ, ``DecorrelatorPhiRegularizer``).

One iteration = one pass over the collection: BigARTM ``fit_offline`` with
``num_document_passes=1`` (one Θ update per document per pass, Θ kept between passes with
``cache_theta=reuse_theta=True``) and the Φ update at the end of the pass, which is one EM
iteration of topicjax.  BigARTM's default (``reuse_theta=False``: Θ restarts from uniform every
pass) is timed too.  Compilation and per-fit
setup (topicjax: time of a fit of n+1 iterations minus that of 1 iteration) and batch preparation
(BigARTM: a warm-up pass first) are excluded; the best of ``--repeats`` runs is reported (the
machine may be shared).  Both use every core
(BigARTM ``num_processors = os.cpu_count()``; XLA's CPU backend).

    python experiments/artm_vs_bigartm.py                   # KOS, 100 topics
    python experiments/artm_vs_bigartm.py --corpus PATH     # any UCI corpus
    python experiments/artm_vs_bigartm.py --quick           # a few seconds on a synthetic corpus
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import topicjax as tj  # noqa: E402
from topicjax import regularizers as R  # noqa: E402
from topicjax.artm import ARTM  # noqa: E402

BIGARTM_SCRIPT = r"""
import json, os, sys, time
import artm
cfg = json.loads(sys.argv[1])
bv = artm.BatchVectorizer(data_path=cfg["folder"], data_format="bow_uci", collection_name=cfg["name"],
                          target_folder=cfg["batches"])
d = bv.dictionary
out = {"version": artm.version()}
for kind in cfg["kinds"]:
    best = None
    for rep in range(cfg["repeats"]):
        keep = not kind.endswith("_nocache")  # Θ kept from pass to pass, as in EM
        m = artm.ARTM(num_topics=cfg["topics"], dictionary=d, num_document_passes=1, cache_theta=keep,
                      reuse_theta=keep, num_processors=cfg["threads"], seed=rep + 1)
        if kind.startswith("artm"):
            m.regularizers.add(artm.SmoothSparsePhiRegularizer(name="smooth", tau=0.01))
            m.regularizers.add(artm.SmoothSparseThetaRegularizer(name="sparse", tau=-0.1))
            m.regularizers.add(artm.DecorrelatorPhiRegularizer(name="decor", tau=cfg["gamma"]))
        m.fit_offline(bv, num_collection_passes=1)  # warm-up: batches loaded, threads started
        t = time.perf_counter()
        m.fit_offline(bv, num_collection_passes=cfg["iterations"])
        per = (time.perf_counter() - t) / cfg["iterations"]
        best = per if best is None else min(best, per)
        # perplexity for the sanity check: one more, untimed pass with the score switched on
        m.scores.add(artm.PerplexityScore(name="perplexity", dictionary=d))
        m.fit_offline(bv, num_collection_passes=1)
        out[kind + "_perplexity"] = float(m.score_tracker["perplexity"].last_value)
    out[kind] = best
print("RESULT " + json.dumps(out))
"""


def find_bigartm_python(given: str | None):
    cands = [given] if given else [sys.executable, "/tmp/bigartm_venv/bin/python"]
    why = []
    for py in cands:
        if not py or not Path(py).exists():
            why.append(f"{py}: not found")
            continue
        r = subprocess.run([py, "-c", "import artm; print(artm.version())"], capture_output=True, text=True, timeout=120)
        if r.returncode == 0:
            return py, r.stdout.strip()
        why.append(f"{py}: {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else 'import artm failed'}")
    return None, "; ".join(why)


def time_ours(corpus, kind, topics, iterations, repeats, gamma):
    regs = None if kind == "plsa" else [(R.smooth_phi(), 0.01), (R.sparse_theta(), 0.1), (R.decorrelate(), gamma)]
    make = lambda n, seed: ARTM(topics, regularizers=regs, max_iter=n, random_state=seed, scores=("perplexity",),  # noqa: E731
                                progress=False, overregularized="keep")
    make(1, 0).fit(corpus)  # warm-up: compile (cached across fits)
    best, model = None, None
    for rep in range(repeats):
        # (fit of n+1 iterations) - (fit of 1 iteration): the per-fit setup (data transfer, binding,
        # up-front checks of the regularizers) cancels, as BigARTM's batch preparation is excluded
        t = time.perf_counter()
        make(1, rep + 1).fit(corpus)
        t1 = time.perf_counter() - t
        t = time.perf_counter()
        model = make(iterations + 1, rep + 1).fit(corpus)
        per = (time.perf_counter() - t - t1) / iterations
        best = per if best is None else min(best, per)
    return best, model.scores_[-1]["perplexity"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", help="UCI docword file or folder (default: the shared KOS corpus)")
    ap.add_argument("--topics", type=int, default=100)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--gamma", type=float, default=1e3, help="decorrelation coefficient of the 'artm' setting")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--bigartm-python", default=None)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=str(ROOT / "experiments" / "results" / "artm_vs_bigartm.md"))
    args = ap.parse_args(argv)
    if args.quick:
        args.topics, args.iterations, args.repeats = 10, 3, 1
        if args.out == str(ROOT / "experiments" / "results" / "artm_vs_bigartm.md"):
            args.out = str(ROOT / "experiments" / "results" / "artm_vs_bigartm_quick.md")

    if args.corpus:
        corpus, source = tj.Corpus.from_uci(args.corpus), args.corpus
    elif args.quick:
        corpus = tj.datasets.sample_lda_corpus(np.random.default_rng(0).dirichlet(np.full(200, 0.1), size=10).T, 200,
                                               doc_length=(30, 80), seed=0).corpus
        source = "synthetic LDA corpus (200 documents, 200 words)"
    else:
        corpus, source = tj.datasets.load_kos(), str(tj.datasets.shared_data_dir() / "kos")
    print(f"corpus: {source}: {corpus}", flush=True)

    ours = {}
    for kind in ("plsa", "artm"):
        ours[kind], ours[kind + "_perplexity"] = time_ours(corpus, kind, args.topics, args.iterations, args.repeats,
                                                           args.gamma)
        print(f"topicjax {kind}: {ours[kind]:.4f} s/iteration (perplexity {ours[kind + '_perplexity']:.1f})", flush=True)

    py, info = find_bigartm_python(args.bigartm_python)
    big, big_err = None, None
    if py is None:
        big_err = f"BigARTM is not importable: {info}"
    else:
        from topicjax.data.formats import write_uci

        with tempfile.TemporaryDirectory() as tmp:
            write_uci(corpus, tmp, "corpus")
            cfg = dict(folder=tmp, name="corpus", batches=str(Path(tmp) / "batches"), topics=args.topics,
                       iterations=args.iterations, repeats=args.repeats, threads=args.threads, gamma=args.gamma,
                       kinds=["plsa", "artm", "plsa_nocache"])
            r = subprocess.run([py, "-c", BIGARTM_SCRIPT, json.dumps(cfg)], capture_output=True, text=True, timeout=3600)
            line = [l for l in r.stdout.splitlines() if l.startswith("RESULT ")]
            if r.returncode != 0 or not line:
                big_err = f"BigARTM run failed (exit {r.returncode}): {r.stderr.strip()[-800:]}"
            else:
                big = json.loads(line[0][7:])
    if big_err:
        print(big_err, flush=True)

    cmd = "python " + " ".join(shlex.quote(a) for a in [Path(sys.argv[0]).as_posix()] + (argv or sys.argv[1:]))
    lines = [
        "# Time per iteration: topicjax vs BigARTM" + (" (quick smoke run)" if args.quick else ""),
        "",
        f"Command: `{cmd}`",
        "",
        f"Corpus: {source} ({corpus.n_docs} documents, {corpus.n_words} words, {corpus.nnz} non-zeros); "
        f"{args.topics} topics; {args.iterations} timed iterations after a warm-up, best of {args.repeats}; "
        f"{os.cpu_count()} CPU cores (shared with other jobs while measured); JAX {__import__('jax').__version__}"
        + (f"; BigARTM {big['version']} (num_document_passes=1, cache_theta=reuse_theta=True, "
           f"num_processors={args.threads})"
           if big else "") + ".",
        "",
        "| setting | topicjax s/iter | BigARTM s/iter | ratio topicjax / BigARTM | perplexity topicjax | perplexity BigARTM |",
        "|---|---|---|---|---|---|",
    ]
    for kind, label in (("plsa", "PLSA (no regularizers)"), ("artm", "smooth Φ + sparse Θ + decorrelation")):
        if big:
            lines.append(f"| {label} | {ours[kind]:.4f} | {big[kind]:.4f} | {ours[kind] / big[kind]:.2f} | "
                         f"{ours[kind + '_perplexity']:.0f} | {big[kind + '_perplexity']:.0f} |")
            print(f"{kind}: ratio topicjax/BigARTM = {ours[kind] / big[kind]:.2f}")
        else:
            lines.append(f"| {label} | {ours[kind]:.4f} | n/a | n/a | {ours[kind + '_perplexity']:.0f} | n/a |")
    if big:
        lines.append(f"| PLSA, BigARTM's default reuse_theta=False (Θ restarts from uniform every pass) | "
                     f"{ours['plsa']:.4f} | {big['plsa_nocache']:.4f} | {ours['plsa'] / big['plsa_nocache']:.2f} | "
                     f"{ours['plsa_perplexity']:.0f} | {big['plsa_nocache_perplexity']:.0f} |")
        print(f"plsa vs BigARTM reuse_theta=False: ratio {ours['plsa'] / big['plsa_nocache']:.2f}")
    if big_err:
        lines += ["", f"BigARTM could not be measured: {big_err}"]
    lines += ["", "Perplexities are after the timed run (topicjax: the in-step value of the last iteration; "
              "BigARTM: its PerplexityScore during one more, untimed pass); different seeds and initialisations "
              "in the two libraries, and BigARTM's score is computed with the Θ of the pass it belongs to, so they "
              "are only a sanity check that both fitted the same corpus.  BigARTM computes no score during the "
              "timed passes; topicjax's perplexity is a free by-product of its E-step."]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
