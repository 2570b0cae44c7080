"""LIDA Table 1 (Archambeau, Lakshminarayanan & Bouchard, sec. 5.3): held-out log-perplexity.

Rows: LDA (our baseline; not in the paper's table), FTM with δ = 1, σ = 0 (the two-parameter FTM of
Williamson et al.), the four-parameter FTM (δ sampled, σ fixed) and LIDA (σ, ζ fixed, the paper's
ζ = 0.25 by default).  Columns: the corpora, each as mean ± standard error of the log-perplexity over
the folds.

Protocol (sec. 5.1, 5.3): the documents are split at random into ``--folds`` folds; for each fold
the model is trained on the other folds by the collapsed Gibbs sampler of Algorithm 1, the topics
of the test documents are sampled on one half of their tokens (``Corpus.completion_split``) with Φ
fixed at its posterior mean (47) averaged over the sweeps after burn-in, θ (46) is averaged over
the test sweeps after their burn-in, and the log-perplexity −ln P(w_*|w)/N_* of eq. (44)-(45) is
measured on the other half.  Test documents with fewer than two tokens cannot be split and are
left out (their number is reported).

    python experiments/lida_table1.py                            # KOS + 20 Newsgroups (1000 docs)
    python experiments/lida_table1.py --corpus PATH              # any UCI docword file/folder
    python experiments/lida_table1.py --folds 5 --run-folds 2 --sweeps 200   # a reduced run
    python experiments/lida_table1.py --quick                    # seconds, synthetic corpus
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import topicjax as tj  # noqa: E402
from topicjax.corpus import Corpus  # noqa: E402
from topicjax.lida import LIDA  # noqa: E402

# Table 1 of the paper: (mean, standard error) of the log-perplexity
PAPER = {
    "20news": {"FTM (δ=1, σ=0)": (6.342, 0.020), "FTM": (6.332, 0.020), "LIDA": (6.376, 0.026),
               "HDP-LDA": (6.568, 0.033), "HPY-LDA": (6.572, 0.029)},
    "kos": {"FTM (δ=1, σ=0)": (7.262, 0.007), "FTM": (7.266, 0.009), "LIDA": (7.257, 0.010)},
}
MODELS = ["lda", "ftm1", "ftm", "lida"]
LABELS = {"lda": "LDA", "ftm1": "FTM (δ=1, σ=0)", "ftm": "FTM", "lida": "LIDA"}


def load_corpus(spec: str) -> tuple[str, Corpus]:
    """``kos``, ``20news`` (1000 random posts of 20 Newsgroups, train+test) or a corpus path."""
    if spec == "kos":
        return "kos", tj.datasets.load_kos()
    if spec == "20news":
        return "20news", tj.datasets.load_20newsgroups("all", n_docs=1000, seed=0)
    path = Path(spec)
    return path.name, Corpus.load(path)


def make_model(name: str, args, seed: int) -> LIDA:
    common = dict(max_iter=args.sweeps, burn_in=args.burn_in, mode=args.mode, random_state=seed,
                  progress=args.progress, transform_iter=args.test_sweeps, eval_every=args.eval_every,
                  batch_size=args.batch_size, mh_steps=args.mh_steps)
    if name == "lda":
        return LIDA("lda", n_components=args.lda_topics, alpha=0.1, beta=0.01, **common)
    if name == "ftm1":
        return LIDA("ftm", n_components=args.k_max, init_topics=args.init_topics, delta=1.0, sigma=0.0,
                    fixed_hyper=("delta",), **common)
    if name == "ftm":
        return LIDA("ftm", n_components=args.k_max, init_topics=args.init_topics, sigma=args.sigma, **common)
    if name == "lida":
        return LIDA("lida", n_components=args.k_max, init_topics=args.init_topics, sigma=args.sigma,
                    zeta=args.zeta, **common)
    raise ValueError(f"unknown model {name!r}; choose from {MODELS}")


def folds_of(corpus: Corpus, n_folds: int, seed: int):
    perm = np.random.default_rng(seed).permutation(corpus.n_docs)
    return np.array_split(perm, n_folds)


def run_fold(corpus: Corpus, folds, f: int, models, args, log):
    test_docs = np.sort(folds[f])
    train_docs = np.sort(np.concatenate([folds[g] for g in range(len(folds)) if g != f]))
    train = corpus.subset(train_docs)
    test = corpus.subset(test_docs)
    keep = test.doc_lengths >= 2
    dropped = int((~keep).sum())
    test = test.subset(np.flatnonzero(keep))
    observed, held = test.completion_split("tokens", seed=args.seed + f)
    out = {}
    for name in models:
        t0 = time.perf_counter()
        model = make_model(name, args, seed=args.seed + 100 * f).fit(train)
        t_fit = time.perf_counter() - t0
        ll, n = model.log_predictive(observed, held)
        sweep_s = float(np.median([h["seconds"] for h in model.history_[1:]] or [t_fit]))
        rec = {
            "logperp": -ll / n, "topics": model.n_topics_, "fit_s": t_fit, "sweep_s": sweep_s,
            "topics_per_doc": float(model.topics_per_document().mean()),
            "words_per_topic": float(model.words_per_topic().mean()),
            "docs_per_topic": float(model.documents_per_topic().mean()),
            "hyper": dict(model.hyper_), "dropped": dropped, "K_max": model.n_components_,
        }
        out[name] = rec
        log(f"  fold {f} {LABELS[name]:>15}: log-perplexity {rec['logperp']:.4f}  topics {rec['topics']}"
            f"  {sweep_s:.3f} s/sweep  fit {t_fit:.0f} s  hyper "
            + " ".join(f"{k}={v:.3g}" for k, v in rec["hyper"].items()))
    return out


def summarize(vals):
    vals = np.asarray(vals, float)
    se = vals.std(ddof=1) / np.sqrt(vals.size) if vals.size > 1 else float("nan")
    return vals.mean(), se


def write_markdown(path: Path, results, args, command: str, corpora_info, seconds: float):
    lines = ["# LIDA Table 1: held-out log-perplexity", "", f"Command: `{command}`", "",
             f"Total time: {seconds / 60:.1f} min on this machine (2 shared CPU cores, JAX on CPU).", ""]
    lines += ["Settings: " + ", ".join(f"{k}={v}" for k, v in sorted(vars(args).items()) if k not in ("out", "progress")),
              ""]
    names = list(results)
    lines += ["| model | " + " | ".join(f"{c} (ours)" + f" | {c} (paper)" for c in names) + " |",
              "|---|" + "---|---|" * len(names)]
    for m in args.models:
        row = [LABELS[m]]
        for c in names:
            folds = [r[m]["logperp"] for r in results[c] if m in r]
            if folds:
                mean, se = summarize(folds)
                row.append(f"{mean:.3f} ± {se:.3f} (n={len(folds)})" if np.isfinite(se) else f"{mean:.3f} (n=1)")
            else:
                row.append("—")
            paper = PAPER.get(c, {}).get(LABELS[m])
            row.append(f"{paper[0]:.3f} ± {paper[1]:.3f}" if paper else "NA")
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "Diagnostics (means over the folds): live topics at the end, seconds per sweep, topics per "
              "document, words per topic, documents per topic, final hyperparameters.", "",
              "| corpus | model | topics | K_max | s/sweep | topics/doc | words/topic | docs/topic | α | β | η | δ | γ | ξ |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in names:
        for m in args.models:
            recs = [r[m] for r in results[c] if m in r]
            if not recs:
                continue
            g = lambda k: np.mean([r[k] for r in recs])
            h = lambda k: np.mean([r["hyper"][k] for r in recs])
            lines.append(f"| {c} | {LABELS[m]} | {g('topics'):.0f} | {g('K_max'):.0f} | {g('sweep_s'):.3f} | "
                         f"{g('topics_per_doc'):.1f} | {g('words_per_topic'):.0f} | {g('docs_per_topic'):.1f} | "
                         f"{h('alpha'):.3g} | {h('beta'):.3g} | {h('eta'):.3g} | {h('delta'):.3g} | {h('gamma'):.3g} | {h('xi'):.3g} |")
    lines += ["", "Corpora: " + "; ".join(corpora_info), ""]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", action="append", help="kos, 20news or a corpus path (repeatable; default kos and 20news)")
    ap.add_argument("--models", default=",".join(MODELS), help=f"comma-separated subset of {MODELS}")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--run-folds", type=int, default=None, help="run only the first so many folds (reduced run)")
    ap.add_argument("--sweeps", type=int, default=300)
    ap.add_argument("--burn-in", type=int, default=None, help="default: half of --sweeps")
    ap.add_argument("--test-sweeps", type=int, default=40)
    ap.add_argument("--k-max", type=int, default=200, help="initial topic slots of FTM/LIDA (grown as needed)")
    ap.add_argument("--init-topics", type=int, default=50)
    ap.add_argument("--lda-topics", type=int, default=100)
    ap.add_argument("--sigma", type=float, default=0.0)
    ap.add_argument("--zeta", type=float, default=0.25)
    ap.add_argument("--mode", default="parallel", choices=["parallel", "exact"])
    ap.add_argument("--mh-steps", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=65536)
    ap.add_argument("--eval-every", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--progress", action="store_true")
    ap.add_argument("--quick", action="store_true", help="a few seconds on a synthetic corpus")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    args.models = [m.strip() for m in args.models.split(",") if m.strip()]
    if args.models == MODELS and not args.quick:
        args.models = list(MODELS)
    for m in args.models:
        if m not in MODELS:
            ap.error(f"unknown model {m!r}; choose from {MODELS}")
    command = "python experiments/lida_table1.py " + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    if args.quick:
        corpora = [("bars (synthetic)", tj.datasets.make_bars(n_docs=80, size=4, doc_length=30, seed=0)[0])]
        args.folds, args.run_folds, args.sweeps, args.test_sweeps = 2, 2, 30, 6
        if args.models == MODELS:  # compile time dominates a smoke run: two variants by default
            args.models = ["lda", "lida"]
        args.k_max, args.init_topics, args.lda_topics, args.batch_size = 12, 8, 8, 4096
        out = Path(args.out) if args.out else ROOT / "experiments" / "results" / "lida_table1_quick.md"
    else:
        corpora = [load_corpus(s) for s in (args.corpus or ["kos", "20news"])]
        out = Path(args.out) if args.out else ROOT / "experiments" / "results" / "lida_table1.md"
    args.run_folds = args.folds if args.run_folds is None else min(args.run_folds, args.folds)
    t_start = time.perf_counter()
    results, info = {}, []
    for cname, corpus in corpora:
        info.append(f"{cname}: {corpus.n_docs} documents, {corpus.n_words} words, {corpus.n_tokens} tokens")
        print(info[-1], flush=True)
        folds = folds_of(corpus, args.folds, args.seed)
        results[cname] = []
        for f in range(args.run_folds):
            results[cname].append(run_fold(corpus, folds, f, args.models, args, lambda s: print(s, flush=True)))
            write_markdown(out, results, args, command, info, time.perf_counter() - t_start)
    write_markdown(out, results, args, command, info, time.perf_counter() - t_start)
    print(out.read_text())
    return results


if __name__ == "__main__":
    main()
