"""Smoke tests of experiments/lida_table1.py: the ``--quick`` protocol end to end on a synthetic
corpus (no shared data needed) in spawned worker processes, the task grid and the summary table,
and the 20 Newsgroups preparation (skipped without the shared data)."""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np
import pytest

#: among the suite's longest: run first (tests/conftest.py: pytest_collection_modifyitems)
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def mod(load_experiment):
    yield load_experiment("lida_table1", register=True)  # workers unpickle its functions by name
    sys.modules.pop("lida_table1", None)


def test_quick_run_in_workers_writes_table_and_keeps_notes(mod, tmp_path, monkeypatch):
    """``--quick --jobs 2``: the tasks run in two spawned worker processes (each imports JAX itself),
    every task comes back, and the table is written with the command; hand-written notes below the
    marker of an existing results file are kept."""
    # the workers inherit the environment: XLA's CPU backend at optimisation level 0 compiles their
    # FTM sweeps in two thirds of the time (compiling is most of a quick task; the checks below are
    # about the protocol and the table, not the last bits), and one thread of the compiled kernels
    # each (as main() gives XLA one thread per worker); monkeypatch restores both
    # after the run (main() adds its one-thread flags to XLA_FLAGS)
    monkeypatch.setenv("XLA_FLAGS", f"{os.environ.get('XLA_FLAGS', '')} --xla_backend_optimization_level=0".strip())
    monkeypatch.setenv("TOPICJAX_THREADS", "1")
    out = tmp_path / "table.md"
    out.write_text("an older table\n" + mod.NOTES_MARK + "\nA hand-written note.\n", encoding="utf-8")
    # 48 topic slots: --quick's 12 overflow at the first sweep, and the growth (new shapes) doubled
    # what each worker compiles
    results = mod.main(["--quick", "--models", "ftm", "--jobs", "2", "--k-max", "48", "--out", str(out)])
    assert sorted((r["model"], r["fold"]) for r in results) == [("ftm", 0), ("ftm", 1)]
    n_words = mod.quick_corpus().n_words
    for r in results:
        # document completion beats the uniform distribution over the vocabulary
        assert np.isfinite(r["logperp"]) and r["logperp"] < np.log(n_words) - 0.05, r
        assert r["topics"] >= 1 and r["backend"] == "cpu"
        assert r["K_max"] >= 48  # a size given with --quick is kept (not --quick's 12)
    text = out.read_text(encoding="utf-8")
    assert "Command: `python experiments/lida_table1.py --quick --models ftm --jobs 2" in text
    assert "2 worker(s)" in text
    assert "| FTM | " in text and "| bars | FTM | σ=0 | " in text and "| LDA |" not in text
    assert "A hand-written note." in text and "an older table" not in text
    # the reported mean is the mean over the folds
    mean = np.mean([r["logperp"] for r in results])
    assert f"| FTM | {mean:.3f} ± " in text
    # sec. 5.3's counts: FTM has every word active, its tokens reach fewer; means over the folds
    for r in results:
        assert r["words_per_topic"] == n_words and 1 <= r["words_per_topic_assigned"] < n_words
        assert r["docs_per_topic_assigned"] <= r["docs_per_topic"]
    wa = np.mean([r["words_per_topic_assigned"] for r in results])
    assert f"| {n_words} | {wa:.0f} | — | " in text.split("Sec. 5.3's counts")[1]


def test_task_grid_and_best_grid_point(mod):
    args = argparse.Namespace(
        corpus=["kos", "20news"], models=["lda", "ftm1", "ftm", "lida"], sigma=[0.0, 0.1], zeta=[0.1, 0.25],
        run_folds=3, folds=5, seed=0, sweeps=10, burn_in=5, hyper_start=2, test_sweeps=4, mode="parallel",
        mh_steps=4, batch_size=64, k_max=8, init_topics=4, init="random", eta=5.0, delta=1.0, lda_topics=6,
        news_docs=10, news_words=10, news_stop_words="english", unseen="keep", progress=False)
    tasks = mod.make_tasks(args)
    # per corpus and fold: LDA, FTM(δ=1), FTM x 2 σ, LIDA x 2 σ x 2 ζ
    assert len(tasks) == 2 * 3 * (1 + 1 + 2 + 4)
    assert tasks[0]["model"] == "lida" and tasks[0]["corpus"] == "kos"  # longest first
    recs = [dict(corpus_name="c", model="ftm", sigma=s, zeta=None, fold=f, logperp=lp, topics=3, K_max=8,
                 sweep_s=0.1, fit_s=1.0, topics_per_doc=1.0, words_per_topic=2.0, docs_per_topic=1.0,
                 hyper=dict(alpha=1, beta=1, eta=1, delta=1, gamma=1, xi=1))
            for s, f, lp in [(0.0, 0, 5.0), (0.0, 1, 5.2), (0.1, 0, 4.0), (0.1, 1, 4.4)]]
    args.models = ["ftm"]
    lines = mod.tables(recs, args)
    assert lines[2] == "| FTM | 4.200 ± 0.200 (n=2) [σ=0.1] | NA |"
    assert any(line.startswith("| c | FTM | σ=0 | 5.100 ± 0.100 (n=2) |") for line in lines)


def test_fold_split_leaves_out_only_words_unseen_in_training(mod):
    """``unseen="drop"``: exactly the test tokens of words that no training document uses are left
    out of both halves (a hand-built corpus: "x" only in document 4, "y" only in 5, "z" in 0 and
    5); with ``"keep"`` every test token stays (the one-token document 6 cannot be split: dropped)."""
    from topicjax.data.corpus import Corpus

    docs = [["a", "b", "a"], ["b", "c"], ["a", "c", "c"], ["z", "b"], ["x", "x", "a", "b"], ["y", "z", "c", "a"], ["x"]]
    vocab = ["a", "b", "c", "x", "y", "z"]
    entries = [(d, vocab.index(w)) for d, words in enumerate(docs) for w in words]
    corpus = Corpus.from_entries([d for d, _ in entries], [w for _, w in entries], [1] * len(entries), vocab=vocab)
    folds = [np.array([0, 1, 2, 3]), np.array([4, 5, 6])]
    train, observed, held, dropped = mod.fold_split(corpus, folds, 1, seed=0, unseen="drop")
    assert set(train.vocab) == {"a", "b", "c", "z"} and observed.vocab == train.vocab == held.vocab
    assert dropped == 1  # document 6 held only "x": emptied
    test_tokens = {w: n for w, n in zip(observed.vocab, observed.word_counts + held.word_counts) if n}
    assert test_tokens == {"a": 2, "b": 1, "c": 1, "z": 1}  # "x" x 2 and "y" left out
    train_k, observed_k, held_k, dropped_k = mod.fold_split(corpus, folds, 1, seed=0, unseen="keep")
    assert train_k.vocab == corpus.vocab and dropped_k == 1
    assert int(observed_k.n_tokens + held_k.n_tokens) == 8  # documents 4 and 5 whole
    with pytest.raises(ValueError, match="unseen"):
        mod.fold_split(corpus, folds, 1, seed=0, unseen="skip")


def test_20news_preparation(mod, monkeypatch):
    real, loaded = mod.load_20news, {}

    def load_once(n_docs, n_words, seed, stop_words="english"):
        """Each distinct request read once (reading the documents is most of this test's time)."""
        key = (n_docs, n_words, seed, stop_words)
        if key not in loaded:
            loaded[key] = real(n_docs=n_docs, n_words=n_words, seed=seed, stop_words=stop_words)
        return loaded[key]

    monkeypatch.setattr(mod, "load_20news", load_once)
    try:
        corpus = mod.load_20news(n_docs=300, n_words=500, seed=0)
    except FileNotFoundError as e:
        pytest.skip(f"shared data absent ({e})")
    assert corpus.n_words == 500 and corpus.n_docs <= 300
    vocab = set(corpus.vocab)
    assert not vocab & {"the", "and", "of", "to"}  # English stop words removed
    assert all(w.isalpha() and len(w) >= 2 for w in vocab)
    # the most frequent words are kept: every kept word is at least as frequent as the cut-off
    assert corpus.word_counts.min() >= 2
    # every word, stop words kept (our reading of the paper's "unprocessed" documents)
    raw = mod.load_20news(n_docs=300, n_words=None, seed=0, stop_words=None)
    assert {"the", "and", "of", "to"} <= set(raw.vocab) and vocab < set(raw.vocab)
    assert raw.n_words > 5 * corpus.n_words and raw.word_counts.min() == 1
    name, same = mod.load_corpus("20news", dict(news_docs=300, news_words=0, news_stop_words="none", seed=0))
    assert name == "20news-unprocessed" and "20news-unprocessed" in mod.PAPER
    assert same is raw  # load_corpus asked for those documents: every word, stop words kept


def test_topic_regimes_quick_run(load_experiment, tmp_path):
    """experiments/lida_topic_regimes.py ``--quick``: both starts and the LDA baseline fit, the IBP
    start begins with many more topics than the dense one, and both readings of eq. (45) are finite
    and beat the uniform distribution over the vocabulary."""
    mod = load_experiment("lida_topic_regimes")
    out = tmp_path / "regimes.md"
    mark = load_experiment("lida_table1").NOTES_MARK
    out.write_text("an older table\n" + mark + "\nA hand-written note.\n", encoding="utf-8")
    mod.main(["--quick", "--out", str(out)])
    text = out.read_text(encoding="utf-8")
    assert "A hand-written note." in text and "an older table" not in text
    rows = [line.split("|")[1:-1] for line in text.splitlines() if line.startswith(("| dense", "| ibp", "| lda"))]
    assert [r[0].strip() for r in rows] == ["dense", "ibp", "lda"]
    n_words = float(np.log(sys.modules["lida_table1"].quick_corpus().n_words))
    for r in rows:
        held, both = float(r[10]), float(r[11])
        assert np.isfinite(held) and np.isfinite(both) and max(held, both) < n_words
    assert int(rows[1][2]) > 3 * int(rows[0][2])  # live topics: IBP start vs 6 dense topics
    for r in rows:  # docs/topic, topics/doc, words/topic: the tokens reach only active entries
        for cell in r[4:7]:
            active, assigned = (float(v) for v in cell.split(" / "))
            assert 0 < assigned <= active, r
