"""Every writer follows save's rule (issue 40, items 1 and 3): from the user's side, API and CLI.

A writer writes only into a new folder, an empty one or one that holds its own kind of output,
never into what the command reads, never over a file it did not write, and leaves no stale file of
an earlier output; a store or a saved model altered after it was written is refused when read.
Each case checks what the user is told and that nothing was touched (a snapshot of the tree).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

import topicjax as tj
from topicjax._outputs import OutputRefusedError
from topicjax.cli import main
from topicjax.data.corpus import CorpusError
from topicjax.data.formats import read_uci, write_ldac, write_uci, write_vw
from topicjax.persistence import SavedModelError
from topicjax.scale import convert, store as batch_store


def snapshot(folder: Path) -> dict:
    """Every file below ``folder`` with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def visible(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))


@pytest.fixture(scope="module")
def bars():
    corpus, _, _ = tj.datasets.make_bars(n_docs=40, seed=0)
    return corpus


@pytest.fixture(scope="module")
def other():
    corpus, _, _ = tj.datasets.make_bars(n_docs=25, seed=3)
    return corpus


def cli(capsys, *args) -> tuple[int, str, str]:
    status = main([str(a) for a in args])
    out = capsys.readouterr()
    return status, out.out, out.err


# ----------------------------------------------------------------------------- batch stores
def test_a_store_is_refused_where_it_would_overwrite_something_else(bars, tmp_path, monkeypatch):
    model = tj.PLSA(3, max_iter=2, progress=False).fit(bars)
    model.save(tmp_path / "model")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "vocab.txt").write_text("my own words\n")
    (tmp_path / "afile").write_text("x")
    before = snapshot(tmp_path)
    for target, says in ((tmp_path / "model", "holds arrays.npz, meta.json"),
                         (tmp_path / "mine", "holds vocab.txt"),
                         (tmp_path / "afile", "exists and is not a folder")):
        with pytest.raises(OutputRefusedError, match=says):
            batch_store.write_store([bars], target, batch_size=10)
    monkeypatch.chdir(tmp_path / "mine")
    with pytest.raises(OutputRefusedError, match="never into the working or a parent folder"):
        batch_store.write_store([bars], ".", batch_size=10)
    with pytest.raises(OutputRefusedError, match="never into the working or a parent folder"):
        batch_store.write_store([bars], "..", batch_size=10)
    assert snapshot(tmp_path) == before  # nothing written, nothing left
    assert tj.PLSA.load(tmp_path / "model").phi_.shape == model.phi_.shape


def test_a_store_replaces_a_store_keeps_other_files_and_leaves_nothing_stale(bars, other, tmp_path):
    first = batch_store.write_store([bars], tmp_path / "s", batch_size=10)
    assert first.n_docs == 40
    (tmp_path / "s" / "NOTES.md").write_text("about this store")
    second = batch_store.write_store([other], tmp_path / "s", batch_size=7)
    assert (second.n_docs, second.batch_size) == (25, 7) and second.corpus().equals(other)
    assert visible(tmp_path / "s") == sorted(batch_store.STORE_FILES + ("NOTES.md",))
    assert sorted(p.name for p in (tmp_path / "s").iterdir() if p.name.startswith(".")) == [
        batch_store.MARKER, batch_store.MARKER + ".lock"]  # no pending pieces


def test_a_failed_conversion_keeps_the_earlier_store_and_a_new_folder_is_not_left(bars, tmp_path):
    batch_store.write_store([bars], tmp_path / "s", batch_size=10)
    before = snapshot(tmp_path / "s")

    def parts():
        yield bars
        raise RuntimeError("the reader failed half way")

    with pytest.raises(RuntimeError, match="half way"):
        batch_store.write_store(parts(), tmp_path / "s", batch_size=10)
    assert snapshot(tmp_path / "s") == before
    assert batch_store.BatchStore(tmp_path / "s").corpus().equals(bars)
    with pytest.raises(RuntimeError, match="half way"):
        batch_store.write_store(parts(), tmp_path / "new" / "s", batch_size=10)
    assert not (tmp_path / "new" / "s").exists()


def test_two_writers_of_one_store_are_refused(bars, tmp_path):
    writer = batch_store.StoreWriter(tmp_path / "s", 10, "test")
    try:
        with pytest.raises(OutputRefusedError, match="another process is writing a batch store"):
            batch_store.write_store([bars], tmp_path / "s", batch_size=10)
    finally:
        writer.abort()
    assert not (tmp_path / "s").exists()  # the first writer made the folder and gave up: nothing left
    assert batch_store.write_store([bars], tmp_path / "s", batch_size=10).n_docs == 40


def test_a_store_replaced_while_it_is_read_is_noticed(bars, other, tmp_path):
    reading = batch_store.BatchStore(batch_store.write_store([bars], tmp_path / "s", batch_size=10).folder)
    assert reading.batch(0).n_docs == 10
    batch_store.write_store([other], tmp_path / "s", batch_size=10)  # another process rewrites it
    with pytest.raises(CorpusError, match="was replaced or is being rewritten while it is read"):
        reading.batch(1)
    assert batch_store.BatchStore(tmp_path / "s").corpus().equals(other)  # opened again: the new one


def test_an_interrupted_replacement_is_named_and_written_again(bars, tmp_path):
    batch_store.write_store([bars], tmp_path / "s", batch_size=10)
    (tmp_path / "s" / "meta.json").unlink()  # killed between removing meta.json and renaming the new one
    with pytest.raises(CorpusError, match="a write of this batch store was interrupted"):
        batch_store.BatchStore(tmp_path / "s")
    assert batch_store.write_store([bars], tmp_path / "s", batch_size=10).corpus().equals(bars)


def test_conversions_refuse_the_inputs_own_folder(bars, tmp_path, capsys):
    src = tmp_path / "corpus"
    docword, vocab = write_uci(bars, src, "bars")
    write_vw(bars, src / "bars.vw")
    before = snapshot(tmp_path)
    for target in (src, tmp_path):  # the folder holding the files read, or one holding it
        with pytest.raises(OutputRefusedError, match=f"the store {target} holds the input {docword}"):
            convert.convert_uci(src, target, batch_size=10)
    with pytest.raises(OutputRefusedError, match=f"the store {docword} is the input"):
        convert.convert_uci(src, docword, batch_size=10)
    for target, how in ((src / "bars.vw", "is"), (src, "holds"), (tmp_path, "holds")):
        with pytest.raises(OutputRefusedError, match=f"the store {target} {how} the input"):
            convert.convert_vw(src / "bars.vw", target, batch_size=10)
    status, out, err = cli(capsys, "convert", src, src)
    assert status == 1 and err.count("\n") == 1 and f"the store {src} is the input {src}" in err, err
    status, out, err = cli(capsys, "convert", src, src / "store")  # the command line: never inside the corpus
    assert status == 1 and f"the store {src / 'store'} is inside the input {src}" in err, err
    status, out, err = cli(capsys, "convert", src / "bars.vw", tmp_path / "model-like")
    assert status == 0, err  # a new folder beside the input is fine
    (tmp_path / "model-like").rename(tmp_path / "kept")
    assert snapshot(tmp_path) == {**before, **{k: v for k, v in snapshot(tmp_path).items() if k.startswith("kept")}}


def test_cli_convert_into_a_saved_model_is_refused_with_one_line(bars, tmp_path, capsys):
    tj.PLSA(3, max_iter=2, progress=False).fit(bars).save(tmp_path / "model")
    write_uci(bars, tmp_path / "corpus", "bars")
    before = snapshot(tmp_path)
    status, out, err = cli(capsys, "convert", tmp_path / "corpus", tmp_path / "model")
    assert status == 1 and err.count("\n") == 1, err
    assert err.startswith("topicjax: error:") and "holds arrays.npz, meta.json" in err and "Traceback" not in err
    assert snapshot(tmp_path) == before


def test_a_store_whose_counts_or_vocabulary_were_altered_is_refused(bars, tmp_path):
    batch_store.write_store([bars], tmp_path / "s", batch_size=10)
    meta = json.loads((tmp_path / "s" / "meta.json").read_text())
    counts = np.fromfile(tmp_path / "s" / "counts.bin", np.int32)
    counts[5] += 3
    counts.tofile(tmp_path / "s" / "counts.bin")
    says = f"add up to {meta['n_tokens'] + 3} tokens but meta.json says n_tokens={meta['n_tokens']}"
    altered = batch_store.BatchStore(tmp_path / "s")
    with pytest.raises(CorpusError, match=says):
        altered.corpus()
    with pytest.raises(CorpusError, match=says):
        list(altered)  # a whole pass, as the online fit reads it
    with pytest.raises(CorpusError, match=says):
        tj.scale.online.fit_online(altered, 3, progress=False)
    batch_store.write_store([bars], tmp_path / "s", batch_size=10)
    words = (tmp_path / "s" / "vocab.txt").read_text().split("\n")
    words[4] = words[1]
    (tmp_path / "s" / "vocab.txt").write_text("\n".join(words))
    store = batch_store.BatchStore(tmp_path / "s")
    with pytest.raises(CorpusError, match=f"line 5 repeats the word '{words[1]}' of line 2"):
        store.vocab()
    with pytest.raises(CorpusError, match="line 5 repeats the word"):
        tj.scale.online.fit_online(store, 3, progress=False)
    with pytest.raises(CorpusError, match="repeats 'a'"):
        w = batch_store.StoreWriter(tmp_path / "t", 10, "test")
        w.append(np.array([1]), np.array([0]), np.array([2]))
        w.close(["a", "b", "a"])
    assert not (tmp_path / "t").exists()


# ----------------------------------------------------------------------------- corpus files
def test_format_writers_never_overwrite_unasked_and_replace_cleanly(bars, other, tmp_path):
    (tmp_path / "vocab.bars.txt").write_text("the user's own file\n")
    with pytest.raises(OutputRefusedError, match="vocab.bars.txt exists; pass overwrite=True"):
        write_uci(bars, tmp_path, "bars")
    assert visible(tmp_path) == ["vocab.bars.txt"]  # refused before the docword was written
    write_uci(bars, tmp_path, "bars", overwrite=True)
    write_uci(other, tmp_path, "bars", compress=True, overwrite=True)
    assert visible(tmp_path) == ["docword.bars.txt.gz", "vocab.bars.txt"]  # no stale .txt twin
    assert read_uci(tmp_path / "docword.bars.txt.gz").equals(other)
    (tmp_path / "c.vw").write_text("keep me\n")
    with pytest.raises(OutputRefusedError, match="c.vw exists"):
        write_vw(bars, tmp_path / "c.vw")
    with pytest.raises(OutputRefusedError, match="is a folder"):
        write_ldac(bars, tmp_path)
    with pytest.raises(OutputRefusedError, match="named for two files"):
        write_ldac(bars, tmp_path / "x.ldac", tmp_path / "x.ldac", overwrite=True)
    assert (tmp_path / "c.vw").read_text() == "keep me\n"


def test_a_failing_write_leaves_the_earlier_file(bars, tmp_path):
    path, _ = write_ldac(bars, tmp_path / "c.ldac", vocab_path=False)
    before = path.read_bytes()

    class Broken:
        doc_offsets = np.array([0, 1, 2])
        word_ids = np.array([0, 1])
        counts = None  # fails while the lines are written
        n_docs = 2
        vocab = ["a", "b"]

    with pytest.raises(Exception):
        write_ldac(Broken(), path, vocab_path=False, overwrite=True)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.ldac"]  # no hidden piece left


# ----------------------------------------------------------------------------- reports beside a model
def test_report_never_overwrites_the_users_file_and_goes_with_the_model(bars, tmp_path, capsys):
    folder = tmp_path / "m"
    tj.PLSA(3, max_iter=3, progress=False).fit(bars).save(folder)
    (folder / "report.md").write_text("my own report")
    before = snapshot(folder)
    status, out, err = cli(capsys, "report", folder)
    assert status == 1 and "report.md exists and is not the report written by topicjax" in err, err
    assert snapshot(folder) == before
    (folder / "report.md").unlink()
    status, out, err = cli(capsys, "report", folder, "--html")
    assert status == 0, err
    assert {"report.md", "report.html", "report_scores.png"} <= set(visible(folder))
    status, out, err = cli(capsys, "report", folder)  # again, without --html: the old page goes
    assert status == 0 and "report.html" not in visible(folder), err
    tj.PLSA(3, max_iter=2, random_state=4, progress=False).fit(bars).save(folder)  # the API's save
    assert visible(folder) == ["arrays.npz", "meta.json"]  # nothing describes the old model


def test_report_escapes_words_that_would_break_its_tables(tmp_path, capsys):
    vocab = ["a|b", "<script>x</script>", "*bold*", "back`tick", "plain"]
    docs = [["a|b", "a|b", "plain", "*bold*"], ["<script>x</script>", "back`tick", "plain"]] * 6
    corpus = tj.Corpus.from_tokens(docs, vocab=vocab) if hasattr(tj.Corpus, "from_tokens") else None
    if corpus is None:
        ids = {w: i for i, w in enumerate(vocab)}
        d = [i for i, doc in enumerate(docs) for _ in doc]
        w = [ids[t] for doc in docs for t in doc]
        corpus = tj.Corpus.from_entries(np.array(d), np.array(w), np.ones(len(w), np.int64), vocab=vocab)
    tj.PLSA(2, max_iter=3, progress=False).fit(corpus).save(tmp_path / "m")
    status, out, err = cli(capsys, "report", tmp_path / "m", "-n", "5", "--html")
    assert status == 0, err
    md = (tmp_path / "m" / "report.md").read_text()
    rows = [line for line in md.splitlines() if line.startswith("| 0 |") or line.startswith("| 1 |")]
    assert len(rows) == 2
    for row in rows:  # exactly three unescaped bars: the cell borders
        unescaped = [i for i, c in enumerate(row) if c == "|" and (i == 0 or row[i - 1] != "\\")]
        assert len(unescaped) == 3, row
    assert "<script>" not in md and "&lt;script&gt;" in md and "a\\|b" in md
    assert "<script>" not in (tmp_path / "m" / "report.html").read_text()


# ----------------------------------------------------------------------------- a model altered after its save
@pytest.mark.parametrize("name, fit", [
    ("phi_", lambda c: tj.PLSA(3, max_iter=2, progress=False).fit(c)),
    ("theta_", lambda c: tj.PLSA(3, max_iter=2, progress=False).fit(c)),
    ("beta_", lambda c: tj.TTMM(n_themes=2, n_components=3, max_iter=2, progress=False).fit(c)),
])
def test_a_model_whose_distributions_were_altered_is_refused(bars, tmp_path, name, fit):
    model = fit(bars)
    model.save(tmp_path / "m")
    with np.load(tmp_path / "m" / "arrays.npz") as z:
        arrays = {k: z[k] for k in z.files}
    arrays[name] = arrays[name].copy()
    arrays[name].flat[1] += 0.25  # still finite and non-negative: only the sums show it
    np.savez(tmp_path / "m" / "arrays.npz", **arrays)
    with pytest.raises(SavedModelError, match=f"array '{name}' is not a distribution along axis"):
        tj.persistence.load(tmp_path / "m")
