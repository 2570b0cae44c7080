"""Every model through the command line: fit (saved first), then topics, evaluate and report on
the saved folder; the family options reach the estimator; order selection, online and sharded fits."""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest

from topicjax.persistence import load

FAMILIES = ["plsa", "artm", "ptm", "ttmm", "lida"]
CLASSES = {"plsa": "PLSA", "artm": "ARTM", "ptm": "PTM", "ttmm": "TTMM", "lida": "LIDA"}


@pytest.mark.parametrize("model", FAMILIES)
def test_fit_saves_then_topics_evaluate_report_reopen(model, fitted, bars, run):
    folder, out = fitted(model)
    # saved before anything is printed about the model
    assert out.index(f"model saved to {folder}") < out.index("top words")
    assert "hold-out perplexity (document completion on 8 test documents)" in out
    assert "coherence (NPMI" in out and "perplexity (training" in out
    saved = load(folder)
    assert type(saved).__name__ == CLASSES[model]
    assert np.asarray(saved.phi_).shape[0] == bars["corpus"].n_words

    status, text, err = run("topics", folder, "-n", "4")
    assert status == 0, err
    assert text.splitlines()[0].startswith(f"{CLASSES[model]} with {np.asarray(saved.phi_).shape[1]} topics")
    expected = saved.top_words(4)
    for t, words in enumerate(expected):  # a marked topic has its mark in brackets before the words
        assert re.search(rf"^  topic {t:3d}( \[[^\]]+\])?: {re.escape(' '.join(words))}$", text, re.M), text
    if model == "artm":  # --background 1: the last of the 3 topics is ARTM's background topic (Fig. 3)
        assert re.search(r"^  topic   2 \[background[^\]]*\]: ", text, re.M), text
        assert " topics (1 background" in text.splitlines()[0]

    # another format of the same documents: no word is out of the vocabulary
    status, text, err = run("evaluate", folder, bars["vw"])
    assert status == 0, err
    assert "out-of-vocabulary tokens dropped: 0 of 4000 (0.00%)" in text
    assert "hold-out perplexity (document completion on 40 documents)" in text
    assert "coherence npmi" in text

    status, text, err = run("report", folder, "--html")
    assert status == 0, err
    md = (folder / "report.md").read_text()
    assert md.startswith(f"# {CLASSES[model]}") and "## Topics (top 10 words)" in md
    assert "## Fit" in md and "perplexity_heldout" in md
    assert "![Scores by iteration](report_scores.png)" in md
    assert (folder / "report_scores.png").read_bytes()[:4] == b"\x89PNG"
    assert '<img src="report_scores.png"' in (folder / "report.html").read_text()
    for t, words in enumerate(saved.top_words(10)):
        assert re.search(rf"^\| {t}( \([^)]+\))? \| {re.escape(' '.join(words))} \|$", md, re.M), md
    if model == "artm":
        assert "| 2 (background" in md


def test_family_options_reach_the_estimators(fitted):
    artm = load(fitted("artm")[0])  # --trajectory paper --background 1 --sparse-start 2 and one --reg
    assert artm.background_ == [2]
    assert artm.regularizer_names_ == ["smooth_phi", "smooth_theta", "sparse_phi", "sparse_theta", "decorrelate"]
    first, second = artm.scores_[0], artm.scores_[1]
    assert (first["tau/smooth_phi"], first["tau/smooth_theta"]) == (0.1, 0.8)  # ARTM sec. 5
    assert (first["tau/sparse_phi"], second["tau/sparse_phi"]) == (0.0, 1.0)  # switched on at 2
    assert (first["tau/decorrelate"], second["tau/decorrelate"]) == (0.0, 5.0)  # @2
    ptm = load(fitted("ptm")[0])
    assert ptm.bic == "2020" and ptm.max_iter == 2
    ttmm = load(fitted("ttmm")[0])
    assert (ttmm.n_themes, ttmm.solver, ttmm.batch_size, ttmm.n_components) == (2, "sgd", 8, 3)
    lida = load(fitted("lida")[0])
    assert (lida.variant, lida.sampler) == ("lda", "exact")


def test_regularizer_specs():
    from topicjax.cli.families import parse_regularizer
    from topicjax.regularizers import Step

    reg, tau = parse_regularizer("sparse-theta=0.5@10,topics=specific,rate=0.08")
    assert reg.names == ("sparse_theta",) and isinstance(tau, Step)
    assert (float(tau.start), float(tau.value)) == (10.0, 0.5)
    assert reg.terms[0].spec["kwargs"] == {"alpha": None, "topics": "specific", "docs": None, "rate": 0.08}
    reg, tau = parse_regularizer("smooth_phi,topics=[0, 2]")
    assert tau == 1.0 and reg.terms[0].spec["kwargs"]["topics"] == [0, 2]
    for bad, message in [("=3", "expected NAME"), ("decorrelate@x", "start 'x' is not an iteration"),
                         ("decorrelate,5", "'5' is not key=value")]:
        with pytest.raises(ValueError, match=message):
            parse_regularizer(bad)


def test_bundled_bars_pictures(run, tmp_path):
    # the shapes of the PLSA fit of the fixture: its compiled step is reused
    status, out, err = run("fit", "--docs", "40", "--topics", "3", "--iterations", "2", "--heldout", "0.2", "--quiet",
                           "--out", tmp_path / "b")
    assert status == 0, err
    assert "recovery of the true bars: mean Hellinger distance" in out
    assert json.loads((tmp_path / "b" / "fit_summary.json").read_text())["recovery_distance"] >= 0


def test_select_order_bic_curve_best_model_and_report(bars, run, tmp_path):
    out_dir = tmp_path / "order"
    status, out, err = run("select-order", bars["train"], "--max-topics", "3", "--min-topics", "2", "--iterations",
                           "2", "--bic", "2020", "--quiet", "--out", out_dir, "--top", "3")
    assert status == 0, err
    curve = json.loads((out_dir / "order_selection.json").read_text())
    assert curve["orders"] == [3, 2] and len(curve["bics"]) == 2 and curve["bic"] == "2020"
    best = curve["orders"][int(np.argmin(curve["bics"]))]
    assert curve["best_order"] == best and f"best order: M = {best}" in out
    for m, b in zip(curve["orders"], curve["bics"]):
        assert f"M = {m:4d}   BIC = {b:.6g}" in out
    model = load(out_dir)
    assert np.asarray(model.phi_).shape[1] == best and model.bic_ == pytest.approx(min(curve["bics"]))
    assert run("topics", out_dir)[0] == 0
    status, _, err = run("report", out_dir)
    assert status == 0, err
    md = (out_dir / "report.md").read_text()
    assert "![BIC by number of topics](report_bic.png)" in md and "(best)" in md
    assert (out_dir / "report_bic.png").read_bytes()[:4] == b"\x89PNG"
    # the estimator's own message, with the option named
    status, _, err = run("select-order", bars["uci"], "--max-topics", "3", "--iterations", "0", "--quiet")
    assert status == 1 and "max_iter" in err and "(option --iterations)" in err


def test_convert_then_fit_online_reopens(bars, run, tmp_path):
    store = tmp_path / "store"
    status, out, err = run("convert", bars["uci"], store, "--batch-size", "15")
    assert status == 0, err
    assert "40 documents, 25 words, 4000 tokens in 3 batch(es) of 15 (uci corpus streamed" in out
    # lda-c is read in memory and stored: the same documents
    status, out, err = run("convert", bars["ldac"], tmp_path / "store2", "--batch-size", "15")
    assert status == 0 and "ldac corpus read in memory" in out, err
    status, out, err = run("fit-online", store, "--topics", "3", "--passes", "2", "--reg", "smooth_phi=0.01",
                           "--quiet", "--out", tmp_path / "online", "--top", "3")
    assert status == 0, err
    assert out.index("model saved to") < out.index("top words:")
    assert "perplexity of the last pass" in out
    model = load(tmp_path / "online")
    assert type(model).__name__ == "ARTM" and model.n_iter_ == 6 and model.regularizer_names_ == ["smooth_phi"]
    assert np.allclose(np.asarray(model.phi_).sum(0), 1, atol=1e-5)
    assert run("topics", tmp_path / "online")[0] == 0
    status, out, err = run("evaluate", tmp_path / "online", bars["uci"])
    assert status == 0 and "hold-out perplexity (document completion on 40 documents)" in out, err
    assert run("report", tmp_path / "online")[0] == 0
    assert "perplexity" in (tmp_path / "online" / "report.md").read_text()
    # transform works on the reopened online model (it is an ARTM)
    assert model.transform(bars["corpus"]).shape == (40, 3)


def test_sharded_fit_across_local_devices(bars, tmp_path, process):
    """A new process: the command line asks XLA for 2 CPU devices before JAX starts."""
    proc = process(["fit", bars["uci"], "--model", "artm", "--devices", "2", "--topics", "3", "--iterations",
                        "2", "--quiet", "--out", tmp_path / "s", "--heldout", "0"])
    assert proc.returncode == 0, proc.stderr
    assert "sharding the documents over 2 cpu device(s)" in proc.stdout
    assert type(load(tmp_path / "s")).__name__ == "ARTM"


def test_sharded_fit_errors(bars, run):
    status, _, err = run("fit", bars["uci"], "--model", "ttmm", "--devices", "2", "--quiet", "--iterations", "2")
    assert status == 1 and "--devices (a sharded fit) is for --model plsa and artm, not ttmm" in err
    status, _, err = run("fit", bars["uci"], "--devices", "0", "--quiet", "--iterations", "2")
    assert status == 1 and "--devices must be an integer >= 1, got 0" in err


@pytest.mark.skipif(shutil.which("topicjax") is None, reason="console script not installed (pip install -e .)")
def test_console_script_help():
    import subprocess

    proc = subprocess.run(["topicjax", "--help"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "select-order" in proc.stdout


@pytest.mark.slow
def test_readme_main_job(run):
    """The README's main job, with its defaults: the bundled bars are recovered.  In this process
    (``main(argv)``, as the console script calls it): a new interpreter adds only JAX's start,
    which test_sharded_fit_across_local_devices and test_console_script_help cover."""
    status, out, err = run("fit", "--quiet")
    assert status == 0, err
    dist = float(out.split("mean Hellinger distance ")[1].split()[0])
    assert dist < 0.15
