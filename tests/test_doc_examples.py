"""Every documented example shows its model at its best, and says what good looks like
(issue 45 item 1): each test runs an example *as the page prints it* (its ```python block, taken
from the Markdown), then holds its result to the figure that the text states, and checks the
text still states it.  The expected figures are properties of the known truth of a generated
corpus (the true bars), not values copied from the code under test."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

#: among the suite's longest: run first (tests/conftest.py: pytest_collection_modifyitems)
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent


def _block(page: str, index: int = 0) -> str:
    text = (ROOT / page).read_text(encoding="utf-8")
    blocks = re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)
    assert len(blocks) > index, f"{page} has no python example number {index}"
    return blocks[index]


def _states(page: str, phrase: str) -> None:
    text = re.sub(r"\s+", " ", (ROOT / page).read_text(encoding="utf-8").replace("*", ""))
    assert phrase in text, f"{page} no longer states {phrase!r}; update this test with the page"


def _run(code: str, tmp_path, monkeypatch) -> dict:
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__doc_example__"}
    exec(compile(code, "<doc example>", "exec"), namespace)
    return namespace


def test_home_page_recovers_the_bars(tmp_path, monkeypatch):
    ns = _run(_block("docs/index.md"), tmp_path, monkeypatch)
    _states("docs/index.md", "mean Hellinger distance below 0.05")
    assert ns["distance"] < 0.05
    # every bar, not only on average: a merged or split bar is at 0.5 or more
    import topicjax as tj
    per = tj.metrics.topic_recovery(ns["model"].phi_, ns["true_topics"])["per_topic"]
    assert per.max() < 0.1, per


def test_choosing_compares_three_models_at_their_best(tmp_path, monkeypatch):
    ns = _run(_block("docs/choosing.md"), tmp_path, monkeypatch)
    res = ns["results"]
    _states("docs/choosing.md", "distance below 0.1")
    plsa_score, plsa_distance = res["PLSA"]
    assert plsa_distance < 0.1
    for smoothed in ("ARTM", "LIDA"):
        score, distance = res[smoothed]
        assert score > plsa_score + 0.02, (smoothed, score, plsa_score)   # LDA generalises better
        assert distance < 0.25, (smoothed, distance)                    # one bar per topic, smoothed


def test_scale_example_online_recovers_the_bars(tmp_path, monkeypatch):
    ns = _run(_block("docs/scale.md"), tmp_path, monkeypatch)
    _states("docs/scale.md", "the online fit recovers the ten bars at a mean Hellinger distance below 0.05")
    import topicjax as tj
    online = tj.metrics.topic_recovery(ns["streamed"].phi_, ns["true_phi"])
    assert online["distance"] < 0.05 and online["per_topic"].max() < 0.05, online
    # the offline fit's local optimum (random_state=1 on this 20-batch store; 5,000 documents, not
    # 20,000: a quarter of the run time), as the page says: most bars exact, one or two topics wrong
    _states("docs/scale.md", "lands, on this store, in a local optimum of EM (0.17")
    offline = tj.metrics.topic_recovery(ns["full"].phi_, ns["true_phi"])
    assert 0.1 < offline["distance"] < 0.2 and (offline["per_topic"] < 0.05).sum() >= 7, offline
    assert ns["batches"].meta["shuffle_seed"] == 0


def test_ptm_guide_finds_the_planted_words_and_order(tmp_path, monkeypatch):
    ns = _run(_block("docs/guides/ptm.md"), tmp_path, monkeypatch)
    _states("docs/guides/ptm.md", "precision and recall of at least 0.9")
    _states("docs/guides/ptm.md", "picks the planted order, 6")
    assert ns["precision"] >= 0.9 and ns["recall"] >= 0.9, (ns["precision"], ns["recall"])
    # the truth is the generator's own switches; each true topic has 2 x 5 specific words
    assert ns["data"].specific.sum(1).tolist() == [10] * 6
    assert ns["sweep"].best_order == 6
    orders, bics = ns["sweep"].curve()
    assert list(orders) == [7, 6, 5]
    best = list(orders).index(6)
    assert bics[best] < bics[best - 1] and bics[best] < bics[best + 1]   # a minimum, not an edge


def test_artm_guide_recovers_sparse_bars(tmp_path, monkeypatch):
    ns = _run(_block("docs/guides/artm.md", 1), tmp_path, monkeypatch)
    _states("docs/guides/artm.md", "every bar recovered at a mean Hellinger distance below 0.05")
    _states("docs/guides/artm.md", "Φ at least 70% zeros")
    assert ns["distance"] < 0.05, ns["distance"]
    # the true bars are 80% zeros (5 of 25 pixels each): a count, not the code's output
    assert (ns["true_phi"] == 0).mean() == 0.8
    assert 0.7 <= ns["zeros"] <= 0.8, ns["zeros"]


def test_ttmm_guide_recovers_themes_and_topics(tmp_path, monkeypatch):
    ns = _run(_block("docs/guides/ttmm.md"), tmp_path, monkeypatch)
    _states("docs/guides/ttmm.md", "an adjusted Rand index of 1.0")
    _states("docs/guides/ttmm.md", "mean Hellinger distance below 0.1")
    assert ns["agreement"] == pytest.approx(1.0), ns["agreement"]
    assert ns["distance"] < 0.1, ns["distance"]
    assert ns["features"].shape == (600, 4)
    # the restart kept is the likeliest, and the topics are told apart by it: not every restart is
    assert min(float(m.loglik_history_[-1]) for m in ns["fits"]) < float(ns["model"].loglik_history_[-1])


def test_readme_quickstart_recovers_the_bars(tmp_path, monkeypatch):
    ns = _run(_block("README.md"), tmp_path, monkeypatch)   # the generated-data example, before KOS's
    _states("README.md", "every bar recovered, at a mean Hellinger distance below 0.05")
    assert "from_uci" not in _block("README.md") and "make_bars" in _block("README.md")
    assert ns["distance"] < 0.05, ns["distance"]


def test_lida_guide_lda_recovers_alpha_and_bars(tmp_path, monkeypatch):
    ns = _run(_block("docs/guides/lida.md", 0), tmp_path, monkeypatch)
    _states("docs/guides/lida.md", "within 0.05 of the generating 0.2")
    _states("docs/guides/lida.md", "mean Hellinger distance below 0.1 (0.053")
    assert "alpha=0.2" in _block("docs/guides/lida.md", 0)   # the generator's Dirichlet, the truth
    assert abs(ns["lda"].hyper_["alpha"] - 0.2) < 0.05, ns["lda"].hyper_
    assert ns["distance"] < 0.1, ns["distance"]


def test_lida_guide_ftm_finds_the_topics_per_document(tmp_path, monkeypatch):
    ns = _run(_block("docs/guides/lida.md", 1), tmp_path, monkeypatch)
    _states("docs/guides/lida.md", "within 0.25 of the bars it was made from")
    _states("docs/guides/lida.md", "bars are recovered at a mean Hellinger distance below 0.06")
    # the truth: the generator drew 1 or 2 bars per document; count the documents' bars by hand
    counts, bars, n_bars = ns["counts"], ns["bars"], ns["n_bars"]
    assert set(np.unique(n_bars)) == {1, 2} and counts.sum(1).tolist() == [50] * 200
    # the corpus is what the page says: the pixels of every document lie within one or two bars
    masks = bars.T > 0
    unions = [masks[a] | masks[b] for a in range(10) for b in range(10)]
    assert all(any(not (row & ~u).any() for u in unions) for row in counts > 0)
    per_document = ns["ftm"].topics_per_document()
    assert abs(per_document.mean() - n_bars.mean()) < 0.25, (per_document.mean(), n_bars.mean())
    assert ns["distance"] < 0.06, ns["distance"]
    # the tokens agree with the masks: a topic holding tokens of a document is active in it
    assigned = ns["ftm"].topics_per_document("assigned")
    assert (assigned <= per_document).all() and abs(assigned.mean() - n_bars.mean()) < 0.25


def test_lida_guide_lida_finds_the_words_per_topic(tmp_path, monkeypatch):
    ns = _run(_block("docs/guides/lida.md", 2), tmp_path, monkeypatch)
    _states("docs/guides/lida.md", "between 4 and 6 on average")
    _states("docs/guides/lida.md", "the bars at a mean Hellinger distance below 0.06")
    bars = ns["bars"]
    assert (bars > 0).sum(0).tolist() == [5] * 10            # the truth: 5 of 25 pixels per bar
    words = ns["lida"].words_per_topic()
    assert 4 <= words.mean() <= 6, words
    assert ns["distance"] < 0.06, ns["distance"]
    assert abs(ns["lida"].topics_per_document().mean() - ns["n_bars"].mean()) < 0.25


def test_tune_guide_improves_the_validation_perplexity(tmp_path, monkeypatch):
    ns = _run(_block("docs/guides/tune.md"), tmp_path, monkeypatch)
    _states("docs/guides/tune.md", "lowers the validation perplexity by at least 7%")
    start, tuned = ns["start"], ns["tuned"]
    assert tuned < 0.93 * start, (start, tuned)
    # the tuner's own objective at step 0 is the log of the untuned model's validation perplexity
    history = ns["result"].history
    assert np.exp(history[0]["objective"]) == pytest.approx(start, rel=1e-3)
    assert np.exp(ns["result"].best_value) == pytest.approx(tuned, rel=1e-3)
