"""Quality measures shared by every model of the package.

All functions take plain arrays in the papers' orientation (Φ is W x T, Θ is T x D) and a
:class:`~topicjax.data.corpus.Corpus`, run on the host in float64 (totals of millions of log-terms are
exact enough to compare models), and process the non-zeros in chunks so that no D x W or large
nnz x T array is built.

* likelihood: :func:`log_likelihood` (ARTM eq. 4), :func:`perplexity` (ARTM eq. 56);
  held-out evaluation by document completion, :func:`heldout_log_likelihood` and
  :func:`heldout_perplexity` (ARTM sec. 5: Θ estimated on one part of each test document, the
  other part scored; PTM eq. 32 is the same computation with the disjoint-words split; LIDA
  eq. 44 is :func:`perplexity` evaluated at posterior-mean Φ, Θ);
* coherence from document co-occurrence: :func:`coherence` with ``measure="pmi"`` (ARTM eq. 58),
  ``"npmi"`` or ``"umass"`` (PTM eq. 33), over the top-k words or over each topic's kernel
  (document co-occurrence measures; the sliding-window reference measures C_V, C_NPMI, C_UCI and
  gensim's mean UMass are :func:`topicjax.evaluation.coherence.reference_coherence`);
* structure: :func:`sparsity`, :func:`background_ratio` (ARTM eq. 57), :func:`kernel_scores`
  (ARTM sec. 5: kernel size, purity, contrast with δ = 0.25), :func:`top_words`;
* labels: :func:`class_consistency` (PTM eq. 34-35);
* recovery of known topics: :func:`hellinger` (ARTM eq. 12) and :func:`topic_recovery`.

>>> import numpy as np
>>> from topicjax import Corpus, metrics
>>> c = Corpus.from_dense([[2, 0], [1, 1]], vocab=["a", "b"])
>>> phi = np.array([[1.0, 0.0], [0.0, 1.0]]); theta = np.array([[1.0, 0.5], [0.0, 0.5]])
>>> round(metrics.perplexity(phi, theta, c), 6)  # exp(-(2 log 1 + log .5 + log .5) / 4)
1.414214
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from topicjax.core import foldin, layout
from topicjax.core.validation import check_int
from topicjax.data.corpus import Corpus

__all__ = [
    "log_likelihood",
    "perplexity",
    "fold_in",
    "heldout_log_likelihood",
    "heldout_perplexity",
    "cooccurrence",
    "coherence",
    "sparsity",
    "background_ratio",
    "topic_posterior",
    "kernel_scores",
    "class_consistency",
    "top_words",
    "hellinger",
    "topic_recovery",
]

_CHUNK = 1 << 16


def _matrix(x, name: str, where: str, order: str) -> np.ndarray:
    """``x`` as a float64 array, or a TypeError naming the argument (arguments in the wrong order:
    a corpus or a vocabulary where a matrix goes)."""
    if isinstance(x, Corpus):
        raise TypeError(f"{where}: {name} is a Corpus, expected a matrix; the arguments are ({order})")
    a = np.asarray(x)
    if a.dtype.kind not in "biuf":
        raise TypeError(f"{where}: {name} must be a matrix of numbers, got {type(x).__name__} of dtype {a.dtype}; "
                        f"the arguments are ({order})")
    return a.astype(np.float64, copy=False)


def _corpus(x, name: str, where: str, order: str) -> Corpus:
    if not isinstance(x, Corpus):
        raise TypeError(f"{where}: {name} must be a Corpus, got {type(x).__name__}; the arguments are ({order})")
    return x


def _check_model(phi, theta, corpus: Corpus, where: str = "log_likelihood"):
    order = "phi, theta, corpus"
    _matrix(phi, "phi", where, order), _matrix(theta, "theta", where, order)  # corpus: any corpus-like, checked by use
    phi = np.asarray(phi, np.float64)
    theta = np.asarray(theta, np.float64)
    if phi.ndim != 2 or theta.ndim != 2 or phi.shape[1] != theta.shape[0]:
        raise ValueError(f"phi (W x T) and theta (T x D) do not fit: shapes {phi.shape} and {theta.shape}")
    if phi.shape[0] != corpus.n_words:
        raise ValueError(f"phi has {phi.shape[0]} words but the corpus has {corpus.n_words}")
    if theta.shape[1] != corpus.n_docs:
        raise ValueError(f"theta has {theta.shape[1]} documents but the corpus has {corpus.n_docs}")
    if not (np.all(np.isfinite(phi)) and np.all(np.isfinite(theta))):
        raise ValueError("phi or theta contains non-finite values")
    return phi, theta


def _pwd(phi, theta, corpus: Corpus, start: int, stop: int) -> np.ndarray:
    w, d = corpus.word_ids[start:stop], corpus.doc_ids[start:stop]
    return np.einsum("nt,nt->n", phi[w], theta.T[d])


def log_likelihood(phi, theta, corpus: Corpus, *, per_document: bool = False):
    """L = Σ_d Σ_w n_dw log Σ_t φ_wt θ_td (ARTM eq. 4), in float64.

    A token whose probability under the model is exactly zero makes L = -inf (reported, not
    clipped): perplexity is then infinite, which is the truth about such a model.  With
    ``per_document`` the ``(n_docs,)`` vector of document log-likelihoods is returned.
    """
    phi, theta = _check_model(phi, theta, corpus)
    terms = np.empty(corpus.nnz)
    for s in range(0, corpus.nnz, _CHUNK):
        e = min(s + _CHUNK, corpus.nnz)
        with np.errstate(divide="ignore"):
            terms[s:e] = corpus.counts[s:e] * np.log(_pwd(phi, theta, corpus, s, e))
    if per_document:
        return np.bincount(corpus.doc_ids, weights=terms, minlength=corpus.n_docs)
    return float(np.sum(terms))


def perplexity(phi, theta, corpus: Corpus) -> float:
    """Perplexity exp(-L / n) (ARTM eq. 56); n is the number of tokens of ``corpus``."""
    return float(np.exp(-log_likelihood(phi, theta, corpus) / corpus.n_tokens))


def fold_in(phi, observed: Corpus, *, n_iter: int = 30) -> np.ndarray:
    """Θ (T x D) of the documents of ``observed`` with Φ fixed: EM on Θ only (ARTM eq. 16)."""
    phi = _matrix(phi, "phi", "fold_in", "phi, observed")
    observed = _corpus(observed, "observed", "fold_in", "phi, observed")
    if phi.shape[0] != observed.n_words:
        raise ValueError(f"phi has {phi.shape[0]} words but the corpus has {observed.n_words}")
    data = layout.prepare(observed, with_doc=False, word_mirror=False)  # Θ only: no ∂L/∂Φ to reduce by word
    return np.asarray(foldin.fold_in(np.asarray(phi, np.float32), data, observed.n_docs, n_iter=n_iter))


def _check_pair(observed: Corpus, heldout: Corpus):
    observed.check_same_vocab(heldout, "held-out part")
    if observed.n_docs != heldout.n_docs:
        raise ValueError(
            f"observed and held-out parts must hold the same documents ({observed.n_docs} vs {heldout.n_docs})"
        )


def _drop_unseen(phi, heldout: Corpus) -> Corpus:
    """``heldout`` without the tokens of words no topic can produce (a zero row of Φ: words the
    training part never saw).  ARTM sec. 5: "terms in the second halves that did not appear in D
    are ignored"."""
    unseen = np.asarray(phi).sum(1) <= 0
    if not unseen.any():
        return heldout
    keep = ~unseen[heldout.word_ids]
    counts = np.where(keep, heldout.counts, 0)
    return Corpus.from_entries(heldout.doc_ids, heldout.word_ids, counts, vocab=heldout.vocab,
                               n_docs=heldout.n_docs, empty_docs="drop")


def heldout_log_likelihood(phi, observed: Corpus, heldout: Corpus, *, theta=None, n_iter: int = 30,
                           unseen: str = "ignore") -> float:
    """Held-out log-likelihood by document completion.

    Θ of the test documents is estimated on ``observed`` with Φ fixed (unless ``theta`` is given,
    e.g. a model's own estimate), then ``heldout`` is scored: Σ n'_dw log Σ_t φ_wt θ_td.  The two
    parts come from :meth:`Corpus.completion_split` — random halves of the tokens (ARTM sec. 5) or
    disjoint word sets (PTM eq. 32).  Re-index a test corpus onto the training vocabulary first
    (:meth:`Corpus.with_vocab`).  Held-out tokens of words that Φ gives probability zero in every
    topic (words absent from the training documents) are ignored (``unseen="ignore"``, ARTM
    sec. 5) or kept (``"keep"``: the result is then -inf).  Arguments in another order (a corpus
    where Φ goes) are a TypeError naming them.
    """
    order = "phi, observed, heldout"
    _matrix(phi, "phi", "heldout_log_likelihood", order)
    _corpus(observed, "observed", "heldout_log_likelihood", order)
    _corpus(heldout, "heldout", "heldout_log_likelihood", order)
    _check_pair(observed, heldout)
    if unseen not in ("ignore", "keep"):
        raise ValueError(f"unseen must be 'ignore' or 'keep', got {unseen!r}")
    if theta is None:
        theta = fold_in(phi, observed, n_iter=n_iter)
    if unseen == "ignore":
        scored = _drop_unseen(phi, heldout)
        if scored.n_docs != heldout.n_docs:  # documents left with no scored token drop out
            keep = np.setdiff1d(np.arange(heldout.n_docs), scored.dropped_docs)
            theta = np.asarray(theta)[:, keep]
        heldout = scored
    return log_likelihood(phi, theta, heldout)


def heldout_perplexity(phi, observed: Corpus, heldout: Corpus, *, theta=None, n_iter: int = 30,
                       unseen: str = "ignore") -> float:
    """exp(-L_heldout / n_heldout): hold-out perplexity by document completion (ARTM sec. 5);
    ``n_heldout`` counts the scored tokens (see ``unseen`` in :func:`heldout_log_likelihood`)."""
    ll = heldout_log_likelihood(phi, observed, heldout, theta=theta, n_iter=n_iter, unseen=unseen)
    n = heldout.n_tokens if unseen == "keep" else int(heldout.counts[np.asarray(phi).sum(1)[heldout.word_ids] > 0].sum())
    return float(np.exp(-ll / n))


# ------------------------------------------------------------------------------ coherence
def cooccurrence(corpus: Corpus, words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Document frequencies ``S(w)`` and co-document frequencies ``S(w, w')`` of ``words``."""
    import scipy.sparse as sp  # here: a fit and its perplexity need none of SciPy

    words = np.asarray(words, np.int64)
    B = sp.csc_matrix(
        (np.ones(corpus.nnz), (corpus.doc_ids, corpus.word_ids)), shape=(corpus.n_docs, corpus.n_words)
    )[:, words]
    B.data[:] = 1.0
    co = np.asarray((B.T @ B).todense())
    return np.diag(co).copy(), co


def _pair_scores(words, corpus: Corpus, measure: str, eps: float) -> float:
    k = len(words)
    if k < 2:
        return float("nan")
    df, co = cooccurrence(corpus, words)
    D = corpus.n_docs
    total, pairs = 0.0, 0
    for i in range(1, k):
        for j in range(i):
            if measure == "umass":
                # PTM eq. 33: log (S(n_k, n_l) + 1) / S(n_l), l ranked above k.
                if df[j] > 0:
                    total += np.log((co[i, j] + 1.0) / df[j])
                    pairs += 1
                continue
            pairs += 1
            if df[i] == 0 or df[j] == 0:
                total += -1.0 if measure == "npmi" else 0.0
                continue
            if co[i, j] == 0:
                # Never together: NPMI's limit is -1; PMI would be -inf, so it counts as
                # `log(eps)`-smoothed (eps=0 means the pair is skipped, BigARTM's convention).
                if measure == "npmi":
                    total += -1.0
                elif eps > 0:
                    total += np.log(eps * D / (df[i] * df[j]))
                else:
                    pairs -= 1
                continue
            pmi = np.log(co[i, j] * D / (df[i] * df[j]))
            if measure == "npmi":
                p_ij = co[i, j] / D
                pmi = pmi / -np.log(p_ij) if p_ij < 1 else 1.0
            total += pmi
    if measure == "umass":
        return float(total)  # PTM eq. 33 is a sum, not a mean
    return float(total / pairs) if pairs else float("nan")


def coherence(
    phi,
    corpus: Corpus,
    *,
    k: int | None = 10,
    measure: str = "pmi",
    topics: Sequence[int] | None = None,
    kernel: bool = False,
    delta: float = 0.25,
    topic_weights=None,
    eps: float = 0.0,
) -> np.ndarray:
    """Document co-occurrence coherence of each topic in ``corpus`` (a reference corpus).

    These are the papers' measures over whole documents of a bag of words, not the
    sliding-window measures of Röder et al. (2015): for C_V, C_NPMI, C_UCI and gensim's UMass (a
    mean with ε = 1e-12, where ``"umass"`` here is PTM eq. 33's sum with +1 smoothing) use
    :func:`topicjax.evaluation.coherence.reference_coherence`.

    * ``measure="pmi"``: mean PMI over word pairs (ARTM eq. 58), PMI(w, w') =
      log(D·S(w, w') / (S(w)·S(w'))); pairs never seen together are skipped (``eps=0``) or scored
      ``log(eps·D / (S(w)S(w')))``;
    * ``"npmi"``: mean normalised PMI, in [-1, 1]; pairs never seen together score -1;
    * ``"umass"``: Σ_{k>l} log((S(w_k, w_l) + 1) / S(w_l)) (PTM eq. 33, a sum).

    Words are the top ``k`` of each column of ``phi`` (by probability), or with ``kernel=True``
    the kernel ``{w : p(t|w) > delta}`` (ARTM sec. 5; ``topic_weights`` n_t give p(t), uniform if
    omitted), ordered by φ.  Returns a ``(n_topics,)`` array (NaN for a topic with < 2 words).
    """
    if measure not in ("pmi", "npmi", "umass"):
        raise ValueError(f"measure must be 'pmi', 'npmi' or 'umass', got {measure!r}")
    if kernel:  # None: the whole kernel; a negative k would drop its last words
        k = None if k is None else check_int(k, "k", 1)
    elif k is None or not isinstance(k, (int, np.integer)) or isinstance(k, (bool, np.bool_)) or k < 2:
        raise ValueError(f"k must be an integer >= 2 for top-k coherence (None with kernel=True), got {k!r}")
    phi = np.asarray(phi, np.float64)
    if phi.shape[0] != corpus.n_words:
        raise ValueError(f"phi has {phi.shape[0]} words but the reference corpus has {corpus.n_words}")
    topics = range(phi.shape[1]) if topics is None else topics
    ptw = topic_posterior(phi, topic_weights) if kernel else None
    out = []
    for t in topics:
        order = np.argsort(-phi[:, t], kind="stable")
        if kernel:
            words = order[ptw[order, t] > delta]
            if k is not None:
                words = words[:k]
        else:
            words = order[:k]
        out.append(_pair_scores(words, corpus, measure, eps))
    return np.asarray(out)


# ------------------------------------------------------------------------------ structure
def sparsity(matrix, *, threshold: float = 0.0, columns: Sequence[int] | None = None, axis: int = 1) -> float:
    """Share of entries ``<= threshold`` (ARTM sec. 5 measures it over specific topics only:
    pass their indices as ``columns`` of Φ, or as rows of Θ with ``axis=0``)."""
    m = np.asarray(matrix)
    if columns is not None:
        m = np.take(m, np.asarray(columns), axis=axis)
    return float(np.mean(m <= threshold)) if m.size else float("nan")


def background_ratio(phi, theta, corpus: Corpus, background: Sequence[int]) -> float:
    """Share of tokens explained by background topics B (ARTM eq. 57):
    (1/n) Σ_d Σ_w n_dw Σ_{t∈B} p(t | d, w)."""
    phi, theta = _check_model(phi, theta, corpus, "background_ratio")
    b = np.zeros(phi.shape[1], bool)
    b[np.asarray(background, np.int64)] = True
    total = 0.0
    for s in range(0, corpus.nnz, _CHUNK):
        e = min(s + _CHUNK, corpus.nnz)
        w, d = corpus.word_ids[s:e], corpus.doc_ids[s:e]
        joint = phi[w] * theta.T[d]
        p = joint.sum(1)
        share = np.divide(joint[:, b].sum(1), p, out=np.zeros_like(p), where=p > 0)
        total += float(np.sum(corpus.counts[s:e] * share))
    return total / corpus.n_tokens


def topic_posterior(phi, topic_weights=None) -> np.ndarray:
    """p(t | w) = φ_wt p(t) / Σ_s φ_ws p(s), with p(t) ∝ ``topic_weights`` (n_t; uniform if None).
    Words no topic can produce get p(t|w) = 0."""
    phi = np.asarray(phi, np.float64)
    pt = np.ones(phi.shape[1]) if topic_weights is None else np.asarray(topic_weights, np.float64)
    joint = phi * (pt / pt.sum())
    s = joint.sum(1, keepdims=True)
    return np.divide(joint, s, out=np.zeros_like(joint), where=s > 0)


def kernel_scores(phi, topic_weights=None, *, delta: float = 0.25) -> dict[str, np.ndarray]:
    """Kernel W_t = {w : p(t|w) > δ} of each topic and its size, purity and contrast (ARTM sec. 5).

    ``size_t = |W_t|``, ``purity_t = Σ_{w∈W_t} p(w|t)``, ``contrast_t = mean_{w∈W_t} p(t|w)``
    (0 for an empty kernel).  Returns per-topic arrays; average them over the specific topics.
    """
    phi = np.asarray(phi, np.float64)
    ptw = topic_posterior(phi, topic_weights)
    kern = ptw > delta
    size = kern.sum(0)
    purity = np.where(kern, phi, 0).sum(0)
    contrast = np.divide(np.where(kern, ptw, 0).sum(0), size, out=np.zeros(phi.shape[1]), where=size > 0)
    return {"size": size, "purity": purity, "contrast": contrast}


def top_words(phi, vocab: Sequence[str], n: int = 10) -> list[list[str]]:
    """The ``n`` most probable words of each topic (column of Φ)."""
    n = check_int(n, "n", 1)  # a negative n would slice off the last words: every word but n
    phi = _matrix(phi, "phi", "top_words", "phi, vocab, n")
    if isinstance(vocab, (str, bytes)) or not all(isinstance(w, str) for w in vocab):
        raise TypeError("top_words: vocab must be a sequence of words (strings); the arguments are (phi, vocab, n)")
    if phi.shape[0] != len(vocab):
        raise ValueError(f"phi has {phi.shape[0]} words but the vocabulary has {len(vocab)}")
    order = np.argsort(-phi, axis=0, kind="stable")[:n]
    return [[vocab[i] for i in order[:, t]] for t in range(phi.shape[1])]


# ------------------------------------------------------------------------------ labels
def class_consistency(theta_train, labels_train, theta_test, labels_test, *, n_thresholds: int = 101) -> dict:
    """Class-label consistency of topics (PTM eq. 34-35).

    Each topic j gets a label distribution p_j(c) by counting the training labels weighted by the
    topic proportions (eq. 34; pass α ⊙ v for PTM).  A test document's label scores are
    Σ_j θ_jd p_j(c).  Single-label corpora (each row of the label matrix has one label): the
    accuracy of the best-scoring label.  Multi-label: labels above a threshold ν are assigned
    (eq. 35) and the area under the precision/recall curve over ν in [0, 1] is returned.

    ``labels_*`` are boolean ``(n_docs, n_labels)`` matrices (``Corpus.labels``).  Returns
    ``{"p_label": (T, C), "accuracy" or "auc": float}``.
    """
    th_tr, th_te = np.asarray(theta_train, np.float64), np.asarray(theta_test, np.float64)
    y_tr, y_te = np.asarray(labels_train, bool), np.asarray(labels_test, bool)
    if th_tr.shape[1] != y_tr.shape[0] or th_te.shape[1] != y_te.shape[0]:
        raise ValueError("theta (T x D) and labels (D x C) disagree on the number of documents")
    if y_tr.shape[1] != y_te.shape[1]:
        raise ValueError("training and test label matrices have different numbers of labels")
    weight = th_tr @ y_tr.astype(np.float64)  # (T, C): Σ_d θ_jd [c ∈ C_d]
    norm = weight.sum(1, keepdims=True)
    p_label = np.divide(weight, norm, out=np.full_like(weight, 1.0 / weight.shape[1]), where=norm > 0)
    scores = th_te.T @ p_label  # (D_test, C)
    if not np.any(y_te.sum(1) != 1) and not np.any(y_tr.sum(1) != 1):
        acc = float(np.mean(np.argmax(scores, 1) == np.argmax(y_te, 1)))
        return {"p_label": p_label, "accuracy": acc}
    precision, recall = [], []
    for nu in np.linspace(0.0, 1.0, n_thresholds):
        pred = scores > nu
        tp = float(np.sum(pred & y_te))
        n_pred = float(pred.sum())
        precision.append(tp / n_pred if n_pred else 1.0)
        recall.append(tp / float(y_te.sum()))
    r, p = np.asarray(recall), np.asarray(precision)
    # the curve traced from ν = 1 down to ν = 0 (recall never decreases along it); sorting by
    # recall instead would order points of equal recall arbitrarily and change the area
    auc = float(np.trapezoid(p[::-1], r[::-1]))
    return {"p_label": p_label, "auc": auc, "precision": p, "recall": r}


# ------------------------------------------------------------------------------ recovery
def hellinger(p, q, axis: int = 0) -> np.ndarray:
    """Hellinger distance between the distributions along ``axis`` (ARTM eq. 12, one term)."""
    p, q = np.asarray(p, np.float64), np.asarray(q, np.float64)
    return np.sqrt(0.5 * np.sum((np.sqrt(p) - np.sqrt(q)) ** 2, axis=axis))


def topic_recovery(phi_est, phi_true) -> dict:
    """Match estimated topics to true ones (Hungarian matching on Hellinger distance).

    Returns ``{"distance": mean matched distance, "matching": est index for each true topic,
    "per_topic": distances}``; with more estimated than true topics the extra ones are unmatched.
    """
    from scipy.optimize import linear_sum_assignment

    est, true = np.asarray(phi_est, np.float64), np.asarray(phi_true, np.float64)
    if est.shape[0] != true.shape[0]:
        raise ValueError(f"topics over different vocabularies ({est.shape[0]} vs {true.shape[0]} words)")
    cost = hellinger(est[:, :, None], true[:, None, :], axis=0)  # (T_est, T_true)
    rows, cols = linear_sum_assignment(cost)
    per = np.full(true.shape[1], np.nan)
    match = np.full(true.shape[1], -1)
    per[cols], match[cols] = cost[rows, cols], rows
    return {"distance": float(np.nanmean(per)), "matching": match, "per_topic": per}
