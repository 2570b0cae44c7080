"""The LIDA estimator: collapsed Gibbs sampling of LIDA, the four-parameter FTM, SSTM and LDA
(sec. 4), posterior averaging and held-out evaluation (sec. 5.1)."""

from __future__ import annotations


import jax
import jax.numpy as jnp
import numpy as np

from topicjax.core import driver
from topicjax.core.compiled import jit
from topicjax.core import validation
from topicjax.core.errors import NumericalError
from topicjax.core.random import as_key
from topicjax.data.corpus import Corpus
from topicjax.estimator import TopicModelBase
from topicjax.persistence import ArraySpec, SavedModelError
from .evaluate import accumulate, gibbs_fold_in, no_evidence
from . import kernel
from .ibp import ibp_sample
from . import chain
from .state import HYPER, MODES, VARIANTS, Config, _fit_keys, make_tokens, pow2
from .validators import check_memory, discount, gamma_prior, hyper_names, memory_limit, memory_needed, topic_slots

__all__ = ["LIDA"]


#: ``(transform seed, init key, hyperparameter key, chain key)`` of a fit's key, in one program
#: (a fit without ``init="ibp"`` derives them in its initial state's program instead:
#: :func:`topicjax.lida.state.init_fit_state`)
_chain_keys = jit(_fit_keys)


class LIDA(TopicModelBase):
    """Collapsed Gibbs sampler for LIDA, the four-parameter FTM, SSTM and LDA (sec. 4).

    Parameters
    ----------
    n_components: K_max, the number of topic slots (LDA/SSTM: the number of topics; LIDA/FTM: the
        truncation, grown automatically with ``grow="auto"``); the only positional parameter,
        ``LIDA(50, variant="ftm")``.
    variant: ``"lida"`` (default), ``"ftm"``, ``"sstm"`` or ``"lda"`` (table in the
        :mod:`topicjax.lida` docstring); keyword-only.
    max_iter: number of sweeps; ``burn_in``: sweeps before posterior averaging (default half).
    sampler: ``"parallel"`` (default: documents in parallel with their own counts exact token by
        token, the shared word-topic counts refreshed between blocks of documents, the AD-LDA
        approximation; :mod:`topicjax.lida.parallel`), ``"exact"`` (the sequential collapsed Gibbs
        sweep, the reference) or ``"stale"`` (**approximate**: every token of a batch sees the
        counts of the batch start, its own document's included; kept for comparison only).
    tokens_per_block: tokens per block of documents (``"parallel"``: the documents of a block are
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
    eval_every: record the training log-likelihood ln p(w | Φ̂, Θ̂) of the sample every so many
        sweeps (0: never; it costs a (non-zeros x topics) pass).
    random_state: an int, ``None`` (a fresh seed, kept in ``seed_``) or a ``jax.random`` key; the
        same seed gives the same chain on CPU (the compiled CPU kernel and the XLA sweep draw the
        same uniforms but may differ in float32 rounding, see :mod:`topicjax.lida.kernel`).
    progress: tqdm progress bar over sweeps.

    Every parameter is validated when ``fit`` starts (``_constraints``,
    :mod:`topicjax.core.validation`, then :meth:`_validate_params`).  :meth:`fit` runs the chain on
    the one driver's host loop (:func:`topicjax.core.driver.run_host`: progress, history,
    ``NumericalError`` and checkpoints as for every family).  :meth:`fit_many` (seeds and
    parameter grids, e.g. ``params={"alpha": [...]}``) runs the chains one after the other (or in threads) on the host:
    a chain's K_max grows and its active-list lengths change between sweeps, so it is not a
    fixed-shape algorithm of :func:`topicjax.core.driver.run_many`; each model equals its separate
    fit.

    Fitted attributes: ``phi_`` (W x T) and ``theta_`` (T x D) posterior means over the live topics
    (columns of ``phi_`` are renormalised to one, except with the infinite vocabulary where the
    missing mass belongs to unobserved words; ``theta_`` is renormalised per document because
    topics born during the averaging window have fewer samples),
    ``topic_slots_`` (their slots), ``theta_bar_`` (T x D) and ``phi_bar_`` (W x T) masks of the
    last sample, ``phi_assigned_`` (W x T, n_vk > 0) and ``theta_assigned_`` (T x D, n_kd > 0): the
    words and documents holding tokens of each topic in the last sample, ``doc_freq_`` (documents
    per topic), ``n_topics_`` (the live topics: those holding tokens in the last sample; a column
    of ``phi_`` without any, e.g. an FTM topic active in documents that gave it none of their
    tokens, is the prior alone and is marked in ``topic_live_`` / ``empty_topics_`` and left out
    by ``top_words``), ``hyper_trace_`` (one list per
    hyperparameter, one value per sweep), ``history_`` (one record per sweep: ``iteration``
    (1, 2, ...), ``objective`` = ln p(w | z, Φ̄, β) of the sample
    (:func:`~topicjax.lida.evaluate.collapsed_loglik`), ``n_topics`` (live topics: holding
    tokens), ``seconds``,
    and every ``eval_every`` sweeps ``log_likelihood`` / ``perplexity`` of ln p(w | Φ̂, Θ̂)),
    ``n_iter_``, ``n_components_`` (final K_max), ``components_`` (T x W; rows sum to one except
    with the infinite vocabulary, where the missing mass belongs to unobserved words),
    ``seed_``, ``transform_seed_`` (the seed of :meth:`transform`'s sampler, saved);
    not saved: ``state_`` (the last :class:`State`), ``config_``, ``tokens_``.
    """

    _saved_arrays = ("phi_", "theta_", "theta_bar_", "phi_bar_", "phi_assigned_", "theta_assigned_", "doc_freq_",
                     "topic_slots_")
    _saved_meta = ("hyper_", "hyper_trace_", "history_", "n_iter_", "n_topics_", "n_components_",
                   "n_train_docs_", "transform_seed_")
    _array_specs = {
        "phi_": ArraySpec(("W", "T"), nonneg=True, simplex=0),
        "theta_": ArraySpec(("T", "D"), nonneg=True, simplex=0),
        "theta_bar_": ArraySpec(("T", "D"), "b"),
        "phi_bar_": ArraySpec(("W", "T"), "b"),
        "phi_assigned_": ArraySpec(("W", "T"), "b"),
        "theta_assigned_": ArraySpec(("T", "D"), "b"),
        "doc_freq_": ArraySpec(("T",), "iu"),
        "topic_slots_": ArraySpec(("T",), "iu"),
    }
    _meta_specs = {"history_": "records", "n_iter_": "int", "n_topics_": "int", "n_components_": "int",
                   "n_train_docs_": "int", "transform_seed_": "int"}
    _meta_required = ("hyper_", "hyper_trace_", "history_", "n_iter_", "n_topics_", "n_components_",
                      "n_train_docs_", "transform_seed_")
    _constraints = {
        "variant": validation.one_of(*VARIANTS),
        "sampler": validation.one_of(*MODES),
        "burn_in": validation.optional(validation.integer(0)),
        "tokens_per_block": validation.optional(validation.integer(1)),
        "mh_steps": validation.optional(validation.integer(0)),
        "init_topics": validation.optional(validation.integer(1)),
        **{h: validation.number(0.0, low_open=True) for h in ("alpha", "beta", "eta", "gamma")},
        "delta": validation.number(),
        "xi": validation.number(),
        "sigma": discount,
        "zeta": discount,
        "sample_hyper": validation.boolean(),
        "fixed_hyper": hyper_names,
        "eta_prior": gamma_prior,
        "gamma_prior": gamma_prior,
        "vocabulary": validation.one_of("finite", "infinite"),
        "n_phantom": validation.optional(validation.integer(0)),
        "hyper_start": validation.optional(validation.integer(0)),
        "grow": validation.one_of("auto", "error"),
        "transform_iter": validation.integer(1),
        "eval_every": validation.integer(0),
        "init": validation.one_of("random", "ibp"),
        "progress": validation.boolean(),
    }

    _formerly_first = "variant"

    def __init__(self, n_components=100, *, variant="lida", max_iter=200, burn_in=None, sampler="parallel",
                 tokens_per_block=None, mh_steps=None, init_topics=None, alpha=0.1, beta=0.01, eta=5.0, delta=1.0,
                 sigma=0.0, gamma=50.0, xi=1.0, zeta=0.0, sample_hyper=True, fixed_hyper=(),
                 eta_prior=(1.0, 1.0), gamma_prior=(1.0, 1.0), vocabulary="finite", n_phantom=None,
                 hyper_start=None, grow="auto", transform_iter=40, eval_every=10, init="random", random_state=0,
                 progress=True):
        self.variant = variant
        self.n_components = n_components
        self.max_iter = max_iter
        self.burn_in = burn_in
        self.sampler = sampler
        self.tokens_per_block = tokens_per_block
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
    def _validate_params(self):
        """Every parameter through its validator, then the constraints between parameters."""
        super()._validate_params()
        if self.sampler == "parallel" and self._mh_steps() and self.variant in ("lida", "ftm"):
            raise ValueError(f"mh_steps={self.mh_steps}: the parallel sweep's MH proposals need every topic active "
                             f"in every document (variants 'lda', 'sstm'); use mh_steps=0 for {self.variant!r}")
        if not self.delta > -self.sigma:
            raise ValueError(f"delta must be > -sigma = {-self.sigma}, got {self.delta!r}")
        if not self.xi > -self.zeta:
            raise ValueError(f"xi must be > -zeta = {-self.zeta}, got {self.xi!r}")
        if self.init_topics is not None and self.init_topics > self.n_components:
            raise ValueError(f"init_topics must be in [1, n_components={self.n_components}], got {self.init_topics!r}")

    def _refuse_sizes(self, corpus: Corpus, K: int, W: int, n_phantom: int, memory: dict) -> None:
        """:func:`~topicjax.lida.validators.check_memory` before anything is allocated, its refusal
        led by the parameter to change (read by the command line, which names its option): with
        ``n_phantom`` phantom rows, ``n_phantom`` when the fit would fit without them, else
        ``n_components``, each with the largest value that fits."""
        try:
            check_memory(corpus, K, **memory)
            return
        except ValueError as e:
            why = str(e)
        sizes = (corpus.n_tokens, corpus.n_docs, corpus.n_words)
        limit = memory_limit()

        def fits(k, rows):
            return memory_needed(*sizes, k, **{**memory, "n_rows": rows}) <= limit

        def largest(ok, hi):  # the largest v in [0, hi] with ok(v) (ok is monotone), -1 if none
            lo, hi = -1, hi
            while lo < hi:
                mid = (lo + hi + 1) // 2
                lo, hi = (mid, hi) if ok(mid) else (lo, mid - 1)
            return lo

        if n_phantom and fits(K, W):
            name, value, best = "n_phantom", n_phantom, largest(lambda n: fits(K, W + n), n_phantom)
        else:
            name, value, best = "n_components", K, largest(lambda k: k >= 1 and fits(k, W + n_phantom), K)
        if name == "n_phantom":
            why = why.replace("lower n_components, ", "lower n_phantom, ")
        if best >= (1 if name == "n_components" else 0):
            raise ValueError(f"{name} must be an integer <= {best:,} here, got {value!r}: {why}") from None
        raise ValueError(why)

    def _block_tokens(self, n_tokens: int) -> int:
        if self.tokens_per_block is not None:
            return int(self.tokens_per_block)
        return 65536 if self.sampler == "stale" else int(min(65536, max(1, -(-n_tokens // 16))))

    def _mh_steps(self) -> int:
        if self.mh_steps is not None:
            return int(self.mh_steps)
        return 4 if self.sampler == "stale" else 0

    def _config(self, corpus: Corpus, n_topics: int, n_rows: int) -> Config:
        sample = () if not self.sample_hyper else tuple(h for h in HYPER if h not in self.fixed_hyper)
        if self.variant in ("lda", "sstm"):
            sample = tuple(h for h in sample if h not in ("eta", "delta"))
        if self.variant in ("lda", "ftm"):
            sample = tuple(h for h in sample if h not in ("gamma", "xi"))
        return Config(
            variant=self.variant, n_topics=int(n_topics), n_docs=corpus.n_docs, n_words=corpus.n_words,
            n_rows=int(n_rows), n_tokens=corpus.n_tokens, vocabulary=self.vocabulary, mode=self.sampler,
            batch=int(min(self._block_tokens(corpus.n_tokens), corpus.n_tokens)), mh_steps=self._mh_steps(),
            sample=sample,
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
    def fit(self, X, y=None, *, checkpoint=None, checkpoint_every=10):
        """Run ``max_iter`` sweeps on a :class:`Corpus` or a (documents x words) count matrix.

        ``checkpoint``: a folder where the chain is saved every ``checkpoint_every`` sweeps
        (:mod:`topicjax.core.checkpoint`: the sampler state at its current K_max, the posterior
        sums, the hyperparameter trace and the history); the same call after a kill resumes at
        the saved sweep, to the same chain bit for bit on CPU (every sweep's key is folded from
        the seed and the sweep number, so the resumed sweeps draw what the uninterrupted ones
        draw; the same ``TOPICJAX_THREADS`` for the compiled kernel)."""
        self._validate_params()
        corpus = self._train_corpus(X)
        if corpus.n_tokens == 0:
            raise ValueError("the corpus has no tokens")
        # sizes from the data, before anything is allocated: topics (LDA, SSTM) or slots (LIDA, FTM)
        # at most the tokens, then the memory of the whole fit
        if self.variant in ("lda", "sstm"):
            corpus.check_topics(self.n_components)
        else:
            topic_slots(self.n_components, corpus.n_tokens)
        W = corpus.n_words
        n_phantom = 0
        if self.vocabulary == "infinite" and self.variant in ("lida", "sstm"):
            n_phantom = int(self.n_phantom) if self.n_phantom is not None else max(64, W // 4)
        # the stale sweep's and the MH proposals' per-token arrays, and the XLA parallel sweep's
        # lane layout, only where they are read (the compiled kernel reads neither)
        extras = self.sampler == "stale" or self._mh_steps() > 0
        cfg0 = self._config(corpus, int(self.n_components), W + n_phantom)
        lanes = not kernel.use_kernel(cfg0)
        memory = {"n_rows": W + n_phantom, "mode": self.sampler, "loglik": bool(self.eval_every),
                  "lanes_layout": lanes, "extras": extras, "word_lists": kernel.word_lists(cfg0)}
        self._refuse_sizes(corpus, int(self.n_components), W, n_phantom, memory)
        ckpt = self._open_checkpoint(checkpoint, checkpoint_every, corpus)
        tokens = make_tokens(corpus, block_tokens=self._block_tokens(corpus.n_tokens), extras=extras,
                             lanes_layout=lanes)
        K = int(self.n_components)
        key = as_key(self._seed(ckpt))
        theta_init = None
        if self.init == "ibp" and self.variant in ("lida", "ftm"):
            rng = np.random.default_rng(np.asarray(jax.random.key_data(key)).ravel().tolist())
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
        if theta_init is None:  # the keys and the initial state in one program
            state, (seed_tr, k_hyp, key) = chain.init_fit(key, tokens, cfg, hyper, init_topics)
        else:
            seed_tr, k_init, k_hyp, key = _chain_keys(key)
            state = chain.init(k_init, tokens, cfg, hyper, init_topics, theta_init)
        burn_in = self.max_iter // 2 if self.burn_in is None else min(int(self.burn_in), self.max_iter - 1)
        hyper_start = self.max_iter // 4 if self.hyper_start is None else int(self.hyper_start)
        static = chain.Static(grow=self.grow, burn_in=burn_in, hyper_start=hyper_start, eval_every=int(self.eval_every),
                              max_iter=int(self.max_iter), n_words=W, memory=tuple(sorted(memory.items())))
        final, history = driver.run_host(
            chain.ALGORITHM, state, args=chain.Args(tokens, key, k_hyp, corpus), static=static,
            max_iter=int(self.max_iter), progress=self.progress, desc=f"LIDA[{self.variant}]",
            checkpoint=None if ckpt is None else ckpt.run("fit"))
        self._set_fitted(final, history, corpus, tokens, int(seed_tr))
        return self

    def fit_many(self, X, y=None, *, seeds=None, n_topics=None, params=None, mode=None, vmap_size=None,
                 workers=None) -> list:
        """Many chains: clones with ``random_state=seeds[g]``, ``n_components=n_topics[g]`` and
        ``params = {name: [value per chain]}`` (e.g. ``{"alpha": [0.05, 0.1]}``), each equal to
        its separate :meth:`fit`.  The chains run on the host one after the other
        (``mode=None`` or ``"sequential"``) or in ``workers`` threads (``mode="threads"``; the
        compiled CPU kernel serialises its calls): a chain grows K_max and changes its
        active-list lengths between sweeps, so it is not a fixed-shape algorithm of
        :func:`topicjax.core.driver.run_many`, and ``mode="vmap"`` or ``"devices"`` falls back to
        one chain after the other with a :class:`~topicjax.estimator.FitManyFallbackWarning`.
        This estimator's own parameters are validated first, the ones a setting replaces
        included."""
        self._validate_params()
        return self._fit_many_on_host(X, y, seeds=seeds, n_topics=n_topics, params=params, mode=mode,
                                      vmap_size=vmap_size, workers=workers,
                                      why="LIDA's chains change their shapes between sweeps (K_max grows)")

    def _set_fitted(self, final: chain.State, history: list, corpus: Corpus, tokens, transform_seed: int) -> None:
        """Every fitted attribute, the one place they are written (:meth:`fit`, and so each chain
        of :meth:`fit_many`): from the final ``chain`` (its last sample, posterior sums, K_max and
        hyperparameter trace), the driver's ``history`` (one record per sweep), the training
        ``corpus`` and its ``tokens``, and the seed of :meth:`transform`'s sampler."""
        state, cfg, avg, trace = final
        self.hyper_trace_ = trace
        self.history_ = history
        self.n_iter_ = self.max_iter
        self.transform_seed_ = transform_seed
        self.state_, self.config_, self.tokens_ = state, cfg, tokens
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
        self.phi_assigned_ = np.asarray(state.n_wk)[: cfg.n_words][:, slots] > 0
        self.theta_assigned_ = np.asarray(state.n_dk)[:, slots].T > 0
        self.doc_freq_ = self.theta_bar_.sum(1).astype(np.int64)
        self.n_topics_ = int(np.count_nonzero(self.phi_assigned_.any(0)))  # live: holding tokens
        self.n_components_ = int(cfg.n_topics)
        self.n_train_docs_ = int(corpus.n_docs)
        self.hyper_ = {h: float(getattr(state, h)) for h in HYPER}
        self.hyper_.update(sigma=float(self.sigma), zeta=float(self.zeta))
        self._set_components()

    def _saved_sizes(self) -> dict:
        # T is the number of averaged topics (columns of phi_), bound by phi_; the live ones among
        # them (n_topics_) are checked against phi_assigned_ in load
        return {"W": len(self.vocab_)}

    @classmethod
    def load(cls, path, **params):
        """Load a model saved by :meth:`save` (tuple parameters come back as tuples); every field
        is checked (:class:`~topicjax.persistence.SavedModelError` naming the folder and field)."""
        model = super().load(path, **params)
        for name in ("fixed_hyper", "eta_prior", "gamma_prior"):
            setattr(model, name, tuple(getattr(model, name)))
        sizes = model._load_sizes
        live = int(np.count_nonzero(np.asarray(model.phi_assigned_).any(0)))
        # a save of an older version counted every averaged topic (T) as live: read it as the live ones
        for name, size, older in (("n_topics_", live, sizes["T"]), ("n_train_docs_", sizes["D"], None)):
            if getattr(model, name) not in (size, older):
                raise SavedModelError(f"{path}: meta.json field {name!r} is {getattr(model, name)}, but the arrays "
                                      f"hold {size}" + (" live topics (topics holding tokens in phi_assigned_)"
                                                        if name == "n_topics_" else ""))
        model.n_topics_ = live
        if model.n_components_ < model.n_topics_:
            raise SavedModelError(f"{path}: meta.json field 'n_components_' is {model.n_components_}, fewer than "
                                  f"n_topics_ = {model.n_topics_}")
        known = set(HYPER) | {"sigma", "zeta"}
        for name in ("hyper_", "hyper_trace_"):
            value, keys = getattr(model, name), (known if name == "hyper_" else set(HYPER))
            ok = isinstance(value, dict) and set(value) == keys
            ok = ok and all((np.isfinite(v) if name == "hyper_" else isinstance(v, list) and len(v) == model.n_iter_
                             and all(isinstance(x, (int, float)) for x in v))
                            for v in value.values())
            if not ok:
                raise SavedModelError(f"{path}: meta.json field {name!r} must map {sorted(keys)} to "
                                      f"{'finite numbers' if name == 'hyper_' else 'one number per sweep'}")
        slots = model.topic_slots_
        if np.any(np.diff(slots) <= 0) or (slots.size and (slots[0] < 0 or slots[-1] >= model.n_components_)):
            raise SavedModelError(f"{path}: array 'topic_slots_' must be increasing slots in [0, n_components_)")
        return model

    # ------------------------------------------------------------------ inference
    def _check_fitted(self):
        super()._check_fitted()
        if not hasattr(self, "phi_"):
            raise ValueError(f"this {type(self).__name__} is not fitted yet; call fit first")

    def _theta_new(self, corpus: Corpus) -> np.ndarray:
        """θ (46) of new documents by sampling their topics with Φ fixed at ``phi_`` (T x D), seeded
        by ``transform_seed_`` (the same documents in the same order give the same θ)."""
        tokens = make_tokens(corpus, extras=False, lanes_layout=False)  # document completion reads doc, word and n_d
        h = self.hyper_
        n_sw = max(2, int(self.transform_iter))
        key = jax.random.key(int(self.transform_seed_))
        theta = gibbs_fold_in(key, jnp.asarray(self.phi_, jnp.float32), jnp.asarray(self.doc_freq_),
                              float(self.n_train_docs_), h["alpha"], h["eta"], h["delta"], h["sigma"],
                              tokens.doc, tokens.word, tokens.n_d, jnp.zeros(corpus.n_docs, jnp.float32),
                              n_sweeps=n_sw, burn_in=n_sw // 2, focused=self.variant in ("lida", "ftm"))
        theta = np.asarray(theta, np.float64)
        if not np.all(np.isfinite(theta)):
            raise NumericalError("document completion produced non-finite topic proportions", reason="nonfinite")
        return theta

    def transform(self, X, empty_docs="keep"):
        """Topic proportions (46) of documents, ``(n_docs, T)`` over the columns of ``phi_``, by the
        document-completion sampler (Φ fixed, ``transform_iter`` sweeps): a sampler, so the
        proportions of a document depend on the other documents of the call (their tokens share the
        random numbers).
        ``empty_docs``: documents without tokens get the proportions of no evidence
        (:func:`~topicjax.lida.evaluate.no_evidence`; ``"keep"``), are left out (``"drop"``) or
        are an error (``"error"``)."""
        return self._transform_docs(X, empty_docs, lambda c: self._theta_new(c).T)

    def _topic_live(self) -> np.ndarray:
        # Φ is smoothed: a topic without tokens still has a column, the prior alone (in FTM, a slot
        # active in documents with none of their tokens); live are the topics holding tokens
        return np.asarray(self.phi_assigned_).any(0)

    def _known_words(self) -> np.ndarray:
        # Φ is smoothed (every word has probability in every topic): the words the model learned
        # something about are those that held a training token (all in the last sample's topics)
        return np.asarray(self.phi_assigned_).any(1)

    def _no_evidence(self) -> np.ndarray:
        return no_evidence(self.doc_freq_, self.n_train_docs_, self.hyper_["delta"], self.hyper_["sigma"],
                           self.variant in ("lida", "ftm"))

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
            raise NumericalError("a held-out word has zero or non-finite predictive probability", reason="nonfinite")
        return float(np.sum(heldout.counts * np.log(p))), heldout.n_tokens

    def _heldout_log_likelihood(self, observed: Corpus, heldout: Corpus) -> float:
        """Eq. (45) (:meth:`log_predictive`): what :meth:`score` and :meth:`perplexity` use."""
        return self.log_predictive(observed, heldout)[0]

    # ------------------------------------------------------------------ summaries (Figs. 9-10)
    # Two counts: ``"active"`` reads the masks b (eq. 28-34), ``"assigned"`` the tokens of the last
    # sample (n_kd > 0, n_vk > 0).  Only the second exists for every model: LDA and FTM have every
    # word active in every topic and HDP-LDA has no masks, yet sec. 5.3 gives words per topic for
    # all three on KOS (HDP-LDA 158, FTM 43, LIDA 47), so the paper's figures are of that kind.
    def _count(self, count: str, matrix: str) -> np.ndarray:
        """The ``matrix`` ("phi" or "theta") of the masks or of the assigned tokens, checked first."""
        self._check_fitted()
        if count in ("active", "assigned"):
            return getattr(self, f"{matrix}_{'bar' if count == 'active' else 'assigned'}_")
        raise ValueError(f"count must be 'active' (the masks b) or 'assigned' (tokens of the last sample), "
                         f"got {count!r}")

    def topics_per_document(self, count: str = "active") -> np.ndarray:
        """Topics of every training document in the last sample (histogram of Fig. 9):
        ``count="active"`` those with b_kd = 1 (eq. 28-30), ``"assigned"`` those holding at
        least one of its tokens (n_kd > 0)."""
        return self._count(count, "theta").sum(0)

    def topics_per_word(self, count: str = "active") -> np.ndarray:
        """Topics of every word (Fig. 10): ``count="active"`` those where it is active (eq. 31-34;
        LDA/FTM: all topics), ``"assigned"`` those holding at least one of its tokens (n_vk > 0)."""
        return self._count(count, "phi").sum(1)

    def words_per_topic(self, count: str = "active") -> np.ndarray:
        """Words of every topic: ``count="active"`` its active words (eq. 31-34; LDA/FTM: every
        word), ``"assigned"`` the distinct words of its tokens (n_vk > 0; the kind of count
        sec. 5.3 reports)."""
        return self._count(count, "phi").sum(0)

    def documents_per_topic(self, count: str = "active") -> np.ndarray:
        """Documents of every topic: ``count="active"`` those where it is active (b_kd = 1),
        ``"assigned"`` those holding at least one of its tokens (n_kd > 0)."""
        return self._count(count, "theta").sum(1)

    @staticmethod
    def histogram(values) -> np.ndarray:
        """``np.bincount`` of a per-document / per-word count (the histograms of Figs. 9-10)."""
        return np.bincount(np.asarray(values, np.int64))
