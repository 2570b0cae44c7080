"""ARTM: additive regularization of topic models (Vorontsov & Potapenko 2015).

The model maximises ``L(Φ, Θ) + Σ_i τ_i R_i(Φ, Θ)`` (eq. 13) by the regularized EM algorithm of
Theorem 2 (eq. 14-16): every regularizer is a plain differentiable function ``R(phi, theta)``
(see :mod:`topicjax.regularizers` for the signature and the pool), and its M-step term
``φ ∂R/∂φ`` / ``θ ∂R/∂θ`` comes from ``jax.grad`` through :func:`topicjax.core.em.make_step`.

How the pieces fit:

* The regularizers are combined into ONE function ``R_total(phi, theta, coefs) =
  Σ_i coefs.tau[i] R_i(phi, theta)`` handed to :func:`em.make_step`; the coefficients (and the
  regularizers' data) are *traced arguments* of the compiled step.  Changing τ, or evaluating a
  schedule ``tau(iteration)`` on the host at every iteration, never recompiles, and compiled
  steps are cached across fits with the same regularizer functions.
* Coefficients are floats or schedules: ``tau(iteration)`` (1 = first iteration) or
  ``tau(iteration, history)`` where ``history`` is the list of score dicts recorded so far
  (a trajectory that depends on tracked scores).  :class:`Step` and :class:`Linear` are ready-made
  schedules; :func:`paper_trajectory` is the recipe of sec. 5.
* Over-regularized topics and documents (Notes 1-2): after each M-step a topic whose column is
  all zeros (``(n_wt + φ ∂R/∂φ)_+ = 0`` for every w; or whose θ row is zero in every document, so
  that the model no longer uses it) or a document whose θ_d is all zeros is
  reported in the history (``overregularized_topics``, ``overregularized_docs``).  With
  ``overregularized="remove"`` (default, as the Notes prescribe) it is excluded from the model for
  the rest of the fit: its column stays zero (shapes never change, so nothing recompiles; the
  topic's name is listed in ``removed_topics_``) and a removed document's tokens no longer count.
  With ``"keep"`` the zero column stays in the model and may come back at a later iteration.
  Nothing ever becomes NaN: :func:`em.normalize_columns` maps an empty column to zeros.
* Modalities (BigARTM's class_ids): a corpus with ``modalities`` gets one distribution per
  modality in every topic (Φ is normalised per modality block) and the log-likelihood of each
  modality is weighted by ``modality_weights[name]`` (default 1).
* Classes (Theorem 3, eq. 44-50): fitted with labels (``y`` or ``corpus.labels``) and a
  ``label_weight`` τ, the model has a third matrix Ψ (classes x topics, ``psi_``) learned as one
  more modality whose tokens are the classes of each document with counts
  ``m_dc = n_d [c ∈ C_d] / |C_d|`` weighted by τ (eq. 45-46).  :meth:`ARTM.predict_proba` gives
  ``p(c|d) = Σ_t ψ_ct θ_td`` (eq. 44) for new documents, whose Θ is inferred from their words.
  :func:`regularizers.label_regularization` is eq. 51-52.
* :meth:`ARTM.fit_grid` trains a grid of coefficient vectors in one compiled call of
  :func:`em.run_scan` under ``jax.vmap`` over the coefficients (in chunks of ``batch_size`` models
  by ``jax.lax.map``: all at once on accelerators, one at a time on CPU where that is faster) and
  returns one fitted model per row of the grid.

>>> import topicjax as tj
>>> from topicjax import regularizers as R
>>> from topicjax.artm import ARTM
>>> corpus, _ = tj.datasets.make_bars(n_docs=100, seed=0)
>>> model = ARTM(10, regularizers=[(R.sparse_theta(), 0.5), (R.decorrelate(), 10.0)], max_iter=20,
...              progress=False).fit(corpus)
>>> model.phi_.shape, model.theta_.shape, len(model.scores_)
((25, 10), (10, 100), 20)

Results depend on ``random_state`` only; bits may differ between CPU and GPU.
"""

from __future__ import annotations

import inspect
import math
import warnings
from types import SimpleNamespace
from typing import Any, Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from topicjax.core import em

from topicjax.evaluation import metrics
from topicjax import regularizers as regs
from topicjax.evaluation import scores as scores_mod
from topicjax.estimator import TopicModelBase, int_sequence
from topicjax.data.corpus import Corpus
from topicjax.persistence import load_folder, save_folder

__all__ = ["ARTM", "ARTMState", "Step", "Linear", "paper_trajectory", "table1_regularizers"]


# ============================================================================ schedules
class Step:
    """Schedule ``tau(it) = value if it >= start else before`` (iterations count from 1)."""

    def __init__(self, start: int, value: float, before: float = 0.0):
        self.start, self.value, self.before = int(start), float(value), float(before)

    def __call__(self, iteration: int) -> float:
        return self.value if iteration >= self.start else self.before

    def spec(self) -> dict:
        return {"schedule": "Step", "start": self.start, "value": self.value, "before": self.before}

    def __repr__(self):
        return f"Step(start={self.start}, value={self.value}, before={self.before})"


class Linear:
    """Schedule going linearly from ``first`` at iteration ``start`` to ``last`` at ``stop``
    (constant outside)."""

    def __init__(self, start: int, stop: int, first: float, last: float):
        if stop <= start:
            raise ValueError(f"Linear schedule: stop ({stop}) must be after start ({start})")
        self.start, self.stop, self.first, self.last = int(start), int(stop), float(first), float(last)

    def __call__(self, iteration: int) -> float:
        f = min(max((iteration - self.start) / (self.stop - self.start), 0.0), 1.0)
        return self.first + f * (self.last - self.first)

    def spec(self) -> dict:
        return {"schedule": "Linear", "start": self.start, "stop": self.stop, "first": self.first, "last": self.last}

    def __repr__(self):
        return f"Linear({self.start}, {self.stop}, {self.first}, {self.last})"


_SCHEDULES = {"Step": Step, "Linear": Linear}


def _tau_spec(tau):
    if isinstance(tau, (int, float, np.floating, np.integer)) and not isinstance(tau, bool):
        return float(tau)
    if hasattr(tau, "spec") and callable(tau.spec):
        return tau.spec()
    return None


def _tau_from_spec(spec):
    if isinstance(spec, (int, float)):
        return float(spec)
    if isinstance(spec, dict) and spec.get("schedule") in _SCHEDULES:
        kw = {k: v for k, v in spec.items() if k != "schedule"}
        return _SCHEDULES[spec["schedule"]](**kw)
    raise ValueError(f"cannot rebuild coefficient {spec!r}")


# ============================================================================ the compiled step
class ARTMState(NamedTuple):
    """State of the regularized EM: the fields of :class:`em.EMState` plus the regularizers'
    auxiliary parameters (a tuple, one pytree per regularizer), the masks of topics and documents
    still in the model, and the over-regularized topics/documents found by the last M-step."""

    phi: Any
    theta: Any
    loglik: Any
    reg: Any
    iteration: Any
    params: tuple
    topic_alive: Any
    doc_alive: Any
    dead_topics: Any
    dead_docs: Any


_CACHE: dict = {}

#: ``em.init`` for a batch of keys, compiled once per shape (``fit_grid``'s random restarts).
_init_batch = jax.jit(jax.vmap(em.init, in_axes=(0, None, None, None)), static_argnums=(1, 2, 3))


def _combine(fns: Sequence[Callable]):
    """``R_total(phi, theta, (taus, params)) = Σ_i taus[i] R_i(phi, theta; params[i])`` (eq. 13)."""

    def R_total(phi, theta, coefs):
        taus, params = coefs
        total = jnp.zeros((), phi.dtype)
        for i, f in enumerate(fns):
            total = total + taus[i] * jnp.asarray(f(phi, theta, params[i]), phi.dtype)
        return total

    return R_total


def _build(bound: Sequence, n_mod: int, remove: bool, update_phi: bool, mask_topics: bool = False):
    """The compiled ARTM step, scan runner and vmapped grid runner for these regularizer
    functions, cached so that refits (new τ, schedules, data of the same shapes) reuse them.

    ``mask_topics``: keep topics whose ``topic_alive`` is 0 at zero even when over-regularized
    topics are kept (``fit_grid`` with several numbers of topics pads every model to the largest
    and masks the extra topics from the start)."""
    key = (tuple(r.key for r in bound), tuple(r.update for r in bound), n_mod, remove, update_phi, mask_topics)
    hit = _CACHE.get(key)
    if hit is not None:
        return hit
    fns = [r.apply for r in bound]
    updates = [r.update for r in bound]
    R_total = _combine(fns) if fns else None
    em_step = em.make_step(R_total, update_phi=update_phi, jit=False)

    def step(state: ARTMState, data, taus, aux) -> ARTMState:
        alive_t, alive_d = state.topic_alive, state.doc_alive
        # Removed documents (Note 2) contribute no counts: mask their tokens.
        data_m = data._replace(count=data.count * alive_d[data.doc])
        es = em.EMState(state.phi, state.theta, state.loglik, state.reg, state.iteration)
        new = em_step(es, data_m, (taus, state.params) if R_total is not None else None)
        phi, theta = new.phi, new.theta
        T = phi.shape[1]
        if update_phi:
            if n_mod > 1:
                # One distribution per modality (block of rows) in each topic: renormalising the
                # globally normalised (·)_+ per block equals normalising each block directly.
                s = jax.ops.segment_sum(phi, aux["row_modality"], num_segments=n_mod)
                srow = s[aux["row_modality"]]
                phi = jnp.where(srow > 0, phi / jnp.where(srow > 0, srow, 1.0), 0.0)
                dead_t = jnp.any((s <= 0) & aux["active"][:, None], axis=0)
            else:
                dead_t = phi.sum(0) <= 0
        else:
            dead_t = jnp.zeros(T, bool)
        # A topic is also out of the model when no (remaining) document uses it any more, e.g.
        # after topic selection: its θ row is zero although its φ column is still defined.
        unused = jnp.all((theta <= 0) | (alive_d[None, :] <= 0), axis=1)
        dead_t = (dead_t | unused) & (alive_t > 0)
        dead_d = (theta.sum(0) <= 0) & (alive_d > 0)
        if remove or mask_topics:
            if remove:
                alive_t = alive_t * (~dead_t).astype(alive_t.dtype)
                alive_d = alive_d * (~dead_d).astype(alive_d.dtype)
            # Masked topics get no mass: a smoothing term would otherwise give them some.
            # normalize(normalize(a) * m) = normalize(a * m), so masking after the M-step's
            # normalisation gives the Θ of a model without those topics.
            if update_phi:
                phi = phi * alive_t[None, :]
            theta = em.normalize_columns(theta * alive_t[:, None]) * alive_d[None, :]
        params = tuple(u(phi, theta, p, taus[i]) if u is not None else p
                       for i, (u, p) in enumerate(zip(updates, state.params)))
        return ARTMState(phi, theta, new.loglik, new.reg, new.iteration, params, alive_t, alive_d, dead_t, dead_d)

    def run(state, data, tau_table, aux, n_iter):
        return em.run_scan(lambda s: step(s, data, tau_table[s.iteration], aux), state, n_iter)

    def grid(states, data, tables, aux, n_iter, batch_size):
        # lax.map over chunks of `batch_size` models, each chunk vmapped (batch_size = G: one vmap;
        # a chunk of one model runs the single-model E-step, see em.expected_counts)
        return jax.lax.map(lambda a: run(a[0], data, a[1], aux, n_iter), (states, tables), batch_size=batch_size)

    out = SimpleNamespace(
        step=jax.jit(step),
        run=jax.jit(run, static_argnums=(4,)),
        grid=jax.jit(grid, static_argnums=(4, 5)),
    )
    _CACHE[key] = out
    return out


# ============================================================================ helpers
def _is_number(x) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool)


def _n_args(fn) -> int:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return 1
    ps = [p for p in sig.parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if any(p.kind == p.VAR_POSITIONAL for p in sig.parameters.values()):
        return 2
    required = [p for p in ps if p.default is p.empty]
    return 2 if len(required) >= 2 else 1


def _normalize_blocks_np(phi: np.ndarray, row_modality: np.ndarray, n_mod: int) -> np.ndarray:
    out = np.zeros_like(phi)
    for m in range(n_mod):
        rows = row_modality == m
        s = phi[rows].sum(0, keepdims=True)
        out[rows] = np.divide(phi[rows], s, out=np.zeros_like(phi[rows]), where=s > 0)
    return out


class _Term(NamedTuple):
    reg: regs.Regularizer  # unbound
    tau: Any  # float or schedule
    name: str


# ============================================================================ the estimator
class ARTM(TopicModelBase):
    """Additively regularized topic model (ARTM, Theorem 2-3) with a scikit-learn interface.

    Parameters
    ----------
    n_components: number of topics T (background topics included).
    regularizers: list of ``(R, tau)`` pairs; ``R(phi, theta) -> scalar`` is any differentiable
        JAX function or a pool :class:`~topicjax.regularizers.Regularizer`; ``tau`` is a float or a
        schedule ``tau(iteration)`` / ``tau(iteration, history)``.  A bare ``R`` means τ = 1.
    max_iter: number of EM iterations (passes over the collection).
    tol: stop when the relative change of the log-likelihood falls below ``tol`` (0: never; the
        default, since regularization trajectories change the model after the likelihood settles).
    random_state: seed of the initial Φ (same seed -> same model on the same device).
    background_topics: an int B (the last B topics are background, as in Fig. 3) or a list of
        topic indices/names.  Regularizers select them with ``topics="background"``/``"specific"``.
    topic_names: names of the topics (default ``topic_i`` for specific, ``background_j`` for
        background topics).
    scores: names or callables of :mod:`topicjax.evaluation.scores` recorded in ``scores_``.
    score_every: evaluate ``scores`` every this many iterations (and after the last one).
    modality_weights: ``{modality name: weight}`` for a corpus with modalities (default 1 each).
    label_weight: τ of eq. 45 for the class matrix Ψ; ``None`` = 1 when labels are given to
        ``fit`` as ``y``, no classes otherwise (``corpus.labels`` are used only when set).
    overregularized: ``"remove"`` (default) or ``"keep"`` over-regularized topics and documents
        (Notes 1-2; see the module docstring).
    transform_iter: EM iterations of Θ for new documents (``transform``).
    chunk: non-zeros per chunk of the E-step (see :func:`em.prepare`).
    progress: show a tqdm progress bar.

    Fitted attributes
    -----------------
    ``phi_`` (W x T), ``theta_`` (T x D), ``psi_`` (C x T or None), ``scores_`` (one dict per
    iteration: ``iteration``, ``objective`` (log-likelihood), ``regularizer`` (Σ τ R),
    ``tau/<name>``, ``overregularized_topics``, ``overregularized_docs`` and the scores),
    ``n_iter_``, ``topic_names_``, ``background_`` (indices), ``removed_topics_`` (names),
    ``removed_docs_`` (indices), ``classes_``, ``final_taus_``, ``vocab_``.

    Save/load: :meth:`save` stores Φ, Θ, Ψ, the score history, every regularizer's name, its
    coefficient (a float or a :class:`Step`/:class:`Linear` schedule) and the parameters it learned
    (μ, Σ of the correlated topic model).  Pool regularizers and schedules are rebuilt from their
    JSON ``spec`` by :meth:`load`; a custom function cannot be stored as JSON, so a model with one
    must be loaded with ``ARTM.load(path, regularizers=[(fn, tau), ...])`` (the same list as for
    fitting; names are checked).
    """

    _saved_arrays = ("phi_", "theta_", "psi_", "topic_alive_", "doc_alive_", "row_modality_")
    _saved_meta = ("scores_", "n_iter_", "topic_names_", "background_", "removed_topics_", "removed_docs_",
                   "classes_", "final_taus_", "modality_names_", "row_weights_")
    _unsaved_params = ("regularizers", "scores")

    def __init__(self, n_components=10, *, regularizers=None, max_iter=40, tol=0.0, random_state=0,
                 background_topics=0, topic_names=None, scores=("perplexity", "sparsity"), score_every=1,
                 modality_weights=None, label_weight=None, overregularized="remove", transform_iter=30,
                 chunk=None, progress=True):
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
        self.transform_iter = transform_iter
        self.chunk = chunk
        self.progress = progress

    # ------------------------------------------------------------------ setup
    def _terms(self) -> list[_Term]:
        items = self.regularizers or []
        if callable(items) or isinstance(items, regs.Regularizer):
            items = [items]
        terms, seen = [], {}
        for i, item in enumerate(items):
            if isinstance(item, (tuple, list)):
                if len(item) != 2:
                    raise ValueError(f"regularizers[{i}] must be a pair (R, tau), got {len(item)} elements")
                r, tau = item
            else:
                r, tau = item, 1.0
            try:
                reg = regs.as_regularizer(r)
            except TypeError as e:
                raise ValueError(f"regularizers[{i}]: {e}") from None
            base = reg.name
            seen[base] = seen.get(base, 0) + 1
            name = base if seen[base] == 1 else f"{base}#{seen[base]}"
            if _is_number(tau):
                tau = float(tau)
                if not math.isfinite(tau):
                    raise ValueError(f"regularizer {name!r}: coefficient {tau} is not finite")
                if reg.nonnegative and tau < 0:
                    raise ValueError(f"regularizer {name!r}: coefficient {tau} is negative; {name} requires tau >= 0 "
                                     "(use the opposite regularizer, e.g. smooth_* instead of sparse_*)")
            elif not callable(tau):
                raise ValueError(f"regularizer {name!r}: coefficient must be a float or a schedule tau(iteration), "
                                 f"got {tau!r}")
            terms.append(_Term(reg, tau, name))
        return terms

    def _topic_setup(self):
        T = int(self.n_components)
        bt = self.background_topics
        if self.topic_names is not None:
            names = [str(n) for n in self.topic_names]
            if len(names) != T:
                raise ValueError(f"{len(names)} topic names for {T} topics")
            if len(set(names)) != T:
                raise ValueError("topic names must be unique")
        else:
            names = None
        if bt is None:
            bt = 0
        if _is_number(bt):
            B = int(bt)
            if B != bt or not 0 <= B <= T:
                raise ValueError(f"background_topics={bt!r} must be an integer in [0, {T}] or a list of topics")
            background = list(range(T - B, T))
        else:
            ctx = regs.Context(n_words=1, n_topics=T, n_docs=1, topic_names=tuple(names or ()))
            try:
                background = sorted({regs._topic_index(t, ctx) for t in bt})
            except ValueError as e:
                raise ValueError(f"background_topics: {e}") from None
        if names is None:
            bg = set(background)
            names, i, j = [], 0, 0
            for t in range(T):
                if t in bg:
                    names.append(f"background_{j}")
                    j += 1
                else:
                    names.append(f"topic_{i}")
                    i += 1
        return tuple(names), tuple(background)

    def _modality_setup(self, corpus: Corpus, labels: np.ndarray | None, label_names):
        W = corpus.n_words
        if corpus.modalities is not None:
            row_mod = np.asarray(corpus.modalities, np.int32)
            mod_names = list(corpus.modality_names)
        else:
            row_mod = np.zeros(W, np.int32)
            mod_names = ["words"]
        weights = np.ones(len(mod_names))
        for name, w in (self.modality_weights or {}).items():
            if name not in mod_names:
                raise ValueError(f"modality_weights: unknown modality {name!r}; the corpus has {mod_names}")
            if not (_is_number(w) and math.isfinite(w) and w >= 0):
                raise ValueError(f"modality_weights[{name!r}] = {w!r} must be a finite number >= 0")
            weights[mod_names.index(name)] = float(w)
        if not (weights > 0).any():
            raise ValueError("every modality has weight 0")
        classes = ()
        if labels is not None:
            classes = tuple(label_names)
            row_mod = np.concatenate([row_mod, np.full(len(classes), len(mod_names), np.int32)])
            mod_names.append(regs.LABELS_MODALITY)
            weights = np.append(weights, self._label_tau())
        return row_mod, tuple(mod_names), weights, classes

    def _label_tau(self) -> float:
        lw = 1.0 if self.label_weight is None else self.label_weight
        if not (_is_number(lw) and math.isfinite(lw) and lw > 0):
            raise ValueError(f"label_weight={lw!r} must be a positive number")
        return float(lw)

    def _data(self, corpus: Corpus, row_weights, row_mod, labels=None, n_classes=0):
        """Device data: word tokens weighted by their modality, then class tokens m_dc (eq. 46)."""
        d = corpus.doc_ids.astype(np.int64)
        w = corpus.word_ids.astype(np.int64)
        c = corpus.counts.astype(np.float64) * row_weights[row_mod[w]]
        if labels is not None:
            lab = np.asarray(labels, bool)
            n_lab = lab.sum(1)
            dd, cc = np.nonzero(lab)
            m = corpus.doc_lengths[dd] / n_lab[dd] * row_weights[-1]
            d = np.concatenate([d, dd])
            w = np.concatenate([w, corpus.n_words + cc])
            c = np.concatenate([c, m])
        keep = c > 0
        d, w, c = d[keep], w[keep], c[keep]
        order = np.lexsort((w, d))  # sorted by document: em's Θ scatter relies on it
        d = d[order]
        offsets = np.concatenate([[0], np.cumsum(np.bincount(d, minlength=corpus.n_docs))]).astype(np.int64)
        src = SimpleNamespace(doc_ids=d, word_ids=w[order], counts=c[order], nnz=int(d.size),
                              n_docs=corpus.n_docs, doc_offsets=offsets)
        return em.prepare(src, self.chunk), float(c.sum())

    def _context(self, corpus, names, background, row_mod, mod_names, classes, class_freq, phase, fitted=None,
                 n_docs=None):
        return regs.Context(
            n_words=len(row_mod), n_topics=int(self.n_components), n_docs=corpus.n_docs if n_docs is None else n_docs,
            topic_names=names, background=background, doc_lengths=np.asarray(corpus.doc_lengths, np.float64),
            corpus=corpus, row_modality=row_mod, modality_names=mod_names, class_names=classes,
            class_freq=class_freq, phase=phase, fitted=fitted,
        )

    def _check_terms(self, bound, params, phi, theta):
        """Evaluate every regularizer once on the initial model: a clear error naming it for a
        non-scalar or non-finite value or gradient, before the long computation."""
        phi_c = jnp.maximum(phi, em.EPS)
        theta_c = jnp.maximum(theta, em.EPS)
        for (reg, name), p in zip(bound, params):
            try:
                val = reg.apply(phi_c, theta_c, p)
            except Exception as e:  # user code: report which regularizer failed
                raise ValueError(f"regularizer {name!r} failed on the initial model: {type(e).__name__}: {e}") from e
            shape = jnp.shape(val)
            if shape != ():
                raise ValueError(f"regularizer {name!r} returned an array of shape {shape}; "
                                 "a regularizer must return a scalar")
            if not jnp.issubdtype(jnp.result_type(val), jnp.floating):
                raise ValueError(f"regularizer {name!r} returned dtype {jnp.result_type(val)}; it must be a float")
            if not bool(jnp.isfinite(val)):
                raise ValueError(f"regularizer {name!r} returned {float(val)} on the initial model "
                                 "(it must be finite where phi, theta >= em.EPS)")
            try:
                g_phi, g_theta = jax.grad(lambda a, b: reg.apply(a, b, p), argnums=(0, 1))(phi_c, theta_c)
            except Exception as e:
                raise ValueError(f"regularizer {name!r} is not differentiable: {type(e).__name__}: {e}") from e
            for what, g in (("phi", g_phi), ("theta", g_theta)):
                if not bool(jnp.all(jnp.isfinite(g))):
                    raise ValueError(f"regularizer {name!r} has a non-finite gradient in {what} on the initial model")

    def _tau_values(self, terms, iteration: int, history) -> np.ndarray:
        out = np.zeros(len(terms))
        for i, t in enumerate(terms):
            if callable(t.tau):
                try:
                    v = t.tau(iteration, history) if _n_args(t.tau) == 2 else t.tau(iteration)
                except Exception as e:
                    raise ValueError(f"schedule of regularizer {t.name!r} failed at iteration {iteration}: {e}") from e
                if not _is_number(v) and not (hasattr(v, "shape") and np.shape(v) == ()):
                    raise ValueError(f"schedule of regularizer {t.name!r} returned {v!r} at iteration {iteration}; "
                                     "expected a number")
                v = float(v)
            else:
                v = t.tau
            if not math.isfinite(v):
                raise ValueError(f"regularizer {t.name!r}: coefficient {v} at iteration {iteration} is not finite")
            if t.reg.nonnegative and v < 0:
                raise ValueError(f"regularizer {t.name!r}: coefficient {v} at iteration {iteration} is negative; "
                                 f"{t.reg.name} requires tau >= 0")
            out[i] = v
        return out

    def _prepare_fit(self, X, y):
        if self.overregularized not in ("remove", "keep"):
            raise ValueError(f"overregularized must be 'remove' or 'keep', got {self.overregularized!r}")
        if int(self.max_iter) != self.max_iter or self.max_iter < 1:
            raise ValueError(f"max_iter must be a positive integer, got {self.max_iter!r}")
        corpus = self._train_corpus(X)
        corpus.check_topics(self.n_components)
        if y is not None:
            corpus = corpus.with_labels(y)
        use_labels = y is not None or (self.label_weight is not None)
        if use_labels and corpus.labels is None:
            raise ValueError("label_weight is set but there are no labels: pass y to fit or a corpus with labels")
        labels = corpus.labels if use_labels else None
        label_names = corpus.label_names if use_labels else ()
        terms = self._terms()
        names, background = self._topic_setup()
        row_mod, mod_names, weights, classes = self._modality_setup(corpus, labels, label_names)
        class_freq = None
        if labels is not None:
            lab = np.asarray(labels, bool)
            n_lab = np.maximum(lab.sum(1), 1)
            m = (lab / n_lab[:, None]) * corpus.doc_lengths[:, None]
            class_freq = m.sum(0) / max(m.sum(), 1e-300)
        ctx = self._context(corpus, names, background, row_mod, mod_names, classes, class_freq, "fit")
        bound = [t.reg.bind(ctx) for t in terms]
        row_weights = weights
        data, n_weighted = self._data(corpus, row_weights, row_mod, labels, len(classes))
        # schedules that depend on the iteration only are checked for every iteration up front
        for t in terms:
            if callable(t.tau) and _n_args(t.tau) == 1:
                for it in range(1, int(self.max_iter) + 1):
                    self._tau_values([t], it, [])
        return SimpleNamespace(corpus=corpus, terms=terms, bound=bound, names=names, background=background,
                               row_mod=row_mod, mod_names=mod_names, weights=weights, classes=classes,
                               class_freq=class_freq, data=data, n_weighted=n_weighted, labels=labels)

    def _init_state(self, s) -> ARTMState:
        """The initial state of :meth:`fit`: the batch of one of :meth:`_initial_states`."""
        one = self._initial_states(self, s, [int(self.random_state)], [int(self.n_components)])
        return jax.tree.map(lambda a: a[0], one)

    def _aux(self, s):
        return {"row_modality": jnp.asarray(s.row_mod, jnp.int32), "active": jnp.asarray(s.weights > 0)}

    def _score_context(self, s, state: ARTMState, iteration: int):
        W = s.corpus.n_words
        phi = np.asarray(state.phi)[:W]
        theta = np.asarray(state.theta)
        alive = np.asarray(state.topic_alive) > 0
        bg = np.asarray(s.background, np.int64)
        spec_mask = alive.copy()
        spec_mask[bg] = False
        n_t = theta @ np.asarray(s.corpus.doc_lengths, np.float64)
        return scores_mod.ScoreContext(
            phi=phi, theta=theta, corpus=s.corpus, background=bg[alive[bg]] if bg.size else bg,
            specific=np.flatnonzero(spec_mask), topic_weights=n_t, loglik=float(state.loglik),
            n_tokens=s.n_weighted, iteration=iteration, model=self,
        )

    def _run_scores(self, trackers, s, state, iteration) -> dict:
        if not trackers:
            return {}
        ctx = self._score_context(s, state, iteration)
        out = {}
        for tr in trackers:
            res = tr(ctx)
            if not isinstance(res, dict):
                raise TypeError(f"score {getattr(tr, 'name', tr)!r} returned {type(res).__name__}, expected a dict")
            out.update({k: float(v) for k, v in res.items()})
        return out

    # ------------------------------------------------------------------ fit
    def fit(self, X, y=None):
        """Fit the model to a Corpus or a (documents x words) count matrix; ``y`` (optional)
        are class labels of the documents (one per document, or a boolean indicator matrix)."""
        s = self._prepare_fit(X, y)
        state = self._init_state(s)
        term_names = [(r, t.name) for r, t in zip(s.bound, s.terms)]
        self._check_terms(term_names, state.params, state.phi, state.theta)
        trackers = scores_mod.resolve_scores(self.scores)
        fns = _build(s.bound, len(s.mod_names), self.overregularized == "remove", True)
        aux = self._aux(s)
        names = s.names
        history: list[dict] = []
        counter = {"it": 0, "taus": None, "last": state, "scored": False}
        every = max(int(self.score_every), 1)

        def step(st):
            it = counter["it"] + 1
            taus = self._tau_values(s.terms, it, history)
            counter["it"], counter["taus"], counter["last"] = it, taus, st
            return fns.step(st, s.data, jnp.asarray(taus, jnp.float32), aux)

        def callback(i, st):
            rec = {"objective": float(st.loglik), "regularizer": float(st.reg)}
            for t, v in zip(s.terms, counter["taus"]):
                rec[f"tau/{t.name}"] = float(v)
            dt = np.flatnonzero(np.asarray(st.dead_topics))
            rec["overregularized_topics"] = [names[j] for j in dt]
            rec["overregularized_docs"] = int(np.asarray(st.dead_docs).sum())
            counter["scored"] = (i + 1) % every == 0
            if counter["scored"]:
                rec.update(self._run_scores(trackers, s, st, i + 1))
            rec["iteration"] = i + 1
            history.append(rec)
            return rec

        def finite(st):
            return jnp.isfinite(st.phi).all() & jnp.isfinite(st.theta).all()

        try:
            state, records = em.run(step, state, max_iter=int(self.max_iter), tol=float(self.tol),
                                    progress=self.progress, desc="ARTM", callback=callback, check_finite=finite)
        except em.NumericalError as e:
            raise em.NumericalError(f"{e}; {self._blame(s, counter['last'], counter['taus'])}") from e
        if records and trackers and not counter["scored"]:
            records[-1].update(self._run_scores(trackers, s, state, len(records)))
        self._store(s, state, records, counter["taus"])
        return self

    def _blame(self, s, state, taus) -> str:
        """Which regularizer produced non-finite terms at the last good state (for the error)."""
        phi_c = jnp.maximum(state.phi, em.EPS)
        theta_c = jnp.maximum(state.theta, em.EPS)
        for r, t, p in zip(s.bound, s.terms, state.params):
            try:
                g = jax.grad(lambda a, b: r.apply(a, b, p), argnums=(0, 1))(phi_c, theta_c)
                v = r.apply(phi_c, theta_c, p)
            except Exception:
                return f"regularizer {t.name!r} failed"
            if not (bool(jnp.isfinite(v)) and all(bool(jnp.all(jnp.isfinite(x))) for x in g)):
                return f"regularizer {t.name!r} produced non-finite values"
        return "no regularizer is non-finite at the previous iteration (check the coefficients)"

    def _store(self, s, state: ARTMState, records, taus):
        W = s.corpus.n_words
        phi_full = np.asarray(state.phi)
        self.phi_ = phi_full[:W]
        self.psi_ = phi_full[W:] if s.classes else None
        self.theta_ = np.asarray(state.theta)
        self.scores_ = records
        self.history_ = records
        self.n_iter_ = len(records)
        self.topic_names_ = list(s.names)
        self.background_ = [int(b) for b in s.background]
        self.topic_alive_ = np.asarray(state.topic_alive)
        self.doc_alive_ = np.asarray(state.doc_alive)
        self.removed_topics_ = [s.names[j] for j in np.flatnonzero(self.topic_alive_ == 0)]
        self.removed_docs_ = [int(d) for d in np.flatnonzero(self.doc_alive_ == 0)]
        self.classes_ = list(s.classes)
        self.final_taus_ = [float(v) for v in (taus if taus is not None else [])]
        self.modality_names_ = list(s.mod_names)
        self.row_modality_ = np.asarray(s.row_mod)
        self.row_weights_ = [float(w) for w in s.weights]
        self._class_freq = s.class_freq
        self.regularizer_names_ = [t.name for t in s.terms]
        self.learned_params_ = [
            {k: np.asarray(p[k]) for k in r.learned if isinstance(p, dict) and k in p}
            for r, p in zip(s.bound, state.params)
        ]

    # ------------------------------------------------------------------ grid
    def fit_grid(self, X, taus=None, y=None, *, seeds=None, n_topics=None,
                 batch_size: int | None = None) -> list["ARTM"]:
        """Fit a batch of models in ONE compiled call (:func:`em.run_scan` under ``jax.vmap``
        over the models' coefficients and initial states).  ``fit_many`` is the same method.

        The models of the batch may differ in

        * ``taus``: array (G, R), R = number of regularizers; entry ``[g, i]`` is τ_i of model g
          (``nan`` keeps the model's own coefficient or schedule ``tau(iteration)``);
        * ``seeds``: G integers, the ``random_state`` of each model's initial Φ (random
          restarts);
        * ``n_topics``: G numbers of topics.  Every model is padded to the largest number and its
          extra topics are masked (zero columns of Φ, zero rows of Θ, ``topic_alive`` 0) from the
          start, so it is the model with that many topics.  Not with ``background_topics``,
          ``topic_names`` or regularizers that learn parameters (their shapes follow T).

        Whatever is not given is this estimator's own (``None`` taus: its coefficients; ``None``
        seeds: ``random_state``; ``None`` n_topics: ``n_components``); G is the common length
        of those given.  Every model runs ``max_iter`` iterations (no ``tol``) and equals the
        separate fit of a clone with its coefficients, seed and number of topics (tested).
        ``batch_size``: models vmapped together (``jax.lax.map`` over chunks of that size inside
        the same compiled call).  Default: all G at once on accelerators (on an H100 the
        compiled batch of 32 KOS models at T = 100 costs 0.24 ms per model-iteration against
        0.41 ms for one model's compiled loop and 8.3 ms for ``fit`` in a Python loop,
        experiments/results/bench_grid_gpu.md); 1 on CPU, where a model's E-step is bound by
        memory traffic that batching does not share, so models run one after another inside
        the call (KOS, T = 100, 2 cores: one at a time 1.52x, 4 vmapped 0.78x the throughput of
        sequential ``fit`` calls, experiments/results/bench_grid_cpu.md).
        Returns a list of fitted :class:`ARTM` (clones of this one with the batch's settings);
        ``scores_`` hold ``objective`` and ``perplexity`` per iteration and the configured scores
        after the last one.  Bits may differ from separate fits (different XLA programs), and
        between CPU and GPU.

        Example::

            >>> import topicjax as tj
            >>> corpus, _ = tj.datasets.make_bars(n_docs=30, seed=0)
            >>> base = tj.ARTM(5, max_iter=5, progress=False, scores=())
            >>> models = base.fit_many(corpus, seeds=[0, 1, 2], n_topics=[4, 5, 6])
            >>> [m.phi_.shape[1] for m in models]
            [4, 5, 6]
        """
        from sklearn.base import clone

        sizes = {name: len(v) for name, v in (("taus", taus), ("seeds", seeds), ("n_topics", n_topics))
                 if v is not None}
        if not sizes:
            raise ValueError("fit_grid needs at least one of taus, seeds or n_topics")
        if len(set(sizes.values())) != 1:
            raise ValueError(f"taus, seeds and n_topics must have one length (models), got {sizes}")
        G = next(iter(sizes.values()))
        if G == 0:
            raise ValueError("fit_grid: no models (empty taus/seeds/n_topics)")
        seeds = [int(self.random_state)] * G if seeds is None else int_sequence(seeds, "seeds", 0)
        tops = [int(self.n_components)] * G if n_topics is None else int_sequence(n_topics, "n_topics", 1)
        T_max = max(tops)
        masked = any(t != T_max for t in tops)
        if masked and (self.background_topics or self.topic_names is not None):
            raise ValueError("fit_grid with several numbers of topics cannot use background_topics or topic_names")
        proto = clone(self).set_params(n_components=T_max)
        s = proto._prepare_fit(X, y)
        self.vocab_, self.n_features_in_ = proto.vocab_, proto.n_features_in_
        if masked and any(r.update is not None for r in s.bound):
            raise ValueError("fit_grid with several numbers of topics cannot use regularizers that learn parameters")
        R = len(s.terms)
        grid = np.full((G, R), np.nan) if taus is None else np.asarray(taus, np.float64)
        if grid.ndim == 1 and R == 1:
            grid = grid[:, None]
        if grid.ndim != 2 or grid.shape[1] != R:
            raise ValueError(f"taus must have shape (n_models, {R}) for {R} regularizers, got {grid.shape}")
        n_iter = int(self.max_iter)
        for t in s.terms:
            if callable(t.tau) and _n_args(t.tau) == 2:
                raise ValueError(f"fit_grid: the schedule of {t.name!r} depends on scores; only tau(iteration) "
                                 "schedules can be compiled into a grid")
        own = np.stack([self._tau_values(s.terms, it, []) for it in range(1, n_iter + 1)]) if R else np.zeros((n_iter, 0))
        tables = np.where(np.isnan(grid)[:, None, :], own[None], grid[:, None, :])  # (G, n_iter, R)
        for g in range(G):
            for i, t in enumerate(s.terms):
                col = tables[g, :, i]
                if not np.all(np.isfinite(col)):
                    raise ValueError(f"taus[{g}, {i}] ({t.name}) is not finite")
                if t.reg.nonnegative and (col < 0).any():
                    raise ValueError(f"taus[{g}, {i}] = {col.min()} is negative; {t.name} requires tau >= 0")
        states = self._initial_states(proto, s, seeds, tops)
        first = jax.tree.map(lambda a: a[0], states)
        self._check_terms([(r, t.name) for r, t in zip(s.bound, s.terms)], first.params, first.phi, first.theta)
        fns = _build(s.bound, len(s.mod_names), self.overregularized == "remove", True, mask_topics=masked)
        if batch_size is None:
            batch_size = 1 if jax.default_backend() == "cpu" else G
        batch_size = max(1, min(int(batch_size), G))
        finals, traces = fns.grid(states, s.data, jnp.asarray(tables, jnp.float32), self._aux(s), n_iter, batch_size)
        traces = np.asarray(traces)
        finals = jax.tree.map(np.asarray, finals)  # one transfer; models are sliced on the host
        bad = ~(np.isfinite(finals.phi).all(axis=(1, 2)) & np.isfinite(finals.theta).all(axis=(1, 2)))
        if bad.any():
            raise em.NumericalError(f"fit_grid: non-finite parameters in model(s) {np.flatnonzero(bad).tolist()} "
                                    "of the batch (taus rows / seeds in that order)")
        trackers = scores_mod.resolve_scores(self.scores)
        models = []
        for g in range(G):
            m = clone(self).set_params(random_state=seeds[g], n_components=tops[g])
            m.regularizers = [(t.reg, float(grid[g, i]) if np.isfinite(grid[g, i]) else t.tau)
                              for i, t in enumerate(s.terms)]
            st = jax.tree.map(lambda a: a[g], finals)
            sg = s
            if tops[g] != T_max:  # drop the padding topics
                Tg = tops[g]
                st = st._replace(phi=st.phi[:, :Tg], theta=st.theta[:Tg], topic_alive=st.topic_alive[:Tg],
                                 dead_topics=st.dead_topics[:Tg])
                sg = SimpleNamespace(**{**vars(s), "names": s.names[:Tg]})
            records = []
            for it in range(n_iter):
                rec = {"iteration": it + 1, "objective": float(traces[g, it]),
                       "perplexity": float(np.exp(-traces[g, it] / s.n_weighted))}
                for i, t in enumerate(s.terms):
                    rec[f"tau/{t.name}"] = float(tables[g, it, i])
                records.append(rec)
            m.vocab_, m.n_features_in_ = self.vocab_, self.n_features_in_
            records[-1].update(m._run_scores(trackers, sg, st, n_iter))
            m._store(sg, st, records, tables[g, -1])
            models.append(m)
        return models

    def _initial_states(self, proto, s, seeds, tops) -> ARTMState:
        """The initial states of fits with ``random_state=seeds[g]`` and ``tops[g]`` topics,
        stacked (leading axis: model) and padded with masked topics to ``proto.n_components``.

        Each model starts from ``em.init`` with its seed (the start of its own :meth:`fit`, which
        uses this method with one model); the states of one number of topics are drawn by one
        vmapped call."""
        T_max = int(proto.n_components)
        W, D = len(s.row_mod), s.corpus.n_docs
        n_mod = len(s.mod_names)
        G = len(seeds)
        phis, thetas, alives, order = [], [], [], []
        for T in sorted(set(tops)):  # states stay on the device: no round trip of G x W x T values
            idx = [g for g, t in enumerate(tops) if t == T]
            if max(seeds[g] for g in idx) < 2**31:  # one dispatch for all keys
                keys = jax.vmap(jax.random.key)(jnp.asarray([seeds[g] for g in idx], jnp.int32))
            else:
                keys = jnp.stack([jax.random.key(seeds[g]) for g in idx])
            st = _init_batch(keys, W, D, T)
            phi = st.phi
            if n_mod > 1:
                phi = jnp.asarray(np.stack([_normalize_blocks_np(x, s.row_mod, n_mod) for x in np.asarray(phi)]))
            pad = T_max - T
            phis.append(jnp.pad(phi, ((0, 0), (0, 0), (0, pad))))
            thetas.append(jnp.pad(st.theta, ((0, 0), (0, pad), (0, 0))))
            alives.append(jnp.pad(jnp.ones((len(idx), T), jnp.float32), ((0, 0), (0, pad))))
            order += idx
        if len(phis) == 1:
            phi, theta, alive = phis[0], thetas[0], alives[0]
        else:
            inv = jnp.asarray(np.argsort(order))
            phi, theta, alive = (jnp.concatenate(x)[inv] for x in (phis, thetas, alives))
        z = jnp.zeros((G,), jnp.float32)
        params = jax.tree.map(lambda a: jnp.broadcast_to(a, (G,) + jnp.shape(a)),
                              tuple(r.params for r in s.bound))
        return ARTMState(phi, theta, z, z, jnp.zeros((G,), jnp.int32), params, alive,
                         jnp.ones((G, D), jnp.float32), jnp.zeros((G, T_max), bool), jnp.zeros((G, D), bool))

    fit_many = fit_grid

    # ------------------------------------------------------------------ inference
    def _fitted_setup(self):
        self._check_fitted()
        terms = self._terms()
        if len(terms) != len(getattr(self, "regularizer_names_", [])):
            raise ValueError("the regularizers differ from those the model was fitted with")
        names = tuple(self.topic_names_)
        row_mod = np.asarray(self.row_modality_, np.int32)
        weights = np.asarray(self.row_weights_, np.float64)
        classes = tuple(self.classes_)
        return terms, names, row_mod, weights, classes

    def _infer(self, X) -> tuple[np.ndarray, Corpus]:
        corpus = self._new_corpus(X)
        terms, names, row_mod, weights, classes = self._fitted_setup()
        mod_names = tuple(self.modality_names_)
        learned = getattr(self, "learned_params_", None) or [{} for _ in terms]
        bound, taus = [], []
        for t, fitted, tau in zip(terms, learned, self.final_taus_):
            ctx = self._context(corpus, names, tuple(self.background_), row_mod, mod_names, classes,
                                getattr(self, "_class_freq", None), "transform", fitted=fitted)
            r = t.reg.bind(ctx)
            if r is None:
                continue
            bound.append((r, t.name))
            taus.append(tau)
        # weights: words only (new documents have no class tokens)
        data, _ = self._data(corpus, weights, row_mod)
        T = int(self.n_components)
        alive = jnp.asarray(self.topic_alive_, jnp.float32)
        phi = jnp.asarray(np.vstack([self.phi_] + ([self.psi_] if self.psi_ is not None else [])), jnp.float32)
        theta0 = jnp.broadcast_to((alive / alive.sum())[:, None], (T, corpus.n_docs))
        params = tuple(r.params for r, _ in bound)
        kept, kept_taus = [], []
        for (r, name), p, tau in zip(bound, params, taus):
            try:  # a custom function written for the training shapes may not apply to new documents
                self._check_terms([(r, name)], (p,), phi, theta0)
            except ValueError as e:
                if not r._plain:
                    raise
                warnings.warn(f"{e}; it is not applied to new documents")
                continue
            kept.append((r, name, p))
            kept_taus.append(tau)
        taus = kept_taus
        regs_bound = [k[0] for k in kept]
        state = ARTMState(phi, theta0, jnp.zeros(()), jnp.zeros(()), jnp.zeros((), jnp.int32),
                          tuple(k[2] for k in kept), alive, jnp.ones(corpus.n_docs, jnp.float32),
                          jnp.zeros(T, bool), jnp.zeros(corpus.n_docs, bool))
        fns = _build(regs_bound, len(mod_names), self.overregularized == "remove", False)
        n_iter = int(self.transform_iter)
        table = jnp.broadcast_to(jnp.asarray(taus, jnp.float32), (n_iter, len(taus)))
        aux = {"row_modality": jnp.asarray(row_mod, jnp.int32), "active": jnp.asarray(weights > 0)}
        final, _ = fns.run(state, data, table, aux, n_iter)
        return np.asarray(final.theta), corpus

    def transform(self, X):
        """Topic proportions of (new) documents, ``(n_docs, n_components)``: Θᵀ inferred with Φ
        fixed by ``transform_iter`` EM iterations, the Θ-regularizers applied (those holding data
        about particular training documents are not; see :meth:`Regularizer.bind`)."""
        return self._infer(X)[0].T

    def fit_transform(self, X, y=None):
        return self.fit(X, y).theta_.T

    def predict_proba(self, X):
        """p(c|d) = Σ_t ψ_ct θ_td (eq. 44) for documents X, ``(n_docs, n_classes)``."""
        self._check_fitted()
        if getattr(self, "psi_", None) is None:
            raise ValueError("this model has no classes: fit it with labels (y) or label_weight")
        theta = self._infer(X)[0]
        p = (self.psi_ @ theta).T
        s = p.sum(1, keepdims=True)
        return np.divide(p, s, out=np.full_like(p, 1.0 / p.shape[1]), where=s > 0)

    def predict(self, X):
        """The most probable class of each document (names from ``classes_``)."""
        proba = self.predict_proba(X)
        return np.asarray(self.classes_, dtype=object)[np.argmax(proba, axis=1)]

    def perplexity(self, X, heldout=None):
        """Perplexity (eq. 56) of documents X; with ``heldout``, by document completion: Θ is
        inferred on X (the observed part) and the perplexity measured on ``heldout``."""
        corpus = self._new_corpus(X)
        held = corpus if heldout is None else self._new_corpus(heldout)
        theta = self._infer(corpus)[0]
        return metrics.perplexity(self.phi_, theta, held)

    # ------------------------------------------------------------------ persistence
    def save(self, path) -> None:
        """Save to folder ``path``: Φ, Θ, Ψ, histories, coefficients, learned regularizer
        parameters, and each regularizer's JSON spec where it has one (see the class docstring)."""
        arrays, meta = self._save_contents()
        if isinstance(self.scores, (list, tuple)) and all(isinstance(x, str) for x in self.scores):
            meta["score_names"] = list(self.scores)
        reg_meta = []
        for t in self._terms():
            reg_meta.append({"name": t.name, "spec": t.reg.spec, "tau": _tau_spec(t.tau)})
        meta["regularizers"] = reg_meta
        if getattr(self, "_class_freq", None) is not None:
            meta["class_freq"] = np.asarray(self._class_freq).tolist()
        for i, lp in enumerate(getattr(self, "learned_params_", []) or []):
            for k, v in lp.items():
                arrays[f"learned__{i}__{k}"] = np.asarray(v)
        save_folder(path, arrays, meta)

    @classmethod
    def load(cls, path, **params):
        """Load a model saved by :meth:`save`.  Pool regularizers and Step/Linear schedules are
        rebuilt from the saved specs; pass ``regularizers=[(R, tau), ...]`` when the model has a
        custom one (and ``scores=`` for custom scores)."""
        arrays, meta = load_folder(path)
        saved = meta.get("regularizers", [])
        if "regularizers" in params and params["regularizers"] is not None:
            given = params["regularizers"]
            names = [t.name for t in cls(regularizers=given)._terms()]
            want = [r["name"] for r in saved]
            if names != want:
                raise ValueError(f"the regularizers passed to load are {names}, the saved model has {want}")
        elif saved:
            rebuilt = []
            for i, r in enumerate(saved):
                if r.get("spec") is None or r.get("tau") is None:
                    what = "a custom callable" if r.get("spec") is None else "a custom schedule"
                    raise ValueError(
                        f"regularizer #{i} {r['name']!r} is {what} and cannot be restored from JSON; "
                        f"pass regularizers=[(R, tau), ...] to {cls.__name__}.load"
                    )
                rebuilt.append((regs.from_spec(r["spec"]), _tau_from_spec(r["tau"])))
            params["regularizers"] = rebuilt
        accepted = set(cls._get_param_names())
        if "scores" not in params and "scores" in accepted:
            params["scores"] = tuple(meta.get("score_names", ()))
        if "regularizers" in params and "regularizers" not in accepted:
            del params["regularizers"]
        model = super().load(path, **params)
        model.history_ = getattr(model, "scores_", [])
        model.regularizer_names_ = [r["name"] for r in saved]
        model.psi_ = arrays.get("psi_")
        model._class_freq = np.asarray(meta["class_freq"]) if "class_freq" in meta else None
        learned = [{} for _ in saved]
        for k, v in arrays.items():
            if k.startswith("learned__"):
                _, i, key = k.split("__", 2)
                learned[int(i)][key] = v
        model.learned_params_ = learned
        return model


# ============================================================================ trajectories
def paper_trajectory(*, sparse_start: int = 10, phi_rate: float = 0.10, theta_rate: float = 0.08,
                     beta: str = "uniform", smooth_phi: float = 0.1, smooth_theta: float = 0.8,
                     decorrelation: float | None = None, sparse: bool = True, smooth: bool = True) -> list:
    """The regularization trajectory of ARTM sec. 5, ready-made (use with ``background_topics``).

    * smoothing of the background topics from the first iteration with constant coefficients
      (β = ``smooth_phi``, α = ``smooth_theta``; the paper's 0.1 and 0.8), eq. 53-55;
    * sparsing of the specific topics switched on at iteration ``sparse_start`` with coefficients
      adjusted at every iteration so that about ``phi_rate`` (10 %) of the non-zeros of each φ_t
      and ``theta_rate`` (8 %) of each θ_d become zero per iteration; sparsing of Φ is relative to
      ``beta`` = ``"uniform"`` (β_w = 1/|W|) or ``"background"`` (β_w = n_w / n);
    * decorrelation of the specific topics from the first iteration with τ = ``decorrelation``
      (the paper's γ; omitted when ``None``).
    """
    out = []
    if smooth:
        out += [(regs.smooth_phi(topics="background"), smooth_phi), (regs.smooth_theta(topics="background"), smooth_theta)]
    if sparse:
        out += [(regs.sparse_phi(beta=beta, topics="specific", rate=phi_rate), Step(sparse_start, 1.0)),
                (regs.sparse_theta(topics="specific", rate=theta_rate), Step(sparse_start, 1.0))]
    if decorrelation is not None:
        out.append((regs.decorrelate(topics="specific"), float(decorrelation)))
    return out


def table1_regularizers(sm: bool, sp: str | None, dc: bool, *, gamma: float, sparse_start: int = 10) -> list:
    """The regularizers of one row of ARTM Table 1: smoothing of background topics (``sm``),
    sparsing of specific topics relative to the uniform (``sp="u"``) or background (``"b"``)
    distribution, decorrelation with coefficient ``gamma`` (``dc``)."""
    return paper_trajectory(sparse_start=sparse_start, beta={"u": "uniform", "b": "background"}.get(sp, "uniform"),
                            decorrelation=gamma if dc else None, sparse=sp is not None, smooth=sm)
