"""The catalogue of bad inputs (issue 16, part 7): one table, one row per bad file or call.

Each row gives the files to write (name -> text or bytes), the call that reads them (it receives
the folder), the exception (or warning) it must raise and a regular expression its message must
match, naming the file and line, the document, or the parameter at fault.  A new check in a reader
or constructor adds a row here, so the table is the list of everything we refuse and how we say it.
Rows marked "(issue 16)" are the inputs the issue found mishandled: a hang, a MemoryError, a raw
exception, or silence.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pytest
import scipy.sparse as sp

from topicjax.data.corpus import MAX_PLACEHOLDER_WORDS, Corpus, CorpusError, CorpusWarning
from topicjax.data.formats import (
    read_corpus,
    read_ldac,
    read_text_folder,
    read_texts,
    read_uci,
    read_vw,
    write_uci,
    write_vw,
)
from topicjax.scale import online as streaming


@dataclass
class Bad:
    id: str
    call: Callable[[Path], object]
    error: type
    message: str
    files: dict = field(default_factory=dict)


V3 = ["a", "b", "c"]
UCI = "3\n4\n6\n1 1 2\n1 3 1\n2 2 3\n2 4 1\n3 1 1\n3 4 5\n"
UCI_VOCAB = "apple\nbanana\ncherry\ndate\n"
VW_GOOD = "d1 a b\n{}\nd3 c\n"
TINY = np.array([[2, 0, 1, 0], [0, 3, 0, 1], [1, 1, 1, 1]])


def uci(body: str, vocab: str = UCI_VOCAB, name: str = "t") -> dict:
    return {f"docword.{name}.txt": body, f"vocab.{name}.txt": vocab}


def vw_line(line: str) -> dict:
    return {"x.vw": VW_GOOD.format(line)}


def read_uci_t(d: Path, **kw):
    return read_uci(d, **kw)


def tiny(**kw) -> Corpus:
    return Corpus.from_dense(TINY, vocab=["apple", "banana", "cherry", "date"], doc_names=["d0", "d1", "d2"], **kw)


def store(d: Path, meta: dict | None = None, edit: Callable[[Path], None] | None = None) -> Path:
    """A valid batch store of the tiny corpus in ``d/s``, then ``meta`` keys set and ``edit`` applied."""
    st = streaming.write_store([tiny()], d / "s", batch_size=2)
    if meta:
        m = json.loads((st.folder / "meta.json").read_text())
        m.update(meta)
        (st.folder / "meta.json").write_text(json.dumps(m))
    if edit:
        edit(st.folder)
    return st.folder


def open_store(d: Path, **kw):
    return streaming.BatchStore(store(d, **kw))


def read_store(d: Path, **kw):
    s = streaming.BatchStore(store(d, **kw))
    return [s.batch(i) for i in range(s.n_batches)]


def write_array(name: str, values, dtype):
    def edit(folder: Path):
        (folder / name).write_bytes(np.asarray(values, dtype).tobytes())
    return edit


def gz(text: str) -> bytes:
    return gzip.compress(text.encode(), mtime=0)


def gz_cut(text: str) -> bytes:
    data = gz(text)
    return data[: len(data) // 2]


def gz_flip(text: str) -> bytes:
    data = bytearray(gz(text))
    data[-6] ^= 0xFF  # inside the CRC trailer
    return bytes(data)


F = r"docword\.t\.txt"
CASES = [
    # ================================================================== UCI bag of words
    Bad("uci/truncated entries", read_uci_t, CorpusError,
        F + r", line 8: the file ends after 5 entries but the header says NNZ=6 \(truncated file\?\)",
        uci("3\n4\n6\n1 1 2\n1 3 1\n2 2 3\n2 4 1\n3 1 1\n")),
    Bad("uci/header only", read_uci_t, CorpusError,
        F + r", line 3: the file ends after 0 entries but the header says NNZ=6", uci("3\n4\n6\n")),
    Bad("uci/more than NNZ", read_uci_t, CorpusError, F + r", line 10: more entries than NNZ=6",
        uci(UCI + "3 2 1\n")),
    Bad("uci/two fields", read_uci_t, CorpusError, F + r", line 6: expected 'docID wordID count', got '2 2'",
        uci(UCI.replace("2 2 3\n", "2 2\n"))),
    Bad("uci/four fields", read_uci_t, CorpusError, F + r", line 6: expected 'docID wordID count'",
        uci(UCI.replace("2 2 3\n", "2 2 3 4\n"))),
    Bad("uci/word id above W", read_uci_t, CorpusError,
        F + r", line 7: document 2: word id 9 is outside 1\.\.4 \(W in the header\)", uci(UCI.replace("2 4 1\n", "2 9 1\n"))),
    Bad("uci/word id 0", read_uci_t, CorpusError, F + r", line 7: document 2: word id 0 is outside 1\.\.4",
        uci(UCI.replace("2 4 1\n", "2 0 1\n"))),
    Bad("uci/document id above D", read_uci_t, CorpusError,
        F + r", line 8: document id 4 is outside 1\.\.3 \(D in the header\)", uci(UCI.replace("3 1 1\n", "4 1 1\n"))),
    Bad("uci/document id not a number", read_uci_t, CorpusError, F + r", line 8: document id 'x' is not an integer",
        uci(UCI.replace("3 1 1\n", "x 1 1\n"))),
    Bad("uci/negative count", read_uci_t, CorpusError, F + r", line 9: document 3, word id 4: count '-5' is negative",
        uci(UCI.replace("3 4 5\n", "3 4 -5\n"))),
    Bad("uci/NaN count", read_uci_t, CorpusError, F + r", line 9: document 3, word id 4: count 'nan' is NaN",
        uci(UCI.replace("3 4 5\n", "3 4 nan\n"))),
    Bad("uci/fractional count", read_uci_t, CorpusError,
        F + r", line 9: document 3, word id 4: count '2\.5' is not an integer", uci(UCI.replace("3 4 5\n", "3 4 2.5\n"))),
    Bad("uci/count a word", read_uci_t, CorpusError, F + r", line 9: document 3, word id 4: count 'five' is not a number",
        uci(UCI.replace("3 4 5\n", "3 4 five\n"))),
    Bad("uci/infinite count", read_uci_t, CorpusError, F + r", line 9: document 3, word id 4: count 'inf' is not finite",
        uci(UCI.replace("3 4 5\n", "3 4 inf\n"))),
    Bad("uci/count above int32", read_uci_t, CorpusError,
        F + r", line 9: document 3, word id 4: count '99999999999999999999' does not fit in int32",
        uci(UCI.replace("3 4 5\n", "3 4 99999999999999999999\n"))),
    Bad("uci/count in other digits", read_uci_t, CorpusError,
        F + r", line 9: document 3, word id 4: count '\u0661\u0662' is not a number",
        uci(UCI.replace("3 4 5\n", "3 4 \u0661\u0662\n"))),
    Bad("uci/count with underscore", read_uci_t, CorpusError,
        F + r", line 9: document 3, word id 4: count '1_0' is not a number", uci(UCI.replace("3 4 5\n", "3 4 1_0\n"))),
    Bad("uci/word id with underscore", read_uci_t, CorpusError, F + r", line 9: word id '4_0' is not an integer",
        uci(UCI.replace("3 4 5\n", "3 4_0 5\n"))),
    Bad("uci/header W not a number", read_uci_t, CorpusError,
        F + r", line 2: header value W \(number of words\) must be an integer, got 'four'", uci("3\nfour\n6\n")),
    Bad("uci/header cut", read_uci_t, CorpusError, F + r", line 3: truncated header: expected NNZ", uci("3\n4\n")),
    Bad("uci/header W negative", read_uci_t, CorpusError, F + r", line 2: header value W \(number of words\) is negative",
        uci("3\n-4\n6\n")),
    Bad("uci/header D = 10^9 (issue 16)", read_uci_t, CorpusError,
        F + r", line 1: the header says D=1000000000 documents but only 3 have entries",
        uci("1000000000" + UCI[1:])),
    Bad("uci/header D = 10^9, empty_docs='drop' (issue 16)", lambda d: read_uci(d, empty_docs="drop"), CorpusError,
        F + r", line 1: the header says D=1000000000 documents but only 3 have entries", uci("1000000000" + UCI[1:])),
    Bad("uci/header D beyond int32", read_uci_t, CorpusError,
        F + r", line 1: header value D \(number of documents\) is 10{30}, more than 2147483647",
        uci("1" + "0" * 30 + UCI[1:])),
    Bad("uci/header W beyond int32", read_uci_t, CorpusError,
        F + r", line 2: header value W \(number of words\) is 4294967296, more than 2147483647", uci("3\n4294967296\n6\n")),
    Bad("uci/one document id far beyond the others", lambda d: read_uci(d, empty_docs="drop"), CorpusError,
        F + r": document 5000 comes after 4998 documents without entries but only 1 with entries",
        uci("5000\n4\n2\n1 1 1\n5000 2 1\n")),
    Bad("uci/vocabulary shorter than W", read_uci_t, CorpusError,
        r"vocab\.t\.txt: 3 words but the header of .*docword\.t\.txt says W=4", uci(UCI, "apple\nbanana\ncherry\n")),
    Bad("uci/vocabulary word twice", read_uci_t, CorpusError,
        r"vocab\.t\.txt, line 3: word 'apple' already appears on line 1", uci(UCI, "apple\nbanana\napple\ndate\n")),
    Bad("uci/vocabulary blank line", read_uci_t, CorpusError, r"vocab\.t\.txt, line 2: blank line inside the vocabulary",
        uci(UCI, "apple\n\ncherry\ndate\n")),
    Bad("uci/no vocabulary beside", read_uci_t, CorpusError, F + r": no vocab\.t\.txt beside it",
        {"docword.t.txt": UCI}),
    Bad("uci/file not named docword", lambda d: read_uci(d / "counts.txt"), CorpusError,
        r"counts\.txt: not named docword\.NAME\.txt\[\.gz\], so pass the vocabulary file", {"counts.txt": UCI}),
    Bad("uci/empty documents", read_uci_t, CorpusError,
        F + r": document 2 \(1-based, as in the file\) has no tokens \(2 empty document\(s\) in all\)",
        uci("4\n4\n4\n1 1 2\n1 3 1\n3 2 3\n3 4 1\n")),
    Bad("uci/empty folder", read_uci_t, CorpusError, r"no docword\.\*\.txt\[\.gz\] file in this folder", {"other": "x"}),
    Bad("uci/two corpora in a folder", read_uci_t, CorpusError, r"several UCI corpora in this folder \(one, two\); pass name=",
        {**uci(UCI, name="one"), **uci("1\n4\n1\n1 2 7\n", name="two")}),
    Bad("uci/missing path", lambda d: read_uci(d / "missing"), FileNotFoundError, r"missing does not exist"),
    Bad("uci/truncated gzip", lambda d: read_uci(d), CorpusError,
        r"docword\.t\.txt\.gz: the gzip stream ends early \(truncated file\)",
        {"docword.t.txt.gz": gz_cut(UCI), "vocab.t.txt": UCI_VOCAB}),
    Bad("uci/gzip with a bad CRC", lambda d: read_uci(d), CorpusError, r"docword\.t\.txt\.gz: corrupt gzip data",
        {"docword.t.txt.gz": gz_flip(UCI), "vocab.t.txt": UCI_VOCAB}),
    Bad("uci/not UTF-8", read_uci_t, CorpusError,
        F + r", line 4: byte b'\\xe9' is not valid utf-8; pass encoding='latin-1'",
        {"docword.t.txt": UCI.encode().replace(b"1 1 2", b"1 1 \xe9"), "vocab.t.txt": UCI_VOCAB}),
    # ================================================================== UCI, streamed into a batch store
    Bad("convert_uci/documents out of order", lambda d: streaming.convert_uci(d, d / "s"), CorpusError,
        F + r", line 5: document 1 comes after document 3; entries must be grouped by document",
        uci("4\n3\n3\n3 1 2\n1 3 1\n4 2 5\n", "a\nb\nc\n")),
    Bad("convert_uci/bad count, as read_uci says it", lambda d: streaming.convert_uci(d, d / "s"), CorpusError,
        F + r", line 5: document 1, word id 3: count 'x' is not a number", uci("4\n3\n3\n1 1 2\n1 3 x\n", "a\nb\nc\n")),
    Bad("convert_uci/fewer entries than NNZ", lambda d: streaming.convert_uci(d, d / "s"), CorpusError,
        F + r": the header says NNZ=3 but the file has 2 entries \(truncated\?\)", uci("4\n3\n3\n1 1 2\n1 3 1\n", "a\nb\nc\n")),
    Bad("convert_uci/count beyond int64 (was OverflowError)", lambda d: streaming.convert_uci(d, d / "s"), CorpusError,
        F + r", line 4: document 1, word id 1: count '9{25}' does not fit in int32", uci("1\n3\n1\n1 1 " + "9" * 25 + "\n", "a\nb\nc\n")),
    Bad("convert_uci/superscript digit (was ValueError)", lambda d: streaming.convert_uci(d, d / "s"), CorpusError,
        F + r", line 4: document 1, word id 1: count '\u00b2' is not a number", uci("1\n3\n1\n1 1 \u00b2\n", "a\nb\nc\n")),
    Bad("convert_uci/header D = 10^9 (issue 16)", lambda d: streaming.convert_uci(d, d / "s"), CorpusError,
        F + r", line 1: the header says D=1000000000 documents but only 3 have entries", uci("1000000000" + UCI[1:])),
    Bad("convert_uci/document id jumps to 10^9", lambda d: streaming.convert_uci(d, d / "s"), CorpusError,
        F + r", line 5: document 1000000000 comes after 999999998 documents without entries but only 1 with entries",
        uci("1000000000\n4\n2\n1 1 1\n1000000000 2 1\n")),
    Bad("convert_uci/a line of 10^5 characters", lambda d: streaming.convert_uci(d, d / "s"), CorpusError,
        F + r", line 4: longer than 4096 characters \(not a docword entry\)", uci("1\n4\n1\n" + "1 " * 50000 + "\n")),
    Bad("convert_uci/truncated gzip (was EOFError)", lambda d: streaming.convert_uci(d, d / "s"), CorpusError,
        r"docword\.t\.txt\.gz: the gzip stream ends early \(truncated file\)",
        {"docword.t.txt.gz": gz_cut(UCI * 40), "vocab.t.txt": UCI_VOCAB}),
    Bad("convert_uci/not UTF-8 (was UnicodeDecodeError)", lambda d: streaming.convert_uci(d, d / "s"), CorpusError,
        F + r", line 5: byte b'\\xff' is not valid utf-8",
        {"docword.t.txt": UCI.encode().replace(b"1 3 1", b"1 3 \xff"), "vocab.t.txt": UCI_VOCAB}),
    # ================================================================== Vowpal Wabbit
    Bad("vw/fractional count", lambda d: read_vw(d / "x.vw"), CorpusError,
        r"x\.vw, line 2: document 'd2': token 'a:2\.5': count '2\.5' is not an integer", vw_line("d2 a:2.5 b")),
    Bad("vw/negative count", lambda d: read_vw(d / "x.vw"), CorpusError,
        r"x\.vw, line 2: document 'd2': token 'b:-1': count '-1' is negative", vw_line("d2 a b:-1")),
    Bad("vw/NaN count", lambda d: read_vw(d / "x.vw"), CorpusError,
        r"x\.vw, line 2: document 'd2': token 'a:nan': count 'nan' is NaN", vw_line("d2 |@t a:nan")),
    Bad("vw/count a word", lambda d: read_vw(d / "x.vw"), CorpusError,
        r"x\.vw, line 2: document 'd2': token 'a:x': count 'x' is not a number", vw_line("d2 a:x")),
    Bad("vw/count in other digits", lambda d: read_vw(d / "x.vw"), CorpusError,
        r"x\.vw, line 2: document 'd2': token 'a:\u0663': count '\u0663' is not a number", vw_line("d2 a:\u0663")),
    Bad("vw/count beyond int32", lambda d: read_vw(d / "x.vw"), CorpusError,
        r"x\.vw, line 2: document 'd2': token 'a:4294967296': count '4294967296' does not fit in int32",
        vw_line("d2 a:4294967296")),
    Bad("vw/word without count", lambda d: read_vw(d / "x.vw"), CorpusError,
        r"x\.vw, line 2: document 'd2': malformed token 'a:' \(expected word or word:count\)", vw_line("d2 a: b")),
    Bad("vw/count without word", lambda d: read_vw(d / "x.vw"), CorpusError,
        r"x\.vw, line 2: document 'd2': malformed token ':3'", vw_line("d2 :3")),
    Bad("vw/empty document", lambda d: read_vw(d / "x.vw"), CorpusError,
        r"x\.vw, line 2: document 'd2' has no tokens \(1 empty document\(s\) in all\); pass empty_docs='drop'",
        vw_line("d2")),
    Bad("vw/empty namespace only", lambda d: read_vw(d / "x.vw"), CorpusError, r"x\.vw, line 2: document 'd2' has no tokens",
        vw_line("d2 |@tag")),
    Bad("vw/label with a count", lambda d: read_vw(d / "x.vw", label_modality="@labels"), CorpusError,
        r"x\.vw, line 1: document 'd1': label 'sport:2' has a count", {"x.vw": "d1 a |@labels sport:2\n"}),
    Bad("vw/labels twice", lambda d: read_vw(d / "x.vw", label_modality="@labels", labels=[0]), ValueError,
        r"either label_modality \(labels read from the file\) or labels, not both", {"x.vw": "d1 a\n"}),
    Bad("vw/word outside a fixed vocabulary", lambda d: read_vw(d / "x.vw", vocab=["a", "b", "x"]), CorpusError,
        r"x\.vw, line 1: document 'd1': word 'x' of modality '@tag' is not in the given vocabulary",
        {"x.vw": "d1 b |@tag x\nd2 a\n"}),
    Bad("vw/repeated document name (issue 16: kept, with a warning)", lambda d: read_vw(d / "x.vw"), CorpusWarning,
        r"x\.vw, line 3: document name 'd1' was already used on line 1 \(1 repeated name\(s\) in all\); every line is kept",
        {"x.vw": "d1 a b\nd2 c\nd1 a\n"}),
    Bad("vw/not UTF-8", lambda d: read_vw(d / "x.vw"), CorpusError,
        r"x\.vw, line 2: byte b'\\xe9' is not valid utf-8; pass encoding='latin-1'", {"x.vw": b"d1 a\nd2 caf\xe9\n"}),
    Bad("convert_vw/bad line, numbered in the whole file", lambda d: streaming.convert_vw(d / "x.vw", d / "s", batch_size=1),
        CorpusError, r"x\.vw, line 2: document 'd2': token 'a:x': count 'x' is not a number", {"x.vw": "d1 a b\nd2 a:x\n"}),
    Bad("convert_vw/unnamed document, numbered in the whole file",
        lambda d: streaming.convert_vw(d / "x.vw", d / "s", batch_size=2), CorpusError,
        r"x\.vw, line 3: document 'doc2': malformed token 'a:'", {"x.vw": "d0 a\nd1 b\n| a:\n"}),
    Bad("convert_vw/not UTF-8 (was UnicodeDecodeError)", lambda d: streaming.convert_vw(d / "x.vw", d / "s"), CorpusError,
        r"x\.vw, line 2: byte b'\\xe9' is not valid utf-8", {"x.vw": b"d1 a\nd2 caf\xe9\n"}),
    Bad("convert_vw/truncated gzip (was EOFError)", lambda d: streaming.convert_vw(d / "x.vw.gz", d / "s"), CorpusError,
        r"x\.vw\.gz: the gzip stream ends early \(truncated file\)", {"x.vw.gz": gz_cut("d1 a b c\n" * 200)}),
    # ================================================================== lda-c
    Bad("ldac/N larger than the pairs", lambda d: read_ldac(d / "c.ldac", V3 + ["d"]), CorpusError,
        r"c\.ldac, line 2: document 1: the line starts with N=3 but has 2 id:count pairs", {"c.ldac": "2 0:2 2:1\n3 1:3 3:1\n"}),
    Bad("ldac/N smaller than the pairs", lambda d: read_ldac(d / "c.ldac", V3 + ["d"]), CorpusError,
        r"c\.ldac, line 2: document 1: the line starts with N=1 but has 2", {"c.ldac": "2 0:2 2:1\n1 1:3 3:1\n"}),
    Bad("ldac/N not a number", lambda d: read_ldac(d / "c.ldac", V3 + ["d"]), CorpusError,
        r"c\.ldac, line 2: expected the number of pairs first, got 'x'", {"c.ldac": "2 0:2 2:1\nx 1:3\n"}),
    Bad("ldac/N in other digits", lambda d: read_ldac(d / "c.ldac", V3 + ["d"]), CorpusError,
        r"c\.ldac, line 1: expected the number of pairs first, got '\u0661'", {"c.ldac": "\u0661 0:2\n"}),
    Bad("ldac/pair without colon", lambda d: read_ldac(d / "c.ldac", V3 + ["d"]), CorpusError,
        r"c\.ldac, line 1: document 0: malformed pair '2-1' \(expected id:count\)", {"c.ldac": "2 0:2 2-1\n"}),
    Bad("ldac/pair without id", lambda d: read_ldac(d / "c.ldac", V3 + ["d"]), CorpusError,
        r"c\.ldac, line 2: document 1: malformed pair ':4'", {"c.ldac": "1 0:2\n1 :4\n"}),
    Bad("ldac/id outside the vocabulary", lambda d: read_ldac(d / "c.ldac", V3 + ["d"]), CorpusError,
        r"c\.ldac, line 2: document 1: word id 9 is outside the vocabulary of 4 words \(the given vocabulary\)",
        {"c.ldac": "1 0:2\n1 9:4\n"}),
    Bad("ldac/id outside n_words", lambda d: read_ldac(d / "c.ldac", n_words=4), CorpusError,
        r"c\.ldac, line 2: document 1: word id 9 is outside the vocabulary of 4 words \(n_words=4\)",
        {"c.ldac": "1 0:2\n1 9:4\n"}),
    Bad("ldac/negative id", lambda d: read_ldac(d / "c.ldac", V3 + ["d"]), CorpusError,
        r"c\.ldac, line 2: document 1: word id -1 is negative", {"c.ldac": "1 0:2\n1 -1:4\n"}),
    Bad("ldac/id not a number", lambda d: read_ldac(d / "c.ldac", V3 + ["d"]), CorpusError,
        r"c\.ldac, line 2: word id 'a' is not an integer", {"c.ldac": "1 0:2\n1 a:4\n"}),
    Bad("ldac/negative count", lambda d: read_ldac(d / "c.ldac", V3 + ["d"]), CorpusError,
        r"c\.ldac, line 2: document 1, word id 2: count '-4' is negative", {"c.ldac": "1 0:2\n1 2:-4\n"}),
    Bad("ldac/NaN count", lambda d: read_ldac(d / "c.ldac", V3 + ["d"]), CorpusError,
        r"c\.ldac, line 2: document 1, word id 2: count 'NaN' is NaN", {"c.ldac": "1 0:2\n1 2:NaN\n"}),
    Bad("ldac/fractional count", lambda d: read_ldac(d / "c.ldac", V3 + ["d"]), CorpusError,
        r"c\.ldac, line 2: document 1, word id 2: count '0\.5' is not an integer", {"c.ldac": "1 0:2\n1 2:0.5\n"}),
    Bad("ldac/blank line", lambda d: read_ldac(d / "c.ldac", V3 + ["d"]), CorpusError,
        r"c\.ldac, line 2: blank line \(a document without words is written '0'\)", {"c.ldac": "1 0:2\n\n1 2:1\n"}),
    Bad("ldac/empty document", lambda d: read_ldac(d / "c.ldac", V3 + ["d"]), CorpusError,
        r"c\.ldac, line 2: document 1 has no tokens \(1 empty document\(s\) in all\)", {"c.ldac": "1 0:2\n0\n1 2:1\n"}),
    Bad("ldac/n_words against the vocabulary", lambda d: read_ldac(d / "c.ldac", d / "words.txt", n_words=5), CorpusError,
        r"n_words=5 but .*words\.txt has 4 words", {"c.ldac": "1 0:1\n", "words.txt": "a\nb\nc\nd\n"}),
    Bad("ldac/id 99999999999 without a vocabulary (issue 16: hung, then MemoryError)", lambda d: read_ldac(d / "c.ldac"),
        CorpusError, r"c\.ldac, line 1: document 0: word id 99999999999 would make a vocabulary of 100000000000 "
        r"placeholder words for 1 distinct ids \(more than 1026 is not inferred\); pass the vocabulary",
        {"c.ldac": "1 99999999999:1\n"}),
    Bad("ldac/id 10^25 without a vocabulary (was OverflowError)", lambda d: read_ldac(d / "c.ldac"), CorpusError,
        r"c\.ldac, line 2: document 1: word id 10{25} would make a vocabulary", {"c.ldac": "1 0:1\n1 1" + "0" * 25 + ":1\n"}),
    Bad("ldac/n_words beyond int32", lambda d: read_ldac(d / "c.ldac", n_words=10**11), CorpusError,
        r"n_words must be an integer in \[0, 2147483647\], got 100000000000", {"c.ldac": "1 0:1\n"}),
    Bad("ldac/n_words not an integer", lambda d: read_ldac(d / "c.ldac", n_words="5"), CorpusError,
        r"n_words must be an integer in \[0, 2147483647\], got '5'", {"c.ldac": "1 0:1\n"}),
    Bad("ldac/n_words beyond the placeholder limit", lambda d: read_ldac(d / "c.ldac", n_words=10**9), CorpusError,
        rf"n_words=1000000000 without a vocabulary: placeholder names are made for at most {MAX_PLACEHOLDER_WORDS} words",
        {"c.ldac": "1 0:1\n"}),
    # ================================================================== raw texts and dispatch
    Bad("texts/empty after stop words", lambda d: read_texts(["the cat", "the and of", "a dog"], doc_names=list("abc"),
        stop_words="english"), CorpusError,
        r"texts: text 1 \(b\), after tokenising \(stop words, min_df, max_df, token pattern\), has no tokens"),
    Bad("texts/no usable word", lambda d: read_texts(["the", "of and"], stop_words="english"), CorpusError,
        r"CountVectorizer found no usable words: empty vocabulary"),
    Bad("texts/one string", lambda d: read_texts("one text"), TypeError, r"not a single string"),
    Bad("texts/not a string", lambda d: read_texts(["a text", 3]), CorpusError, r"text 1 is a int, not a string"),
    Bad("texts/labels count", lambda d: read_texts(["a cat", "a dog"], labels=["x"]), CorpusError, r"1 labels for 2 texts"),
    Bad("texts/document names count", lambda d: read_texts(["a cat", "a dog"], doc_names=["x"]), CorpusError,
        r"1 document names for 2 texts"),
    Bad("text folder/files at the top and in sub-folders", lambda d: read_text_folder(d), CorpusError,
        r"files both at the top \(a\.txt\) and in sub-folders", {"a.txt": "alpha", "sub/c.txt": "gamma"}),
    Bad("text folder/labels=True with a top file", lambda d: read_text_folder(d, labels=True), CorpusError,
        r"labels=True but a\.txt is not in a sub-folder", {"a.txt": "alpha", "sub/c.txt": "gamma"}),
    Bad("text folder/not UTF-8", lambda d: read_text_folder(d), CorpusError,
        r"post, line 1: byte b'\\xe9' is not valid utf-8; pass encoding='latin-1'", {"post": b"caf\xe9 au lait\n"}),
    Bad("text folder/no text files", lambda d: read_text_folder(d, suffixes=(".txt",)), CorpusError,
        r"no text files in this folder", {"post": "words"}),
    Bad("text folder/not a folder", lambda d: read_text_folder(d / "nothing"), FileNotFoundError, r"nothing is not a folder"),
    Bad("read_corpus/unknown form", lambda d: read_corpus(d / "other.csv"), CorpusError,
        r"other\.csv: unknown corpus form; expected a UCI folder", {"other.csv": "a,b\n"}),
    Bad("read_corpus/missing", lambda d: read_corpus(d / "nothing.vw"), FileNotFoundError, r"does not exist"),
    # ================================================================== writers
    Bad("write_uci/word with spaces around", lambda d: write_uci(Corpus.from_dense(np.ones((1, 2)), vocab=["ok", " x "]), d),
        CorpusError, r"vocabulary entry 1 \(' x '\) cannot be written one word per line"),
    Bad("write_uci/name with a slash", lambda d: write_uci(tiny(), d, "a/b"), ValueError, r"plain file-name part"),
    Bad("write_vw/word with a space", lambda d: write_vw(Corpus.from_dense(np.ones((1, 2)), vocab=["ok", "two words"]),
        d / "a.vw"), CorpusError, r"word 'two words' cannot be written in Vowpal Wabbit format"),
    Bad("write_vw/document name with a space", lambda d: write_vw(Corpus.from_dense(np.ones((1, 2)), vocab=["a", "b"],
        doc_names=["my doc"]), d / "a.vw"), CorpusError, r"document name 'my doc' cannot be written"),
    Bad("write_vw/label with a colon", lambda d: write_vw(Corpus.from_dense(np.ones((1, 2)), vocab=["a", "b"],
        labels=["x:y"]), d / "a.vw"), CorpusError, r"label 'x:y' cannot be written"),
    # ================================================================== Corpus constructors
    Bad("from_entries/negative count", lambda d: Corpus.from_entries([0, 1], [0, 2], [1, -2], vocab=V3), CorpusError,
        r"document 1, word 2: count -2 is negative"),
    Bad("from_entries/NaN count", lambda d: Corpus.from_entries([0, 0], [0, 1], [1.0, np.nan], vocab=V3), CorpusError,
        r"document 0, word 1: count nan is NaN"),
    Bad("from_entries/infinite count", lambda d: Corpus.from_entries([0, 1], [0, 0], [1.0, np.inf], vocab=V3), CorpusError,
        r"document 1, word 0: count inf is not finite"),
    Bad("from_entries/fractional count", lambda d: Corpus.from_entries([0, 1], [0, 1], [2.0, 1.5], vocab=V3), CorpusError,
        r"document 1, word 1: count 1\.5 is not an integer"),
    Bad("from_entries/count a string", lambda d: Corpus.from_entries([0], [1], ["3"], vocab=V3), CorpusError,
        r"counts must be numeric"),
    Bad("from_entries/count beyond int32", lambda d: Corpus.from_entries([0], [1], [2**40], vocab=V3), CorpusError,
        r"document 0, word 1: count 1099511627776 does not fit in int32"),
    Bad("from_entries/word id outside", lambda d: Corpus.from_entries([0, 1], [0, 5], [1, 1], vocab=V3), CorpusError,
        r"document 1: word id 5 is outside the vocabulary of 3 words"),
    Bad("from_entries/negative word id", lambda d: Corpus.from_entries([0], [-1], [1], vocab=V3), CorpusError,
        r"document 0: word id -1 is outside the vocabulary of 3 words"),
    Bad("from_entries/fractional word id", lambda d: Corpus.from_entries([0, 0], [0.0, 1.5], [1, 1], vocab=V3), CorpusError,
        r"entry 1: word id 1\.5 is not an integer"),
    Bad("from_entries/word id beyond int64", lambda d: Corpus.from_entries([0], [10**30], [1], vocab=V3), CorpusError,
        r"entry 0: word id 10{30} does not fit in 64 bits"),
    Bad("from_entries/word id a string", lambda d: Corpus.from_entries([0], ["a"], [1], vocab=V3), CorpusError,
        r"entry 0: word id 'a' is not a number"),
    Bad("from_entries/word ids numeric strings", lambda d: Corpus.from_entries([0], ["1"], [1], vocab=V3), CorpusError,
        r"word ids must be integers, got dtype <U1"),
    Bad("from_entries/document id outside n_docs", lambda d: Corpus.from_entries([0, 3], [0, 1], [1, 1], vocab=V3, n_docs=2),
        CorpusError, r"entry 1: document id 3 is outside \[0, 2\)"),
    Bad("from_entries/negative document id", lambda d: Corpus.from_entries([-1], [0], [1], vocab=V3), CorpusError,
        r"entry 0: document id -1 is negative"),
    Bad("from_entries/shapes", lambda d: Corpus.from_entries([0, 1], [0], [1, 1], vocab=V3), CorpusError,
        r"doc_ids, word_ids and counts must be 1-d arrays of one length, got shapes \(2,\), \(1,\), \(2,\)"),
    Bad("from_entries/vocabulary word twice", lambda d: Corpus.from_entries([0], [0], [1], vocab=["a", "b", "a"]),
        CorpusError, r"vocabulary entry 'a' appears twice \(positions 0 and 2\)"),
    Bad("from_entries/vocabulary a string", lambda d: Corpus.from_entries([0], [0], [1], vocab="abc"), CorpusError,
        r"vocab must be a sequence of words, not a single string \('abc'\)"),
    Bad("from_entries/no vocabulary, no n_words", lambda d: Corpus.from_entries([0], [0], [1]), CorpusError,
        r"either vocab or n_words must be given"),
    Bad("from_entries/n_words against the vocabulary", lambda d: Corpus.from_entries([0], [0], [1], vocab=V3, n_words=4),
        CorpusError, r"n_words=4 but the vocabulary has 3 entries"),
    Bad("from_entries/n_words beyond the placeholder limit", lambda d: Corpus.from_entries([0], [0], [1], n_words=10**9),
        CorpusError, rf"n_words=1000000000 without a vocabulary: placeholder names are made for at most {MAX_PLACEHOLDER_WORDS}"),
    Bad("from_entries/n_words beyond int32", lambda d: Corpus.from_entries([0], [0], [1], n_words=10**12), CorpusError,
        r"n_words=1000000000000 is more than 2147483647 \(ids are stored as int32\)"),
    Bad("from_entries/n_docs fractional", lambda d: Corpus.from_entries([0], [0], [1], vocab=V3, n_docs=2.5), CorpusError,
        r"n_docs must be a non-negative integer, got 2\.5"),
    Bad("from_entries/n_docs negative", lambda d: Corpus.from_entries([0], [0], [1], vocab=V3, n_docs=-1), CorpusError,
        r"n_docs must be a non-negative integer, got -1"),
    Bad("from_entries/n_docs beyond int32", lambda d: Corpus.from_entries([0], [0], [1], vocab=V3, n_docs=10**12),
        CorpusError, r"n_docs=1000000000000 is more than 2147483647"),
    Bad("from_entries/n_docs = 10^9, nearly all empty", lambda d: Corpus.from_entries([0], [0], [1], vocab=V3, n_docs=10**9),
        CorpusError, r"document 1 has no tokens \(999999999 empty document\(s\) in all\)"),
    Bad("from_entries/document id 10^9 inferred", lambda d: Corpus.from_entries([0, 10**9], [0, 1], [1, 1], vocab=V3,
        empty_docs="drop"), CorpusError,
        r"document id 1000000000 would make 1000000001 documents of which only 2 have tokens .*; pass n_docs"),
    Bad("from_entries/empty document", lambda d: Corpus.from_entries([0, 2], [0, 1], [1, 1], vocab=V3), CorpusError,
        r"document 1 has no tokens \(1 empty document\(s\) in all\); pass empty_docs='drop'"),
    Bad("from_entries/empty named document", lambda d: Corpus.from_entries([0, 2], [0, 1], [1, 1], vocab=V3,
        doc_names=["first", "second", "third"]), CorpusError, r"document 1 \(second\) has no tokens"),
    Bad("from_entries/document of zero counts", lambda d: Corpus.from_entries([0, 1], [0, 1], [0, 1], vocab=V3),
        CorpusError, r"document 0 has no tokens"),
    Bad("from_entries/trailing empty documents from names", lambda d: Corpus.from_entries([0, 1], [0, 1], [1, 1], vocab=V3,
        doc_names=["x", "y", "z", "t"]), CorpusError, r"document 2 \(z\) has no tokens \(2 empty"),
    Bad("from_entries/names count", lambda d: Corpus.from_entries([0, 2], [0, 1], [1, 1], vocab=V3, doc_names=["x", "y"]),
        CorpusError, r"2 document names for 3 documents"),
    Bad("from_entries/empty_docs value", lambda d: Corpus.from_entries([0], [0], [1], vocab=V3, empty_docs="skip"),
        ValueError, r"empty_docs must be 'error' or 'drop', got 'skip'"),
    Bad("from_entries/integer label 10^9", lambda d: Corpus.from_entries([0, 1], [0, 1], [1, 1], vocab=V3,
        labels=[0, 10**9]), CorpusError,
        r"document 1: integer label 1000000000 would make 1000000001 label columns for 2 distinct labels"),
    Bad("from_entries/modality index 10^9", lambda d: Corpus.from_entries([0, 1], [0, 1], [1, 1], vocab=["a", "b"],
        modalities=[0, 10**9]), CorpusError, r"word 1: modality index 1000000000 would make 1000000001 modalities"),
    Bad("from_dense/NaN", lambda d: Corpus.from_dense([[1.0, 0, 0], [0, 1, np.nan]], vocab=V3), CorpusError,
        r"document 1: count nan for word 2 is not finite"),
    Bad("from_dense/one dimension", lambda d: Corpus.from_dense([1, 2, 3]), CorpusError, r"expected a 2-d"),
    Bad("from_dense/width beyond int32", lambda d: Corpus.from_dense(np.zeros((0, 2**31))), CorpusError,
        r"n_words=2147483648 is more than 2147483647"),
    Bad("from_sparse/negative", lambda d: Corpus.from_sparse(sp.csr_matrix(np.array([[1, 0, 0], [-1, 1, 0]])), vocab=V3),
        CorpusError, r"document 1, word 0: count -1 is negative"),
    Bad("from_sparse/fractional", lambda d: Corpus.from_sparse(sp.csr_matrix(np.array([[1, 0, 0.5], [0, 1, 0]])), vocab=V3),
        CorpusError, r"document 0, word 2: count 0\.5 is not an integer"),
    Bad("from_sparse/10^9 rows, one entry", lambda d: Corpus.from_sparse(sp.coo_matrix(([1], ([0], [0])), shape=(10**9, 3)),
        vocab=V3), CorpusError, r"document 1 has no tokens \(999999999 empty document\(s\) in all\)"),
    Bad("from_sparse/2^23 columns without a vocabulary", lambda d: Corpus.from_sparse(sp.coo_matrix(([1], ([0], [0])),
        shape=(1, 2**23))), CorpusError, r"n_words=8388608 without a vocabulary: placeholder names are made for at most"),
    Bad("from_lists/word id 10^8 (issue 16: a 100M-word vocabulary)", lambda d: Corpus.from_lists([[(10**8, 1)]]),
        CorpusError, r"document 0: word id 100000000 would make a vocabulary of 100000001 words for 1 distinct ids "
        r"\(more than 1026 is not inferred\); pass vocab or n_words"),
    Bad("from_lists/word id 10^30", lambda d: Corpus.from_lists([[(0, 1)], [(10**30, 1)]]), CorpusError,
        r"entry 1: word id 10{30} does not fit in 64 bits"),
    Bad("from_lists/word id a string (was TypeError)", lambda d: Corpus.from_lists([[(0, 1), ("a", 1)]]), CorpusError,
        r"entry 1: word id 'a' is not a number"),
    Bad("from_lists/not a pair", lambda d: Corpus.from_lists([[(0, 1)], [3]], vocab=["a", "b"]), CorpusError,
        r"document 1: entry 3 is not a \(word_id, count\) pair"),
    Bad("from_lists/empty document", lambda d: Corpus.from_lists([[(0, 1)], [], [(1, 1)]], vocab=["a", "b"]), CorpusError,
        r"document 1 has no tokens"),
    Bad("from_lists/negative count", lambda d: Corpus.from_lists([[(1, -1)]], vocab=["a", "b"]), CorpusError,
        r"document 0, word 1: count -1 is negative"),
    Bad("from_lists/mapping with a gap", lambda d: Corpus.from_lists([[(0, 1)]], vocab={0: "a", 2: "c"}), CorpusError,
        r"the vocabulary mapping has no word for id 1"),
    # ================================================================== Corpus methods
    Bad("check_topics/more than tokens", lambda d: tiny().check_topics(12), ValueError,
        r"12 topics is more than the 11 tokens of the corpus"),
    Bad("check_topics/zero", lambda d: tiny().check_topics(0), ValueError, r"positive integer, got 0"),
    Bad("check_topics/fractional", lambda d: tiny().check_topics(2.5), ValueError, r"positive integer, got 2\.5"),
    Bad("check_same_vocab/size", lambda d: tiny().check_same_vocab(Corpus.from_dense(np.ones((1, 3)), vocab=V3)),
        CorpusError, r"the test corpus has a different vocabulary \(3 words vs 4\); use corpus\.with_vocab"),
    Bad("check_same_vocab/order", lambda d: tiny().check_same_vocab(Corpus.from_dense(np.ones((1, 4)),
        vocab=["apple", "cherry", "banana", "date"])), CorpusError, r"word 1 is 'cherry' vs 'banana'"),
    Bad("with_vocab/unknown word", lambda d: tiny().with_vocab(["apple", "banana", "date"], unknown="error"), CorpusError,
        r"word 'cherry' is not in the target vocabulary \(2 entries affected\)"),
    Bad("with_vocab/emptied document", lambda d: tiny().with_vocab(["apple", "cherry"]), CorpusError,
        r"document 1 \(d1\) has no tokens"),
    Bad("with_vocab/unknown value", lambda d: tiny().with_vocab(["a"], unknown="ignore"), ValueError, r"unknown must be"),
    Bad("subset/index outside", lambda d: tiny().subset([0, 4]), ValueError, r"document index 4 is outside \[0, 3\)"),
    Bad("subset/mask shape", lambda d: tiny().subset([True, False]), ValueError,
        r"boolean mask of shape \(2,\) for 3 documents"),
    Bad("train_test_split/no test documents", lambda d: tiny().train_test_split(0), ValueError,
        r"leaves no training or no test documents out of 3"),
    Bad("completion_split/one-token document", lambda d: Corpus.from_dense([[1, 0], [1, 2]], vocab=["a", "b"])
        .completion_split(), CorpusError, r"document 0 has 1 token\(s\); document completion needs at least 2"),
    Bad("completion_split/one distinct word", lambda d: Corpus.from_dense([[3, 0], [1, 2]], vocab=["a", "b"])
        .completion_split("words"), CorpusError, r"document 0 has 1 distinct word\(s\); the disjoint-words completion"),
    Bad("completion_split/protocol", lambda d: tiny().completion_split("lines"), ValueError, r"protocol must be"),
    Bad("labels/count", lambda d: tiny().with_labels(["a", "b"]), CorpusError, r"2 labels for 3 documents"),
    Bad("labels/unknown name", lambda d: tiny().with_labels(["a", "z", "a"], label_names=["a", "b"]), CorpusError,
        r"document 1: label 'z' is not among the label names"),
    Bad("labels/index outside", lambda d: tiny().with_labels([0, 1, 4], label_names=["a", "b"]), CorpusError,
        r"document 2: label 4 is outside \[0, 2\)"),
    Bad("labels/negative", lambda d: tiny().with_labels([0, -1, 1]), CorpusError, r"document 1: label -1 is negative"),
    Bad("labels/matrix rows", lambda d: tiny().with_labels(np.ones((2, 2))), CorpusError,
        r"label matrix has 2 rows for 3 documents"),
    Bad("labels/matrix names", lambda d: tiny().with_labels(np.ones((3, 2)), label_names=["a"]), CorpusError,
        r"1 label names for 2 label columns"),
    Bad("labels/single label of a multi-label corpus", lambda d: tiny().with_labels([["x", "y"], [], ["y"]]).label_ids,
        ValueError, r"multi-label"),
    Bad("modalities/unknown name", lambda d: Corpus.from_dense(np.ones((1, 2)), vocab=["a", "b"], modalities=["m", "o"],
        modality_names=["m"]), CorpusError, r"modality 'o' is not among the modality names"),
    Bad("modalities/length", lambda d: Corpus.from_dense(np.ones((1, 2)), vocab=["a", "b"], modalities=[0]), CorpusError,
        r"modalities must give one modality per word \(2\)"),
    Bad("select_modality/unknown", lambda d: tiny(modalities=[0, 0, 1, 1]).select_modality("@x"), ValueError,
        r"unknown modality '@x'"),
    # ================================================================== batch stores
    Bad("store/no meta.json", lambda d: streaming.BatchStore(d), FileNotFoundError, r"is not a batch store \(no meta\.json\)"),
    Bad("store/meta.json not JSON (was JSONDecodeError)", lambda d: open_store(d, edit=lambda f: (f / "meta.json")
        .write_text("{n_docs: 3")), CorpusError, r"meta\.json: not valid JSON"),
    Bad("store/meta.json not UTF-8 (was UnicodeDecodeError)", lambda d: open_store(d, edit=lambda f: (f / "meta.json")
        .write_bytes(b"\xfb{}")), CorpusError, r"meta\.json: not valid JSON"),
    Bad("store/meta.json a list (was AttributeError)", lambda d: open_store(d, edit=lambda f: (f / "meta.json")
        .write_text("[1, 2]")), CorpusError, r"meta\.json: expected a JSON object, got list"),
    Bad("store/unknown format", lambda d: open_store(d, meta={"format": "other/2"}), CorpusError,
        r"meta\.json: unknown format 'other/2'"),
    Bad("store/n_docs missing (was KeyError)", lambda d: open_store(d, edit=lambda f: (f / "meta.json").write_text(
        json.dumps({k: v for k, v in json.loads((f / "meta.json").read_text()).items() if k != "n_docs"}))),
        CorpusError, r"meta\.json: n_docs must be an integer \[0, 2147483647\], got None"),
    Bad("store/n_docs a list (was TypeError)", lambda d: open_store(d, meta={"n_docs": []}), CorpusError,
        r"meta\.json: n_docs must be an integer \[0, 2147483647\], got \[\]"),
    Bad("store/n_docs 10^12", lambda d: open_store(d, meta={"n_docs": 10**12}), CorpusError,
        r"meta\.json: n_docs must be an integer \[0, 2147483647\], got 1000000000000"),
    Bad("store/n_docs true", lambda d: open_store(d, meta={"n_docs": True}), CorpusError,
        r"meta\.json: n_docs must be an integer"),
    Bad("store/batch_size 0 (was ZeroDivisionError)", lambda d: open_store(d, meta={"batch_size": 0}), CorpusError,
        r"meta\.json: batch_size must be an integer >= 1, got 0"),
    Bad("store/nnz against words.bin", lambda d: open_store(d, meta={"nnz": 10**9}), CorpusError,
        r"words\.bin: 32 bytes, expected 4000000000 \(truncated or missing\)"),
    Bad("store/truncated words.bin", lambda d: open_store(d, edit=lambda f: (f / "words.bin").write_bytes(b"\0" * 12)),
        CorpusError, r"words\.bin: 12 bytes, expected 32"),
    Bad("store/offsets not ending at nnz", lambda d: open_store(d, edit=write_array("offsets.bin", [0, 2, 4, 9], np.int64)),
        CorpusError, r"offsets\.bin: offsets run from 0 to 9, expected 0 to nnz=8"),
    Bad("store/offsets decreasing (was a negative read)", lambda d: read_store(d, edit=write_array("offsets.bin",
        [0, 3, 2, 8], np.int64)), CorpusError, r"offsets\.bin: document 1: offsets 3 \.\. 2 are not a range of 0\.\.8"),
    Bad("store/word id outside", lambda d: read_store(d, edit=write_array("words.bin", [0, 2, 1, 3, 0, 1, 2, 7],
        np.int32)), CorpusError, r"words\.bin: document 2: word id 7 is outside 0\.\.3 \(corrupt store\)"),
    Bad("store/negative count", lambda d: read_store(d, edit=write_array("counts.bin", [2, 1, 3, -1, 1, 1, 1, 1],
        np.int32)), CorpusError, r"counts\.bin: document 1: count -1 is negative \(corrupt store\)"),
    Bad("store/vocabulary length", lambda d: open_store(d, edit=lambda f: (f / "vocab.txt").write_text("a\nb\n")),
        CorpusError, r"vocab\.txt: 2 lines but meta\.json says n_words=4"),
    Bad("write_store/another vocabulary", lambda d: streaming.write_store([tiny(), tiny().with_vocab(
        ["date", "cherry", "banana", "apple"])], d / "s"), CorpusError, r"part 1 has another vocabulary than part 0"),
]


def test_catalogue_ids_are_unique():
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids)), [i for i in ids if ids.count(i) > 1]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(tmp_path, case: Bad):
    for name, content in case.files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    if issubclass(case.error, Warning):
        with pytest.warns(case.error, match=case.message):
            case.call(tmp_path)
    else:
        with pytest.raises(case.error, match=case.message) as info:
            case.call(tmp_path)
        # Exactly that type (a subclass would do for pytest.raises, but the table names the type
        # a user catches) and one line, as a message printed by the CLI must be.
        assert type(info.value) is case.error, type(info.value)
        assert "\n" not in str(info.value).strip(), str(info.value)
