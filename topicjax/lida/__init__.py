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

**Layout.**  :mod:`~topicjax.lida.state` (settings, token stream, state), :mod:`~topicjax.lida.ibp`
(closed forms of the priors), :mod:`~topicjax.lida.masks` (activations and births),
:mod:`~topicjax.lida.parallel` and :mod:`~topicjax.lida.sampler` (token sweeps),
:mod:`~topicjax.lida.hyper` (hyperparameters), :mod:`~topicjax.lida.evaluate` (posterior means,
perplexity), :mod:`~topicjax.lida.model` (the estimator :class:`LIDA`).

**State and truncation.**  The number of topics is unbounded in LIDA/FTM; the arrays have a static
number of topic *slots* ``K_max`` (``n_components``) and a slot is a live topic while its column of
Θ̄ has at least one active entry (for LDA/SSTM all ``K_max`` topics are live).  ``n_components`` is at
most the corpus's tokens (a live topic holds a token; checked before anything is allocated, with the
memory of the whole fit, :mod:`~topicjax.lida.validators`).  Counts are dense
``int32``: ``n_dk`` (D x K_max; the paper's n_kd stored document-major so that a document's row is
contiguous), ``n_wk`` (V x K_max), ``n_k`` (K_max), assignments ``z`` (one per token).  With the
infinite vocabulary (sec. 4.2, eq. 32-33) the word rows are the W observed words followed by
"phantom" rows for words that are active in some topic but were never observed; with the finite
vocabulary (eq. 34) there are only the W rows.  The token step of the default sweep touches only
the topics active in the token's document (sparse active lists, :mod:`~topicjax.lida.parallel`), so
its cost per token does not grow with K_max.

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
1.1e-3 of joining a newborn, hence 14 % of newborns catch at least one token in a sweep whose
documents see their own counts (7 % with the old stale sweep), and most newborns die within one or
two sweeps.  The few that catch tokens do grow the set of topics with a sampler whose document
counts are exact (51 -> 118 live topics in 200 exact sweeps on KOS fold 0), but not with the stale
sweep (53-64).  With δ sampled from a random dense start, Θ̄ is nearly full (the prior odds
(c_k − σ)/(D − 1 − c_k + δ + σ) of (29) keep empty entries on when c_k ≈ 0.9 D), the IBP likelihood
(43) drives δ towards 0 and λ ≈ η δ / D with it: hardly any births.  ``init="ibp"`` starts
instead from a sparse Θ̄ drawn from the IBP prior.

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
3. Topic assignments z by eq. (35)-(38) (:mod:`~topicjax.lida.sampler`), ``LIDA(sampler=...)`` =

   * ``"parallel"`` (default): documents in parallel, each document's counts exact token by
     token, n_vk and n_k refreshed between blocks of documents (the AD-LDA approximation, named and
     measured in :mod:`~topicjax.lida.parallel`), each token drawn over its document's active topics;
   * ``"exact"``: the exact sequential collapsed Gibbs sweep (the reference);
   * ``"stale"`` (**approximate**): every token of a batch drawn from the counts of the batch start,
     its own document's counts included; kept for comparison only.

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
CPU and GPU.  The parallel and stale sweeps draw their uniforms from a counter-based integer hash
of the token id seeded per sweep (batch) by ``jax.random``.

>>> import topicjax as tj
>>> from topicjax.lida import LIDA
>>> corpus, _ = tj.datasets.make_bars(n_docs=100, seed=0)
>>> model = LIDA(10, variant="lda", max_iter=20, random_state=0, progress=False).fit(corpus)
>>> model.phi_.shape, model.theta_.shape
((25, 10), (10, 100))
"""

# The estimator and the CPU kernel's switches (kernel.set_backend, kernel.set_threads) are public;
# the sampler's pieces (state, sweeps, IBP closed forms, posterior sums) are imported from their
# modules by the estimator and the tests.
from . import kernel
from .model import LIDA

__all__ = ["LIDA", "kernel"]
