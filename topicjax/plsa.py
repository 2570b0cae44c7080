"""PLSA (Hofmann 1999; ARTM eq. 4-8) fitted by the shared EM driver of :mod:`topicjax.em`.

>>> import topicjax as tj
>>> corpus, _ = tj.datasets.make_bars(n_docs=200, seed=0)
>>> model = tj.PLSA(n_components=10, max_iter=30, random_state=0, progress=False).fit(corpus)
>>> model.phi_.shape, model.theta_.shape
((25, 10), (10, 200))
"""

from __future__ import annotations

import jax
import numpy as np

from . import em, metrics
from .base import TopicModelBase

__all__ = ["PLSA"]


class PLSA(TopicModelBase):
    """Probabilistic latent semantic analysis by EM (ARTM Theorem 1, eq. 6-8).

    Parameters
    ----------
    n_components: number of topics T.
    max_iter: maximum number of EM iterations.
    tol: stop when the relative change of the log-likelihood falls below ``tol`` (0: never).
    random_state: seed of the initial Φ; the same seed gives the same model on the same device.
    chunk: non-zeros per chunk of the E-step (memory/speed trade-off; see :func:`em.prepare`).
    transform_iter: EM iterations of Θ for new documents in :meth:`transform`.
    progress: show a tqdm progress bar.

    Fitted attributes: ``phi_`` (W x T), ``theta_`` (T x D), ``history_`` (log-likelihood and
    perplexity per iteration), ``n_iter_``, ``vocab_``.
    """

    _saved_arrays = ("phi_", "theta_")
    _saved_meta = ("history_", "n_iter_")

    def __init__(self, n_components=10, *, max_iter=100, tol=1e-5, random_state=0, chunk=None,
                 transform_iter=30, progress=True):
        self.n_components = n_components
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state
        self.chunk = chunk
        self.transform_iter = transform_iter
        self.progress = progress

    def fit(self, X, y=None):
        corpus = self._train_corpus(X)
        corpus.check_topics(self.n_components)
        data = em.prepare(corpus, self.chunk)
        state = em.init(jax.random.key(self.random_state), corpus.n_words, corpus.n_docs, self.n_components)
        step = em.make_step()
        n = corpus.n_tokens
        state, history = em.run(
            lambda s: step(s, data, None), state, max_iter=self.max_iter, tol=self.tol,
            progress=self.progress, desc="PLSA",
        )
        for h in history:  # loglik of the parameters before each step, as perplexity (eq. 56)
            h["perplexity"] = float(np.exp(-h["objective"] / n))
        self.phi_ = np.asarray(state.phi)
        self.theta_ = np.asarray(state.theta)
        self.history_ = history
        self.n_iter_ = len(history)
        return self

    def transform(self, X):
        """Topic proportions of documents, ``(n_docs, n_components)`` (Θᵀ with Φ fixed)."""
        corpus = self._new_corpus(X)
        theta = em.infer_theta(self.phi_, em.prepare(corpus, self.chunk), corpus.n_docs, n_iter=self.transform_iter)
        return np.asarray(theta).T

    def fit_transform(self, X, y=None):
        return self.fit(X).theta_.T

    def perplexity(self, X, heldout=None):
        """Perplexity (ARTM eq. 56).  With ``heldout``, by document completion: Θ is estimated on
        ``X`` (the observed part) and the perplexity measured on ``heldout``."""
        corpus = self._new_corpus(X)
        held = corpus if heldout is None else self._new_corpus(heldout)
        theta = self.transform(corpus).T
        return metrics.perplexity(self.phi_, theta, held)
