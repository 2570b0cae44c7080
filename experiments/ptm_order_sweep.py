"""Top-down PTM model-order sweep (Soleimani & Miller 2014 sec. 6.5 / 7.2) against PLSA.

For every order M = m_max, m_max - step, ..., m_min the parsimonious topic model is refitted from
the previous order (the least massive topics removed) and evaluated; PLSA (this toolkit) is
fitted from scratch at the same orders (or every ``--plsa-every``-th one).  Reported per order:
BIC, held-out log-likelihood by document completion (eq. 32: disjoint word halves of every test
document, proportions estimated on the observed half with all topics allowed), M-bar (topics per
document), N-bar (specific words per topic), unique specific words, share of words whose switches
are all off, class-label consistency (eq. 34-35) on the test documents, UMass coherence (eq. 33)
of the top-10 (specific) words (both from :mod:`topicjax.evaluation.metrics`), and wall/CPU time.

    python experiments/ptm_order_sweep.py                       # 20 Newsgroups, M = 100..10 step 2
    python experiments/ptm_order_sweep.py --m-max 40 --m-min 10 --step 6 --n-docs 3000
    python experiments/ptm_order_sweep.py path/to/corpus --test path/to/test_corpus
    python experiments/ptm_order_sweep.py --quick               # a few seconds, synthetic corpus

The corpus argument is ``bbc`` (the shared BBC News corpus, OCTIS's train and test subsets),
``20newsgroups`` (the shared tarball; test split re-indexed onto the
training vocabulary) or any path :meth:`topicjax.Corpus.load` reads; without ``--test`` a
random 20% of its documents is held out.  Results go to ``experiments/results/ptm_order_sweep.md``.
"""

from __future__ import annotations

import argparse
import json
import platform
import shlex
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import topicjax as tj  # noqa: E402
from topicjax import metrics, ptm  # noqa: E402
from topicjax.data.corpus import Corpus  # noqa: E402


def add_sweep_arguments(p):
    """The sweep's settings (orders, BIC, iterations, seed), shared with experiments/bench_ptm.py."""
    p.add_argument("--m-max", type=int, default=100)
    p.add_argument("--m-min", type=int, default=10)
    p.add_argument("--step", type=int, default=2)
    p.add_argument("--bic", default="2014", choices=["2014", "2014-exact", "2020", "2020-printed"])
    p.add_argument("--max-iter", type=int, default=100)
    p.add_argument("--tol", type=float, default=1e-4)
    p.add_argument("--seed", type=int, default=0)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("corpus", nargs="?", default="20newsgroups", help="'20newsgroups', 'bbc' (the shared BBC News, OCTIS's train/test split) or a corpus path")
    p.add_argument("--test", default=None, help="held-out corpus path (default: 20%% of the documents)")
    p.add_argument("--n-docs", type=int, default=None, help="random sample of training documents")
    p.add_argument("--n-test", type=int, default=None, help="random sample of test documents")
    add_sweep_arguments(p)
    p.add_argument("--plsa-every", type=int, default=1, help="fit PLSA at every k-th order (0: never)")
    p.add_argument("--plsa-iter", type=int, default=100)
    p.add_argument("--quick", action="store_true", help="tiny synthetic corpus, a few seconds")
    p.add_argument("--out", default=str(ROOT / "experiments" / "results" / "ptm_order_sweep.md"))
    p.add_argument("--json", default=None, help="also write the per-order records as JSON")
    p.add_argument("--progress", action="store_true", help="tqdm bars")
    return p.parse_args(argv)


# ----------------------------------------------------------------------------- data
def quick_corpora(seed: int):
    """Bars topics (Griffiths & Steyvers) over a shared background, sparse proportions, 120 training
    and 120 test documents; label = dominant true topic.  (The shapes match the package's tests,
    which then reuse the compiled functions.)"""
    phi = tj.datasets.bars_topics(5)
    phi = 0.7 * phi + 0.3 / phi.shape[0]  # a shared background, as PTM assumes
    vocab = [f"r{i}c{j}" for i in range(5) for j in range(5)]
    out = []
    for k in range(2):
        corpus, _, theta = tj.datasets.sample_lda_corpus(phi, 120, doc_length=60, alpha=0.2, seed=seed + k, vocab=vocab)
        out.append(corpus.with_labels(list(np.argmax(theta, 0))))
    return out[0], out[1]


def load_corpora(args):
    if args.quick:
        return quick_corpora(args.seed)
    if args.corpus == "20newsgroups":
        train = tj.datasets.load_20newsgroups("train", n_docs=args.n_docs, seed=args.seed)
        test = tj.datasets.load_20newsgroups("test", n_docs=args.n_test, seed=args.seed, vocabulary=list(train.vocab))
        return train, test
    if args.corpus == "bbc":  # OCTIS's split: train for the fits, test held out
        return tj.datasets.load_bbc_news("train"), tj.datasets.load_bbc_news("test")
    corpus = Corpus.load(args.corpus)
    if args.test:
        test = Corpus.load(args.test).with_vocab(corpus.vocab, empty_docs="drop")
        train = corpus
    else:
        train, test = corpus.train_test_split(0.2, seed=args.seed)
    if args.n_docs and args.n_docs < train.n_docs:
        train = train.subset(np.sort(np.random.default_rng(args.seed).choice(train.n_docs, args.n_docs, replace=False)))
    if args.n_test and args.n_test < test.n_docs:
        test = test.subset(np.sort(np.random.default_rng(args.seed + 1).choice(test.n_docs, args.n_test, replace=False)))
    return train, test


# ----------------------------------------------------------------------------- measures
def class_consistency(theta_train, train, theta_test, test):
    """Eq. 34-35 (``topicjax.evaluation.metrics.class_consistency``): accuracy, or PR-AUC if multi-label."""
    if train.labels is None or test.labels is None:
        return None
    r = metrics.class_consistency(theta_train, train.labels, theta_test, test.labels)
    return r.get("accuracy", r.get("auc"))


def plsa_m_bar(phi, theta, corpus):
    """Topics that generate at least one word of a document with the largest posterior (the
    paper's count for LDA, sec. 7.1)."""
    post = phi[corpus.word_ids] * theta[:, corpus.doc_ids].T  # (nnz, T)
    top = np.argmax(post, 1)
    pairs = np.unique(corpus.doc_ids.astype(np.int64) * phi.shape[1] + top)
    return pairs.size / corpus.n_docs


def evaluate_ptm(model, train, test_full, obs, held):
    rec = {"bic": model.bic_, "m_bar": model.m_bar_, "n_bar": model.n_bar_, "n_unique": model.n_unique_,
           "all_off": model.frac_all_off_, "gem_iters": model.n_iter_}
    rec["heldout_ll"] = model.heldout_log_likelihood(obs, held)
    rec["heldout_per_token"] = rec["heldout_ll"] / held.n_tokens
    if train.labels is not None:
        rec["class"] = class_consistency(model.theta_ * model.v_, train, model.transform(test_full).T, test_full)
    # eq. 33 over the 10 most probable topic-specific words: beta_ is 0 off the specific words
    rec["coherence"] = float(np.nanmean(metrics.coherence(model.beta_.T, train, k=10, measure="umass")))
    return rec


def evaluate_plsa(M, train, test_full, obs, held, args):
    t0 = time.perf_counter()
    model = tj.PLSA(n_components=M, max_iter=args.plsa_iter, tol=0.0, random_state=args.seed, progress=False).fit(train)
    secs = time.perf_counter() - t0
    rec = {"seconds": secs, "m_bar": plsa_m_bar(model.phi_, model.theta_, train)}
    theta_obs = model.transform(obs).T
    rec["heldout_ll"] = metrics.log_likelihood(model.phi_, theta_obs, held)
    rec["heldout_per_token"] = rec["heldout_ll"] / held.n_tokens
    if train.labels is not None:
        rec["class"] = class_consistency(model.theta_, train, model.transform(test_full).T, test_full)
    rec["coherence"] = float(np.nanmean(metrics.coherence(model.phi_, train, k=10, measure="umass")))
    return rec


# ----------------------------------------------------------------------------- report
def _loadavg():
    try:
        import os

        return os.getloadavg()
    except OSError:
        return (float("nan"),) * 3


def _ncpu():
    import os

    return os.cpu_count()


def fmt(x, nd=2):
    if x is None:
        return "-"
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    if abs(x) >= 1e5:
        return f"{x:.6g}"
    return f"{x:.{nd}f}"


def write_report(path, args, argv, train, test, n_dropped, records, res, total, plsa_total, best_words, cpu_total):
    lines = [
        "# PTM model-order sweep vs PLSA",
        "",
        "Command:",
        "",
        "```",
        "python experiments/ptm_order_sweep.py " + " ".join(shlex.quote(a) for a in argv),
        "```",
        "",
        f"Corpus: `{'synthetic bars (--quick)' if args.quick else args.corpus}` — training {train.n_docs} documents, "
        f"{train.n_words} words, {train.n_tokens} tokens; test {test.n_docs} documents"
        + (f" ({n_dropped} with fewer than 2 distinct words dropped for document completion)" if n_dropped else "")
        + ".",
        f"PTM BIC: `{args.bic}`; orders {res.orders[0]} → {res.orders[-1]} step {args.step}; GEM tolerance {args.tol}, "
        f"at most {args.max_iter} iterations per order; seed {args.seed}.",
        f"Machine: {platform.machine()}, {platform.processor() or 'cpu'}, JAX on CPU; "
        f"PTM sweep {total:.1f} s wall ({total / 60:.1f} min) and {cpu_total:.1f} s CPU (all threads) in all, "
        f"JIT compilation and warm starts included, evaluation excluded; load average when it ended "
        f"{' '.join(f'{x:.1f}' for x in _loadavg())} on {_ncpu()} cores (the CPU was shared)"
        + (f"; PLSA fits {plsa_total:.1f} s in all" if plsa_total else "") + ".",
        "",
        "Held-out log-likelihood: eq. 32, per held-out token (disjoint word halves of each test document). "
        "Class: single-label accuracy (eq. 34-35) on the test documents. Coherence: UMass (eq. 33) of the top 10 "
        "(specific) words, averaged over topics. M-bar for PLSA counts topics that are the most probable origin of "
        "at least one word (the paper's count for LDA).",
        "",
        "| M | PTM BIC | PTM held-out/token | PLSA held-out/token | PTM M-bar | PLSA M-bar | N-bar | N unique | "
        "all-off share | PTM class | PLSA class | PTM coherence | PLSA coherence | PTM wall s | PTM cpu s | GEM iters | PLSA wall s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in records:
        p, q = r["ptm"], r.get("plsa") or {}
        lines.append(
            f"| {r['M']}{' *' if r['M'] == res.best_order else ''} | {fmt(p['bic'], 1)} | {fmt(p['heldout_per_token'], 4)} | "
            f"{fmt(q.get('heldout_per_token'), 4)} | {fmt(p['m_bar'])} | {fmt(q.get('m_bar'))} | {fmt(p['n_bar'], 1)} | "
            f"{p['n_unique']} | {fmt(p['all_off'], 3)} | {fmt(p.get('class'), 3)} | {fmt(q.get('class'), 3)} | "
            f"{fmt(p['coherence'])} | {fmt(q.get('coherence'))} | {fmt(r['seconds'], 1)} | {fmt(r['cpu_seconds'], 1)} | "
            f"{p['gem_iters']} | "
            f"{fmt(q.get('seconds'), 1)} |"
        )
    bics = [r["ptm"]["bic"] for r in records]
    i = int(np.argmin(bics))
    interior = 0 < i < len(bics) - 1
    lines += [
        "",
        f"BIC minimum: M* = {res.best_order} ({'interior' if interior else 'at an end of the range'}).",
        "",
        f"## Top words of the first topics at M* = {res.best_order} (cf. 2014 Table 3)",
        "",
        "| topic | top specific words | top shared words |",
        "|---|---|---|",
    ]
    for j, (spec, shared) in enumerate(best_words):
        lines.append(f"| {j} | {' '.join(spec)} | {' '.join(shared)} |")
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")


# ----------------------------------------------------------------------------- main
def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    if args.quick:  # a 25-word vocabulary: the exact-count u prior of 2014 sec. 7.4
        args.m_max, args.m_min, args.step, args.max_iter, args.plsa_iter, args.bic = 8, 6, 2, 5, 20, "2014-exact"
    train, test = load_corpora(args)
    n_distinct = np.diff(test.doc_offsets)
    keep = n_distinct >= 2
    n_dropped = int((~keep).sum())
    test = test.subset(np.flatnonzero(keep)) if n_dropped else test
    obs, held = test.completion_split("words", seed=args.seed)

    records = []
    plsa_total = 0.0
    cpu_mark = [time.process_time()]

    def on_order(M, model, secs):
        nonlocal plsa_total
        cpu = time.process_time() - cpu_mark[0]  # CPU seconds of this order's fit (all threads)
        rec = {"M": M, "seconds": secs, "cpu_seconds": cpu, "ptm": evaluate_ptm(model, train, test, obs, held)}
        rec["ptm"]["iter_seconds"] = [h["seconds"] for h in model.history_]
        idx = (args.m_max - M) // args.step
        if args.plsa_every and idx % args.plsa_every == 0:
            rec["plsa"] = evaluate_plsa(M, train, test, obs, held, args)
            plsa_total += rec["plsa"]["seconds"]
        records.append(rec)
        p = rec["ptm"]
        cpu_mark[0] = time.process_time()
        print(f"M={M:4d}  BIC={p['bic']:.6g}  heldout/token={p['heldout_per_token']:.4f}  M-bar={p['m_bar']:.3f}  "
              f"N-bar={p['n_bar']:.1f}  iters={p['gem_iters']}  {secs:.1f}s wall {cpu:.1f}s cpu"
              + (f"  | PLSA heldout/token={rec['plsa']['heldout_per_token']:.4f} {rec['plsa']['seconds']:.1f}s" if "plsa" in rec else ""),
              flush=True)

    res = ptm.select_order(train, args.m_max, args.m_min, args.step, bic=args.bic, random_state=args.seed,
                           progress=args.progress, keep_models=False, callback=on_order, max_iter=args.max_iter,
                           tol=args.tol)
    best = res.best_model
    words = list(zip(best.top_specific_words(10), best.top_shared_words(10)))[:5]
    fit_total = sum(r["seconds"] for r in records)
    cpu_total = sum(r["cpu_seconds"] for r in records)
    write_report(args.out, args, argv, train, test, n_dropped, records, res, fit_total, plsa_total, words, cpu_total)
    if args.json:
        Path(args.json).write_text(json.dumps(records, indent=1, default=float))
    print(f"M* = {res.best_order}; PTM fitting {fit_total:.1f} s over {len(records)} orders; report: {args.out}")
    return res, records


if __name__ == "__main__":
    main()
