"""Data: the immutable sparse :class:`Corpus`, file readers and writers, bundled and shared corpora.

:class:`CorpusVectorizer` (:mod:`topicjax.data.vectorizer`) is loaded at its first use: it is a
scikit-learn estimator, and ``sklearn.base`` brings pandas and ``scipy.stats`` (about 1 s), which
the corpus, the readers and :mod:`topicjax.core` (which imports this package) do not need.
"""

import importlib
import typing

from topicjax.data import datasets, formats, synthetic
from topicjax.data.corpus import Corpus, CorpusError, CorpusWarning
from topicjax.data.formats import read_corpus

if typing.TYPE_CHECKING:  # what type checkers and the API reference's reader see; never run
    from topicjax.data.vectorizer import CorpusVectorizer

__all__ = ["Corpus", "CorpusError", "CorpusVectorizer", "CorpusWarning", "datasets", "formats", "read_corpus",
           "synthetic"]


def __getattr__(name: str):
    """``CorpusVectorizer``, imported at its first use (PEP 562) and kept as an attribute."""
    if name != "CorpusVectorizer":
        raise AttributeError(f"module 'topicjax.data' has no attribute {name!r}")
    value = importlib.import_module("topicjax.data.vectorizer").CorpusVectorizer
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
