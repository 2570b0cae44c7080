"""The first model of a new interpreter loads neither scikit-learn nor pandas nor SciPy's
statistics or sparse matrices (issue 42 items 4 and 5), and the estimators' own scikit-learn API
(:mod:`topicjax._sklearn_api`) behaves as scikit-learn's ``BaseEstimator`` / ``TransformerMixin``.

* a child interpreter imports topicjax, makes every estimator class of the registry
  (``topicjax/_families.py``) and reads a Corpus, then fits and applies a PLSA: ``sklearn``,
  ``pandas``, ``scipy.stats`` and ``scipy.sparse`` are not in its ``sys.modules`` (a property, not a
  timing: the first three were 1.2 s of CPU in every process's first model, SciPy's sparse module
  0.2-0.3 s more); a SciPy sparse matrix is still taken as a matrix (``scipy.sparse`` loaded by the
  caller, not by topicjax);
* ``get_params`` / ``set_params`` / ``clone`` / ``repr`` against scikit-learn's own on a twin
  class: the same constructor under ``sklearn.base.BaseEstimator`` (the reference is
  scikit-learn's implementation, never ours);
* an unfitted model raises scikit-learn's ``NotFittedError`` class; ``set_output`` and
  scikit-learn's global ``transform_output``; the tags of a positive, sparse-accepting transformer.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.base import clone as sk_clone
from sklearn.exceptions import NotFittedError
from sklearn.feature_extraction.text import CountVectorizer

import topicjax as tj
from topicjax import _families
from topicjax._sklearn_api import EstimatorAPI, clone

from child_env import quick_child_env
import fitted_models as fm

#: modules whose import the first model must not need (sklearn.base brought pandas and scipy.stats;
#: the corpus and the metrics brought scipy.sparse)
HEAVY = ("sklearn", "pandas", "scipy.stats", "scipy.sparse")

CHILD = textwrap.dedent("""
    import json, sys
    import topicjax as tj
    from topicjax import _families

    def heavy():
        return sorted(m for m in {heavy!r} if m in sys.modules)

    seen = {{"import": heavy()}}
    models = [getattr(tj, m.cls)(3) for f in _families.FAMILIES for m in f.models]
    corpus = tj.Corpus.from_uci({folder!r})
    seen["construct"] = heavy()
    model = tj.PLSA(2, max_iter=1, random_state=0, progress=False).fit(corpus)
    assert model.transform(corpus).shape == (corpus.n_docs, 2)
    seen["fit"] = heavy()
    import scipy.sparse as sp  # the caller's: a sparse matrix is a matrix, not a list of documents
    X = sp.csr_matrix(corpus.to_dense())
    sparse_ok = tj.PLSA(2, max_iter=1, random_state=0, progress=False).fit(X).transform(X).shape
    print(json.dumps({{"seen": seen, "classes": [type(m).__name__ for m in models], "sparse": sparse_ok}}))
""")


def test_first_model_loads_no_sklearn_pandas_or_scipy_stats_or_sparse(tmp_path):
    # a UCI bag of words of 3 documents over 4 words (docword: D, W, NNZ, then "doc word count")
    (tmp_path / "docword.tiny.txt").write_text("3\n4\n6\n1 1 2\n1 2 1\n2 2 3\n2 3 1\n3 4 2\n3 1 1\n")
    (tmp_path / "vocab.tiny.txt").write_text("a\nb\nc\nd\n")
    code = CHILD.format(heavy=HEAVY, folder=str(tmp_path))
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env=quick_child_env(TOPICJAX_CACHE="off"))
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["classes"] == [m.cls for f in _families.FAMILIES for m in f.models]
    assert out["seen"] == {"import": [], "construct": [], "fit": []}, out["seen"]
    assert out["sparse"] == [3, 2]


# ----------------------------------------------------------------------- the API against sklearn's
def _toy_init(self, n_components=10, *, max_iter=100, tol=1e-5, weights=None, inner=None, name="a",
              ratio=float("nan")):
    self.n_components = n_components
    self.max_iter = max_iter
    self.tol = tol
    self.weights = weights
    self.inner = inner
    self.name = name
    self.ratio = ratio


#: one constructor, under our API and under scikit-learn's (the reference)
Ours = type("Toy", (EstimatorAPI,), {"__init__": _toy_init})
Theirs = type("Toy", (TransformerMixin, BaseEstimator), {"__init__": _toy_init})

CASES = [
    {},
    {"n_components": 3},
    {"max_iter": 7, "tol": 0.0, "name": "b"},
    {"weights": [1.0, 2.5], "ratio": 0.5},
    {"ratio": float("nan"), "tol": 1e-5},  # NaN equals the NaN default; tol equals its default
    {"inner": CountVectorizer(min_df=2)},
]


def _make(kind, kw):
    return kind(**{k: (sk_clone(v) if hasattr(v, "get_params") else v) for k, v in kw.items()})


@pytest.mark.parametrize("kw", CASES, ids=[",".join(c) or "defaults" for c in CASES])
def test_params_and_repr_are_scikit_learn_s(kw):
    ours, theirs = _make(Ours, kw), _make(Theirs, kw)
    assert Ours._get_param_names() == Theirs._get_param_names()
    for deep in (False, True):
        a, b = ours.get_params(deep=deep), theirs.get_params(deep=deep)
        assert list(a) == list(b)
        assert {k: repr(v) for k, v in a.items()} == {k: repr(v) for k, v in b.items()}
    # repr: the parameters that differ from their defaults, sorted (scikit-learn breaks long lines)
    assert repr(ours) == " ".join(repr(theirs).split())


def test_set_params_is_scikit_learn_s():
    ours, theirs = Ours(inner=CountVectorizer()), Theirs(inner=CountVectorizer())
    for est in (ours, theirs):
        assert est.set_params() is est
        assert est.set_params(max_iter=3, inner__min_df=2, inner__lowercase=False) is est
        assert est.max_iter == 3 and est.inner.min_df == 2 and est.inner.lowercase is False
    assert ours.get_params()["inner__min_df"] == 2
    for bad in ({"bogus": 1}, {"bogus__x": 1}, {"max_iter": 1, "n_topics": 2}):
        errors = []
        for est in (ours, theirs):
            with pytest.raises(ValueError, match="Invalid parameter") as e:
                est.set_params(**bad)
            errors.append(str(e.value))
        assert errors[0] == errors[1]
    with pytest.raises(ValueError, match="Invalid parameter 'bogus' for estimator PLSA"):
        tj.PLSA(3).set_params(bogus=1)
    with pytest.raises(ValueError, match=r"Valid parameters are: \['chunk', 'learning_decay'"):
        tj.PLSA(3).set_params(n_topics=1)
    # a nested parameter of a value without parameters: scikit-learn's own AttributeError
    with pytest.raises(AttributeError):
        Ours(inner=5).set_params(inner__x=1)


def test_clone_is_scikit_learn_s():
    fitted = Ours(max_iter=3, weights=[1.0, 2.0], inner=CountVectorizer(min_df=2))
    fitted.vocab_ = ["a"]  # a fitted attribute: never cloned
    fitted.set_output(transform="pandas")
    for new in (clone(fitted), sk_clone(fitted)):
        assert type(new) is Ours and new is not fitted and not hasattr(new, "vocab_")
        assert repr(new.get_params()) == repr(fitted.get_params())
        assert new.weights == fitted.weights and new.weights is not fitted.weights  # deep copies
        assert new.inner is not fitted.inner and new.inner.min_df == 2
        assert new._sklearn_output_config == {"transform": "pandas"}
    assert clone({"a": [fitted, 1]})["a"][0].max_iter == 3

    class Changes(Ours):
        def __init__(self, n_components=10, *, max_iter=100, tol=1e-5, weights=None, inner=None, name="a",
                     ratio=float("nan")):
            super().__init__(n_components, max_iter=max_iter, tol=tol, weights=list(weights or []),
                             inner=inner, name=name, ratio=ratio)

    for f in (clone, sk_clone):
        with pytest.raises(RuntimeError, match="weights"):
            f(Changes(weights=[1.0]))
    # the estimators: a clone equals scikit-learn's clone, ours keeps its class and parameters
    est = tj.ARTM(3, regularizers=[(tj.regularizers.decorrelate(), 2.0)], max_iter=5)
    for new in (clone(est), sk_clone(est), est._clone_with(max_iter=6)):
        assert type(new) is tj.ARTM and repr(new.regularizers) == repr(est.regularizers)
        assert new.regularizers is not est.regularizers
    assert est._clone_with(max_iter=6).max_iter == 6 and est.max_iter == 5


def test_positional_arguments_are_refused_without_args_in_the_signature():
    class Star(EstimatorAPI):
        def __init__(self, *args):
            self.args = args

    with pytest.raises(RuntimeError, match=r"\*args"):
        Star().get_params()


@pytest.mark.parametrize("name", fm.classes())
def test_each_family_repr_and_params_match_a_scikit_learn_twin(name):
    cls = getattr(tj, name)
    twin = type(name, (TransformerMixin, BaseEstimator), {"__init__": cls.__init__})
    assert cls._get_param_names() == twin._get_param_names()
    for kw in ({}, {"max_iter": 3, "random_state": 5, "progress": False}):
        ours, theirs = cls(3, **kw), twin(3, **kw)
        assert repr(ours.get_params()) == repr(theirs.get_params())
        assert repr(ours) == " ".join(repr(theirs).split())


def test_tags_are_a_positive_sparse_transformer():
    from sklearn.utils import get_tags

    expected = Theirs().__sklearn_tags__()  # BaseEstimator + TransformerMixin
    expected.input_tags.positive_only = True
    expected.input_tags.sparse = True
    expected.transformer_tags.preserves_dtype = []
    assert get_tags(tj.PLSA(3)) == expected
    assert get_tags(Ours()) == Theirs().__sklearn_tags__()


# ----------------------------------------------------------------------- fitted, unfitted, outputs
def test_unfitted_model_raises_scikit_learn_s_not_fitted_error():
    from sklearn.utils.validation import check_is_fitted

    est = tj.PLSA(3, progress=False)
    X = np.ones((2, 25), int)
    with pytest.raises(NotFittedError, match="PLSA is not fitted yet; call fit first") as e:
        est.transform(X)
    assert type(e.value) is NotFittedError and isinstance(e.value, (ValueError, AttributeError))
    with pytest.raises(NotFittedError):
        check_is_fitted(est)
    assert not hasattr(est, "topic_live_")  # a property of a fitted model: an AttributeError
    check_is_fitted(fm.fitted("PLSA"))


def test_set_output_and_the_global_transform_output():
    pd = pytest.importorskip("pandas")
    import sklearn

    model = fm.fitted("PLSA")
    corpus = fm.corpus()
    plain = model.transform(corpus)
    names = [f"topic_{i}" for i in range(fm.T)]
    df = pd.DataFrame(corpus.to_dense(), columns=list(corpus.vocab), index=np.arange(corpus.n_docs) + 100)
    other = sk_clone(model).set_output(transform="pandas")
    assert other._sklearn_output_config == {"transform": "pandas"} and "_sklearn_output_config" not in vars(model)
    try:
        model.set_output(transform="pandas")
        out = model.transform(df)
        assert isinstance(out, pd.DataFrame) and list(out.columns) == names and list(out.index) == list(df.index)
        np.testing.assert_allclose(out.to_numpy(), plain, rtol=1e-6)
        assert model.set_output(transform=None) is model and model._sklearn_output_config["transform"] == "pandas"
        assert isinstance(model.set_output(transform="default").transform(corpus), np.ndarray)
        with sklearn.config_context(transform_output="pandas"):  # followed where no set_output says otherwise
            assert isinstance(model.transform(corpus), np.ndarray)
            del model._sklearn_output_config
            out = model.transform(corpus)
            assert isinstance(out, pd.DataFrame) and list(out.index) == list(range(corpus.n_docs))
        assert isinstance(model.transform(corpus), np.ndarray)
        with pytest.raises(ValueError, match=r"set_output: transform must be one of \('default', 'pandas', "
                                             r"'polars'\) or None, got 'numpy'"):
            model.set_output(transform="numpy")
    finally:
        vars(model).pop("_sklearn_output_config", None)  # a shared model: left as it was


class _Scaled(Ours):
    """A transformer of the toy: ``transform`` wrapped for ``set_output`` at each class that defines it."""

    def get_feature_names_out(self, input_features=None):
        return np.array([f"t{i}" for i in range(self.n_components)], dtype=object)

    def transform(self, X):
        return np.asarray(X, float)[:, : self.n_components] * 2


class _Overrides(_Scaled):
    def transform(self, X):  # a subclass calling its parent's wrapped transform: wrapped once more
        return super().transform(X) + 1


def test_set_output_wraps_each_class_s_transform_once_in_effect():
    pd = pytest.importorskip("pandas")
    X = pd.DataFrame(np.arange(6.0).reshape(2, 3), index=["x", "y"])
    for kind, offset in ((_Scaled, 0), (_Overrides, 1)):
        est = kind(n_components=2)
        assert isinstance(est.transform(X), np.ndarray)
        out = est.set_output(transform="pandas").transform(X)
        assert list(out.columns) == ["t0", "t1"] and list(out.index) == ["x", "y"]
        np.testing.assert_array_equal(out.to_numpy(), X.to_numpy()[:, :2] * 2 + offset)


def test_set_output_polars():
    pl = pytest.importorskip("polars")
    out = _Scaled(n_components=2).set_output(transform="polars").transform(np.ones((3, 2)))
    assert isinstance(out, pl.DataFrame) and out.columns == ["t0", "t1"] and out.shape == (3, 2)
