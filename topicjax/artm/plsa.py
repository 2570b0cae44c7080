"""PLSA (Hofmann 1999; ARTM eq. 4-8): ARTM without regularizers (ARTM Note 3), one code path.

>>> import topicjax as tj
>>> corpus, _, _ = tj.datasets.make_bars(n_docs=200, seed=0)
>>> model = tj.PLSA(n_components=10, max_iter=30, random_state=0, progress=False).fit(corpus)
>>> model.phi_.shape, model.theta_.shape
((25, 10), (10, 200))
"""

from __future__ import annotations

from topicjax.artm.model import ARTM

__all__ = ["PLSA"]


class PLSA(ARTM):
    """Probabilistic latent semantic analysis by EM (ARTM Theorem 1, eq. 6-8).

    The special case R = 0 of :class:`~topicjax.artm.ARTM` (Theorem 1 is Theorem 2 at R = 0,
    Note 3): the same compiled step, loop, inference and persistence.

    Parameters
    ----------
    n_components: number of topics T.
    max_iter: maximum number of EM iterations.
    tol: stop when the relative change of the log-likelihood falls below ``tol`` (0: never).
    random_state: seed of the initial Φ (an int, ``None`` for fresh entropy, or a key); the same
        seed gives the same model on the same device (bits may differ between CPU and GPU).
    chunk: non-zeros per chunk of the E-step (memory/speed trade-off; see :func:`em.prepare`).
        Shapes are rounded up to buckets so that corpora of similar size share the compiled programs
        (:class:`~topicjax.artm.ARTM`'s ``chunk``; ``TOPICJAX_BUCKETS=off`` keeps exact shapes).
    transform_iter: EM iterations of Θ for new documents in :meth:`transform`.
    learning_offset, learning_decay: τ0 and κ of the online step ``ρ = (τ0 + t)^(-κ)`` of
        :meth:`partial_fit` (:mod:`topicjax.artm.partial`).
    progress: show a tqdm progress bar.

    Fitted attributes: ``phi_`` (W x T), ``theta_`` (T x D), ``components_`` (T x W),
    ``history_`` (= ``scores_``: log-likelihood ``objective`` and ``perplexity`` per iteration),
    ``n_iter_``, ``vocab_``.
    """

    # ARTM settings that PLSA fixes (class attributes, so they are not constructor parameters)
    regularizers = None
    background_topics = 0
    topic_names = None
    scores = ("perplexity",)
    score_every = 1
    modality_weights = None
    label_weight = None
    overregularized = "keep"
    doc_passes = None

    def __init__(self, n_components=10, *, max_iter=100, tol=1e-5, random_state=0, chunk=None,
                 transform_iter=30, learning_offset=1024.0, learning_decay=0.7, progress=True):
        self.n_components = n_components
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state
        self.chunk = chunk
        self.transform_iter = transform_iter
        self.learning_offset = learning_offset
        self.learning_decay = learning_decay
        self.progress = progress
