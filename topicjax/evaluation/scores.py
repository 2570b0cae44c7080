"""Per-iteration scores of ARTM models and their convergence charts (ARTM sec. 5, Figs. 4-6).

A *score* is an object (or function) ``score(ctx: ScoreContext) -> dict[str, float]`` evaluated
on the host after an EM iteration; :class:`~topicjax.artm.ARTM` records what its ``scores``
return in ``scores_`` (one dict per iteration, every ``score_every`` iterations and after the
last one).  Two kinds are cheaper and recorded at every iteration without stopping the compiled
loop: a score with a ``from_record(record, n_tokens) -> dict`` method is computed on the host from
the per-iteration record (perplexity from the recorded log-likelihood), and a score with a
``device`` attribute -- a module-level function ``f(phi, theta, specific_mask) -> dict`` of
``jax.numpy`` scalars -- is computed on the device inside the compiled block of iterations
(sparsity).  They use the measures of :mod:`topicjax.evaluation.metrics`, averaged over the *specific*
(non-background) topics that are still in the model, as in the paper:

==========================  ===================================================================
name (string shortcut)      keys recorded
==========================  ===================================================================
``"perplexity"``            ``perplexity``: exp(-L/n) (eq. 56) of the parameters at the start of
                            the iteration, a free by-product of the E-step (for a model with
                            modalities or classes, of the weighted likelihood)
:class:`HeldoutPerplexity`  ``heldout_perplexity``: document completion on a test corpus (sec. 5)
``"sparsity"``              ``sparsity_phi``, ``sparsity_theta``: share of zeros over specific topics
``"background_ratio"``      ``background_ratio`` (eq. 57)
``"kernel"``                ``kernel_size``, ``kernel_purity``, ``kernel_contrast`` (δ = 0.25)
``"coherence"``             ``coherence_10``: mean PMI of the top-10 words (eq. 58)
``"coherence_100"``         ``coherence_100``
``"kernel_coherence"``      ``coherence_kernel``: PMI over each topic's kernel
==========================  ===================================================================

Coherence uses document co-occurrence in the training corpus, or in ``reference`` when given
(:class:`Coherence`).  :func:`plot_scores` draws a history as the paper's three charts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from topicjax.core.validation import check_int
from topicjax.evaluation import metrics
from topicjax.regularizers._fresh import fresh

__all__ = [
    "ScoreContext",
    "Perplexity",
    "HeldoutPerplexity",
    "Sparsity",
    "sparsity_device",
    "BackgroundRatio",
    "Kernel",
    "Coherence",
    "resolve_scores",
    "plot_scores",
    "SCORES",
]


@dataclass
class ScoreContext:
    """What a score sees after an iteration.

    ``phi`` (W x T, words of every modality, no class rows) and ``theta`` (T x D) are numpy
    arrays; ``specific`` are the indices of the specific topics still in the model (removed,
    over-regularized topics are left out); ``topic_weights`` are n_t = Σ_d n_d θ_td.
    """

    phi: np.ndarray
    theta: np.ndarray
    corpus: Any
    background: np.ndarray
    specific: np.ndarray
    topic_weights: np.ndarray
    loglik: float
    n_tokens: float
    iteration: int
    model: Any = None


def _mean(x) -> float:
    x = np.asarray(x, np.float64)
    x = x[np.isfinite(x)]
    return float(x.mean()) if x.size else float("nan")


class Perplexity:
    """``perplexity`` = exp(-L / n) (eq. 56) from the in-step likelihood (no extra pass)."""

    name = "perplexity"

    @staticmethod
    def from_record(record: dict, n_tokens: float) -> dict:
        return {"perplexity": float(np.exp(-record["objective"] / n_tokens))}

    def __call__(self, ctx: ScoreContext) -> dict:
        return {"perplexity": float(np.exp(-ctx.loglik / ctx.n_tokens))}


class HeldoutPerplexity:
    """``heldout_perplexity`` by document completion (sec. 5): Θ of the test documents is fitted
    on ``observed`` with Φ fixed (``n_iter`` EM iterations) and ``heldout`` is scored.  Build the
    two parts with ``test.with_vocab(train.vocab).completion_split()``."""

    name = "heldout_perplexity"

    def __init__(self, observed, heldout, n_iter: int = 20):
        self.observed, self.heldout, self.n_iter = observed, heldout, n_iter

    def __call__(self, ctx: ScoreContext) -> dict:
        phi = ctx.phi.astype(np.float32)
        return {"heldout_perplexity": metrics.heldout_perplexity(phi, self.observed, self.heldout, n_iter=self.n_iter)}


def sparsity_device(phi, theta, specific) -> dict:
    """:class:`Sparsity` on the device: shares of exact zeros of Φ's and Θ's specific topics."""
    import jax.numpy as jnp

    m = specific.astype(phi.dtype)
    n = jnp.maximum(m.sum(), 1)
    s_phi = jnp.sum((phi == 0) * m[None, :]) / (phi.shape[0] * n)
    s_theta = jnp.sum((theta == 0) * m[:, None]) / (theta.shape[1] * n)
    nan = jnp.asarray(jnp.nan, phi.dtype)
    return {"sparsity_phi": jnp.where(m.sum() > 0, s_phi, nan), "sparsity_theta": jnp.where(m.sum() > 0, s_theta, nan)}


class Sparsity:
    """``sparsity_phi`` and ``sparsity_theta``: share of exact zeros over the specific topics."""

    name = "sparsity"
    device = staticmethod(sparsity_device)

    def __call__(self, ctx: ScoreContext) -> dict:
        if ctx.specific.size == 0:
            return {"sparsity_phi": float("nan"), "sparsity_theta": float("nan")}
        return {
            "sparsity_phi": metrics.sparsity(ctx.phi, columns=ctx.specific, axis=1),
            "sparsity_theta": metrics.sparsity(ctx.theta, columns=ctx.specific, axis=0),
        }


class BackgroundRatio:
    """``background_ratio`` (eq. 57); 0 for a model without background topics."""

    name = "background_ratio"

    def __call__(self, ctx: ScoreContext) -> dict:
        if ctx.background.size == 0:
            return {"background_ratio": 0.0}
        return {"background_ratio": metrics.background_ratio(ctx.phi, ctx.theta, ctx.corpus, ctx.background)}


class Kernel:
    """``kernel_size``, ``kernel_purity``, ``kernel_contrast`` averaged over specific topics
    (kernel W_t = {w : p(t|w) > δ}, p(t) ∝ n_t)."""

    name = "kernel"

    def __init__(self, delta: float = 0.25):
        self.delta = delta

    def __call__(self, ctx: ScoreContext) -> dict:
        k = metrics.kernel_scores(ctx.phi, ctx.topic_weights, delta=self.delta)
        s = ctx.specific
        return {
            "kernel_size": _mean(k["size"][s]),
            "kernel_purity": _mean(k["purity"][s]),
            "kernel_contrast": _mean(k["contrast"][s]),
        }


class Coherence:
    """Mean coherence of the specific topics: top-``k`` words (``k=10`` -> ``coherence_10``) or,
    with ``kernel=True``, each kernel (``coherence_kernel``).  ``reference`` is the corpus of
    co-occurrence counts (default: the training corpus)."""

    def __init__(self, k: int | None = 10, *, kernel: bool = False, measure: str = "pmi", reference=None,
                 delta: float = 0.25, name: str | None = None):
        if kernel:  # checked here, not at the first iteration of a fit: None is the whole kernel
            k = None if k is None else check_int(k, "k", 1)
        else:
            k = check_int(k, "k", 2)
        self.k, self.kernel, self.measure, self.reference, self.delta = k, kernel, measure, reference, delta
        self.name = name or ("coherence_kernel" if kernel else f"coherence_{k}")

    def __call__(self, ctx: ScoreContext) -> dict:
        ref = self.reference if self.reference is not None else ctx.corpus
        if ctx.specific.size == 0:
            return {self.name: float("nan")}
        c = metrics.coherence(ctx.phi, ref, k=None if self.kernel else self.k, measure=self.measure,
                              topics=ctx.specific, kernel=self.kernel, delta=self.delta,
                              topic_weights=ctx.topic_weights)
        return {self.name: _mean(c)}


#: String shortcuts accepted by ``ARTM(scores=...)``.
SCORES: dict[str, Callable[[], Callable]] = {
    "perplexity": Perplexity,
    "sparsity": Sparsity,
    "background_ratio": BackgroundRatio,
    "kernel": Kernel,
    "coherence": lambda: Coherence(10),
    "coherence_10": lambda: Coherence(10),
    "coherence_100": lambda: Coherence(100),
    "kernel_coherence": lambda: Coherence(None, kernel=True),
}


def resolve_scores(scores) -> list:
    """Score objects from a sequence of names and/or callables (a clear error for unknown names)."""
    if scores is None:
        return []
    if isinstance(scores, str) or callable(scores):
        scores = [scores]
    out = []
    for s in scores:
        if isinstance(s, str):
            if s not in SCORES:
                raise ValueError(f"unknown score {s!r}; known: {sorted(SCORES)} (or pass a callable)")
            out.append(SCORES[s]())
        elif callable(s):
            out.append(_fresh_device(s))
        else:
            raise TypeError(f"a score must be a name or a callable score(ctx) -> dict, got {s!r}")
    return out


def _fresh_device(score):
    """``score`` itself, or, when its ``device`` function is a user's (compiled into the fit's
    loop as a static part), a proxy whose ``device`` carries the fingerprint of what that
    function reads now (:class:`~topicjax.regularizers._fresh.Fresh`): a fit after a change of
    a global it reads compiles again and uses the new value, an unchanged one reuses the loop."""
    device = getattr(score, "device", None)
    if device is None:
        return score
    name = getattr(score, "name", None) or getattr(device, "__name__", type(score).__name__)
    fn = fresh(device, what="device score", owner=name)
    return score if fn is device else _FreshDeviceScore(score, fn)


class _FreshDeviceScore:
    """A user's score with its ``device`` function fingerprinted (see :func:`_fresh_device`); every
    other attribute and the call are the score's own."""

    def __init__(self, score, device):
        self._score, self.device = score, device

    def __call__(self, ctx):
        return self._score(ctx)

    def __getattr__(self, name):
        if name == "_score":  # while copying, before __init__ ran
            raise AttributeError(name)
        return getattr(self._score, name)


def _series(history: Sequence[dict], key: str):
    it = [h["iteration"] for h in history if key in h and h[key] is not None and np.isfinite(h[key])]
    val = [h[key] for h in history if key in h and h[key] is not None and np.isfinite(h[key])]
    return it, val


def plot_scores(history: Sequence[dict], *, axes=None, title: str | None = None):
    """Convergence charts in the style of ARTM Figs. 4-6: three panels over the iterations.

    * left: perplexity (and hold-out perplexity) on the left axis; sparsity of Φ and Θ and the
      background ratio on the right axis;
    * middle: kernel size on the left axis; purity and contrast on the right axis;
    * right: coherence of the top-10, top-100 words and of the kernel.

    ``history`` is ``model.scores_``; missing series are skipped.  Returns the figure.
    """
    import matplotlib.pyplot as plt

    if axes is None:
        fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    else:
        fig = axes[0].figure
    left, middle, right = axes

    def draw(ax, keys, styles):
        lines = []
        for key, style in zip(keys, styles):
            x, y = _series(history, key)
            if x:
                lines += ax.plot(x, y, style, label=key)
        return lines

    l1 = draw(left, ["perplexity", "heldout_perplexity"], ["k-", "k--"])
    left.set_ylabel("perplexity")
    tw = left.twinx()
    l2 = draw(tw, ["sparsity_phi", "sparsity_theta", "background_ratio"], ["b-", "g-", "r-"])
    tw.set_ylim(-0.02, 1.02)
    tw.set_ylabel("sparsity, background ratio")
    if l1 + l2:
        left.legend(l1 + l2, [l.get_label() for l in l1 + l2], loc="center right", fontsize="small")

    m1 = draw(middle, ["kernel_size"], ["k-"])
    middle.set_ylabel("kernel size")
    tw2 = middle.twinx()
    m2 = draw(tw2, ["kernel_purity", "kernel_contrast"], ["b-", "g-"])
    tw2.set_ylim(-0.02, 1.02)
    tw2.set_ylabel("purity, contrast")
    if m1 + m2:
        middle.legend(m1 + m2, [l.get_label() for l in m1 + m2], loc="center right", fontsize="small")

    r1 = draw(right, ["coherence_10", "coherence_100", "coherence_kernel"], ["b-", "g-", "r-"])
    right.set_ylabel("coherence (PMI)")
    if r1:
        right.legend(loc="lower right", fontsize="small")
    for ax in axes:
        ax.set_xlabel("iteration")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig
