"""Small fitted models shared by the estimator-wide tests (the contract, fitted state, transform
inputs, topic listings): one corpus, one number of topics and one set of settings per family.

A fit compiles its family's programs for the corpus's shape, the number of topics and the static
settings (about 0.5 s of CPU for PLSA, 3 s for PTM at the suite's compiler settings): tests that
only need *a* fitted model of each family take it from :func:`fitted`, fitted once per process
(``functools.lru_cache``), and tests that fit again (another seed, ``fit_many``, another fit path)
use :func:`make` on :func:`corpus`, so that their programs are those already compiled.  The models
are shared: a test that changes one (to check a removed topic, say) restores it in a ``finally``.

The families are those of the registry (``topicjax/_families.py``): a class not in
:data:`SETTINGS` fits with :data:`DEFAULT` alone.
"""

from __future__ import annotations

import importlib
from functools import lru_cache

import topicjax as tj
from topicjax import _families
from topicjax import regularizers

#: the number of topics of every model here (positional ``n_components``)
T = 4
#: the corpus: ``make_bars`` of 5 x 5 pixels (25 words), 40 documents of 30 tokens
CORPUS = dict(n_docs=40, doc_length=30, seed=0)
#: what every fit here sets: few iterations, no progress bar
DEFAULT = {"max_iter": 8, "progress": False}
#: per estimator class, what keeps its fits small or makes them exercise the family: ARTM with a
#: Φ regularizer and a Θ one (not PLSA again; ``transform`` applies the Θ one), LIDA as LDA
SETTINGS = {
    "ARTM": lambda: {"regularizers": [(regularizers.decorrelate(), 1.0), (regularizers.sparse_theta(), 0.1)]},
    "PTM": lambda: {"max_iter": 4},
    "TTMM": lambda: {"n_themes": 3},
    "LIDA": lambda: {"variant": "lda", "max_iter": 6},
}


@lru_cache(maxsize=None)
def corpus():
    """The shared corpus (:data:`CORPUS`)."""
    return tj.datasets.make_bars(**CORPUS)[0]


def classes() -> dict:
    """``{class name: (package, class name)}`` of every estimator class of the registry as it is now."""
    return {m.cls: (f.package, m.cls) for f in _families.FAMILIES for m in f.models}


def make(name: str, **kw):
    """A new estimator of class ``name`` with :data:`T` topics and the shared settings, ``kw``
    overriding them."""
    package, cls = classes()[name]
    est = getattr(importlib.import_module(package), cls)
    return est(T, **{**DEFAULT, **SETTINGS.get(cls, dict)(), **kw})


@lru_cache(maxsize=None)
def fitted(name: str):
    """The model of class ``name`` fitted on :func:`corpus` with ``random_state=0`` (one per
    process; do not change it, or restore it)."""
    return make(name, random_state=0).fit(corpus())
