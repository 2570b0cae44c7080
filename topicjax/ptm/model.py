"""Parsimonious topic models (Soleimani & Miller 2014; Wang & Miller 2020) fitted by generalized EM.

:class:`PTM` is the estimator: each topic has word switches (a word topic-specific or drawn from
the shared model ``beta0``), each document topic switches, and switches, parameters and the number
of topics minimise a BIC (``bic="2014"``: 2014 eq. 26, ``"2014-exact"``: its exact-count
variant of sec. 7.4, or ``"2020"``: 2020 eq. 16; :mod:`topicjax.ptm_bic`).  ``fit`` runs generalized EM (2014 sec. 6,
:func:`topicjax.ptm.gem.gem_step`), each accepted step decreasing the BIC, from the initialisation
of sec. 6.3; fitted ``u_`` (topic x word switches), ``v_`` (topic x document switches), ``bic_``
and ``bic_history_`` besides the estimator contract's ``phi_``, ``theta_``.  :meth:`PTM.fit_many`
runs random restarts in one compiled call and :func:`best_fit` keeps the model of smallest
``bic_``; :func:`topicjax.ptm.order.select_order` sweeps the number of topics top-down.
:func:`check_fit_corpus` refuses, before anything is allocated, a number of topics the corpus
cannot support, and :func:`check_completion` names the first document that document completion
cannot split (``ValueError`` s).

Results depend only on the seed and the data on CPU; bits can differ between CPU and GPU.

The model, the steps of generalized EM, the data layout and the initialisation:
``docs/guides/internals.md``, "PTM: generalized EM, layout, initialisation"; the model and its use:
``docs/guides/ptm.md``.

>>> import topicjax as tj
>>> from topicjax.ptm import PTM
>>> corpus, _, _ = tj.datasets.make_bars(n_docs=100, seed=0)
>>> model = PTM(n_components=6, max_iter=5, random_state=0, progress=False).fit(corpus)
>>> model.u_.shape, model.v_.shape, bool(model.bic_history_[-1] <= model.bic_history_[0])
((6, 25), (6, 100), True)
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

from topicjax.core import driver, layout
from topicjax.core.errors import NumericalError
from topicjax.core.random import as_key
from topicjax.data.corpus import Corpus
from topicjax.core import validation
from topicjax.estimator import TopicModelBase, as_corpus, check_int, int_sequence, refuse_documents
from topicjax.persistence import ArraySpec, SavedModelError
from topicjax.ptm import bic as pb
from topicjax.ptm.gem import (GEMConfig, PTMState, algorithm, infer_alpha, init_state, loglik_docs, padded_topics,
                              state_bic)
from topicjax.ptm.layout import PTMData, ptm_data, real_docs, real_words

__all__ = ["PTM", "best_fit", "check_completion", "check_fit_corpus"]

#: shared words remembered per topic for :meth:`PTM.top_shared_words`
SHARED_TOP = 50


def _check_seeds(seeds, n_restarts, random_state) -> list[int]:
    """Validate the restarts of :meth:`PTM.fit_many` and return their seeds."""
    if seeds is not None and n_restarts is not None:
        raise ValueError("give seeds or n_restarts, not both")
    if seeds is None:
        if n_restarts is None:
            raise ValueError("fit_many needs seeds (a list of integers) or n_restarts")
        n_restarts = check_int(n_restarts, "n_restarts", 1)
        if isinstance(random_state, bool) or not isinstance(random_state, (int, np.integer)):
            raise ValueError(f"n_restarts needs an integer random_state to count seeds from, got {random_state!r}")
        return [int(random_state) + i for i in range(n_restarts)]
    seeds = int_sequence(seeds, "seeds", 0)
    if not seeds:
        raise ValueError("seeds is empty: fit_many needs at least one seed")
    if len(set(seeds)) != len(seeds):
        dup = next(s for s in seeds if seeds.count(s) > 1)
        raise ValueError(f"seed {dup} appears more than once in seeds (the restarts would be identical)")
    return seeds


def best_fit(models):
    """The model of smallest ``bic_`` among fitted :class:`PTM` (e.g. from :meth:`PTM.fit_many`);
    ties go to the first."""
    models = list(models)
    if not models:
        raise ValueError("best_fit needs at least one fitted model")
    for i, m in enumerate(models):
        if not hasattr(m, "bic_"):
            raise ValueError(f"models[{i}] is not a fitted PTM")
    return models[int(np.argmin([m.bic_ for m in models]))]


# =============================================================================== estimator
def check_fit_corpus(corpus: Corpus, n_topics: int, models: int = 1):
    """Refuse, before anything is allocated, a number of topics the corpus cannot support (more
    than its tokens or documents) or whose arrays cannot fit in memory: the GEM state holds, per
    topic, β and the expected counts x (float32) and the switches u (bool) for every word, α, the
    flip statistics s1, s2 (float32) and v (bool) for every document, and a step builds its new
    state beside it (XLA's memory analysis of the compiled step counts more); ``models`` restarts
    of :meth:`PTM.fit_many` hold their states side by side."""
    corpus.check_topics(n_topics)
    if n_topics > corpus.n_docs:
        raise ValueError(
            f"n_components={n_topics} is larger than the number of documents ({corpus.n_docs}): "
            "every topic needs at least one document"
        )
    N, D = corpus.n_words, corpus.n_docs
    fits = f"{models} PTM restarts hold" if models > 1 else "one PTM fit holds"
    validation.refuse_size("n_components", int(n_topics), (9.0 * N + 13.0 * D) * (models + 1),
                  what=(f"with {int(n_topics):,} topics on {N:,} words and {D:,} documents, {fits} the GEM state (β, "
                        "x, u per topic and word; α, s1, s2, v per topic and document) and a step's new state"))


class PTM(TopicModelBase):
    """Parsimonious topic model (2014) with the 2014 or 2020 BIC, fitted by generalized EM.

    Parameters
    ----------
    n_components: number of topics ``M`` (use :func:`select_order` to choose it by BIC).
    bic: ``"2014"`` (eq. 26), ``"2014-exact"`` (sec. 7.4, small vocabularies), ``"2020"``
        (2020 eq. 16 with its derivation's ``M log 2`` per mixed word, joint per-word switch
        updates) or ``"2020-printed"`` (eq. 16 as printed, without that term).
    max_iter: maximum number of GEM iterations.
    tol: stop when the relative decrease of the BIC in one iteration is below ``tol``.
    random_state: seed of the initialisation (sec. 6.3); same seed, same model on CPU (see above for GPUs).
    n_init_docs: seed documents per topic (``D_init`` of sec. 6.3; the reference code uses 5).
    max_u_cycles, max_v_rounds: bounds on the rounds of word / topic switch updates per iteration
        (the reference code cycles 20 and 10 times through single flips; one of our rounds
        accepts a whole batch, and the next iteration continues where a round stopped).
    u_candidates: flips considered per word-switch round (the best by single-flip score).
    v_candidates: ``(n_on, n_off)`` topic switches tried per document and round: inactive topics
        ranked by an estimated gain, active ones by smallest proportion (``>= M`` tries all).
    transform_iter: EM iterations for the proportions of new documents.
    block_tokens: padded entries per block of the device layout (memory/speed trade-off).  Fits
        and inference round the layout's documents, words and blocks up to buckets
        (:func:`topicjax.core.layout.bucket_size`, at most 12.5 % more: corpora of similar size
        share the compiled programs; the results are the exact shapes') unless the environment
        sets ``TOPICJAX_BUCKETS=off`` (:func:`topicjax.ptm.layout.ptm_data`).
    progress: tqdm progress bar over GEM iterations.

    Fitted attributes (paper orientation, topics in rows): ``u_`` ``(M, N)`` bool, ``v_`` ``(M, D)``
    bool, ``theta_`` ``(M, D)`` (Θ: the topic proportions ``alpha_jd`` of the papers, zero where
    ``v_`` is off, every column summing to one), ``beta_`` ``(M, N)`` (topic-specific probabilities, 0 where
    ``u_`` is off), ``beta0_`` ``(N,)``, ``bic_`` and ``bic_history_`` (BIC after the
    initialisation and after every GEM iteration, never increasing), ``history_`` (per iteration:
    BIC, switches changed, seconds), ``n_iter_``, ``vocab_``.  ``phi_`` ``(N, M)`` is the
    effective word distribution of each topic.
    """

    _saved_arrays = ("u_", "v_", "theta_", "beta_", "beta0_", "shared_top_")
    _saved_meta = ("bic_", "bic_history_", "history_", "n_iter_")
    _array_specs = {
        "u_": ArraySpec(("T", "W"), "biu"),
        "v_": ArraySpec(("T", "D"), "biu"),
        "theta_": ArraySpec(("T", "D"), nonneg=True, simplex=0),
        "beta_": ArraySpec(("T", "W"), nonneg=True),  # not a distribution per topic: only the switched-on words
        "beta0_": ArraySpec(("W",), nonneg=True, simplex=0),
        "shared_top_": ArraySpec(("T", SHARED_TOP), "iu"),
    }
    _meta_specs = {"bic_": "number", "bic_history_": "numbers", "history_": "records", "n_iter_": "int"}
    _meta_required = ("bic_", "bic_history_", "history_", "n_iter_")
    _constraints = {
        "bic": validation.one_of(*pb.BIC_KINDS),
        "n_init_docs": validation.integer(1),
        "max_u_cycles": validation.integer(0),
        "max_v_rounds": validation.integer(0),
        "u_candidates": validation.integer(1),
        "v_candidates": validation.int_pair(1),
        "transform_iter": validation.integer(1),
        "block_tokens": validation.integer(1),
        "progress": validation.boolean(),
    }

    def __init__(self, n_components=10, *, bic="2014", max_iter=100, tol=1e-4, random_state=0, n_init_docs=5,
                 max_u_cycles=5, max_v_rounds=3, u_candidates=65536, v_candidates=(6, 3), transform_iter=50,
                 block_tokens=4096, progress=True):
        self.n_components = n_components
        self.bic = bic
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state
        self.n_init_docs = n_init_docs
        self.max_u_cycles = max_u_cycles
        self.max_v_rounds = max_v_rounds
        self.u_candidates = u_candidates
        self.v_candidates = v_candidates
        self.transform_iter = transform_iter
        self.block_tokens = block_tokens
        self.progress = progress

    # ------------------------------------------------------------------ fitting
    def _config(self) -> GEMConfig:
        self._validate_params()
        on, off = self.v_candidates
        return GEMConfig(kind=self.bic, u_candidates=int(self.u_candidates), max_u_cycles=int(self.max_u_cycles),
                         max_v_rounds=int(self.max_v_rounds), v_on=on, v_off=off)

    def _layout(self, corpus: Corpus) -> PTMData:
        """The device layout of ``corpus`` (:func:`topicjax.ptm.layout.ptm_data`), its documents,
        words and chunks rounded up to buckets unless ``TOPICJAX_BUCKETS=off``: fits, restarts and
        inference on corpora of similar size share their compiled programs; the padding is no
        document and no word (no token, no switch, no part of the BIC) and is cut off on the host."""
        return ptm_data(corpus, block_tokens=self.block_tokens, buckets=layout.buckets_on())

    def fit(self, X, y=None, *, checkpoint=None, checkpoint_every=10):
        """Fit by generalized EM.  ``checkpoint``: a folder where the fit's progress is saved every
        ``checkpoint_every`` iterations and from which a killed fit resumes, to the same model bit
        for bit on CPU (:mod:`topicjax.core.checkpoint`)."""
        self._validate_params()
        corpus = self._train_corpus(X)
        check_fit_corpus(corpus, self.n_components)
        cfg = self._config()
        ckpt = self._open_checkpoint(checkpoint, checkpoint_every, corpus)
        data = self._layout(corpus)
        state = init_state(as_key(self._seed(ckpt)), data, int(self.n_components), n_init_docs=self.n_init_docs)
        return self.fit_state(data, state, cfg, checkpoint=None if ckpt is None else ckpt.run("fit"), donate=True)

    def fit_many(self, X, y=None, *, seeds=None, n_topics=None, params=None, mode=None, vmap_size=None,
                 workers=None, n_restarts=None) -> list["PTM"]:
        """Fit several random restarts at the order ``n_components`` in ONE compiled call
        (:func:`topicjax.core.driver.run_many`).

        Each restart is this estimator with ``random_state`` set to one of ``seeds`` (or, with
        ``n_restarts``, to ``random_state, random_state + 1, ...``): its initialisation (sec. 6.3)
        and its whole GEM loop -- up to ``max_iter`` iterations, stopping as :meth:`fit` does when
        the relative BIC decrease falls below ``tol`` -- run as :meth:`fit` runs them, and equal
        its separate fit: the same switches, parameters and BIC (``bic_`` is computed in float64
        exactly as :meth:`fit` does).  Other settings (``n_topics``, ``params``: other orders or
        BIC kinds) are fitted one after the other by the generic :meth:`TopicModelBase.fit_many`
        (``mode="vmap"`` or ``"devices"`` then warns that it falls back).  The signature is every
        family's, with ``n_restarts`` added.

        Model order: PTM chooses ``M`` by the separate top-down sweep :func:`select_order`.

        ``mode``: ``"sequential"`` (default on CPU: the restarts one after the other inside the
        call; on 300-600 KOS documents a vmapped step's batched gathers and scatter-adds were
        ~2.4x slower than one restart at a time), ``"vmap"`` (default on accelerators, where it
        pays: 8 restarts, 2000 synthetic documents, ``M = 16``, H100: one vmapped call 15 s, 8
        separate fits 91 s), ``"devices"`` or ``"threads"`` (``workers`` threads); ``vmap_size``
        restarts side by side under ``"vmap"``.  Under vmap XLA compiles batched reductions and may add float32
        terms in another order: on larger corpora a ~1e-9 relative difference can tip a near-tie
        switch decision, after which the restart follows another (equally valid) GEM path.

        Returns the fitted models, one per seed in the order given; :func:`best_fit` picks the
        smallest BIC.  There is no progress bar (the loop is compiled).
        """
        if n_topics is not None or params:
            if n_restarts is not None:
                raise ValueError("give n_restarts alone, or seeds/n_topics/params")
            return self._fit_many_on_host(X, y, seeds=seeds, n_topics=n_topics, params=params, mode=mode,
                                          vmap_size=vmap_size, workers=workers,
                                          why="PTM's compiled batch runs restarts (seeds) at one order only")
        self._validate_params()
        refuse_documents(X, "PTM.fit_many")
        corpus = as_corpus(X)
        cfg = self._config()
        seeds = _check_seeds(seeds, n_restarts, self.random_state)
        G = len(seeds)
        check_fit_corpus(corpus, self.n_components, models=G)
        if mode is None and vmap_size is not None:
            mode = "vmap"
        M, N = int(self.n_components), corpus.n_words
        data = self._layout(corpus)
        keys = jnp.stack([as_key(s, "seeds") for s in seeds])
        n_init = max(1, min(int(self.n_init_docs), corpus.n_docs // M))
        states = jax.vmap(lambda k: init_state(k, data, M, n_init_docs=n_init))(keys)
        t0 = time.perf_counter()
        n_rows = int(data.beta0.shape[0])  # the vocabulary, possibly rounded up to a bucket (data.n_words: N)
        finals, recs, n_iters, status = driver.run_many(
            algorithm(cfg.kind, n_rows), (cfg, n_rows), states, (data,), batched=(False,), max_iter=int(self.max_iter),
            tol=float(self.tol), mode=mode, vmap_size=vmap_size, workers=workers)
        per_iter = (time.perf_counter() - t0) / max(int(np.asarray(n_iters).sum()), 1)

        def error(g, n, status):
            return NumericalError(f"PTM fit_many (seed {seeds[g]}): non-finite parameters at iteration {n + 1}",
                                  iteration=n + 1, reason="nonfinite")

        def clone(g):
            m = self._clone_with(random_state=seeds[g])
            m.vocab_, m.n_features_in_ = list(corpus.vocab), N
            return m

        # on the host, once: a restart's state is then a numpy view, where slicing the device arrays
        # restart by restart compiled a slice and a squeeze for every shape of the state (14 programs)
        finals, states = jax.device_get((finals, states))
        models = []
        for g, (m, state, rows) in enumerate(self._batch_models(finals, recs, n_iters, status, seeds=seeds, clone=clone,
                                                                error=error, seconds=per_iter)):
            init = jax.tree.map(lambda a: a[g], states)
            # the restarts' device states are not kept (last_state_ None): G of them would stay on the device
            m._set_fitted(state, data, cfg, M, state_bic(init, data, cfg.kind), rows, keep_state=False)
            models.append(m)
        return models

    def fit_state(self, data: PTMData, state: PTMState, cfg: GEMConfig, desc: str | None = None, *,
                  checkpoint=None, donate: bool = False):
        """GEM from ``state`` (an initial or warm-start state); ``checkpoint``: a
        :class:`~topicjax.core.checkpoint.RunCheckpoint` to save to and resume from;
        ``donate=True``: the GEM steps write into ``state``'s buffers (one copy of the state less
        at the peak), which the caller must not use afterwards."""
        M = int(np.asarray(state.topic_mask).sum())
        bic0 = state_bic(state, data, cfg.kind)
        state, records = driver.run(algorithm(cfg.kind, int(data.beta0.shape[0])), (cfg, int(data.beta0.shape[0])),
                                    state, (data,), max_iter=int(self.max_iter), tol=float(self.tol),
                                    progress=self.progress, desc=desc or f"PTM M={M}", checkpoint=checkpoint,
                                    donate=donate)
        self._set_fitted(state, data, cfg, M, bic0, records, keep_state=True)
        return self

    def _set_fitted(self, state: PTMState, data: PTMData, cfg: GEMConfig, M: int, bic0: float, records: list, *,
                    keep_state: bool) -> None:
        """Every fitted attribute, the one place they are written (:meth:`fit` and
        :func:`select_order` through :meth:`fit_state`, each restart of :meth:`fit_many`): from the
        final ``state`` of ``M`` topics, the BIC ``bic0`` of the initial state and the driver's
        ``records`` (one per iteration: ``bic_hi``, ``bic_lo``, ``n0``, ``u_flips``, ``v_flips``,
        ``seconds``); the last BIC is recomputed in float64 from ``state``.  ``last_state_`` is the
        device state (to warm-start the next order; not saved) with ``keep_state``, else None."""
        N, D = real_words(data), real_docs(data)  # the state's words from N and documents from D on are padding
        bics = [float(np.float64(r["bic_hi"]) + np.float64(r["bic_lo"])) + pb.u_prior_2014(int(r["n0"]), M, N, cfg.kind)
                for r in records]
        if bics:
            bics[-1] = state_bic(state, data, cfg.kind)
        self.bic_history_ = [bic0] + bics
        self.history_ = [{"iteration": i + 1, "objective": b, "bic": b, "u_flips": int(r["u_flips"]),
                          "v_flips": int(r["v_flips"]), "seconds": r["seconds"]}
                         for i, (b, r) in enumerate(zip(bics, records))]
        self.bic_ = self.bic_history_[-1]
        self.n_iter_ = len(records)
        self.last_state_ = state if keep_state else None
        self.u_ = np.asarray(state.u)[:M, :N].astype(bool)
        self.v_ = np.asarray(state.v)[:D, :M].T.astype(bool)
        self.theta_ = np.asarray(state.alpha)[:D, :M].T.astype(np.float32)
        self.beta_ = np.where(self.u_, np.asarray(state.beta)[:M, :N], 0.0).astype(np.float32)
        self.beta0_ = np.asarray(data.beta0)[:N].astype(np.float32)
        x = np.asarray(state.x)[:M, :N]
        top = []
        for j in range(M):
            idx = np.flatnonzero(~self.u_[j])
            idx = idx[np.argsort(-x[j, idx], kind="stable")][:SHARED_TOP]
            top.append(np.concatenate([idx, np.full(SHARED_TOP - idx.size, -1)]))
        self.shared_top_ = np.asarray(top, np.int32).reshape(M, SHARED_TOP)
        self._set_components()

    # ------------------------------------------------------------------ derived views
    @property
    def phi_(self):
        """Effective word distribution of every topic, ``(N, M)``: ``u beta + (1 - u) beta0``."""
        return np.where(self.u_, self.beta_, self.beta0_[None, :]).T

    @property
    def m_bar_(self) -> float:
        """Average number of topics per document, ``M-bar`` (2014 Table 1)."""
        return float(self.v_.sum(0).mean())

    @property
    def n_bar_(self) -> float:
        """Average number of topic-specific words per topic, ``N-bar`` (2014 Table 2)."""
        return float(self.u_.sum(1).mean())

    @property
    def n_unique_(self) -> int:
        """Words specific to at least one topic, ``N_unique`` (2014 Table 2)."""
        return int(self.u_.any(0).sum())

    @property
    def frac_all_off_(self) -> float:
        """Share of vocabulary words whose switches are off in every topic (2020 sec. 4.4)."""
        return float((~self.u_.any(0)).mean())

    def top_specific_words(self, n: int = 10) -> list[list[str]]:
        """The ``n`` most probable topic-specific words of every topic (2014 Table 3)."""
        self._check_fitted()
        n = check_int(n, "n", 1)
        out = []
        for j in range(self.u_.shape[0]):
            idx = np.flatnonzero(self.u_[j])
            idx = idx[np.argsort(-self.beta_[j, idx], kind="stable")][:n]
            out.append([self.vocab_[i] for i in idx])
        return out

    def top_shared_words(self, n: int = 10) -> list[list[str]]:
        """The ``n`` (at most 50) shared words (switch off) that each topic generates most (2014
        Table 3), ranked by their expected count under the topic at the end of the fit, ``x_jn``
        of eq. 9 (``sum_d alpha_jd v_jd n_dn beta0_n / p_dn``)."""
        self._check_fitted()
        n = check_int(n, "n", 1)
        return [[self.vocab_[i] for i in row[row >= 0][:n]] for row in np.asarray(self.shared_top_)]

    # ------------------------------------------------------------------ new documents
    def _infer(self, corpus: Corpus):
        """``(data, B, alpha)``: the layout of ``corpus`` (its rows possibly rounded up to a
        bucket), Φ on the device and the proportions of its rows (padding rows: uniform, no
        token); the documents' are ``alpha[:corpus.n_docs]``."""
        data = self._layout(corpus)
        B = self._topics(data)
        return data, B, infer_alpha(data, B, int(self.transform_iter))

    def _topics(self, data: PTMData):
        """``phi_`` on the device with zero rows for the words of ``data`` after the vocabulary
        (a bucket's padding: no token)."""
        phi = np.asarray(self.phi_, np.float32)
        extra = int(data.beta0.shape[0]) - phi.shape[0]
        return jax.device_put(np.concatenate([phi, np.zeros((extra, phi.shape[1]), np.float32)]))

    def transform(self, X, empty_docs="keep"):
        """Topic proportions of documents with every topic allowed (2014 sec. 7), ``(n_docs, M)``.

        ``X``: a :class:`~topicjax.data.Corpus` over the model's vocabulary or a count matrix
        whose columns ARE the model's words in ``vocab_`` order (a matrix has no vocabulary: only
        its width is checked, permuted columns give other proportions silently).
        ``empty_docs``: documents without tokens get uniform proportions, the distribution of no
        evidence (``"keep"``: the inference starts there and no token moves it), are left out
        (``"drop"``: one row per document with tokens, in order) or are an error (``"error"``).
        """
        return self._transform_docs(X, empty_docs, lambda c: np.asarray(self._infer(c)[2])[:c.n_docs])

    def log_likelihood(self, X, alpha=None) -> float:
        """Log-likelihood (5) of corpus ``X`` in float64; proportions ``alpha`` ``(M, n_docs)`` or
        estimated with every topic allowed."""
        corpus = self._new_corpus(X)
        data = self._layout(corpus)
        B = self._topics(data)
        if alpha is None:
            a = infer_alpha(data, B, int(self.transform_iter))
        else:  # zero rows for the padding rows of a bucket (no token: they add nothing)
            a = np.zeros((int(data.doc_length.shape[0]), B.shape[1]), np.float32)
            a[:corpus.n_docs] = np.asarray(alpha).T
            a = jax.device_put(a)
        return float(np.asarray(loglik_docs(data, B, a), np.float64).sum())

    def heldout_log_likelihood(self, observed, heldout) -> float:
        """Document completion (2014 eq. 32): proportions from ``observed`` with every topic allowed,
        log-likelihood of ``heldout`` (the same documents), summed in float64."""
        obs = self._new_corpus(observed)
        held = self._new_corpus(heldout)
        if obs.n_docs != held.n_docs:
            raise ValueError(f"observed has {obs.n_docs} documents but heldout has {held.n_docs}")
        _, B, a = self._infer(obs)
        data = self._layout(held)  # the same documents: the same rows as obs's
        return float(np.asarray(loglik_docs(data, B, a), np.float64).sum())

    def completion_log_likelihood(self, X, *, protocol: str = "words", seed: int = 0):
        """Split every document of ``X`` (``Corpus.completion_split``) and return ``(held-out
        log-likelihood, number of held-out tokens)``.  Documents too short to be split (fewer
        than 2 tokens, or 2 distinct words for ``protocol="words"``) are an error naming the first."""
        corpus = self._new_corpus(X)
        check_completion(corpus, protocol)
        obs, held = corpus.completion_split(protocol, seed=seed)
        return self.heldout_log_likelihood(obs, held), held.n_tokens

    # ------------------------------------------------------------------ persistence
    @classmethod
    def load(cls, path, **params):
        model = super().load(path, **params)
        for name in ("u_", "v_"):
            setattr(model, name, np.asarray(getattr(model, name)).astype(bool))
        W = len(model.vocab_)
        top = np.asarray(model.shared_top_)
        if top.size and (top.min() < -1 or top.max() >= W):
            raise SavedModelError(f"{path}: array 'shared_top_' holds word indices outside [-1, {W})")
        if len(model.bic_history_) != model.n_iter_ + 1:
            raise SavedModelError(f"{path}: meta.json field 'bic_history_' has {len(model.bic_history_)} values, "
                                  f"expected n_iter_ + 1 = {model.n_iter_ + 1}")
        return model


def check_completion(corpus: Corpus, protocol: str = "words") -> None:
    """Raise a ``ValueError`` naming the first document that document completion cannot split."""
    if protocol == "words":
        n = np.diff(corpus.doc_offsets)
        what = "distinct word(s)"
    else:
        n = corpus.doc_lengths
        what = "token(s)"
    short = np.flatnonzero(n < 2)
    if short.size:
        d = int(short[0])
        raise ValueError(
            f"document {d} has {int(n[d])} {what}: document completion needs at least 2 "
            f"({short.size} such document(s)); drop them first, e.g. corpus.subset(keep)"
        )
