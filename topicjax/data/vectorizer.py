"""A scikit-learn vectorizer whose output keeps its vocabulary: :class:`CorpusVectorizer`.

scikit-learn's text vectorizers return scipy.sparse matrices, which carry no column names, and
``CountVectorizer`` has no ``set_output``; so a topic model after ``CountVectorizer`` in a
``Pipeline`` sees anonymous columns and knows its words only as ``w0, w1, ...``.  Wrapping the
vectorizer passes its vocabulary on: ``CorpusVectorizer(CountVectorizer(...))`` fits and applies
the vectorizer and returns a :class:`~topicjax.data.Corpus` whose vocabulary is the vectorizer's
``get_feature_names_out()``, which every topicjax estimator keeps as ``vocab_``.  The wrapped
vectorizer's parameters stay reachable for a grid search (``corpusvectorizer__vectorizer__min_df``).

>>> from sklearn.feature_extraction.text import CountVectorizer
>>> from sklearn.pipeline import make_pipeline
>>> import topicjax as tj
>>> texts = ["apple banana apple", "banana cherry", "cherry apple cherry", "banana banana apple"]
>>> pipe = make_pipeline(tj.data.CorpusVectorizer(CountVectorizer()),
...                      tj.PLSA(2, max_iter=5, progress=False)).fit(texts)
>>> sorted(pipe[-1].vocab_)
['apple', 'banana', 'cherry']
"""

from __future__ import annotations

from sklearn.base import BaseEstimator, TransformerMixin, clone

from topicjax.data.corpus import Corpus

__all__ = ["CorpusVectorizer"]


class CorpusVectorizer(TransformerMixin, BaseEstimator, auto_wrap_output_keys=None):
    """Fit and apply a vectorizer (default: ``CountVectorizer()``); return a Corpus with its vocabulary.

    Parameters
    ----------
    vectorizer: a scikit-learn transformer that outputs counts (dense or sparse, documents in
        rows) and has ``get_feature_names_out()``: ``CountVectorizer``, ``DictVectorizer``, a
        ``Pipeline`` ending in one.  ``None``: ``sklearn.feature_extraction.text.CountVectorizer()``.

    Fitted attributes: ``vectorizer_`` (the fitted clone), ``vocabulary_`` (the words, in column
    order).  ``transform`` returns a :class:`~topicjax.data.Corpus` (never a DataFrame: the
    output is not wrapped by ``set_output``); a document left without tokens by the vectorizer
    is an error naming it, as everywhere in topicjax: drop such texts first.
    """

    def __init__(self, vectorizer=None):
        self.vectorizer = vectorizer

    def _corpus(self, matrix) -> Corpus:
        return Corpus.from_sparse(matrix, vocab=self.vocabulary_)

    def fit(self, X, y=None):
        self.fit_transform(X, y)
        return self

    def fit_transform(self, X, y=None, **fit_params):
        if self.vectorizer is None:
            from sklearn.feature_extraction.text import CountVectorizer

            vec = CountVectorizer()
        else:
            vec = clone(self.vectorizer)
        if not hasattr(vec, "get_feature_names_out"):
            raise ValueError(f"CorpusVectorizer needs a vectorizer with get_feature_names_out(), got {type(vec).__name__}")
        matrix = vec.fit_transform(X, y, **fit_params) if y is not None else vec.fit_transform(X, **fit_params)
        self.vectorizer_ = vec
        self.vocabulary_ = [str(w) for w in vec.get_feature_names_out()]
        return self._corpus(matrix)

    def transform(self, X) -> Corpus:
        from sklearn.utils.validation import check_is_fitted

        check_is_fitted(self, "vectorizer_")
        return self._corpus(self.vectorizer_.transform(X))

    def get_feature_names_out(self, input_features=None):
        from sklearn.utils.validation import check_is_fitted

        check_is_fitted(self, "vectorizer_")
        return self.vectorizer_.get_feature_names_out()
