"""The command line: the README's main job, topics/evaluate on a saved model, one-line errors."""

import shutil
import subprocess
import sys

import pytest

from topicjax import cli, datasets


def test_fit_bundled_then_topics_and_evaluate(tmp_path, capsys):
    out = tmp_path / "model"
    assert cli.main(["fit", "--docs", "300", "--iterations", "60", "--quiet", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "recovery of the true bars: mean Hellinger distance" in text
    assert "hold-out perplexity" in text and "sparsity: Phi" in text
    assert (out / "meta.json").is_file()

    assert cli.main(["topics", str(out), "-n", "3"]) == 0
    assert "topic   0:" in capsys.readouterr().out

    corpus, _ = datasets.make_bars(n_docs=40, seed=9)
    from topicjax.data.formats import write_uci

    write_uci(corpus, tmp_path / "uci", "bars")
    assert cli.main(["evaluate", str(out), str(tmp_path / "uci")]) == 0
    text = capsys.readouterr().out
    assert "hold-out perplexity (document completion)" in text and "coherence npmi" in text


def test_evaluate_reports_out_of_vocabulary_share(tmp_path, capsys):
    import numpy as np

    from topicjax import Corpus
    from topicjax.data.formats import write_uci

    out = tmp_path / "model"
    assert cli.main(["fit", "--docs", "100", "--iterations", "5", "--quiet", "--out", str(out)]) == 0
    corpus, _ = datasets.make_bars(n_docs=30, seed=4)
    # two words the model never saw: 3 tokens in document 0, and document 1 made of 5 of them only
    d = np.concatenate([corpus.doc_ids[corpus.doc_ids != 1], [0, 1]])
    w = np.concatenate([corpus.word_ids[corpus.doc_ids != 1], [corpus.n_words, corpus.n_words + 1]])
    c = np.concatenate([corpus.counts[corpus.doc_ids != 1], [3, 5]])
    mixed = Corpus.from_entries(d, w, c, vocab=list(corpus.vocab) + ["new1", "new2"], n_docs=corpus.n_docs)
    write_uci(mixed, tmp_path / "uci", "mixed")
    capsys.readouterr()
    assert cli.main(["evaluate", str(out), str(tmp_path / "uci")]) == 0
    text = capsys.readouterr().out
    n = mixed.n_tokens
    assert f"out-of-vocabulary tokens dropped: 8 of {n} ({100 * 8 / n:.2f}%)" in text
    assert "documents left without a known word: 1" in text


def test_fit_real_format_corpus_prints_top_words(tmp_path, capsys):
    corpus, _ = datasets.make_bars(n_docs=60, seed=2)
    from topicjax.data.formats import write_uci

    write_uci(corpus, tmp_path / "uci", "bars")
    assert cli.main(["fit", str(tmp_path / "uci"), "--topics", "4", "--iterations", "5", "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "top words:" in text and "coherence (NPMI" in text


def test_bad_corpus_is_a_one_line_error(tmp_path, capsys):
    bad = tmp_path / "docword.bad.txt"
    bad.write_text("2\n3\n2\n1 1 4\n2 7 1\n")
    (tmp_path / "vocab.bad.txt").write_text("a\nb\nc\n")
    assert cli.main(["fit", str(bad), "--quiet"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("topicjax: error:") and "\n" not in err
    assert "line 5" in err


def test_unknown_model_and_missing_path(capsys):
    assert cli.main(["fit", "--model", "nope", "--quiet", "--docs", "50", "--iterations", "2"]) == 1
    assert "unknown model 'nope'" in capsys.readouterr().err
    assert cli.main(["topics", "/nonexistent/model"]) == 1
    assert "not a saved model folder" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("topicjax") is None, reason="console script not installed (pip install -e .)")
def test_readme_main_job_console_script():
    """The README's main job, exactly as a new user runs it."""
    proc = subprocess.run(["topicjax", "fit", "--quiet"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "recovery of the true bars" in proc.stdout
    dist = float(proc.stdout.split("mean Hellinger distance ")[1].split()[0])
    assert dist < 0.15
