"""Text categorisation with TTMM features against bag-of-words: the protocol of Keller & Bengio's
Fig. 2 (sec. 5), which repeats Blei, Ng & Jordan's LDA experiment (JMLR 2003, sec. 7.2, Fig. 10).

The paper's protocol and ours (departures named; ``experiments/results/fidelity_ttmm.md``):

1. fit a TTMM with K = 50 topics and J themes (the paper reports J = 500 and 1000) on *all*
   documents, without their labels, by EM (eq. 6-11);
2. represent every document by its TTMM features, P(t|d) of eq. 18 (K dims); bag-of-words (term
   counts, 15,810 dims in the paper) is the baseline.  Also reported, not in the paper: the
   expected topic shares of the tokens (``TTMM.topic_shares``) and the theme posteriors P(h|d)
   (eq. 6; J dims);
3. for each proportion p, train an SVM on a random proportion p of the labelled documents and
   measure the accuracy (the paper's measure) on the remaining 1 - p.  Blei et al. used SVMLight
   with its defaults: a linear kernel, the hinge loss, an unregularised bias and
   C = 1 / mean(x.x) over the training documents.  We solve the same problem with libsvm
   (``sklearn.svm.SVC`` on the Gram matrix) and that C (``--svm-c svmlight``, the default);
4. the task is one category against the rest (the paper: GRAIN vs NOT GRAIN on a subset of
   Reuters-21578, about 8,000 documents).

Departures, each switchable where it is a choice: Reuters-21578 is not available here, so the
corpora are a random sample of 8,000 posts of 20 Newsgroups (``--corpus 20ng``: one newsgroup
against the rest, e.g. sci.med, 5.6 % of the posts, near GRAIN's ~5 % of Reuters) and BBC News
(``--corpus bbc``: business against the rest, 23 %); the splits are stratified (every training set
holds both classes even at p = 0.01) and paired (the same ``--repeats`` splits for every
representation); features are L2-normalised per document (``--norm``; the paper does not say);
EM stops at relative tolerance ``--tol`` or ``--max-iter`` iterations (the paper does not say).

Reported per p: accuracy mean ± standard error over the splits, the paired difference to
bag-of-words (± standard error, and on how many splits each side wins), F1 of the category, and a
verdict: "TTMM ahead" / "BoW ahead" when the mean paired difference exceeds twice its standard
error, "tie" otherwise.

``--cache DIR`` keeps the fitted TTMM features (npz), so that the SVM part can be rerun with other
``--norm`` / ``--svm-c`` settings without refitting.

    python experiments/ttmm_classification.py                     # the Fig. 2 protocol: 20ng + BBC
    python experiments/ttmm_classification.py --quick             # a few seconds, synthetic corpus
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # run from a checkout without installing

import jax  # noqa: E402

from topicjax.data.corpus import Corpus  # noqa: E402
from topicjax.ttmm import TTMM, sample_corpus, synthetic_params  # noqa: E402
from topicjax.ttmm.em import em_init, em_step  # noqa: E402
from topicjax.ttmm.sweeps import theme_layout  # noqa: E402

BOW = "bag-of-words (counts)"
FEATURES = {  # --features name: (row label, TTMM method)
    "eq18": ("P(t|d) eq. 18", "transform"),
    "shares": ("topic shares", "topic_shares"),
    "themes": ("P(h|d) eq. 6", "predict_proba"),
}


# ---------------------------------------------------------------------- corpora
def read_label_folders(path: Path, **vectorizer_kwargs) -> Corpus:
    """A folder with one sub-folder per label, each holding raw text files (one document per file)."""
    from sklearn.feature_extraction.text import CountVectorizer

    texts, labels, names = [], [], []
    for sub in sorted(p for p in path.iterdir() if p.is_dir()):
        for f in sorted(p for p in sub.rglob("*") if p.is_file()):
            texts.append(f.read_bytes().decode("utf-8", errors="replace"))
            labels.append(sub.name)
            names.append(str(f.relative_to(path)))
    if not texts:
        raise ValueError(f"{path}: no text files found in label sub-folders")
    opts = dict(stop_words="english", min_df=3, max_df=0.5, token_pattern=r"(?u)\b[a-zA-Z][a-zA-Z]+\b")
    opts.update(vectorizer_kwargs)
    vec = CountVectorizer(**opts)
    X = vec.fit_transform(texts)
    return Corpus.from_sparse(X, vocab=list(vec.get_feature_names_out()), labels=labels, doc_names=names,
                              empty_docs="drop")


def load_corpus(spec: str, n_docs: int | None, seed: int) -> tuple[Corpus, str]:
    from topicjax.data import datasets as ds

    if spec == "bbc":
        corpus, name = ds.load_bbc_news("all"), "BBC News (OCTIS preprocessing, all splits)"
    elif spec == "20ng":
        # 8,000 posts: the size of Blei et al.'s Reuters-21578 subset
        corpus = ds.load_20newsgroups("all", n_docs=n_docs or 8000, seed=seed)
        name = f"20 Newsgroups (random sample of {n_docs or 8000} posts, headers removed)"
        n_docs = None
    elif spec == "synthetic":
        truth = synthetic_params(4, 6, 60, concentration=0.2, seed=seed)
        corpus, _ = sample_corpus(truth, n_docs=n_docs or 300, doc_length=(40, 120), seed=seed)
        name, n_docs = f"synthetic TTMM corpus ({corpus.n_docs} docs, 4 themes = labels)", None
    else:
        path = Path(spec)
        if not path.exists():
            raise SystemExit(f"--corpus {spec}: not bbc, 20ng, synthetic or an existing path")
        if path.is_dir() and any(p.is_dir() for p in path.iterdir()):
            corpus = read_label_folders(path)
        else:
            from topicjax.data.formats import read_corpus

            corpus = read_corpus(path)
        name = str(path)
    if corpus.labels is None:
        raise SystemExit(f"--corpus {spec}: the corpus has no labels; the classification protocol needs them")
    if n_docs is not None and n_docs < corpus.n_docs:
        pick = np.sort(np.random.default_rng(seed).choice(corpus.n_docs, n_docs, replace=False))
        corpus = corpus.subset(pick)
        name += f", random subset of {n_docs} documents"
    return corpus, name


# ---------------------------------------------------------------------- SVM protocol
def normalise_rows(X, how: str):
    """Rows scaled to unit L2 or L1 norm (``how`` = ``"l2"`` / ``"l1"``) or left as they are
    (``"none"``); all-zero rows stay zero.  Sparse in, sparse out."""
    from sklearn.preprocessing import normalize

    if how == "none":
        return X
    if how not in ("l1", "l2"):
        raise ValueError(f"norm must be 'l2', 'l1' or 'none', got {how!r}")
    return normalize(X, norm=how)


def svmlight_default_c(X) -> float:
    """SVMLight's default trade-off C = 1 / mean over the rows of x.x (``svm_learn -c`` unset).

    Raises ValueError when every row is zero (no C exists)."""
    import scipy.sparse as sp

    sq = np.asarray(X.multiply(X).sum(axis=1)).ravel() if sp.issparse(X) else np.einsum("ij,ij->i", X, X)
    mean = float(np.mean(sq, dtype=np.float64))
    if not mean > 0:
        raise ValueError("svmlight_default_c: every training document has a zero feature vector")
    return 1.0 / mean


def paired_splits(y: np.ndarray, proportions, repeats: int, seed: int) -> dict:
    """``{p: [(train, test), ...]}``: ``repeats`` stratified random splits per proportion p.

    The training set takes max(1, round(p N_c)) documents of every class c (at most N_c - 1, so
    that every class is also tested): both classes are learnt from even at p = 0.01 with a 5 %
    category.  The same splits serve every representation (a paired comparison); ``seed`` fixes them.

    Raises ValueError for a single class, a class with fewer than 2 documents, ``repeats`` < 2 or
    a p outside (0, 1)."""
    y = np.asarray(y)
    classes, sizes = np.unique(y, return_counts=True)
    if classes.size < 2:
        raise ValueError("paired_splits: y has a single class; nothing to classify")
    if sizes.min() < 2:
        raise ValueError(f"paired_splits: class {classes[np.argmin(sizes)]!r} has a single document; "
                         "it cannot be both trained on and tested")
    if repeats < 2:
        raise ValueError(f"repeats must be at least 2 (a standard error needs two splits), got {repeats}")
    members = [np.flatnonzero(y == c) for c in classes]
    rng = np.random.default_rng(seed)
    out = {}
    for p in proportions:
        if not 0 < p < 1:
            raise ValueError(f"proportions must lie in (0, 1), got {p}")
        take = [min(max(1, int(round(p * m.size))), m.size - 1) for m in members]
        out[p] = []
        for _ in range(repeats):
            train = np.sort(np.concatenate([rng.choice(m, k, replace=False) for m, k in zip(members, take)]))
            test = np.setdiff1d(np.arange(y.size), train, assume_unique=True)
            out[p].append((train, test))
    return out


def fit_linear_svm(X, y: np.ndarray, C: float) -> tuple[np.ndarray, float]:
    """The SVM of SVMLight's default ``svm_learn`` run on a binary task (y in {0, 1}): linear
    kernel, hinge loss, a bias that is not regularised, i.e. the (w, b) minimising
    1/2 |w|^2 + C sum_i max(0, 1 - s_i (w.x_i + b)) with s_i = 2 y_i - 1.  (scikit-learn's
    ``LinearSVC`` would square the hinge and regularise the bias.)

    Solved by libsvm on the Gram matrix of the training documents; w = sum_i alpha_i s_i x_i is
    then formed once, so that predicting is one product with w (libsvm's own prediction evaluates
    the kernel against every support vector: 19 s instead of 0.03 s for 6,000 20 Newsgroups posts).
    Returns ``(w, b)``; class 1 is predicted where ``X @ w + b > 0``.  Raises ValueError unless
    y holds both 0 and 1."""
    import scipy.sparse as sp
    from sklearn.svm import SVC

    y = np.asarray(y)
    if not np.array_equal(np.unique(y), [0, 1]):
        raise ValueError("fit_linear_svm: y must hold both classes 0 and 1")
    gram = X @ X.T
    gram = gram.toarray() if sp.issparse(gram) else np.asarray(gram)
    clf = SVC(kernel="precomputed", C=C).fit(gram, y)
    w = clf.dual_coef_ @ X[clf.support_]  # libsvm's dual_coef_ holds alpha_i s_i (class 1 positive)
    w = np.asarray(w.toarray() if sp.issparse(w) else w, np.float64).ravel()
    return w, float(clf.intercept_[0])


def svm_scores(features: dict, y: np.ndarray, splits: dict, svm_c) -> dict:
    """``{name: {p: {"acc": (R,), "f1": (R,)}}}``: accuracy and F1 of class 1 of the linear SVM of
    :func:`fit_linear_svm` on every split of a binary task.  ``svm_c`` is a number or
    ``"svmlight"`` (SVMLight's default C, from each training set)."""
    from sklearn.metrics import f1_score

    out = {name: {} for name in features}
    for p, pairs in splits.items():
        for name, X in features.items():
            acc, f1 = [], []
            for tr, te in pairs:
                C = svmlight_default_c(X[tr]) if svm_c == "svmlight" else float(svm_c)
                w, b = fit_linear_svm(X[tr], y[tr], C)
                pred = (np.asarray(X[te] @ w).ravel() + b > 0).astype(int)
                acc.append(float(np.mean(pred == y[te])))
                f1.append(float(f1_score(y[te], pred, zero_division=0.0)))
            out[name][p] = {"acc": np.asarray(acc), "f1": np.asarray(f1)}
    return out


def mean_se(values) -> tuple[float, float]:
    """Mean and standard error (sample standard deviation / sqrt(n)) of a 1-d array."""
    v = np.asarray(values, np.float64)
    return float(v.mean()), float(v.std(ddof=1) / np.sqrt(v.size))


def paired_verdict(a, b) -> dict:
    """Paired comparison of two accuracy arrays over the same splits: mean and standard error of
    a - b, the splits where a wins / ties / loses, and the verdict "ahead" (mean > 2 SE),
    "behind" (mean < -2 SE) or "tie"."""
    d = np.asarray(a, np.float64) - np.asarray(b, np.float64)
    m, se = mean_se(d)
    verdict = "ahead" if m > 2 * se else "behind" if m < -2 * se else "tie"
    if se == 0:  # identical on every split, or the same gap on every split
        verdict = "tie" if m == 0 else ("ahead" if m > 0 else "behind")
    return {"mean": m, "se": se, "wins": int(np.sum(d > 0)), "ties": int(np.sum(d == 0)),
            "losses": int(np.sum(d < 0)), "verdict": verdict}


# ---------------------------------------------------------------------- tables
def _n_train(splits: dict, p) -> int:
    return len(splits[p][0][0])


def accuracy_table(scores: dict, dims: dict, splits: dict, metric: str = "acc") -> str:
    """Markdown table of ``metric`` (``"acc"`` or ``"f1"``), mean ± standard error in %, one row per
    representation, one column per p; the best mean of each column in bold."""
    props = list(splits)
    rows = ["| features | dims | " + " | ".join(f"p = {p:g}" for p in props) + " |",
            "|---|---:|" + "---:|" * len(props),
            "| (training documents) | | " + " | ".join(str(_n_train(splits, p)) for p in props) + " |"]
    best = {p: max(mean_se(s[p][metric])[0] for s in scores.values()) for p in props}
    for name, res in scores.items():
        cells = []
        for p in props:
            m, se = mean_se(res[p][metric])
            cell = f"{100 * m:.1f} ± {100 * se:.1f}"
            cells.append(f"**{cell}**" if m == best[p] else cell)
        rows.append(f"| {name} | {dims[name]} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def difference_table(scores: dict, splits: dict) -> tuple[str, dict]:
    """Paired accuracy differences to bag-of-words, in percentage points; also returns the verdicts."""
    props = list(splits)
    rows = ["| features − bag-of-words | " + " | ".join(f"p = {p:g}" for p in props) + " |",
            "|---|" + "---:|" * len(props)]
    verdicts = {}
    for name, res in scores.items():
        if name == BOW:
            continue
        cells = []
        for p in props:
            v = paired_verdict(res[p]["acc"], scores[BOW][p]["acc"])
            verdicts[(name, p)] = v
            mark = {"ahead": "**TTMM ahead**", "behind": "BoW ahead", "tie": "tie"}[v["verdict"]]
            cells.append(f"{100 * v['mean']:+.1f} ± {100 * v['se']:.1f} ({v['wins']}/{v['losses']}; {mark})")
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(rows), verdicts


# ---------------------------------------------------------------------- TTMM features
def _corpus_digest(corpus: Corpus) -> str:
    h = hashlib.sha256()
    for a in (corpus.doc_ids, corpus.word_ids, corpus.counts):
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:16]


def ttmm_features(unlabelled: Corpus, J: int, args, cache: Path | None) -> dict:
    """Fit TTMM (K = ``args.topics``, J themes, EM) and return its document features and fit
    statistics; read from / written to ``cache`` (an npz keyed by the corpus's entries and the
    settings, not by topicjax's version: empty the folder after changing the TTMM code)."""
    digest = _corpus_digest(unlabelled)
    path = None
    if cache is not None:
        path = cache / f"ttmm_{digest}_J{J}_K{args.topics}_it{args.max_iter}_tol{args.tol:g}_s{args.seed}.npz"
        if path.exists():
            with np.load(path) as z:
                print(f"TTMM J={J}: features read from {path}", flush=True)
                return {k: z[k] for k in z.files}
    t0 = time.perf_counter()
    model = TTMM(n_themes=J, n_components=args.topics, max_iter=args.max_iter, tol=args.tol,
                 random_state=args.seed, progress=args.progress).fit(unlabelled)
    fit_s = time.perf_counter() - t0
    out = {key: np.asarray(getattr(model, method)(unlabelled), np.float64) for key, (_, method) in FEATURES.items()}
    out.update(n_iter=np.int32(model.n_iter_), fit_s=np.float64(fit_s),
               ll_token=np.float64(model.loglik_history_[-1] / unlabelled.n_tokens),
               used=np.int32(np.sum(model.pi_ > 1.0 / (100 * unlabelled.n_docs))),
               load=np.asarray(os.getloadavg()))
    print(f"TTMM J={J}: {int(out['n_iter'])} iterations, {fit_s:.1f} s, L/token {float(out['ll_token']):.4f}",
          flush=True)
    if path is not None:
        cache.mkdir(parents=True, exist_ok=True)
        np.savez(path, **out)
    return out


def time_em_iteration(corpus: Corpus, n_themes: int, n_topics: int, n_iter: int) -> tuple[float, list[float]]:
    """Median wall time of one EM iteration (after a first, compiling, iteration)."""
    data = theme_layout(corpus, n_themes)
    state = em_init(jax.random.key(0), n_themes, n_topics, corpus.n_words, corpus.n_docs)
    state = em_step(state, data)
    jax.block_until_ready(state)
    times = []
    for _ in range(n_iter):
        t0 = time.perf_counter()
        state = em_step(state, data)
        jax.block_until_ready(state)
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), times


# ---------------------------------------------------------------------- main
def _svm_c(text: str):
    if text == "svmlight":
        return text
    try:
        c = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--svm-c must be 'svmlight' or a positive number, got {text!r}") from None
    if not c > 0:
        raise argparse.ArgumentTypeError(f"--svm-c must be positive, got {text!r}")
    return c


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", nargs="+", default=None,
                    help="bbc | 20ng | synthetic | PATH, one or more (default: 20ng bbc; synthetic with --quick)")
    ap.add_argument("--n-docs", type=int, default=None, help="random subset of documents (20ng: sample size, 8000)")
    ap.add_argument("--themes", type=int, nargs="+", default=[500, 1000], help="numbers of themes J (Fig. 2: 500 1000)")
    ap.add_argument("--topics", type=int, default=50, help="number of topics K (Fig. 2: 50)")
    ap.add_argument("--proportions", type=float, nargs="+", default=[0.01, 0.05, 0.1, 0.15, 0.2, 0.25],
                    help="training proportions p (Blei et al.'s Fig. 10 axis runs from 0 to 0.25)")
    ap.add_argument("--category", nargs="+", default=None,
                    help="label(s) for the one-against-the-rest task: each corpus runs every one it has "
                         "(default: sci.med business; a corpus with none of them uses its first label)")
    ap.add_argument("--features", nargs="+", choices=list(FEATURES), default=list(FEATURES),
                    help="TTMM representations: eq18 (the paper's), shares, themes")
    ap.add_argument("--norm", choices=["l2", "l1", "none"], default="l2", help="per-document feature scaling")
    ap.add_argument("--svm-c", type=_svm_c, default="svmlight",
                    help="the SVM's C: svmlight (1 / mean x.x of the training set, SVMLight's default) or a number")
    ap.add_argument("--repeats", type=int, default=20, help="paired random splits per proportion")
    ap.add_argument("--max-iter", type=int, default=150, help="EM iterations at most")
    ap.add_argument("--tol", type=float, default=1e-5, help="EM relative tolerance")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--time-themes", type=int, default=0, help="J of an EM timing (0: skip)")
    ap.add_argument("--time-iters", type=int, default=5, help="EM iterations timed")
    ap.add_argument("--cache", default=None, help="folder for the fitted TTMM features (npz)")
    ap.add_argument("--out", default=str(HERE / "results" / "ttmm_classification.md"))
    ap.add_argument("--quick", action="store_true", help="a few-seconds smoke run on a tiny corpus")
    ap.add_argument("--progress", action="store_true", help="show progress bars")
    args = ap.parse_args(argv)
    if args.quick:
        args.corpus = args.corpus or ["synthetic"]
        args.n_docs = args.n_docs or 200
        args.themes, args.topics = [4], 6
        args.proportions, args.repeats = [0.1, 0.5], 2
        args.max_iter = min(args.max_iter, 10)
        args.time_themes, args.time_iters = args.themes[0], 3  # the fitted J: no new compilation
    args.corpus = args.corpus or ["20ng", "bbc"]
    args.category = args.category or ["sci.med", "business"]
    if args.repeats < 2:
        ap.error("--repeats must be at least 2 (a standard error needs two splits)")
    if any(not 0 < p < 1 for p in args.proportions):
        ap.error("--proportions must lie in (0, 1)")
    return args


def _load_line() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.1f} / {five:.1f} / {fifteen:.1f}"


def run_corpus(spec: str, args) -> tuple[list[str], dict]:
    """Fit, classify and time on one corpus; returns the markdown lines of its section and the raw
    per-split accuracies (for the JSON record)."""
    load_before = _load_line()
    corpus, corpus_name = load_corpus(spec, args.n_docs, args.seed)
    if corpus.multilabel:
        raise SystemExit(f"--corpus {spec}: multi-label corpora are not supported")
    y_all = corpus.label_ids
    names = list(corpus.label_names)
    categories = [c for c in args.category if c in names] or [names[0]]
    print(corpus_name, corpus, flush=True)

    features = {BOW: normalise_rows(corpus.to_sparse(), args.norm)}
    dims = {BOW: corpus.n_words}
    fits = []
    unlabelled = Corpus.from_entries(corpus.doc_ids, corpus.word_ids, corpus.counts, vocab=corpus.vocab,
                                     n_docs=corpus.n_docs)  # TTMM is trained without the labels
    cache = Path(args.cache) if args.cache else None
    for J in args.themes:
        f = ttmm_features(unlabelled, J, args, cache)
        fits.append((J, int(f["n_iter"]), float(f["fit_s"]), float(f["ll_token"]), int(f["used"])))
        for key in args.features:
            label = f"TTMM J={J}: {FEATURES[key][0]}"
            features[label] = normalise_rows(f[key], args.norm)
            dims[label] = f[key].shape[1]

    raw = {"corpus": corpus_name, "tasks": {}}
    lines = [
        f"## Corpus: {corpus_name}",
        "",
        f"{corpus.n_docs} documents, {corpus.n_words} words, {corpus.n_tokens} tokens, {corpus.nnz} non-zeros, "
        f"{len(names)} labels.  Load average (1 / 5 / 15 min) before: {load_before}.",
        "",
        "TTMM fits (the log-likelihood is L of eq. 4 divided by the number of tokens; the time per iteration "
        "includes the compilation):",
        "",
        "| J | iterations | fit time (s) | s / iteration | log-likelihood / token | themes with π_j > 1/(100 N) |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    lines += [f"| {J} | {it} | {s:.1f} | {s / max(it, 1):.2f} | {ll:.4f} | {u} |" for J, it, s, ll, u in fits]
    tasks = [(f"{c} against the rest", (y_all == names.index(c)).astype(int)) for c in categories]
    for title, y in tasks:
        t0 = time.perf_counter()
        splits = paired_splits(y, args.proportions, args.repeats, args.seed)
        scores = svm_scores(features, y, splits, args.svm_c)
        svm_s = time.perf_counter() - t0
        majority = float(np.bincount(y).max() / y.size)
        diff, verdicts = difference_table(scores, splits)
        lines += ["", f"### {title} ({int(np.bincount(y).min())} documents in the smallest class of {y.size})", "",
                  f"Accuracy in % (the paper's measure), mean ± standard error over {args.repeats} paired splits; "
                  f"majority-class accuracy {100 * majority:.1f} %.  SVMs: {svm_s:.0f} s.", "",
                  accuracy_table(scores, dims, splits), "",
                  "Paired accuracy difference to bag-of-words in percentage points, mean ± standard error "
                  "(splits won / lost); a side is *ahead* when the mean exceeds twice its standard error:", "",
                  diff, ""]
        lines += ["F1 of the category in %, mean ± standard error:", "",
                  accuracy_table(scores, dims, splits, metric="f1"), ""]
        lines += ["TTMM ahead of bag-of-words (mean paired difference > 2 SE):", ""]
        for name in scores:
            if name != BOW:
                ahead = [f"{p:g}" for p in splits if verdicts[(name, p)]["verdict"] == "ahead"]
                behind = [f"{p:g}" for p in splits if verdicts[(name, p)]["verdict"] == "behind"]
                lines.append(f"- {name}: ahead at p = {', '.join(ahead) or 'none'}; "
                             f"behind at p = {', '.join(behind) or 'none'}")
        raw["tasks"][title] = {name: {str(p): {"acc": r["acc"].tolist(), "f1": r["f1"].tolist()}
                                      for p, r in res.items()} for name, res in scores.items()}
    lines += ["", f"Load average (1 / 5 / 15 min) after: {_load_line()}.", ""]
    if args.time_themes > 0:
        med, times = time_em_iteration(unlabelled, args.time_themes, args.topics, args.time_iters)
        print(f"EM iteration J={args.time_themes} K={args.topics}: median {med:.3f} s", flush=True)
        lines += [
            "### Time per EM iteration",
            "",
            f"J = {args.time_themes}, K = {args.topics} on this corpus: **median {med:.3f} s** over "
            f"{len(times)} iterations after compilation (all: {', '.join(f'{t:.3f}' for t in times)} s), "
            f"`{jax.devices()[0].platform}` backend, load average {_load_line()}.",
            "",
        ]
    return lines, raw


def main(argv=None) -> str:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    cmd = "python experiments/ttmm_classification.py " + " ".join(shlex.quote(a) for a in argv)
    c_text = ("SVMLight's default C = 1 / mean(x.x) over each training set" if args.svm_c == "svmlight"
              else f"C = {args.svm_c:g}")
    lines = [
        "# TTMM features against bag-of-words in a linear SVM (Keller & Bengio, sec. 5, Fig. 2)",
        "",
        f"Command: `JAX_PLATFORMS=cpu {cmd.strip()}`",
        "",
        f"Protocol: TTMM (K = {args.topics} topics, EM, at most {args.max_iter} iterations, relative tolerance "
        f"{args.tol:g}, seed {args.seed}) fitted on all documents without their labels; a linear SVM (libsvm, "
        f"hinge loss, unregularised bias, {c_text}) on {args.norm.upper() if args.norm != 'none' else 'unscaled'} "
        f"document vectors is trained on a stratified random proportion p of the documents and tested on the "
        f"rest; {args.repeats} random splits per p, the same for every representation.  Best per column in bold.  "
        "Representations: bag-of-words counts; TTMM P(t|d) of eq. 18 (the paper's features); TTMM topic shares "
        "(expected share of the document's tokens drawn from each topic, not in the paper); TTMM theme "
        "posteriors P(h|d) of eq. 6 (not in the paper).",
        "",
    ]
    record = {"command": cmd.strip(), "args": {k: v for k, v in vars(args).items()}, "corpora": []}
    for spec in args.corpus:
        section, raw = run_corpus(spec, args)
        lines += section
        record["corpora"].append(raw)
    text = "\n".join(lines)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    out.with_suffix(".json").write_text(json.dumps(record, indent=1), encoding="utf-8")
    print(f"wrote {out} and {out.with_suffix('.json')}")
    return text


if __name__ == "__main__":
    main()
