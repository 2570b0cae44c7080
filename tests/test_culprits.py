"""Errors that name the culprit (issue 40, item 5), from the user's side: what the user is told
when a call's arguments are in the wrong place or of the wrong shape, and when a command is given
the wrong kind of path."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys

import numpy as np
import pytest

import topicjax as tj
from tests.child_env import quick_child_env
from topicjax import regularizers as R
from topicjax.cli import main
from topicjax.estimator import CustomRegularizerWarning
from topicjax.evaluation import metrics


@pytest.fixture(scope="module")
def bars():
    corpus, phi, _ = tj.datasets.make_bars(n_docs=30, seed=0)
    return corpus, np.asarray(phi)


def cli(capsys, *args):
    status = main([str(a) for a in args])
    out = capsys.readouterr()
    return status, out.out, out.err


# ----------------------------------------------------------------------------- the API
def test_fit_many_with_ill_shaped_grids_names_them(bars):
    corpus, _ = bars
    model = tj.ARTM(3, max_iter=2, progress=False)
    with pytest.raises(ValueError, match=r"params must be a mapping \{name: \[value per model\]\}, got a list"):
        model.fit_many(corpus, params=[{"max_iter": 1}, {"max_iter": 2}])
    with pytest.raises(ValueError, match=r"params\['max_iter'\] must be a list of one value per model, got 5"):
        model.fit_many(corpus, params={"max_iter": 5})
    with pytest.raises(ValueError, match=r"taus must be an array \(n_models, 1\) of numbers"):
        tj.ARTM(3, max_iter=2, progress=False, regularizers=[R.sparse_theta() * 0.1]).fit_many(
            corpus, taus=[[1.0, 2.0], [3.0]])
    with pytest.raises(ValueError, match="seeds must be a one-dimensional sequence of integers"):
        model.fit_many(corpus, seeds=[[0, 1]])


def test_a_coefficient_given_to_a_factory_positionally_is_named():
    with pytest.raises(TypeError, match=r"sparse_phi\(\) got the number 0.5 as its parameter 'beta', which is not "
                                        r"the coefficient: write sparse_phi\(...\) \* 0.5"):
        R.sparse_phi(0.5)
    with pytest.raises(TypeError, match=r"decorrelate\(\) got the number 10000.0 as its parameter 'topics'"):
        R.decorrelate(1e4)
    assert R.sparse_phi("uniform").names == ("sparse_phi",)  # options by position stay allowed
    assert [float(c(1)) for c in (R.sparse_phi() * 0.5).coefs] == [0.5]


def test_metrics_with_arguments_in_the_wrong_order_name_them(bars):
    corpus, phi = bars
    observed, heldout = corpus.completion_split("tokens", seed=0)
    with pytest.raises(TypeError, match=r"heldout_log_likelihood: phi is a Corpus, expected a matrix; the arguments "
                                        r"are \(phi, observed, heldout\)"):
        metrics.heldout_perplexity(observed, phi, heldout)
    with pytest.raises(TypeError, match="heldout_log_likelihood: observed must be a Corpus, got ndarray"):
        metrics.heldout_perplexity(phi, phi, heldout)
    with pytest.raises(TypeError, match=r"top_words: phi must be a matrix of numbers.*\(phi, vocab, n\)"):
        metrics.top_words(list(corpus.vocab), phi, 3)
    with pytest.raises(TypeError, match=r"log_likelihood: theta is a Corpus.*\(phi, theta, corpus\)"):
        metrics.log_likelihood(phi, corpus, np.ones((phi.shape[1], corpus.n_docs)))
    with pytest.raises(TypeError, match=r"fold_in: observed must be a Corpus"):
        metrics.fold_in(phi, phi)
    assert np.isfinite(metrics.heldout_perplexity(phi, observed, heldout))  # the right order still works


def test_a_custom_regularizer_warns_at_save_that_only_its_class_reloads_it(bars, tmp_path):
    corpus, _ = bars

    def spread(phi, theta):
        return -(phi ** 2).sum()

    model = tj.ARTM(3, regularizers=[(spread, 0.1)], max_iter=2, progress=False).fit(corpus)
    with pytest.warns(CustomRegularizerWarning, match=r"'spread' are saved by name only: ARTM.load\(path, "
                                                      r"regularizers=.*command line .* cannot"):
        model.save(tmp_path / "m")
    with pytest.raises(ValueError, match="custom callable"):  # what the warning foretold
        tj.persistence.load(tmp_path / "m")
    again = tj.ARTM.load(tmp_path / "m", regularizers=[(spread, 0.1)])
    np.testing.assert_array_equal(again.phi_, model.phi_)


# ----------------------------------------------------------------------------- the command line
def test_commands_given_a_model_where_a_corpus_goes_or_a_contradicting_format(bars, tmp_path, capsys):
    corpus, _ = bars
    tj.PLSA(3, max_iter=2, progress=False).fit(corpus).save(tmp_path / "m")
    tj.data.formats.write_vw(corpus, tmp_path / "c.vw")
    tj.data.formats.write_uci(corpus, tmp_path / "uci", "bars")
    for args, says in (
        (("evaluate", tmp_path / "m", tmp_path / "m"), f"{tmp_path / 'm'} is a saved topicjax model, not a corpus"),
        (("fit", tmp_path / "m", "--iterations", "2"), "is a saved topicjax model, not a corpus"),
        (("fit", tmp_path / "c.vw", "--format", "uci"), f"--format uci contradicts {tmp_path / 'c.vw'}: its name says "
                                                        "it is a Vowpal Wabbit corpus; pass --format vw"),
        (("fit", tmp_path / "uci", "--format", "vw"), "--format vw contradicts .*UCI bag-of-words corpus; pass "
                                                      "--format uci"),
    ):
        status, out, err = cli(capsys, *args)
        assert status == 1 and err.count("\n") == 1 and "Traceback" not in err, err
        assert re.search(says, err), err


@pytest.mark.skipif(any(importlib.util.find_spec(m) for m in ("jax_cuda12_plugin", "jax_cuda13_plugin")),
                    reason="a CUDA plugin is installed: the platform may be there")
def test_a_jax_platform_that_is_not_there_is_one_line():
    code = "import sys; from topicjax.cli import main; sys.exit(main(['fit', '--iterations', '1']))"
    env = quick_child_env()
    env["JAX_PLATFORMS"] = "cuda"  # no such platform on this machine (a CPU runner)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 1, p.stderr[-2000:]
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("topicjax: error: JAX_PLATFORMS=cuda: JAX cannot start that platform on this machine")
    assert "Traceback" not in p.stderr
