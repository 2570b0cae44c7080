"""Differentiable validation objectives of a fitted model (losses: lower is better).

An :class:`Objective` is a weighted sum of :class:`Part` s, each a differentiable function of the
model's Φ (word rows, W x T) and Θ (T x D, the training documents) with its data and weight as
pytree leaves (changing them never recompiles); ``objective(phi, theta) -> (value, {part name:
loss})``, and ``a + b`` and ``w * a`` combine them (:func:`as_objective` also takes a plain
``f(phi, theta) -> scalar``).  The parts:

* :func:`heldout_perplexity_loss` ``(observed, heldout)``: the log-perplexity of held-out tokens
  by document completion (ARTM sec. 5), Θ of the validation documents folded in on their observed
  part with Φ fixed (:func:`differentiable_fold_in`, ``n_iter`` iterations of eq. 16 from uniform),
  then ``-Σ n'_dw log Σ_t φ_wt θ_td / n'`` over the held-out part; equals the log of
  :func:`topicjax.evaluation.metrics.heldout_perplexity`;
* :func:`coherence_loss` ``(reference)``: minus the mean over topics of a smooth NPMI coherence
  (:func:`expected_npmi`, :func:`npmi_matrix`), exactly the top-k NPMI coherence for a topic
  uniform over k words;
* :func:`classification_loss`: the cross-entropy on the validation documents of a multinomial
  logistic regression trained on the topic proportions of the training documents.

An Objective is a type of its own, not a :class:`~topicjax.regularizers.Regularizer`: a
regularizer is a penalty maximised inside every EM iteration, with a schedule and saved with the
model; an objective is a loss of the *fitted* model, minimised by the tuner on validation data,
with plain weights, reported per part and never saved.

Each part in detail, and why neither type is built on the other: ``docs/guides/internals.md``,
"Tuning objectives, and why they are not regularizers"; their use: ``docs/guides/tune.md``.

>>> import topicjax as tj
>>> from topicjax.tune import objectives as O
>>> corpus, _, _ = tj.datasets.make_bars(n_docs=60, seed=0)
>>> train, valid = corpus.train_test_split(20, seed=0)
>>> observed, heldout = valid.completion_split(seed=0)
>>> obj = O.heldout_perplexity_loss(observed, heldout) + 0.5 * O.coherence_loss(train)
>>> obj.names
('log_perplexity', 'neg_npmi')
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from topicjax.core import layout, mstep
from topicjax.core.estep import EPS
from topicjax.data.corpus import Corpus
from topicjax.evaluation.metrics import cooccurrence
from topicjax.regularizers._fresh import Fresh, fresh
from topicjax.regularizers.base import traced_error
from topicjax.regularizers.schedules import is_number
from topicjax.tune.backend import differentiable

__all__ = ["Objective", "Part", "heldout_perplexity_loss", "coherence_loss", "classification_loss",
           "differentiable_fold_in", "npmi_matrix", "expected_npmi", "as_objective"]


class Part(eqx.Module):
    """One loss ``weight * fn(phi, theta, data)`` of an :class:`Objective`.

    ``n_words``/``n_docs``: the vocabulary size and number of training documents the part was
    built for (``None``: any), checked against the model by :meth:`Objective.check`."""

    fn: Callable = eqx.field(static=True)
    data: Any
    weight: Any
    name: str = eqx.field(static=True)
    n_words: int | None = eqx.field(static=True, default=None)
    n_docs: int | None = eqx.field(static=True, default=None)


class Objective(eqx.Module):
    """A weighted sum of :class:`Part` losses, minimised by the tuner (see the module docstring,
    also for why this is a type of its own rather than a :class:`~topicjax.regularizers.Regularizer`)."""

    parts: tuple

    @property
    def names(self) -> tuple:
        return tuple(p.name for p in self.parts)

    def __call__(self, phi, theta):
        """``(Σ w_i loss_i, {name_i: loss_i})`` for the model's word rows of Φ and its Θ."""
        losses = {p.name: p.fn(phi, theta, p.data) for p in self.parts}
        total = sum(jnp.asarray(p.weight, losses[p.name].dtype) * losses[p.name] for p in self.parts)
        return total, losses

    def __add__(self, other):
        other = as_objective(other)
        parts = list(self.parts)
        names = set(self.names)
        for p in other.parts:
            name, k = p.name, 2
            while name in names:
                name, k = f"{p.name}#{k}", k + 1
            names.add(name)
            parts.append(p if name == p.name else dataclasses.replace(p, name=name))
        return Objective(tuple(parts))

    def __radd__(self, other):
        return self if (is_number(other) and other == 0) else as_objective(other) + self

    def __mul__(self, w):
        if not (is_number(w) or (hasattr(w, "shape") and np.shape(w) == ())):
            return NotImplemented
        return Objective(tuple(eqx.tree_at(lambda q: q.weight, p, p.weight * w) for p in self.parts))

    __rmul__ = __mul__

    @property
    def weights(self) -> tuple:
        return tuple(p.weight for p in self.parts)

    def reweighted(self, weights) -> "Objective":
        """The same parts with ``weights`` (one per part; numbers or traced scalars)."""
        weights = list(weights)
        if len(weights) != len(self.parts):
            raise ValueError(f"{len(weights)} weights for {len(self.parts)} parts {list(self.names)}")
        return Objective(tuple(eqx.tree_at(lambda q: q.weight, p, w) for p, w in zip(self.parts, weights)))

    def check(self, n_words: int, n_docs: int) -> None:
        """A clear error when a part was built for another vocabulary or training set."""
        for p in self.parts:
            if p.n_words is not None and p.n_words != n_words:
                raise ValueError(f"objective {p.name!r} was built for {p.n_words} words, the model has {n_words}; "
                                 "re-index the validation corpus with corpus.with_vocab(train.vocab)")
            if p.n_docs is not None and p.n_docs != n_docs:
                raise ValueError(f"objective {p.name!r} has labels for {p.n_docs} training documents, the model is "
                                 f"fitted on {n_docs}")

    def check_traceable(self, phi, theta) -> None:
        """A clear error naming the part whose function JAX cannot trace (a Python ``if`` on a
        traced value...: :func:`~topicjax.regularizers.base.traced_error`) at ``phi`` (the word
        rows) and ``theta``, before the tuner compiles it: an abstract evaluation, no computation."""
        for p in self.parts:
            data, rest = eqx.partition(p.data, eqx.is_array)  # its data are traced too

            def loss(a, b, q, fn=p.fn, rest=rest):
                return jnp.sum(fn(a, b, eqx.combine(q, rest)))

            try:
                jax.eval_shape(jax.grad(loss, argnums=(0, 1)), phi, theta, data)
            except Exception as e:
                raise traced_error(p.name, e, "objective") from e

    def cast(self, dtype) -> "Objective":
        """The floating data in ``dtype``."""

        def conv(x):
            if hasattr(x, "dtype") and jnp.issubdtype(x.dtype, jnp.floating):
                return jnp.asarray(x, dtype)
            return x

        return Objective(tuple(eqx.tree_at(lambda q: q.data, p, jax.tree.map(conv, p.data)) for p in self.parts))


def as_objective(obj) -> Objective:
    """An :class:`Objective` from an objective, a part, or a plain ``f(phi, theta) -> scalar``.

    Every user function of its parts is fingerprinted now (as
    :func:`~topicjax.regularizers.as_regularizer` does for regularizers): the values it reads
    outside its arguments (globals, closure cells, defaults...) are part of what the tuner's
    compiled programs are cached on, so a tuning run uses them as they are at the time of the
    call, and an unchanged objective reuses the compiled programs."""
    if isinstance(obj, Objective):
        out = obj
    elif isinstance(obj, Part):
        out = Objective((obj,))
    elif callable(obj):
        name = getattr(obj, "__name__", "objective")
        out = Objective((Part(fn=_Plain(obj, b"", what="objective", owner=name), data=None, weight=1.0, name=name),))
    else:
        raise TypeError(f"an objective must be an Objective or a function f(phi, theta) -> scalar, got {obj!r}")
    return _refreshed(out)


def _refreshed(obj: Objective) -> Objective:
    parts, changed = [], False
    for p in obj.parts:
        fn = p.fn if isinstance(p.fn, _Named) else fresh(p.fn, what="objective", owner=p.name)
        changed |= fn is not p.fn
        parts.append(p if fn is p.fn else dataclasses.replace(p, fn=fn))
    return Objective(tuple(parts)) if changed else obj


class _Plain(Fresh):
    """A plain ``f(phi, theta)`` as a part's ``fn(phi, theta, data)``; equal for the same ``f``
    reading the same values (:class:`~topicjax.regularizers._fresh.Fresh`)."""

    __slots__ = ()

    def __call__(self, phi, theta, data):
        return jnp.asarray(self.fn(phi, theta))


# ----------------------------------------------------------------------------- document completion
def differentiable_fold_in(phi, data, n_docs: int, n_iter: int = 30):
    """Θ (T x n_docs) of documents ``data`` (a differentiable layout) with Φ fixed: ``n_iter``
    iterations of ``θ_d ∝ θ_d ⊙ ∂L/∂θ_d`` (ARTM eq. 16, no regularizer; θ clamped at EPS as
    the M-step does) from uniform, differentiable in Φ (a ``lax.scan`` with a checkpointed
    body).  The same iterations as :func:`topicjax.evaluation.metrics.fold_in`, whose
    :func:`~topicjax.core.foldin.fold_in` holds Φ constant (no gradient into Φ) by design."""
    T = phi.shape[1]
    theta0 = jnp.full((T, n_docs), 1.0 / T, phi.dtype)

    @jax.checkpoint
    def one(theta):
        g = data.expected_counts(phi, theta, need_phi=False, need_theta=True)[2]
        return mstep.normalize_columns(jnp.maximum(theta, EPS) * g)

    theta, _ = jax.lax.scan(lambda th, _: (one(th), None), theta0, None, length=int(n_iter))
    return theta


def _completion_loss(phi, theta, d):
    theta_v = differentiable_fold_in(phi, d["observed"], d["n_docs"], d["n_iter"])
    held = d["heldout"]
    # held-out tokens of words no topic can produce (zero rows of Φ: unseen in training) are
    # ignored, as in metrics.heldout_log_likelihood; the mask is a constant of the derivative
    seen = jax.lax.stop_gradient(phi.sum(1) > 0).astype(phi.dtype)
    held = held._replace(count=held.count * seen[held.word])
    ll = held.expected_counts(phi, theta_v, need_phi=False, need_theta=False)[0]
    n = jnp.sum(held.count)
    return -ll / jnp.maximum(n, 1.0)


class _Static(eqx.Module):
    value: Any = eqx.field(static=True)


def heldout_perplexity_loss(observed: Corpus, heldout: Corpus, *, n_iter: int = 30, name: str = "log_perplexity",
                            chunk: int | None = None) -> Objective:
    """Log-perplexity of ``heldout`` by document completion (ARTM sec. 5; see the module
    docstring).  ``observed``/``heldout``: the two parts of the validation documents
    (:meth:`Corpus.completion_split`), on the training vocabulary.  ``exp`` of the loss is
    :func:`topicjax.evaluation.metrics.heldout_perplexity` with ``n_iter`` fold-in iterations."""
    observed.check_same_vocab(heldout, "held-out part")
    if observed.n_docs != heldout.n_docs:
        raise ValueError(f"observed and held-out parts must hold the same documents ({observed.n_docs} vs "
                         f"{heldout.n_docs})")
    if heldout.n_tokens == 0:
        raise ValueError("the held-out part has no tokens")
    data = {"observed": differentiable(layout.prepare(observed, chunk)),
            "heldout": differentiable(layout.prepare(heldout, chunk)),
            "n_docs": _Static(observed.n_docs), "n_iter": _Static(int(n_iter))}
    return Objective((Part(fn=_unwrap(_completion_loss), data=data, weight=1.0, name=name,
                           n_words=observed.n_words),))


def _unwrap(fn):
    """``fn`` with the ``_Static`` values of its data dict unwrapped (static ints in a pytree)."""

    def wrapped(phi, theta, data):
        return fn(phi, theta, {k: (v.value if isinstance(v, _Static) else v) for k, v in data.items()})

    wrapped.__name__ = fn.__name__
    return _Named(wrapped, fn)


class _Named:
    """A hashable wrapper (by the wrapped module-level function) so compiled code is reused."""

    __slots__ = ("call", "key")

    def __init__(self, call, key):
        self.call, self.key = call, key

    def __call__(self, *a):
        return self.call(*a)

    def __eq__(self, other):
        return isinstance(other, _Named) and other.key is self.key

    def __hash__(self):
        return hash((_Named, self.key))


# ----------------------------------------------------------------------------- coherence
def npmi_matrix(reference: Corpus, words) -> np.ndarray:
    """NPMI of every pair of ``words`` over the documents of ``reference`` (float64, zero
    diagonal), with the conventions of :func:`topicjax.evaluation.metrics.coherence`: a pair
    never seen together (or a word never seen) scores -1, a pair in every document 1, else
    ``log(D S(w,w') / (S(w) S(w'))) / -log(S(w,w') / D)``."""
    words = np.asarray(words, np.int64)
    df, co = cooccurrence(reference, words)
    D = float(reference.n_docs)
    df = df.astype(np.float64)
    co = co.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        pmi = np.log(co * D / np.outer(df, df))
        p = co / D
        npmi = np.where(p < 1, pmi / -np.log(p), 1.0)
    npmi = np.where((co > 0) & (df[:, None] > 0) & (df[None, :] > 0), npmi, -1.0)
    np.fill_diagonal(npmi, 0.0)
    return npmi


def expected_npmi(q, npmi):
    """Per column of ``q`` (K x T, non-negative word weights), the expected NPMI of two distinct
    words drawn independently from ``q_t``: ``Σ_{i≠j} q_i q_j N_ij / Σ_{i≠j} q_i q_j`` (``npmi``
    with a zero diagonal); NaN-free (0 for a column with fewer than two non-zero weights)."""
    num = jnp.einsum("it,ij,jt->t", q, npmi, q, precision=jax.lax.Precision.HIGHEST)
    s = q.sum(0)
    den = s * s - jnp.sum(q * q, axis=0)
    ok = den > 0
    return jnp.where(ok, num / jnp.where(ok, den, 1.0), 0.0), ok


def _coherence_loss(phi, theta, d):
    T = phi.shape[1]
    tmask = jnp.ones(T, phi.dtype)
    if d["topics"] is not None:
        tmask = jnp.zeros(T, phi.dtype).at[jnp.asarray(d["topics"])].set(1)
    rows = phi[d["words"]] * tmask[None, :]
    # q_t ∝ φ_t^γ over the candidate words; E[NPMI] is invariant to the scale of q_t, so the
    # column maximum (held constant) only keeps the powers in floating-point range
    top = jax.lax.stop_gradient(jnp.max(rows, axis=0, keepdims=True))
    q = (rows / jnp.where(top > 0, top, 1.0)) ** d["power"]
    e, ok = expected_npmi(q, d["npmi"])
    n = jnp.maximum(jnp.sum(ok), 1)
    return -jnp.sum(e) / n


def coherence_loss(reference: Corpus, *, power: float = 2.0, max_words: int = 2000, topics=None,
                   name: str = "neg_npmi") -> Objective:
    """Smooth coherence (loss: minus the mean over topics of the expected NPMI).

    Design: for topic t let ``q_t ∝ φ_t^γ`` over the candidate words (``γ = power``); the
    coherence of t is the expected NPMI of two distinct words drawn independently from ``q_t``
    (:func:`expected_npmi`), NPMI measured by document co-occurrence in ``reference``
    (:func:`npmi_matrix`).  γ = 1 weights every word pair by its probability in the topic; a
    larger γ concentrates the weight on the topic's top words, a smooth stand-in for the top-k
    words of the usual coherence (which is not differentiable: the top-k set jumps); as γ → ∞ it
    tends to the NPMI of the top pair.  A topic uniform over k words scores exactly the top-k
    NPMI coherence of :func:`topicjax.evaluation.metrics.coherence` for any γ.

    Candidate words: the ``max_words`` words of highest document frequency in ``reference``
    (all words when the vocabulary is smaller; the NPMI matrix is ``max_words²`` numbers);
    ``topics``: indices of the topics averaged (default all; topics with fewer than two
    candidate words of non-zero weight are left out of the mean).
    """
    if not (is_number(power) and power > 0):
        raise ValueError(f"power must be a positive number, got {power!r}")
    if int(max_words) < 2:
        raise ValueError(f"max_words must be at least 2, got {max_words!r}")
    df = reference.doc_frequency
    order = np.argsort(-df, kind="stable")
    words = np.sort(order[: min(int(max_words), reference.n_words)])
    data = {"words": jnp.asarray(words, jnp.int32), "npmi": jnp.asarray(npmi_matrix(reference, words), jnp.float32),
            "power": float(power), "topics": _Static(None if topics is None else tuple(int(t) for t in topics))}
    return Objective((Part(fn=_unwrap(_coherence_loss), data=data, weight=1.0, name=name,
                           n_words=reference.n_words),))


# ----------------------------------------------------------------------------- classification
def _softmax_ce(W, X, y, C):
    logits = X @ W
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits, axis=1), y[:, None], axis=1))


def _features(theta):
    return jnp.concatenate([theta.T, jnp.ones((theta.shape[1], 1), theta.dtype)], axis=1)


def logistic_regression(X, y, n_classes: int, l2: float, n_newton: int = 25):
    """Weights ``W`` ((F, C)) minimising ``mean CE(softmax(X W), y) + l2 ||W||²``.

    Newton's method from zero (``n_newton`` steps, without derivatives), then one Newton step
    with the Hessian held constant: at the minimum it does not move ``W``, and its derivative
    is the implicit function theorem's ``dW/dX = -H⁻¹ ∂²ℓ/∂W∂X`` (exact when the Newton
    iterations have converged; the loss is strictly convex for ``l2 > 0``)."""
    F = X.shape[1]
    shape = (F, n_classes)

    def loss(w, X):
        return _softmax_ce(w.reshape(shape), X, y, n_classes) + l2 * jnp.sum(w * w)

    Xc = jax.lax.stop_gradient(X)
    hess = jax.hessian(loss)
    grad = jax.grad(loss)

    def newton(_, w):
        return w - jnp.linalg.solve(hess(w, Xc), grad(w, Xc))

    w = jax.lax.fori_loop(0, int(n_newton), newton, jnp.zeros(F * n_classes, X.dtype))
    w = jax.lax.stop_gradient(w)
    H = jax.lax.stop_gradient(hess(w, Xc))
    return (w - jnp.linalg.solve(H, grad(w, X))).reshape(shape)


def _classification_loss(phi, theta, d):
    W = logistic_regression(_features(theta), d["train_labels"], d["n_classes"], d["l2"], d["n_newton"])
    theta_v = differentiable_fold_in(phi, d["valid"], d["n_valid"], d["n_iter"])
    return _softmax_ce(W, _features(theta_v), d["valid_labels"], d["n_classes"])


def _labels(labels, what: str) -> np.ndarray:
    if isinstance(labels, Corpus):
        return np.asarray(labels.label_ids, np.int64)
    y = np.asarray(labels)
    if y.ndim != 1 or not np.issubdtype(y.dtype, np.integer) or (y.size and y.min() < 0):
        raise ValueError(f"{what} must be a Corpus with single labels or non-negative integer class ids, one per document")
    return y.astype(np.int64)


def classification_loss(train_labels, valid: Corpus, valid_labels=None, *, l2: float = 1e-3, n_iter: int = 30,
                        n_newton: int = 25, name: str = "cross_entropy") -> Objective:
    """Cross-entropy of a classifier of the validation documents from their topic proportions.

    A multinomial logistic regression on the features ``[θ_d, 1]`` with an L2 penalty ``l2``
    is trained on the training documents' Θ of the fit with labels ``train_labels`` (class ids,
    or the training corpus with single labels) by :func:`logistic_regression`; the loss is its
    mean cross-entropy on the validation documents ``valid`` (Θ folded in on the whole
    documents, :func:`differentiable_fold_in`), with labels ``valid_labels`` (default ``valid``'s own).
    Class ids are shared: use the same label names on both sides."""
    y_train = _labels(train_labels, "train_labels")
    y_valid = _labels(valid if valid_labels is None else valid_labels, "valid_labels")
    if y_valid.size != valid.n_docs:
        raise ValueError(f"{y_valid.size} validation labels for {valid.n_docs} validation documents")
    if isinstance(train_labels, Corpus) and valid_labels is None and valid.label_names != train_labels.label_names:
        raise ValueError("the training and validation corpora have different label names; pass class ids")
    if not (is_number(l2) and l2 > 0):
        raise ValueError(f"l2 must be a positive number, got {l2!r}")
    C = int(max(y_train.max(), y_valid.max())) + 1
    data = {"train_labels": jnp.asarray(y_train, jnp.int32), "valid_labels": jnp.asarray(y_valid, jnp.int32),
            "valid": differentiable(layout.prepare(valid)), "l2": float(l2),
            "n_classes": _Static(C), "n_valid": _Static(valid.n_docs), "n_iter": _Static(int(n_iter)),
            "n_newton": _Static(int(n_newton))}
    return Objective((Part(fn=_unwrap(_classification_loss), data=data, weight=1.0, name=name,
                           n_words=valid.n_words, n_docs=int(y_train.size)),))
