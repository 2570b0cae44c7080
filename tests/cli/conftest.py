"""Shared pieces of the command-line tests: a tiny corpus in several formats, the command run
in-process (``main(argv)``) or as a process, and models fitted once per session."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from topicjax import cli, datasets
from topicjax.data.formats import write_ldac, write_uci, write_vw

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def bars(tmp_path_factory):
    """A 40-document bars corpus written as UCI, VW and lda-c (same content)."""
    folder = tmp_path_factory.mktemp("bars")
    corpus, _, _ = datasets.make_bars(n_docs=40, seed=3)
    write_uci(corpus, folder / "uci", "bars")
    write_vw(corpus, folder / "bars.vw")
    write_ldac(corpus, folder / "bars.ldac")
    # the training part of `fit --heldout 0.2` (seed 0): a PTM order sweep on it reuses the compiled
    # GEM step of the PTM fit (same shapes), which is most of the time of these tests
    train, _ = corpus.train_test_split(0.2, seed=0)
    write_uci(train, folder / "train", "bars")
    return {"corpus": corpus, "uci": folder / "uci", "vw": folder / "bars.vw", "ldac": folder / "bars.ldac",
            "train": folder / "train", "folder": folder}


@pytest.fixture
def run(capsys):
    """``run(*argv) -> (status, stdout, stderr)`` of ``topicjax`` in this process."""

    def go(*argv):
        capsys.readouterr()
        status = cli.main([str(a) for a in argv])
        out, err = capsys.readouterr()
        return status, out, err

    return go


def _run_process(argv, *, shell: bool = False, env_extra=None, timeout=300):
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS", "cpu"), **(env_extra or {})}
    if shell:
        cmd = ["bash", "-c", argv.replace("topicjax ", f"{sys.executable} -m topicjax.cli ", 1)]
    else:
        cmd = [sys.executable, "-m", "topicjax.cli", *map(str, argv)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)


@pytest.fixture
def process():
    """``process(argv, shell=False)``: ``topicjax`` as a new process (``python -m topicjax.cli``) of
    this working tree; with ``shell=True`` ``argv`` is a bash command line starting ``topicjax ``."""
    return _run_process


#: the options of each family's fit in the tests: tiny and short, with the family's main options
FITS = {
    "plsa": ["--topics", "3", "--iterations", "2"],
    "artm": ["--topics", "3", "--iterations", "3", "--trajectory", "paper", "--background", "1", "--sparse-start",
             "2", "--reg", "decorrelate=5@2,topics=specific"],
    "ptm": ["--topics", "3", "--iterations", "2", "--bic", "2020"],
    "ttmm": ["--topics", "3", "--iterations", "2", "--themes", "2", "--solver", "sgd", "--batch-size", "8"],
    "lida": ["--topics", "3", "--iterations", "2", "--variant", "lda", "--sampler", "exact"],
}


@pytest.fixture(scope="session")
def fitted(bars, tmp_path_factory):
    """``fitted(model) -> (folder, stdout)``: each family fitted once by ``topicjax fit --out``."""
    import io
    from contextlib import redirect_stderr, redirect_stdout

    cache: dict = {}
    root = tmp_path_factory.mktemp("models")

    def get(model):
        if model not in cache:
            out = root / model
            buf, err = io.StringIO(), io.StringIO()
            with redirect_stdout(buf), redirect_stderr(err):
                status = cli.main(["fit", str(bars["uci"]), "--model", model, *FITS[model], "--quiet", "--out",
                                   str(out), "--heldout", "0.2", "--top", "4"])
            assert status == 0, err.getvalue()
            cache[model] = (out, buf.getvalue())
        return cache[model]

    return get
