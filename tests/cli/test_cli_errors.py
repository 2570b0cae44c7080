"""The command line never shows a traceback: one line ``topicjax: error: ...`` and status 1
(``--debug`` shows the traceback), status 2 for usage, a quiet broken pipe, bad numbers refused
with the estimator's own message, and a fit that never loses its model to a later step."""

from __future__ import annotations

import json

import numpy as np
import pytest

from topicjax import Corpus
from topicjax.data.formats import write_ldac
from topicjax.persistence import load


def _one_error_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("topicjax: error: ") and "Traceback" not in err
    return lines[0]


def test_bad_corpus_is_one_line_naming_the_line(tmp_path, run):
    bad = tmp_path / "docword.bad.txt"
    bad.write_text("2\n3\n2\n1 1 4\n2 7 1\n")
    (tmp_path / "vocab.bad.txt").write_text("a\nb\nc\n")
    status, _, err = run("fit", bad, "--quiet")
    assert status == 1
    assert "line 5" in _one_error_line(err)


@pytest.mark.parametrize("argv, message", [
    (["fit", "--model", "nope", "--docs", "30"], "unknown model 'nope'; available: plsa, artm, ptm, ttmm, lida"),
    (["topics", "/nonexistent/model"], "/nonexistent/model does not exist"),
    (["evaluate", "/nonexistent/model", "/nonexistent/corpus"], "/nonexistent/model does not exist"),
    (["fit", "/nonexistent/corpus"], "/nonexistent/corpus does not exist"),
    (["fit", "--docs", "30", "--themes", "3"], "--themes does not apply to --model plsa"),
    (["fit", "--docs", "30", "--reg", "decorrelate=1"], "--reg and --trajectory are ARTM options"),
    (["fit", "--docs", "30", "--model", "artm", "--reg", "sparse_thetta=1"], "unknown regularizer 'sparse_thetta'"),
    (["fit", "--docs", "30", "--model", "artm", "--reg", "decorrelate=high"], "coefficient 'high' is not a number"),
    (["fit", "--docs", "30", "--model", "artm", "--reg", "decorrelate=1,colour=red"],
     "unexpected keyword argument 'colour'"),
    (["fit", "--docs", "30", "--model", "artm", "--decorrelation", "3"], "belong to --trajectory paper"),
    (["fit-online", "/nonexistent/store"], "/nonexistent/store is not a batch store"),
    (["report", "/nonexistent/model"], "/nonexistent/model does not exist"),
])
def test_errors_before_any_fit_are_one_line(argv, message, run):
    status, _, err = run(*argv, "--quiet") if argv[0] == "fit" else run(*argv)
    assert status == 1
    assert message in _one_error_line(err)


@pytest.mark.parametrize("model", ["plsa", "artm", "ptm", "ttmm", "lida"])
def test_iterations_zero_refused_with_the_estimators_message(model, bars, run):
    status, _, err = run("fit", bars["uci"], "--model", model, "--iterations", "0", "--quiet")
    assert status == 1
    line = _one_error_line(err)
    assert "max_iter must be" in line and "got 0 (option --iterations)" in line


@pytest.mark.parametrize("argv, message", [
    (["--topics", "0"], "n_components must be"),
    (["--seed", "-1"], "random_state"),
    (["--model", "ttmm", "--themes", "0"], "n_themes must be an integer >= 1, got 0 (option --themes)"),
    (["--model", "ttmm", "--solver", "adam"], "solver must be one of 'em', 'sgd', got 'adam' (option --solver)"),
    (["--model", "ptm", "--bic", "1999"], "bic must be one of"),
    (["--model", "lida", "--sampler", "bogus"], "(option --sampler)"),
    (["--model", "lida", "--variant", "bogus"], "variant must be one of 'lida', 'ftm', 'sstm', 'lda', got 'bogus' (option --variant)"),
    (["--tol", "nan"], "tol must be a finite number"),
])
def test_bad_numbers_and_choices_refused_by_the_estimator(argv, message, bars, run):
    status, _, err = run("fit", bars["uci"], "--iterations", "1", "--quiet", *argv)
    assert status == 1
    assert message in _one_error_line(err)


def test_usage_errors_exit_2_without_traceback(run):
    status, _, err = run("fit", "--topics", "many")
    assert status == 2 and "invalid int value: 'many'" in err and "Traceback" not in err
    status, _, err = run("frobnicate")
    assert status == 2 and "invalid choice" in err


def test_corrupt_model_folders(fitted, run, tmp_path):
    src, _ = fitted("plsa")
    for i, (edit, message) in enumerate([
        (lambda m: m.pop("vocab"), "meta.json field 'vocab' must be a non-empty list of words, it is missing"),
        (lambda m: m["params"].update(colour=1), "unknown parameter(s) ['colour'] for PLSA"),
        (lambda m: m.update(model="Nonsense"), "meta.json field 'model' is 'Nonsense', not a topicjax model"),
    ]):
        folder = tmp_path / f"m{i}"
        folder.mkdir()
        (folder / "arrays.npz").write_bytes((src / "arrays.npz").read_bytes())
        meta = json.loads((src / "meta.json").read_text())
        edit(meta)
        (folder / "meta.json").write_text(json.dumps(meta))
        for cmd in ("topics", "report"):
            status, _, err = run(cmd, folder)
            assert status == 1 and message in _one_error_line(err)
    (tmp_path / "m0" / "arrays.npz").write_bytes(b"")
    status, _, err = run("topics", tmp_path / "m0")
    assert status == 1 and "arrays.npz: corrupt array file" in _one_error_line(err)


def test_unexpected_exception_one_line_then_debug_traceback(monkeypatch, run, fitted):
    from topicjax.cli import commands

    def broken(path):
        raise KeyError("phi_")

    monkeypatch.setattr(commands, "load_model", broken)
    folder, _ = fitted("plsa")
    status, _, err = run("topics", folder)
    assert status == 1
    line = _one_error_line(err)
    assert "KeyError: 'phi_'" in line and "run with --debug for the traceback" in line
    status, _, err = run("topics", folder, "--debug")
    assert status == 1 and "Traceback (most recent call last)" in err and "KeyError" in err
    status, _, err = run("--debug", "topics", folder)
    assert status == 1 and "Traceback (most recent call last)" in err


def test_one_token_documents_saved_first_then_skipped_and_counted(tmp_path, run):
    """The issue's case: documents of one token cannot be split for document completion; the
    model is saved before, the others are evaluated and the skipped ones counted."""
    rng = np.random.default_rng(0)
    dense = rng.poisson(1.5, size=(30, 12))
    dense[:, 0] += 1
    dense[::3] = 0
    dense[::3, 5] = 1  # every third document is one token
    corpus = Corpus.from_dense(dense)
    write_ldac(corpus, tmp_path / "short.ldac")
    status, out, err = run("fit", tmp_path / "short.ldac", "--topics", "2", "--iterations", "2", "--quiet", "--out",
                           tmp_path / "m", "--heldout", "0.5", "--seed", "1")
    assert status == 0, err
    assert out.index("model saved to") < out.index("hold-out perplexity")
    _, test = corpus.train_test_split(0.5, seed=1)
    n_short = int((test.doc_lengths < 2).sum())
    assert n_short > 0
    assert (f"hold-out perplexity (document completion on {test.n_docs - n_short} test documents; {n_short} with "
            "fewer than 2 tokens skipped)") in out
    status, out, err = run("evaluate", tmp_path / "m", tmp_path / "short.ldac")
    assert status == 0, err
    assert "document completion on 20 documents; 10 with fewer than 2 known tokens skipped" in out


def test_a_failing_report_step_keeps_the_saved_model(monkeypatch, bars, run, tmp_path):
    from topicjax.evaluation import metrics

    def boom(*a, **k):
        raise RuntimeError("coherence exploded")

    monkeypatch.setattr(metrics, "coherence", boom)
    status, out, err = run("fit", bars["uci"], "--topics", "3", "--iterations", "2", "--quiet", "--out",
                           tmp_path / "m", "--heldout", "0.2")
    assert status == 1
    assert (f"topicjax: error: coherence: coherence exploded; the model is saved in {tmp_path / 'm'}"
            in _one_error_line(err))
    assert "hold-out perplexity" in out  # the other steps ran
    assert load(tmp_path / "m").phi_.shape == (25, 3)
    # without --out, the fit says that it is not saved
    status, out, _ = run("fit", bars["uci"], "--topics", "3", "--iterations", "2", "--quiet", "--heldout", "0.2")
    assert "note: the model is not saved (pass --out DIR to keep it)" in out


def test_warnings_are_one_line(tmp_path, run, bars, fitted):
    from dataclasses import replace

    from topicjax.data.formats import write_vw

    corpus = bars["corpus"]
    write_vw(replace(corpus, doc_names=tuple(["same"] * corpus.n_docs)), tmp_path / "dup.vw")
    status, out, err = run("evaluate", fitted("plsa")[0], tmp_path / "dup.vw")
    assert status == 0, err
    warn = [ln for ln in err.splitlines() if ln.strip()]
    assert len(warn) == 1 and warn[0].startswith("topicjax: warning: ")
    assert "document name 'same' was already used on line 1" in warn[0]


@pytest.fixture(scope="module")
def big_model(tmp_path_factory):
    """A saved model whose `topics -n 3000` prints more than a pipe buffer holds (4 x 3000 x 10
    bytes), so that the writer meets the closed pipe."""
    from topicjax import PLSA

    rng = np.random.default_rng(1)
    corpus = Corpus.from_dense(rng.poisson(0.5, size=(20, 3000)) + (np.arange(3000) % 7 == 0),
                               vocab=[f"word{i:05d}" for i in range(3000)])
    folder = tmp_path_factory.mktemp("big") / "model"
    PLSA(4, max_iter=1, progress=False).fit(corpus).save(folder)
    return folder


def test_broken_pipe_exits_quietly(big_model, process):
    """``topicjax topics DIR | head -1``: no message, status 0 or 141 (with pipefail)."""
    proc = process(f"set -o pipefail; topicjax topics {big_model} -n 3000 | head -1", shell=True)
    assert proc.returncode in (0, 141), proc.stderr
    assert proc.stderr == ""
    assert proc.stdout.startswith("PLSA with 4 topics") and proc.stdout.count("\n") == 1
