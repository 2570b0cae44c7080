"""LIDA and its family: collapsed Gibbs samplers for LIDA, FTM, SSTM and LDA.

:class:`LIDA` fits latent IBP compound Dirichlet allocation (Archambeau, Lakshminarayanan &
Bouchard, ``lida-ibp-compound-dirichlet.txt``) and the special cases of its sec. 4.4 by the sweeps
of Algorithm 1, chosen by ``variant``: ``"lida"`` (topic and word masks sampled, token conditional
eq. 35), ``"ftm"`` (topic masks only, eq. 36), ``"sstm"`` (word masks only, eq. 37) or ``"lda"``
(no masks, eq. 38); ``sampler`` chooses the token sweep: ``"parallel"`` (default), ``"exact"`` or
``"stale"`` (approximate, for comparison).  Its parameters, fitted attributes and errors are
documented on the class.  :mod:`~topicjax.lida.kernel` is the compiled CPU kernel of the
parallel sweep (``set_backend``, ``set_threads``).

The same ``random_state`` gives the same chain on the same device; bits may differ between CPU
and GPU.

How the sampler works (state and truncation, growth, topic births, one sweep, hyperparameters,
evaluation, seeds): ``docs/guides/internals.md``, "LIDA: how the sampler works"; the model and its
use: ``docs/guides/lida.md``.

>>> import topicjax as tj
>>> from topicjax.lida import LIDA
>>> corpus, _, _ = tj.datasets.make_bars(n_docs=100, seed=0)
>>> model = LIDA(10, variant="lda", max_iter=20, random_state=0, progress=False).fit(corpus)
>>> model.phi_.shape, model.theta_.shape
((25, 10), (10, 100))
"""

# The estimator and the CPU kernel's switches (kernel.set_backend, kernel.set_threads) are public;
# the sampler's pieces (state, sweeps, IBP closed forms, posterior sums) are imported from their
# modules by the estimator and the tests.
from . import kernel
from .model import LIDA

__all__ = ["LIDA", "kernel"]
