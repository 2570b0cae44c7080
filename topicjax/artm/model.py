"""ARTM: additive regularization of topic models (Vorontsov & Potapenko 2015).

The model maximises ``L(Φ, Θ) + Σ_i τ_i R_i(Φ, Θ)`` (eq. 13) by the regularized EM algorithm of
Theorem 2 (eq. 14-16): the regularizers are ONE :class:`~topicjax.regularizers.Regularizer`
(anything :func:`~topicjax.regularizers.as_regularizer` accepts: plain ``R(phi, theta)``
functions, pool members, ``(R, tau)`` pairs), whose M-step terms ``φ ∂R/∂φ``, ``θ ∂R/∂θ`` come
from ``jax.grad`` in :func:`topicjax.core.mstep.m_step`, through the one EM step of
:mod:`topicjax.artm.algorithm` and the one driver of :mod:`topicjax.core.driver`:

* coefficients are traced leaves of the regularizer: changing τ never recompiles; schedules
  ``tau(iteration)`` are compiled into the fit (or tabulated up front); a schedule of the score
  history ``tau(iteration, history)`` is evaluated on the host before every iteration;
* over-regularized topics and documents (Notes 1-2) are reported in the history
  (``overregularized_topics``, ``overregularized_docs``) and, with ``overregularized="remove"``
  (default), removed for the rest of the fit (``removed_topics_``, ``removed_docs_``);
* a fit that would leave non-finite values or remove every topic or every document stops with
  :class:`~topicjax.core.errors.NumericalError` naming the regularizer, its coefficient and the
  iteration; the last good state is kept in the error (``.state``);
* modalities (BigARTM's class_ids) get one distribution per modality in every topic, weighted by
  ``modality_weights``; classes (Theorem 3, eq. 44-50) are one more modality Ψ (``psi_``) learned
  from labels with weight ``label_weight``; :meth:`ARTM.predict_proba` is eq. 44;
* ``doc_passes=k``: BigARTM's offline algorithm (Θ restarted from uniform each pass, ``k - 1``
  inner Θ iterations), the same pass as the online algorithm of :mod:`topicjax.scale.online`;
* ``fit(X, mesh=...)`` shards the documents over the devices of a mesh (and processes,
  :mod:`topicjax.scale.distributed`); :meth:`ARTM.fit_many` trains a batch of models (coefficients,
  seeds, numbers of topics) in one compiled call through :func:`topicjax.core.driver.run_many`.

>>> import topicjax as tj
>>> from topicjax import regularizers as R
>>> corpus, _, _ = tj.datasets.make_bars(n_docs=100, seed=0)
>>> model = tj.ARTM(10, regularizers=[(R.sparse_theta(), 0.5), (R.decorrelate(), 10.0)], max_iter=20,
...                 progress=False).fit(corpus)
>>> model.phi_.shape, model.theta_.shape, len(model.scores_)
((25, 10), (10, 100), 20)

Results depend on ``random_state`` only; bits may differ between CPU and GPU.
"""

from __future__ import annotations

import functools
import warnings

import jax
import jax.numpy as jnp
import numpy as np

from topicjax.artm import setup
from topicjax.artm.partial import PartialFitMixin
from topicjax.artm import algorithm as em
from topicjax.core import driver, estep, mstep
from topicjax.core import validation
from topicjax.core.errors import NumericalError
from topicjax.core.random import as_keys
from topicjax.core.sharding import RangeCorpus, replicate
from topicjax.estimator import (CustomRegularizerWarning, EmptyTopicsWarning, NoEvidenceWarning, TopicModelBase, host_array,
                                int_sequence)
from topicjax.evaluation import scores as scores_mod
from topicjax.persistence import ArraySpec, SavedModelError, check_simplex
from topicjax.regularizers import Regularizer, as_regularizer, from_spec
from topicjax.regularizers.base import check_regularizers
from topicjax.regularizers.schedules import Table, check_values, from_spec as schedule_from_spec, is_number
from topicjax.core.compiled import jit

__all__ = ["ARTM", "check_regularizers", "check_scores"]


def check_scores(value, name="scores"):
    """The validator of ``scores``: names of :mod:`topicjax.evaluation.scores` or callables."""
    try:
        scores_mod.resolve_scores(value)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{name} must be names of topicjax.evaluation.scores or callables score(ctx) -> dict; "
                         f"{e}") from None
    return value


@functools.partial(jit, static_argnums=(3, 4, 5, 6, 7, 8))
def _init_batch(keys, reg, aux, W, D, T, T_max, n_seg, first=False, n_docs=None, n_words=None):
    """The initial states of one model per key (module level: compiled once per shape and
    regularizer structure, not once per fit); ``first``: the first model's state alone (a single
    fit: drawn as one of a batch, so it is the state ``fit_many`` starts from, bit for bit, and
    unstacked in the same program rather than by one compiled slice per array).

    ``n_docs`` (traced, so that every corpus of ``D`` columns shares the program): the columns of
    Θ from ``n_docs`` on are no document (:func:`topicjax.artm.setup.theta_width`): θ = 0 and
    ``doc_alive`` = 0, so no step gives them mass or counts them as over-regularized documents;
    the documents' columns are :func:`em.init`'s.  ``n_words`` (traced): likewise the rows of Φ
    from ``n_words`` on are no word (:func:`topicjax.artm.setup.phi_rows`, ``em.init``'s ``real_words``)."""
    states = jax.vmap(lambda k: em.pad_topics(em.init(k, W, D, T, reg=reg, aux=aux, n_segments=n_seg,
                                                      real_words=n_words), T_max))(keys)
    if n_docs is not None:
        is_doc = jnp.arange(D) < n_docs
        zero = jnp.zeros((), states.theta.dtype)
        states = states._replace(theta=jnp.where(is_doc, states.theta, zero),
                                 doc_alive=jnp.where(is_doc, states.doc_alive, zero.astype(states.doc_alive.dtype)))
    return jax.tree.map(lambda a: a[0], states) if first else states


@jit
def _merge_batches(parts, inv):
    """The states of several :func:`_init_batch` calls concatenated and put in the order ``inv``:
    one compiled program (eager, each array's concatenation and gather compiled apart)."""
    return jax.tree.map(lambda *a: jnp.concatenate(a)[inv], *parts)


@jit
def _first_model(*arrays):
    """The first model's slice of each stacked array (one compiled program for all of them)."""
    return tuple(a[0] for a in arrays)


@jit
def _stack_trees(trees):
    """Pytrees of one structure stacked leaf by leaf (a new leading axis), in one compiled program."""
    return jax.tree.map(lambda *xs: jnp.stack(xs), *trees)


class ARTM(PartialFitMixin, TopicModelBase):
    """Additively regularized topic model (ARTM, Theorem 2-3) with a scikit-learn interface.

    Parameters
    ----------
    n_components: number of topics T (background topics included).
    regularizers: anything :func:`~topicjax.regularizers.as_regularizer` accepts: a list of
        ``(R, tau)`` pairs, plain ``R(phi, theta) -> scalar`` functions (τ = 1), pool members, a
        :class:`~topicjax.regularizers.Regularizer`; ``tau`` is a number or a schedule.
    max_iter: number of EM iterations (passes over the collection).
    tol: stop when the relative change of the log-likelihood falls below ``tol`` (0: never; the
        default, since regularization trajectories change the model after the likelihood settles).
    random_state: seed of the initial Φ: an int, ``None`` (fresh entropy) or a ``jax.random`` key.
    background_topics: an int B (the last B topics are background, as in Fig. 3) or a list of
        topic indices/names.  Regularizers select them with ``topics="background"``/``"specific"``.
    topic_names: names of the topics (default ``topic_i`` / ``background_j``).
    scores: names or objects of :mod:`topicjax.evaluation.scores` recorded in ``scores_``.
    score_every: evaluate host scores every this many iterations (and after the last one).
    modality_weights: ``{modality name: weight}`` for a corpus with modalities (default 1 each).
    label_weight: τ of eq. 45 for the class matrix Ψ; ``None`` = 1 when labels are given to
        ``fit`` as ``y``, no classes otherwise.
    overregularized: ``"remove"`` (default) or ``"keep"`` over-regularized topics and documents.
    doc_passes: ``None`` (Θ carried over between passes) or k >= 1: BigARTM's offline pass.
    transform_iter: EM iterations of Θ for new documents (``transform``).
    chunk: non-zeros per chunk of the E-step (see :func:`topicjax.core.layout.prepare`).  Fits
        and ``transform`` round the layout's pieces, and Θ's columns where no regularizer or device
        score reads Θ, up to buckets (:func:`topicjax.core.layout.bucket_size`, at most 12.5 % more:
        corpora of similar size share the compiled programs; the results are the exact shapes'),
        unless the environment sets ``TOPICJAX_BUCKETS=off`` (:func:`topicjax.artm.setup.theta_width`).
    learning_offset, learning_decay: τ0 and κ of the step ``ρ = (τ0 + t)^(-κ)`` of
        :meth:`partial_fit` (BigARTM's ``tau0``, ``kappa``; scikit-learn's LDA names).
    progress: show a tqdm progress bar.

    Fitted attributes: ``phi_`` (W x T), ``theta_`` (T x D), ``components_`` (T x W), ``psi_``
    (C x T or None), ``history_`` (= ``scores_``, one dict per iteration: ``iteration``,
    ``objective`` (log-likelihood), ``regularizer`` (Σ τ R), ``tau/<name>``,
    ``overregularized_topics``, ``overregularized_docs``, ``seconds`` and the scores),
    ``n_iter_``, ``topic_names_``, ``background_``, ``removed_topics_``, ``removed_docs_``,
    ``classes_``, ``final_taus_``, ``vocab_``, ``seed_``, ``online_state_`` and ``n_batch_iter_``
    (the state and number of updates of an online fit, :meth:`partial_fit`; None and 0 after a
    batch fit).  Every fit writes them in one place, :meth:`_set_fitted`.

    Save/load: pool regularizers and Step/Linear/Table schedules are rebuilt from their JSON
    specs; a model with a custom function is loaded with ``ARTM.load(path, regularizers=...)``.
    """

    _saved_arrays = ("phi_", "theta_", "psi_", "topic_alive_", "doc_alive_", "row_modality_")
    _saved_meta = ("scores_", "n_iter_", "topic_names_", "background_", "removed_topics_", "removed_docs_",
                   "classes_", "final_taus_", "modality_names_", "row_weights_")
    _unsaved_params = ("regularizers", "scores")
    _family = "EM"
    _array_specs = {
        "phi_": ArraySpec(("W", "T"), nonneg=True),  # distributions by modality: _check_loaded
        # Θ of the training documents: none after an online fit (both absent; checked in _check_loaded)
        "theta_": ArraySpec(("T", "D"), required=False, nonneg=True, simplex=0),
        "psi_": ArraySpec(("C", "T"), required=False, nonneg=True),
        "topic_alive_": ArraySpec(("T",), nonneg=True),
        "doc_alive_": ArraySpec(("D",), required=False, nonneg=True),
        "row_modality_": ArraySpec(("R",), "iu"),
    }
    _meta_specs = {"scores_": "records", "n_iter_": "int", "topic_names_": "strings", "background_": "ints",
                   "removed_topics_": "strings", "removed_docs_": "ints", "classes_": "list", "final_taus_": "numbers",
                   "modality_names_": "strings", "row_weights_": "numbers", "score_names": "strings",
                   "regularizers": "records", "class_freq": "list"}
    _meta_required = ("scores_", "n_iter_", "topic_names_", "background_", "classes_", "final_taus_",
                      "modality_names_", "row_weights_")
    _constraints = {
        "regularizers": check_regularizers,
        "background_topics": validation.either(validation.integer(0), validation.strings(allow_int=True)),
        "topic_names": validation.optional(validation.strings(unique=True)),
        "scores": check_scores,
        "score_every": validation.integer(1),
        "modality_weights": validation.mapping_of_numbers(0.0),
        "label_weight": validation.optional(validation.number(0.0, low_open=True)),
        "overregularized": validation.one_of("remove", "keep"),
        "doc_passes": validation.optional(validation.integer(1)),
        "transform_iter": validation.integer(1),
        "chunk": validation.optional(validation.integer(1)),
        # ρ = (τ0 + t)^-κ <= 1 from the first update on (scikit-learn's LDA has the same ranges)
        "learning_offset": validation.number(1.0),
        "learning_decay": validation.number(0.0, 1.0),
        "progress": validation.boolean(),
    }

    def __init__(self, n_components=10, *, regularizers=None, max_iter=40, tol=0.0, random_state=0,
                 background_topics=0, topic_names=None, scores=("perplexity", "sparsity"), score_every=1,
                 modality_weights=None, label_weight=None, overregularized="remove", doc_passes=None,
                 transform_iter=30, chunk=None, learning_offset=1024.0, learning_decay=0.7, progress=True):
        self.n_components = n_components
        self.regularizers = regularizers
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state
        self.background_topics = background_topics
        self.topic_names = topic_names
        self.scores = scores
        self.score_every = score_every
        self.modality_weights = modality_weights
        self.label_weight = label_weight
        self.overregularized = overregularized
        self.doc_passes = doc_passes
        self.transform_iter = transform_iter
        self.chunk = chunk
        self.learning_offset = learning_offset
        self.learning_decay = learning_decay
        self.progress = progress

    # ------------------------------------------------------------------ setup
    def regularizer(self) -> Regularizer:
        """The estimator's regularizers as ONE :class:`~topicjax.regularizers.Regularizer`."""
        try:
            return as_regularizer(self.regularizers)
        except TypeError as e:
            raise ValueError(str(e)) from None

    def _label_tau(self) -> float:
        lw = 1.0 if self.label_weight is None else self.label_weight
        if not (is_number(lw) and np.isfinite(lw) and lw > 0):
            raise ValueError(f"label_weight={lw!r} must be a positive number")
        return float(lw)

    def _structure(self, X, y, n_components) -> setup.Structure:
        if isinstance(X, RangeCorpus):  # a corpus read by document ranges (a sharded fit of a batch store)
            if y is not None or self.label_weight is not None:
                raise ValueError(f"{X.source}: labels (y, label_weight) need the corpus in memory; a corpus read by "
                                 "document ranges has none")
            self.vocab_, self.n_features_in_ = list(X.vocab), X.n_words
            X.check_topics(n_components)
            names, background = setup.topic_structure(n_components, self.background_topics, self.topic_names)
            row_mod, mod_names, weights, classes = setup.modality_structure(X, self.modality_weights)
            return setup.Structure(X, names, background, row_mod, mod_names, weights, classes)
        corpus = self._train_corpus(X)
        corpus.check_topics(n_components)
        if y is not None:
            if not isinstance(y, (list, tuple, np.ndarray)) and hasattr(y, "__array__"):
                y = np.asarray(y)  # array-likes (a pandas Series, scikit-learn's test wrappers)
            corpus = corpus.with_labels(y)
        use_labels = y is not None or self.label_weight is not None
        if use_labels and corpus.labels is None:
            raise ValueError("label_weight is set but there are no labels: pass y to fit or a corpus with labels")
        names, background = setup.topic_structure(n_components, self.background_topics, self.topic_names)
        labels = corpus.labels if use_labels else None
        row_mod, mod_names, weights, classes = setup.modality_structure(
            corpus, self.modality_weights, corpus.label_names if use_labels else None,
            self._label_tau() if use_labels else 1.0)
        freq = setup.class_frequencies(labels, corpus.doc_lengths) if labels is not None else None
        return setup.Structure(corpus, names, background, row_mod, mod_names, weights, classes, freq, labels)

    def _config(self, st: setup.Structure, *, update_phi=True, mask_topics=False) -> em.EMConfig:
        return em.EMConfig(update_phi=update_phi, remove=self.overregularized == "remove", mask_topics=mask_topics,
                           n_segments=len(st.mod_names), doc_passes=int(self.doc_passes or 0))

    def _trackers(self):
        trackers = scores_mod.resolve_scores(self.scores)
        device = tuple(t.device for t in trackers if getattr(t, "device", None) is not None)
        on_record = [t for t in trackers if hasattr(t, "from_record")]
        host = [t for t in trackers if getattr(t, "device", None) is None and not hasattr(t, "from_record")]
        return device, on_record, host

    def _refuse_sizes(self, st: setup.Structure, n_components: int, mesh=None, models: int = 1,
                      name: str = "n_components") -> None:
        """Refuse a number of topics whose arrays cannot fit, before any is allocated
        (:func:`topicjax.core.validation.refuse_size`).  Counted: Φ (rows x T) and Θ (T x D) in
        float32 and the EM step's expected counts of both, ``n_wt`` and ``n_td`` (ARTM eq. 7-8),
        which the step holds beside them (XLA's memory analysis of the compiled step: 2.05 (W + D)
        T floats at its peak); the ``models`` fits of :meth:`fit_many` hold their states side by side
        beside one step's counts.
        On a mesh Θ is split by documents over the devices, and Φ is on each of them."""
        rows, docs = int(st.n_rows), int(st.corpus.n_docs)
        phi_copies, theta_share = 1.0, float(docs)
        if mesh is not None:
            import jax

            n_dev = int(mesh.devices.size)
            if jax.devices()[0].platform == "cpu":  # host devices share the machine's memory
                local = sum(1 for d in mesh.devices.flat if d.process_index == jax.process_index())
                phi_copies, theta_share = float(local), docs * local / n_dev
            else:
                theta_share = -(-docs // n_dev)
        per_topic = 4 * (phi_copies * rows + theta_share) * (models + 1)  # the states and one step's counts
        fits = f"{models} {type(self).__name__} fits hold" if models > 1 else f"one {type(self).__name__} fit holds"
        validation.refuse_size(name, int(n_components), per_topic,
                      what=(f"with {n_components:,} topics on {rows:,} word rows and {docs:,} documents, {fits} Φ "
                            "(W x T) and Θ (T x D) in float32 and the EM step's expected counts of both"))

    def _prepare(self, X, y, n_components, mesh=None, models: int = 1, name: str = "n_components"):
        """Everything a fit needs: structure, device data, the bound regularizer, aux arrays."""
        self._validate_params()
        reg = self.regularizer()  # bad regularizers fail before the corpus is read into the device
        st = self._structure(X, y, n_components)
        self._refuse_sizes(st, n_components, mesh, models, name)  # before the device holds anything
        if isinstance(st.corpus, RangeCorpus):
            st, data, n_weighted = self._range_data(st, mesh)
        else:
            src, n_weighted = setup.weighted_entries(st.corpus, st.weights, st.row_mod, st.labels)
            data = setup.device_data(src, self.chunk, mesh=mesh)
        reg = reg.bind(setup.context(st, n_components, "fit")).resolve(int(self.max_iter)).cast(jnp.float32)
        return st, data, n_weighted, reg, setup.aux_arrays(st, n_components)

    def _range_data(self, st: setup.Structure, mesh):
        """``(structure, data, n_weighted)`` of a :class:`~topicjax.core.sharding.RangeCorpus`: every
        process reads and lays out its own devices' documents only (:func:`~topicjax.core.sharding.shard`),
        and the totals the regularizers and scores use (``doc_lengths``, ``word_counts``) are the
        devices' partial sums added with ``psum``.  Its counts enter with weight 1 (one modality)."""
        if mesh is None:
            raise ValueError(f"{st.corpus.source}: a corpus read by document ranges is fitted on a mesh "
                             "(ARTM.fit(X, mesh=...), topicjax.scale.distributed.fit)")
        if np.any(st.weights != 1.0):
            raise ValueError(f"modality_weights={self.modality_weights!r}: a corpus read by document ranges is "
                             "fitted with its counts as they are (weight 1)")
        data = setup.device_data(st.corpus, self.chunk, mesh=mesh)
        corpus = st.corpus.with_totals(*data.totals(st.corpus.n_docs, st.corpus.n_words))
        return setup.Structure(**{**vars(st), "corpus": corpus}), data, float(corpus.n_tokens)

    @staticmethod
    def _columns(st, n_docs=None, width=None, rows=None):
        """``(W, D, {n_docs, n_words})`` for :func:`_init_batch`: Φ's rows (``st.n_rows`` or, given
        ``rows`` (:func:`setup.phi_rows`), that many rows of which the words are the first) and Θ's
        columns (``n_docs``, default the corpus's documents; 0 for :func:`em.place`; or, given a
        ``width`` (:func:`setup.theta_width`), that many columns of which the corpus's documents are
        the first), the real numbers traced (transfers, no program) where shapes are buckets."""
        real = {}
        if width is None:
            D = st.corpus.n_docs if n_docs is None else int(n_docs)
        else:
            D, real["n_docs"] = int(width), jax.device_put(np.int32(st.corpus.n_docs))
        if rows is None:
            W = st.n_rows
        else:
            W, real["n_words"] = int(rows), jax.device_put(np.int32(st.n_rows))
        return W, D, real

    def _init_states(self, st, reg, aux, seeds, tops, T_max, n_docs=None, width=None, rows=None):
        """Initial states of models with ``seeds[g]`` and ``tops[g]`` topics, stacked and padded to
        ``T_max`` topics; each is the start of its own :meth:`fit` (one vmapped draw per T).
        ``n_docs``: Θ's columns (default: the corpus's documents; 0 for :func:`em.place`);
        ``width``, ``rows``: Θ's columns and Φ's rows rounded up to a bucket (:meth:`_columns`)."""
        n_seg = len(st.mod_names)
        W, D, real = self._columns(st, n_docs, width, rows)
        parts, order = [], []
        for T in sorted(set(tops)):
            idx = [g for g, t in enumerate(tops) if t == T]
            parts.append(_init_batch(as_keys([seeds[g] for g in idx], "seeds"), reg, aux, W, D, T, T_max, n_seg,
                                     **real))
            order += idx
        if len(parts) == 1:
            return parts[0]
        return _merge_batches(parts, np.argsort(order).astype(np.int32))

    def _init_state(self, st, reg, aux, seed, T, n_docs=None, width=None, rows=None):
        """The initial state of a single fit with ``seed`` and ``T`` topics: the state
        :meth:`_init_states` gives the same seed in a batch (one compiled program, no slicing)."""
        W, D, real = self._columns(st, n_docs, width, rows)
        return _init_batch(as_keys([seed], "random_state"), reg, aux, W, D, T, T, len(st.mod_names), True, **real)

    def fit_problem(self, X, y=None) -> setup.FitProblem:
        """Everything :meth:`fit` computes before its first iteration, for code that runs its own
        iterations of :func:`topicjax.artm.algorithm.step` (``state`` is the initial
        :class:`~topicjax.artm.algorithm.EMState`, ``cfg`` the step's config; the regularizer is bound,
        resolved for ``max_iter`` iterations and checked on the initial model)."""
        T = int(self.n_components)
        st, data, n_weighted, reg, aux = self._prepare(X, y, T)
        state = self._init_state(st, reg, aux, self._seed(), T)
        reg.check(state.phi, state.theta)
        return setup.FitProblem(st, data, n_weighted, reg, aux, state, self._config(st))

    # ------------------------------------------------------------------ fit
    def fit(self, X, y=None, *, mesh=None, checkpoint=None, checkpoint_every=10):
        """Fit to a Corpus or a (documents x words) count matrix; ``y`` (optional) are class labels
        (one per document, or a boolean indicator matrix).  ``mesh``: shard the documents over the
        devices of a :class:`jax.sharding.Mesh` (:func:`topicjax.scale.distributed.make_mesh`); ``X``
        may then be a :class:`~topicjax.core.sharding.RangeCorpus` (a batch store that every
        process reads only its own devices' documents of, :func:`topicjax.scale.distributed.fit`).
        ``checkpoint``: a folder where the fit's progress is saved every ``checkpoint_every``
        iterations and from which a killed fit resumes, to the same model bit for bit on CPU
        (:mod:`topicjax.core.checkpoint`; single-process fits)."""
        T = int(self.n_components)
        if checkpoint is not None and isinstance(X, RangeCorpus):
            raise ValueError("checkpoint: a fit of a corpus read by document ranges (a multi-process fit of a batch "
                             "store) is not checkpointed")
        st, data, n_weighted, reg, aux = self._prepare(X, y, T, mesh)
        ckpt = self._open_checkpoint(checkpoint, checkpoint_every, st.corpus,
                                     devices=None if mesh is None else int(mesh.devices.size))
        device, on_record, host = self._trackers()
        # On a mesh Θ is started on the devices, split by documents (em.place), the rest replicated;
        # locally its columns may be rounded up to a bucket (setup.theta_width: cut off on the host)
        width = None if mesh is not None else setup.theta_width(st.corpus.n_docs, reg, device, (st.n_rows, T),
                                                                   st.corpus.nnz)
        rows = None if mesh is not None else setup.phi_rows(st, reg, device)
        state = self._init_state(st, reg, aux, self._seed(ckpt), T, n_docs=None if mesh is None else 0, width=width,
                                 rows=rows)
        if mesh is not None:
            reg, state = replicate(mesh, reg), em.place(state, data)
        reg.check(state.phi, em.doc_columns(state.theta, data))
        # the rows of Φ that are words matter to device scores only (a static part: none, no program per W)
        static = em.EMStatic(self._config(st), device, st.corpus.n_words if device else None)

        taus = self._tau_table(reg, int(self.max_iter))
        before = None
        if reg.on_host:
            def before(it, history):
                r = reg.set_host_values(it, self._records(history, st, reg.names, taus, on_record, n_weighted))
                taus[it - 1] = [float(np.asarray(t.coef(it))) for t in r.terms]
                return data, r, aux

        after = None
        if host:
            def after(it, s):
                return self._host_scores(host, st, s, it, n_weighted)

        def explain(s, args, it, reason):
            return self._blame(s, args, it, reason)

        def set_taus(host):  # the coefficients that schedules of the score history chose so far
            taus[...] = np.asarray(host["taus"], np.float64).reshape(taus.shape)

        run_ckpt = None if ckpt is None else ckpt.run("fit", get_host=lambda: {"taus": taus.copy()}, set_host=set_taus)
        # donate: the iterations write into the initial state's buffers (one copy of Φ and Θ less
        # at the peak); it is this fit's own (no array of it is in reg: the vmapped init copies)
        state, records = driver.run(em.ARTM_EM, static, state, (data, reg, aux), max_iter=int(self.max_iter),
                                    tol=float(self.tol), desc=type(self).__name__,
                                    progress=self.progress and jax.process_index() == 0,  # one bar per run
                                    before=before, after=after, after_every=int(self.score_every), explain=explain,
                                    checkpoint=run_ckpt, donate=True)
        self._fitted_from_em(st, state, self._records(records, st, reg.names, taus, on_record, n_weighted))
        self._warn_empty_topics(self.history_)
        return self

    def _checkpoint_params(self) -> dict:
        params = super()._checkpoint_params()
        if "regularizers" in params:
            params["regularizers"] = [{"name": t.name, "spec": t.spec, "tau": t.coef.spec()}
                                      for t in self.regularizer().terms]
        return params

    @staticmethod
    def _tau_table(reg, n_iter: int) -> np.ndarray:
        """The coefficients of every iteration on the host, exact (float64), ``(n_iter, R)``;
        schedules of the score history are filled in as the fit runs."""
        cols = [np.full(n_iter, np.nan) if t.coef.on_host else t.coef.values(n_iter) for t in reg.terms]
        return np.stack(cols, axis=1) if cols else np.zeros((n_iter, 0))

    def _records(self, records, st, names, taus, on_record, n_weighted):
        """Driver records -> the history schema of ARTM (``tau/<name>``, topic names, scores)."""
        out = []
        for r in records:
            if "dead_topics" not in r:  # already converted (a host schedule reads the history)
                out.append(r)
                continue
            it = r["iteration"]
            rec = {"iteration": it, "objective": r["objective"], "regularizer": r["regularizer"]}
            device = np.atleast_1d(r.get("coefs", np.zeros(len(names))))
            for i, name in enumerate(names):
                v = taus[it - 1, i] if it - 1 < len(taus) else np.nan
                rec[f"tau/{name}"] = float(v if np.isfinite(v) else device[i])
            rec["overregularized_topics"] = [st.names[j] for j in np.flatnonzero(r["dead_topics"])]
            rec["overregularized_docs"] = int(r["dead_docs"])
            for k, v in r.items():
                if k not in ("coefs", "dead_topics", "dead_docs", "iteration", "objective", "regularizer", "seconds"):
                    rec[k] = v
            for t in on_record:
                rec.update(t.from_record(rec, n_weighted))
            rec["seconds"] = r.get("seconds", 0.0)
            out.append(rec)
        return out

    def _host_scores(self, trackers, st, state, iteration, n_weighted) -> dict:
        W, D = st.corpus.n_words, st.corpus.n_docs
        phi, theta = host_array(state.phi)[:W], host_array(state.theta)[:, :D]  # a sharded Θ's padding off
        alive = host_array(state.topic_alive) > 0
        bg = np.asarray(st.background, np.int64)
        specific = alive.copy()
        specific[bg] = False
        ctx = scores_mod.ScoreContext(
            phi=phi, theta=theta, corpus=st.corpus, background=bg[alive[bg]] if bg.size else bg,
            specific=np.flatnonzero(specific), topic_weights=theta @ np.asarray(st.corpus.doc_lengths, np.float64),
            loglik=float(host_array(state.loglik)), n_tokens=n_weighted, iteration=iteration, model=self)
        out = {}
        for tr in trackers:
            res = tr(ctx)
            if not isinstance(res, dict):
                raise TypeError(f"score {getattr(tr, 'name', tr)!r} returned {type(res).__name__}, expected a dict")
            out.update({k: float(v) for k, v in res.items()})
        return out

    def _blame(self, state, args, iteration, reason) -> str:
        """The regularizer responsible for a failing iteration (evaluated at the last good state)."""
        data, reg, aux = args
        it = jnp.asarray(iteration)
        phi_c, theta_c = jnp.maximum(state.phi, mstep.EPS), jnp.maximum(state.theta, mstep.EPS)
        coef = {t.name: float(t.coef(it)) for t in reg.terms}
        if reason == "nonfinite":
            for t, p in zip(reg.terms, state.params):
                try:
                    docs_c = em.doc_columns(theta_c, data)
                    v = t.fn(phi_c, docs_c, p)
                    g = jax.grad(lambda a, b: t.fn(a, b, p), argnums=(0, 1))(phi_c, docs_c)
                    bad = not (bool(jnp.isfinite(v)) and all(bool(jnp.all(jnp.isfinite(x))) for x in g))
                except Exception:  # noqa: BLE001 - the failure itself is the finding
                    bad = True
                if bad:
                    return f"regularizer {t.name!r} (coefficient {coef[t.name]:g}) produced non-finite values"
            return f"no regularizer is non-finite at the last good state (coefficients {coef})"
        # collapse: which term's removal keeps a topic and a document in the model
        _, g_phi, g_theta = estep.expected_counts(state.phi, state.theta, data)
        n_phi, n_theta = jnp.maximum(state.phi, mstep.EPS) * g_phi, jnp.maximum(state.theta, mstep.EPS) * g_theta
        terms = []
        for t, p in zip(reg.terms, state.params):
            gp, gt = jax.grad(lambda a, b: t.fn(mstep.clamped(a), mstep.clamped(em.doc_columns(b, data)), p),
                              argnums=(0, 1))(state.phi, state.theta)
            c = t.coef(it)
            terms.append((t, c * jnp.maximum(state.phi, mstep.EPS) * gp, c * jnp.maximum(state.theta, mstep.EPS) * gt))
        total_phi = n_phi + sum(x[1] for x in terms)
        total_theta = n_theta + sum(x[2] for x in terms)

        def survives(a_phi, a_theta):
            return bool(jnp.any((a_phi > 0).any(0) & (a_theta > 0).any(1)) & jnp.any((a_theta > 0).any(0)))

        culprits = [t.name for t, dp, dt in terms if survives(total_phi - dp, total_theta - dt)]
        if not culprits and terms:
            culprits = [min(terms, key=lambda x: float(jnp.minimum(x[1], 0).sum() + jnp.minimum(x[2], 0).sum()))[0].name]
        if not culprits:
            return "no regularizer is involved (the data leaves nothing to fit)"
        return ", ".join(f"regularizer {n!r} with coefficient {coef[n]:g}" for n in culprits) + (
            " removes every topic or every document at this iteration (ARTM Notes 1-2); lower its coefficient or "
            "switch it on later with a schedule")

    @property
    def empty_topics_(self) -> list[str]:
        """Names of the topics without mass in the fitted model (ARTM Notes 1-2: a regularizer, or
        the data, drove their φ column or their θ row to zero): removed during the fit
        (``removed_topics_``, ``overregularized="remove"``) or kept empty (``"keep"``).  Their rows
        of ``components_`` are zero and :meth:`transform` gives them no share."""
        self._check_fitted()
        empty = np.asarray(self.phi_).sum(0) <= 0
        alive = getattr(self, "topic_alive_", None)
        if alive is not None:
            empty |= np.asarray(alive) <= 0
        theta = getattr(self, "theta_", None)
        if theta is not None and np.shape(theta)[1]:
            empty |= np.asarray(theta).sum(1) <= 0
        names = getattr(self, "topic_names_", None) or [f"topic_{j}" for j in range(empty.size)]
        return [names[j] for j in np.flatnonzero(empty)]

    @property
    def background_topics_(self) -> list[str]:
        """Names of the background topics (``background_topics``; their indices are
        ``background_``), which :meth:`print_topics` marks."""
        self._check_fitted()
        names = getattr(self, "topic_names_", None) or [f"topic_{j}" for j in range(np.shape(self.phi_)[1])]
        return [names[b] for b in getattr(self, "background_", ())]

    def _warn_empty_topics(self, records, before=(), where: str | None = None, stacklevel: int = 4) -> None:
        """An :class:`~topicjax.estimator.EmptyTopicsWarning` naming the topics that ended the fit
        empty (:attr:`empty_topics_`, those not in ``before``), the iteration each was first found
        over-regularized (``records``' ``overregularized_topics``) and the regularizers present with
        their final coefficients."""
        empty = [n for n in self.empty_topics_ if n not in set(before)]
        if not empty:
            return
        first: dict = {}
        for r in records:
            for n in r.get("overregularized_topics", ()):
                first.setdefault(n, r.get("iteration"))
        shown = ", ".join(repr(n) + (f" (from iteration {first[n]})" if first.get(n) is not None else "")
                          for n in empty[:8]) + (f" and {len(empty) - 8} more" if len(empty) > 8 else "")
        regs = ", ".join(f"{n!r} (coefficient {tau:g} at the end)"
                         for n, tau in zip(getattr(self, "regularizer_names_", []), getattr(self, "final_taus_", [])))
        fate = ("removed from the model (overregularized='remove')" if self.overregularized == "remove"
                else "kept without mass (overregularized='keep')")
        T = np.shape(self.phi_)[1]
        warnings.warn(
            f"{where or type(self).__name__}: {len(empty)} of {T} topics ended the fit empty, their φ column or θ "
            f"row driven to zero (ARTM Notes 1-2): {shown}; regularizers: "
            f"{regs or 'none (the data left them no tokens)'}; "
            f"they are {fate}: zero rows of components_ and no share in transform (listed in empty_topics_); lower "
            "the coefficients, switch the regularizers on later with a schedule, or fit fewer topics",
            EmptyTopicsWarning, stacklevel=stacklevel)

    def _set_fitted(self, st: setup.Structure, *, phi, psi, theta, topic_alive, doc_alive, history: list,
                    final_taus: list, reg: Regularizer, params, online_state=None, n_batch_iter: int = 0) -> None:
        """Every fitted attribute, the one place they are written: by :meth:`fit` (on one device or a
        mesh, so :func:`topicjax.scale.distributed.fit`), each model of :meth:`fit_many` and
        :func:`topicjax.scale.offline.fit_store` through :meth:`_fitted_from_em`, and by
        ``partial_fit`` and :func:`topicjax.scale.online.fit_online` through ``_take_online_state``.

        ``st``: the model's structure (topic names, background, modalities, classes); ``phi`` (W x
        T), ``psi`` (C x T or None), ``theta`` (T x D, None after an online fit), ``topic_alive``
        (T,) and ``doc_alive`` (D,) or None, as numpy; ``history``: the records (``scores_`` is the
        same list); ``final_taus``: the coefficients at the end; ``reg`` and ``params``: the
        regularizer and its terms' parameters, whose learned ones (``update``) are kept.  An online
        fit gives its ``online_state`` (what ``partial_fit`` continues from) and ``n_batch_iter``
        (the updates applied); a batch fit has none and 0."""
        self.phi_ = phi
        self.psi_ = psi
        self.theta_ = theta
        self.scores_ = history
        self.history_ = history
        self.n_iter_ = len(history)
        self.topic_names_ = list(st.names)
        self.background_ = [int(b) for b in st.background]
        self.topic_alive_ = topic_alive
        self.doc_alive_ = doc_alive
        self.removed_topics_ = [st.names[j] for j in np.flatnonzero(topic_alive == 0)]
        self.removed_docs_ = [] if doc_alive is None else [int(d) for d in np.flatnonzero(doc_alive == 0)]
        self.classes_ = list(st.classes)
        self.final_taus_ = list(final_taus)
        self.modality_names_ = list(st.mod_names)
        self.row_modality_ = np.asarray(st.row_mod)
        self.row_weights_ = [float(w) for w in st.weights]
        self._class_freq = st.class_freq
        self.regularizer_names_ = list(reg.names)
        self.learned_params_ = [{k: host_array(p[k]) for k in t.learned if isinstance(p, dict) and k in p}
                                for t, p in zip(reg.terms, params)]
        self.online_state_ = online_state
        self._online_phi = phi if online_state is not None else None  # partial_fit continues while phi_ is this
        self.n_batch_iter_ = int(n_batch_iter)
        self._set_components()

    def _fitted_from_em(self, st: setup.Structure, state, records: list) -> None:
        """:meth:`_set_fitted` from the final :class:`~topicjax.artm.algorithm.EMState` of a batch
        fit and its history ``records`` (ARTM's schema: the final coefficients are their last
        ``tau/<name>``)."""
        W, D = st.corpus.n_words, st.corpus.n_docs
        phi_full = host_array(state.phi)
        reg_names = [k[4:] for k in (records[-1] if records else {}) if k.startswith("tau/")]
        self._set_fitted(st, phi=phi_full[:W], psi=phi_full[W:] if st.classes else None,
                         theta=host_array(state.theta)[:, :D],  # without the padding of a Θ sharded by documents
                         topic_alive=host_array(state.topic_alive), doc_alive=host_array(state.doc_alive)[:D],
                         history=records,
                         final_taus=[float(records[-1][f"tau/{n}"]) for n in reg_names] if records else [],
                         reg=self.regularizer(), params=state.params)

    # ------------------------------------------------------------------ many models
    def fit_many(self, X, y=None, *, seeds=None, n_topics=None, params=None, mode=None, vmap_size=None,
                 workers=None, taus=None) -> list:
        """Fit a batch of models in ONE compiled call (:func:`topicjax.core.driver.run_many`).

        The models may differ in ``taus`` (array (G, R): τ_i of model g; ``nan`` keeps the
        estimator's own coefficient or schedule), ``seeds`` (G ``random_state`` values: random
        restarts) and ``n_topics`` (G numbers of topics: every model is padded to the largest and
        its extra topics masked from the start; not with ``background_topics``, ``topic_names`` or
        regularizers that learn parameters).  Whatever is not given is the estimator's own.  Each
        model runs to its own stopping rule (``max_iter``, ``tol``) and equals the separate fit
        of a clone with its settings (tested).  ``mode``: ``"sequential"`` (default on one CPU
        device), ``"vmap"`` (default on accelerators; ``vmap_size`` models side by side),
        ``"devices"`` (models spread over the local devices) or ``"threads"`` (``workers``
        threads).  ``params = {name: [value per model]}`` (other constructor parameters) are
        fitted one after the other on the host (:meth:`TopicModelBase.fit_many`; ``"vmap"`` and
        ``"devices"`` warn that they fall back).  The signature is every family's; ``taus`` is
        keyword-only (the second positional argument is ``y``, the labels).  Returns fitted
        clones; ``scores_`` hold ``objective``, the ``tau/...`` and per-iteration scores, and the
        host scores after the last iteration.

        >>> import topicjax as tj
        >>> corpus, _, _ = tj.datasets.make_bars(n_docs=30, seed=0)
        >>> base = tj.ARTM(5, max_iter=5, progress=False, scores=())
        >>> [m.phi_.shape[1] for m in base.fit_many(corpus, seeds=[0, 1, 2], n_topics=[4, 5, 6])]
        [4, 5, 6]
        """
        self._validate_params()
        if taus is None and y is not None and np.ndim(y) == 2:
            raise TypeError("ARTM.fit_many(X, y): y is the documents' labels, and this y is a 2-d array; pass "
                            "regularization coefficients by keyword, fit_many(X, taus=...)")
        if params:
            if taus is not None:
                raise ValueError("fit_many: give taus (one compiled batch) or params (separate fits), not both")
            return self._fit_many_on_host(X, y, seeds=seeds, n_topics=n_topics, params=params, mode=mode,
                                          vmap_size=vmap_size, workers=workers,
                                          why="ARTM's compiled batch varies taus, seeds and n_topics only, not params")
        G, seeds, tops = self._batch_settings(taus, seeds, n_topics)
        T_max = max(tops)
        masked = any(t != T_max for t in tops)
        if masked and (self.background_topics or self.topic_names is not None):
            raise ValueError("fit_many with several numbers of topics cannot use background_topics or topic_names")
        st, data, n_weighted, reg, aux = self._prepare(X, y, T_max, models=G,
                                                       name="n_components" if n_topics is None else "n_topics")
        if masked and any(t.update is not None for t in reg.terms):
            raise ValueError("fit_many with several numbers of topics cannot use regularizers that learn parameters")
        if reg.on_host:
            raise ValueError("fit_many: a schedule of the score history cannot be compiled into a batch; "
                             "use tau(iteration) schedules")
        n_iter = int(self.max_iter)
        tables, grid_rows = self._coefficient_tables(reg, taus, G, n_iter)
        reg_b = _stack_trees([reg.with_coefs([Table(v) for v in tab]) for tab in tables])
        device, on_record, host = self._trackers()
        states = self._init_states(st, reg, aux, seeds, tops, T_max,
                                   width=setup.theta_width(st.corpus.n_docs, reg, device, (st.n_rows, T_max),
                                                           st.corpus.nnz),
                                   rows=setup.phi_rows(st, reg, device))
        reg.check(*_first_model(states.phi, states.theta))
        static = em.EMStatic(self._config(st, mask_topics=masked), device, st.corpus.n_words if device else None)
        finals, recs, n_done, status = driver.run_many(
            em.ARTM_EM, static, states, (data, reg_b, aux), batched=(False, True, False), max_iter=n_iter,
            tol=float(self.tol), mode=mode, vmap_size=vmap_size, workers=workers)

        def clone(g):
            m = self._clone_with_input(random_state=seeds[g], n_components=tops[g])
            if taus is not None:
                own = self.regularizer()
                m.regularizers = own.with_coefs([c if np.isnan(v) else float(v) for c, v in zip(own.coefs, grid_rows[g])])
            return m

        def error(g, n, status):
            return self._numerical_error_many(g, seeds, tops, n, status)

        models = []
        batch = self._batch_models(jax.tree.map(host_array, finals), recs, n_done, status, seeds=seeds, clone=clone,
                                   error=error)
        for g, (m, state, rows) in enumerate(batch):
            Tg = tops[g]
            sg = st
            if Tg != T_max:
                state = state._replace(phi=state.phi[:, :Tg], theta=state.theta[:Tg], topic_alive=state.topic_alive[:Tg])
                sg = setup.Structure(**{**vars(st), "names": st.names[:Tg]})
            for r in rows:
                r["dead_topics"] = r["dead_topics"][:Tg]
            records = m._records(rows, sg, reg.names, tables[g].T, on_record, n_weighted)
            if records and host:
                records[-1].update(m._host_scores(host, sg, state, len(records), n_weighted))
            m._fitted_from_em(sg, state, records)
            m._warn_empty_topics(records, where=f"{type(self).__name__}.fit_many, model {g} (seed {seeds[g]}, "
                                                f"{Tg} topics)")
            models.append(m)
        return models

    fit_grid = fit_many

    def _batch_settings(self, taus, seeds, n_topics):
        sizes = {name: len(v) for name, v in (("taus", taus), ("seeds", seeds), ("n_topics", n_topics)) if v is not None}
        if not sizes:
            raise ValueError("fit_many needs at least one of taus, seeds or n_topics")
        if len(set(sizes.values())) != 1:
            raise ValueError(f"taus, seeds and n_topics must have one length (models), got {sizes}")
        G = next(iter(sizes.values()))
        if G == 0:
            raise ValueError("fit_many: no models (empty taus/seeds/n_topics)")
        seeds = [self._seed()] * G if seeds is None else int_sequence(seeds, "seeds", 0)
        tops = [int(self.n_components)] * G if n_topics is None else int_sequence(n_topics, "n_topics", 1)
        return G, seeds, tops

    def _coefficient_tables(self, reg, taus, G, n_iter):
        R = len(reg.terms)
        try:
            grid = np.full((G, R), np.nan) if taus is None else np.asarray(taus, np.float64)
        except (TypeError, ValueError):  # ragged rows, or entries that are not numbers
            raise ValueError(f"taus must be an array (n_models, {R}) of numbers for {R} regularizers "
                             f"{list(reg.names)} (nan keeps a regularizer's own coefficient), got {taus!r}"[:400]) from None
        if grid.ndim == 1 and R == 1:
            grid = grid[:, None]
        if grid.ndim != 2 or grid.shape != (G, R):
            raise ValueError(f"taus must have shape (n_models, {R}) for {R} regularizers {list(reg.names)}, "
                             f"got {grid.shape}")
        own = np.stack([t.coef.values(n_iter) for t in reg.terms]) if R else np.zeros((0, n_iter))
        tables = np.where(np.isnan(grid)[:, :, None], own[None], grid[:, :, None])  # (G, R, n_iter)
        for g in range(G):
            for i, t in enumerate(reg.terms):
                try:
                    check_values(tables[g, i], t.name, t.nonnegative)
                except ValueError as e:
                    raise ValueError(f"taus[{g}, {i}]: {e}") from None
        return tables, grid

    def _numerical_error_many(self, g, seeds, tops, n_done, status):
        what = "non-finite values" if status == driver.NONFINITE else "a collapse (every topic or document removed)"
        return NumericalError(f"fit_many: model {g} (seed {seeds[g]}, {tops[g]} topics) produced {what} at iteration "
                              f"{n_done + 1}; fit it alone with fit() for the regularizer responsible",
                              iteration=n_done + 1, reason="nonfinite" if status == driver.NONFINITE else "collapse")

    # ------------------------------------------------------------------ inference
    def _infer(self, X) -> tuple[np.ndarray, object]:
        corpus = self._new_corpus(X)
        reg_all = self.regularizer()
        if len(reg_all.terms) != len(getattr(self, "regularizer_names_", [])):
            raise ValueError("the regularizers differ from those the model was fitted with")
        st = setup.Structure(corpus, tuple(self.topic_names_), tuple(self.background_),
                             np.asarray(self.row_modality_, np.int32), tuple(self.modality_names_),
                             np.asarray(self.row_weights_, np.float64), tuple(self.classes_),
                             getattr(self, "_class_freq", None))
        T = int(self.n_components)
        learned = getattr(self, "learned_params_", None) or [{} for _ in reg_all.terms]
        terms = []
        for t, fitted, tau in zip(reg_all.terms, learned, self.final_taus_):
            ctx = setup.context(st, T, "transform", fitted=fitted, corpus=corpus)
            b = t.bind(ctx)
            if b is not None:
                terms.append(Regularizer([b]).with_coefs([tau]).terms[0])
        reg = Regularizer(terms).cast(jnp.float32)
        src, _ = setup.weighted_entries(corpus, st.weights, st.row_mod[: corpus.n_words])
        data = setup.device_data(src, self.chunk)
        alive_host = np.asarray(self.topic_alive_, np.float32)
        alive = jnp.asarray(alive_host)
        rows = [self.phi_] + ([self.psi_] if self.psi_ is not None else [])
        extra = setup.phi_rows(st, reg) - st.n_rows  # zero rows: a vocabulary rounded up to a bucket
        phi = jax.device_put(np.vstack(rows + [np.zeros((extra, T))]).astype(np.float32))
        # on the host: computed eagerly on the device, each operation compiled a program of its own
        theta0 = np.broadcast_to((alive_host / alive_host.sum())[:, None], (T, corpus.n_docs))
        kept = []
        for t in reg.terms:
            try:  # a custom function written for the training shapes may not apply to new documents
                Regularizer([t]).check(phi, theta0)
            except ValueError as e:
                if not t.is_plain:
                    raise
                warnings.warn(f"{e}; it is not applied to new documents")
                continue
            kept.append(t)
        reg = Regularizer(kept)
        aux = setup.aux_arrays(st, T)
        cfg = self._config(st, update_phi=False)._replace(doc_passes=0)
        # Θ's columns rounded up to a bucket where no Θ-term reads them (setup.theta_width): the
        # columns after the documents have no tokens and are cut off here
        width = setup.theta_width(corpus.n_docs, reg, (), (st.n_rows, T), corpus.nnz)
        theta = host_array(em.infer_theta(phi, data, width, reg,
                                          n_iter=int(self.transform_iter), topic_alive=alive, aux=aux,
                                          cfg=cfg))[:, :corpus.n_docs]
        notes = []
        total = theta.sum(0)
        bare = np.flatnonzero(~(total > 0)) if reg.terms else np.zeros(0, np.int64)
        if bare.size:
            # eq. 16 gave these documents no topic: the Θ-terms outweigh their few counts (ARTM
            # Note 2, an over-regularized document); a zero column is no distribution, and the
            # model's own word for them is Θ of eq. 16 without those terms
            sub = corpus.subset(bare)
            src_b, _ = setup.weighted_entries(sub, st.weights, st.row_mod[: sub.n_words])
            width_b = setup.theta_width(sub.n_docs, Regularizer([]), nnz=sub.nnz)
            plain = host_array(em.infer_theta(phi, setup.device_data(src_b, self.chunk), width_b, Regularizer([]),
                                              n_iter=int(self.transform_iter), topic_alive=alive, aux=aux,
                                              cfg=cfg))[:, :sub.n_docs]
            theta = theta.copy()
            theta[:, bare] = plain
            taus = ", ".join(f"{t.name!r}" for t in reg.terms)
            notes.append((bare, f"the regularizers ({taus}) leave no topic to these documents (over-regularized, "
                                "ARTM Note 2: too few tokens against the Θ-terms); their topic proportions are "
                                "inferred without the regularizers"))
        return theta, corpus, notes

    def transform(self, X, empty_docs="keep"):
        """Topic proportions of (new) documents, ``(n_docs, n_components)``: Θᵀ inferred with Φ
        fixed by ``transform_iter`` EM iterations, the Θ-regularizers applied (those holding data
        about particular training documents are not).

        ``X``: a :class:`~topicjax.data.Corpus` over the model's vocabulary (re-index others with
        ``corpus.with_vocab(model.vocab_)``) or a count matrix whose columns ARE the model's
        words in ``vocab_`` order: a matrix has no vocabulary, so only its width is checked and
        permuted columns give other proportions silently.
        ``empty_docs``: documents without tokens get the distribution of no evidence, uniform over
        the topics in the model (``"keep"``: EM starts there and no token moves it; Θ-regularizers
        are not applied to them), are left out of the result (``"drop"``: one row per document with
        tokens, in order) or are an error naming the first (``"error"``).
        """
        def infer(c):
            theta, _, notes = self._infer(c)
            return theta.T, notes

        return self._transform_docs(X, empty_docs, infer)

    def predict_proba(self, X):
        """p(c|d) = Σ_t ψ_ct θ_td (eq. 44) for documents X, ``(n_docs, n_classes)``."""
        self._check_fitted()
        if getattr(self, "psi_", None) is None:
            raise ValueError("this model has no classes: fit it with labels (y) or label_weight")
        theta, _, notes = self._infer(X)
        for docs, text in notes:
            warnings.warn(f"documents {', '.join(map(str, docs[:8]))} of X: {text}", NoEvidenceWarning, stacklevel=3)
        p = (self.psi_ @ theta).T
        s = p.sum(1, keepdims=True)
        return np.divide(p, s, out=np.full_like(p, 1.0 / p.shape[1]), where=s > 0)

    def predict(self, X):
        """The most probable class of each document (names from ``classes_``)."""
        proba = self.predict_proba(X)  # first: it says when the model is not fitted or has no classes
        return np.asarray(self.classes_, dtype=object)[np.argmax(proba, axis=1)]

    # ------------------------------------------------------------------ persistence
    def save(self, path) -> None:
        """Save to folder ``path``: Φ, Θ, Ψ, histories, coefficients, learned regularizer
        parameters, and each regularizer's JSON spec where it has one."""
        arrays, meta = self._save_contents()
        if isinstance(self.scores, (list, tuple)) and all(isinstance(x, str) for x in self.scores):
            meta["score_names"] = list(self.scores)
        terms = self.regularizer().terms
        meta["regularizers"] = [{"name": t.name, "spec": t.spec, "tau": t.coef.spec()} for t in terms]
        custom = [t.name for t in terms if t.spec is None]
        if custom:
            warnings.warn(f"{type(self).__name__}.save({str(path)!r}): the custom regularizer(s) "
                          f"{', '.join(map(repr, custom))} are saved by name only: "
                          f"{type(self).__name__}.load(path, regularizers=[(R, tau), ...]) reloads the model, but "
                          "topicjax.persistence.load and the command line (topics, evaluate, report) cannot",
                          CustomRegularizerWarning, stacklevel=2)
        if getattr(self, "_class_freq", None) is not None:
            meta["class_freq"] = np.asarray(self._class_freq).tolist()
        for i, lp in enumerate(getattr(self, "learned_params_", []) or []):
            for k, v in lp.items():
                arrays[f"learned__{i}__{k}"] = np.asarray(v)
        self._write(path, arrays, meta)

    def _check_loaded(self, path, arrays, meta):
        """Cross-checks of a loaded model's fields (beyond the per-field checks of the base)."""
        sizes = self._load_sizes
        missing = {"theta_", "doc_alive_"} - set(arrays)
        if len(missing) == 1:  # both or neither (an online fit keeps no Θ)
            raise SavedModelError(f"{path}: arrays.npz has no array {missing.pop()!r}")
        W, T, C = sizes["W"], sizes["T"], sizes.get("C", 0)
        if len(self.topic_names_) != T:
            raise SavedModelError(f"{path}: meta.json field 'topic_names_' has {len(self.topic_names_)} names for "
                                  f"{T} topics")
        if any(not 0 <= b < T for b in self.background_):
            raise SavedModelError(f"{path}: meta.json field 'background_' holds topics outside [0, {T})")
        if len(self.classes_) != C:
            raise SavedModelError(f"{path}: meta.json field 'classes_' has {len(self.classes_)} classes but psi_ has "
                                  f"{C} rows")
        if sizes["R"] != W + C:
            raise SavedModelError(f"{path}: array 'row_modality_' has {sizes['R']} rows, expected W + C = {W + C}")
        M = len(self.modality_names_)
        if len(self.row_weights_) != M:
            raise SavedModelError(f"{path}: meta.json field 'row_weights_' has {len(self.row_weights_)} weights for "
                                  f"{M} modalities")
        rm = np.asarray(self.row_modality_)
        if rm.size and (rm.min() < 0 or rm.max() >= M):
            raise SavedModelError(f"{path}: array 'row_modality_' holds modalities outside [0, {M})")
        check_simplex(path, "phi_", arrays["phi_"], 0, rm[:W])  # each modality's block of Φ: distributions
        if len(self.scores_) != self.n_iter_:
            raise SavedModelError(f"{path}: meta.json field 'scores_' has {len(self.scores_)} records but n_iter_ is "
                                  f"{self.n_iter_}")
        if len(self.final_taus_) != len(meta.get("regularizers", [])):
            raise SavedModelError(f"{path}: meta.json field 'final_taus_' has {len(self.final_taus_)} coefficients "
                                  f"for {len(meta.get('regularizers', []))} regularizers")

    @classmethod
    def load(cls, path, **params):
        """Load a model saved by :meth:`save`.  Pool regularizers and Step/Linear/Table schedules
        are rebuilt from the saved specs; pass ``regularizers=[(R, tau), ...]`` when the model
        has a custom one (and ``scores=`` for custom scores)."""
        arrays, meta = cls._read(path)
        cls._check_class(path, meta)
        saved = meta.get("regularizers", [])
        if not (isinstance(saved, list) and all(isinstance(r, dict) and isinstance(r.get("name"), str)
                                                for r in saved)):
            raise SavedModelError(f"{path}: meta.json field 'regularizers' must be a list of objects with a 'name'")
        accepted = set(cls._get_param_names())
        if params.get("regularizers") is not None:
            names = [n.split("#")[0] for n in as_regularizer(params["regularizers"]).names]
            want = [r["name"].split("#")[0] for r in saved]
            if names != want:
                raise ValueError(f"the regularizers passed to load are {names}, the saved model has {want}")
        elif saved:
            rebuilt = []
            for i, r in enumerate(saved):
                if r.get("spec") is None or r.get("tau") is None:
                    what = "a custom callable" if r.get("spec") is None else "a custom schedule"
                    raise ValueError(f"{path}: regularizer #{i} {r['name']!r} is {what} and cannot be restored from "
                                     f"JSON; pass regularizers=[(R, tau), ...] to {cls.__name__}.load")
                try:
                    rebuilt.append((from_spec(r["spec"]), schedule_from_spec(r["tau"])))
                except (KeyError, TypeError, ValueError) as e:
                    raise SavedModelError(f"{path}: meta.json field 'regularizers' entry #{i} ({r['name']!r}) cannot "
                                          f"be rebuilt: {type(e).__name__}: {e}") from None
            params["regularizers"] = rebuilt
        if "scores" not in params and "scores" in accepted:
            params["scores"] = tuple(meta.get("score_names", ()))
        if "regularizers" in params and "regularizers" not in accepted:
            del params["regularizers"]
        model = cls._from_saved(path, arrays, meta, params)
        model._check_loaded(path, arrays, meta)
        model.history_ = getattr(model, "scores_", [])
        model.regularizer_names_ = [r["name"] for r in saved]
        model.psi_ = arrays.get("psi_")
        model._class_freq = np.asarray(meta["class_freq"]) if "class_freq" in meta else None
        learned = [{} for _ in saved]
        for k, v in arrays.items():
            if k.startswith("learned__"):
                parts = k.split("__", 2)
                if len(parts) != 3 or not parts[1].isdigit() or int(parts[1]) >= len(saved):
                    raise SavedModelError(f"{path}: array {k!r} names no saved regularizer ({len(saved)} saved)")
                learned[int(parts[1])][parts[2]] = v
        model.learned_params_ = learned
        model._set_components()
        return model

