"""Data: the immutable sparse :class:`Corpus`, file readers and writers, bundled and shared corpora."""

from topicjax.data import datasets, formats, synthetic
from topicjax.data.corpus import Corpus, CorpusError, CorpusWarning
from topicjax.data.formats import read_corpus
from topicjax.data.vectorizer import CorpusVectorizer

__all__ = ["Corpus", "CorpusError", "CorpusVectorizer", "CorpusWarning", "datasets", "formats", "read_corpus",
           "synthetic"]
