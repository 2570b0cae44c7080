"""The pool of ARTM regularizers (ARTM sec. 4), each a plain differentiable function.

The signature
-------------
A regularizer is any function ``R(phi, theta) -> scalar`` of the stochastic matrices Φ (W x T)
and Θ (T x D) written with ``jax.numpy``; the ARTM driver maximises ``L + Σ_i τ_i R_i`` (eq. 13)
and gets the M-step terms ``φ ∂R/∂φ`` and ``θ ∂R/∂θ`` of Theorem 2 (eq. 15-16) from ``jax.grad``,
so nothing but the criterion has to be written.  Extra data (labels, seed words, document links,
topic subsets, co-occurrence counts) is given to a *factory* that returns the regularizer::

    import jax.numpy as jnp, topicjax as tj
    def decorrelate(phi, theta):                   # eq. 30, any differentiable criterion
        s = phi.sum(1)
        return -(jnp.sum(s * s) - jnp.sum(phi * phi))
    tj.ARTM(30, regularizers=[(decorrelate, 1e4), (tj.regularizers.sparse_theta(), 0.5)])

Conventions shared by every regularizer:

* Φ has one row per token type of the model: the words of every modality, then, for a model with
  classes (Theorem 3), one row per class (the rows of Ψ).  The driver clamps Φ and Θ at
  :data:`topicjax.core.em.EPS` before calling R, so ``log(phi)`` is finite (and ``φ ∂R/∂φ`` of
  ``β log φ`` is exactly β even where φ = 0).  Called directly on matrices with zeros, the log
  terms are ``-inf``.
* The coefficient τ is *not* part of R: it is given beside it, ``(R, tau)``, as a float or a
  schedule, and is a traced value in the compiled step (changing it never recompiles).
* The pool's regularizers are :class:`Regularizer` objects: callables ``R(phi, theta)`` that carry
  their data as a pytree ``params`` (passed to the compiled step as arguments, so large arrays are
  not baked into the program and refits reuse the compiled code), a name for error messages, the
  rule that τ must be non-negative (eq. 13), an optional ``update`` run after every EM pass
  (μ and Σ of the correlated topic model, eq. 38-39; the thresholds of rate-controlled sparsing),
  and a JSON ``spec`` from which :func:`from_spec` rebuilds them when a model is loaded.
* Topic subsets are given as ``topics=``: ``None`` (all), ``"specific"``, ``"background"``, or a
  list of topic indices or names; they are resolved by :meth:`Regularizer.bind` when the model is
  fitted, and an unknown name or index is an error raised before any computation.

The pool (paper equations; M-step terms with coefficient τ):

=========================  ============  =============================================================
factory                    eq.           M-step term
=========================  ============  =============================================================
:func:`smooth_phi`         23-24         φ: ``+ τ β_w``  (LDA's β when β_w = 1 and τ = β)
:func:`smooth_theta`       23-24         θ: ``+ τ α_t``
:func:`sparse_phi`         25-26         φ: ``- τ c_t β_w``  (c_t = 1, or rate-controlled)
:func:`sparse_theta`       25-26         θ: ``- τ c_d α_t``
:func:`seed_words`         27-28         φ: ``+ τ [w ∈ W_t] / |W_t|``  for t ∈ T_0
:func:`labelled_documents` 27, 29        θ: ``+ τ [t ∈ T_d] / |T_d|``  for d ∈ D_0
:func:`semi_supervised`    27-29         both of the above
:func:`decorrelate`        30-31         φ: ``- τ φ_wt Σ_{s≠t} φ_ws``
:func:`document_links`     32-33         θ: ``+ τ θ_td Σ_c n_dc θ_tc``
:func:`correlated_topics`  36-39         θ: ``- τ Σ_s Σ̃_ts (ln θ_sd - μ_s)``, μ, Σ re-estimated
:func:`coherence`          40-42         φ: ``+ τ Σ_{v≠w} C_wv n_vt``
:func:`coherence`          43            φ: ``+ τ 2 φ_wt Σ_v C_wv φ_vt / Σ_uv C_uv φ_ut φ_vt``
:func:`topic_selection`    (Note 1)      θ: ``- τ (n/|T|) θ_td n_d / n_t``  (small topics die)
:func:`label_regularization` 51-52       ψ: ``+ τ p̂_c ψ_ct n_t / Σ_s ψ_cs n_s``
=========================  ============  =============================================================

Eq. 30 and 32 count every pair twice; the pool halves them so that the M-step is literally eq. 31
and 33 (the issue's example ``decorrelate`` above has twice the pool's gradient).
"""

from __future__ import annotations

import copy
import inspect
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import jax
import jax.numpy as jnp
import numpy as np

from topicjax.core.em import EPS

__all__ = [
    "Context",
    "Regularizer",
    "as_regularizer",
    "smooth_phi",
    "smooth_theta",
    "sparse_phi",
    "sparse_theta",
    "seed_words",
    "labelled_documents",
    "semi_supervised",
    "decorrelate",
    "decorrelate_phi",
    "document_links",
    "correlated_topics",
    "coherence",
    "topic_selection",
    "label_regularization",
    "register",
    "from_spec",
    "REGISTRY",
    "LABELS_MODALITY",
]

#: Name of the modality that holds the class rows (Ψ) of a model with classes (Theorem 3).
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
    the μ, Σ of :func:`correlated_topics`, come from ``fitted``).
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


# ----------------------------------------------------------------------------- the wrapper
class Regularizer:
    """A regularizer ``R(phi, theta) -> scalar`` with its data and metadata.

    Parameters
    ----------
    fn: ``fn(phi, theta, params) -> scalar`` (pure JAX); or, with ``params=None`` and no
        ``binder``, a plain ``fn(phi, theta)``.
    name: used in error messages and score histories (default: the function's name).
    binder: ``binder(ctx: Context) -> params``, run when the model is fitted (resolves topic
        names, checks document ids, computes corpus statistics).  Must raise ``ValueError`` with
        a clear message on bad input.
    update: ``update(phi, theta, params, tau) -> params``, a pure JAX function run after every EM
        pass with the new Φ, Θ and the coefficient τ just used (block-coordinate re-estimation of
        auxiliary parameters, e.g. eq. 38-39).
    update_in_transform: also run ``update`` when inferring Θ of new documents.
    nonnegative: τ must be >= 0 (eq. 13; the pool's rule: the sign is part of the criterion).
    uses_phi, uses_theta: which matrix R depends on (a Φ-only regularizer is skipped when Φ is
        fixed, as in ``transform``).
    per_document: R holds data about particular training documents; it is not applied to new
        documents.
    learned: keys of ``params`` learned during the fit, saved with the model and reused by
        ``transform`` (e.g. ``("mu", "prec")``).
    spec: ``{"factory": name, "kwargs": {...}}`` for :func:`from_spec` (JSON-able).
    """

    def __init__(
        self,
        fn: Callable,
        *,
        name: str | None = None,
        params: Any = None,
        binder: Callable | None = None,
        update: Callable | None = None,
        update_in_transform: bool = False,
        nonnegative: bool = False,
        uses_phi: bool = True,
        uses_theta: bool = True,
        per_document: bool = False,
        learned: tuple = (),
        spec: dict | None = None,
    ):
        if not callable(fn):
            raise TypeError(f"a regularizer must be callable, got {type(fn).__name__}")
        self._plain = params is None and binder is None and _n_positional(fn) == 2
        self.fn = fn
        self.key = fn  # identity of the traced code (compiled steps are cached on it)
        self.name = name or getattr(fn, "__name__", type(fn).__name__)
        self.params = params
        self.binder = binder
        self.update = update
        self.update_in_transform = update_in_transform
        self.nonnegative = nonnegative
        self.uses_phi = uses_phi
        self.uses_theta = uses_theta
        self.per_document = per_document
        self.learned = tuple(learned)
        self.spec = spec
        self.bound = binder is None

    # -- evaluation
    def apply(self, phi, theta, params):
        """``R`` with explicit (possibly traced) ``params``: what the compiled step calls."""
        if self._plain:
            return self.fn(phi, theta)
        return self.fn(phi, theta, params)

    def __call__(self, phi, theta):
        reg = self
        if not self.bound:
            reg = self.bind(Context(n_words=phi.shape[0], n_topics=phi.shape[1], n_docs=theta.shape[1]))
        return reg.apply(phi, theta, reg.params)

    # -- binding
    def bind(self, ctx: Context) -> "Regularizer | None":
        """A copy bound to a model (its ``params`` computed), or ``None`` when it does not apply
        in ``ctx.phase == "transform"`` (Φ-only or per-document regularizers)."""
        if ctx.phase == "transform" and (not self.uses_theta or self.per_document):
            return None
        out = copy.copy(self)
        if self.binder is not None:
            try:
                out.params = self.binder(ctx)
            except ValueError as e:
                raise ValueError(f"regularizer {self.name!r}: {e}") from None
            if ctx.phase == "transform" and ctx.fitted:
                out.params = {**out.params, **{k: jnp.asarray(v) for k, v in ctx.fitted.items() if k in self.learned}}
        if ctx.phase == "transform" and not self.update_in_transform:
            out.update = None
        out.bound = True
        return out

    def __repr__(self) -> str:
        return f"Regularizer({self.name!r})"


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


def as_regularizer(r) -> Regularizer:
    """A :class:`Regularizer` from a pool object or a plain ``R(phi, theta)`` function."""
    if isinstance(r, Regularizer):
        return r
    if not callable(r):
        raise TypeError(f"a regularizer must be a callable R(phi, theta) -> scalar, got {r!r}")
    n = _n_positional(r)
    if n not in (2, 99):
        name = getattr(r, "__name__", repr(r))
        raise TypeError(f"regularizer {name!r} must take exactly two arguments (phi, theta), it takes {n}")
    return Regularizer(r)


# ----------------------------------------------------------------------------- registry
#: factory name -> factory; :func:`from_spec` rebuilds saved regularizers from it.
REGISTRY: dict[str, Callable] = {}


def register(name: str | None = None):
    """Decorator adding a regularizer factory to :data:`REGISTRY` (so saved models can rebuild
    it).  The factory must accept JSON-decoded arguments (lists for tuples/arrays, string keys)."""

    def deco(f):
        REGISTRY[name or f.__name__] = f
        return f

    return deco


def from_spec(spec: Mapping) -> Regularizer:
    """Rebuild a pool regularizer from its ``spec`` (``{"factory": ..., "kwargs": ...}``)."""
    name = spec.get("factory")
    if name not in REGISTRY:
        raise ValueError(f"unknown regularizer factory {name!r}; registered: {sorted(REGISTRY)}")
    return REGISTRY[name](**spec.get("kwargs", {}))


def _spec(factory: str, **kwargs) -> dict:
    return {"factory": factory, "kwargs": kwargs}


# ----------------------------------------------------------------------------- resolution helpers
def _topic_mask(topics, ctx: Context) -> np.ndarray:
    T = ctx.n_topics
    if topics is None:
        return np.ones(T, bool)
    if isinstance(topics, str) and topics in ("specific", "background"):
        bg = np.zeros(T, bool)
        bg[list(ctx.background)] = True
        if topics == "background":
            if not bg.any():
                raise ValueError("topics='background' but the model has no background topics (set background_topics)")
            return bg
        if bg.all():
            raise ValueError("topics='specific' but every topic is a background topic")
        return ~bg
    if isinstance(topics, (str, int, np.integer)):
        topics = [topics]
    mask = np.zeros(T, bool)
    for t in topics:
        mask[_topic_index(t, ctx)] = True
    return mask


def _topic_index(t, ctx: Context) -> int:
    names = list(ctx.topic_names)
    if isinstance(t, str):
        if t in names:
            return names.index(t)
        if t.lstrip("-").isdigit():  # a JSON-decoded index
            t = int(t)
        else:
            shown = names if len(names) <= 8 else names[:8] + ["..."]
            raise ValueError(f"unknown topic {t!r}; the topics are {shown}")
    if isinstance(t, (bool, np.bool_)) or not isinstance(t, (int, np.integer)):
        raise ValueError(f"a topic must be an index or a name, got {t!r}")
    if not 0 <= int(t) < ctx.n_topics:
        raise ValueError(f"topic index {int(t)} is outside [0, {ctx.n_topics})")
    return int(t)


def _row_mask(modalities, ctx: Context) -> np.ndarray:
    """Rows of Φ a Φ-regularizer acts on: the word rows (default) or the named modalities."""
    if modalities is None:
        return ctx.word_rows
    if isinstance(modalities, str):
        modalities = [modalities]
    mask = np.zeros(ctx.n_words, bool)
    for m in modalities:
        if m not in ctx.modality_names:
            raise ValueError(f"unknown modality {m!r}; the model has {list(ctx.modality_names)}")
        mask |= ctx.row_modality == ctx.modality_names.index(m)
    return mask


def _doc_lengths(ctx: Context, who: str) -> np.ndarray:
    if ctx.doc_lengths is None:
        raise ValueError(f"{who} needs the document lengths: bind it to a corpus (Context.build)")
    return np.asarray(ctx.doc_lengths, np.float64)


def _word_distribution(beta, ctx: Context, rows: np.ndarray, who: str) -> np.ndarray:
    """β over the rows of Φ: None -> 1 per word, 'uniform' -> 1/|W|, 'background' -> n_w / n,
    or a given array over the words (all rows of Φ, or only the word rows)."""
    W = ctx.n_words
    if beta is None:
        return rows.astype(np.float64)
    if isinstance(beta, str):
        if beta == "uniform":
            return rows / max(rows.sum(), 1)
        if beta == "background":
            if ctx.corpus is None:
                raise ValueError(f"{who}: beta='background' needs the corpus (n_w / n)")
            counts = np.zeros(W)
            wc = np.asarray(ctx.corpus.word_counts, np.float64)
            counts[np.flatnonzero(ctx.word_rows)[: wc.size]] = wc
            counts = counts * rows
            return counts / max(counts.sum(), 1e-300)
        raise ValueError(f"{who}: beta must be None, 'uniform', 'background' or an array, got {beta!r}")
    b = np.asarray(beta, np.float64)
    n_word_rows = int(ctx.word_rows.sum())
    if b.shape == (n_word_rows,) and n_word_rows != W:
        full = np.zeros(W)
        full[ctx.word_rows] = b
        b = full
    if b.shape != (W,):
        raise ValueError(f"{who}: beta has shape {b.shape}, expected ({W},)")
    if not np.all(np.isfinite(b)) or (b < 0).any():
        raise ValueError(f"{who}: beta must be finite and non-negative")
    return b * rows


def _topic_distribution(alpha, ctx: Context, who: str) -> np.ndarray:
    T = ctx.n_topics
    if alpha is None:
        return np.ones(T)
    if isinstance(alpha, str):
        if alpha == "uniform":
            return np.full(T, 1.0 / T)
        raise ValueError(f"{who}: alpha must be None, 'uniform' or an array, got {alpha!r}")
    a = np.asarray(alpha, np.float64)
    if a.shape != (T,):
        raise ValueError(f"{who}: alpha has shape {a.shape}, expected ({T},)")
    if not np.all(np.isfinite(a)) or (a < 0).any():
        raise ValueError(f"{who}: alpha must be finite and non-negative")
    return a


def _doc_index(d, n_docs: int, who: str) -> int:
    if isinstance(d, str) and d.lstrip("-").isdigit():
        d = int(d)
    if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)):
        raise ValueError(f"{who}: document {d!r} is not an index")
    if not 0 <= int(d) < n_docs:
        raise ValueError(f"{who}: document {int(d)} does not exist (the corpus has {n_docs} documents)")
    return int(d)


def _f32(x):
    return jnp.asarray(np.asarray(x), jnp.float32)


def _rate(rate, who):
    if rate is None:
        return None
    rate = float(rate)
    if not 0.0 < rate < 1.0:
        raise ValueError(f"{who}: rate must be in (0, 1), got {rate}")
    return rate


# ----------------------------------------------------------------------------- smoothing / sparsing
def _phi_log_fn(phi, theta, p):
    # sign Σ_wt β_wt m_t c_t ln φ_wt: smoothing (sign +1, eq. 23), sparsing (sign -1, eq. 25),
    # seed words (β_wt of eq. 27).  φ ∂R/∂φ = sign β_wt m_t c_t.
    return p["sign"] * jnp.sum((p["beta"] * (p["tmask"] * p["scale"])) * jnp.log(phi))


def _theta_log_fn(phi, theta, p):
    # sign Σ_td α_td m_t c_d ln θ_td (eq. 23, 25, 27).  θ ∂R/∂θ = sign α_td m_t c_d.
    return p["sign"] * jnp.sum((p["alpha"] * p["tmask"][:, None]) * p["scale"][None, :] * jnp.log(theta))


def _kth_smallest(logv, valid, k, n_steps):
    """Per column, log of the smallest value with at least ``k`` valid values at or below it,
    by bisection on log-values (``n_steps`` counting passes instead of a sort, which is slow on
    CPU; 40 halvings reach float32 resolution)."""
    big = jnp.asarray(jnp.finfo(logv.dtype).max, logv.dtype)
    lo = jnp.min(jnp.where(valid, logv, big), axis=0) - 1e-3
    hi = jnp.max(jnp.where(valid, logv, -big), axis=0)

    def body(_, lh):
        lo, hi = lh
        mid = 0.5 * (lo + hi)
        enough = jnp.sum(valid & (logv <= mid[None, :]), axis=0) >= k
        return jnp.where(enough, lo, mid), jnp.where(enough, mid, hi)

    return jax.lax.fori_loop(0, n_steps, body, (lo, hi))[1]


def _rate_threshold(vals, valid, rate, carry, n_steps: int = 40):
    """Per column, a threshold c with the ``k`` smallest of the ``n`` valid values below it,
    midway between the k-th and (k+1)-th smallest (half the smallest when k = 0).  ``k = floor(carry + rate n)``
    and the fraction left over is carried to the next iteration, so that over the iterations
    exactly ``rate`` of the non-zeros are targeted even in columns with few of them (6 non-zeros
    at 8%: one every other iteration, not one every iteration).  Returns ``(c, new carry)``."""
    v = jnp.where(valid, vals, 1.0)
    logv = jnp.log(jnp.maximum(v, EPS))
    n = valid.sum(0)
    want = carry + rate * n
    k = jnp.floor(want)
    ck = jnp.exp(_kth_smallest(logv, valid, jnp.maximum(k, 1.0), n_steps))
    ck1 = jnp.exp(_kth_smallest(logv, valid, jnp.minimum(k + 1, n), n_steps))
    c = jnp.where(k < n, 0.5 * (ck + ck1), ck)
    # k = 0: half the smallest value, so that entries already at zero stay there (the E-step of
    # a zero entry, clamped at em.EPS, is tiny but positive) and no genuine one is removed
    c = jnp.where(k >= 1, c, 0.5 * ck)
    return jnp.where(n > 0, c, 0.0).astype(vals.dtype), (want - k).astype(vals.dtype)


def _sparse_phi_rate_update(phi, theta, p, tau):
    # Rate control (ARTM sec. 5): c_t is the `rate` quantile of n_wt / β_w over the non-zeros of
    # the sparsed part of column t, with n_wt ≈ n_t φ_wt (n_t = Σ_d n_d θ_td); the next M-step
    # (n_wt - τ c_t β_w)_+ with τ = 1 then zeroes about that share of them.
    n_t = theta @ p["doc_lengths"]
    b = p["beta"]
    sel = (phi > 0) & (b > 0) & (p["tmask"] > 0)[None, :]
    vals = n_t[None, :] * phi / jnp.where(b > 0, b, 1.0)
    c, carry = _rate_threshold(vals, sel, p["rate"], p["carry"])
    return {**p, "scale": c, "carry": carry}


def _sparse_theta_rate_update(phi, theta, p, tau):
    # c_d: the `rate` quantile of n_td / α_t ≈ n_d θ_td / α_t over the non-zeros of θ_d.
    a = p["alpha"]
    sel = (theta > 0) & (a > 0) & (p["tmask"] > 0)[:, None]
    vals = theta * p["doc_lengths"][None, :] / jnp.where(a > 0, a, 1.0)
    c, carry = _rate_threshold(vals, sel, p["rate"], p["carry"])
    return {**p, "scale": c, "carry": carry}


def _phi_log_regularizer(factory, sign, beta, topics, modalities, rate, name, spec):
    rate = _rate(rate, name)

    def binder(ctx: Context):
        rows = _row_mask(modalities, ctx)
        b = _word_distribution(beta, ctx, rows, name)
        p = {
            "sign": jnp.float32(sign),
            "beta": _f32(b[:, None]),
            "tmask": _f32(_topic_mask(topics, ctx)),
            "scale": jnp.ones(ctx.n_topics, jnp.float32),
        }
        if rate is not None:
            p["rate"] = jnp.float32(rate)
            p["doc_lengths"] = _f32(_doc_lengths(ctx, name))
            p["carry"] = jnp.zeros(ctx.n_topics, jnp.float32)
        return p

    return Regularizer(
        _phi_log_fn, name=name, binder=binder, nonnegative=True, uses_theta=False,
        update=_sparse_phi_rate_update if rate is not None else None, spec=spec,
    )


@register()
def smooth_phi(beta=None, topics=None, modalities=None) -> Regularizer:
    """Smoothing of Φ (eq. 23): ``R = Σ_{t∈topics} Σ_w β_w ln φ_wt``; M-step ``φ_wt ∝ n_wt + τ β_w``
    (eq. 24).  With the default β_w = 1 and τ = β this is LDA's M-step (eq. 10) for Φ.

    ``beta``: ``None`` (1 per word), ``"uniform"`` (1/|W|), ``"background"`` (n_w / n, the
    collection's word frequencies) or an array over the words.  ``topics``: see module docstring.
    ``modalities``: names of the modalities whose rows are smoothed (default: all word rows).
    """
    return _phi_log_regularizer("smooth_phi", 1.0, beta, topics, modalities, None, "smooth_phi",
                                _spec("smooth_phi", beta=beta, topics=topics, modalities=modalities))


@register()
def sparse_phi(beta=None, topics=None, modalities=None, rate=None) -> Regularizer:
    """Sparsing of Φ (eq. 25): ``R = -Σ_{t∈topics} c_t Σ_w β_w ln φ_wt``; M-step
    ``φ_wt ∝ (n_wt - τ c_t β_w)_+`` (eq. 26).

    ``beta`` as in :func:`smooth_phi` (the paper uses ``"uniform"`` or ``"background"``).
    Without ``rate``, c_t = 1.  With ``rate`` (e.g. 0.1), c_t is re-estimated after every pass
    as the ``rate`` quantile of n_wt / β_w over the non-zeros of column t, so that τ = 1 zeroes
    about that share of each φ_t per iteration: the paper's trajectory (sec. 5).
    """
    return _phi_log_regularizer("sparse_phi", -1.0, beta, topics, modalities, rate, "sparse_phi",
                                _spec("sparse_phi", beta=beta, topics=topics, modalities=modalities, rate=rate))


def _theta_log_regularizer(sign, alpha, topics, docs, rate, name, spec):
    rate = _rate(rate, name)

    def binder(ctx: Context):
        a = _topic_distribution(alpha, ctx, name)[:, None]
        if docs is not None:
            dm = np.zeros(ctx.n_docs)
            for d in np.atleast_1d(np.asarray(docs, dtype=object)):
                dm[_doc_index(d, ctx.n_docs, name)] = 1.0
            a = a * dm[None, :]
        p = {
            "sign": jnp.float32(sign),
            "alpha": _f32(a),
            "tmask": _f32(_topic_mask(topics, ctx)),
            "scale": jnp.ones(ctx.n_docs, jnp.float32),
        }
        if rate is not None:
            p["rate"] = jnp.float32(rate)
            p["doc_lengths"] = _f32(_doc_lengths(ctx, name))
            p["carry"] = jnp.zeros(ctx.n_docs, jnp.float32)
        return p

    return Regularizer(
        _theta_log_fn, name=name, binder=binder, nonnegative=True, uses_phi=False,
        update=_sparse_theta_rate_update if rate is not None else None, update_in_transform=True,
        per_document=docs is not None, spec=spec,
    )


@register()
def smooth_theta(alpha=None, topics=None, docs=None) -> Regularizer:
    """Smoothing of Θ (eq. 23): ``R = Σ_d Σ_{t∈topics} α_t ln θ_td``; ``θ_td ∝ n_td + τ α_t``
    (eq. 24; LDA's α when α_t = 1 and τ = α).  ``docs``: restrict to these training documents."""
    return _theta_log_regularizer(1.0, alpha, topics, docs, None, "smooth_theta",
                                  _spec("smooth_theta", alpha=alpha, topics=topics, docs=docs))


@register()
def sparse_theta(alpha=None, topics=None, docs=None, rate=None) -> Regularizer:
    """Sparsing of Θ (eq. 25): ``R = -Σ_d c_d Σ_{t∈topics} α_t ln θ_td``;
    ``θ_td ∝ (n_td - τ c_d α_t)_+`` (eq. 26).  With ``rate`` (e.g. 0.08), c_d is re-estimated
    after every pass so that τ = 1 zeroes about that share of the non-zeros of each θ_d
    (sec. 5); the rate control also runs when inferring Θ of new documents."""
    return _theta_log_regularizer(-1.0, alpha, topics, docs, rate, "sparse_theta",
                                  _spec("sparse_theta", alpha=alpha, topics=topics, docs=docs, rate=rate))


# ----------------------------------------------------------------------------- semi-supervised (27-29)
def _word_index(w, ctx: Context, who: str) -> int:
    vocab = ctx.vocab
    if isinstance(w, (int, np.integer)) and not isinstance(w, bool):
        if not 0 <= int(w) < ctx.n_words:
            raise ValueError(f"{who}: word index {int(w)} is outside [0, {ctx.n_words})")
        return int(w)
    index = getattr(ctx, "_vocab_index", None)
    if index is None:
        index = {v: i for i, v in enumerate(vocab)}
        object.__setattr__(ctx, "_vocab_index", index)
    if w not in index:
        raise ValueError(f"{who}: word {w!r} is not in the vocabulary")
    return index[w]


@register()
def seed_words(words: Mapping) -> Regularizer:
    """Seed words of topics (eq. 27-28): ``words = {topic: [word, ...]}`` (names or indices);
    ``R = Σ_{t∈T_0} Σ_{w∈W_t} ln φ_wt / |W_t|``, M-step ``φ_wt ∝ n_wt + τ [w∈W_t] / |W_t|``."""
    words = dict(words)

    def binder(ctx: Context):
        b = np.zeros((ctx.n_words, ctx.n_topics))
        for t, ws in words.items():
            ti = _topic_index(t, ctx)
            ws = [ws] if isinstance(ws, (str, int, np.integer)) else list(ws)
            if not ws:
                raise ValueError(f"seed_words: topic {t!r} has no words")
            for w in ws:
                b[_word_index(w, ctx, "seed_words"), ti] = 1.0 / len(set(ws))
        return {"sign": jnp.float32(1.0), "beta": _f32(b), "tmask": jnp.ones(ctx.n_topics, jnp.float32),
                "scale": jnp.ones(ctx.n_topics, jnp.float32)}

    return Regularizer(_phi_log_fn, name="seed_words", binder=binder, nonnegative=True, uses_theta=False,
                       spec=_spec("seed_words", words=words))


@register()
def labelled_documents(doc_topics) -> Regularizer:
    """Documents labelled with topics (eq. 27, 29): ``doc_topics = {doc: [topic, ...]}`` or a
    boolean (D x T) matrix; ``R = Σ_{d∈D_0} Σ_{t∈T_d} ln θ_td / |T_d|``, M-step
    ``θ_td ∝ n_td + τ [t∈T_d] / |T_d|``.  A document id outside the corpus is an error."""
    if not isinstance(doc_topics, Mapping):
        arr = np.asarray(doc_topics)
        if arr.ndim != 2:
            raise ValueError("labelled_documents: doc_topics must be a mapping {doc: topics} or a (D, T) matrix")
        doc_topics_m = {int(d): [int(t) for t in np.flatnonzero(arr[d])] for d in range(arr.shape[0]) if arr[d].any()}
        shape = arr.shape
    else:
        doc_topics_m = dict(doc_topics)
        shape = None

    def binder(ctx: Context):
        if shape is not None and shape != (ctx.n_docs, ctx.n_topics):
            raise ValueError(f"doc_topics matrix has shape {shape}, expected ({ctx.n_docs}, {ctx.n_topics})")
        a = np.zeros((ctx.n_topics, ctx.n_docs))
        for d, ts in doc_topics_m.items():
            di = _doc_index(d, ctx.n_docs, "labelled_documents")
            ts = [ts] if isinstance(ts, (str, int, np.integer)) else list(ts)
            idx = sorted({_topic_index(t, ctx) for t in ts})
            if not idx:
                raise ValueError(f"document {di} has an empty topic list")
            a[idx, di] = 1.0 / len(idx)
        return {"sign": jnp.float32(1.0), "alpha": _f32(a), "tmask": jnp.ones(ctx.n_topics, jnp.float32),
                "scale": jnp.ones(ctx.n_docs, jnp.float32)}

    return Regularizer(_theta_log_fn, name="labelled_documents", binder=binder, nonnegative=True,
                       uses_phi=False, per_document=True, spec=_spec("labelled_documents", doc_topics=doc_topics_m))


def _semi_fn(phi, theta, p):
    return p["beta0"] * _phi_log_fn(phi, theta, p["phi"]) + p["alpha0"] * _theta_log_fn(phi, theta, p["theta"])


@register()
def semi_supervised(doc_topics=None, words=None, alpha0: float = 1.0, beta0: float = 1.0) -> Regularizer:
    """Eq. 27 in one regularizer: ``β_0 R_seed_words + α_0 R_labelled_documents`` (M-step 28-29)."""
    if doc_topics is None and words is None:
        raise ValueError("semi_supervised needs doc_topics, words or both")
    parts = {
        "phi": seed_words(words) if words is not None else None,
        "theta": labelled_documents(doc_topics) if doc_topics is not None else None,
    }
    spec_docs = parts["theta"].spec["kwargs"]["doc_topics"] if parts["theta"] is not None else None

    def binder(ctx: Context):
        T, D, W = ctx.n_topics, ctx.n_docs, ctx.n_words
        zphi = {"sign": jnp.float32(0), "beta": jnp.zeros((W, 1), jnp.float32), "tmask": jnp.ones(T, jnp.float32),
                "scale": jnp.ones(T, jnp.float32)}
        zth = {"sign": jnp.float32(0), "alpha": jnp.zeros((T, 1), jnp.float32), "tmask": jnp.ones(T, jnp.float32),
               "scale": jnp.ones(D, jnp.float32)}
        return {
            "phi": parts["phi"].binder(ctx) if parts["phi"] is not None else zphi,
            "theta": parts["theta"].binder(ctx) if parts["theta"] is not None else zth,
            "alpha0": jnp.float32(alpha0), "beta0": jnp.float32(beta0),
        }

    return Regularizer(_semi_fn, name="semi_supervised", binder=binder, nonnegative=True,
                       per_document=doc_topics is not None,
                       spec=_spec("semi_supervised", doc_topics=spec_docs, words=words, alpha0=alpha0, beta0=beta0))


# ----------------------------------------------------------------------------- decorrelation (30-31)
def _decorrelate_fn(phi, theta, p):
    # -½ Σ_t Σ_{s≠t} Σ_w φ_wt φ_ws over the chosen topics/rows: φ ∂R/∂φ = -φ_wt Σ_{s≠t} φ_ws.
    q = phi * p["tmask"][None, :] * p["rows"][:, None]
    s = q.sum(1)
    return -0.5 * (jnp.sum(s * s) - jnp.sum(q * q))


@register()
def decorrelate(topics=None, modalities=None) -> Regularizer:
    """Decorrelation of topics (eq. 30): ``R = -½ Σ_t Σ_{s≠t} Σ_w φ_wt φ_ws``; M-step
    ``φ_wt ∝ (n_wt - τ φ_wt Σ_{s≠t} φ_ws)_+`` (eq. 31; eq. 54 with ``topics="specific"``).
    The ½ makes τ the γ of eq. 31 (BigARTM's convention)."""

    def binder(ctx: Context):
        return {"tmask": _f32(_topic_mask(topics, ctx)), "rows": _f32(_row_mask(modalities, ctx))}

    return Regularizer(_decorrelate_fn, name="decorrelate", binder=binder, nonnegative=True, uses_theta=False,
                       spec=_spec("decorrelate", topics=topics, modalities=modalities))


#: Alias of :func:`decorrelate`.
decorrelate_phi = decorrelate
REGISTRY["decorrelate_phi"] = decorrelate


# ----------------------------------------------------------------------------- document links (32-33)
def _links_fn(phi, theta, p):
    # ½ Σ_{d,c} n_dc Σ_t θ_td θ_tc over a symmetric edge list: θ ∂R/∂θ_td = θ_td Σ_c n_dc θ_tc.
    return 0.5 * jnp.sum(p["w"] * jnp.sum(theta[:, p["src"]] * theta[:, p["dst"]], axis=0))


@register()
def document_links(links) -> Regularizer:
    """Covariance of linked documents (eq. 32): ``R = Σ_{d,c} n_dc Σ_t θ_td θ_tc`` over links
    (each undirected link counted once); M-step ``θ_td ∝ n_td + τ θ_td Σ_c n_dc θ_tc`` (eq. 33).

    ``links``: a list of ``(d, c)`` or ``(d, c, weight)`` pairs (undirected), or a (D x D) matrix
    of weights n_dc (dense or scipy.sparse; symmetrised as (N + Nᵀ)/2).  A document id outside the
    corpus is an error.
    """
    import scipy.sparse as sp

    if sp.issparse(links) or (isinstance(links, np.ndarray) and links.ndim == 2 and links.shape[0] == links.shape[1]
                              and links.shape[1] != 2 and links.shape[1] != 3):
        m = sp.coo_matrix(links)
        m = sp.coo_matrix((m + m.T) / 2.0)
        src, dst, w = m.row.astype(np.int64), m.col.astype(np.int64), m.data.astype(np.float64)
        n_matrix = m.shape[0]
        pairs = None
    else:
        pairs = []
        for i, e in enumerate(list(links)):
            e = list(e)
            if len(e) not in (2, 3):
                raise ValueError(f"document_links: link {i} is {e!r}, expected (d, c) or (d, c, weight)")
            pairs.append((e[0], e[1], float(e[2]) if len(e) == 3 else 1.0))
        n_matrix = None

    def binder(ctx: Context):
        if pairs is None:
            if n_matrix != ctx.n_docs:
                raise ValueError(f"link matrix is {n_matrix} x {n_matrix} for {ctx.n_docs} documents")
            s, d, ww = src, dst, w
        else:
            s_l, d_l, w_l = [], [], []
            for i, (a, b, wt) in enumerate(pairs):
                a = _doc_index(a, ctx.n_docs, f"document_links (link {i})")
                b = _doc_index(b, ctx.n_docs, f"document_links (link {i})")
                if not np.isfinite(wt):
                    raise ValueError(f"link {i}: weight {wt} is not finite")
                # both directions, so that ½ Σ over the edge list counts the link once
                s_l += [a, b]
                d_l += [b, a]
                w_l += [wt, wt]
            s, d, ww = np.asarray(s_l, np.int64), np.asarray(d_l, np.int64), np.asarray(w_l)
        return {"src": jnp.asarray(s, jnp.int32), "dst": jnp.asarray(d, jnp.int32), "w": _f32(ww)}

    if pairs is not None:
        spec_links = [list(e) for e in pairs]
    else:  # the symmetric matrix as pairs: R = Σ_{d<c} n_dc θ_d·θ_c + Σ_d ½ n_dd θ_d·θ_d
        spec_links = [[int(a), int(b), float(c) if a != b else float(c) / 2] for a, b, c in zip(src, dst, w) if a <= b]
    return Regularizer(_links_fn, name="document_links", binder=binder, nonnegative=True, uses_phi=False,
                       per_document=True, spec=_spec("document_links", links=spec_links))


# ----------------------------------------------------------------------------- correlated topics (36-39)
def _ctm_fn(phi, theta, p):
    # -½ Σ_d (η_d - μ)ᵀ Σ⁻¹ (η_d - μ), η_d = ln θ_d (eq. 35-36); θ ∂R/∂θ_td = -Σ_s Σ̃_ts (ln θ_sd - μ_s).
    dev = jnp.log(theta) - p["mu"][:, None]
    return -0.5 * jnp.sum(dev * (p["prec"] @ dev))


def _ctm_update(phi, theta, p, tau=None):
    # Block-coordinate step after each pass (eq. 38-39), inverse with a small ridge, and
    # insignificant entries of Σ⁻¹ set to zero (sec. 4: sparse precision matrix).
    eta = jnp.log(jnp.maximum(theta, EPS))
    mu = eta.mean(1)
    dev = eta - mu[:, None]
    sigma = dev @ dev.T / theta.shape[1]
    T = sigma.shape[0]
    ridge = p["ridge"] * (jnp.trace(sigma) / T + 1e-12)
    prec = jnp.linalg.inv(sigma + ridge * jnp.eye(T, dtype=sigma.dtype))
    big = jnp.abs(prec) >= p["threshold"] * jnp.max(jnp.abs(jnp.diag(prec)))
    prec = jnp.where(big | jnp.eye(T, dtype=bool), prec, 0.0)
    return {**p, "mu": mu, "prec": prec, "sigma": sigma}


@register()
def correlated_topics(mu=None, sigma=None, estimate: bool = True, threshold: float = 0.0,
                      ridge: float = 1e-3) -> Regularizer:
    """The correlated topic model as a regularizer (eq. 34-37): the log-likelihood of the
    logistic-normal model of η_d = ln θ_d, ``R = -½ Σ_d (η_d - μ)ᵀ Σ⁻¹ (η_d - μ)``; M-step
    ``θ_td ∝ (n_td - τ Σ_s Σ̃_ts (ln θ_sd - μ_s))_+`` (eq. 37).

    With ``estimate`` (default) μ and Σ are re-estimated after every pass (eq. 38-39), Σ is
    inverted with a ridge ``ridge * trace(Σ)/T`` and entries of Σ⁻¹ below ``threshold`` times
    its largest diagonal entry are set to zero.  Until the first pass, without given ``mu`` and
    ``sigma``, the regularizer is inactive (μ = 0, Σ⁻¹ = 0).  Learned μ, Σ⁻¹ are kept for
    ``transform`` and saved with the model.
    """

    def binder(ctx: Context):
        T = ctx.n_topics
        m = np.zeros(T) if mu is None else np.asarray(mu, np.float64)
        if sigma is None:
            prec = np.zeros((T, T))
            sig = np.zeros((T, T))
        else:
            sig = np.asarray(sigma, np.float64)
            if sig.shape != (T, T):
                raise ValueError(f"sigma has shape {sig.shape}, expected ({T}, {T})")
            prec = np.linalg.inv(sig)
        if m.shape != (T,):
            raise ValueError(f"mu has shape {m.shape}, expected ({T},)")
        return {"mu": _f32(m), "prec": _f32(prec), "sigma": _f32(sig),
                "ridge": jnp.float32(ridge), "threshold": jnp.float32(threshold)}

    return Regularizer(_ctm_fn, name="correlated_topics", binder=binder, nonnegative=True, uses_phi=False,
                       update=_ctm_update if estimate else None, learned=("mu", "prec", "sigma"),
                       spec=_spec("correlated_topics", mu=mu, sigma=sigma, estimate=estimate,
                                  threshold=threshold, ridge=ridge))


# ----------------------------------------------------------------------------- coherence (40-43)
def _coherence_kl_fn(phi, theta, p):
    # τ Σ_t n_t Σ_w p̂(w|t) ln φ_wt with p̂(w|t) = Σ_{v≠w} C_wv φ_vt (eq. 40-41) and n_t = Σ_d n_d θ_td,
    # both held constant in the M-step as in the paper: φ ∂R/∂φ_wt = Σ_{v≠w} C_wv n_t φ_vt (eq. 42,
    # with n_vt = n_t φ_vt, eq. 40's own identity).
    sub = phi[p["idx"]]
    n_t = jax.lax.stop_gradient(theta @ p["doc_lengths"])
    phat = jax.lax.stop_gradient(p["C"] @ sub)
    return jnp.sum((p["tmask"] * n_t)[None, :] * phat * jnp.log(sub))


def _coherence_newman_fn(phi, theta, p):
    # Σ_t ln Σ_uv C_uv φ_ut φ_vt (eq. 43): φ ∂R/∂φ_wt = 2 φ_wt (C φ_t)_w / (φ_tᵀ C φ_t).
    sub = phi[p["idx"]]
    q = jnp.sum(sub * (p["C"] @ sub), axis=0)
    return jnp.sum(p["tmask"] * jnp.log(q + EPS))


@register()
def coherence(form: str = "kl", cooc=None, words=None, max_words: int | None = 2000, topics=None) -> Regularizer:
    """Coherence regularizers on document co-occurrence of words.

    * ``form="kl"`` (eq. 40-42): ``R = Σ_t n_t Σ_w p̂(w|t) ln φ_wt`` with
      p̂(w|t) = Σ_{v≠w} C_wv φ_vt, C_wv = p̂(w|v) = N_wv / N_v (documents holding both words over
      documents holding v); M-step ``φ_wt ∝ n_wt + τ Σ_{v≠w} C_wv n_vt``.
    * ``form="newman"`` (eq. 43, Newman et al. 2011): ``R = Σ_t ln Σ_uv C_uv φ_ut φ_vt`` with
      C_uv = N_uv where PMI(u, v) = ln(|D| N_uv / (N_u N_v)) > 0, else 0 (u = v included, as
      written in the paper).

    Bag-of-words corpora have no word order, so the paper's ten-word window becomes the whole
    document.  ``cooc``: a (K x K) matrix over ``words`` (indices) to use instead; otherwise it is
    computed from the training corpus over ``words`` or the ``max_words`` most frequent words
    (a dense K x K matrix; ``None`` = every word).  ``topics`` restricts the regularizer.
    """
    if form not in ("kl", "newman"):
        raise ValueError(f"coherence: form must be 'kl' or 'newman', got {form!r}")

    def binder(ctx: Context):
        word_rows = np.flatnonzero(ctx.word_rows)
        if words is not None:
            idx = np.asarray([_word_index(w, ctx, "coherence") for w in words], np.int64)
        elif cooc is not None:
            idx = word_rows[: np.asarray(cooc).shape[0]]
        else:
            if ctx.corpus is None:
                raise ValueError("coherence needs the corpus (or cooc=) to count co-occurrences")
            wc = np.asarray(ctx.corpus.word_counts)
            k = wc.size if max_words is None else min(int(max_words), wc.size)
            idx = np.sort(np.argsort(-wc, kind="stable")[:k])
        if cooc is not None:
            C = np.asarray(cooc, np.float64)
            if C.shape != (idx.size, idx.size):
                raise ValueError(f"cooc has shape {C.shape}, expected ({idx.size}, {idx.size})")
        else:
            if ctx.corpus is None:
                raise ValueError("coherence needs the corpus (or cooc=) to count co-occurrences")
            import scipy.sparse as sp

            c = ctx.corpus
            B = sp.csc_matrix((np.ones(c.nnz), (c.doc_ids, c.word_ids)), shape=(c.n_docs, c.n_words))[:, idx]
            N = np.asarray((B.T @ B).todense())
            Nw = np.diag(N).copy()
            if form == "kl":
                C = np.divide(N, Nw[None, :], out=np.zeros_like(N), where=Nw[None, :] > 0)
            else:
                with np.errstate(divide="ignore", invalid="ignore"):
                    pmi = np.log(c.n_docs * N / np.outer(Nw, Nw))
                C = np.where(np.isfinite(pmi) & (pmi > 0), N, 0.0)
        if form == "kl":
            C = C.copy()
            np.fill_diagonal(C, 0.0)  # v ≠ w in eq. 40
        tm = _topic_mask(topics, ctx)
        p = {"idx": jnp.asarray(idx, jnp.int32), "C": _f32(C)}
        if form == "kl":
            p["doc_lengths"] = _f32(_doc_lengths(ctx, "coherence"))
        p["tmask"] = _f32(tm)
        return p

    return Regularizer(_coherence_kl_fn if form == "kl" else _coherence_newman_fn, name=f"coherence_{form}",
                       binder=binder, nonnegative=True, uses_theta=False,
                       spec=_spec("coherence", form=form, cooc=cooc, words=words, max_words=max_words, topics=topics))


# ----------------------------------------------------------------------------- topic selection
def _topic_selection_fn(phi, theta, p):
    # -(n/|T_sel|) Σ_t m_t ln p(t), p(t) = Σ_d n_d θ_td / n:
    # θ ∂R/∂θ_td = -m_t (n/|T_sel|) n_d θ_td / n_t.
    n_t = theta @ p["doc_lengths"]
    return -p["scale"] * jnp.sum(p["tmask"] * jnp.log(n_t / p["n"]))


@register()
def topic_selection(topics=None) -> Regularizer:
    """Topic selection (Note 1; BigARTM's ``TopicSelectionTheta``): sparsing of the topic
    distribution p(t) = Σ_d n_d θ_td / n, ``R = -(n / |T|) Σ_t ln p(t)``; M-step
    ``θ_td ∝ (n_td - τ (n/|T|) n_d θ_td / n_t)_+``.  Near a fixed point n_td ≈ n_d θ_td, so a
    topic smaller than τ times the average topic size n/|T| loses every document, becomes
    over-regularized (Note 1) and is removed: fitting more topics than needed with this
    regularizer chooses their number (τ ≈ 0.3-0.8)."""

    def binder(ctx: Context):
        n_d = _doc_lengths(ctx, "topic_selection")
        tm = _topic_mask(topics, ctx)
        return {"doc_lengths": _f32(n_d), "n": jnp.float32(n_d.sum()), "tmask": _f32(tm),
                "scale": jnp.float32(n_d.sum() / tm.sum())}

    return Regularizer(_topic_selection_fn, name="topic_selection", binder=binder, nonnegative=True, uses_phi=False,
                       per_document=True, spec=_spec("topic_selection", topics=topics))


# ----------------------------------------------------------------------------- label regularization (51-52)
def _label_reg_fn(phi, theta, p):
    # Σ_c p̂_c ln Σ_t ψ_ct p(t), p(t) = n_t / n held constant: ψ ∂R/∂ψ_ct = p̂_c ψ_ct n_t / Σ_s ψ_cs n_s.
    pt = jax.lax.stop_gradient(theta @ p["doc_lengths"])
    pt = pt / pt.sum()
    psi = phi[p["rows"]]
    return jnp.sum(p["freq"] * jnp.log(psi @ pt))


@register()
def label_regularization() -> Regularizer:
    """Label regularization (eq. 51): ``R = Σ_c p̂_c ln p(c)``, p(c) = Σ_t ψ_ct p(t), p(t) = n_t/n,
    with p̂_c the class frequencies of the labelled training documents; M-step
    ``ψ_ct ∝ m_ct + τ p̂_c ψ_ct n_t / Σ_s ψ_cs n_s`` (eq. 52: τ is the ξ of the paper).
    Needs a model with classes (``ARTM(label_weight=...)`` fitted with labels)."""

    def binder(ctx: Context):
        rows = ctx.class_rows
        if rows.size == 0 or ctx.class_freq is None:
            raise ValueError("label_regularization needs a model with classes: fit ARTM(label_weight=...) with labels")
        return {"rows": jnp.asarray(rows, jnp.int32), "freq": _f32(ctx.class_freq),
                "doc_lengths": _f32(_doc_lengths(ctx, "label_regularization"))}

    return Regularizer(_label_reg_fn, name="label_regularization", binder=binder, nonnegative=True,
                       uses_theta=False, spec=_spec("label_regularization"))
