"""Size limits of readers and constructors (issue 16, part 1): what is accepted up to the bound,
what is refused past it, and that refusing costs neither memory nor time."""

from __future__ import annotations

import time
import tracemalloc
import warnings

import numpy as np
import pytest

from topicjax.data import build as build_module
from topicjax.data.corpus import INFERRED_SLACK, Corpus, CorpusError, CorpusWarning, first_missing, inferred_size_limit
from topicjax.data.formats import read_ldac, read_uci, read_vocab, read_vw, write_vw
from topicjax.scale import online as streaming


def test_inferred_size_limit_is_twice_the_distinct_ids_plus_the_slack():
    assert [inferred_size_limit(n) for n in (0, 1, 10)] == [INFERRED_SLACK, 2 + INFERRED_SLACK, 20 + INFERRED_SLACK]
    # first_missing against a Python loop.
    rng = np.random.default_rng(0)
    for _ in range(50):
        n = int(rng.integers(0, 12))
        present = np.unique(rng.integers(0, 12, size=int(rng.integers(0, 10))))
        present = present[present < n]
        expected = next((i for i in range(n) if i not in set(present.tolist())), None)
        assert first_missing(present, n) == expected


def test_ldac_vocabulary_inferred_up_to_the_bound_and_not_beyond(tmp_path):
    # Two distinct ids; the largest may be limit - 1, so the vocabulary has exactly limit words.
    limit = inferred_size_limit(2)
    ok = tmp_path / "ok.ldac"
    ok.write_text(f"2 0:1 {limit - 1}:2\n")
    c = read_ldac(ok)
    assert c.n_words == limit and c.vocab[-1] == f"w{limit - 1}"
    assert c.to_dense()[0, [0, limit - 1]].tolist() == [1, 2]  # ids are kept, never renumbered
    bad = tmp_path / "bad.ldac"
    bad.write_text(f"2 0:1 {limit}:2\n")
    with pytest.raises(CorpusError, match=rf"bad\.ldac, line 1: document 0: word id {limit} would make a vocabulary"):
        read_ldac(bad)
    # Given explicitly, the size is the caller's: no bound relative to the ids.
    assert read_ldac(bad, n_words=limit + 1).n_words == limit + 1


def test_from_lists_vocabulary_inferred_up_to_the_bound():
    limit = inferred_size_limit(1)
    assert Corpus.from_lists([[(limit - 1, 1)]]).n_words == limit
    with pytest.raises(CorpusError, match=rf"word id {limit} would make a vocabulary of {limit + 1} words"):
        Corpus.from_lists([[(limit, 1)]])
    assert Corpus.from_lists([[(limit, 1)]], n_words=limit + 1).n_words == limit + 1


def test_placeholder_vocabulary_limit(monkeypatch):
    monkeypatch.setattr(build_module, "MAX_PLACEHOLDER_WORDS", 10)  # where the vocabulary step reads it
    assert Corpus.from_entries([0], [9], [1], n_words=10).vocab[-1] == "w9"
    with pytest.raises(CorpusError, match="n_words=11 without a vocabulary: placeholder names are made for at most 10"):
        Corpus.from_entries([0], [9], [1], n_words=11)
    assert Corpus.from_entries([0], [9], [1], vocab=[f"v{i}" for i in range(11)]).n_words == 11


def test_empty_documents_up_to_the_bound(tmp_path):
    """UCI: documents without entries may outnumber those with entries by at most the slack, in
    every prefix (in memory and streamed alike)."""
    (tmp_path / "vocab.t.txt").write_text("a\nb\n")
    D = inferred_size_limit(2)
    (tmp_path / "docword.t.txt").write_text(f"{D}\n2\n2\n1 1 1\n{D} 2 1\n")  # the largest allowed id
    c = read_uci(tmp_path, empty_docs="drop")
    assert c.n_docs == 2 and c.dropped_docs.size == D - 2
    store = streaming.convert_uci(tmp_path, tmp_path / "s", block_lines=1)
    assert store.n_docs == D and store.corpus(empty_docs="drop").equals(c)
    (tmp_path / "docword.t.txt").write_text(f"{D + 1}\n2\n2\n1 1 1\n{D} 2 1\n")
    with pytest.raises(CorpusError, match=rf"line 1: the header says D={D + 1} documents but only 2 have entries"):
        read_uci(tmp_path, empty_docs="drop")
    with pytest.raises(CorpusError, match=rf"line 1: the header says D={D + 1} documents but only 2 have entries"):
        streaming.convert_uci(tmp_path, tmp_path / "s2")
    # A run of empty documents before the second document: one more than the bound.
    (tmp_path / "docword.t.txt").write_text(f"{D + 1}\n2\n2\n1 1 1\n{D + 1} 2 1\n")
    with pytest.raises(CorpusError, match=rf"document {D + 1} comes after {D - 1} documents without entries but only 1"):
        read_uci(tmp_path, empty_docs="drop")
    with pytest.raises(CorpusError, match=rf"line 5: document {D + 1} comes after"):
        streaming.convert_uci(tmp_path, tmp_path / "s3")


@pytest.mark.parametrize(
    "name, make",
    [
        ("lda-c id 99999999999", lambda d: read_ldac(_write(d / "c.ldac", "1 99999999999:1\n"))),
        ("from_lists id 1e8", lambda d: Corpus.from_lists([[(10**8, 1)]])),
        ("UCI D = 1e9", lambda d: read_uci(_uci(d, "1000000000\n2\n1\n1 1 1\n"), empty_docs="drop")),
        ("UCI doc id 2e9", lambda d: read_uci(_uci(d, "2000000000\n2\n2\n1 1 1\n2000000000 2 1\n"), empty_docs="drop")),
        ("convert_uci D = 1e9", lambda d: streaming.convert_uci(_uci(d, "1000000000\n2\n1\n1 1 1\n"), d / "s")),
        ("convert_uci doc id 2e9", lambda d: streaming.convert_uci(_uci(d, "2000000000\n2\n2\n1 1 1\n2000000000 2 1\n"),
                                                                    d / "s")),
        ("entries doc id 2e9", lambda d: Corpus.from_entries([0, 2 * 10**9], [0, 0], [1, 1], n_words=1, empty_docs="drop")),
        ("entries n_docs 2e9", lambda d: Corpus.from_entries([0], [0], [1], n_words=1, n_docs=2 * 10**9)),
        ("labels 1e9", lambda d: Corpus.from_entries([0], [0], [1], n_words=1, labels=[10**9])),
        ("meta.json n_docs 2e9", lambda d: streaming.BatchStore(_store_with(d, n_docs=2 * 10**9 - 1))),
    ],
)
def test_refusing_a_huge_size_costs_nothing(tmp_path, name, make):
    """The issue's memory bombs (a hang then MemoryError, a 100M-word vocabulary in 23 s, 7.45 GiB)
    are refused before anything of their size is allocated: under 8 MiB and a second."""
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        with pytest.raises(CorpusError):
            make(tmp_path)
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peak < 8 << 20, f"{name}: {peak} bytes"
    assert time.perf_counter() - t0 < 5.0


def _write(path, text):
    path.write_text(text)
    return path


def _uci(folder, body):
    (folder / "vocab.t.txt").write_text("a\nb\n")
    (folder / "docword.t.txt").write_text(body)
    return folder


def _store_with(folder, **meta):
    import json

    st = streaming.write_store([Corpus.from_dense(np.ones((2, 2)), vocab=["a", "b"])], folder / "s")
    m = json.loads((st.folder / "meta.json").read_text())
    m.update(meta)
    (st.folder / "meta.json").write_text(json.dumps(m))
    return st.folder


# ---------------------------------------------------------------------- lines and names
def test_lines_end_at_newline_only(tmp_path):
    """A form feed, vertical tab or U+2028 inside a line is white space, not a line end (Python's
    splitlines would make two documents of it and shift every later line number); Windows line
    ends read as Unix ones."""
    text = "d1 a\x0cb\x0bc\u2028d\nd2 a b\n"
    (tmp_path / "x.vw").write_text(text)
    c = read_vw(tmp_path / "x.vw")
    assert c.doc_names == ("d1", "d2") and c.doc_lengths.tolist() == [4, 2]
    (tmp_path / "crlf.vw").write_bytes(text.replace("\n", "\r\n").encode())
    assert read_vw(tmp_path / "crlf.vw").equals(c)
    # The streaming converter reads the same lines.
    st = streaming.convert_vw(tmp_path / "x.vw", tmp_path / "s", batch_size=1)
    assert st.corpus().to_lists() == c.to_lists() and st.vocab() == list(c.vocab)
    (tmp_path / "c.ldac").write_text("2 0:1\x0c1:2\n1 2:1\n")
    assert read_ldac(tmp_path / "c.ldac").doc_lengths.tolist() == [3, 1]
    (tmp_path / "v.txt").write_text("a\x0cb\nc\n")
    assert read_vocab(tmp_path / "v.txt") == ["a\x0cb", "c"]


def test_repeated_vw_names_are_kept_with_a_warning(tmp_path):
    path = tmp_path / "x.vw"
    path.write_text("d1 a b\nd2 c\nd1 a\nd2 b\n")
    with pytest.warns(CorpusWarning, match=r"x\.vw, line 3: document name 'd1' was already used on line 1 \(2 repeated"):
        c = read_vw(path)
    assert c.n_docs == 4 and c.doc_names == ("d1", "d2", "d1", "d2")
    assert c.to_lists() == [[(0, 1), (1, 1)], [(2, 1)], [(0, 1)], [(1, 1)]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        named = read_vw(path, doc_names=["p", "q", "r", "s"])  # names given: nothing to warn about
        assert named.doc_names == ("p", "q", "r", "s")
        streaming.convert_vw(path, tmp_path / "s", batch_size=3)  # the store keeps no names
    # Written back, the names are written as they are and read back the same.
    with pytest.warns(CorpusWarning):
        assert read_vw(write_vw(c, tmp_path / "again.vw")).equals(c)
