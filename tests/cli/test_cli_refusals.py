"""The command line refuses, before the fit, what would fail or be lost after it (issue 40, item 4):
an ``--out`` that cannot be written (a file in the way, a read-only folder or file system, too
little free space), an iteration count of 0, a number of topics whose arrays cannot fit; and a
save that fails for lack of space names the path.  Each is one line ``topicjax: error: ...``."""

from __future__ import annotations

import errno
import os
from collections import namedtuple

import pytest

import topicjax as tj
from topicjax.cli import commands
from topicjax.core import validation as V

FIT = ["fit", "--docs", "40", "--topics", "3", "--iterations", "2", "--quiet"]


def _one_error_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.startswith("topicjax: error:")]
    assert len(lines) == 1, err
    return lines[0]


def test_a_file_in_the_way_is_refused_before_the_fit(run, tmp_path):
    (tmp_path / "afile").write_text("mine")
    status, out, err = run(*FIT, "--out", tmp_path / "afile" / "model")
    assert status == 1
    line = _one_error_line(err)
    assert f"--out {tmp_path / 'afile' / 'model'}: {tmp_path / 'afile'} is a file, not a folder" in line
    assert "fitting" not in out  # before the fit
    assert (tmp_path / "afile").read_text() == "mine"


def test_a_read_only_folder_is_refused_before_the_fit(run, tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        try:  # root (and some file systems) write whatever the mode says: nothing to test then
            (folder / "probe").write_text("x")
            (folder / "probe").unlink()
            pytest.skip("this user writes into a folder of mode 0555 (root)")
        except PermissionError:
            pass
        status, out, err = run(*FIT, "--out", folder / "model")
        assert status == 1
        assert f"--out {folder / 'model'}: cannot write in {folder} (Permission denied)" in _one_error_line(err)
        assert "fitting" not in out
    finally:
        folder.chmod(0o755)


def test_a_read_only_file_system_is_refused_before_the_fit(run, tmp_path, monkeypatch):
    """A write refused with EROFS (what a read-only mount answers, whoever asks: root too),
    simulated where the command opens its probe file."""
    real_open = open

    def read_only(path, *args, **kwargs):
        if os.path.basename(str(path)).startswith(".topicjax-write-probe"):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(commands, "open", read_only, raising=False)
    status, out, err = run(*FIT, "--out", tmp_path / "new" / "model")
    assert status == 1
    assert f"cannot write in {tmp_path} (Read-only file system)" in _one_error_line(err)
    assert "fitting" not in out
    assert list(tmp_path.iterdir()) == []  # the probe is gone and nothing was created


def test_too_little_free_space_is_refused_before_the_fit(run, tmp_path, monkeypatch):
    """The saved model holds at least Φ (W x T) and Θ (T x D) in float32: 4 (25 + 36) 3 = 732
    bytes for 3 topics on the 25 words and 36 training documents of 40 bars documents."""
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(commands.shutil, "disk_usage", lambda path: usage(1 << 20, (1 << 20) - 100, 100))
    status, out, err = run(*FIT, "--out", tmp_path / "model")
    assert status == 1
    line = _one_error_line(err)
    assert f"--out {tmp_path / 'model'}: the disk of {tmp_path} has 0.0 MiB free" in line
    assert "fitting" not in out and not (tmp_path / "model").exists()


def test_a_save_that_runs_out_of_space_names_the_path(run, tmp_path, monkeypatch):
    def full(self, path):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(tj.PLSA, "save", full)
    status, out, err = run(*FIT, "--out", tmp_path / "model")
    assert status == 1
    line = _one_error_line(err)
    assert (f"--out {tmp_path / 'model'}: the model could not be saved to {tmp_path / 'model'}: No space left on "
            "device (free some space or choose a folder on another disk)") in line
    assert "[Errno" not in line


def test_zero_iterations_and_passes_are_refused(run, tmp_path):
    status, out, err = run("fit", "--docs", "40", "--topics", "3", "--iterations", "0", "--quiet")
    assert status == 1
    assert _one_error_line(err) == "topicjax: error: max_iter must be an integer >= 1, got 0 (option --iterations)"
    assert "fitted in" not in out
    status, _, err = run("fit-online", tmp_path / "store", "--passes", "0")
    assert status == 1
    assert "--passes must be an integer >= 1, got 0" in _one_error_line(err)


def test_topics_that_cannot_fit_are_refused_naming_the_option(run, monkeypatch):
    """On a machine of 3000 bytes PLSA holds 8 (W + D) = 8 (25 + 36) = 488 bytes per topic (Φ, Θ
    and the step's counts of both): 6 topics at most."""
    monkeypatch.setattr(V, "machine_memory", lambda: (3000, "a test machine"))
    status, out, err = run("fit", "--docs", "40", "--topics", "50", "--iterations", "2", "--quiet")
    assert status == 1
    line = _one_error_line(err)
    assert line.startswith("topicjax: error: n_components must be an integer <= 6 here, got 50: with 50 topics")
    assert line.endswith("a test machine (option --topics)")
    assert "fitted in" not in out
