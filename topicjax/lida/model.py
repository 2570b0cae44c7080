"""The LIDA estimator: collapsed Gibbs sampling of LIDA, the four-parameter FTM, SSTM and LDA
(sec. 4), posterior averaging and held-out evaluation (sec. 5.1)."""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

from topicjax.estimator import TopicModelBase
from topicjax.data.corpus import Corpus
from .evaluate import Averages, accumulate, add_sample, fold_in, loglik, sample_means
from .hyper import hyper_update
from .ibp import ibp_sample
from .sampler import sweep
from .state import HYPER, MODES, VARIANTS, Config, State, grow_state, init_state, make_tokens, pow2

__all__ = ["LIDA"]


class LIDA(TopicModelBase):
    """Collapsed Gibbs sampler for LIDA, the four-parameter FTM, SSTM and LDA (sec. 4).

    Parameters
    ----------
    variant: ``"lida"``, ``"ftm"``, ``"sstm"`` or ``"lda"`` (table in the :mod:`topicjax.lida` docstring).
    n_components: K_max, the number of topic slots (LDA/SSTM: the number of topics; LIDA/FTM: the
        truncation, grown automatically with ``grow="auto"``).
    max_iter: number of sweeps; ``burn_in``: sweeps before posterior averaging (default half).
    mode: ``"parallel"`` (default: documents in parallel with their own counts exact token by token,
        the shared word-topic counts refreshed between blocks of documents, the AD-LDA
        approximation; :mod:`topicjax.lida.parallel`), ``"exact"`` (the sequential collapsed Gibbs
        sweep, the reference) or ``"stale"`` (**approximate**: every token of a batch sees the
        counts of the batch start, its own document's included; kept for comparison only).
    batch_size: tokens per block of documents (``"parallel"``: the documents of a block are
        sampled in parallel; one document per block makes the sweep exact) or per batch
        (``"stale"``).  Default: a sixteenth of the corpus, at most 65,536 (``"parallel"``; the
        approximation grows with the share of the corpus in one block), 65,536 (``"stale"``).
    mh_steps: Metropolis-Hastings steps per token with O(1) document/word proposals (``"parallel"``:
        LDA and SSTM only; ``"stale"``), 0 for the dense categorical over the document's active
        topics.  Default: 0, except 4 for ``"stale"``.
    init_topics: topics used by the random initial assignment (default: all slots for LDA/SSTM,
        ``min(n_components, 20)`` for LIDA/FTM).
    init: ``"random"`` (tokens uniform over ``init_topics`` topics: every document starts with
        nearly all of them, a dense Θ̄) or ``"ibp"`` (LIDA/FTM: Θ̄ drawn from the three-parameter IBP
        prior of sec. 2.1 with the initial η, δ, σ, each token uniform over its document's topics;
        K_max is raised to fit the draw).  The chain tends to stay in the regime it starts in (see
        "Topic births" in the :mod:`topicjax.lida` docstring), so this choice matters for LIDA/FTM.
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
                 batch_size=None, mh_steps=None, init_topics=None, alpha=0.1, beta=0.01, eta=5.0, delta=1.0,
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
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {list(MODES)}, got {self.mode!r}")
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
        if self.mh_steps is not None and (not isinstance(self.mh_steps, (int, np.integer)) or self.mh_steps < 0):
            raise ValueError(f"mh_steps must be a non-negative integer or None, got {self.mh_steps!r}")
        if self.mode == "parallel" and self._mh_steps() and self.variant in ("lida", "ftm"):
            raise ValueError(f"mh_steps={self.mh_steps}: the parallel sweep's MH proposals need every topic active "
                             f"in every document (variants 'lda', 'sstm'); use mh_steps=0 for {self.variant!r}")
        if self.batch_size is not None and (not isinstance(self.batch_size, (int, np.integer)) or self.batch_size < 1):
            raise ValueError(f"batch_size must be a positive integer or None, got {self.batch_size!r}")
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

    def _block_tokens(self, n_tokens: int) -> int:
        if self.batch_size is not None:
            return int(self.batch_size)
        return 65536 if self.mode == "stale" else int(min(65536, max(1, -(-n_tokens // 16))))

    def _mh_steps(self) -> int:
        if self.mh_steps is not None:
            return int(self.mh_steps)
        return 4 if self.mode == "stale" else 0

    def _config(self, corpus: Corpus, n_topics: int, n_rows: int) -> Config:
        sample = () if not self.sample_hyper else tuple(h for h in HYPER if h not in self.fixed_hyper)
        if self.variant in ("lda", "sstm"):
            sample = tuple(h for h in sample if h not in ("eta", "delta"))
        if self.variant in ("lda", "ftm"):
            sample = tuple(h for h in sample if h not in ("gamma", "xi"))
        return Config(
            variant=self.variant, n_topics=int(n_topics), n_docs=corpus.n_docs, n_words=corpus.n_words,
            n_rows=int(n_rows), n_tokens=corpus.n_tokens, vocabulary=self.vocabulary, mode=self.mode,
            batch=int(min(self._block_tokens(corpus.n_tokens), corpus.n_tokens)), mh_steps=self._mh_steps(), sample=sample,
            sigma=float(self.sigma), zeta=float(self.zeta), eta_prior=tuple(map(float, self.eta_prior)),
            gamma_prior=tuple(map(float, self.gamma_prior)),
            # histogram lengths rounded up to powers of two: corpora of similar size share compilations
            max_doc_len=pow2(corpus.doc_lengths.max()), max_word_count=pow2(corpus.word_counts.max()),
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
        tokens = make_tokens(corpus, block_tokens=self._block_tokens(corpus.n_tokens))
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
                    state = hyper_update(state, jax.random.fold_in(k_hyp, it), cfg, tokens)
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
                    avg = add_sample(avg if avg is not None else self._zero_avg(cfg), *means)
                if evaluate:
                    ll = float(loglik(means[0], means[1], *ll_args))
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
        theta = fold_in(key, jnp.asarray(self.phi_, jnp.float32), jnp.asarray(self.doc_freq_),
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
