"""experiments/bench_coldstart.py, a new interpreter to a fitted model: a smoke run of its ``--quick``
mode (the bars corpus), in which topicjax's second process (PLSA and LDA by Gibbs) must load every
program the first one wrote to the cache and compile none, each installed peer (scikit-learn,
tomotopy, gensim) must run and report finite phases, an absent one must be marked absent, and
``import topicjax`` must be timed in fresh processes."""

from __future__ import annotations

import importlib.util
import json
import math

import numpy as np
import pytest

#: among the suite's longest: run first (tests/conftest.py: pytest_collection_modifyitems)
pytestmark = pytest.mark.slow


def finite(run: dict, phases) -> bool:
    return all(run[k] >= 0 and math.isfinite(run[k]) for k in (*phases, "total"))


def test_quick_run(load_experiment, tmp_path):
    mod = load_experiment("bench_coldstart")
    out = tmp_path / "coldstart.json"
    result = mod.main(["--quick", "--out", str(out)])
    assert json.loads(out.read_text())["ratios"] == result["ratios"]
    systems = result["systems"]
    assert list(systems) == list(mod.SYSTEMS)
    for name, steps in (("plsa", result["iterations"]), ("lda", result["sweeps"])):
        ours = systems[name]
        assert ours["status"] == "ran"
        (first,), (second,) = ours["runs"]["first"], ours["runs"]["second"]
        assert first["loaded"] == 0 and first["written"] == first["compiled"] > 0
        assert second["compiled"] == 0 and second["written"] == 0 and second["loaded"] == first["written"]
        assert finite(first, mod.PHASES) and finite(second, mod.PHASES)
        assert first["iterations"] == second["iterations"] == steps == 5
        assert math.isclose(ours["ratio"], second["total"] / first["total"])
        assert math.isclose(result["ratios"][f"{name} second / first"]["value"], ours["ratio"])
    assert systems["plsa"]["runs"]["first"][0]["topics"] == 5
    assert 1 <= systems["lda"]["runs"]["first"][0]["topics"] <= 5  # LDA's live topics
    steps = {"sklearn": result["sklearn_iterations"], "tomotopy": result["sweeps"], "gensim": result["passes"]}
    for name, (_, module) in mod.PEERS.items():
        peer = systems[name]
        if importlib.util.find_spec(module) is None:
            assert peer["status"] == "absent" and "runs" not in peer
            continue
        assert peer["status"] == "ran", peer.get("error")
        (run,) = peer["runs"]
        assert finite(run, mod.PEER_PHASES) and "load models" not in run
        assert run["iterations"] == steps[name] and run["topics"] == 5 and run["docs"] == 200
    tomotopy = systems["tomotopy"]
    value = result["ratios"]["lda second / tomotopy"]["value"]
    if tomotopy["status"] == "ran":
        assert math.isclose(value, systems["lda"]["median"]["second"]["total"] / tomotopy["median"]["total"])
    else:
        assert value is None
    assert len(result["import_s"]) == 3 and all(0 < t < 60 for t in result["import_s"])
    assert result["import_median_s"] == np.median(result["import_s"])


def test_absent_peer_and_selection(load_experiment, monkeypatch):
    """A peer whose module is missing is reported absent (no child, no error); ``--systems``
    selects the systems and refuses an unknown one."""
    mod = load_experiment("bench_coldstart")
    monkeypatch.setitem(mod.PEERS, "gensim", ("gensim LdaModel", "topicjax_no_such_module"))
    result = mod.main(["--quick", "--systems", "gensim"])
    assert result["systems"] == {"gensim": {"label": "gensim LdaModel", "status": "absent"}}
    assert all(r["value"] is None for r in result["ratios"].values())
    with pytest.raises(SystemExit):
        mod.parse(["--systems", "plsa,mallet"])


def test_peer_reader_matches_corpus(load_experiment, tmp_path):
    """The peers' plain UCI reader gives the matrix topicjax's own reader gives, documents sorted."""
    from topicjax.data import Corpus
    from topicjax.data.datasets import make_bars
    from topicjax.data.readers.uci import write_uci

    mod = load_experiment("bench_coldstart")
    corpus = make_bars(7, size=3, doc_length=6, seed=1)[0]
    write_uci(corpus, tmp_path, "t", compress=True)
    rows, vocab, n_docs = mod.read_uci(tmp_path)
    dense = np.zeros((n_docs, len(vocab)), dtype=np.int64)
    for d, w, c in rows:
        dense[d, w] += c
    assert np.all(np.diff(rows[:, 0]) >= 0)
    np.testing.assert_array_equal(dense, Corpus.from_uci(tmp_path).to_dense())
    assert vocab == list(corpus.vocab)
    with pytest.raises(ValueError, match="docword"):
        mod.read_uci(tmp_path / "missing")
