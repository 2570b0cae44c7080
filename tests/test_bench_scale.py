"""experiments/bench_scale.py, the NYTimes-size scale benchmark: its one numpy evaluator (document
completion with Φ fixed) against values worked out by hand, and a smoke run of its ``--quick``
mode on the systems that are always installed (each in its own process)."""

from __future__ import annotations

import math

import numpy as np
import pytest


@pytest.fixture(scope="module")
def mod(load_experiment):
    return load_experiment("bench_scale")


def _csr(dense):
    d, w = np.nonzero(dense)
    indptr = np.concatenate([[0], np.cumsum(np.bincount(d, minlength=dense.shape[0]))])
    return indptr, w, dense[d, w]


def test_one_topic_perplexity_is_that_of_its_distribution(mod):
    """With one topic θ is 1 whatever the fold-in does: p_w = φ_w on every held-out token."""
    dense = np.array([[5, 7], [9, 3], [4, 4]])
    indptr, w, c = _csr(dense)
    phi = np.array([[0.25], [0.75]])
    _, held = mod.completion_split(indptr, w, c, seed=3)
    want = math.exp(-np.sum(held * np.log(phi[w, 0])) / held.sum())
    got, zero = mod.completion_perplexity(phi, indptr, w, c, np.ones(2, bool), seed=3, eps=0.0)
    assert got == pytest.approx(want, rel=1e-12) and zero == 0


def test_fold_in_finds_the_proportions_of_disjoint_topics(mod):
    """Topics with disjoint words: the maximum-likelihood θ_d of the observed half is the share of
    its tokens in each topic's words, and the held-out p_dw is φ_wt θ_td of the word's topic."""
    dense = np.array([[6, 2, 4, 0], [1, 5, 0, 8], [3, 3, 3, 3]])
    indptr, w, c = _csr(dense)
    phi = np.array([[0.5, 0.0], [0.5, 0.0], [0.0, 0.2], [0.0, 0.8]])
    obs, held = mod.completion_split(indptr, w, c, seed=1)
    topic = (w >= 2).astype(int)
    rows = np.repeat(np.arange(3), np.diff(indptr))
    share = np.zeros((3, 2))
    np.add.at(share, (rows, topic), obs)
    theta = share / share.sum(1, keepdims=True)
    want = math.exp(-np.sum(held * np.log(phi[w, topic] * theta[rows, topic])) / held.sum())
    got, zero = mod.completion_perplexity(phi, indptr, w, c, np.ones(4, bool), n_iter=200, seed=1, eps=0.0)
    assert got == pytest.approx(want, rel=1e-6) and zero == 0


def test_words_unseen_in_training_are_dropped_and_zero_probabilities_counted(mod):
    dense = np.array([[4, 6, 3]])
    indptr, w, c = _csr(dense)
    known = np.array([True, True, False])  # word 2 never occurs in training: its tokens are not scored
    phi = np.array([[1.0], [0.0], [0.0]])  # word 1 has probability 0 before smoothing
    _, held = mod.completion_split(indptr, w, c, seed=0)
    got, zero = mod.completion_perplexity(phi, indptr, w, c, known, seed=0, eps=1e-6)
    assert zero == held[1]
    p = np.array([(1 - 1e-6) + 1e-6 / 2, 1e-6 / 2])  # renormalised over the 2 known words, mixed with uniform
    want = math.exp(-(held[0] * np.log(p[0]) + held[1] * np.log(p[1])) / (held[0] + held[1]))
    assert got == pytest.approx(want, rel=1e-9)


def test_quick_run_measures_and_evaluates(mod, tmp_path):
    systems = ["plsa", "corpus"]
    try:
        import numba  # noqa: F401  (a benchmark extra, not a test dependency)

        systems.append("numba-1")
    except ImportError:
        pass
    out = tmp_path / "bench_scale.md"
    res = mod.main(["--quick", "--systems", *systems, "--workdir", str(tmp_path / "work"), "--out", str(out),
                    "--force"])
    rows = res["rows"]
    assert {r[0] for r in rows} == set(systems)
    assert not [r for r in rows if r[1] == "FAILED"], [r for r in rows if r[1] == "FAILED"]
    for system in systems:
        mine = [r for r in rows if r[0] == system]
        assert all(r[2] is not None and r[2] >= 0 and r[4] > 0 for r in mine)  # wall time, peak RSS
    for system in set(systems) - {"corpus"}:  # every fitted system: a per-iteration time, a finite perplexity
        last = [r for r in rows if r[0] == system][-1]
        assert last[3] > 0 and np.isfinite(last[5][0]) and last[5][0] > 1
    # the evaluator on the generator's truth: a uniform Φ scores every token 1 / (words seen in
    # training), so its perplexity is that number; the true Φ beats it and comes near the
    # perplexity of the true Φ with the true θ (no fold-in) and the generator's own entropy
    cache = next((tmp_path / "work").glob("*.npz"))
    n_known = np.unique(np.load(cache)["train_indices"]).size
    refs = res["refs"]
    assert refs["uniform"][0] == pytest.approx(n_known, rel=1e-9)
    assert refs["true"][0] < refs["uniform"][0] / 3
    assert 0.95 < refs["true"][0] / refs["oracle"][0] < 1.3
    assert 0.95 < refs["true"][0] / refs["entropy"][0] < 1.3
    # the fitted models land between the truth and the uniform Φ
    for system in set(systems) - {"corpus"}:
        ppl = [r for r in rows if r[0] == system][-1][5][0]
        assert refs["true"][0] < ppl < refs["uniform"][0]
    text = out.read_text()
    assert "--quick" in text and "Load average" in text and "Machine:" in text and "| system | stage |" in text
    assert "Evaluator check (passed" in text


def test_the_table_replaces_its_own_section_and_keeps_the_rest(mod, tmp_path):
    out = tmp_path / "bench_scale.md"
    mod.write_section(out, "table 1\n")
    out.write_text(out.read_text() + "\n## Streaming at PubMed size\n\nother results\n")
    mod.write_section(out, "table 2\n")
    text = out.read_text()
    assert "table 2" in text and "table 1" not in text and text.count(mod.BEGIN) == 1
    assert text.endswith("## Streaming at PubMed size\n\nother results\n")
    other = tmp_path / "other.md"
    other.write_text("# written by hand\n")
    mod.write_section(other, "table\n")
    assert other.read_text().endswith("# written by hand\n") and "table" in other.read_text()


def test_refuses_to_write_on_a_loaded_machine(mod, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(mod.os, "getloadavg", lambda: (3.0, 2.0, 1.0))
    out = tmp_path / "t.md"
    assert mod.main(["--quick", "--out", str(out), "--workdir", str(tmp_path)]) is None
    assert not out.exists() and "refusing to write" in capsys.readouterr().out


def test_systems_and_groups(mod):
    assert mod.expand_systems(["numba", "plsa", "numba-1"]) == ["numba-1", "numba-2", "plsa"]
    assert mod.expand_systems(["all"]) == list(mod.SYSTEMS)
    assert mod.expand_systems(["ours"]) == ["plsa", "artm", "ttmm", "ptm", "lida"]
    with pytest.raises(SystemExit, match="unknown system 'lda'"):
        mod.expand_systems(["lda"])
