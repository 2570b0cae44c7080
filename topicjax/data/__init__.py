"""Data: the immutable sparse :class:`Corpus`, file readers and writers, bundled and shared corpora."""

from topicjax.data import datasets, formats
from topicjax.data.corpus import Corpus, CorpusError
from topicjax.data.formats import read_corpus
from topicjax.data.vectorizer import CorpusVectorizer

__all__ = ["Corpus", "CorpusError", "CorpusVectorizer", "datasets", "formats", "read_corpus"]
