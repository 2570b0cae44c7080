"""PLSA estimator: fit, transform, save/load, scikit-learn conventions, bad input."""

import numpy as np
import pytest
from sklearn.base import clone

import topicjax as tj
from topicjax import datasets, metrics


@pytest.fixture(scope="module")
def bars():
    return datasets.make_bars(n_docs=300, seed=0)[:2]  # (corpus, true Φ)


@pytest.fixture(scope="module")
def fitted(bars):
    corpus, _ = bars
    return tj.PLSA(n_components=10, max_iter=150, tol=0, random_state=0, progress=False).fit(corpus)


def test_fit_recovers_bars_and_perplexity_is_stable(bars, fitted):
    corpus, true_phi = bars
    assert metrics.topic_recovery(fitted.phi_, true_phi)["distance"] < 0.3
    ppl = [h["perplexity"] for h in fitted.history_]
    assert np.all(np.diff(ppl) <= 1e-4 * ppl[-1])  # monotone (EM)
    assert abs(ppl[-1] - ppl[-2]) / ppl[-1] < 1e-3  # stable at the end
    np.testing.assert_allclose(fitted.phi_.sum(0), 1, atol=1e-5)
    np.testing.assert_allclose(fitted.theta_.sum(0), 1, atol=1e-5)


def test_transform_and_sklearn_conventions(bars, fitted):
    corpus, _ = bars
    out = fitted.transform(corpus.subset(np.arange(5)))
    assert out.shape == (5, 10)
    np.testing.assert_allclose(out.sum(1), 1, atol=1e-5)
    params = fitted.get_params()
    assert params["n_components"] == 10
    assert clone(fitted).get_params() == params
    dense = corpus.to_dense()
    model = tj.PLSA(n_components=3, max_iter=5, progress=False).fit(dense)
    assert model.transform(dense[:4]).shape == (4, 3)


def test_pipeline_after_countvectorizer():
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.pipeline import make_pipeline

    texts = ["apple banana apple", "banana cherry", "cherry date date", "apple date"] * 3
    pipe = make_pipeline(CountVectorizer(), tj.PLSA(n_components=2, max_iter=10, progress=False))
    out = pipe.fit_transform(texts)
    assert out.shape == (12, 2)


def test_save_load_round_trip(tmp_path, bars, fitted):
    fitted.save(tmp_path / "m")
    loaded = tj.PLSA.load(tmp_path / "m")
    assert np.array_equal(loaded.phi_, fitted.phi_) and np.array_equal(loaded.theta_, fitted.theta_)
    assert loaded.vocab_ == fitted.vocab_ and loaded.history_ == fitted.history_
    assert loaded.get_params() == fitted.get_params()
    from topicjax.persistence import load

    assert isinstance(load(tmp_path / "m"), tj.PLSA)


def test_corrupt_saved_model(tmp_path, fitted):
    fitted.save(tmp_path / "m")
    (tmp_path / "m" / "meta.json").write_text("{not json")
    with pytest.raises(ValueError, match="corrupt JSON"):
        tj.PLSA.load(tmp_path / "m")
    fitted.save(tmp_path / "n")
    (tmp_path / "n" / "arrays.npz").write_bytes(b"garbage")
    with pytest.raises(ValueError, match="corrupt array file"):
        tj.PLSA.load(tmp_path / "n")


def test_bad_input(bars, fitted):
    corpus, _ = bars
    tiny = tj.Corpus.from_dense([[1, 1], [0, 1]])
    with pytest.raises(ValueError, match="more than the 3 tokens"):
        tj.PLSA(n_components=5, progress=False).fit(tiny)
    with pytest.raises(ValueError, match="n_components must be an integer >= 1"):
        tj.PLSA(n_components=0, progress=False).fit(tiny)
    with pytest.raises(ValueError, match="not fitted"):
        tj.PLSA().transform(tiny)
    with pytest.raises(ValueError, match="fitted on 25"):
        fitted.transform(tiny)


def test_heldout_perplexity_method(bars, fitted):
    corpus, _ = bars
    obs, held = corpus.subset(np.arange(50)).completion_split("tokens", seed=1)
    p = fitted.perplexity(obs, held)
    assert 10 < p < 40  # bars: ~20 equiprobable pixels per document mixture
