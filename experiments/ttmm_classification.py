"""Text categorisation with TTMM features (Keller & Bengio, sec. 5), against bag-of-words.

Protocol of the paper (after Blei et al.'s LDA experiment):

1. fit a TTMM with K topics and J themes on *all* documents, without their labels (EM);
2. represent every document by its TTMM features;
3. for several proportions p, train a linear SVM (scikit-learn ``LinearSVC``) on a random,
   stratified proportion p of the labelled documents and measure the accuracy on the rest;
   the same splits are used for every representation (paired comparison), repeated ``--repeats``
   times;
4. tasks: one category against the rest (``--category``, the paper's GRAIN vs NOT GRAIN), and all
   categories at once (multi-class, one-vs-rest SVMs).

Representations: bag-of-words (term counts), TTMM P(t|d) of eq. 18 (K dims; the paper's feature),
TTMM expected topic shares of the tokens (K dims; see ``TTMM.topic_shares``) and
TTMM theme posteriors P(h|d) (eq. 6; J dims).  Every representation is L2-normalised per document
and classified with ``LinearSVC(C=1)`` (no tuning: as few labels as p=0.01 leave nothing to tune on).

The script also measures the time per EM iteration for ``--time-themes`` x ``--topics`` (median of
``--time-iters`` iterations after compilation).

Corpora: ``--corpus bbc`` (BBC News, 5 labels), ``--corpus 20ng`` (20 Newsgroups, a sample of
``--n-docs`` posts), ``--corpus synthetic`` (sampled from a TTMM, labels = true themes), or a path:
a folder with one sub-folder of raw text files per label, or any file/folder
``topicjax.data.formats.read_corpus`` reads that carries labels.

    python experiments/ttmm_classification.py --corpus bbc
    python experiments/ttmm_classification.py --quick          # a few seconds, synthetic corpus
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # run from a checkout without installing

import jax  # noqa: E402

from topicjax.data.corpus import Corpus  # noqa: E402
from topicjax.ttmm import TTMM, sample_corpus, synthetic_params  # noqa: E402
from topicjax.ttmm.em import em_init, em_step  # noqa: E402
from topicjax.ttmm.sweeps import theme_layout  # noqa: E402


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
        corpus = ds.load_20newsgroups("all", n_docs=n_docs or 4000, seed=seed)
        name = f"20 Newsgroups (random sample of {n_docs or 4000} posts, headers removed)"
        n_docs = None
    elif spec == "synthetic":
        truth = synthetic_params(4, 6, 60, concentration=0.2, seed=seed)
        corpus, _ = sample_corpus(truth, n_docs=n_docs or 300, doc_length=(40, 120), seed=seed)
        name, n_docs = f"synthetic TTMM corpus ({corpus.n_docs} docs, 4 themes = labels)", None
    else:
        path = Path(spec)
        if path.is_dir() and any(p.is_dir() for p in path.iterdir()):
            corpus = read_label_folders(path)
        else:
            from topicjax.data.formats import read_corpus

            corpus = read_corpus(path)
        name = str(path)
    if corpus.labels is None:
        raise SystemExit(f"{spec}: the corpus has no labels; the classification protocol needs them")
    if n_docs is not None and n_docs < corpus.n_docs:
        pick = np.sort(np.random.default_rng(seed).choice(corpus.n_docs, n_docs, replace=False))
        corpus = corpus.subset(pick)
        name += f", random subset of {n_docs} documents"
    return corpus, name


# ---------------------------------------------------------------------- protocol
def l2_rows(X):
    from sklearn.preprocessing import normalize

    return normalize(X, norm="l2")


def accuracy_table(features: dict, y: np.ndarray, proportions, repeats: int, seed: int):
    """Mean and std accuracy of LinearSVC for every representation and proportion (same splits)."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.model_selection import StratifiedShuffleSplit
    from sklearn.svm import LinearSVC

    n_classes = np.unique(y).size
    out = {name: {} for name in features}
    for p in proportions:
        n_train = max(int(round(p * y.size)), 2 * n_classes)
        splitter = StratifiedShuffleSplit(n_splits=repeats, train_size=n_train, random_state=seed)
        accs = {name: [] for name in features}
        for tr, te in splitter.split(np.zeros(y.size), y):
            for name, X in features.items():
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ConvergenceWarning)
                    clf = LinearSVC(C=1.0, max_iter=5000).fit(X[tr], y[tr])
                accs[name].append(float(np.mean(clf.predict(X[te]) == y[te])))
        for name in features:
            out[name][p] = (float(np.mean(accs[name])), float(np.std(accs[name])), n_train)
    return out


def markdown_table(result: dict, dims: dict, proportions, baseline: float) -> str:
    head = "| features | dims | " + " | ".join(f"p = {p:g}" for p in proportions) + " |"
    sep = "|---|---:|" + "---:|" * len(proportions)
    n_train = "| (training documents) | | " + " | ".join(
        str(next(iter(result.values()))[p][2]) for p in proportions) + " |"
    rows = [head, sep, n_train]
    for name, res in result.items():
        best = {p: max(r[p][0] for r in result.values()) for p in proportions}
        cells = []
        for p in proportions:
            m, s, _ = res[p]
            cell = f"{100 * m:.1f} ± {100 * s:.1f}"
            cells.append(f"**{cell}**" if m == best[p] else cell)
        rows.append(f"| {name} | {dims[name]} | " + " | ".join(cells) + " |")
    rows.append(f"\nMajority-class accuracy: {100 * baseline:.1f} %.")
    return "\n".join(rows)


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
def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", nargs="+", default=None,
                    help="bbc | 20ng | synthetic | PATH, one or more (default: bbc; synthetic with --quick)")
    ap.add_argument("--n-docs", type=int, default=None, help="random subset of documents (20ng: sample size)")
    ap.add_argument("--themes", type=int, nargs="+", default=[5, 50, 500], help="numbers of themes J")
    ap.add_argument("--topics", type=int, default=50, help="number of topics K")
    ap.add_argument("--proportions", type=float, nargs="+", default=[0.01, 0.02, 0.05, 0.1, 0.2, 0.5])
    ap.add_argument("--category", nargs="+", default=None,
                    help="label(s) for the one-against-the-rest task: each corpus uses the first one it has "
                         "(default: its first label)")
    ap.add_argument("--repeats", type=int, default=5, help="random splits per proportion")
    ap.add_argument("--max-iter", type=int, default=100, help="EM iterations")
    ap.add_argument("--tol", type=float, default=1e-5, help="EM relative tolerance")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--time-themes", type=int, default=500, help="J of the EM timing (0: skip)")
    ap.add_argument("--time-iters", type=int, default=5, help="EM iterations timed")
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
    args.corpus = args.corpus or ["bbc"]
    return args


def run_corpus(spec: str, args) -> list[str]:
    """Fit, classify and time on one corpus; returns the markdown lines of its section."""
    corpus, corpus_name = load_corpus(spec, args.n_docs, args.seed)
    if corpus.multilabel:
        raise SystemExit(f"{spec}: multi-label corpora are not supported by the all-categories task")
    y_all = corpus.label_ids
    names = list(corpus.label_names)
    category = next((c for c in (args.category or []) if c in names), names[0])
    y_bin = (y_all == names.index(category)).astype(int)
    print(corpus_name, corpus, flush=True)

    features = {"bag-of-words (counts)": l2_rows(corpus.to_sparse())}
    dims = {"bag-of-words (counts)": corpus.n_words}
    fits = []
    unlabelled = Corpus.from_entries(corpus.doc_ids, corpus.word_ids, corpus.counts, vocab=corpus.vocab,
                                     n_docs=corpus.n_docs)  # TTMM is trained without the labels
    for J in args.themes:
        t0 = time.perf_counter()
        model = TTMM(n_themes=J, n_components=args.topics, max_iter=args.max_iter, tol=args.tol,
                     random_state=args.seed, progress=args.progress).fit(unlabelled)
        fit_s = time.perf_counter() - t0
        used = int(np.sum(model.pi_ > 1.0 / (100 * corpus.n_docs)))
        fits.append((J, model.n_iter_, fit_s, model.loglik_history_[-1] / corpus.n_tokens, used))
        print(f"TTMM J={J}: {model.n_iter_} iterations, {fit_s:.1f} s, L/token {fits[-1][3]:.4f}", flush=True)
        tag = f"TTMM J={J}"
        features[f"{tag}: P(t|d) eq. 18"] = l2_rows(model.transform(unlabelled))
        dims[f"{tag}: P(t|d) eq. 18"] = args.topics
        features[f"{tag}: topic shares"] = l2_rows(model.topic_shares(unlabelled))
        dims[f"{tag}: topic shares"] = args.topics
        features[f"{tag}: P(h|d) eq. 6"] = l2_rows(model.predict_proba(unlabelled))
        dims[f"{tag}: P(h|d) eq. 6"] = J

    binary = accuracy_table(features, y_bin, args.proportions, args.repeats, args.seed)
    multi = accuracy_table(features, y_all, args.proportions, args.repeats, args.seed)

    lines = [
        f"## Corpus: {corpus_name}",
        "",
        f"{corpus.n_docs} documents, {corpus.n_words} words, {corpus.n_tokens} tokens, {corpus.nnz} non-zeros, "
        f"{len(names)} labels: {', '.join(names)}.",
        "",
        "TTMM fits (the log-likelihood is L of eq. 4 divided by the number of tokens):",
        "",
        "| J | iterations | fit time (s) | log-likelihood / token | themes with π_j > 1/(100 N) |",
        "|---:|---:|---:|---:|---:|",
    ]
    lines += [f"| {J} | {it} | {s:.1f} | {ll:.4f} | {u} |" for J, it, s, ll, u in fits]
    lines += [
        "",
        f"### {category} against the rest ({int(y_bin.sum())} of {y_bin.size} documents)",
        "",
        markdown_table(binary, dims, args.proportions, max(y_bin.mean(), 1 - y_bin.mean())),
        "",
        f"### All {len(names)} categories",
        "",
        markdown_table(multi, dims, args.proportions, float(np.bincount(y_all).max() / y_all.size)),
        "",
    ]
    if args.time_themes > 0:
        med, times = time_em_iteration(unlabelled, args.time_themes, args.topics, args.time_iters)
        print(f"EM iteration J={args.time_themes} K={args.topics}: median {med:.3f} s", flush=True)
        lines += [
            "### Time per EM iteration",
            "",
            f"J = {args.time_themes}, K = {args.topics} on this corpus: **median {med:.3f} s** over "
            f"{len(times)} iterations after compilation (all: {', '.join(f'{t:.3f}' for t in times)} s), "
            f"`{jax.devices()[0].platform}` backend.  The CPU (2 cores) was shared with other jobs while this "
            "ran, so these are upper bounds for an idle machine.",
            "",
        ]
    return lines


def main(argv=None) -> str:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    cmd = "python experiments/ttmm_classification.py " + " ".join(shlex.quote(a) for a in argv)
    lines = [
        "# TTMM features for text categorisation (Keller & Bengio, sec. 5)",
        "",
        f"Command: `JAX_PLATFORMS=cpu {cmd.strip()}`",
        "",
        "Protocol: TTMM (K = %d topics, EM, at most %d iterations, relative tolerance %g, seed %d) fitted on all "
        "documents without their labels; a LinearSVC (C = 1) on L2-normalised document vectors is trained on a "
        "stratified random proportion p of the documents and tested on the rest; accuracy in %%, mean ± std over %d "
        "random splits (the same splits for every representation).  Best per column in bold.  Representations: "
        "bag-of-words counts; TTMM P(t|d) of eq. 18 (the paper's features, normalised over k); TTMM topic shares "
        "(expected share of the document's tokens drawn from each topic under the exact posterior, not in the "
        "paper); TTMM theme posteriors P(h|d) of eq. 6."
        % (args.topics, args.max_iter, args.tol, args.seed, args.repeats),
        "",
    ]
    for spec in args.corpus:
        lines += run_corpus(spec, args)
    text = "\n".join(lines)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    print(f"wrote {out}")
    return text


if __name__ == "__main__":
    main()
