"""LIDA and its family: collapsed Gibbs samplers for LIDA, FTM, SSTM and LDA.

Latent IBP compound Dirichlet allocation (Archambeau, Lakshminarayanan & Bouchard,
``lida-ibp-compound-dirichlet.txt``) puts four-parameter IBP compound Dirichlet priors on the
document-topic matrix Θ (mass α, IBP parameters η, δ, σ) and on the topic-word matrix Φ (mass β,
IBP parameters γ, ξ, ζ).  Binary masks Θ̄ (topics active in a document) and Φ̄ (words active in a
topic) select the support of the degenerate Dirichlet priors (eq. 15-20).  One sampler covers the
four models of sec. 4.4, chosen by ``variant``:

==========  =======================  ======================  =========================
variant     topic masks Θ̄ (28)-(30)  word masks Φ̄ (31)-(34)  token conditional
==========  =======================  ======================  =========================
``lida``    sampled                  sampled                 (35)
``ftm``     sampled                  Φ̄ = 1                   (36)
``sstm``    Θ̄ = 1                    sampled                 (37)
``lda``     Θ̄ = 1                    Φ̄ = 1                   (38)
==========  =======================  ======================  =========================

**State and truncation.**  The number of topics is unbounded in LIDA/FTM; the arrays have a static
number of topic *slots* ``K_max`` (``n_components``) and a slot is a live topic while its column of
Θ̄ has at least one active entry (for LDA/SSTM all ``K_max`` topics are live).  Counts are dense
``int32``: ``n_dk`` (D x K_max; the paper's n_kd stored document-major so that a document's row is
contiguous), ``n_wk`` (V x K_max), ``n_k`` (K_max), assignments ``z`` (one per token).  With the
infinite vocabulary (sec. 4.2, eq. 32-33) the word rows are the W observed words followed by
"phantom" rows for words that are active in some topic but were never observed; with the finite
vocabulary (eq. 34) there are only the W rows.

**Growth.**  New topics are born per document as Poisson draws with the mean of eq. (30) and new
words per topic with the mean of eq. (33); they take free slots.  When a sweep needs more slots than
are free the sweep is flagged; with ``grow="auto"`` (default) the estimator doubles the capacity and
re-runs that sweep from the state before it (so the chain is the one it would have been with a
larger truncation, up to the random stream), with ``grow="error"`` it raises a ValueError naming
the capacity.

**Topic births, in numbers.**  A document draws Poisson(π̃_d) new topics per sweep, π̃_d = λ r_d /
(1 + λ r_d) with λ = η Γ(1+δ) Γ(D−1+δ+σ) / (Γ(D+δ) Γ(δ+σ)) (= η/D for δ = 1, σ = 0) and
r_d = B(m_d α + n_d, α)/B(m_d α, α) (eq. 30), so a sweep creates about Σ_d π̃_d ≈ η r̄ topics.  A
newborn is active in its document only and holds no tokens; in the token step each token of that
document moves to it with probability (α/V) / Σ_k (α + n_kd)(β + n_vk)/(Vβ + n_k) (eq. 36).  On KOS
(fold 0 training set, FTM with δ = 1, 50 initial topics) we measured 3.3 births per sweep against
3.0-3.6 from the hand-computed (30) (η ≈ 6, λ ≈ 2.2e-3, r̄ ≈ 0.52), a per-token probability
1.1e-3 of joining a newborn, hence 14 % of newborns catch at least one token in an exact Gibbs
sweep (7 % measured with the parallel 4-step MH sweep); a topic holding one token loses it with
probability ≈ 1 − 1e-3 when that token is resampled, and an empty singleton is kept by (30) with
probability π̃ ≈ 1e-3.  So newborns die within one or two sweeps: this is what eq. (30) and (35)
imply, not a defect of the implementation, and the number of live topics stays near its initial
value.  With δ sampled it is worse: a random start makes nearly every topic active in nearly every
document (Θ̄ dense: with c_k ≈ 0.9 D the prior odds (c_k − σ)/(D − 1 − c_k + δ + σ) of (29) keep empty
entries on), the IBP likelihood (43) then drives δ towards 0 (0.01-0.03 measured) and λ ≈ η δ / D
with it (< 1e-4): hardly any births at all.  ``init="ibp"`` starts instead from a sparse Θ̄ drawn
from the IBP prior; the chain then stays sparse.

**One sweep (Algorithm 1).**

1. Topic activations (FTM, LIDA).  For n_kd = 0, θ̄_kd ~ Bernoulli(π_kd) with the odds of eq. (29):
   the likelihood ratio B(m α + n_d, α) / B(m α, α) of eq. (23) (m = other active topics of the
   document) times the three-parameter IBP prior odds (c_k − σ)/(D − 1 − c_k + δ + σ) of eq. (13)
   (c_k = other documents using topic k).  A topic used by document d only is kept with the
   probability of eq. (30); then each document draws Poisson(π̃_d) new topics, π̃_d from eq. (30).
   Entries are visited in blocks that are "diagonals" of the D x K_max matrix (distinct documents
   and distinct topics): the conditional of θ̄_kd involves only row d and column k, so the entries
   of one block are conditionally independent and sampling them together is an exact Gibbs step
   (D + K_max sequential steps of K_max-wide vector work instead of D·K_max scalar steps).
2. Word activations (SSTM, LIDA), the same way over the V x K_max matrix, with topics as the
   customers of the IBP (K* live topics): eq. (32) (infinite vocabulary) or the finite-vocabulary
   eq. (34), and Poisson(κ̃_k) new words per topic from eq. (33) (infinite vocabulary).
3. Topic assignments z by eq. (35)-(38), in one of two modes:

   * ``mode="exact"``: the exact sequential collapsed Gibbs sweep, a ``lax.scan`` over tokens that
     removes the token's assignment from the counts, samples from the dense K_max-way conditional
     and adds it back.
   * ``mode="parallel"``: tokens are processed in batches of ``batch_size`` consecutive tokens
     (whole documents in stream order); every token of a batch is sampled from the counts as they
     were at the start of the batch (minus its own assignment), then the counts are updated with
     the batch's changes.  This is the approximation of distributed/"AD-LDA" samplers (tokens of
     one batch do not see each other's new assignments); counts still equal the assignments after
     every batch.  The per-token draw is either the dense categorical over K_max
     (``mh_steps=0``) or, by default, ``mh_steps`` Metropolis-Hastings steps that alternate a
     document proposal q(k) ∝ n_dk + α and a word proposal q(k) ∝ n_wk + β, each drawn in O(1) by
     picking a random *other* token of the same document (word) and taking its topic (the cycle
     proposal of LightLDA, Yuan et al. 2015; excluding the token itself makes the proposals
     independent of its current topic, so the MH chain leaves the conditional exactly invariant).  The MH chain targets the same stale conditional, at O(1) cost per
     token instead of O(K_max).

4. Hyperparameters (sec. 4.5), from sweep ``hyper_start`` on: α and β by slice sampling their exact conditionals (39)-(40)
   (marginals (23)-(24), priors p(α) ∝ 1/α, p(β) ∝ 1/β; the conditionals are not of a standard
   form, slice sampling is an exact univariate MCMC update on log α); η and γ by their conjugate
   Gamma updates under the IBP likelihood (43) with Gamma(a, b) priors; δ and ξ by random-walk
   Metropolis-Hastings on log(δ + σ) with the likelihood (43) and the prior p(δ) ∝ 1/(δ + σ);
   σ and ζ fixed (sec. 5.2 recommends a grid).

**Evaluation (sec. 5.1).**  After ``burn_in`` sweeps, every sweep adds the posterior means (47) of
Φ and (46) of Θ to running averages.  A slot's average is reset when its topic dies, so a slot
reused by a new topic does not mix two topics.  For φ the entries with n_vk = 0 are
Rao-Blackwellised: the mask φ̄_vk in (47) is replaced by its conditional probability of being
active (eq. 31-34), which keeps every word's predictive probability positive.  Held-out
perplexity (44)-(45) is measured by document completion: topics of the test documents are sampled
on one half of their tokens with Φ fixed at its posterior mean (exact sequential sweep; test
documents use the training topics, no new topics), θ (46) is averaged after a burn-in, and the
other half is scored.

Seeds: the same ``random_state`` gives the same chain on the same device; bits may differ between
CPU and GPU.  The parallel MH sweep draws its uniforms from a counter-based integer hash seeded
per batch by ``jax.random`` (cheaper than one threefry call per proposal).

>>> import topicjax as tj
>>> from topicjax.lida import LIDA
>>> corpus, _ = tj.datasets.make_bars(n_docs=100, seed=0)
>>> model = LIDA("lda", n_components=10, max_iter=20, random_state=0, progress=False).fit(corpus)
>>> model.phi_.shape, model.theta_.shape
((25, 10), (10, 100))
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaln

from topicjax.estimator import TopicModelBase
from topicjax.data.corpus import Corpus

__all__ = [
    "LIDA",
    "VARIANTS",
    "Config",
    "State",
    "Tokens",
    "make_tokens",
    "init_state",
    "ibp_sample",
    "sweep",
    "hyper_update",
    "log_marginal_z",
    "log_marginal_w",
    "ibp_log_likelihood",
    "ibp_mass",
    "log_ratio_add_empty",
    "topic_activation_logodds",
    "word_activation_logodds",
    "enumerate_lda_posterior",
    "sample_means",
    "accumulate",
]

VARIANTS = ("lida", "ftm", "sstm", "lda")
HYPER = ("alpha", "beta", "eta", "delta", "gamma", "xi")
_BIG = 1e30
_TINY = 1e-30


# ============================================================================ configuration / data
@dataclass(frozen=True)
class Config:
    """Static settings of the sampler (hashable: a jit static argument)."""

    variant: str
    n_topics: int  # K_max, slots
    n_docs: int
    n_words: int  # W, observed vocabulary
    n_rows: int  # W + phantom rows (infinite vocabulary) or W
    n_tokens: int
    vocabulary: str = "finite"
    mode: str = "parallel"
    batch: int = 65536
    mh_steps: int = 4
    sample: tuple = ("alpha", "beta", "eta", "delta", "gamma", "xi")
    sigma: float = 0.0
    zeta: float = 0.0
    eta_prior: tuple = (1.0, 1.0)
    gamma_prior: tuple = (1.0, 1.0)
    mh_scale: float = 0.3
    mh_hyper_steps: int = 10
    max_doc_len: int = 0  # bounds of a count n_dk / n_wk (histograms of the α, β updates); 0: unknown
    max_word_count: int = 0
    unroll: int = 1  # unrolling of the mask scans (fewer loop iterations: faster on GPU, slower to compile)

    @property
    def focused(self) -> bool:  # topic masks Θ̄ sampled
        return self.variant in ("lida", "ftm")

    @property
    def sparse(self) -> bool:  # word masks Φ̄ sampled
        return self.variant in ("lida", "sstm")

    @property
    def n_batches(self) -> int:
        return max(1, -(-self.n_tokens // self.batch))


class Tokens(NamedTuple):
    """The corpus as a token stream sorted by document (device arrays)."""

    doc: jax.Array  # (N,) int32
    word: jax.Array  # (N,) int32
    n_d: jax.Array  # (D,) int32 tokens per document
    doc_start: jax.Array  # (N,) first token of the token's document
    word_start: jax.Array  # (N,) first position of the token's word in ``by_word``
    word_len: jax.Array  # (N,) tokens of the token's word
    by_word: jax.Array  # (N,) token ids sorted by word
    word_pos: jax.Array  # (N,) position of the token among the tokens of its word (in ``by_word``)


def make_tokens(corpus: Corpus) -> Tokens:
    """Expand ``corpus`` into a token stream (doc id and word id per token, sorted by document)."""
    doc = np.repeat(corpus.doc_ids, corpus.counts).astype(np.int32)
    word = np.repeat(corpus.word_ids, corpus.counts).astype(np.int32)
    n_d = np.bincount(doc, minlength=corpus.n_docs).astype(np.int32)
    doc_off = np.concatenate([[0], np.cumsum(n_d)]).astype(np.int32)
    n_w = np.bincount(word, minlength=corpus.n_words).astype(np.int32)
    word_off = np.concatenate([[0], np.cumsum(n_w)]).astype(np.int32)
    by_word = np.argsort(word, kind="stable").astype(np.int32)
    word_pos = np.empty_like(by_word)
    word_pos[by_word] = np.arange(by_word.size, dtype=np.int32) - word_off[word[by_word]]
    return Tokens(
        doc=jnp.asarray(doc), word=jnp.asarray(word), n_d=jnp.asarray(n_d),
        doc_start=jnp.asarray(doc_off[doc]), word_start=jnp.asarray(word_off[word]),
        word_len=jnp.asarray(n_w[word]), by_word=jnp.asarray(by_word), word_pos=jnp.asarray(word_pos),
    )


class State(NamedTuple):
    """Sampler state; masks and counts have ``K_max`` topic slots."""

    z: jax.Array  # (N,) int32 topic of every token
    n_dk: jax.Array  # (D, K) int32
    n_wk: jax.Array  # (V, K) int32, V = W (+ phantom rows)
    n_k: jax.Array  # (K,) int32
    theta_bar: jax.Array  # (D, K) bool topic activations (all True for lda/sstm)
    phi_bar: jax.Array  # (V, K) bool word activations (True on observed rows for lda/ftm)
    alpha: jax.Array
    beta: jax.Array
    eta: jax.Array
    delta: jax.Array
    gamma: jax.Array
    xi: jax.Array
    overflow_topics: jax.Array  # births that found no free slot in the last sweep
    overflow_words: jax.Array


def _counts(z, doc, word, D, V, K):
    ones = jnp.ones_like(z)
    n_dk = jnp.zeros((D, K), jnp.int32).at[doc, z].add(ones)
    n_wk = jnp.zeros((V, K), jnp.int32).at[word, z].add(ones)
    n_k = jnp.zeros((K,), jnp.int32).at[z].add(ones)
    return n_dk, n_wk, n_k


def init_state(key, tokens: Tokens, cfg: Config, hyper: dict, init_topics: int,
               theta_init: np.ndarray | None = None) -> State:
    """Initial state.  Without ``theta_init``: assignments uniform over the first ``init_topics``
    slots.  With ``theta_init`` (D x K_max bool, e.g. :func:`ibp_sample`): every token takes a topic
    uniformly among the topics active in its document, and Θ̄ = ``theta_init``.  Word masks are
    Φ̄ = (counts > 0) where sampled."""
    K, D, V, W = cfg.n_topics, cfg.n_docs, cfg.n_rows, cfg.n_words
    if theta_init is None:
        z = jax.random.randint(key, tokens.doc.shape, 0, init_topics, dtype=jnp.int32)
    else:
        theta_init = np.asarray(theta_init, bool)
        if theta_init.shape != (D, K):
            raise ValueError(f"theta_init has shape {theta_init.shape}, expected (n_docs, K_max) = {(D, K)}")
        m = theta_init.sum(1)
        if cfg.focused and np.any(m[np.asarray(tokens.n_d) > 0] == 0):
            d = int(np.flatnonzero((m == 0) & (np.asarray(tokens.n_d) > 0))[0])
            raise ValueError(f"theta_init: document {d} has tokens but no active topic")
        # the j-th active topic of the token's document, j uniform in [0, m_d)
        doc = np.asarray(tokens.doc)
        u = np.asarray(jax.random.uniform(key, doc.shape))
        j = np.minimum((u * m[doc]).astype(np.int64), np.maximum(m[doc] - 1, 0))
        rows, cols = np.nonzero(theta_init)  # row-major: the active slots of each document in order
        start = np.concatenate([[0], np.cumsum(m)])
        z = jnp.asarray(cols[start[doc] + j].astype(np.int32))
    n_dk, n_wk, n_k = _counts(z, tokens.doc, tokens.word, D, V, K)
    if cfg.focused:
        theta_bar = n_dk > 0 if theta_init is None else (jnp.asarray(theta_init) | (n_dk > 0))
    else:
        theta_bar = jnp.ones((D, K), bool)
    if cfg.sparse:
        phi_bar = n_wk > 0
    else:
        phi_bar = jnp.broadcast_to(jnp.arange(V)[:, None] < W, (V, K))
    f = lambda name: jnp.asarray(hyper[name], jnp.float32)
    return State(z, n_dk, n_wk, n_k, theta_bar, phi_bar, f("alpha"), f("beta"), f("eta"), f("delta"),
                 f("gamma"), f("xi"), jnp.int32(0), jnp.int32(0))


def grow_state(state: State, cfg: Config, n_topics: int | None = None, n_rows: int | None = None):
    """Pad ``state`` to more topic slots and/or phantom word rows (free slots appended)."""
    K_new = n_topics or cfg.n_topics
    V_new = n_rows or cfg.n_rows
    dk, dv = K_new - cfg.n_topics, V_new - cfg.n_rows
    pad = lambda a, rows, cols: jnp.pad(a, ((0, rows), (0, cols)))
    theta_fill = not cfg.focused  # lda/sstm: every slot is a topic of every document
    theta_bar = jnp.pad(state.theta_bar, ((0, 0), (0, dk)), constant_values=theta_fill)
    phi_bar = pad(state.phi_bar, dv, 0)
    if not cfg.sparse:
        phi_bar = jnp.pad(phi_bar, ((0, 0), (0, dk)), constant_values=True)
        phi_bar = phi_bar & (jnp.arange(V_new)[:, None] < cfg.n_words)
    else:
        phi_bar = pad(phi_bar, 0, dk)
    new = state._replace(
        n_dk=pad(state.n_dk, 0, dk), n_wk=pad(state.n_wk, dv, dk), n_k=jnp.pad(state.n_k, (0, dk)),
        theta_bar=theta_bar, phi_bar=phi_bar, overflow_topics=jnp.int32(0), overflow_words=jnp.int32(0),
    )
    return new, replace(cfg, n_topics=K_new, n_rows=V_new)


# ============================================================================ closed-form pieces
def log_ratio_add_empty(m, n, a):
    """log B(m a + n, a) − log B(m a, a): the change of the Dirichlet-multinomial marginal (23)/(24)
    when one more (empty) cell is activated next to ``m`` active cells holding ``n`` tokens.

    It is the likelihood part of eq. (29)-(30) (a = α, m = other active topics of the document) and of
    eq. (32)-(34) (a = β, m = other active words of the topic).  With ``n = 0`` it is 0; with
    ``m = 0`` and ``n > 0`` the state without the cell is impossible, so it is +∞ (a large number).
    """
    m = jnp.asarray(m, jnp.float32)
    n = jnp.asarray(n, jnp.float32)
    ms = jnp.maximum(m, 1.0)
    val = gammaln((ms + 1) * a) - gammaln((ms + 1) * a + n) - gammaln(ms * a) + gammaln(ms * a + n)
    return jnp.where(n == 0, 0.0, jnp.where(m == 0, _BIG, val))


def ibp_mass(n_other, mass, conc, disc):
    """log of η Γ(1+δ) Γ(n+δ+σ) / (Γ(n+1+δ) Γ(δ+σ)) with n = ``n_other`` customers before: the mean
    number of new features of the next customer in the three-parameter IBP (sec. 2.1), used in
    eq. (30) (n = D − 1) and eq. (33) (n = K* − 1)."""
    n = jnp.asarray(n_other, jnp.float32)
    return (jnp.log(mass) + gammaln(1 + conc) + gammaln(n + conc + disc) - gammaln(n + 1 + conc)
            - gammaln(conc + disc))


def ibp_sample(rng: np.random.Generator, n_customers: int, mass: float, conc: float, disc: float,
               min_features: int = 0) -> np.ndarray:
    """A draw of the three-parameter IBP (sec. 2.1; host numpy): customer d (0-based) takes an earlier
    dish k with probability (m_k − σ)/(d + δ) and Poisson(η Γ(1+δ) Γ(d+δ+σ) / (Γ(d+1+δ) Γ(δ+σ)))
    new dishes.  Returns the (n_customers x K*) binary matrix.  ``min_features``: a customer left
    with fewer dishes takes new ones up to that number (used so that every document of an initial
    state has a topic; it departs from the prior for those customers only)."""
    from scipy.special import gammaln as g

    if not (mass > 0 and disc >= 0 and disc < 1 and conc > -disc):
        raise ValueError(f"IBP parameters out of range: mass={mass}, conc={conc}, disc={disc}")
    counts = np.zeros(0, np.int64)
    rows = []
    for d in range(n_customers):
        old = rng.random(counts.size) < (counts - disc) / (d + conc)
        lam = mass * np.exp(g(1 + conc) + g(d + conc + disc) - g(d + 1 + conc) - g(conc + disc))
        n_new = max(int(rng.poisson(lam)), min_features - int(old.sum()))
        counts = np.concatenate([counts + old, np.ones(n_new, np.int64)])
        rows.append(np.concatenate([np.flatnonzero(old), np.arange(counts.size - n_new, counts.size)]))
    Z = np.zeros((n_customers, counts.size), bool)
    for d, r in enumerate(rows):
        Z[d, r] = True
    return Z


def topic_activation_logodds(n_d, m, c, n_other, alpha, eta, delta, sigma):
    """Log odds of θ̄_kd = 1 for an entry with n_kd = 0 (eq. 28-30).

    ``n_d`` tokens of the document, ``m`` other active topics in it, ``c`` other documents where the
    topic is active, ``n_other`` = D − 1 other documents.  For c ≥ 1 this is eq. (29): likelihood
    ratio times the IBP prior odds (c − σ)/(n_other − c + δ + σ) of eq. (13) with K → ∞.  For c = 0
    (the topic is used by this document only) it is eq. (30): π̃ = λ r / (1 + λ r) with λ the
    IBP new-feature mass and r the likelihood ratio, i.e. log odds = log λ + log r.
    """
    lr = log_ratio_add_empty(m, n_d, alpha)
    c = jnp.asarray(c, jnp.float32)
    lo_old = jnp.log(jnp.maximum(c - sigma, _TINY)) - jnp.log(n_other - c + delta + sigma) + lr
    lo_new = ibp_mass(n_other, eta, delta, sigma) + lr
    return jnp.where(c >= 1, lo_old, lo_new)


def word_activation_logodds(n_k, m, c, k_star, beta, gamma, xi, zeta, n_words, finite: bool):
    """Log odds of φ̄_vk = 1 for an entry with n_vk = 0 (eq. 31-34).

    ``n_k`` tokens of the topic, ``m`` other active words of the topic, ``c`` other live topics in
    which the word is active, ``k_star`` live topics (customers of the word IBP).

    * infinite vocabulary, c ≥ 1: eq. (32), prior odds (c − ζ)/(K* − 1 − c + ξ + ζ);
    * infinite vocabulary, c = 0: eq. (33), log odds log λ + log r of a "new" word;
    * finite vocabulary (W words), c ≥ 1: eq. (34) written from the finite beta-Bernoulli
      conditional (13) with η δ / K → γ ξ / W: prior p = (γξ/W + c − ζ)/(γξ/W + K* − 1 + ξ).  (The
      printed eq. (34) also subtracts γξ/W in the odds' numerator, which does not follow from (13);
      the difference is O(γξ/W).)
    * finite vocabulary, c = 0: eq. (14), prior p = ε / W with the intensity ε of eq. (10) over the
      K* topics (the expected number of distinct active words).
    """
    lr = log_ratio_add_empty(m, n_k, beta)
    c = jnp.asarray(c, jnp.float32)
    ks = jnp.asarray(k_star, jnp.float32)
    n_other = ks - 1.0
    if finite:
        a = gamma * xi / n_words
        lo_old = jnp.log(jnp.maximum(a + c - zeta, _TINY)) - jnp.log(jnp.maximum(n_other - c + xi + zeta, _TINY))
        eps = jnp.exp(_log_ibp_intensity(ks, gamma, xi, zeta, n_max=None))
        p0 = jnp.clip(eps / n_words, 1e-12, 1 - 1e-6)
        lo_new = jnp.log(p0) - jnp.log1p(-p0)
    else:
        lo_old = jnp.log(jnp.maximum(c - zeta, _TINY)) - jnp.log(jnp.maximum(n_other - c + xi + zeta, _TINY))
        lo_new = ibp_mass(n_other, gamma, xi, zeta)
    return jnp.where(c >= 1, lo_old, lo_new) + lr


def _ibp_harmonic(n_customers, conc, disc, n_max: int):
    """Σ_{j<n} Γ(1+δ)Γ(j+δ+σ)/(Γ(j+1+δ)Γ(δ+σ)) (eq. 10, 43) for a traced n ≤ n_max."""
    j = jnp.arange(n_max, dtype=jnp.float32)
    terms = jnp.exp(gammaln(1 + conc) + gammaln(j + conc + disc) - gammaln(j + 1 + conc) - gammaln(conc + disc))
    return jnp.sum(jnp.where(j < n_customers, terms, 0.0))


def _log_ibp_intensity(n_customers, mass, conc, disc, n_max=None):
    """log ε of eq. (10): the expected number of features among ``n_customers`` customers.

    Closed form of the sum: Σ_{j<n} Γ(j+δ+σ)/Γ(j+1+δ) = [Γ(n+δ+σ)/Γ(n+δ) − Γ(δ+σ)/Γ(δ)]/σ for σ > 0
    (telescoping), and ψ(n+δ) − ψ(δ) for σ = 0; used where n is traced and unbounded.
    """
    n = jnp.asarray(n_customers, jnp.float32)
    if disc == 0:
        s = jax.scipy.special.digamma(n + conc) - jax.scipy.special.digamma(conc)
        return jnp.log(mass) + jnp.log(jnp.maximum(s * conc, _TINY))  # Γ(1+δ)/Γ(δ) = δ
    a = jnp.exp(gammaln(n + conc + disc) - gammaln(n + conc)) - jnp.exp(gammaln(conc + disc) - gammaln(conc))
    log_s = jnp.log(jnp.maximum(a / disc, _TINY)) + gammaln(1 + conc) - gammaln(conc + disc)
    return jnp.log(mass) + log_s


def ibp_log_likelihood(feature_counts, n_customers, mass, conc, disc, n_max: int | None = None):
    """log P(Θ̄ | η, δ, σ) of the three-parameter IBP, eq. (43), up to the combinatorial factor that
    does not depend on the parameters.  ``feature_counts``: customers per feature (features with 0
    are absent and ignored); ``n_customers``: D (or K* for the word matrix; may be traced, then
    ``n_max`` bounds it)."""
    c = jnp.asarray(feature_counts, jnp.float32)
    present = c > 0
    n = jnp.asarray(n_customers, jnp.float32)
    k_star = jnp.sum(present)
    if n_max is None:
        n_max = int(n_customers)
    H = _ibp_harmonic(n, conc, disc, n_max)
    per = (gammaln(1 + conc) + gammaln(jnp.maximum(n - c, 0.0) + conc + disc) + gammaln(jnp.maximum(c, 1.0) - disc)
           - gammaln(1 - disc) - gammaln(conc + disc) - gammaln(n + conc))
    return -mass * H + k_star * jnp.log(mass) + jnp.sum(jnp.where(present, per, 0.0))


def log_marginal_z(n_dk, theta_bar, alpha):
    """log p(z | Θ̄, α), eq. (23): Σ_d [log Γ(m_d α) − log Γ(m_d α + n_d)] + Σ_{n_kd>0} [log Γ(α + n_kd) − log Γ(α)]."""
    m = jnp.sum(theta_bar, axis=1).astype(jnp.float32)
    n_d = jnp.sum(n_dk, axis=1).astype(jnp.float32)
    ms = jnp.maximum(m, 1.0)
    t1 = jnp.where(n_d > 0, gammaln(ms * alpha) - gammaln(ms * alpha + n_d), 0.0)
    n = n_dk.astype(jnp.float32)
    t2 = jnp.where(n_dk > 0, gammaln(alpha + n) - gammaln(alpha), 0.0)
    return jnp.sum(t1) + jnp.sum(t2)


def log_marginal_w(n_wk, n_k, n_active_words, beta):
    """log p(w | z, Φ̄, β), eq. (24), over the topics: Σ_k [log Γ(M_k β) − log Γ(M_k β + n_k)] +
    Σ_{n_vk>0} [log Γ(β + n_vk) − log Γ(β)], ``n_active_words`` = M_k = φ̄_·k (W for LDA/FTM)."""
    M = jnp.maximum(jnp.asarray(n_active_words, jnp.float32), 1.0)
    nk = n_k.astype(jnp.float32)
    t1 = jnp.where(n_k > 0, gammaln(M * beta) - gammaln(M * beta + nk), 0.0)
    n = n_wk.astype(jnp.float32)
    t2 = jnp.where(n_wk > 0, gammaln(beta + n) - gammaln(beta), 0.0)
    return jnp.sum(t1) + jnp.sum(t2)


# ============================================================================ mask sampling
def _diagonal_scan(key, mask, row_sum, col_sum, logodds_fn, forced_fn, allowed_fn, unroll: int = 1):
    """Blocked Gibbs over an R x C binary matrix: block s holds the entries (i, (i+s) mod C) (R ≤ C)
    or ((j+s) mod R, j) (R > C), i.e. distinct rows and distinct columns.  The conditional of an
    entry involves only its row sum and column sum, so the entries of a block are conditionally
    independent and are drawn together.  ``logodds_fn(rows, cols, m_other, c_other)``,
    ``forced_fn(rows, cols)`` (True: entry must be 1), ``allowed_fn(rows, cols, c_total)`` (False:
    entry must be 0).  Returns the new mask, row sums and column sums."""
    R, C = mask.shape
    L, S = max(R, C), min(R, C)
    iota = jnp.arange(S, dtype=jnp.int32)
    u = jax.random.uniform(key, (L, S))

    def body(carry, xs):
        mask, rsum, csum = carry
        s, us = xs
        if R <= C:
            rows, cols = iota, (iota + s) % C
        else:
            rows, cols = (iota + s) % R, iota
        cur = mask[rows, cols]
        cur_i = cur.astype(jnp.int32)
        m_o = rsum[rows] - cur_i
        c_o = csum[cols] - cur_i
        lo = logodds_fn(rows, cols, m_o, c_o)
        new = us < jax.nn.sigmoid(lo)
        new = new | forced_fn(rows, cols, m_o)
        new = new & allowed_fn(rows, cols, csum[cols])
        mask = mask.at[rows, cols].set(new)
        d = new.astype(jnp.int32) - cur_i
        return (mask, rsum.at[rows].add(d), csum.at[cols].add(d)), None

    (mask, rsum, csum), _ = jax.lax.scan(body, (mask, row_sum, col_sum), (jnp.arange(L, dtype=jnp.int32), u),
                                         unroll=unroll)
    return mask, rsum, csum


def _poisson_small(key, rates, cap: int = 24):
    """Poisson draws for rates ≤ 1 (the rates of eq. 30, 33 are probabilities) by inverse CDF over
    0..cap (P(X > 24) < 1e-24 for a rate ≤ 1); loop-free, so cheap to compile."""
    k = jnp.arange(cap + 1, dtype=jnp.float32)
    r = jnp.clip(rates, 0.0, 1.0)[..., None]
    logpmf = k * jnp.log(jnp.maximum(r, _TINY)) - r - gammaln(k + 1)
    pmf = jnp.where((r == 0) & (k > 0), 0.0, jnp.exp(logpmf))
    cdf = jnp.cumsum(pmf, axis=-1)
    u = jax.random.uniform(key, rates.shape)[..., None] * cdf[..., -1:]
    return jnp.minimum(jnp.sum(cdf <= u, axis=-1), cap).astype(jnp.int32)


def _allocate(key_births, rates, owners_mask_shape, free, n_slots):
    """Poisson births: ``rates`` (R,) per owner; returns (owner index, slot index, ok) arrays of
    length ``n_slots`` placing the j-th birth in the j-th free slot, and the overflow count."""
    b = _poisson_small(key_births, rates)
    cum = jnp.cumsum(b)
    total = cum[-1]
    n_free = jnp.sum(free)
    slots = jnp.argsort(~free, stable=True).astype(jnp.int32)  # free slots first, in order
    j = jnp.arange(n_slots, dtype=jnp.int32)
    owner = jnp.searchsorted(cum, j, side="right").astype(jnp.int32)
    ok = (j < total) & (j < n_free)
    owner = jnp.minimum(owner, owners_mask_shape - 1)
    return owner, slots, ok, jnp.maximum(total - n_free, 0)


def _topic_step(key, state: State, tokens: Tokens, cfg: Config):
    """Topic activations (28)-(30) and Poisson births of new topics (30)."""
    k1, k2 = jax.random.split(key)
    D, K = cfg.n_docs, cfg.n_topics
    n_dk, n_d = state.n_dk, tokens.n_d
    alpha, eta, delta, sigma = state.alpha, state.eta, state.delta, cfg.sigma
    n_other = D - 1.0

    def logodds(rows, cols, m_o, c_o):
        return topic_activation_logodds(n_d[rows], m_o, c_o, n_other, alpha, eta, delta, sigma)

    forced = lambda rows, cols, m_o: n_dk[rows, cols] > 0
    allowed = lambda rows, cols, c_tot: c_tot > 0  # a dead slot is revived only by a birth
    tb, m, c = _diagonal_scan(k1, state.theta_bar, jnp.sum(state.theta_bar, 1, dtype=jnp.int32),
                              jnp.sum(state.theta_bar, 0, dtype=jnp.int32), logodds, forced, allowed, cfg.unroll)
    # Births: document d draws Poisson(π̃_d) new topics, π̃_d of eq. (30) with c = 0.
    rate = jax.nn.sigmoid(ibp_mass(n_other, eta, delta, sigma) + log_ratio_add_empty(m, n_d, alpha))
    owner, slots, ok, overflow = _allocate(k2, rate, D, c == 0, K)
    tb = (tb.astype(jnp.int8).at[owner, slots].add(ok.astype(jnp.int8)) > 0)
    return tb, overflow


def _word_step(key, state: State, theta_bar, cfg: Config):
    """Word activations (31)-(34) and, with the infinite vocabulary, Poisson births of new words (33)."""
    k1, k2 = jax.random.split(key)
    V, W, K = cfg.n_rows, cfg.n_words, cfg.n_topics
    finite = cfg.vocabulary == "finite"
    live = jnp.any(theta_bar, axis=0)
    k_star = jnp.sum(live).astype(jnp.float32)
    phi_bar = state.phi_bar & live[None, :]  # a dead topic takes its words with it
    n_wk, n_k = state.n_wk, state.n_k
    beta, gamma, xi, zeta = state.beta, state.gamma, state.xi, cfg.zeta

    def logodds(rows, cols, m_o, c_o):
        # rows = words, cols = topics; m_o = other words of the topic, c_o = other topics of the word
        return word_activation_logodds(n_k[cols], m_o, c_o, k_star, beta, gamma, xi, zeta, W, finite)

    if finite:  # "assign at least one vocabulary word to every topic" (sec. 4.2)
        forced = lambda rows, cols, m_o: (n_wk[rows, cols] > 0) | ((m_o == 0) & live[cols])
        allowed = lambda rows, cols, c_tot: live[cols]
    else:
        forced = lambda rows, cols, m_o: n_wk[rows, cols] > 0
        # a word row with no live topic is a "new" word: only births (33) create it
        allowed = lambda rows, cols, c_tot: live[cols] & (c_tot > 0)

    # The scan runs on the transposed view: rows of the scan = topics (customers), so that the
    # row sum is M_k (words of the topic) and the column sum c_v (topics of the word).
    pbT, M, c = _diagonal_scan(
        k1, phi_bar.T, jnp.sum(phi_bar, 0, dtype=jnp.int32), jnp.sum(phi_bar, 1, dtype=jnp.int32),
        lambda r, cc, m_o, c_o: logodds(cc, r, m_o, c_o),
        lambda r, cc, m_o: forced(cc, r, m_o),
        lambda r, cc, c_tot: allowed(cc, r, c_tot), cfg.unroll,
    )
    phi_bar = pbT.T
    overflow = jnp.int32(0)
    if not finite:
        rate = jax.nn.sigmoid(ibp_mass(k_star - 1.0, gamma, xi, zeta) + log_ratio_add_empty(M, n_k, beta))
        rate = jnp.where(live, rate, 0.0)
        free = (c == 0) & (jnp.arange(V) >= W)
        owner, slots, ok, overflow = _allocate(k2, rate, K, free, V - W)
        phi_bar = phi_bar.astype(jnp.int8).at[slots[: V - W], owner].add(ok.astype(jnp.int8)) > 0
    return phi_bar, overflow


# ============================================================================ token sampling
def _inverse_cdf(p, u):
    """Index drawn from unnormalised probabilities ``p`` (..., K) with uniforms ``u`` (...)."""
    cs = jnp.cumsum(p, axis=-1)
    t = u * cs[..., -1]
    k = jnp.sum(cs <= t[..., None], axis=-1)
    K = p.shape[-1]
    last = K - 1 - jnp.argmax(jnp.flip(p > 0, axis=-1), axis=-1)  # guards t rounding up to the total
    return jnp.minimum(k, last).astype(jnp.int32)


def _denominator(state: State, cfg: Config, phi_bar):
    if cfg.sparse:
        return jnp.sum(phi_bar, axis=0).astype(jnp.float32) * state.beta
    return jnp.full((cfg.n_topics,), cfg.n_words * state.beta, jnp.float32)


def _assign_exact(key, state: State, tokens: Tokens, cfg: Config, theta_bar, phi_bar):
    """The exact sequential collapsed Gibbs sweep over tokens, eq. (35)-(38)."""
    alpha, beta = state.alpha, state.beta
    den0 = _denominator(state, cfg, phi_bar)
    u = jax.random.uniform(key, state.z.shape)

    def body(carry, xs):
        n_dk, n_wk, n_k = carry
        d, v, k0, ui = xs
        n_dk = n_dk.at[d, k0].add(-1)
        n_wk = n_wk.at[v, k0].add(-1)
        n_k = n_k.at[k0].add(-1)
        p = (alpha + n_dk[d]) * (beta + n_wk[v]) / (den0 + n_k)
        if cfg.focused:
            p = jnp.where(theta_bar[d], p, 0.0)
        if cfg.sparse:
            p = jnp.where(phi_bar[v], p, 0.0)
        k = _inverse_cdf(p, ui)
        return (n_dk.at[d, k].add(1), n_wk.at[v, k].add(1), n_k.at[k].add(1)), k

    (n_dk, n_wk, n_k), z = jax.lax.scan(body, (state.n_dk, state.n_wk, state.n_k),
                                        (tokens.doc, tokens.word, state.z, u))
    return z, n_dk, n_wk, n_k


def _mix32(x):
    """A 32-bit integer finaliser (lowbias32): a counter-based hash for cheap uniforms."""
    x = x ^ (x >> 16)
    x = x * jnp.uint32(0x7FEB352D)
    x = x ^ (x >> 15)
    x = x * jnp.uint32(0x846CA68B)
    return x ^ (x >> 16)


def _uniform_from_bits(bits):
    return (bits >> 8).astype(jnp.float32) * jnp.float32(1.0 / 16777216.0)


def _assign_parallel(key, state: State, tokens: Tokens, cfg: Config, theta_bar, phi_bar):
    """Batched sweep: every token of a batch is drawn from the counts at the start of the batch
    (minus its own assignment); counts are then updated with the batch's changes."""
    B, nb, N, K = cfg.batch, cfg.n_batches, cfg.n_tokens, cfg.n_topics
    pad = nb * B - N
    alpha, beta = state.alpha, state.beta
    den0 = _denominator(state, cfg, phi_bar)
    padi = lambda a: jnp.concatenate([a, jnp.zeros((pad,), a.dtype)]) if pad else a
    doc_p, word_p, z_p = padi(tokens.doc), padi(tokens.word), padi(state.z)
    dstart_p, wstart_p, wlen_p = padi(tokens.doc_start), padi(tokens.word_start), padi(tokens.word_len)
    wpos_p = padi(tokens.word_pos)
    valid_p = jnp.arange(nb * B) < N
    seeds = jax.random.bits(key, (nb,), jnp.uint32)
    M = cfg.mh_steps
    lane = jnp.arange(B, dtype=jnp.uint32)
    Kf = jnp.float32(K)

    def body(carry, bi):
        z_p, n_dk, n_wk, n_k = carry
        sl = lambda a: jax.lax.dynamic_slice(a, (bi * B,), (B,))
        d, v, zo, ok = sl(doc_p), sl(word_p), sl(z_p), sl(valid_p)
        ctr = _mix32(lane + seeds[bi] * jnp.uint32(0x9E3779B9))
        unif = lambda m: _uniform_from_bits(
            _mix32(ctr ^ (jnp.asarray(m + 1, jnp.uint32) * jnp.uint32(0x85EBCA6B))))
        if M == 0:
            own = jnp.arange(K)[None, :] == zo[:, None]
            p = ((alpha + (n_dk[d] - own)) * (beta + (n_wk[v] - own)) / (den0 + (n_k - own)))
            if cfg.focused:
                p = jnp.where(theta_bar[d], p, 0.0)
            if cfg.sparse:
                p = jnp.where(phi_bar[v], p, 0.0)
            zn = _inverse_cdf(p, unif(0))
        else:
            n_dk_f, n_wk_f = n_dk.reshape(-1), n_wk.reshape(-1)
            tb_f, pb_f = theta_bar.reshape(-1), phi_bar.reshape(-1)
            dK, vK = d * K, v * K
            # The proposals pick a random *other* token of the document (word), so that their
            # densities q(k) = (n^{-i}_dk + α)/(n_d - 1 + K α) and (n^{-i}_wk + β)/(n_w - 1 + K β) do
            # not depend on the token's own topic: independence proposals, valid for any number
            # of MH steps.
            nd_o = tokens.n_d[d] - 1
            ds = sl(dstart_p)
            dpos = bi * B + jnp.arange(B, dtype=jnp.int32) - ds
            ws, wl, wpos = sl(wstart_p), sl(wlen_p), sl(wpos_p)
            nw_o = wl - 1

            def target(k):
                """Conditional (35)-(38) of topic k from the batch-start counts minus the token, and
                the two counts it gathered (reused as proposal densities: fewer gathers)."""
                own = (k == zo).astype(jnp.int32)
                a = n_dk_f[dK + k] - own
                b = n_wk_f[vK + k] - own
                p = (alpha + a) * (beta + b) / (den0[k] + (n_k[k] - own))
                if cfg.focused:
                    p = jnp.where(tb_f[dK + k], p, 0.0)
                if cfg.sparse:
                    p = jnp.where(pb_f[vK + k], p, 0.0)
                return p, a, b

            def pick(x_u, n_o, mass, pos, fetch):
                x = x_u * (n_o.astype(jnp.float32) + Kf * mass)
                j = jnp.minimum(x.astype(jnp.int32), jnp.maximum(n_o - 1, 0))
                j = j + (j >= pos)  # skip the token itself
                uni = jnp.minimum(((x - n_o) / mass).astype(jnp.int32), K - 1)
                return jnp.where(x < n_o, fetch(j), uni)

            def mh(m, c, doc_prop):
                s, ps, a_s, b_s = c
                x_u, a_u = unif(2 * m), unif(2 * m + 1)
                if doc_prop:
                    t = pick(x_u, nd_o, alpha, dpos, lambda j: z_p[ds + j])
                else:
                    t = pick(x_u, nw_o, beta, wpos, lambda j: z_p[tokens.by_word[ws + j]])
                pt, a_t, b_t = target(t)
                # q(k) ∝ n^{-i}_dk + α (document proposal) or n^{-i}_wk + β (word proposal)
                qs, qt = (a_s + alpha, a_t + alpha) if doc_prop else (b_s + beta, b_t + beta)
                acc = a_u * ps * qt < pt * qs
                keep = lambda new, old: jnp.where(acc, new, old)
                return keep(t, s), keep(pt, ps), keep(a_t, a_s), keep(b_t, b_s)

            def pair(i, c):
                return mh(2 * i + 1, mh(2 * i, c, True), False)

            c = jax.lax.fori_loop(0, M // 2, pair, (zo, *target(zo)))
            if M % 2:
                c = mh(M - 1, c, True)
            zn = c[0]
        zn = jnp.where(ok, zn, zo)
        inc = ok.astype(jnp.int32)
        n_dk = n_dk.at[d, zo].add(-inc).at[d, zn].add(inc)
        n_wk = n_wk.at[v, zo].add(-inc).at[v, zn].add(inc)
        n_k = n_k.at[zo].add(-inc).at[zn].add(inc)
        z_p = jax.lax.dynamic_update_slice(z_p, zn, (bi * B,))
        return (z_p, n_dk, n_wk, n_k), None

    (z_p, n_dk, n_wk, n_k), _ = jax.lax.scan(body, (z_p, state.n_dk, state.n_wk, state.n_k),
                                             jnp.arange(nb, dtype=jnp.int32))
    return z_p[:N], n_dk, n_wk, n_k


# ============================================================================ hyperparameters
def _slice_log(key, x0, logf, w=0.7, max_out=8, max_in=25):
    """One univariate slice-sampling update (Neal 2003): stepping out, then shrinkage, bounded.

    Written as a single ``while_loop`` whose phase (0: step out left, 1: step out right, 2: shrink)
    is part of the carry, so that ``logf`` is traced twice only (compile time)."""
    # all random numbers drawn up front: RNG calls inside loop bodies are costly to compile
    u = jax.random.uniform(key, (2 + 2 * max_out + max_in,), minval=1e-7)
    y = logf(x0) + jnp.log(u[0])
    L0 = x0 - w * u[1]

    def cond(c):
        phase, i, x, L, R, point, done = c
        return ~done & (i < 2 * max_out + max_in)

    def body(c):
        phase, i, x, L, R, point, _ = c
        inside = logf(point) > y
        out0 = (phase == 0) & inside  # left end still inside the slice: step further out
        out1 = (phase == 1) & inside
        accept = (phase == 2) & inside
        reject = (phase == 2) & ~inside  # shrink the interval towards x0
        L = jnp.where(out0, L - w, jnp.where(reject & (point < x0), point, L))
        R = jnp.where(out1, R + w, jnp.where(reject & (point >= x0), point, R))
        x = jnp.where(accept, point, x)
        phase = jnp.where(phase == 0, jnp.where(out0 & (i + 1 < max_out), 0, 1),
                          jnp.where(phase == 1, jnp.where(out1 & (i + 1 < 2 * max_out), 1, 2), 2))
        prop = L + u[2 + i] * (R - L)
        point = jnp.where(phase == 0, L, jnp.where(phase == 1, R, prop))
        return phase, i + 1, x, L, R, point, accept

    c0 = (jnp.int32(0), jnp.int32(0), x0, L0, L0 + w, L0, jnp.bool_(False))
    _, _, x, *_ = jax.lax.while_loop(cond, body, c0)
    return x


def _gamma(key, shape, n_try: int = 16):
    """One Gamma(shape, 1) draw by Marsaglia & Tsang (2000) with ``n_try`` vectorised candidates
    (each accepted with probability > 0.95 for shape ≥ 1, so all fail with probability < 1e-20) and
    the boost Gamma(a) = Gamma(a + 1) U^{1/a} for shape < 1.  Loop-free (cheap to compile, unlike
    ``jax.random.gamma``)."""
    r = jax.random.uniform(key, (3, n_try + 1), minval=1e-7)
    a = jnp.asarray(shape, jnp.float32)
    a1 = jnp.where(a < 1, a + 1, a)
    d = a1 - 1.0 / 3.0
    c = 1.0 / jnp.sqrt(9.0 * d)
    x = jnp.sqrt(-2.0 * jnp.log(r[0, :n_try])) * jnp.cos(2.0 * jnp.pi * r[1, :n_try])  # Box-Muller
    v = (1 + c * x) ** 3
    u = r[2, :n_try]
    ok = (v > 0) & (jnp.log(u) < 0.5 * x * x + d - d * v + d * jnp.log(jnp.maximum(v, _TINY)))
    g = d * v[jnp.argmax(ok)]
    boost = jnp.where(a < 1, r[2, n_try] ** (1.0 / a), 1.0)
    return g * boost


def _mh_log(key, x0, logf, scale, steps):
    """Random-walk Metropolis-Hastings on x (``steps`` proposals N(x, scale²))."""

    u = jax.random.uniform(key, (3, steps + 1), minval=1e-7)
    step = scale * jnp.sqrt(-2.0 * jnp.log(u[0])) * jnp.cos(2.0 * jnp.pi * u[1])  # Box-Muller normals
    step = step.at[0].set(0.0)

    def body(i, c):
        # iteration 0 only evaluates logf(x0) (one traced copy of logf: compile time)
        x, fx = c
        x1 = x + step[i]
        f1 = logf(x1)
        acc = (i == 0) | (jnp.log(u[2, i]) < f1 - fx)
        return jnp.where(acc, x1, x), jnp.where(acc, f1, fx)

    x, _ = jax.lax.fori_loop(0, steps + 1, body, (x0, jnp.float32(0.0)))
    return x


def _count_histogram(counts, length: int):
    """h[c] = number of cells holding count c (c ≥ 1; h[0] = 0), for cells with counts < length."""
    h = jnp.bincount(counts.reshape(-1), length=length)
    return h.at[0].set(0)


def _loggamma_sum(hist, a):
    """Σ_cells [log Γ(a + n) − log Γ(a)] over the non-zero cells, from their count histogram."""
    c = jnp.arange(hist.shape[0], dtype=jnp.float32)
    return jnp.sum(hist * (gammaln(a + c) - gammaln(a)))


def _hyper_step(key, state: State, cfg: Config) -> State:
    """Sec. 4.5: α, β (39)-(40) by slice sampling, η, γ conjugate Gamma, δ, ξ by MH on (41)-(43)."""
    ks = jax.random.split(key, 6)
    s = cfg.sample
    live = jnp.any(state.theta_bar, axis=0)
    k_star = jnp.sum(live)
    if "alpha" in s:
        # eq. (23) from the histogram of the counts n_kd: O(D + max n_kd) per evaluation
        hist = _count_histogram(state.n_dk, cfg.max_doc_len + 1) if cfg.max_doc_len else None
        m = jnp.sum(state.theta_bar, axis=1).astype(jnp.float32)
        n_d = jnp.sum(state.n_dk, axis=1).astype(jnp.float32)
        ms = jnp.maximum(m, 1.0)

        def f(x):
            a = jnp.exp(x)
            if hist is None:
                return log_marginal_z(state.n_dk, state.theta_bar, a)
            t1 = jnp.where(n_d > 0, gammaln(ms * a) - gammaln(ms * a + n_d), 0.0)
            return jnp.sum(t1) + _loggamma_sum(hist, a)

        state = state._replace(alpha=jnp.exp(_slice_log(ks[0], jnp.log(state.alpha), f)))
    if "beta" in s:
        W = cfg.n_words
        if cfg.sparse:
            M = jnp.sum(state.phi_bar, axis=0)
        else:
            M = jnp.full((cfg.n_topics,), W)
        M = jnp.where(live, M, 0)
        hist = _count_histogram(state.n_wk, cfg.max_word_count + 1) if cfg.max_word_count else None
        Mf = jnp.maximum(M.astype(jnp.float32), 1.0)
        nk = state.n_k.astype(jnp.float32)

        def f(x):  # eq. (24)
            b = jnp.exp(x)
            if hist is None:
                return log_marginal_w(state.n_wk, state.n_k, M, b)
            t1 = jnp.where(state.n_k > 0, gammaln(Mf * b) - gammaln(Mf * b + nk), 0.0)
            return jnp.sum(t1) + _loggamma_sum(hist, b)

        state = state._replace(beta=jnp.exp(_slice_log(ks[1], jnp.log(state.beta), f)))
    if cfg.focused:
        D = cfg.n_docs
        c_k = jnp.sum(state.theta_bar, axis=0)
        if "eta" in s:  # Gamma(a + K*, b + Σ_j ...) : (43) is η^{K*} exp(-η H)
            a, b = cfg.eta_prior
            H = _ibp_harmonic(D, state.delta, cfg.sigma, D)
            state = state._replace(eta=_gamma(ks[2], a + k_star) / (b + H))
        if "delta" in s:
            sig = cfg.sigma
            f = lambda x: ibp_log_likelihood(c_k, D, state.eta, jnp.exp(x) - sig, sig, D)
            x = _mh_log(ks[3], jnp.log(state.delta + sig), f, cfg.mh_scale, cfg.mh_hyper_steps)
            state = state._replace(delta=jnp.exp(x) - sig)
    if cfg.sparse:
        # word IBP: customers are the K* live topics, features the words (observed and phantom)
        c_v = jnp.sum(state.phi_bar & live[None, :], axis=1)
        n_feat = jnp.sum(c_v > 0)
        kmax = cfg.n_topics
        if "gamma" in s:
            a, b = cfg.gamma_prior
            H = _ibp_harmonic(k_star, state.xi, cfg.zeta, kmax)
            state = state._replace(gamma=_gamma(ks[4], a + n_feat) / (b + H))
        if "xi" in s:
            zt = cfg.zeta
            f = lambda x: ibp_log_likelihood(c_v, k_star, state.gamma, jnp.exp(x) - zt, zt, kmax)
            x = _mh_log(ks[5], jnp.log(state.xi + zt), f, cfg.mh_scale, cfg.mh_hyper_steps)
            state = state._replace(xi=jnp.exp(x) - zt)
    return state


# ============================================================================ one sweep
def sweep(state: State, key, tokens: Tokens, cfg: Config) -> State:
    """One iteration of Algorithm 1 without the hyperparameters (see :func:`hyper_update`): topic
    activations, word activations and topic assignments."""
    # settings that only the hyperparameter step reads are normalised: fewer compilations
    return _sweep_jit(state, key, tokens, replace(cfg, sample=(), eta_prior=(1.0, 1.0), gamma_prior=(1.0, 1.0),
                                                  max_doc_len=0, max_word_count=0))


@partial(jax.jit, static_argnames=("cfg",))
def _sweep_jit(state: State, key, tokens: Tokens, cfg: Config) -> State:
    k_t, k_w, k_z = jax.random.split(key, 3)
    theta_bar, phi_bar = state.theta_bar, state.phi_bar
    of_t = of_w = jnp.int32(0)
    if cfg.focused:
        theta_bar, of_t = _topic_step(k_t, state, tokens, cfg)
    if cfg.sparse:
        phi_bar, of_w = _word_step(k_w, state, theta_bar, cfg)
    elif cfg.focused:
        phi_bar = state.phi_bar
    assign = _assign_exact if cfg.mode == "exact" else _assign_parallel
    z, n_dk, n_wk, n_k = assign(k_z, state, tokens, cfg, theta_bar, phi_bar)
    state = state._replace(z=z, n_dk=n_dk, n_wk=n_wk, n_k=n_k, theta_bar=theta_bar, phi_bar=phi_bar,
                           overflow_topics=of_t.astype(jnp.int32), overflow_words=of_w.astype(jnp.int32))
    return state


def _pow2(n) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


def _canon(cfg: Config) -> Config:
    """The settings that do not matter outside the token sweep, normalised (fewer compilations)."""
    return replace(cfg, mode="exact", batch=1, mh_steps=0, unroll=1)


@partial(jax.jit, static_argnames=("cfg",))
def _hyper_jit(state: State, key, cfg: Config) -> State:
    return _hyper_step(key, state, cfg)


def hyper_update(state: State, key, cfg: Config) -> State:
    """The hyperparameter step of Algorithm 1 (sec. 4.5), for the names in ``cfg.sample``."""
    return _hyper_jit(state, key, _canon(cfg)) if cfg.sample else state


# ============================================================================ posterior means
class Averages(NamedTuple):
    phi_sum: jax.Array  # (W, K)
    theta_sum: jax.Array  # (D, K)
    n: jax.Array  # (K,) samples in the current lifetime of each slot


def _sample_means(state: State, cfg: Config):
    """Posterior means of one sample: φ (47), Rao-Blackwellised where n_vk = 0, and θ (46)."""
    W = cfg.n_words
    live = jnp.any(state.theta_bar, axis=0)
    beta, alpha = state.beta, state.alpha
    n_wk = state.n_wk[:W].astype(jnp.float32)
    n_k = state.n_k.astype(jnp.float32)
    if cfg.sparse:
        pb = state.phi_bar
        M = jnp.sum(pb, axis=0)
        c_v = jnp.sum(pb & live[None, :], axis=1)[:W]
        pbW = pb[:W]
        m_o = M[None, :] - pbW.astype(jnp.int32)
        c_o = c_v[:, None] - pbW.astype(jnp.int32)
        k_star = jnp.sum(live)
        lo = word_activation_logodds(state.n_k[None, :], m_o, c_o, k_star, beta, state.gamma, state.xi,
                                     cfg.zeta, W, cfg.vocabulary == "finite")
        p_on = jnp.where(state.n_wk[:W] > 0, 1.0, jax.nn.sigmoid(lo))
        phi = jnp.where(state.n_wk[:W] > 0, (beta + n_wk) / (M * beta + n_k),
                        p_on * beta / ((m_o + 1) * beta + n_k))
    else:
        phi = (beta + n_wk) / (W * beta + n_k)
    tb = state.theta_bar
    m_d = jnp.sum(tb, axis=1, keepdims=True).astype(jnp.float32)
    n_d = jnp.sum(state.n_dk, axis=1, keepdims=True).astype(jnp.float32)
    theta = jnp.where(tb, alpha + state.n_dk, 0.0) / (m_d * alpha + n_d)
    return phi, theta, live


def sample_means(state: State, cfg: Config):
    """(φ (W x K), θ (D x K), live (K,)) of one sample: eq. (47) (Rao-Blackwellised) and (46)."""
    return _means_jit(state, replace(_canon(cfg), sample=(), eta_prior=(1.0, 1.0), gamma_prior=(1.0, 1.0),
                                     max_doc_len=0, max_word_count=0))


@partial(jax.jit, static_argnames=("cfg",))
def _means_jit(state, cfg):
    return _sample_means(state, cfg)


@jax.jit
def _add_sample(avg: Averages, phi, theta, live) -> Averages:
    return Averages(
        jnp.where(live[None, :], avg.phi_sum + phi, 0.0),
        jnp.where(live[None, :], avg.theta_sum + theta, 0.0),
        jnp.where(live, avg.n + 1, 0),
    )


def accumulate(avg: Averages | None, state: State, cfg: Config) -> Averages:
    """Add the sample's posterior means; a slot whose topic is dead restarts from zero."""
    if avg is None:
        K = cfg.n_topics
        avg = Averages(jnp.zeros((cfg.n_words, K), jnp.float32), jnp.zeros((cfg.n_docs, K), jnp.float32),
                       jnp.zeros((K,), jnp.int32))
    return _add_sample(avg, *sample_means(state, cfg))


@jax.jit
def _loglik(phi, theta, doc_ids, word_ids, counts):
    p = jnp.sum(phi[word_ids] * theta[doc_ids], axis=1)
    return jnp.sum(counts * jnp.log(jnp.maximum(p, 1e-30)))


# ============================================================================ document completion
@partial(jax.jit, static_argnames=("n_sweeps", "burn_in", "focused"))
def _fold_in(key, phi, c_train, d_train, alpha, eta, delta, sigma, doc, word, n_d, n_docs_arr,
             n_sweeps: int, burn_in: int, focused: bool):
    """Sample the topics of new documents with Φ fixed (exact sequential sweeps) and return the
    average of θ (46) over the sweeps after ``burn_in`` (T x D).  With topic masks, θ̄ of the new
    documents is sampled by (29) with the training documents as the other customers."""
    D = n_docs_arr.shape[0]
    K = phi.shape[1]
    k0, key = jax.random.split(key)
    # initial assignments from p(k | w) ∝ φ_wk (every word has φ_w· > 0)
    pw = phi[word]
    z = _inverse_cdf(pw, jax.random.uniform(k0, word.shape))
    n_dk = jnp.zeros((D, K), jnp.int32).at[doc, z].add(1)
    tb = (n_dk > 0) if focused else jnp.ones((D, K), bool)
    c_train = c_train.astype(jnp.float32)

    def one(carry, i):
        z, n_dk, tb, acc = carry
        k = jax.random.fold_in(key, i)
        ka, kb = jax.random.split(k)
        if focused:
            m_sum = jnp.sum(tb, axis=1, dtype=jnp.int32)

            def logodds(rows, cols, m_o, c_o):
                return topic_activation_logodds(n_d[rows], m_o, c_train[cols], d_train, alpha, eta, delta, sigma)

            tb, _, _ = _diagonal_scan(
                ka, tb, m_sum, jnp.sum(tb, 0, dtype=jnp.int32), logodds,
                lambda r, c, m_o: n_dk[r, c] > 0, lambda r, c, ct: c_train[c] > 0)
        u = jax.random.uniform(kb, z.shape)

        def body(n_dk, xs):
            d, v, k0, ui = xs
            n_dk = n_dk.at[d, k0].add(-1)
            p = (alpha + n_dk[d]) * phi[v]
            if focused:
                p = jnp.where(tb[d], p, 0.0)
            knew = _inverse_cdf(p, ui)
            return n_dk.at[d, knew].add(1), knew

        n_dk, z = jax.lax.scan(body, n_dk, (doc, word, z, u))
        m_d = jnp.sum(tb, axis=1, keepdims=True).astype(jnp.float32)
        theta = jnp.where(tb, alpha + n_dk, 0.0) / (m_d * alpha + n_d[:, None])
        acc = acc + jnp.where(i >= burn_in, theta, 0.0)
        return (z, n_dk, tb, acc), None

    (z, n_dk, tb, acc), _ = jax.lax.scan(one, (z, n_dk, tb, jnp.zeros((D, K), jnp.float32)),
                                         jnp.arange(n_sweeps))
    theta = acc / (n_sweeps - burn_in)
    return (theta / jnp.sum(theta, axis=1, keepdims=True)).T


# ============================================================================ enumeration (tests)
def enumerate_lda_posterior(doc, word, n_topics, n_words, alpha, beta):
    """Exact LDA posterior p(z | w) ∝ Π_d Π_k Γ(α+n_kd)/Γ(Kα+n_d) · Π_k Π_v Γ(β+n_vk)/Γ(Wβ+n_k)
    (the product of (23) and (24) with all masks on) over all K^N assignments, in float64 numpy.
    Returns (assignments (K^N, N), probabilities)."""
    from scipy.special import gammaln as g

    doc, word = np.asarray(doc), np.asarray(word)
    N, K = doc.size, n_topics
    D = int(doc.max()) + 1
    Z = np.array(np.meshgrid(*[np.arange(K)] * N, indexing="ij")).reshape(N, -1).T
    logp = np.empty(len(Z))
    for i, z in enumerate(Z):
        ndk = np.zeros((D, K))
        nwk = np.zeros((n_words, K))
        np.add.at(ndk, (doc, z), 1)
        np.add.at(nwk, (word, z), 1)
        logp[i] = (g(alpha + ndk).sum() - g(K * alpha + ndk.sum(1)).sum()
                   + g(beta + nwk).sum() - g(n_words * beta + nwk.sum(0)).sum())
    p = np.exp(logp - logp.max())
    return Z, p / p.sum()


# ============================================================================ estimator
class LIDA(TopicModelBase):
    """Collapsed Gibbs sampler for LIDA, the four-parameter FTM, SSTM and LDA (sec. 4).

    Parameters
    ----------
    variant: ``"lida"``, ``"ftm"``, ``"sstm"`` or ``"lda"`` (table in the module docstring).
    n_components: K_max, the number of topic slots (LDA/SSTM: the number of topics; LIDA/FTM: the
        truncation, grown automatically with ``grow="auto"``).
    max_iter: number of sweeps; ``burn_in``: sweeps before posterior averaging (default half).
    mode: ``"parallel"`` (batched, fast; see module docstring) or ``"exact"`` (sequential Gibbs).
    batch_size: tokens per batch of the parallel sweep; ``mh_steps``: Metropolis-Hastings steps per
        token in the parallel sweep (0: dense categorical over K_max).
    init_topics: topics used by the random initial assignment (default: all slots for LDA/SSTM,
        ``min(n_components, 20)`` for LIDA/FTM).
    init: ``"random"`` (tokens uniform over ``init_topics`` topics: every document starts with
        nearly all of them, a dense Θ̄) or ``"ibp"`` (LIDA/FTM: Θ̄ drawn from the three-parameter IBP
        prior of sec. 2.1 with the initial η, δ, σ, each token uniform over its document's topics;
        K_max is raised to fit the draw).  The chain tends to stay in the regime it starts in (see
        "Topic births" in the module docstring), so this choice matters for LIDA/FTM.
    alpha, beta, eta, delta, gamma, xi: initial hyperparameters (sampled unless listed in
        ``fixed_hyper`` or ``sample_hyper=False``); sigma, zeta: fixed discounts in [0, 1).
    eta_prior, gamma_prior: (shape, rate) of the Gamma priors of η and γ.
    vocabulary: ``"finite"`` (eq. 34, the W observed words) or ``"infinite"`` (eq. 32-33, with
        phantom rows for unobserved words; ``n_phantom`` of them initially, grown as needed).
    hyper_start: first sweep with hyperparameter updates (default ``max_iter // 4``).  Sampling α
        and β from the start of a randomly initialised chain drives them to large values that keep
        the assignments uniform (the random state is best explained by flat Dirichlets); a delay,
        as in Mallet's ``optimize_burn_in``, avoids that trap.
    grow: ``"auto"`` (double K_max / phantom rows when a sweep runs out) or ``"error"``.
    transform_iter: sweeps of the document-completion sampler (half of them burn-in).
    eval_every: record the training log-likelihood every so many sweeps (0: never).
    random_state, progress: seed (``jax.random.key``) and tqdm progress bar over sweeps.

    Fitted attributes: ``phi_`` (W x T) and ``theta_`` (T x D) posterior means over the live topics
    (columns of ``phi_`` are renormalised to one, except with the infinite vocabulary where the
    missing mass belongs to unobserved words; ``theta_`` is renormalised per document because
    topics born during the averaging window have fewer samples),
    ``topic_slots_`` (their slots), ``theta_bar_`` (T x D) and ``phi_bar_`` (W x T) masks of the
    last sample, ``doc_freq_`` (documents per topic), ``n_topics_``, ``hyper_trace_`` (one list per
    hyperparameter, one value per sweep), ``history_`` (per sweep: live topics, seconds, and every
    ``eval_every`` sweeps the training log-likelihood), ``n_iter_``, ``n_components_`` (final K_max);
    not saved: ``state_`` (the last :class:`State`), ``config_``, ``tokens_``.
    """

    _saved_arrays = ("phi_", "theta_", "theta_bar_", "phi_bar_", "doc_freq_", "topic_slots_")
    _saved_meta = ("hyper_", "hyper_trace_", "history_", "n_iter_", "n_topics_", "n_components_",
                   "n_train_docs_")

    def __init__(self, variant="lida", n_components=100, *, max_iter=200, burn_in=None, mode="parallel",
                 batch_size=65536, mh_steps=4, init_topics=None, alpha=0.1, beta=0.01, eta=5.0, delta=1.0,
                 sigma=0.0, gamma=50.0, xi=1.0, zeta=0.0, sample_hyper=True, fixed_hyper=(),
                 eta_prior=(1.0, 1.0), gamma_prior=(1.0, 1.0), vocabulary="finite", n_phantom=None,
                 hyper_start=None, grow="auto", transform_iter=40, eval_every=10, init="random", random_state=0,
                 progress=True):
        self.variant = variant
        self.n_components = n_components
        self.max_iter = max_iter
        self.burn_in = burn_in
        self.mode = mode
        self.batch_size = batch_size
        self.mh_steps = mh_steps
        self.init_topics = init_topics
        self.alpha = alpha
        self.beta = beta
        self.eta = eta
        self.delta = delta
        self.sigma = sigma
        self.gamma = gamma
        self.xi = xi
        self.zeta = zeta
        self.sample_hyper = sample_hyper
        self.fixed_hyper = fixed_hyper
        self.eta_prior = eta_prior
        self.gamma_prior = gamma_prior
        self.vocabulary = vocabulary
        self.n_phantom = n_phantom
        self.hyper_start = hyper_start
        self.grow = grow
        self.transform_iter = transform_iter
        self.init = init
        self.eval_every = eval_every
        self.random_state = random_state
        self.progress = progress

    # ------------------------------------------------------------------ checks
    def _check_params(self):
        if self.variant not in VARIANTS:
            raise ValueError(f"unknown variant {self.variant!r}; choose one of {list(VARIANTS)}")
        if not isinstance(self.n_components, (int, np.integer)) or self.n_components < 1:
            raise ValueError(f"n_components (K_max) must be a positive integer, got {self.n_components!r}")
        if self.mode not in ("exact", "parallel"):
            raise ValueError(f"mode must be 'exact' or 'parallel', got {self.mode!r}")
        if not isinstance(self.max_iter, (int, np.integer)) or self.max_iter < 1:
            raise ValueError(f"max_iter must be a positive integer, got {self.max_iter!r}")
        if self.burn_in is not None and not (0 <= self.burn_in):
            raise ValueError(f"burn_in must be >= 0, got {self.burn_in!r}")
        if self.vocabulary not in ("finite", "infinite"):
            raise ValueError(f"vocabulary must be 'finite' or 'infinite', got {self.vocabulary!r}")
        if self.init not in ("random", "ibp"):
            raise ValueError(f"init must be 'random' or 'ibp', got {self.init!r}")
        if self.grow not in ("auto", "error"):
            raise ValueError(f"grow must be 'auto' or 'error', got {self.grow!r}")
        if not isinstance(self.mh_steps, (int, np.integer)) or self.mh_steps < 0:
            raise ValueError(f"mh_steps must be a non-negative integer, got {self.mh_steps!r}")
        if not isinstance(self.batch_size, (int, np.integer)) or self.batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {self.batch_size!r}")
        for name in ("alpha", "beta", "eta", "gamma"):
            v = getattr(self, name)
            if not (np.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be a positive number, got {v!r}")
        for name in ("sigma", "zeta"):
            v = getattr(self, name)
            if not (0 <= v < 1):
                raise ValueError(f"{name} (a discount) must be in [0, 1), got {v!r}")
        if not self.delta > -self.sigma:
            raise ValueError(f"delta must be > -sigma = {-self.sigma}, got {self.delta!r}")
        if not self.xi > -self.zeta:
            raise ValueError(f"xi must be > -zeta = {-self.zeta}, got {self.xi!r}")
        bad = [h for h in self.fixed_hyper if h not in HYPER]
        if bad:
            raise ValueError(f"fixed_hyper: unknown hyperparameter {bad[0]!r}; known: {list(HYPER)}")
        if self.hyper_start is not None and self.hyper_start < 0:
            raise ValueError(f"hyper_start must be >= 0, got {self.hyper_start!r}")
        if self.init_topics is not None and not (1 <= self.init_topics <= self.n_components):
            raise ValueError(f"init_topics must be in [1, n_components={self.n_components}], got {self.init_topics!r}")

    def _config(self, corpus: Corpus, n_topics: int, n_rows: int) -> Config:
        sample = () if not self.sample_hyper else tuple(h for h in HYPER if h not in self.fixed_hyper)
        if self.variant in ("lda", "sstm"):
            sample = tuple(h for h in sample if h not in ("eta", "delta"))
        if self.variant in ("lda", "ftm"):
            sample = tuple(h for h in sample if h not in ("gamma", "xi"))
        return Config(
            variant=self.variant, n_topics=int(n_topics), n_docs=corpus.n_docs, n_words=corpus.n_words,
            n_rows=int(n_rows), n_tokens=corpus.n_tokens, vocabulary=self.vocabulary, mode=self.mode,
            batch=int(min(self.batch_size, corpus.n_tokens)), mh_steps=int(self.mh_steps), sample=sample,
            sigma=float(self.sigma), zeta=float(self.zeta), eta_prior=tuple(map(float, self.eta_prior)),
            gamma_prior=tuple(map(float, self.gamma_prior)),
            # histogram lengths rounded up to powers of two: corpora of similar size share compilations
            max_doc_len=_pow2(corpus.doc_lengths.max()), max_word_count=_pow2(corpus.word_counts.max()),
            # the mask scans are sequential: on a GPU each step is a few tiny kernels, and unrolling 8
            # steps per loop iteration cut the KOS topic step from 28 to 19 ms (H100); on CPU it only
            # adds compile time
            unroll=8 if jax.default_backend() == "gpu" else 1,
        )

    # ------------------------------------------------------------------ fitting
    def fit(self, X, y=None):
        self._check_params()
        corpus = self._train_corpus(X)
        if corpus.n_tokens == 0:
            raise ValueError("the corpus has no tokens")
        if self.variant in ("lda", "sstm"):
            corpus.check_topics(self.n_components)
        tokens = make_tokens(corpus)
        W = corpus.n_words
        n_phantom = 0
        if self.vocabulary == "infinite" and self.variant in ("lida", "sstm"):
            n_phantom = int(self.n_phantom) if self.n_phantom is not None else max(64, W // 4)
        K = int(self.n_components)
        theta_init = None
        if self.init == "ibp" and self.variant in ("lida", "ftm"):
            rng = np.random.default_rng(int(self.random_state))
            theta_init = ibp_sample(rng, corpus.n_docs, float(self.eta), float(self.delta), float(self.sigma),
                                    min_features=1)
            K0 = theta_init.shape[1]
            if K0 > K:
                if self.grow == "error":
                    raise ValueError(f"init='ibp' drew {K0} topics, more than n_components={K}; raise "
                                     "n_components or use grow='auto'")
                K = K0 + max(16, K0 // 4)  # room for births
            theta_init = np.pad(theta_init, ((0, 0), (0, K - K0)))
        cfg = self._config(corpus, K, W + n_phantom)
        init_topics = self.init_topics or (K if self.variant in ("lda", "sstm") else min(K, 20))
        hyper = {h: getattr(self, h) for h in HYPER}
        key = jax.random.key(int(self.random_state))
        k_init, k_hyp, key = jax.random.split(key, 3)
        state = init_state(k_init, tokens, cfg, hyper, init_topics, theta_init)
        burn_in = self.max_iter // 2 if self.burn_in is None else min(int(self.burn_in), self.max_iter - 1)
        hyper_start = self.max_iter // 4 if self.hyper_start is None else int(self.hyper_start)
        trace = {h: [] for h in HYPER}
        history = []
        avg = None
        ll_args = (jnp.asarray(corpus.doc_ids), jnp.asarray(corpus.word_ids),
                   jnp.asarray(corpus.counts, jnp.float32))
        bar = None
        if self.progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=self.max_iter, desc=f"LIDA[{self.variant}]")
        try:
            for it in range(self.max_iter):
                t0 = time.perf_counter()
                k_it = jax.random.fold_in(key, it)
                while True:
                    new = sweep(state, k_it, tokens, cfg)
                    of_t, of_w = int(new.overflow_topics), int(new.overflow_words)
                    if of_t == 0 and of_w == 0:
                        break
                    what = (f"{of_t} new topic(s) found no free slot among K_max={cfg.n_topics}" if of_t
                            else f"{of_w} new word(s) found no free phantom row among {cfg.n_rows - W}")
                    if self.grow == "error":
                        raise ValueError(f"sweep {it}: {what}; raise n_components / n_phantom or use grow='auto'")
                    state, cfg = grow_state(state, cfg, n_topics=2 * (cfg.n_topics + of_t) if of_t else None,
                                            n_rows=W + 2 * (cfg.n_rows - W) + of_w if of_w else None)
                    if avg is not None:
                        avg = self._grow_avg(avg, cfg)
                state = new
                if it >= hyper_start:
                    state = hyper_update(state, jax.random.fold_in(k_hyp, it), cfg)
                for h in HYPER:
                    trace[h].append(float(getattr(state, h)))
                live = int(jnp.sum(jnp.any(state.theta_bar, axis=0)))
                rec = {"sweep": it, "n_topics": live}
                if not np.isfinite(trace["alpha"][-1]) or not np.isfinite(trace["beta"][-1]):
                    raise FloatingPointError(f"sweep {it}: hyperparameter update produced a non-finite value")
                evaluate = self.eval_every and ((it + 1) % self.eval_every == 0 or it == self.max_iter - 1)
                if it >= burn_in or evaluate:
                    means = sample_means(state, cfg)
                if it >= burn_in:
                    avg = _add_sample(avg if avg is not None else self._zero_avg(cfg), *means)
                if evaluate:
                    ll = float(_loglik(means[0], means[1], *ll_args))
                    if not np.isfinite(ll):
                        raise FloatingPointError(f"sweep {it}: training log-likelihood is not finite")
                    rec["log_likelihood"] = ll
                    rec["perplexity"] = float(np.exp(-ll / corpus.n_tokens))
                rec["seconds"] = time.perf_counter() - t0
                history.append(rec)
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(topics=live, alpha=f"{trace['alpha'][-1]:.3g}")
        finally:
            if bar is not None:
                bar.close()
        self._finish(state, avg, cfg, corpus)
        self.hyper_trace_ = trace
        self.history_ = history
        self.n_iter_ = self.max_iter
        self.state_, self.config_, self.tokens_ = state, cfg, tokens
        return self

    @staticmethod
    def _zero_avg(cfg: Config) -> Averages:
        K = cfg.n_topics
        return Averages(jnp.zeros((cfg.n_words, K), jnp.float32), jnp.zeros((cfg.n_docs, K), jnp.float32),
                        jnp.zeros((K,), jnp.int32))

    @staticmethod
    def _grow_avg(avg: Averages, cfg: Config) -> Averages:
        dk = cfg.n_topics - avg.n.shape[0]
        return Averages(jnp.pad(avg.phi_sum, ((0, 0), (0, dk))), jnp.pad(avg.theta_sum, ((0, 0), (0, dk))),
                        jnp.pad(avg.n, (0, dk)))

    def _finish(self, state: State, avg: Averages, cfg: Config, corpus: Corpus):
        if avg is None:
            avg = accumulate(None, state, cfg)
        n = np.asarray(avg.n)
        slots = np.flatnonzero(n > 0)
        phi = np.asarray(avg.phi_sum, np.float64)[:, slots] / n[slots]
        if self.vocabulary == "finite" or self.variant in ("lda", "ftm"):
            # Rao-Blackwellised entries (sparse variants) leave the sums within ~1e-3 of one
            phi = phi / phi.sum(0, keepdims=True)
        theta = np.asarray(avg.theta_sum, np.float64)[:, slots] / n[slots]
        theta = theta / np.maximum(theta.sum(1, keepdims=True), 1e-300)
        self.topic_slots_ = slots.astype(np.int64)
        self.phi_ = phi
        self.theta_ = theta.T
        self.theta_bar_ = np.asarray(state.theta_bar)[:, slots].T
        self.phi_bar_ = np.asarray(state.phi_bar)[: cfg.n_words][:, slots]
        self.doc_freq_ = self.theta_bar_.sum(1).astype(np.int64)
        self.n_topics_ = int(slots.size)
        self.n_components_ = int(cfg.n_topics)
        self.n_train_docs_ = int(corpus.n_docs)
        self.hyper_ = {h: float(getattr(state, h)) for h in HYPER}
        self.hyper_.update(sigma=float(self.sigma), zeta=float(self.zeta))

    @classmethod
    def load(cls, path, **params):
        """Load a model saved by :meth:`save` (tuple parameters come back as tuples)."""
        model = super().load(path, **params)
        for name in ("fixed_hyper", "eta_prior", "gamma_prior"):
            setattr(model, name, tuple(getattr(model, name)))
        return model

    # ------------------------------------------------------------------ inference
    def _check_fitted(self):
        super()._check_fitted()
        if not hasattr(self, "phi_"):
            raise ValueError(f"this {type(self).__name__} is not fitted yet; call fit first")

    def _theta_new(self, corpus: Corpus, seed=None) -> np.ndarray:
        """θ (46) of new documents by sampling their topics with Φ fixed at ``phi_`` (T x D)."""
        tokens = make_tokens(corpus)
        h = self.hyper_
        n_sw = max(2, int(self.transform_iter))
        key = jax.random.key(int(self.random_state if seed is None else seed) + 1)
        theta = _fold_in(key, jnp.asarray(self.phi_, jnp.float32), jnp.asarray(self.doc_freq_),
                         float(self.n_train_docs_), h["alpha"], h["eta"], h["delta"], h["sigma"],
                         tokens.doc, tokens.word, tokens.n_d, jnp.zeros(corpus.n_docs),
                         n_sweeps=n_sw, burn_in=n_sw // 2, focused=self.variant in ("lida", "ftm"))
        theta = np.asarray(theta, np.float64)
        if not np.all(np.isfinite(theta)):
            raise FloatingPointError("document completion produced non-finite topic proportions")
        return theta

    def transform(self, X):
        """Topic proportions (46) of documents, ``(n_docs, n_topics_)``."""
        corpus = self._new_corpus(X)
        return self._theta_new(corpus).T

    def fit_transform(self, X, y=None):
        return self.fit(X).theta_.T

    def log_predictive(self, observed: Corpus, heldout: Corpus) -> tuple[float, int]:
        """ln P(w_* | w) of eq. (45) for ``heldout`` given topics sampled on ``observed`` (float64)
        and the number of held-out tokens."""
        observed = self._new_corpus(observed)
        heldout = self._new_corpus(heldout)
        if observed.n_docs != heldout.n_docs:
            raise ValueError(f"observed has {observed.n_docs} documents but heldout has {heldout.n_docs}")
        theta = self._theta_new(observed)
        p = np.einsum("nk,kn->n", self.phi_[heldout.word_ids], theta[:, heldout.doc_ids])
        if np.any(p <= 0) or not np.all(np.isfinite(p)):
            raise FloatingPointError("a held-out word has zero or non-finite predictive probability")
        return float(np.sum(heldout.counts * np.log(p))), heldout.n_tokens

    def perplexity(self, X, heldout=None):
        """Held-out perplexity (44) by document completion.  Without ``heldout`` the documents of
        ``X`` are split token-wise in two halves (``Corpus.completion_split``, seeded by
        ``random_state``): topics are sampled on one half and the other half is scored."""
        corpus = self._new_corpus(X)
        if heldout is None:
            observed, held = corpus.completion_split("tokens", seed=int(self.random_state))
        else:
            observed, held = corpus, self._new_corpus(heldout)
        ll, n = self.log_predictive(observed, held)
        return float(np.exp(-ll / n))

    # ------------------------------------------------------------------ summaries (Figs. 9-10)
    def topics_per_document(self) -> np.ndarray:
        """Number of active topics of every training document (last sample; histogram of Fig. 9)."""
        self._check_fitted()
        return self.theta_bar_.sum(0)

    def topics_per_word(self) -> np.ndarray:
        """Number of topics in which each word is active (Fig. 10; LDA/FTM: all topics)."""
        self._check_fitted()
        return self.phi_bar_.sum(1)

    def words_per_topic(self) -> np.ndarray:
        """Number of active words of every topic."""
        self._check_fitted()
        return self.phi_bar_.sum(0)

    def documents_per_topic(self) -> np.ndarray:
        """Number of documents in which every topic is active."""
        self._check_fitted()
        return self.theta_bar_.sum(1)

    @staticmethod
    def histogram(values) -> np.ndarray:
        """``np.bincount`` of a per-document / per-word count (the histograms of Figs. 9-10)."""
        return np.bincount(np.asarray(values, np.int64))
