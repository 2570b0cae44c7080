"""Held-out quality of the parallel LIDA-family sweep against the exact one at equal sweeps.

The parallel sweep (``mode="parallel"``) samples the documents of a block in parallel, each with its
own counts exact, from the word-topic counts of the block start (the AD-LDA approximation,
:mod:`topicjax.lida.parallel`); the exact sweep (``mode="exact"``) is the sequential collapsed Gibbs
sampler.  On a subset of KOS (documents drawn with a fixed seed, split into training and test
documents) both are run for the same number of sweeps from the same seeds, with the
hyperparameters sampled as in Table 1, and scored by document completion (eq. 44-46: topics of
the test documents sampled on one half of their tokens, the other half scored).  The old stale
sweep (``mode="stale"``) is run too, for reference.  Reported: log-perplexity per run, mean and
standard error over seeds, and the difference of each parallel setting to the exact sweep (mean
over seeds and its standard error from the per-seed differences: the runs of one seed share
their start and test split).

    python experiments/lida_parallel_vs_exact.py                           # KOS 1000 docs, LDA(50) and FTM
    python experiments/lida_parallel_vs_exact.py --docs 1500 --sweeps 200 --seeds 0,1,2
    python experiments/lida_parallel_vs_exact.py --quick                   # seconds, synthetic corpus
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def load_subset(n_docs: int, seed: int, quick: bool):
    import topicjax as tj

    if quick:
        corpus = tj.datasets.make_bars(n_docs=120, size=4, doc_length=30, alpha=0.3, seed=0)[0]
    else:
        corpus = tj.datasets.load_kos()
    rng = np.random.default_rng(seed)
    docs = np.sort(rng.permutation(corpus.n_docs)[: min(n_docs, corpus.n_docs)])
    corpus = corpus.subset(docs)
    perm = rng.permutation(corpus.n_docs)
    n_test = corpus.n_docs // 5
    test = corpus.subset(np.sort(perm[:n_test]))
    train = corpus.subset(np.sort(perm[n_test:]))
    test = test.subset(np.flatnonzero(test.doc_lengths >= 2))
    return corpus, train, test


def run_one(variant, mode, block, seed, args, train, test):
    from topicjax.lida import LIDA

    kw = dict(n_components=args.k, init_topics=min(args.init_topics, args.k)) if variant == "ftm" else dict(n_components=args.k)
    model = LIDA(variant=variant, max_iter=args.sweeps, burn_in=args.sweeps * 2 // 3, hyper_start=args.sweeps // 5, sampler=mode,
                 tokens_per_block=block, random_state=seed, progress=False, eval_every=0, transform_iter=args.test_sweeps,
                 **kw)
    t0 = time.perf_counter()
    model.fit(train)
    fit_s = time.perf_counter() - t0
    observed, held = test.completion_split("tokens", seed=seed)
    ll, n = model.log_predictive(observed, held)
    return dict(variant=variant, mode=mode, block=block, seed=seed, logperp=-ll / n, topics=model.n_topics_,
                alpha=model.hyper_["alpha"], beta=model.hyper_["beta"], fit_s=fit_s)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=1000, help="KOS documents drawn (80 %% train, 20 %% test)")
    ap.add_argument("--variants", default="lda,ftm")
    ap.add_argument("--k", type=int, default=50, help="LDA topics / FTM initial K_max")
    ap.add_argument("--init-topics", type=int, default=50)
    ap.add_argument("--sweeps", type=int, default=150)
    ap.add_argument("--test-sweeps", type=int, default=40)
    ap.add_argument("--blocks", default="65536,8192", help="tokens per block of the parallel runs")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--no-stale", action="store_true")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    command = "python experiments/lida_parallel_vs_exact.py " + " ".join(
        shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    if args.quick:
        args.sweeps, args.test_sweeps, args.k, args.init_topics, args.seeds = 12, 6, 8, 6, "0,1"
        args.blocks = "256"
    seeds = [int(s) for s in args.seeds.split(",")]
    blocks = [int(b) for b in args.blocks.split(",")]
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    corpus, train, test = load_subset(args.docs, 0, args.quick)
    info = (f"{'bars (synthetic)' if args.quick else 'KOS'} subset: {corpus.n_docs} documents ({train.n_docs} train, "
            f"{test.n_docs} test), {corpus.n_words} words, {train.n_tokens} training tokens")
    print(info, flush=True)
    runs = [("exact", None)] + [("parallel", b) for b in blocks] + ([] if args.no_stale else [("stale", 65536)])
    results = []
    for variant in variants:
        for seed in seeds:
            for mode, block in runs:
                r = run_one(variant, mode, block or 65536, seed, args, train, test)
                r["block"] = block
                results.append(r)
                print(f"{variant} {mode:8s} block={block} seed={seed}: log-perplexity {r['logperp']:.4f} "
                      f"topics {r['topics']} alpha {r['alpha']:.3g} beta {r['beta']:.3g} fit {r['fit_s']:.0f} s",
                      flush=True)
    lines = ["# Parallel (per-document exact, AD-LDA between blocks) vs exact LIDA-family sweeps", "",
             f"Command: `{command}`", "", info + f"; {args.sweeps} sweeps (hyperparameters sampled from sweep "
             f"{args.sweeps // 5}, averaging from {args.sweeps * 2 // 3}), {args.test_sweeps} document-completion "
             f"sweeps; {os.cpu_count()} CPU cores (shared: fit times are not timings).", "",
             "| variant | mode | block tokens | log-perplexity (mean ± se over seeds) | minus exact (mean ± se) | "
             "topics | α | β |", "|---|---|---|---|---|---|---|---|"]
    for variant in variants:
        exact = {r["seed"]: r["logperp"] for r in results if r["variant"] == variant and r["mode"] == "exact"}
        for mode, block in runs:
            rs = [r for r in results if r["variant"] == variant and r["mode"] == mode and r["block"] == block]
            lp = np.array([r["logperp"] for r in rs])
            diff = np.array([r["logperp"] - exact[r["seed"]] for r in rs])
            se = lambda x: x.std(ddof=1) / np.sqrt(x.size) if x.size > 1 else float("nan")
            lines.append(f"| {variant} | {mode} | {block or '—'} | {lp.mean():.4f} ± {se(lp):.4f} | "
                         f"{'—' if mode == 'exact' else f'{diff.mean():+.4f} ± {se(diff):.4f}'} | "
                         f"{np.mean([r['topics'] for r in rs]):.0f} | {np.mean([r['alpha'] for r in rs]):.3g} | "
                         f"{np.mean([r['beta'] for r in rs]):.3g} |")
    text = "\n".join(lines) + "\n"
    out = Path(args.out) if args.out else ROOT / "experiments" / "results" / (
        "lida_parallel_vs_exact_quick.md" if args.quick else "lida_parallel_vs_exact.md")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    print(text)
    return results


if __name__ == "__main__":
    main()
