"""LIDA Table 1 (Archambeau, Lakshminarayanan & Bouchard, sec. 5.3): held-out log-perplexity.

Rows: LDA (our baseline; not in the paper's table), FTM with δ = 1, σ = 0 (the two-parameter FTM of
Williamson et al.), the four-parameter FTM (δ sampled, σ fixed) and LIDA (σ, ζ fixed).  Columns: the
corpora, each as mean ± standard error of the log-perplexity over the folds.  The paper reports FTM
and LIDA "for the optimal hyperparameters" (sec. 5.3): with ``--sigma`` / ``--zeta`` lists the script
runs every grid point, reports all of them, and puts the grid point with the lowest mean in the main
table (chosen on the test folds, as the paper seems to have done, so slightly optimistic).

Protocol (sec. 5.1, 5.3): the documents are split at random into ``--folds`` folds; for each fold
the model is trained on the other folds by the collapsed Gibbs sampler of Algorithm 1, the topics
of the test documents are sampled on one half of their tokens (``Corpus.completion_split``) with Φ
fixed at its posterior mean (47) averaged over the sweeps after burn-in, θ (46) is averaged over
the test sweeps after their burn-in, and the log-perplexity −ln P(w_*|w)/N_* of eq. (44)-(45) is
measured on the other half.  Test documents with fewer than two tokens cannot be split and are
left out (their number is reported).

Corpora: ``kos`` (UCI, used as is, as in the paper), ``20news`` (see :func:`load_20news`: 1000 posts,
English stop words removed, the 1,407 most frequent remaining words, as close as we can get to the
preprocessed set of Williamson et al. that the paper used; with ``--news-words 0
--news-stop-words none`` every word and the stop words are kept: our reading of the "unprocessed
version of the 1000 documents" whose log-perplexities the paper gives after Table 1), or any
corpus path (``Corpus.load``: UCI docword file/folder, VW, lda-c, ...).  ``--unseen drop`` leaves
the test tokens of words no training document uses out of the score (:func:`fold_split`).

Runs: every (corpus, model, grid point, fold) is one task; ``--jobs N`` runs them in N worker
processes (multiprocessing, spawn; each worker imports JAX itself, single-threaded on CPU; on GPU
the workers share the device without preallocating its memory).  Results do not depend on
``--jobs``: every task is seeded by its fold.

    python experiments/lida_table1.py --quick                     # seconds, synthetic corpus
    python experiments/lida_table1.py --corpus kos --corpus 20news --sweeps 400 --sigma 0,0.1 --jobs 16
    python experiments/lida_table1.py --corpus PATH --models ftm,lida --sigma 0,0.1 --zeta 0.25
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

# Table 1 of the paper: (mean, standard error) of the log-perplexity
PAPER = {
    "20news": {"FTM (δ=1, σ=0)": (6.342, 0.020), "FTM": (6.332, 0.020), "LIDA": (6.376, 0.026),
               "HDP-LDA": (6.568, 0.033), "HPY-LDA": (6.572, 0.029)},
    "kos": {"FTM (δ=1, σ=0)": (7.262, 0.007), "FTM": (7.266, 0.009), "LIDA": (7.257, 0.010)},
    # sec. 5.3, text after Table 1: "the unprocessed version of the 1000 documents" (20,659 words)
    "20news-unprocessed": {"FTM (δ=1, σ=0)": (7.017, 0.040), "FTM": (6.999, 0.048), "LIDA": (6.759, 0.036)},
}
# sec. 5.3 on KOS: "the average number of words per topic for HDP-LDA, FTM and LIDA is respectively
# 158, 43, and 47, while the average number of documents per topic is respectively 9, 4, and 4";
# FTM has no word masks and HDP-LDA no masks at all, so these count tokens (n_vk > 0, n_kd > 0)
PAPER_COUNTS = {"kos": {"HDP-LDA": (158, 9), "FTM": (43, 4), "LIDA": (47, 4)}}
MODELS = ["lda", "ftm1", "ftm", "lida"]
LABELS = {"lda": "LDA", "ftm1": "FTM (δ=1, σ=0)", "ftm": "FTM", "lida": "LIDA"}
# rough relative cost per token and sweep (LIDA's word step visits V x K_max entries); used only to
# start the longest tasks first
COST = {"lda": 1.0, "ftm1": 1.6, "ftm": 1.6, "lida": 4.0}


# ---------------------------------------------------------------------------------------- corpora
def load_20news(n_docs: int = 1000, n_words: int | None = 1407, seed: int = 0, stop_words: str | None = "english"):
    """A 1000-document subset of 20 Newsgroups prepared like the paper's (sec. 5.3).

    The paper uses the preprocessed 1000 documents of Williamson et al. (2010): 1,407 distinct
    words; their preprocessing "consists among others to filter out low-frequency words", and the
    unprocessed 1000 documents have 20,659 distinct words.  We draw ``n_docs`` posts of the bydate
    train+test set (seeded), remove headers, tokenise into lowercase words of two or more letters,
    remove English stop words (that gives 20,674 distinct words for seed 0, close to the paper's
    unprocessed count) and keep the ``n_words`` most frequent words (``max_features``; for seed 0 a
    cut-off at 15 occurrences in the sample).  No document becomes empty for seed 0.

    ``n_words=None`` keeps every word (the paper's "unprocessed version of the 1000 documents",
    sec. 5.3); ``stop_words=None`` keeps the stop words too (20,974 distinct words for seed 0).
    """
    import topicjax as tj

    return tj.datasets.load_20newsgroups("all", n_docs=n_docs, seed=seed, stop_words=stop_words, min_df=1,
                                         max_df=1.0, max_features=n_words)


def quick_corpus():
    import topicjax as tj

    return tj.datasets.make_bars(n_docs=100, size=4, doc_length=40, alpha=0.2, seed=0)[0]


def load_corpus(spec: str, settings: dict):
    """``kos``, ``20news``, ``quick`` (synthetic bars) or a corpus path -> (name, Corpus)."""
    if spec == "quick":
        return "bars", quick_corpus()
    import topicjax as tj
    from topicjax.data.corpus import Corpus

    if spec == "kos":
        return "kos", tj.datasets.load_kos()
    if spec == "20news":
        words = settings["news_words"] or None
        stop = None if settings["news_stop_words"] == "none" else settings["news_stop_words"]
        # every word, stop words kept: our reading of the paper's "unprocessed" 1000 documents
        name = {(None, None): "20news-unprocessed", (1407, "english"): "20news"}.get(
            (words, stop), f"20news-{words or 'all'}-{stop or 'nostoplist'}")
        return name, load_20news(settings["news_docs"], words, settings["seed"], stop)
    path = Path(spec)
    return path.name, Corpus.load(path)


_CORPORA: dict = {}  # per process: spec -> (name, corpus, folds)


def corpus_and_folds(spec: str, settings: dict):
    if spec not in _CORPORA:
        name, corpus = load_corpus(spec, settings)
        perm = np.random.default_rng(settings["seed"]).permutation(corpus.n_docs)
        _CORPORA[spec] = (name, corpus, np.array_split(perm, settings["folds"]))
    return _CORPORA[spec]


# ---------------------------------------------------------------------------------------- one task
def make_model(task: dict, s: dict, seed: int):
    from topicjax.lida import LIDA

    name = task["model"]
    common = dict(max_iter=s["sweeps"], burn_in=s["burn_in"], hyper_start=s["hyper_start"], sampler=s["mode"],
                  random_state=seed, progress=s["progress"], transform_iter=s["test_sweeps"], eval_every=0,
                  tokens_per_block=s["batch_size"], mh_steps=s["mh_steps"])
    focused = dict(n_components=s["k_max"], init_topics=min(s["init_topics"], s["k_max"]), init=s["init"],
                   eta=s["eta"], delta=s["delta"])
    if name == "lda":
        return LIDA(variant="lda", n_components=s["lda_topics"], **common)
    if name == "ftm1":
        return LIDA(variant="ftm", **{**focused, "delta": 1.0}, sigma=0.0, fixed_hyper=("delta",), **common)
    if name == "ftm":
        return LIDA(variant="ftm", **focused, sigma=task["sigma"], **common)
    if name == "lida":
        return LIDA(variant="lida", **focused, sigma=task["sigma"], zeta=task["zeta"], **common)
    raise ValueError(f"unknown model {name!r}; choose from {MODELS}")


def fold_split(corpus, folds, f: int, seed: int, unseen: str = "keep"):
    """``(train, observed, held, dropped)`` for test fold ``f``: the other folds train; the test
    documents with two or more tokens are split per token into the half that samples their topics
    and the half that is scored; ``dropped`` test documents could not be split.

    ``unseen="drop"``: the words that no training document uses are removed from the vocabulary of
    both sides (as ARTM sec. 5 does), so their test tokens are not scored.  On a corpus of rare
    words this moves the figure by more than a nat (the unprocessed 20 Newsgroups documents: 8.6 %
    of fold 0's held-out tokens); on KOS and the 1,407-word 20 Newsgroups set it concerns at most
    0.1 % and 0.6 % of a fold's held-out tokens.
    """
    test = corpus.subset(np.sort(folds[f]))
    train = corpus.subset(np.sort(np.concatenate([folds[g] for g in range(len(folds)) if g != f])))
    emptied = 0
    if unseen == "drop":
        vocab = [corpus.vocab[i] for i in np.flatnonzero(train.word_counts > 0)]
        n_test = test.n_docs
        train, test = train.with_vocab(vocab), test.with_vocab(vocab, empty_docs="drop")
        emptied = n_test - test.n_docs
    elif unseen != "keep":
        raise ValueError(f"unseen must be 'keep' or 'drop', got {unseen!r}")
    keep = test.doc_lengths >= 2
    test = test.subset(np.flatnonzero(keep))
    observed, held = test.completion_split("tokens", seed=seed + f)
    return train, observed, held, int((~keep).sum()) + emptied


def run_task(task: dict) -> dict:
    """Train on all folds but ``task["fold"]``, score the held-out halves of that fold."""
    s = task["settings"]
    cname, corpus, folds = corpus_and_folds(task["corpus"], s)
    f = task["fold"]
    train, observed, held, dropped = fold_split(corpus, folds, f, s["seed"], s["unseen"])
    t0 = time.perf_counter()
    model = make_model(task, s, seed=s["seed"] + 100 * f).fit(train)
    t_fit = time.perf_counter() - t0
    ll, n = model.log_predictive(observed, held)
    secs = [h["seconds"] for h in model.history_]
    import jax

    return {
        **{k: task[k] for k in ("corpus", "model", "sigma", "zeta", "fold")}, "corpus_name": cname,
        "logperp": -ll / n, "topics": model.n_topics_, "K_max": model.n_components_, "fit_s": t_fit,
        "total_s": time.perf_counter() - t0, "sweep_s": float(np.median(secs[1:] or secs)),
        "first_sweep_s": float(secs[0]), "topics_per_doc": float(model.topics_per_document().mean()),
        "words_per_topic": float(model.words_per_topic().mean()),
        "docs_per_topic": float(model.documents_per_topic().mean()), "hyper": dict(model.hyper_),
        "topics_per_doc_assigned": float(model.topics_per_document("assigned").mean()),
        "words_per_topic_assigned": float(model.words_per_topic("assigned").mean()),
        "docs_per_topic_assigned": float(model.documents_per_topic("assigned").mean()),
        # Figs. 9-10: quantiles (10, 50, 90 %) of topics per document and topics per word
        "tpd_q": [float(q) for q in np.percentile(model.topics_per_document(), [10, 50, 90])],
        "tpw_q": [float(q) for q in np.percentile(model.topics_per_word(), [10, 50, 90])],
        "dropped": dropped, "train_tokens": int(train.n_tokens), "backend": jax.default_backend(),
        "corpus_info": f"{cname}: {corpus.n_docs} documents, {corpus.n_words} words, {corpus.n_tokens} tokens",
    }


def make_tasks(args) -> list[dict]:
    settings = {k: getattr(args, k) for k in (
        "folds", "seed", "sweeps", "burn_in", "hyper_start", "test_sweeps", "mode", "mh_steps", "batch_size",
        "k_max", "init_topics", "init", "eta", "delta", "lda_topics", "news_docs", "news_words", "news_stop_words", "unseen", "progress")}
    tasks = []
    for spec in args.corpus:
        for m in args.models:
            grid = [(None, None)]
            if m == "ftm":
                grid = [(s, None) for s in args.sigma]
            elif m == "lida":
                grid = [(s, z) for s in args.sigma for z in args.zeta]
            for sigma, zeta in grid:
                for f in range(args.run_folds):
                    tasks.append(dict(corpus=spec, model=m, sigma=sigma, zeta=zeta, fold=f, settings=settings))
    # longest first (KOS-sized corpora and LIDA), so that N workers finish together
    return sorted(tasks, key=lambda t: -COST[t["model"]] * (2 if t["corpus"] == "kos" else 1))


# ---------------------------------------------------------------------------------------- workers
def configure_platform(platform: str, jobs: int) -> None:
    """Environment for JAX, set before it is imported (here and, inherited, in spawned workers)."""
    os.environ["JAX_PLATFORMS"] = "cuda" if platform == "gpu" else "cpu"
    if platform == "gpu":
        # several workers share one GPU: allocate on demand instead of 75 % each
        os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    elif jobs > 1:
        # one core per worker: no intra-op thread pools competing for the cores
        flags = os.environ.get("XLA_FLAGS", "")
        if "intra_op_parallelism_threads" not in flags:
            os.environ["XLA_FLAGS"] = (flags + " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1").strip()
        for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(v, "1")
    if "jax" in sys.modules:  # imported already (e.g. by a test): switch if its backends are not up yet
        import jax

        try:
            jax.config.update("jax_platforms", os.environ["JAX_PLATFORMS"])
        except Exception:  # noqa: BLE001  (backends already initialised: keep them)
            pass


def run_all(tasks: list[dict], jobs: int, log):
    results = []
    t0 = time.perf_counter()

    def report(r):
        results.append(r)
        s = (f"[{time.perf_counter() - t0:6.0f} s] {r['corpus_name']:>8} fold {r['fold']} {LABELS[r['model']]:>15}"
             + (f" σ={r['sigma']:g}" if r["sigma"] is not None else "") + (f" ζ={r['zeta']:g}" if r["zeta"] is not None else "")
             + f": log-perplexity {r['logperp']:.4f}  topics {r['topics']}  {r['sweep_s']:.3f} s/sweep  "
             f"fit {r['fit_s']:.0f} s  [{r['backend']}]")
        log(s)

    if jobs <= 1:
        for t in tasks:
            report(run_task(t))
    else:
        import multiprocessing as mp

        # workers unpickle ``run_task`` by its module's name: when this file was imported as a module
        # (not run as __main__), its folder must be importable in them (spawn passes sys.path on)
        here = str(Path(__file__).resolve().parent)
        if run_task.__module__ != "__main__" and here not in sys.path:
            sys.path.insert(0, here)
        with mp.get_context("spawn").Pool(jobs) as pool:
            for r in pool.imap_unordered(run_task, tasks):
                report(r)
    return results


# ---------------------------------------------------------------------------------------- report
def summarize(vals):
    vals = np.asarray(vals, float)
    se = vals.std(ddof=1) / np.sqrt(vals.size) if vals.size > 1 else float("nan")
    return vals.mean(), se


def _fmt(vals):
    mean, se = summarize(vals)
    return f"{mean:.3f} ± {se:.3f} (n={len(vals)})" if np.isfinite(se) else f"{mean:.3f} (n=1)"


def _grid_label(r):
    out = []
    if r["sigma"] is not None:
        out.append(f"σ={r['sigma']:g}")
    if r["zeta"] is not None:
        out.append(f"ζ={r['zeta']:g}")
    return ", ".join(out)


def _ordered(groups: dict, corpora: list) -> list:
    """``groups.items()`` by corpus (in ``corpora`` order), model (``MODELS`` order), σ, ζ."""
    return sorted(groups.items(), key=lambda kv: (corpora.index(kv[0][0]), MODELS.index(kv[0][1]),
                                                  kv[0][2] or 0, kv[0][3] or 0))


def tables(results, args):
    corpora = list(dict.fromkeys(r["corpus_name"] for r in results))
    groups: dict = {}
    for r in results:
        groups.setdefault((r["corpus_name"], r["model"], r["sigma"], r["zeta"]), []).append(r)
    best = {}  # (corpus, model) -> grid key with the lowest mean log-perplexity
    for (c, m, s, z), recs in groups.items():
        mean = np.mean([r["logperp"] for r in recs])
        if (c, m) not in best or mean < best[(c, m)][0]:
            best[(c, m)] = (mean, (c, m, s, z))
    lines = ["| model | " + " | ".join(f"{c} (ours) | {c} (paper)" for c in corpora) + " |",
             "|---|" + "---|---|" * len(corpora)]
    for m in args.models:
        row = [LABELS[m]]
        for c in corpora:
            if (c, m) in best:
                recs = groups[best[(c, m)][1]]
                g = _grid_label(recs[0])
                multi = sum(1 for k in groups if k[:2] == (c, m)) > 1
                row.append(_fmt([r["logperp"] for r in recs]) + (f" [{g}]" if multi and g else ""))
            else:
                row.append("—")
            paper = PAPER.get(c, {}).get(LABELS[m])
            row.append(f"{paper[0]:.3f} ± {paper[1]:.3f}" if paper else "NA")
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "All runs (every grid point; diagnostics are means over the folds: live topics at the end, "
              "final K_max, median seconds per sweep, topics per document, active words per topic, documents "
              "per topic, final hyperparameters).", "",
              "| corpus | model | grid | log-perplexity | topics | K_max | s/sweep | fit s | topics/doc | words/topic "
              "| docs/topic | α | β | η | δ | γ | ξ |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for (c, m, s, z), recs in _ordered(groups, corpora):
        g = lambda k: np.mean([r[k] for r in recs])
        h = lambda k: np.mean([r["hyper"][k] for r in recs])
        lines.append(f"| {c} | {LABELS[m]} | {_grid_label(recs[0]) or '—'} | {_fmt([r['logperp'] for r in recs])} | "
                     f"{g('topics'):.0f} | {g('K_max'):.0f} | {g('sweep_s'):.3f} | {g('fit_s'):.0f} | "
                     f"{g('topics_per_doc'):.1f} | {g('words_per_topic'):.0f} | {g('docs_per_topic'):.1f} | "
                     f"{h('alpha'):.3g} | {h('beta'):.3g} | {h('eta'):.3g} | {h('delta'):.3g} | {h('gamma'):.3g} | "
                     f"{h('xi'):.3g} |")
    lines += ["", "Figs. 9-10 (paper: histograms of topics per document and per word): quantiles 10 / 50 / 90 % "
              "of topics per document and of topics per word, means over the folds.", "",
              "| corpus | model | grid | topics/doc p10 / p50 / p90 | topics/word p10 / p50 / p90 |", "|---|---|---|---|---|"]
    for (c, m, s, z), recs in _ordered(groups, corpora):
        if "tpd_q" not in recs[0]:
            continue
        q = lambda k: " / ".join(f"{v:.0f}" for v in np.mean([r[k] for r in recs], axis=0))
        lines.append(f"| {c} | {LABELS[m]} | {_grid_label(recs[0]) or '—'} | {q('tpd_q')} | {q('tpw_q')} |")
    return lines + count_table(groups, corpora)


def count_table(groups: dict, corpora: list) -> list[str]:
    """Sec. 5.3's words and documents per topic next to ours, counted two ways: the masks b
    ("active") and the tokens of the last sample ("assigned": n_vk > 0, n_kd > 0; the paper's kind)."""
    rows = {k: recs for k, recs in groups.items() if "words_per_topic_assigned" in recs[0]}
    if not rows:
        return []
    lines = ["", "Sec. 5.3's counts (KOS: words per topic HDP-LDA 158, FTM 43, LIDA 47; documents per topic 9, 4, 4) "
             "next to ours, means over topics and folds, last sample: *active* counts the masks b (eq. 28-34; every "
             "word for LDA and FTM), *assigned* the words and documents holding the topic's tokens (n_vk > 0, "
             "n_kd > 0), the only kind the paper can report for FTM and HDP-LDA. The paper's LDA column is HDP-LDA.",
             "", "| corpus | model | grid | live topics | words/topic active | words/topic assigned | paper | "
             "docs/topic active | docs/topic assigned | paper | topics/doc active | topics/doc assigned |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for (c, m, s, z), recs in _ordered(rows, corpora):
        g = lambda k: np.mean([r[k] for r in recs])
        label = LABELS[m]
        paper = PAPER_COUNTS.get(c, {}).get("HDP-LDA" if m == "lda" else "FTM" if m.startswith("ftm") else label)
        pw, pd = (f"{paper[0]}", f"{paper[1]}") if paper else ("—", "—")
        lines.append(f"| {c} | {label} | {_grid_label(recs[0]) or '—'} | {g('topics'):.0f} | "
                     f"{g('words_per_topic'):.0f} | {g('words_per_topic_assigned'):.0f} | {pw} | "
                     f"{g('docs_per_topic'):.1f} | {g('docs_per_topic_assigned'):.1f} | {pd} | "
                     f"{g('topics_per_doc'):.1f} | {g('topics_per_doc_assigned'):.1f} |")
    return lines


NOTES_MARK = "<!-- notes: the text below this line is kept when the table above is regenerated -->"


def kept_notes(path: Path) -> list[str]:
    """The lines to end a regenerated results file with: ``NOTES_MARK`` and the hand-written notes
    after it in the existing ``path`` (none if the file or the mark is absent)."""
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    return ["", NOTES_MARK + old.split(NOTES_MARK, 1)[1].rstrip()] if NOTES_MARK in old else []


def write_markdown(path: Path, results, args, command: str, seconds: float) -> str:
    """Write the tables; hand-written notes after ``NOTES_MARK`` in an existing file are kept."""
    import platform as pf


    backends = sorted({r["backend"] for r in results})
    info = sorted({r["corpus_info"] for r in results})
    dropped = {r["corpus_name"]: r["dropped"] for r in results}
    lines = ["# LIDA Table 1: held-out log-perplexity", "", f"Command: `{command}`", "",
             f"Wall time: {seconds / 60:.1f} min on {os.cpu_count()} CPU cores ({pf.machine()}), JAX backend "
             f"{', '.join(backends)}, {args.jobs} worker(s).", ""]
    shown = {k: v for k, v in sorted(vars(args).items()) if k not in ("out", "progress")}
    lines += ["Settings: " + ", ".join(f"{k}={v}" for k, v in shown.items()), ""]
    lines += ["Corpora: " + "; ".join(info) + ". Test documents dropped (< 2 tokens): "
              + ", ".join(f"{c} {n}" for c, n in dropped.items()) + ".", ""]
    lines += tables(results, args) + kept_notes(path)
    text = "\n".join(lines) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return text


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", action="append",
                    help="kos, 20news or a corpus path (repeatable; default: kos and 20news)")
    ap.add_argument("--models", default=",".join(MODELS), help=f"comma-separated subset of {MODELS}")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--run-folds", type=int, default=None, help="run only the first so many folds (reduced run)")
    ap.add_argument("--sweeps", type=int, default=300)
    ap.add_argument("--burn-in", type=int, default=None, help="sweeps before averaging (default: 2/3 of --sweeps)")
    ap.add_argument("--hyper-start", type=int, default=None,
                    help="first sweep with hyperparameter sampling (default: 1/5 of --sweeps)")
    ap.add_argument("--test-sweeps", type=int, default=40, help="document-completion sweeps (half burn-in)")
    ap.add_argument("--k-max", type=int, default=200, help="initial topic slots of FTM/LIDA (grown as needed)")
    ap.add_argument("--init-topics", type=int, default=50, help="FTM/LIDA topics of the random start")
    ap.add_argument("--init", default="random", choices=["random", "ibp"],
                    help="FTM/LIDA start: random dense assignment or a draw of the IBP prior (η, δ below)")
    ap.add_argument("--eta", type=float, default=5.0, help="initial η of FTM/LIDA")
    ap.add_argument("--delta", type=float, default=1.0, help="initial δ of FTM and LIDA (FTM(δ=1) keeps 1)")
    ap.add_argument("--lda-topics", type=int, default=100)
    ap.add_argument("--sigma", type=_floats, default=[0.0], help="σ grid of FTM and LIDA, comma-separated")
    ap.add_argument("--zeta", type=_floats, default=[0.25], help="ζ grid of LIDA, comma-separated")
    ap.add_argument("--mode", default="parallel", choices=["parallel", "exact", "stale"])
    ap.add_argument("--mh-steps", type=int, default=None, help="MH steps per token (LDA; default: dense draw)")
    ap.add_argument("--batch-size", type=int, default=None,
                    help="tokens per block of the parallel sweep (default: 1/16 of the training tokens, <= 65536)")
    ap.add_argument("--news-docs", type=int, default=1000, help="20news: documents drawn")
    ap.add_argument("--news-words", type=int, default=1407, help="20news: most frequent words kept (0: all)")
    ap.add_argument("--news-stop-words", default="english", choices=["english", "none"],
                    help="20news: stop words removed (english) or kept (none)")
    ap.add_argument("--unseen", default="keep", choices=["keep", "drop"],
                    help="test tokens of words absent from the training folds: scored (keep) or left out (drop)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=1, help="worker processes for the (corpus, model, grid, fold) tasks")
    ap.add_argument("--platform", default="cpu", choices=["cpu", "gpu"])
    ap.add_argument("--progress", action="store_true")
    ap.add_argument("--quick", action="store_true", help="a few seconds on a synthetic corpus (smoke test)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    args.models = [m.strip() for m in args.models.split(",") if m.strip()]
    for m in args.models:
        if m not in MODELS:
            ap.error(f"unknown model {m!r}; choose from {MODELS}")
    if args.jobs < 1:
        ap.error("--jobs must be >= 1")
    command = "python experiments/lida_table1.py " + " ".join(
        shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    if args.quick:
        args.corpus = ["quick"]
        args.folds, args.sweeps, args.test_sweeps = 2, 20, 6
        args.hyper_start = 10 if args.hyper_start is None else args.hyper_start
        args.k_max, args.init_topics, args.lda_topics, args.batch_size = 12, 6, 8, 512
        out = Path(args.out) if args.out else ROOT / "experiments" / "results" / "lida_table1_quick.md"
    else:
        args.corpus = args.corpus or ["kos", "20news"]
        out = Path(args.out) if args.out else ROOT / "experiments" / "results" / "lida_table1.md"
    if args.folds < 2:
        ap.error("--folds must be >= 2")
    args.run_folds = args.folds if args.run_folds is None else min(args.run_folds, args.folds)
    args.burn_in = (2 * args.sweeps) // 3 if args.burn_in is None else args.burn_in
    args.hyper_start = args.sweeps // 5 if args.hyper_start is None else args.hyper_start
    configure_platform(args.platform, args.jobs)
    tasks = make_tasks(args)
    print(f"{len(tasks)} tasks, {args.jobs} worker(s), platform {args.platform}", flush=True)
    t_start = time.perf_counter()
    results = run_all(tasks, args.jobs, lambda s: print(s, flush=True))
    text = write_markdown(out, results, args, command, time.perf_counter() - t_start)
    print(text)
    return results


if __name__ == "__main__":
    main()
