"""Corpus options of the command line: ``--encoding`` for every format, ``--empty-docs drop``,
text-folder labels on/off, folders without text documents of a known kind, tables read only when
asked, and the out-of-vocabulary share that ``evaluate`` reports."""

from __future__ import annotations

import numpy as np
import pytest

from topicjax import Corpus
from topicjax.cli import build_parser
from topicjax.cli.inputs import read_corpus_args
from topicjax.data.formats import write_uci
from topicjax.persistence import load
from topicjax.scale.online import BatchStore

WORDS = ["café", "thé", "crème"]


def _read(path, *options):
    """The corpus ``topicjax fit PATH OPTIONS`` would fit, and the notes it prints."""
    args = build_parser().parse_args(["fit", str(path), *map(str, options)])
    notes = []
    return read_corpus_args(args, args.corpus, say=notes.append), notes


def _latin1(path, text: str):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("latin-1"))
    return path


@pytest.fixture
def latin1_corpora(tmp_path):
    """The same two documents (café café thé | thé crème) in every format, in latin-1."""
    _latin1(tmp_path / "uci" / "docword.x.txt", "2\n3\n4\n1 1 2\n1 2 1\n2 2 1\n2 3 1\n")
    _latin1(tmp_path / "uci" / "vocab.x.txt", "\n".join(WORDS) + "\n")
    _latin1(tmp_path / "c.vw", "d1 café:2 thé\nd2 thé crème\n")
    _latin1(tmp_path / "c.ldac", "2 0:2 1:1\n2 1:1 2:1\n")
    _latin1(tmp_path / "c.vocab", "\n".join(WORDS) + "\n")
    _latin1(tmp_path / "texts" / "a.txt", "café café thé")
    _latin1(tmp_path / "texts" / "b.txt", "thé crème")
    _latin1(tmp_path / "table" / "corpus.tsv", "café café thé\ttrain\tx\nthé crème\ttest\ty\n")
    _latin1(tmp_path / "table" / "vocabulary.txt", "\n".join(WORDS) + "\n")
    return {"uci": (tmp_path / "uci", []), "vw": (tmp_path / "c.vw", []), "ldac": (tmp_path / "c.ldac", []),
            "texts": (tmp_path / "texts", ["--min-df", "1"]), "tsv": (tmp_path / "table", ["--format", "tsv"])}


@pytest.mark.parametrize("fmt", ["uci", "vw", "ldac", "texts", "tsv"])
def test_encoding_is_honoured_for_every_format(fmt, latin1_corpora, run, tmp_path):
    path, extra = latin1_corpora[fmt]
    with pytest.raises(ValueError, match=r"is not valid utf-8; pass encoding='latin-1'"):
        _read(path, *extra)
    corpus, _ = _read(path, *extra, "--encoding", "latin-1")
    assert sorted(corpus.vocab) == sorted(WORDS)
    dense = corpus.with_vocab(WORDS).to_dense()
    assert dense.tolist() == [[2, 1, 0], [0, 1, 1]]
    # the same through a command, in this process: the message names the option; convert reads it
    status, _, err = run("convert", path, tmp_path / "store", *extra)
    assert status == 1 and "pass --encoding latin-1 (or the file's encoding)" in err
    status, out, err = run("convert", path, tmp_path / "store", *extra, "--encoding", "latin-1")
    assert status == 0, err
    store = BatchStore(tmp_path / "store")
    assert store.corpus().with_vocab(WORDS).to_dense().tolist() == dense.tolist()


def test_encoding_reaches_a_saved_model(latin1_corpora, run, tmp_path):
    path, extra = latin1_corpora["texts"]
    status, out, err = run("fit", path, *extra, "--encoding", "latin-1", "--topics", "2", "--iterations", "2",
                           "--quiet", "--out", tmp_path / "m")
    assert status == 0, err
    assert sorted(load(tmp_path / "m").vocab_) == sorted(WORDS)


@pytest.fixture
def with_empty(tmp_path):
    """Three documents, the second without tokens, in every format."""
    (tmp_path / "uci").mkdir()
    (tmp_path / "uci" / "docword.e.txt").write_text("3\n2\n2\n1 1 2\n3 2 1\n")
    (tmp_path / "uci" / "vocab.e.txt").write_text("apple\nbanana\n")
    (tmp_path / "e.vw").write_text("d1 apple:2\nd2\nd3 banana\n")
    (tmp_path / "e.ldac").write_text("1 0:2\n0\n1 1:1\n")
    (tmp_path / "e.vocab").write_text("apple\nbanana\n")
    (tmp_path / "texts").mkdir()
    (tmp_path / "texts" / "1.txt").write_text("apple apple")
    (tmp_path / "texts" / "2.txt").write_text("the and of")
    (tmp_path / "texts" / "3.txt").write_text("banana")
    (tmp_path / "table").mkdir()
    (tmp_path / "table" / "docs.tsv").write_text("apple apple\tx\n\ty\nbanana\tx\n")
    (tmp_path / "table" / "vocab.txt").write_text("apple\nbanana\n")
    return tmp_path


@pytest.mark.parametrize("fmt, path, extra", [
    ("uci", "uci", []), ("vw", "e.vw", []), ("ldac", "e.ldac", []), ("tsv", "table", ["--format", "tsv",
                                                                                 "--empty-docs", "error"]),
])
def test_empty_docs_drop_for_structured_formats(fmt, path, extra, with_empty):
    with pytest.raises(ValueError, match="pass empty_docs='drop'"):
        _read(with_empty / path, *extra)
    corpus, notes = _read(with_empty / path, *extra, "--empty-docs", "drop")
    assert corpus.n_docs == 2 and corpus.dropped_docs.tolist() == [1]
    assert notes == ["note: 1 empty document(s) dropped"]


def test_empty_docs_for_raw_text(with_empty, run):
    corpus, notes = _read(with_empty / "texts", "--min-df", "1")  # drop is the default for raw text
    assert corpus.doc_names == ("1.txt", "3.txt") and notes == ["note: 1 empty document(s) dropped"]
    with pytest.raises(ValueError, match=r"text 1 \(2\.txt\), after tokenising .* has no tokens"):
        _read(with_empty / "texts", "--min-df", "1", "--empty-docs", "error")
    status, _, err = run("convert", with_empty / "texts", with_empty / "s", "--min-df", "1", "--empty-docs", "error")
    assert status == 1 and "pass --empty-docs drop to remove them" in err


def test_text_folder_labels_on_and_off(tmp_path):
    for group, name, text in [("sport", "1", "goal match goal"), ("sport", "2", "match team"),
                              ("tech", "3", "chip code chip")]:
        (tmp_path / "news" / group).mkdir(parents=True, exist_ok=True)
        (tmp_path / "news" / group / name).write_text(text)
    corpus, _ = _read(tmp_path / "news", "--min-df", "1")
    assert corpus.label_names == ("sport", "tech") and corpus.label_ids.tolist() == [0, 0, 1]
    assert _read(tmp_path / "news", "--min-df", "1", "--labels", "no")[0].labels is None
    assert _read(tmp_path / "news", "--min-df", "1", "--labels", "yes")[0].labels is not None
    (tmp_path / "news" / "top.txt").write_text("loose file")
    with pytest.raises(ValueError, match="labels=True but top.txt is not in a sub-folder"):
        _read(tmp_path / "news", "--min-df", "1", "--labels", "yes")
    assert _read(tmp_path / "news", "--min-df", "1", "--labels", "no")[0].n_docs == 4
    with pytest.raises(ValueError, match="--labels yes: a uci corpus has no labels"):
        write_uci(corpus, tmp_path / "u", "n")
        _read(tmp_path / "u", "--labels", "yes")


def test_folders_without_known_text_documents_and_tables(tmp_path, run):
    (tmp_path / "pdfs").mkdir()
    (tmp_path / "pdfs" / "a.pdf").write_bytes(b"%PDF")
    status, _, err = run("fit", tmp_path / "pdfs", "--quiet")
    assert status == 1
    assert "no text documents of a known kind (files named *.txt, *.text or without a suffix); it holds a.pdf" in err
    # OCTIS's layout: an error that says how to ask, then read when asked (labels included)
    octis = tmp_path / "octis"
    octis.mkdir()
    (octis / "corpus.tsv").write_text("goal match\ttrain\tsport\nchip code\ttest\ttech\nmatch team\tval\tsport\n")
    (octis / "vocabulary.txt").write_text("chip\ncode\ngoal\nmatch\nteam\n")
    (octis / "metadata.json").write_text("{}")
    status, _, err = run("convert", octis, tmp_path / "s")
    assert status == 1
    assert "a table rather than a folder of text documents" in err and "is read when asked: --format tsv" in err
    corpus, _ = _read(octis, "--format", "tsv")
    assert corpus.vocab == ("chip", "code", "goal", "match", "team") and corpus.label_names == ("sport", "tech")
    assert _read(octis, "--format", "tsv", "--labels", "no")[0].labels is None
    with pytest.raises(ValueError, match="--min-df applies to raw text only"):
        _read(octis, "--format", "tsv", "--min-df", "3")


def test_real_octis_folder_only_when_asked(shared_data):
    """The shared BBC News folder (OCTIS's corpus.tsv + vocabulary.txt + metadata.json)."""
    folder = shared_data / "bbc_news"
    if not folder.is_dir():
        pytest.skip("bbc_news absent")
    with pytest.raises(ValueError, match="--format tsv"):
        _read(folder)
    corpus, _ = _read(folder, "--format", "tsv")
    assert (corpus.n_docs, corpus.n_words, corpus.n_tokens) == (2225, 2949, 267259)  # PROVENANCE.md
    assert len(corpus.label_names) == 5


def test_evaluate_reports_out_of_vocabulary_share(tmp_path, run, fitted, bars):
    corpus = bars["corpus"]
    # two words the model never saw: 3 tokens in document 0, and document 1 made of 5 of them only
    d = np.concatenate([corpus.doc_ids[corpus.doc_ids != 1], [0, 1]])
    w = np.concatenate([corpus.word_ids[corpus.doc_ids != 1], [corpus.n_words, corpus.n_words + 1]])
    c = np.concatenate([corpus.counts[corpus.doc_ids != 1], [3, 5]])
    mixed = Corpus.from_entries(d, w, c, vocab=list(corpus.vocab) + ["new1", "new2"], n_docs=corpus.n_docs)
    write_uci(mixed, tmp_path / "uci", "mixed")
    status, text, err = run("evaluate", fitted("plsa")[0], tmp_path / "uci")
    assert status == 0, err
    n = mixed.n_tokens
    assert f"out-of-vocabulary tokens dropped: 8 of {n} ({100 * 8 / n:.2f}%)" in text
    assert "documents left without a known word: 1" in text
