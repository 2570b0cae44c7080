"""A save that can only replace a model (issue 26, item 1).

``save`` creates a new folder, fills an empty one or replaces the model of a model folder (its two
files, atomically; everything else in the folder is kept).  It refuses -- before writing anything --
``.``, ``..``, a file, any other non-empty folder, and on the command line an ``--out`` that is,
holds or lies inside the corpus.  Saves to one folder exclude each other (a lock that dies with its
process); what a killed save leaves is removed by the next save or load, never while a save runs.
The kills are made deterministic by stopping the saving process at a chosen point
(``persistence._stage``) before ``SIGKILL``; a last test kills a process that saves in a loop at
random moments.
"""

from __future__ import annotations

import fcntl
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import topicjax as tj
from topicjax import cli, persistence
from topicjax.data.formats import write_uci
from topicjax.persistence import SaveRefusedError

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def corpus():
    return tj.datasets.make_bars(n_docs=30, doc_length=20, seed=4)[0]


@pytest.fixture(scope="module")
def models(corpus):
    """Two small PLSA models with different Φ."""
    a = tj.PLSA(4, max_iter=4, random_state=0, progress=False).fit(corpus)
    b = tj.PLSA(4, max_iter=4, random_state=9, progress=False).fit(corpus)
    assert not np.array_equal(a.phi_, b.phi_)
    return a, b


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """A biggish model (Φ of 20000 words x 40 topics, a few MB) saved in a folder: the one the
    child processes save."""
    rng = np.random.default_rng(0)
    W, D = 20000, 200
    m = sp.random(D, W, density=0.002, format="lil", random_state=1, data_rvs=lambda n: rng.integers(1, 4, n))
    for d in range(D):
        m[d, d] = 1  # no empty document
    c = tj.Corpus.from_sparse(m.tocsr(), [f"w{j}" for j in range(W)])
    model = tj.PLSA(40, max_iter=2, random_state=0, progress=False).fit(c)
    folder = tmp_path_factory.mktemp("big") / "model"
    model.save(folder)
    return model, folder


def snapshot(folder: Path) -> dict:
    """Every entry under ``folder``: path -> file bytes (None for folders, the target for links)."""
    return {str(p.relative_to(folder)): (os.readlink(p) if p.is_symlink() else None if p.is_dir() else p.read_bytes())
            for p in sorted(folder.rglob("*"))}


def names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def hidden(folder: Path) -> list[str]:
    """Hidden entries (where saves keep their pieces and locks) in ``folder`` and its sub-folders;
    the list of files describing a model (``persistence.DESCRIBING_MANIFEST``) is no leftover."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob(".*") if p.name != tj.persistence.DESCRIBING_MANIFEST)


# ----------------------------------------------------------------------------- what a save writes
def test_a_new_folder_and_an_empty_folder_are_written(models, tmp_path):
    a, _ = models
    a.save(tmp_path / "x" / "y" / "m")  # parents created
    assert names(tmp_path / "x" / "y" / "m") == ["arrays.npz", "meta.json"]
    (tmp_path / "empty").mkdir()
    a.save(tmp_path / "empty")
    np.testing.assert_array_equal(tj.PLSA.load(tmp_path / "empty").phi_, a.phi_)
    assert hidden(tmp_path) == []


def test_resaving_replaces_the_model_and_keeps_the_users_files(models, tmp_path):
    a, b = models
    a.save(tmp_path / "m")
    (tmp_path / "m" / "notes.txt").write_text("my notes")
    (tmp_path / "m" / "figures").mkdir()
    (tmp_path / "m" / "figures" / "plot.png").write_bytes(b"\x89PNG")
    inode = (tmp_path / "m").stat().st_ino
    b.save(tmp_path / "m")
    np.testing.assert_array_equal(tj.PLSA.load(tmp_path / "m").phi_, b.phi_)
    assert (tmp_path / "m" / "notes.txt").read_text() == "my notes"
    assert (tmp_path / "m" / "figures" / "plot.png").read_bytes() == b"\x89PNG"
    assert names(tmp_path / "m") == ["arrays.npz", "figures", "meta.json", "notes.txt"]
    assert (tmp_path / "m").stat().st_ino == inode  # the folder itself is never renamed away
    assert names(tmp_path) == ["m"]


def test_a_linked_model_folder_stays_a_link(models, tmp_path):
    a, b = models
    a.save(tmp_path / "real")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    b.save(tmp_path / "link")
    assert (tmp_path / "link").is_symlink()
    np.testing.assert_array_equal(tj.PLSA.load(tmp_path / "real").phi_, b.phi_)


@pytest.mark.parametrize("contents", [
    {"thesis.tex": b"\\chapter{One}", "data/survey.csv": b"a,b\n1,2\n"},
    {".git/HEAD": b"ref: refs/heads/main\n"},  # hidden files count
    {"meta.json": b'{"title": "my project"}', "arrays.npz": b"not ours"},  # names like a model's, not a model
    {"meta.json": b'{"model": "PLSA", "format_version": 1}'},  # no arrays.npz beside it
], ids=["user-files", "hidden-only", "look-alike", "meta-without-arrays"])
def test_a_folder_that_does_not_hold_a_model_is_refused_untouched(models, tmp_path, contents):
    a, _ = models
    folder = tmp_path / "proj"
    for name, data in contents.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    before = snapshot(tmp_path)
    with pytest.raises(SaveRefusedError, match=rf"^{folder} is a folder that does not hold a topicjax model \(it "
                                               rf"holds .*\); a save only creates a folder, fills an empty one or "
                                               "replaces a saved model: choose another folder$"):
        a.save(folder)
    assert snapshot(tmp_path) == before


def test_dot_dotdot_files_and_broken_links_are_refused_untouched(models, tmp_path, monkeypatch):
    a, _ = models
    work = tmp_path / "work"
    work.mkdir()
    (work / "paper.txt").write_text("draft")
    (work / "dangling").symlink_to(tmp_path / "nowhere")
    monkeypatch.chdir(work)
    before = snapshot(tmp_path)
    for target in (".", Path("."), "..", "sub/.."):
        with pytest.raises(SaveRefusedError, match=rf"^cannot save a model to '{target}': a model is saved to a "
                                                   "folder of its own"):
            a.save(target)
    with pytest.raises(SaveRefusedError, match=r"^paper.txt exists and is not a folder: a model is saved as a folder, "
                                               "and a save never overwrites a file$"):
        a.save("paper.txt")
    with pytest.raises(SaveRefusedError, match=r"^dangling is a broken symbolic link"):
        a.save("dangling")
    assert snapshot(tmp_path) == before
    (work / "paper.txt").unlink()
    (work / "dangling").unlink()
    with pytest.raises(SaveRefusedError, match=r"^cannot save a model to '\.'"):  # even when it is empty
        a.save(".")


# ----------------------------------------------------------------------------- interrupted saves (in this process)
def stop_at(monkeypatch, stage, action):
    def hook(name, path):
        if name == stage:
            action(path)

    monkeypatch.setattr(persistence, "_stage", hook)


def interrupt(path):
    raise KeyboardInterrupt


def test_an_interrupted_replacement_leaves_one_model_and_no_pieces(models, tmp_path, monkeypatch):
    a, b = models
    a.save(tmp_path / "m")
    stop_at(monkeypatch, "written", interrupt)  # before any rename: the previous model stays
    with pytest.raises(KeyboardInterrupt):
        b.save(tmp_path / "m")
    np.testing.assert_array_equal(tj.PLSA.load(tmp_path / "m").phi_, a.phi_)
    assert hidden(tmp_path) == []
    stop_at(monkeypatch, "arrays-replaced", interrupt)  # between the renames: the save is finished
    with pytest.raises(KeyboardInterrupt):
        b.save(tmp_path / "m")
    np.testing.assert_array_equal(tj.PLSA.load(tmp_path / "m").phi_, b.phi_)
    assert hidden(tmp_path) == []
    stop_at(monkeypatch, "written", interrupt)  # a new folder: nothing appears
    with pytest.raises(KeyboardInterrupt):
        b.save(tmp_path / "new")
    assert names(tmp_path) == ["m"] and hidden(tmp_path) == []


@pytest.mark.parametrize("stage, expect", [("written", 0), ("arrays-replaced", 1)])
def test_a_load_during_a_replacement_reads_one_whole_model(models, tmp_path, monkeypatch, stage, expect):
    """A reader between the two renames gets the new model (its meta.json is found by the save id),
    and leaves the pieces of the running save alone."""
    a, b = models
    a.save(tmp_path / "m")
    seen = []

    def read(path):
        seen.append((tj.PLSA.load(path).phi_, hidden(path)))

    stop_at(monkeypatch, stage, read)
    b.save(tmp_path / "m")
    phi, pieces = seen[0]
    np.testing.assert_array_equal(phi, models[expect].phi_)
    assert pieces and all(p.startswith((".arrays.npz.saving-", ".meta.json.saving-")) for p in pieces)
    assert hidden(tmp_path) == []


def test_mixed_files_of_two_saves_are_refused_by_load(models, tmp_path):
    a, b = models
    a.save(tmp_path / "a")
    b.save(tmp_path / "b")
    (tmp_path / "b" / "arrays.npz").replace(tmp_path / "a" / "arrays.npz")
    with pytest.raises(persistence.SavedModelError, match=rf"^{tmp_path / 'a'}: arrays.npz and meta.json come from "
                                                          "different saves"):
        tj.PLSA.load(tmp_path / "a")


def test_a_held_lock_refuses_a_save_and_keeps_leftovers_for_later(models, tmp_path, monkeypatch):
    """While another process holds the lock (here: a second open file in this process), a save is
    refused and a load does not clean up; once it is free, a load does."""
    a, b = models
    a.save(tmp_path / "m")
    monkeypatch.setattr(persistence, "LOCK_PATIENCE", 0.05)
    fd = os.open(tmp_path / ".m.lock", os.O_RDWR | os.O_CREAT)
    os.write(fd, b"4242\n")
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        before = snapshot(tmp_path)
        with pytest.raises(SaveRefusedError, match=rf"^another process \(process 4242\) is saving to {tmp_path / 'm'}; "
                                                   r"this save wrote nothing \(save again when"):
            b.save(tmp_path / "m")
        assert snapshot(tmp_path) == before
        (tmp_path / "m" / ".meta.json.saving-0123456789abcdef").write_text("{}")
        tj.PLSA.load(tmp_path / "m")
        assert hidden(tmp_path) == [".m.lock", "m/.meta.json.saving-0123456789abcdef"]
    finally:
        os.close(fd)
    np.testing.assert_array_equal(tj.PLSA.load(tmp_path / "m").phi_, a.phi_)
    assert hidden(tmp_path) == []  # the lock's file too: nobody holds it


# ----------------------------------------------------------------------------- other processes: SIGKILL, races
CHILD = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    import numpy as np
    from topicjax import persistence

    target, source, stage, flag = sys.argv[1:5]
    # the model as its save wrote it, saved again through persistence.save_folder: the one writer of
    # every model's save (``model.save`` hands it its arrays and metadata), so that this process needs
    # no estimator class -- nor JAX and scikit-learn: 0.3 s of CPU per child instead of 3.8 s
    model = persistence.load_folder(source)

    def pause(name, path):
        if name == stage:
            Path(flag).write_text(str(os.getpid()))
            while not Path(flag + ".go").exists():
                time.sleep(0.01)

    persistence._stage = pause
    if stage == "partial":  # stopped while arrays.npz is half written
        def savez(fh, **arrays):
            fh.write(b"PK\\x03\\x04" + bytes(100000))
            fh.flush()
            pause("partial", None)
        np.savez = savez
    if stage == "race":  # loaded and ready: save when the start file appears, without waiting for the lock
        Path(sys.argv[5]).touch()
        while not Path(flag).exists():
            time.sleep(0.002)
        persistence.LOCK_PATIENCE = 0.0
    if stage == "loop":  # save again and again, alternating two models
        other = persistence.load_folder(sys.argv[5])
        for i in range(10 ** 6):
            persistence.save_folder(target, *(model if i % 2 == 0 else other))
            print(i, flush=True)
    try:
        persistence.save_folder(target, *model)
        print("saved", flush=True)
    except persistence.SaveRefusedError as e:
        print("refused:", e, flush=True)
""")


def child(*args):
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "JAX_PLATFORMS": "cpu"}
    return subprocess.Popen([sys.executable, "-c", CHILD, *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def wait_for(flag: Path, proc, timeout=120.0):
    end = time.monotonic() + timeout
    while not flag.exists():
        if proc.poll() is not None:
            raise AssertionError(f"the saving process ended before its stop: {proc.communicate()}")
        assert time.monotonic() < end, "the saving process did not reach its stop"
        time.sleep(0.02)


def killed_at(stage, target, source, tmp_path):
    flag = tmp_path / f"at-{stage}-{Path(target).name}"
    proc = child(target, source, stage, flag)
    try:
        wait_for(flag, proc)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate()
    assert proc.returncode == -signal.SIGKILL


@pytest.mark.slow
@pytest.mark.parametrize("stage, replace", [("partial", True), ("written", True), ("arrays-replaced", True),
                                            ("partial", False), ("written", False)])
def test_a_save_killed_midway_leaves_one_model_and_the_next_load_cleans_up(models, big, tmp_path, stage, replace):
    a, _ = models
    new, source = big
    target = tmp_path / "m"
    if replace:
        a.save(target)
        (target / "notes.txt").write_text("kept")
    killed_at(stage, target, source, tmp_path)
    assert hidden(tmp_path), "the kill left the pieces of a save (the test stopped it mid-way)"
    if not replace:
        with pytest.raises(FileNotFoundError, match=f"^{target} does not exist$"):
            tj.PLSA.load(target)
    else:
        back = tj.PLSA.load(target)
        # killed before its first rename the save did not happen; after it, it is finished
        np.testing.assert_array_equal(back.phi_, (new if stage == "arrays-replaced" else a).phi_)
        assert (target / "notes.txt").read_text() == "kept"
    assert hidden(tmp_path) == []
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("at-")) == (["m"] if replace else [])


@pytest.mark.slow
def test_the_next_save_cleans_up_after_a_killed_one(models, big, tmp_path):
    a, b = models
    a.save(tmp_path / "m")
    killed_at("written", tmp_path / "m", big[1], tmp_path)
    killed_at("written", tmp_path / "n", big[1], tmp_path)
    assert len(hidden(tmp_path)) >= 4  # two pending files in m, a folder beside n, the locks' files
    b.save(tmp_path / "m")
    b.save(tmp_path / "n")
    assert hidden(tmp_path) == []
    for name in "mn":
        np.testing.assert_array_equal(tj.PLSA.load(tmp_path / name).phi_, b.phi_)


@pytest.mark.slow
def test_two_processes_saving_to_one_folder(models, big, tmp_path):
    """The first holds the lock (stopped mid-save); the second is refused with a clear message and
    writes nothing; a load meanwhile reads the previous model and leaves the running save's pieces
    alone; the first then finishes, and nothing is left behind."""
    a, _ = models
    new, source = big
    a.save(tmp_path / "m")
    flag = tmp_path / "first"
    first = child(tmp_path / "m", source, "written", flag)
    try:
        wait_for(flag, first)
        pieces = hidden(tmp_path)
        second = child(tmp_path / "m", source, "none", tmp_path / "second")
        out, err = second.communicate(timeout=120)
        assert second.returncode == 0, err
        assert out == (f"refused: another process (process {first.pid}) is saving to {tmp_path / 'm'}; this save wrote "
                       "nothing (save again when it has finished, or to another folder)\n")
        assert hidden(tmp_path) == pieces
        np.testing.assert_array_equal(tj.PLSA.load(tmp_path / "m").phi_, a.phi_)
        assert hidden(tmp_path) == pieces
        Path(f"{flag}.go").touch()
        out, err = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 0 and out == "saved\n", err
    np.testing.assert_array_equal(tj.PLSA.load(tmp_path / "m").phi_, new.phi_)
    assert hidden(tmp_path) == []


@pytest.mark.slow
def test_racing_processes_one_wins_and_nothing_is_left(models, big, tmp_path):
    """Three processes save to one new folder at the same moment (each waits for a start file):
    each saves or is refused with the clear message (no other error), the folder holds one whole
    model, and nothing else is left."""
    a, b = models
    a.save(tmp_path / "a")
    b.save(tmp_path / "b")
    sources = [tmp_path / "a", tmp_path / "b", big[1]]
    procs = [child(tmp_path / "m", s, "race", tmp_path / "start", tmp_path / f"ready{i}")
             for i, s in enumerate(sources)]
    try:
        for i, p in enumerate(procs):
            wait_for(tmp_path / f"ready{i}", p)
    finally:
        (tmp_path / "start").touch()
    outs = [p.communicate(timeout=180) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        assert out == "saved\n" or out.startswith("refused: another process"), out
    assert any(out == "saved\n" for out, _ in outs)
    phi = tj.PLSA.load(tmp_path / "m").phi_
    assert any(np.array_equal(phi, m.phi_) for m in (a, b, big[0]))
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir() and not p.name.startswith(".")) == ["a", "b", "m"]
    assert hidden(tmp_path) == []


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_a_process_killed_at_a_random_moment_of_repeated_saves(models, big, tmp_path, seed):
    a, _ = models
    a.save(tmp_path / "a")
    proc = child(tmp_path / "m", big[1], "loop", tmp_path / "unused", tmp_path / "a")
    try:
        assert proc.stdout.readline() == "0\n", proc.stderr.read() if proc.poll() is not None else ""
        time.sleep(random.Random(seed).uniform(0.0, 0.3))
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate()
    phi = tj.PLSA.load(tmp_path / "m").phi_
    assert np.array_equal(phi, a.phi_) or np.array_equal(phi, big[0].phi_)
    assert hidden(tmp_path) == []


# ----------------------------------------------------------------------------- the command line
@pytest.fixture(scope="module")
def uci(corpus, tmp_path_factory):
    folder = tmp_path_factory.mktemp("corpus") / "uci"
    write_uci(corpus, folder, "bars")
    return folder


def topicjax(capsys, *argv):
    capsys.readouterr()
    status = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


FIT = ("--topics", "3", "--iterations", "2", "--quiet", "--heldout", "0")


@pytest.mark.parametrize("where, how", [("corpus", "is"), ("parent", "holds"), ("inside", "is inside")])
def test_cli_out_on_the_corpus_is_refused_before_reading_it(uci, capsys, where, how):
    before = snapshot(uci.parent)
    docword = next(uci.glob("docword*"))
    given, out = {"corpus": (uci, uci), "parent": (docword, uci), "inside": (uci, uci / "model")}[where]
    status, stdout, err = topicjax(capsys, "fit", given, *FIT, "--out", out)
    assert status == 1 and stdout == ""
    assert err == (f"topicjax: error: --out {out} {how} the input {given}: write it to a folder of its own, "
                   "outside what the command reads\n")
    assert snapshot(uci.parent) == before


def test_cli_out_on_other_folders_files_and_dot(uci, tmp_path, capsys, monkeypatch):
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "thesis.tex").write_text("x")
    (tmp_path / "file.txt").write_text("x")
    monkeypatch.chdir(tmp_path)
    before = snapshot(tmp_path)
    for out, message in [("proj", "--out: proj is a folder that does not hold a topicjax model (it holds thesis.tex)"),
                         ("file.txt", "--out: file.txt exists and is not a folder"),
                         (".", "--out: cannot save a model to '.'")]:
        status, stdout, err = topicjax(capsys, "fit", uci, *FIT, "--out", out)
        assert status == 1 and stdout == "" and err.startswith(f"topicjax: error: {message}"), err
        assert err.count("\n") == 1 and "Traceback" not in err
    status, stdout, err = topicjax(capsys, "fit-online", "proj", "--out", "proj")
    assert status == 1 and err.startswith("topicjax: error: --out proj is the input proj") and err.count("\n") == 1
    assert snapshot(tmp_path) == before


def test_cli_refit_replaces_the_model_and_its_descriptions_not_the_users_files(uci, tmp_path, capsys):
    status, _, err = topicjax(capsys, "fit", uci, *FIT, "--out", tmp_path / "m")
    assert status == 0, err
    (tmp_path / "m" / "notes.txt").write_text("mine")
    (tmp_path / "m" / "order_selection.json").write_text("{}")  # the user's own file of that name
    status, _, err = topicjax(capsys, "report", tmp_path / "m")  # describes the model: goes with it
    assert status == 0, err
    old_summary = (tmp_path / "m" / "fit_summary.json").read_text()
    status, _, err = topicjax(capsys, "fit", uci, *FIT, "--seed", "5", "--out", tmp_path / "m")
    assert status == 0, err
    assert [n for n in names(tmp_path / "m") if not n.startswith(".")] == [
        "arrays.npz", "fit_summary.json", "meta.json", "notes.txt", "order_selection.json"]
    assert (tmp_path / "m" / "order_selection.json").read_text() == "{}"  # never written by topicjax: kept
    assert (tmp_path / "m" / "fit_summary.json").read_text() != old_summary  # the new model's
    assert tj.persistence.load(tmp_path / "m").get_params()["random_state"] == 5
    assert hidden(tmp_path) == []
