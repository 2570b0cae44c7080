"""The regularizer protocol: one pytree type that every fit path accepts the same way.

A regularizer is a plain differentiable function ``R(phi, theta) -> scalar`` of the stochastic
matrices Φ (W x T) and Θ (T x D); the EM family maximises ``L + Σ_i τ_i R_i`` (ARTM eq. 13) and
takes the M-step terms ``φ ∂R/∂φ``, ``θ ∂R/∂θ`` of Theorem 2 from ``jax.grad``.

* :func:`as_regularizer` (and :func:`combine`) turns whatever is given -- a plain function, a pool
  member (:mod:`topicjax.regularizers`), a pair ``(R, tau)``, a list of those, a weighted sum
  ``2.0 * R1 + R2`` -- into ONE type, :class:`Regularizer`, an ``equinox.Module`` holding a tuple
  of :class:`Term`\\ s (``fn``, its data ``params`` and its coefficient ``coef`` as pytree leaves,
  and metadata); anything else is an error naming its position.  :func:`check_regularizers` is
  the estimators' validator of ``regularizers``.
* :func:`custom` ``(fn(phi, theta, data), data)`` gives data to a criterion of one's own;
  :func:`register` adds a factory to :data:`REGISTRY`, from which :func:`from_spec` rebuilds a
  pool member of a saved model; :meth:`Regularizer.bind` resolves a regularizer against the
  model's :class:`Context` (topic names, document ids, corpus statistics) when a model is fitted,
  with clear errors.
* A fit uses a regularizer as it is *at the time of the call*: every user function is
  fingerprinted with the values it reads outside its arguments, so a changed global recompiles
  and is used; a value that cannot be fingerprinted is compared by identity and warned about
  once.

Every entry point (``ARTM.fit``, ``fit_many``, ``transform``,
:func:`topicjax.scale.online.fit_online`, :func:`topicjax.scale.distributed.fit`, the tuner) calls
:func:`as_regularizer` and then :meth:`Regularizer.bind`.

What a term carries, the fingerprints in detail and binding: ``docs/guides/internals.md``, "The
regularizer protocol: terms, binding and fingerprints"; the conventions and the pool: "ARTM
regularizers: conventions and the pool" there.

>>> import jax.numpy as jnp
>>> from topicjax import regularizers as R
>>> def decorrelate(phi, theta):
...     s = phi.sum(1)
...     return -(jnp.sum(s * s) - jnp.sum(phi * phi))
>>> reg = R.combine((decorrelate, 1e4), R.sparse_theta() * 0.5)
>>> reg.names
('decorrelate', 'sparse_theta')
>>> [round(float(c(1)), 2) for c in reg.coefs]
[10000.0, 0.5]
"""

from __future__ import annotations

import copy
import functools
import dataclasses
import inspect
import json
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from topicjax.core.compiled import jit
from topicjax.core.numerics import EPS
from topicjax.core.plain import jsonable
from topicjax.regularizers._fresh import Fresh, fresh
from topicjax.regularizers.schedules import (Constant, Schedule, Table, Traced, as_schedule, check_values,
                                            is_number)

__all__ = ["Context", "Term", "Regularizer", "as_regularizer", "check_regularizers", "combine", "custom", "register", "from_spec",
           "REGISTRY", "LABELS_MODALITY", "PlainFunction"]

#: Name of the modality that holds the class rows (Ψ) of a model with classes (ARTM Theorem 3).
LABELS_MODALITY = "@labels"


# ----------------------------------------------------------------------------- binding context
@dataclass(frozen=True)
class Context:
    """What a regularizer may need to know about the model it is bound to.

    ``n_words`` counts every row of Φ (all modalities, then the classes); ``row_modality`` gives
    the modality index of each row and ``modality_names`` their names (the class rows, if any,
    belong to :data:`LABELS_MODALITY`).  ``doc_lengths`` are the token counts n_d of the
    documents (unweighted).  ``phase`` is ``"fit"`` or ``"transform"`` (inference for new
    documents: regularizers with per-document data are dropped and learned parameters, such as
    the μ, Σ of :func:`~topicjax.regularizers.correlated_topics`, come from ``fitted``).
    """

    n_words: int
    n_topics: int
    n_docs: int
    topic_names: tuple = ()
    background: tuple = ()
    doc_lengths: np.ndarray | None = None
    corpus: Any = None
    row_modality: np.ndarray | None = None
    modality_names: tuple = ()
    class_names: tuple = ()
    class_freq: np.ndarray | None = None
    phase: str = "fit"
    fitted: Mapping | None = None

    def __post_init__(self):
        if not self.topic_names:
            object.__setattr__(self, "topic_names", tuple(f"topic_{i}" for i in range(self.n_topics)))
        if self.row_modality is None:
            object.__setattr__(self, "row_modality", np.zeros(self.n_words, np.int32))
            object.__setattr__(self, "modality_names", ("words",))

    @classmethod
    def build(cls, corpus, n_topics: int, *, background=(), topic_names=None, **kw) -> "Context":
        """Context of a single-modality model of ``corpus`` (handy for using the pool directly)."""
        return cls(
            n_words=corpus.n_words, n_topics=n_topics, n_docs=corpus.n_docs,
            topic_names=tuple(topic_names or ()), background=tuple(background),
            doc_lengths=np.asarray(corpus.doc_lengths, np.float64), corpus=corpus, **kw,
        )

    @property
    def word_rows(self) -> np.ndarray:
        """Boolean mask of the rows of Φ that are words (not classes)."""
        if LABELS_MODALITY in self.modality_names:
            return self.row_modality != self.modality_names.index(LABELS_MODALITY)
        return np.ones(self.n_words, bool)

    @property
    def class_rows(self) -> np.ndarray:
        """Indices of the class rows (Ψ) of Φ; empty without classes."""
        if LABELS_MODALITY not in self.modality_names:
            return np.zeros(0, np.int64)
        return np.flatnonzero(self.row_modality == self.modality_names.index(LABELS_MODALITY))

    @property
    def vocab(self) -> tuple:
        if self.corpus is not None:
            return tuple(self.corpus.vocab)
        return tuple(f"w{i}" for i in range(self.n_words))


# ----------------------------------------------------------------------------- terms
def _n_positional(fn) -> int:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return 2
    n = 0
    for p in sig.parameters.values():
        if p.kind == p.VAR_POSITIONAL:
            return 99
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty:
            n += 1
    return n


class PlainFunction(Fresh):
    """``fn(phi, theta, params)`` calling a plain ``R(phi, theta)``; equal (and hashing equal)
    for the same ``R`` reading the same values (its fingerprint, :mod:`topicjax.regularizers._fresh`),
    so coercing one function twice reuses the compiled step while nothing it reads has changed,
    and a fit after a change compiles a step that uses the new values."""

    __slots__ = ()

    def __call__(self, phi, theta, params=None):
        return self.fn(phi, theta)


class Term(eqx.Module):
    """One term ``coef(iteration) * fn(phi, theta, params)`` of a :class:`Regularizer`."""

    fn: Callable = eqx.field(static=True)
    params: Any
    coef: Schedule
    name: str = eqx.field(static=True)
    binder: Callable | None = eqx.field(static=True, default=None)
    update: Callable | None = eqx.field(static=True, default=None)
    nonnegative: bool = eqx.field(static=True, default=False)
    uses_phi: bool = eqx.field(static=True, default=True)
    uses_theta: bool = eqx.field(static=True, default=True)
    per_document: bool = eqx.field(static=True, default=False)
    update_in_transform: bool = eqx.field(static=True, default=False)
    learned: tuple = eqx.field(static=True, default=())
    spec_json: str | None = eqx.field(static=True, default=None)
    bound: bool = eqx.field(static=True, default=True)
    keep_one: bool = eqx.field(static=True, default=False)

    @property
    def spec(self) -> dict | None:
        return None if self.spec_json is None else json.loads(self.spec_json)

    @property
    def is_plain(self) -> bool:
        return isinstance(self.fn, PlainFunction)

    def value(self, phi, theta, params=None):
        """``fn`` (without the coefficient) with ``params`` (default: the term's own)."""
        return self.fn(phi, theta, self.params if params is None else params)

    # Pickling.  A pool member's functions are closures of its factory, which pickle cannot
    # name; it is pickled as its spec (the factory and its arguments) with its coefficient,
    # name and (once bound) its data and update, and rebuilt by the factory: so models with
    # pool regularizers pickle and go to joblib / multiprocessing workers.  Copies keep the
    # functions themselves (the same static fields: the compiled step is reused).
    def __reduce_ex__(self, protocol):
        if self.spec_json is None:
            return object.__reduce_ex__(self, protocol)
        state = None if not self.bound or self.binder is not None else (self.params, self.update is not None)
        return _term_from_spec, (self.spec_json, self.coef, self.name, state)

    def __copy__(self):
        new = object.__new__(type(self))
        for f in dataclasses.fields(self):
            object.__setattr__(new, f.name, getattr(self, f.name))
        return new

    def __deepcopy__(self, memo):
        new = object.__new__(type(self))
        for f in dataclasses.fields(self):
            object.__setattr__(new, f.name, copy.deepcopy(getattr(self, f.name), memo))
        return new

    def bind(self, ctx: Context) -> "Term | None":
        """A copy with its data computed for ``ctx`` (``None`` when it does not apply when
        inferring Θ of new documents: Φ-only and per-document terms)."""
        if ctx.phase == "transform" and (not self.uses_theta or self.per_document):
            return None
        params = self.params
        if self.binder is not None:
            try:
                params = self.binder(ctx)
            except ValueError as e:
                raise ValueError(f"regularizer {self.name!r}: {e}") from None
            if ctx.phase == "transform" and ctx.fitted:
                params = {**params, **{k: np.asarray(v) for k, v in ctx.fitted.items() if k in self.learned}}
        update = self.update if (ctx.phase != "transform" or self.update_in_transform) else None
        # the binder is not part of the bound term: a refit with a new pool object of the same
        # kind then has the same pytree structure and reuses the compiled step
        return _replace(self, params=params, update=update, bound=True, binder=None)


#: what JAX traces in a regularizer (its data are leaves of the pytree, traced too)
TRACED = "a traced value (phi, theta, its data or anything computed from them)"


def traced_error(name: str, e: Exception, kind: str = "regularizer",
                 where: str = "when traced by JAX") -> ValueError:
    """The one-line error for a regularizer ``name`` (or another ``kind`` of user function) that
    fails when JAX traces it (``jit``, ``grad``), as every fit compiles it: JAX's own errors
    (``TracerBoolConversionError``...) are many lines about tracers, naming neither the
    regularizer nor what to write instead."""
    errors = jax.errors
    if isinstance(e, errors.TracerBoolConversionError):
        what = (f"uses {TRACED} as a Python bool (if, while, and/or, bool()); write the choice with "
                "jnp.where(condition, a, b) (or jax.lax.cond)")
    elif isinstance(e, (errors.ConcretizationTypeError, errors.TracerIntegerConversionError)):
        what = (f"turns {TRACED} into a Python number (int(), float(), .item(), range()); keep it a JAX array: "
                "index with it directly, and choose with jnp.where(condition, a, b)")
    elif isinstance(e, errors.TracerArrayConversionError):
        what = f"turns {TRACED} into a numpy array (np.*); use jax.numpy (jnp.*)"
    elif isinstance(e, errors.NonConcreteBooleanIndexError):
        what = (f"indexes with a boolean mask of {TRACED} (x[x > 0]), whose size JAX cannot know; use "
                "jnp.where(mask, x, 0)")
    else:  # the user's own error: named, on one line
        return ValueError(f"{kind} {name!r} failed {where}: {type(e).__name__}: {' '.join(str(e).split())}")
    return ValueError(f"{kind} {name!r} cannot be compiled by JAX: it {what}")


def _term_from_spec(spec_json: str, coef, name: str, state) -> Term:
    """A pool member rebuilt from its spec (see ``Term.__reduce_ex__``); ``state``: ``None`` for
    an unbound term, else ``(params, has_update)`` of the bound one."""
    term = from_spec(json.loads(spec_json)).terms[0]
    term = _replace(term, coef=coef, name=name)
    if state is not None:
        params, has_update = state
        term = _replace(term, params=params, bound=True, binder=None, update=term.update if has_update else None)
    return term


def _replace(term: Term, **changes) -> Term:
    new = copy.copy(term)
    for k, v in changes.items():
        object.__setattr__(new, k, v)
    return new


# ----------------------------------------------------------------------------- the one type
@jit
def _term_checks(reg: "Regularizer", params: tuple, phi, theta) -> list:
    """For :meth:`Regularizer.check`: ``(value, gradient in phi finite, gradient in theta finite)``
    of every term at ``phi``, ``theta`` clamped at EPS (as the M-step clamps them), in one compiled
    program; eager evaluation compiled every operation of every term on its own."""
    phi_c, theta_c = jnp.maximum(phi, EPS), jnp.maximum(theta, EPS)
    out = []
    for t, p in zip(reg.terms, params):
        val, (g_phi, g_theta) = jax.value_and_grad(lambda a, b, fn=t.fn, q=p: fn(a, b, q), argnums=(0, 1))(phi_c,
                                                                                                          theta_c)
        out.append((val, jnp.all(jnp.isfinite(g_phi)), jnp.all(jnp.isfinite(g_theta))))
    return out


class Regularizer(eqx.Module):
    """A weighted sum ``Σ_i coef_i(iteration) R_i(phi, theta; params_i)`` (ARTM eq. 13).

    Callable as ``R(phi, theta)`` (the value at iteration 1, with its own data; an unbound pool
    member is bound to a minimal context first).  ``R1 + R2`` and :func:`combine` concatenate;
    ``tau * R`` multiplies every coefficient by a number (or sets a schedule on a one-term
    regularizer); :meth:`with_coefs` replaces the coefficients.
    """

    terms: tuple

    def __init__(self, terms=()):
        terms = tuple(terms)
        for t in terms:
            if not isinstance(t, Term):
                raise TypeError(f"Regularizer terms must be Term objects, got {type(t).__name__}")
        self.terms = _unique_names(terms)

    # -- views
    @property
    def names(self) -> tuple:
        return tuple(t.name for t in self.terms)

    @property
    def coefs(self) -> tuple:
        return tuple(t.coef for t in self.terms)

    @property
    def params(self) -> tuple:
        return tuple(t.params for t in self.terms)

    @property
    def on_host(self) -> bool:
        """Some coefficient depends on the score history (evaluated on the host every iteration)."""
        return any(t.coef.on_host for t in self.terms)

    def __len__(self):
        return len(self.terms)

    def __repr__(self):
        inner = ", ".join(f"{t.name}*{t.coef!r}" for t in self.terms)
        return f"Regularizer({inner})"

    # -- evaluation
    def coef_values(self, iteration):
        """The coefficients at ``iteration`` (traced), shape ``(n_terms,)``."""
        if not self.terms:
            return jnp.zeros((0,))
        return jnp.stack([jnp.asarray(t.coef(iteration), jnp.float32).astype(jnp.result_type(float)) for t in self.terms])

    def penalty(self, phi, theta, params=None, iteration=1, *, keep_one=None):
        """``Σ_i coef_i(iteration) R_i(phi, theta; params_i)`` with ``params`` (a tuple, one
        pytree per term; default: the terms' own); ``keep_one`` True/False: only the terms that
        do / do not promise never to empty a column (rate-controlled sparsing)."""
        params = self.params if params is None else params
        dtype = jnp.result_type(phi)
        total = jnp.zeros((), dtype)
        for t, p in zip(self.terms, params):
            if keep_one is not None and t.keep_one != keep_one:
                continue
            total = total + jnp.asarray(t.coef(iteration), dtype) * jnp.asarray(t.fn(phi, theta, p), dtype)
        return total

    @property
    def keeps_one(self) -> bool:
        """Some term promises never to empty a column (see :func:`topicjax.core.mstep.regularized_counts`)."""
        return any(t.keep_one for t in self.terms)

    def __call__(self, phi, theta, iteration=1):
        reg = self
        if not all(t.bound for t in self.terms):
            reg = self.bind(Context(n_words=phi.shape[0], n_topics=phi.shape[1], n_docs=theta.shape[1]))
        return reg.penalty(phi, theta, iteration=iteration)

    def check(self, phi, theta, params=None, where: str = "on the initial model") -> None:
        """Evaluate every term once at ``phi``, ``theta`` (clamped at EPS, as the M-step does): a
        clear error naming the term for an exception, a non-scalar or non-float value, a
        non-finite value or gradient, or code that JAX cannot trace (:func:`traced_error`: Python
        ``if`` on a traced value...) -- before the long computation."""
        if not self.terms:
            return
        params = self.params if params is None else params
        phi_c, theta_c = jax.ShapeDtypeStruct(phi.shape, phi.dtype), jax.ShapeDtypeStruct(theta.shape, theta.dtype)
        for t, p in zip(self.terms, params):
            # Traced first, as the fit compiles it (its data too), abstractly -- no computation: code
            # JAX cannot trace fails here, named; then evaluated once, value and gradient together.
            data, rest = eqx.partition(p, eqx.is_array)

            def value_and_grads(a, b, q, fn=t.fn, rest=rest):
                v, pull = jax.vjp(lambda x, y: fn(x, y, eqx.combine(q, rest)), a, b)
                scalar = jnp.shape(v) == () and jnp.issubdtype(jnp.result_type(v), jnp.floating)
                return v, (pull(jnp.ones_like(v)) if scalar else None)

            try:
                val = jax.eval_shape(value_and_grads, phi_c, theta_c, data)[0]
            except Exception as e:  # user code: say which regularizer failed
                raise traced_error(t.name, e, where=where) from e
            if val.shape != ():
                raise ValueError(f"regularizer {t.name!r} returned an array of shape {val.shape}; "
                                 "a regularizer must return a scalar")
            if not jnp.issubdtype(val.dtype, jnp.floating):
                raise ValueError(f"regularizer {t.name!r} returned dtype {val.dtype}; it must be a float")
        try:  # every term's value and gradients in one program (compiled once per regularizer structure)
            checked = jax.device_get(_term_checks(self, tuple(params), phi, theta))
        except Exception as e:
            raise ValueError(f"regularizers {list(self.names)} failed {where}: {type(e).__name__}: {e}") from e
        for t, (val, finite_phi, finite_theta) in zip(self.terms, checked):
            if not np.isfinite(val):
                raise ValueError(f"regularizer {t.name!r} returned {float(val)} {where} "
                                 "(it must be finite where phi, theta >= EPS)")
            for what, finite in (("phi", finite_phi), ("theta", finite_theta)):
                if not finite:
                    raise ValueError(f"regularizer {t.name!r} has a non-finite gradient in {what} {where}")

    # -- building
    def bind(self, ctx: Context) -> "Regularizer":
        """Every term bound to ``ctx`` (terms that do not apply in ``"transform"`` dropped)."""
        out = [t.bind(ctx) for t in self.terms]
        return Regularizer([t for t in out if t is not None])

    def cast(self, dtype) -> "Regularizer":
        """The data (floating arrays) in ``dtype``; integer arrays stay as they are."""

        def conv(x):
            floating = isinstance(x, (np.ndarray, jax.Array, np.generic)) and jnp.issubdtype(jnp.result_type(x),
                                                                                            jnp.floating)
            if isinstance(x, (np.ndarray, np.generic)):  # converted on the host, then transferred: jnp.asarray
                return jax.device_put(np.asarray(x, dtype) if floating else np.asarray(x))  # compiles a program
            if floating and x.dtype != dtype:
                return x.astype(dtype)
            return x

        return Regularizer([_replace(t, params=jax.tree.map(conv, t.params)) for t in self.terms])

    def with_coefs(self, coefs) -> "Regularizer":
        """The same terms with coefficients ``coefs`` (numbers or schedules, one per term)."""
        coefs = list(coefs)
        if len(coefs) != len(self.terms):
            raise ValueError(f"{len(coefs)} coefficients for {len(self.terms)} regularizers {list(self.names)}")
        return Regularizer([_replace(t, coef=as_schedule(c)) for t, c in zip(self.terms, coefs)])

    def resolve(self, n_iter: int) -> "Regularizer":
        """Tabulate host functions of the iteration alone for ``1 .. n_iter`` and check every
        coefficient there: NaN/inf, or negative where the term requires τ >= 0, is an error
        naming the regularizer and the iteration (before any computation)."""
        terms = []
        for t in self.terms:
            coef = t.coef
            if coef.on_host and not coef.with_history:
                try:
                    coef = Table(coef.values(n_iter))
                except Exception as e:
                    raise ValueError(f"schedule of regularizer {t.name!r} failed: {e}") from e
            if not coef.on_host:
                check_values(coef.values(n_iter), t.name, t.nonnegative)
            terms.append(_replace(t, coef=coef))
        return Regularizer(terms)

    def set_host_values(self, iteration: int, history) -> "Regularizer":
        """Coefficients of the score history evaluated for ``iteration`` (checked)."""
        if not self.on_host:
            return self
        terms = []
        for t in self.terms:
            if t.coef.on_host:
                try:
                    v = t.coef.evaluate(iteration, history)
                except Exception as e:
                    raise ValueError(f"schedule of regularizer {t.name!r} failed at iteration {iteration}: {e}") from e
                check_values(np.asarray([v]), t.name, t.nonnegative, iteration)
                t = _replace(t, coef=eqx.tree_at(lambda c: c.value, t.coef, v))
            terms.append(t)
        return Regularizer(terms)

    def __add__(self, other):
        return combine(self, other)

    def __radd__(self, other):
        if other == 0:  # sum([...])
            return self
        return combine(other, self)

    def __mul__(self, tau):
        if isinstance(tau, Schedule) or callable(tau):
            if len(self.terms) != 1:
                raise ValueError("a schedule can multiply a regularizer of one term only; use with_coefs")
            return self.with_coefs([tau])
        if not is_number(tau) and not (hasattr(tau, "shape") and np.shape(tau) == ()):
            return NotImplemented
        return Regularizer([_replace(t, coef=_scaled(t.coef, tau)) for t in self.terms])

    __rmul__ = __mul__


def _scaled(coef: Schedule, tau) -> Schedule:
    if isinstance(coef, Constant):
        return Constant(coef.value * tau)
    return _ScaledSchedule(coef, tau)


class _ScaledSchedule(Schedule):
    inner: Schedule
    factor: Any

    def __call__(self, iteration):
        return self.factor * self.inner(iteration)

    def spec(self):
        return None


def _unique_names(terms):
    seen: dict = {}
    out = []
    for t in terms:
        base = t.name.split("#")[0]
        seen[base] = seen.get(base, 0) + 1
        name = base if seen[base] == 1 else f"{base}#{seen[base]}"
        out.append(t if name == t.name else _replace(t, name=name))
    return tuple(out)


# ----------------------------------------------------------------------------- coercion
def custom(fn: Callable, data: Any = None, *, name: str | None = None, nonnegative: bool = False,
           uses_phi: bool = True, uses_theta: bool = True, per_document: bool = False,
           update: Callable | None = None, learned: tuple = (), binder: Callable | None = None,
           spec: dict | None = None, update_in_transform: bool = False, keep_one: bool = False) -> Regularizer:
    """A regularizer from ``fn(phi, theta, data) -> scalar`` and its ``data`` (a pytree of arrays,
    passed to the compiled step as an argument instead of being closed over).

    ``binder(ctx) -> data`` computes the data when the model is fitted (pool members);
    ``update(phi, theta, data, tau) -> data`` re-estimates it after every EM pass.  ``keep_one``:
    the M-step never lets this term empty a column of Φ or Θ (the largest entry of a column that
    it would zero keeps its value without the term).  The other keywords are the metadata of
    :class:`Term`.

    >>> import jax.numpy as jnp
    >>> from topicjax import regularizers as R
    >>> def pull(phi, theta, target):            # stay near a target topic-word matrix
    ...     return -jnp.sum((phi - target) ** 2)
    >>> reg = R.custom(pull, jnp.zeros((5, 2)), name="pull")
    >>> round(float(reg(jnp.ones((5, 2)) / 5, jnp.ones((2, 3)) / 2)), 6)  # float32
    -0.4
    """
    if not callable(fn):
        raise TypeError(f"a regularizer must be callable, got {type(fn).__name__}")
    n = _n_positional(fn)
    if n not in (3, 99):
        raise TypeError(f"regularizer {name or getattr(fn, '__name__', fn)!r}: custom(fn, data) needs "
                        f"fn(phi, theta, data); it takes {n} arguments")
    term = Term(fn=fn, params=data, coef=Constant(1.0), name=name or getattr(fn, "__name__", type(fn).__name__),
                binder=binder, update=update, nonnegative=nonnegative, uses_phi=uses_phi, uses_theta=uses_theta,
                per_document=per_document, update_in_transform=update_in_transform, learned=tuple(learned),
                spec_json=None if spec is None else json.dumps(jsonable(spec)), bound=binder is None,
                keep_one=keep_one)
    return Regularizer([term])


def _from_plain(fn) -> Regularizer:
    name = getattr(fn, "__name__", type(fn).__name__)
    n = _n_positional(fn)
    if n not in (2, 99):
        raise TypeError(f"regularizer {name!r} must take exactly two arguments (phi, theta), it takes {n}; "
                        "for data use topicjax.regularizers.custom(fn(phi, theta, data), data)")
    # fingerprinted once, by as_regularizer, when the whole regularizer is assembled
    return Regularizer([Term(fn=PlainFunction(fn, b"", owner=name), params=None, coef=Constant(1.0), name=name)])


def as_regularizer(item) -> Regularizer:
    """THE coercion: ``None``, a :class:`Regularizer`, a plain ``R(phi, theta)``, a pair
    ``(R, tau)`` (τ a number, a schedule or a function of the iteration), or a list/tuple of
    those -> one :class:`Regularizer`.  A clear error for anything else (naming the position).

    Every user function in it (``R``, the ``fn`` and ``update`` of :func:`custom`, a traced
    schedule ``tau(iteration)``) is fingerprinted now (:func:`_refreshed`): the values it reads
    outside its arguments are part of what the compiled step is cached on, so a fit always
    uses them as they are at the time of the call (see the module docstring)."""
    return _refreshed(_coerce(item))


def _coerce(item) -> Regularizer:
    if item is None:
        return Regularizer(())
    if isinstance(item, Regularizer):
        return item
    if isinstance(item, (list, tuple)):
        if len(item) == 2 and _is_coefficient(item[1]) and (callable(item[0]) or isinstance(item[0], Regularizer)):
            return _pair(item)  # a single (R, tau) pair given on its own
        parts = []
        for i, x in enumerate(item):
            try:
                parts.append(_pair(x) if isinstance(x, (list, tuple)) else _coerce(x))
            except (TypeError, ValueError) as e:
                raise type(e)(f"regularizers[{i}]: {e}") from None
        return Regularizer([t for p in parts for t in p.terms])
    if callable(item):
        return _from_plain(item)
    raise TypeError(f"a regularizer must be a callable R(phi, theta) -> scalar, a pair (R, tau) or a list of those, "
                    f"got {item!r}")


def _refreshed(reg: Regularizer) -> Regularizer:
    """``reg`` with every user function of its terms re-fingerprinted (:class:`~topicjax.regularizers._fresh.Fresh`):
    equal to ``reg`` (the same compiled step) exactly while nothing those functions read has changed."""
    terms, changed = [], False
    for t in reg.terms:
        fn = fresh(t.fn, owner=t.name)
        update = fresh(t.update, what="update of regularizer", owner=t.name)
        coef = _fresh_schedule(t.coef, t.name)
        if fn is t.fn and update is t.update and coef is t.coef:
            terms.append(t)
        else:
            changed = True
            terms.append(_replace(t, fn=fn, update=update, coef=coef))
    return Regularizer(terms) if changed else reg


def _fresh_schedule(coef: Schedule, name: str) -> Schedule:
    """``coef`` with the function of every :class:`~topicjax.regularizers.schedules.Traced` in it
    fingerprinted (it is compiled into the fit as well)."""
    is_traced = lambda x: isinstance(x, Traced)  # noqa: E731
    if not any(is_traced(x) for x in jax.tree.leaves(coef, is_leaf=is_traced)):
        return coef

    def one(x):
        if not is_traced(x):
            return x
        fn = fresh(x.fn, what="schedule of regularizer", owner=name)
        return x if fn is x.fn else Traced(fn)

    return jax.tree.map(one, coef, is_leaf=is_traced)


def check_regularizers(value, name: str = "regularizers"):
    """The validator of an estimator's or a fit function's ``regularizers``: anything
    :func:`as_regularizer` accepts (plain functions are checked for the protocol
    ``R(phi, theta) -> scalar``); returns ``value`` unchanged, else one ``ValueError`` naming ``name``."""
    try:
        as_regularizer(value)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{name} must be None, a Regularizer, a callable R(phi, theta), a pair (R, tau) or a "
                         f"list of those; {e}") from None
    return value

def _is_coefficient(x) -> bool:
    return is_number(x) or isinstance(x, Schedule)


def _pair(item) -> Regularizer:
    if len(item) != 2:
        raise ValueError(f"a regularizer entry must be R or a pair (R, tau), got {len(item)} elements")
    reg, tau = item
    if not (callable(reg) or isinstance(reg, Regularizer)) or isinstance(reg, (list, tuple)):
        raise TypeError(f"the first element of (R, tau) must be a regularizer, got {reg!r}")
    reg = _coerce(reg)
    try:
        coef = as_schedule(tau)
    except TypeError as e:
        names = list(reg.names)
        raise ValueError(f"regularizer {names[0] if len(names) == 1 else names}: {e}") from None
    if len(reg.terms) == 1:
        return reg.with_coefs([coef])
    return reg * tau if is_number(tau) else reg.with_coefs([coef] * len(reg.terms))


def combine(*items) -> Regularizer:
    """One :class:`Regularizer` from any number of regularizers, plain functions and
    ``(R, tau)`` pairs: the weighted sum of eq. 13."""
    return as_regularizer(list(items))


# ----------------------------------------------------------------------------- registry
#: factory name -> factory; :func:`from_spec` rebuilds saved regularizers from it.
REGISTRY: dict[str, Callable] = {}


def register(name: str | None = None):
    """Decorator adding a regularizer factory to :data:`REGISTRY` (so saved models can rebuild
    it).  The factory must accept JSON-decoded arguments (lists for tuples/arrays, string keys)."""

    def deco(f):
        params = list(inspect.signature(f).parameters)

        @functools.wraps(f)
        def factory(*args, **kwargs):
            for i, a in enumerate(args):  # R.sparse_phi(0.5): a coefficient where an option goes
                if is_number(a) and not isinstance(a, (bool, np.bool_)):
                    what = f"parameter {params[i]!r}" if i < len(params) else "a parameter"
                    raise TypeError(f"{f.__name__}() got the number {a!r} as its {what}, which is not the "
                                    f"coefficient: write {f.__name__}(...) * {a!r} or ({f.__name__}(...), {a!r}) for "
                                    f"τ = {a!r}, and name the options ({f.__name__}({params[i] if i < len(params) else 'name'}=...))")
            return f(*args, **kwargs)

        REGISTRY[name or f.__name__] = factory
        return factory

    return deco


def from_spec(spec: Mapping) -> Regularizer:
    """Rebuild a pool regularizer from its ``spec`` (``{"factory": ..., "kwargs": ...}``)."""
    name = spec.get("factory")
    if name not in REGISTRY:
        raise ValueError(f"unknown regularizer factory {name!r}; registered: {sorted(REGISTRY)}")
    return REGISTRY[name](**spec.get("kwargs", {}))
