"""LIDA Table 1 (Archambeau, Lakshminarayanan & Bouchard, sec. 5.3): held-out log-perplexity.

Rows: LDA (our baseline; not in the paper's table), FTM with δ = 1, σ = 0 (the two-parameter FTM of
Williamson et al.), the four-parameter FTM (δ sampled, σ fixed) and LIDA (σ, ζ fixed).  Columns: the
corpora, each as mean ± standard error of the log-perplexity over the folds.  The paper reports FTM
and LIDA "for the optimal hyperparameters" (sec. 5.3): with ``--sigma`` / ``--zeta`` lists the script
runs every grid point, reports all of them, and puts the grid point with the lowest mean in the main
table (chosen on the test folds, as the paper seems to have done, so slightly optimistic).
``--models ...,hdp`` adds the paper's own baseline, HDP-LDA: tomotopy's ``HDPModel`` (CRF sampler,
one worker; a comparison system imported only here) with the paper's settings (DP masses α = γ = 1
fixed, topic-word Dirichlet 0.1; ``--hdp-*``), trained on the same folds for the same sweeps, Φ
averaged after burn-in as in (47) over the live topics plus the base measure's 1/V for a new topic,
and scored by :func:`completion_logperp`, a numpy document-completion sampler written apart from
topicjax's (prior α τ of the test documents, τ from :func:`hdp_global_weights`).

Hypotheses about the remaining KOS gap to the paper (issue 44): ``--extra-test-sweeps N`` scores the
same fit again with N document-completion sweeps; ``--protocol joint`` puts the observed halves of
the test documents into the training chain and takes their θ (46) from it, averaged over the same
sweeps as Φ (47) (one reading of sec. 5.1's "samples after burn-in").

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
    python experiments/lida_table1.py --corpus kos --models hdp --sweeps 400     # needs tomotopy
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
MODELS = ["lda", "ftm1", "ftm", "lida", "hdp"]
LABELS = {"lda": "LDA", "ftm1": "FTM (δ=1, σ=0)", "ftm": "FTM", "lida": "LIDA", "hdp": "HDP-LDA"}
# rough relative cost per token and sweep (LIDA's word step visits V x K_max entries); used only to
# start the longest tasks first
COST = {"lda": 1.0, "ftm1": 1.6, "ftm": 1.6, "lida": 4.0, "hdp": 1.5}


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


def append_docs(a, b):
    """The documents of ``a`` followed by those of ``b`` (same vocabulary) as one corpus."""
    from topicjax.data.corpus import Corpus

    a.check_same_vocab(b, "observed halves")
    return Corpus.from_entries(np.concatenate([a.doc_ids, b.doc_ids + a.n_docs]),
                               np.concatenate([a.word_ids, b.word_ids]), np.concatenate([a.counts, b.counts]),
                               vocab=a.vocab, n_docs=a.n_docs + b.n_docs)


def run_task(task: dict) -> dict:
    """Train on all folds but ``task["fold"]``, score the held-out halves of that fold."""
    if task["model"] == "hdp":
        return run_hdp_task(task)
    s = task["settings"]
    cname, corpus, folds = corpus_and_folds(task["corpus"], s)
    f = task["fold"]
    train, observed, held, dropped = fold_split(corpus, folds, f, s["seed"], s["unseen"])
    t0 = time.perf_counter()
    joint = s.get("protocol", "foldin") == "joint"
    model = make_model(task, s, seed=s["seed"] + 100 * f).fit(append_docs(train, observed) if joint else train)
    t_fit = time.perf_counter() - t0
    if joint:
        # θ of the test documents from the training chain itself: eq. (46) averaged over the same
        # sweeps after burn-in as Φ (47)
        theta = np.asarray(model.theta_)[:, train.n_docs:]
        p = np.einsum("nk,kn->n", np.asarray(model.phi_)[held.word_ids], theta[:, held.doc_ids])
        ll, n = float(np.sum(held.counts * np.log(p))), held.n_tokens
    else:
        ll, n = model.log_predictive(observed, held)
    variants = {}
    for n_sw in s.get("extra_test_sweeps") or []:  # the same Φ, a longer document completion
        if joint:
            break
        model.transform_iter = n_sw
        ll_v, n_v = model.log_predictive(observed, held)
        variants[f"{n_sw} test sweeps"] = -ll_v / n_v
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
        "dropped": dropped, "train_tokens": int(train.n_tokens), "backend": jax.default_backend(), "variants": variants,
        "corpus_info": f"{cname}: {corpus.n_docs} documents, {corpus.n_words} words, {corpus.n_tokens} tokens",
    }


def make_tasks(args) -> list[dict]:
    settings = {k: getattr(args, k) for k in (
        "folds", "seed", "sweeps", "burn_in", "hyper_start", "test_sweeps", "mode", "mh_steps", "batch_size",
        "k_max", "init_topics", "init", "eta", "delta", "lda_topics", "news_docs", "news_words", "news_stop_words", "unseen", "progress")}
    # the settings added for issue 44 (HDP-LDA, estimator hypotheses), with their command-line defaults
    settings.update({k: getattr(args, k, v) for k, v in OPTIONAL_SETTINGS.items()})
    tasks = []
    for spec in args.corpus:
        for m in args.models:
            grid = [(None, None)]
            if m == "ftm":
                grid = [(s, None) for s in args.sigma]
            elif m == "lida":
                grid = [(s, z) for s in args.sigma for z in args.zeta]
            for sigma, zeta in grid:
                for f in range(getattr(args, "first_fold", 0), args.run_folds):
                    tasks.append(dict(corpus=spec, model=m, sigma=sigma, zeta=zeta, fold=f, settings=settings))
    # longest first (KOS-sized corpora and LIDA), so that N workers finish together
    return sorted(tasks, key=lambda t: -COST[t["model"]] * (2 if t["corpus"] == "kos" else 1))


# ---------------------------------------------------------------------------------------- HDP-LDA
# The paper's baseline (sec. 5.3: Teh's Chinese-restaurant-franchise sampler, "the mass parameters
# of the DP were set to 1, while the mass parameter of the Dirichlet prior on topic distribution
# was set to 0.10"), run with tomotopy's ``HDPModel`` (also a CRF sampler).  tomotopy is a
# comparison system only: imported here, never by topicjax.  Its Φ and the test documents' θ are
# formed and scored below with numpy, independently of topicjax's own evaluation code.
OPTIONAL_SETTINGS = {"protocol": "foldin", "extra_test_sweeps": [], "hdp_alpha": 1.0, "hdp_gamma": 1.0, "hdp_eta": 0.1,
                     "hdp_initial_k": 2, "hdp_optim": 0}


def _tomotopy_words(corpus) -> list[list[str]]:
    """Each document as tomotopy wants it: one string per token (``"w<id>"`` of our word ids, so
    that tomotopy's vocabulary maps back to ours whatever order it keeps)."""
    off = corpus.doc_offsets
    names = np.array([f"w{v}" for v in range(corpus.n_words)], dtype=object)
    return [names[np.repeat(corpus.word_ids[off[d]:off[d + 1]], corpus.counts[off[d]:off[d + 1]])].tolist()
            for d in range(corpus.n_docs)]


def expected_tables(n_dk: np.ndarray, prior: np.ndarray) -> np.ndarray:
    """E[m_dk | n_dk] of the Chinese restaurant with concentration ``prior[k]`` (= α τ_k):
    Σ_{j < n_dk} a / (a + j) (Antoniak), summed over the documents -> (K,).  A hand loop over j,
    so that it is obviously the sum it claims to be; n_dk of a fold is at most a few hundred."""
    n_dk = np.asarray(n_dk, np.int64)
    prior = np.asarray(prior, np.float64)
    out = np.zeros(n_dk.shape[1])
    for j in range(int(n_dk.max(initial=0))):
        out += np.where(n_dk > j, prior[None, :] / (prior[None, :] + j), 0.0).sum(0)
    return out


def hdp_global_weights(n_dk: np.ndarray, alpha: float, gamma: float, n_iter: int = 100) -> np.ndarray:
    """τ = (τ_1..τ_K, τ_new) of the top-level DP given a sample's document-topic counts ``n_dk``
    (D x K, live topics only): the posterior mean of G_0 | m ~ Dir(m_1, .., m_K, γ) with the table
    counts m_k replaced by their expectation given n_dk and α τ_k (:func:`expected_tables`),
    iterated to a fixed point (tomotopy does not expose the per-topic table counts).  Sums to one."""
    K = n_dk.shape[1]
    tau = np.full(K + 1, 1.0 / (K + 1))
    for _ in range(n_iter):
        m = expected_tables(n_dk, alpha * tau[:K])
        new = np.append(m, gamma) / (m.sum() + gamma)
        if np.max(np.abs(new - tau)) < 1e-10:
            return new
        tau = new
    return tau


def fit_hdp(train, sweeps: int, burn_in: int, seed: int, alpha: float, gamma: float, eta: float,
            initial_k: int = 2, optim_interval: int = 0, log=None) -> dict:
    """tomotopy ``HDPModel`` on ``train`` for ``sweeps`` sweeps (1 worker: the sequential sampler).

    Returns ``phi`` (V x K, the live topics of the last sample): φ_vk = (n_vk + η) / (n_k + V η)
    over the whole vocabulary of ``train`` (V = ``train.n_words``; words no training document uses
    get η / (n_k + V η)), averaged like eq. (47) over the sweeps after ``burn_in`` in which the
    topic's slot was live without a break up to the last sweep (a slot that dies restarts its sum);
    ``tau`` (K + 1,) from :func:`hdp_global_weights` on the last sample's n_dk, the last entry the
    new-topic mass; ``alpha``, ``gamma`` (tomotopy's final values: the given ones unless
    ``optim_interval`` > 0 lets tomotopy re-estimate them); the last sample's token counts
    ``n_vk`` (V x K) and ``n_kd`` (K x D); seconds per sweep; tomotopy's total table count.
    Raises ValueError if tomotopy's vocabulary or token counts do not map back onto ``train``."""
    import tomotopy as tp

    if not 0 <= burn_in < sweeps:
        raise ValueError(f"burn_in must be in [0, sweeps={sweeps}), got {burn_in}")
    V, D = train.n_words, train.n_docs
    mdl = tp.HDPModel(tw=tp.TermWeight.ONE, initial_k=initial_k, alpha=alpha, eta=eta, gamma=gamma, seed=seed)
    mdl.optim_interval = optim_interval
    for words in _tomotopy_words(train):
        mdl.add_doc(words)
    mdl.train(0, workers=1)
    ours = np.array([int(w[1:]) for w in mdl.used_vocabs], np.int64)  # tomotopy word id -> ours
    docs = list(mdl.docs)
    word = np.concatenate([ours[np.asarray(d.words, np.int64)] for d in docs])
    doc = np.repeat(np.arange(D), [len(d.words) for d in docs])
    if len(docs) != D or not np.array_equal(np.bincount(word, minlength=V), train.word_counts):
        raise ValueError("tomotopy's documents do not map back onto the training corpus (tokens per word differ)")
    phi_sum, n_avg = np.zeros((V, 0)), np.zeros(0, np.int64)
    secs = []
    for it in range(sweeps):
        t0 = time.perf_counter()
        mdl.train(1, workers=1)
        secs.append(time.perf_counter() - t0)
        if it < burn_in:
            continue
        z = np.concatenate([np.asarray(d.topics, np.int64) for d in docs])
        K = mdl.k
        if phi_sum.shape[1] < K:  # tomotopy added slots
            phi_sum = np.pad(phi_sum, ((0, 0), (0, K - phi_sum.shape[1])))
            n_avg = np.pad(n_avg, (0, K - n_avg.size))
        n_vk = np.bincount(word * K + z, minlength=V * K).reshape(V, K)
        n_k = n_vk.sum(0)
        live = n_k > 0
        phi_sum[:, :K] = np.where(live[None, :], phi_sum[:, :K] + (n_vk + eta) / (n_k + V * eta), 0.0)
        phi_sum[:, K:] = 0.0
        n_avg[:K] = np.where(live, n_avg[:K] + 1, 0)
        n_avg[K:] = 0
        if log and (it + 1) % 50 == 0:
            log(f"  HDP sweep {it + 1}: {int(live.sum())} live topics")
    K = mdl.k
    n_kd = np.zeros((K, D), np.int64)
    np.add.at(n_kd, (z, doc), 1)
    slots = np.flatnonzero(n_kd.sum(1) > 0)
    if not np.array_equal(n_kd.sum(1)[slots], np.asarray(mdl.get_count_by_topics(), np.int64)[slots]):
        raise ValueError("tomotopy's topic sizes differ from the counts read from its documents")
    a, g = float(np.mean(mdl.alpha)), float(mdl.gamma)
    return {"phi": phi_sum[:, slots] / n_avg[slots], "tau": hdp_global_weights(n_kd[slots].T, a, g),
            "alpha": a, "gamma": g, "eta": float(mdl.eta), "n_vk": n_vk[:, slots], "n_kd": n_kd[slots],
            "secs": secs, "tables": int(mdl.num_tables), "k_slots": int(K)}


def completion_logperp(phi: np.ndarray, prior: np.ndarray, observed, held, n_sweeps: int, burn_in: int,
                       seed: int) -> tuple[float, int]:
    """Document completion (eq. 44-46) with Φ fixed, written for the HDP-LDA row apart from
    topicjax's scorer: the topics of each test document's ``observed`` tokens are Gibbs-sampled
    (exact sequential sweeps, p(z = k) ∝ (n_dk + prior_k) φ_wk, documents independent given Φ),
    θ_dk = (n_dk + prior_k) / (N_d + Σ prior) is averaged over the sweeps after ``burn_in``, and the
    ``held`` tokens are scored: returns (−Σ ln Σ_k φ_wk θ_dk / N_*, N_*).

    ``phi``: V x K' (columns sum to one; for HDP-LDA the live topics and, last, the base measure's
    mean 1/V for a new topic); ``prior``: (K',) the test documents' Dirichlet parameters (HDP: α τ).
    Raises ValueError on mismatched shapes or a held-out word of probability zero."""
    phi = np.asarray(phi, np.float64)
    prior = np.asarray(prior, np.float64)
    if phi.ndim != 2 or prior.shape != (phi.shape[1],) or np.any(prior <= 0):
        raise ValueError(f"prior must be positive with one entry per column of phi {phi.shape}, got {prior.shape}")
    if observed.n_docs != held.n_docs or observed.n_words != phi.shape[0] or held.n_words != phi.shape[0]:
        raise ValueError("observed and held must have the same documents and phi's vocabulary")
    if not 0 <= burn_in < n_sweeps:
        raise ValueError(f"burn_in must be in [0, n_sweeps={n_sweeps}), got {burn_in}")
    rng = np.random.default_rng(seed)
    D, K = observed.n_docs, phi.shape[1]
    lengths = observed.doc_lengths.astype(np.int64)
    order = np.argsort(-lengths, kind="stable")  # longest first: position j is a prefix of rows
    L = int(lengths.max(initial=0))
    tok = np.full((D, L), -1, np.int64)
    off = observed.doc_offsets
    for r, d in enumerate(order):
        w = np.repeat(observed.word_ids[off[d]:off[d + 1]], observed.counts[off[d]:off[d + 1]])
        tok[r, :w.size] = w
    rows_at = [int(np.sum(lengths > j)) for j in range(L)]
    z = np.zeros((D, L), np.int64)
    n_dk = np.zeros((D, K), np.int64)
    for j in range(L):  # start: z from p(k | w) ∝ prior_k φ_wk
        r = rows_at[j]
        p = prior[None, :] * phi[tok[:r, j]]
        z[:r, j] = _draw(p, rng)
        np.add.at(n_dk, (np.arange(r), z[:r, j]), 1)
    theta_sum = np.zeros((D, K))
    n_d = lengths[order][:, None].astype(np.float64)
    for s in range(n_sweeps):
        for j in range(L):
            r = rows_at[j]
            rows = np.arange(r)
            n_dk[rows, z[:r, j]] -= 1
            z[:r, j] = _draw((n_dk[:r] + prior[None, :]) * phi[tok[:r, j]], rng)
            n_dk[rows, z[:r, j]] += 1
        if s >= burn_in:
            theta_sum += (n_dk + prior[None, :]) / (n_d + prior.sum())
    theta = np.empty((D, K))
    theta[order] = theta_sum / (n_sweeps - burn_in)
    p = np.einsum("nk,nk->n", phi[held.word_ids], theta[held.doc_ids])
    if np.any(p <= 0):
        raise ValueError("a held-out word has probability zero under phi")
    n = int(held.counts.sum())
    return float(-np.sum(held.counts * np.log(p)) / n), n


def _draw(p: np.ndarray, rng) -> np.ndarray:
    """One categorical draw per row of the unnormalised probabilities ``p``."""
    c = np.cumsum(p, axis=1)
    u = rng.random(p.shape[0]) * c[:, -1]
    return np.minimum((c < u[:, None]).sum(1), p.shape[1] - 1)


def run_hdp_task(task: dict) -> dict:
    """The HDP-LDA row: tomotopy trained on the fold's training documents, scored by
    :func:`completion_logperp` with Φ = [live topics, 1/V] and the prior α τ."""
    s = task["settings"]
    cname, corpus, folds = corpus_and_folds(task["corpus"], s)
    f = task["fold"]
    train, observed, held, dropped = fold_split(corpus, folds, f, s["seed"], s["unseen"])
    t0 = time.perf_counter()
    fit = fit_hdp(train, s["sweeps"], s["burn_in"], seed=s["seed"] + 100 * f, alpha=s["hdp_alpha"],
                  gamma=s["hdp_gamma"], eta=s["hdp_eta"], initial_k=s["hdp_initial_k"], optim_interval=s["hdp_optim"])
    t_fit = time.perf_counter() - t0
    V = train.n_words
    phi = np.hstack([fit["phi"], np.full((V, 1), 1.0 / V)])
    n_sw = max(2, s["test_sweeps"])
    logperp, _ = completion_logperp(phi, fit["alpha"] * fit["tau"], observed, held, n_sw, n_sw // 2,
                                    seed=s["seed"] + 100 * f + 7)
    K = fit["phi"].shape[1]
    wpt = (fit["n_vk"] > 0).sum(0)  # words holding the topic's tokens
    dpt = (fit["n_kd"] > 0).sum(1)
    tpd = (fit["n_kd"] > 0).sum(0)
    tpw = (fit["n_vk"] > 0).sum(1)[train.word_counts > 0]
    secs = fit["secs"]
    nan = float("nan")
    return {
        **{k: task[k] for k in ("corpus", "model", "sigma", "zeta", "fold")}, "corpus_name": cname,
        "logperp": logperp, "topics": K, "K_max": fit["k_slots"], "fit_s": t_fit,
        "total_s": time.perf_counter() - t0, "sweep_s": float(np.median(secs[1:] or secs)),
        "first_sweep_s": float(secs[0]),
        # no masks: every topic has weight in every document and every word (the LDA convention)
        "topics_per_doc": float(K), "words_per_topic": float(V), "docs_per_topic": float(train.n_docs),
        "hyper": {"alpha": fit["alpha"], "beta": fit["eta"], "eta": nan, "delta": nan, "gamma": nan, "xi": nan},
        "hdp": {"gamma": fit["gamma"], "tau_new": float(fit["tau"][-1]), "tables": fit["tables"],
                "tables_expected": float(expected_tables(fit["n_kd"].T, fit["alpha"] * fit["tau"][:K]).sum())},
        "topics_per_doc_assigned": float(tpd.mean()), "words_per_topic_assigned": float(wpt.mean()),
        "docs_per_topic_assigned": float(dpt.mean()),
        "tpd_q": [float(K)] * 3, "tpw_q": [float(K)] * 3,
        "tpd_assigned_q": [float(q) for q in np.percentile(tpd, [10, 50, 90])],
        "tpw_assigned_q": [float(q) for q in np.percentile(tpw, [10, 50, 90])],
        "dropped": dropped, "train_tokens": int(train.n_tokens), "backend": "tomotopy",
        "corpus_info": f"{cname}: {corpus.n_docs} documents, {corpus.n_words} words, {corpus.n_tokens} tokens",
    }


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


def run_all(tasks: list[dict], jobs: int, log, on_result=None):
    """Run ``tasks`` (in ``jobs`` worker processes if > 1); ``on_result(results so far)`` after each
    finished task (the script rewrites its table then, so an interrupted run keeps its folds)."""
    results = []
    t0 = time.perf_counter()

    def report(r):
        results.append(r)
        if on_result is not None:
            on_result(results)
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
    return lines + count_table(groups, corpora) + variant_table(groups, corpora)


def variant_table(groups: dict, corpora: list) -> list[str]:
    """The estimator variants (``--extra-test-sweeps``) and the HDP-LDA details, when run."""
    lines = []
    rows = [(k, recs) for k, recs in _ordered(groups, corpora) if recs[0].get("variants")]
    if rows:
        names = list(dict.fromkeys(v for _, recs in rows for v in recs[0]["variants"]))
        lines += ["", "Document completion with more sweeps (the same fits; Φ unchanged, θ (46) averaged over "
                  "the second half of the sweeps), log-perplexity:", "",
                  "| corpus | model | grid | default | " + " | ".join(names) + " |", "|---|---|---|---|" + "---|" * len(names)]
        for (c, m, s, z), recs in rows:
            cells = [_fmt([r["variants"][v] for r in recs]) for v in names]
            lines.append(f"| {c} | {LABELS[m]} | {_grid_label(recs[0]) or '—'} | {_fmt([r['logperp'] for r in recs])} | "
                         + " | ".join(cells) + " |")
    hdp = [(k, recs) for k, recs in _ordered(groups, corpora) if k[1] == "hdp"]
    if hdp:
        lines += ["", "HDP-LDA (tomotopy `HDPModel`, CRF sampler, 1 worker): final α, γ, η; new-topic weight τ_new of "
                  "the test documents' prior α τ; tomotopy's table count against the Antoniak expectation used for τ; "
                  "topics per document and per word holding tokens (p10 / p50 / p90).", "",
                  "| corpus | live topics | slots | α | γ | η | τ_new | tables (tomotopy) | tables (expected) | "
                  "topics/doc assigned | topics/word assigned |", "|---|---|---|---|---|---|---|---|---|---|---|"]
        for (c, m, s, z), recs in hdp:
            g = lambda k: np.mean([r[k] for r in recs])
            h = lambda k: np.mean([r["hdp"][k] for r in recs])
            q = lambda k: " / ".join(f"{v:.0f}" for v in np.mean([r[k] for r in recs], axis=0))
            lines.append(f"| {c} | {g('topics'):.0f} | {g('K_max'):.0f} | {np.mean([r['hyper']['alpha'] for r in recs]):.3g} | "
                         f"{h('gamma'):.3g} | {np.mean([r['hyper']['beta'] for r in recs]):.3g} | {h('tau_new'):.2g} | "
                         f"{h('tables'):.0f} | {h('tables_expected'):.0f} | {q('tpd_assigned_q')} | {q('tpw_assigned_q')} |")
    return lines


def count_table(groups: dict, corpora: list) -> list[str]:
    """Sec. 5.3's words and documents per topic next to ours, counted two ways: the masks b
    ("active") and the tokens of the last sample ("assigned": n_vk > 0, n_kd > 0; the paper's kind)."""
    rows = {k: recs for k, recs in groups.items() if "words_per_topic_assigned" in recs[0]}
    if not rows:
        return []
    lines = ["", "Sec. 5.3's counts (KOS: words per topic HDP-LDA 158, FTM 43, LIDA 47; documents per topic 9, 4, 4) "
             "next to ours, means over topics and folds, last sample: *active* counts the masks b (eq. 28-34; every "
             "word for LDA and FTM), *assigned* the words and documents holding the topic's tokens (n_vk > 0, "
             "n_kd > 0), the only kind the paper can report for FTM and HDP-LDA (whose *active* columns, like LDA's, "
             "count every word, document and live topic: no masks).",
             "", "| corpus | model | grid | live topics | words/topic active | words/topic assigned | paper | "
             "docs/topic active | docs/topic assigned | paper | topics/doc active | topics/doc assigned |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for (c, m, s, z), recs in _ordered(rows, corpora):
        g = lambda k: np.mean([r[k] for r in recs])
        label = LABELS[m]
        paper = PAPER_COUNTS.get(c, {}).get("FTM" if m.startswith("ftm") else label)
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


_LOAD = {"start": "n/a"}


def _load() -> str:
    try:
        return " / ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def write_markdown(path: Path, results, args, command: str, seconds: float) -> str:
    """Write the tables; hand-written notes after ``NOTES_MARK`` in an existing file are kept."""
    import platform as pf


    backends = sorted({r["backend"] for r in results})
    info = sorted({r["corpus_info"] for r in results})
    dropped = {r["corpus_name"]: r["dropped"] for r in results}
    lines = ["# LIDA Table 1: held-out log-perplexity", "", f"Command: `{command}`", "",
             f"Wall time: {seconds / 60:.1f} min on {os.cpu_count()} CPU cores ({pf.machine()}), JAX backend "
             f"{', '.join(backends)}, {args.jobs} worker(s). Load average (1, 5, 15 min) at the start "
             f"{_LOAD['start']}, at this writing {_load()} (a shared machine: the times are not timings).", ""]
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
    ap.add_argument("--models", default="lda,ftm1,ftm,lida",
                    help=f"comma-separated subset of {MODELS} (hdp: tomotopy's HDPModel, comparison only)")
    ap.add_argument("--folds", type=int, default=None, help="folds (default 5; --quick: 2)")
    ap.add_argument("--run-folds", type=int, default=None, help="run only the first so many folds (reduced run)")
    ap.add_argument("--first-fold", type=int, default=0,
                    help="skip the folds before this one (to complete a run; every fold is seeded by its index)")
    ap.add_argument("--sweeps", type=int, default=None, help="sweeps of a fit (default 300; --quick: 20)")
    ap.add_argument("--burn-in", type=int, default=None, help="sweeps before averaging (default: 2/3 of --sweeps)")
    ap.add_argument("--hyper-start", type=int, default=None,
                    help="first sweep with hyperparameter sampling (default: 1/5 of --sweeps)")
    ap.add_argument("--test-sweeps", type=int, default=None,
                    help="document-completion sweeps (half burn-in; default 40, --quick: 6)")
    ap.add_argument("--k-max", type=int, default=None,
                    help="initial topic slots of FTM/LIDA (grown as needed; default 200, --quick: 12)")
    ap.add_argument("--init-topics", type=int, default=None,
                    help="FTM/LIDA topics of the random start (default 50, --quick: 6)")
    ap.add_argument("--init", default="random", choices=["random", "ibp"],
                    help="FTM/LIDA start: random dense assignment or a draw of the IBP prior (η, δ below)")
    ap.add_argument("--eta", type=float, default=5.0, help="initial η of FTM/LIDA")
    ap.add_argument("--delta", type=float, default=1.0, help="initial δ of FTM and LIDA (FTM(δ=1) keeps 1)")
    ap.add_argument("--lda-topics", type=int, default=None, help="LDA's topics (default 100, --quick: 8)")
    ap.add_argument("--sigma", type=_floats, default=[0.0], help="σ grid of FTM and LIDA, comma-separated")
    ap.add_argument("--zeta", type=_floats, default=[0.25], help="ζ grid of LIDA, comma-separated")
    ap.add_argument("--mode", default="parallel", choices=["parallel", "exact", "stale"])
    ap.add_argument("--mh-steps", type=int, default=None, help="MH steps per token (LDA; default: dense draw)")
    ap.add_argument("--batch-size", type=int, default=None,
                    help="tokens per block of the parallel sweep (default: 1/16 of the training tokens, <= 65536; "
                         "--quick: 512)")
    ap.add_argument("--news-docs", type=int, default=1000, help="20news: documents drawn")
    ap.add_argument("--news-words", type=int, default=1407, help="20news: most frequent words kept (0: all)")
    ap.add_argument("--news-stop-words", default="english", choices=["english", "none"],
                    help="20news: stop words removed (english) or kept (none)")
    ap.add_argument("--unseen", default="keep", choices=["keep", "drop"],
                    help="test tokens of words absent from the training folds: scored (keep) or left out (drop)")
    ap.add_argument("--protocol", default="foldin", choices=["foldin", "joint"],
                    help="foldin: test documents' topics sampled after training with Φ fixed (sec. 5.1); joint: "
                         "their observed halves join the training chain and θ (46) is its own average (hypothesis)")
    ap.add_argument("--extra-test-sweeps", type=lambda t: [int(x) for x in t.split(",") if x.strip()], default=[],
                    help="also score with so many document-completion sweeps (same fit; LDA/FTM/LIDA, foldin)")
    ap.add_argument("--hdp-alpha", type=float, default=1.0, help="HDP-LDA: document-level DP mass (paper: 1)")
    ap.add_argument("--hdp-gamma", type=float, default=1.0, help="HDP-LDA: top-level DP mass (paper: 1)")
    ap.add_argument("--hdp-eta", type=float, default=0.1, help="HDP-LDA: topic-word Dirichlet parameter (paper: 0.10)")
    ap.add_argument("--hdp-initial-k", type=int, default=2, help="HDP-LDA: tomotopy's initial topics (its default 2)")
    ap.add_argument("--hdp-optim", type=int, default=0,
                    help="HDP-LDA: tomotopy's optim_interval for α, γ (0: fixed at the paper's values; tomotopy's default 10)")
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
    # --quick's sizes, and the full run's; a size given on the command line is kept in both
    sizes = (dict(folds=2, sweeps=20, test_sweeps=6, hyper_start=10, k_max=12, init_topics=6, lda_topics=8,
                  batch_size=512) if args.quick else dict(folds=5, sweeps=300, test_sweeps=40, k_max=200,
                                                          init_topics=50, lda_topics=100))
    for name, value in sizes.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.quick:
        args.corpus = ["quick"]
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
    _LOAD["start"] = _load()
    partial = lambda res: write_markdown(out, res, args, command + f"  [partial: {len(res)} of {len(tasks)} tasks]",
                                         time.perf_counter() - t_start)
    results = run_all(tasks, args.jobs, lambda s: print(s, flush=True), on_result=partial)
    text = write_markdown(out, results, args, command, time.perf_counter() - t_start)
    print(text)
    return results


if __name__ == "__main__":
    main()
