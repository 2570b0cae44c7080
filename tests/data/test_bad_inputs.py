"""The catalogue of bad inputs (issue 16, part 7): one table, one row per bad file or call.

Each row gives the files to write (name -> text or bytes), the call that reads them (it receives
the folder), the exception (or warning) it must raise and a regular expression its message must
match, naming the file and line, the document, or the parameter at fault.  A new check in a reader
or constructor adds a row here, so the table is the list of everything we refuse and how we say it.
Rows marked "(issue 16)" are the inputs the issue found mishandled: a hang, a MemoryError, a raw
exception, or silence.

Issue 26 adds the kinds a trial of unusual inputs found, across every entry point: empty files
(named, not "3 topics is more than the 0 tokens"), texts given where counts are expected, DataFrame
columns matched by name, negative "how many words", numpy scalars, regularizers JAX cannot trace
(rows in ``CASES``); inputs that are fine and must give the right result -- a byte-order mark, a
DataFrame's columns in another order, numpy scalars (``RIGHT``); the command line's numeric
options (``COMMAND_LINE``); and the report's stylesheet.
"""

from __future__ import annotations

import functools
import gzip
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp

import topicjax as tj
from topicjax import cli
from topicjax import regularizers as R
from topicjax.cli.report import write_report
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
from topicjax.interop.gensim import GensimTopicModel, gensim_topics
from topicjax.scale import distributed
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


# ================================================================== issue 26: the kinds a trial found
# (the rows named "(issue 26)"; rows of the right result, where the input is fine, are in RIGHT
# below, and the command line's options in COMMAND_LINE)
@functools.cache
def plsa() -> tj.PLSA:
    """A PLSA fitted once on the tiny corpus (top words, DataFrames, texts given to transform)."""
    return tj.PLSA(2, max_iter=3, random_state=0, progress=False).fit(tiny())


@functools.cache
def ptm() -> tj.PTM:
    return tj.PTM(2, max_iter=2, random_state=0, progress=False).fit(tiny())


def frame(columns=None, **extra):
    """The tiny corpus as a DataFrame with word columns, in the order ``columns`` (default its
    vocabulary), plus the columns ``extra`` (name -> values)."""
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame(TINY, columns=list(tiny().vocab))
    df = df[list(columns)] if columns is not None else df
    return df.assign(**extra) if extra else df


def if_on_phi(phi, theta):
    if jnp.sum(phi[0]) > 0.5:  # Python `if` on a traced value
        return jnp.sum(jnp.log(phi))
    return -jnp.sum(jnp.log(theta))


def int_of_phi(phi, theta):
    k = int(jnp.argmax(phi[0]))  # a traced value made a Python int
    return jnp.sum(jnp.log(phi[:, k]))


def numpy_of_phi(phi, theta):
    return jnp.asarray(np.sum(np.log(np.asarray(phi))))  # numpy on a traced value


def mask_of_phi(phi, theta):
    return jnp.sum(jnp.log(phi[phi > 0.1]))  # a boolean mask of traced values as an index


def fit_artm(reg):
    return lambda d: tj.ARTM(2, regularizers=[(reg, 0.1)], max_iter=2, random_state=0, progress=False).fit(tiny())


def fit_online_with(reg):
    return lambda d: streaming.fit_online(streaming.write_store([tiny()], d / "s", batch_size=2), 2,
                                          regularizers=[reg], progress=False)


def tune_objective(objective):
    model = tj.ARTM(2, regularizers=[(R.smooth_phi(), 0.1)], max_iter=2, tol=0.0, random_state=0, progress=False)
    return lambda d: tj.tune.tune(model, tiny(), objective, {"smooth_phi": (1e-3, 1.0)}, n_steps=1, progress=False)


TEXTS = ["the cat sat on the mat", "a dog ran far away", "the cat and the dog"]
TRACED = (r"cannot be compiled by JAX: it uses a traced value \(phi, theta, its data or anything computed from them\) "
          r"as a Python bool \(if, while, and/or, bool\(\)\); write the choice with jnp\.where\(condition, a, b\)")
EMPTY = r"the file is empty \(no documents\)"
EMPTY_UCI = r"the file is empty \(expected the header D, W, NNZ, then 'docID wordID count' lines\)"

CASES += [
    # ------------------------------------------------ empty files: the file named, not "3 topics > 0 tokens"
    Bad("vw/empty file (issue 26)", lambda d: read_vw(d / "x.vw"), CorpusError, r"x\.vw: " + EMPTY, {"x.vw": ""}),
    Bad("vw/blank lines only (issue 26)", lambda d: read_vw(d / "x.vw"), CorpusError, r"x\.vw: " + EMPTY,
        {"x.vw": "\n  \n\n"}),
    Bad("vw/byte-order mark only (issue 26)", lambda d: read_vw(d / "x.vw"), CorpusError, r"x\.vw: " + EMPTY,
        {"x.vw": "\ufeff"}),
    Bad("convert_vw/empty file, as read_vw says it (issue 26)", lambda d: streaming.convert_vw(d / "x.vw", d / "s"),
        CorpusError, r"x\.vw: " + EMPTY, {"x.vw": "\n\n"}),
    Bad("ldac/empty file (issue 26)", lambda d: read_ldac(d / "c.ldac", V3), CorpusError, r"c\.ldac: " + EMPTY,
        {"c.ldac": ""}),
    Bad("ldac/blank lines only (issue 26)", lambda d: read_ldac(d / "c.ldac"), CorpusError, r"c\.ldac: " + EMPTY,
        {"c.ldac": "\n\n"}),
    Bad("uci/empty docword file (issue 26)", read_uci_t, CorpusError, F + ": " + EMPTY_UCI, uci("")),
    Bad("uci/docword file of blank lines (issue 26)", read_uci_t, CorpusError, F + ": " + EMPTY_UCI, uci("\n \n\n\n")),
    Bad("uci/header D=0 (issue 26)", read_uci_t, CorpusError,
        F + r", line 1: the header says D=0: the corpus has no documents", uci("0\n4\n0\n")),
    Bad("convert_uci/empty docword file (issue 26)", lambda d: streaming.convert_uci(d, d / "s"), CorpusError,
        F + ": " + EMPTY_UCI, uci("")),
    Bad("uci/empty vocabulary file (issue 26)", read_uci_t, CorpusError,
        r"vocab\.t\.txt: the vocabulary file is empty \(no words\)", uci(UCI, "")),
    Bad("ldac/empty vocabulary file beside (issue 26)", lambda d: read_ldac(d / "c.ldac"), CorpusError,
        r"c\.vocab: the vocabulary file is empty \(no words\)", {"c.ldac": "1 0:1\n", "c.vocab": "\n"}),
    Bad("text folder/every file empty (issue 26)", lambda d: read_text_folder(d), CorpusError,
        r": all 2 text files are empty \(no words to read\)", {"a.txt": "", "b.txt": " \n\n"}),
    Bad("text folder/its one file empty (issue 26)", lambda d: read_corpus(d), CorpusError,
        r": the file a\.txt is empty \(no words to read\)", {"a.txt": "\ufeff"}),
    Bad("texts/no texts (issue 26)", lambda d: read_texts([]), CorpusError, r"texts: no texts \(the sequence is empty\)"),
    Bad("check_topics/a corpus without documents (issue 26)",
        lambda d: Corpus.from_entries([], [], [], vocab=V3, n_docs=0).check_topics(3), ValueError,
        r"the corpus has no documents \(an empty file, or every document dropped as empty\)"),
    Bad("fit/every document dropped as empty (issue 26: was '3 topics is more than the 0 tokens')",
        lambda d: tj.PLSA(3, max_iter=2, progress=False).fit(read_vw(d / "x.vw", empty_docs="drop")), ValueError,
        r"the corpus has no documents", {"x.vw": "d1\nd2 |@tag\n"}),
    # ------------------------------------------------ text (or token lists, or gensim bags) given to fit/transform
    Bad("fit/a list of texts (issue 26: was scikit-learn's 'could not convert string to float')",
        lambda d: tj.PLSA(2, progress=False).fit(TEXTS), TypeError,
        r"PLSA\.fit: X is a list of 3 texts, not a count matrix; give a Corpus \(tj\.Corpus\.from_texts\(texts, "
        r"stop_words='english'\)\) or put a CountVectorizer before the model in a Pipeline"),
    Bad("fit/an array of texts (was 'Expected 2D array')", lambda d: tj.TTMM(2, n_themes=2, progress=False).fit(np.array(TEXTS)),
        TypeError, r"TTMM\.fit: X is a list of 3 texts"),
    Bad("fit/one string", lambda d: tj.LIDA(2, variant="lda", progress=False).fit("the cat sat"), TypeError,
        r"LIDA\.fit: X is a single string; give a Corpus, e\.g\. tj\.Corpus\.from_texts\(\[text, \.\.\.\]\)"),
    Bad("fit/token lists", lambda d: tj.ARTM(2, progress=False).fit([t.split() for t in TEXTS]), TypeError,
        r"ARTM\.fit: X is a list of 3 tokenised documents \(lists of words\), not a count matrix; give a Corpus"),
    Bad("fit/gensim bags of words (was 'inhomogeneous shape')", lambda d: tj.PTM(2, progress=False).fit(
        [[(0, 2), (2, 1)], [(1, 3)]]), TypeError, r"PTM\.fit: X is a list of 2 bags of words \(\(word_id, count\) "
        r"pairs, as gensim writes them\), not a count matrix; give a Corpus: tj\.Corpus\.from_lists\(X, vocab=\.\.\.\)"),
    Bad("fit_many/a list of texts", lambda d: tj.PTM(2, max_iter=2, progress=False).fit_many(TEXTS, n_restarts=2),
        TypeError, r"PTM\.fit_many: X is a list of 3 texts"),
    Bad("select_order/a list of texts", lambda d: tj.ptm.select_order(TEXTS, 3, 2, max_iter=2, progress=False),
        TypeError, r"PTM\.fit: X is a list of 3 texts"),
    Bad("transform/a list of texts", lambda d: plsa().transform(TEXTS), TypeError,
        r"PLSA\.transform: X is a list of 3 texts, not a count matrix"),
    # ------------------------------------------------ DataFrame columns: matched by name (right order: RIGHT below)
    Bad("transform/DataFrame without a word of the model (issue 26)", lambda d: plsa().transform(
        frame(["apple", "banana", "cherry"])), ValueError,
        r"the columns of X \(its feature names\) are matched to the model's words by name: 1 of the model's words "
        r"have no column \('date'\); give one column per word of vocab_ \(X\.reindex\(columns=model\.vocab_, "
        r"fill_value=0\)\), or a Corpus re-indexed with corpus\.with_vocab\(model\.vocab_\)"),
    Bad("transform/DataFrame with a column that is not a word (issue 26)", lambda d: plsa().transform(
        frame(zebra=1)), ValueError, r"by name: 1 columns are not words of the model \('zebra'\)"),
    Bad("score/DataFrame with missing and other columns (issue 26)", lambda d: plsa().score(
        frame(["date", "cherry"], kiwi=1, fig=2)), ValueError,
        r"by name: 2 of the model's words have no column \('apple', 'banana'\); 2 columns are not words of the "
        r"model \('kiwi', 'fig'\)"),
    # ------------------------------------------------ how many words: a negative n is not "all but n"
    Bad("top_words/negative n (issue 26: printed all but 3 words)", lambda d: plsa().top_words(-3), ValueError,
        r"n must be an integer >= 1, got -3"),
    Bad("top_words/zero", lambda d: plsa().top_words(0), ValueError, r"n must be an integer >= 1, got 0"),
    Bad("top_words/fractional (was a slice TypeError)", lambda d: plsa().top_words(2.5), ValueError,
        r"n must be an integer >= 1, got 2\.5"),
    Bad("metrics.top_words/negative n (issue 26)", lambda d: tj.metrics.top_words(plsa().phi_, plsa().vocab_, -2),
        ValueError, r"n must be an integer >= 1, got -2"),
    Bad("metrics.coherence/kernel, negative k (issue 26: scored the whole kernel)", lambda d: tj.metrics.coherence(
        plsa().phi_, tiny(), k=-3, kernel=True), ValueError, r"k must be an integer >= 1, got -3"),
    Bad("metrics.coherence/top-k, k=1", lambda d: tj.metrics.coherence(plsa().phi_, tiny(), k=1), ValueError,
        r"k must be an integer >= 2 for top-k coherence \(None with kernel=True\), got 1"),
    Bad("gensim_topics/negative top_n (issue 26)", lambda d: gensim_topics(plsa(), -2), ValueError,
        r"top_n must be an integer >= 1, got -2"),
    Bad("PTM.top_specific_words/negative n", lambda d: ptm().top_specific_words(-1), ValueError,
        r"n must be an integer >= 1, got -1"),
    Bad("PTM.top_shared_words/negative n", lambda d: ptm().top_shared_words(-4), ValueError,
        r"n must be an integer >= 1, got -4"),
    Bad("GensimTopicModel.show_topic/negative topn", lambda d: GensimTopicModel(plsa()).show_topic(0, -1), ValueError,
        r"topn must be an integer >= 1, got -1"),
    Bad("GensimTopicModel.show_topic/topic -1 (was the last topic)", lambda d: GensimTopicModel(plsa()).show_topic(-1),
        ValueError, r"topicid must be an integer in \[0, 1\], got -1"),
    Bad("scores.Coherence/negative k, when made (was at the fit's first record)",
        lambda d: tj.evaluation.scores.Coherence(-3), ValueError, r"k must be an integer >= 2, got -3"),
    Bad("scores.Coherence/kernel, negative k", lambda d: tj.evaluation.scores.Coherence(-1, kernel=True), ValueError,
        r"k must be an integer >= 1, got -1"),
    # ------------------------------------------------ numpy scalars and other numbers
    Bad("train_test_split/NaN (was 'cannot convert float NaN to integer')", lambda d: tiny().train_test_split(
        float("nan")), ValueError, r"test_size must be a fraction in \(0, 1\) or a number of documents, got nan"),
    Bad("train_test_split/True (was 1 document)", lambda d: tiny().train_test_split(True), ValueError,
        r"test_size must be a fraction in \(0, 1\) or a number of documents, got True"),
    Bad("train_test_split/fraction above 1", lambda d: tiny().train_test_split(np.float32(1.5)), ValueError,
        r"test_size must be a fraction in \(0, 1\) or a number of documents, got np\.float32\(1\.5\)"),
    Bad("make_bars/no documents (was numpy's 'need at least one array to stack')",
        lambda d: tj.datasets.make_bars(n_docs=0), ValueError, r"n_docs must be an integer >= 1, got 0"),
    Bad("make_bars/alpha 0", lambda d: tj.datasets.make_bars(n_docs=5, alpha=0.0), ValueError,
        r"alpha must be a number > 0\.0, got 0\.0"),
    Bad("write_store/fractional batch size (was taken as 2)", lambda d: streaming.write_store([tiny()], d / "s",
        batch_size=2.5), ValueError, r"batch_size must be an integer >= 1, got 2\.5"),
    # ------------------------------------------------ regularizers JAX cannot trace: named, and what to write
    Bad("regularizer/Python if on phi (issue 26: was TracerBoolConversionError)", fit_artm(if_on_phi), ValueError,
        r"regularizer 'if_on_phi' " + TRACED),
    Bad("regularizer/int() of a traced value (was ConcretizationTypeError)", fit_artm(int_of_phi), ValueError,
        r"regularizer 'int_of_phi' cannot be compiled by JAX: it turns a traced value \(phi, theta, its data or "
        r"anything computed from them\) into a Python number \(int\(\), float\(\), \.item\(\), range\(\)\)"),
    Bad("regularizer/numpy on phi (was TracerArrayConversionError)", fit_artm(numpy_of_phi), ValueError,
        r"regularizer 'numpy_of_phi' cannot be compiled by JAX: it turns a traced value .* into a numpy array "
        r"\(np\.\*\); use jax\.numpy \(jnp\.\*\)"),
    Bad("regularizer/boolean mask of phi as an index (was NonConcreteBooleanIndexError)", fit_artm(mask_of_phi),
        ValueError, r"regularizer 'mask_of_phi' cannot be compiled by JAX: it indexes with a boolean mask .* use "
        r"jnp\.where\(mask, x, 0\)"),
    Bad("regularizer/custom, Python if on its data", fit_artm(R.custom(
        lambda phi, theta, w: jnp.sum(jnp.log(phi)) if w.sum() > 0 else 0.0, np.ones(2), name="weighted")),
        ValueError, r"regularizer 'weighted' " + TRACED),
    Bad("regularizer/in fit_many", lambda d: tj.ARTM(2, regularizers=[if_on_phi], max_iter=2, progress=False)
        .fit_many(tiny(), seeds=[0, 1]), ValueError, r"regularizer 'if_on_phi' " + TRACED),
    Bad("regularizer/in the online fit", fit_online_with(if_on_phi), ValueError, r"regularizer 'if_on_phi' " + TRACED),
    Bad("regularizer/in a sharded fit", lambda d: distributed.fit(tiny(), 2, regularizers=[if_on_phi], max_iter=2,
        progress=False), ValueError, r"regularizer 'if_on_phi' " + TRACED),
    Bad("tune/an objective with a Python if", tune_objective(if_on_phi), ValueError, r"objective 'if_on_phi' " + TRACED),
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


# ================================================================== issue 26: inputs that must give the right result
BOM = "\ufeff"


@dataclass
class Right:
    """An input that is fine: ``got(folder)`` must equal ``expected(folder)`` (the same data given in
    the plain way), the files written first."""

    id: str
    got: Callable[[Path], object]
    expected: Callable[[Path], object]
    files: dict = field(default_factory=dict)


def bom_and_plain(files: dict, *marked: str) -> dict:
    """``files`` twice: under ``plain/`` as they are, under ``bom/`` with a byte-order mark at the
    start of the ``marked`` ones (as Notepad or Excel's "CSV UTF-8" write them)."""
    out = {}
    for name, text in files.items():
        out[f"plain/{name}"] = text
        out[f"bom/{name}"] = BOM + text if name in marked else text
    return out


def both(read):
    """``(got, expected)``: ``read`` on the files with and without the byte-order mark."""
    return (lambda d: read(d / "bom")), (lambda d: read(d / "plain"))


def store_corpus(store) -> Corpus:
    return store.corpus(empty_docs="drop")


def saved_and_loaded(d: Path, model):
    model.save(d / "m")
    return type(model).load(d / "m")


TSV = "the cat sat\tpets\nthe dog ran\tpets\ncat and dog\tfarm\n"
RIGHT = [
    # ------------------------------------------------ a byte-order mark at the start of a file is not text
    Right("uci/vocabulary with a byte-order mark (issue 26: its first word was '\\ufeffapple')",
          *both(read_uci), files=bom_and_plain(uci(UCI), "vocab.t.txt")),
    Right("uci/docword with a byte-order mark (was 'header value D ... got '\\ufeff3'')",
          *both(read_uci), files=bom_and_plain(uci(UCI), "docword.t.txt", "vocab.t.txt")),
    Right("uci/gzip docword with a byte-order mark inside", *both(read_uci),
          files={"plain/docword.t.txt.gz": gz(UCI), "bom/docword.t.txt.gz": gz(BOM + UCI),
                 "plain/vocab.t.txt": UCI_VOCAB, "bom/vocab.t.txt": UCI_VOCAB}),
    Right("convert_uci/byte-order marks, streamed", *both(lambda f: store_corpus(streaming.convert_uci(
          f, f / "s", block_lines=2))), files=bom_and_plain(uci(UCI), "docword.t.txt", "vocab.t.txt")),
    Right("vw/a byte-order mark before the first document's name (was '\\ufeffd1')",
          *both(lambda f: read_vw(f / "x.vw")), files=bom_and_plain({"x.vw": "d1 a b:2\nd2 c |@tag x\n"}, "x.vw")),
    Right("vw/vocabulary file with a byte-order mark", *both(lambda f: read_vw(f / "x.vw", vocab=f / "keys.txt")),
          files=bom_and_plain({"x.vw": "d1 a b\nd2 b\n", "keys.txt": "b\na\n"}, "keys.txt")),
    Right("convert_vw/a byte-order mark, streamed", *both(lambda f: store_corpus(streaming.convert_vw(
          f / "x.vw", f / "s", batch_size=1))), files=bom_and_plain({"x.vw": "d1 a b\n\nd2 c\n"}, "x.vw")),
    Right("ldac/a byte-order mark before the first N (was 'expected the number of pairs first')",
          *both(lambda f: read_ldac(f / "c.ldac")), files=bom_and_plain({"c.ldac": "2 0:2 2:1\n1 1:3\n",
                                                                       "c.vocab": "x\ny\nz\n"}, "c.ldac", "c.vocab")),
    Right("ldac/vocabulary with a byte-order mark (issue 26: silently its first word)",
          *both(lambda f: read_ldac(f / "c.ldac", f / "words.txt")),
          files=bom_and_plain({"c.ldac": "2 0:2 2:1\n1 1:3\n", "words.txt": "x\ny\nz\n"}, "words.txt")),
    Right("text folder/a file with a byte-order mark", *both(lambda f: read_text_folder(f, min_df=1)),
          files=bom_and_plain({"a.txt": "alpha beta", "b.txt": "beta gamma"}, "a.txt")),
    Right("tsv/table and vocabulary with byte-order marks", *both(lambda f: read_corpus(f / "c.tsv", format="tsv")),
          files=bom_and_plain({"c.tsv": TSV, "vocabulary.txt": "the\ncat\nsat\ndog\nran\nand\n"}, "c.tsv",
                              "vocabulary.txt")),
    Right("tsv/a table with a byte-order mark, tokenised", *both(lambda f: read_corpus(f / "c.tsv", format="tsv")),
          files=bom_and_plain({"c.tsv": TSV}, "c.tsv")),
    # ------------------------------------------------ DataFrame columns in another order: matched by name
    Right("transform/DataFrame columns in another order (issue 26: taken by position)",
          lambda d: plsa().transform(frame(["date", "cherry", "apple", "banana"])), lambda d: plsa().transform(tiny())),
    Right("score/DataFrame columns in another order", lambda d: plsa().score(frame(["banana", "apple", "date",
          "cherry"])), lambda d: plsa().score(tiny())),
    Right("transform/fitted on a DataFrame, columns in another order (was scikit-learn's 'feature names must be in "
          "the same order')", lambda d: tj.PLSA(2, max_iter=3, random_state=0, progress=False).fit(frame())
          .transform(frame(["cherry", "date", "banana", "apple"])), lambda d: plsa().transform(tiny())),
    Right("transform/DataFrame with positional columns: a matrix", lambda d: plsa().transform(
          frame().set_axis(range(4), axis=1)), lambda d: plsa().transform(TINY)),
    # ------------------------------------------------ numpy scalars are numbers
    Right("train_test_split/np.float32 fraction (issue 26: 0 documents, 'leaves no test documents')",
          lambda d: [c.doc_names for c in tiny().train_test_split(np.float32(0.34), seed=1)],
          lambda d: [c.doc_names for c in tiny().train_test_split(0.34, seed=1)]),
    Right("train_test_split/np.int64 count", lambda d: [c.doc_names for c in tiny().train_test_split(np.int64(1))],
          lambda d: [c.doc_names for c in tiny().train_test_split(1)]),
    Right("random_state/np.int64 seed kept by save (was saved as None)", lambda d: saved_and_loaded(d, tj.PLSA(
          2, max_iter=2, random_state=np.int64(5), progress=False).fit(tiny())).get_params()["random_state"],
          lambda d: 5),
    Right("convert_uci/np.int64 block_lines (was 'must be a positive integer, got np.int64(2)')",
          lambda d: store_corpus(streaming.convert_uci(d, d / "s", block_lines=np.int64(2), batch_size=np.int64(2))),
          lambda d: read_uci(d), uci(UCI)),
    Right("make_bars/numpy sizes", lambda d: tj.datasets.make_bars(n_docs=np.int64(4), doc_length=np.int32(9),
          alpha=np.float32(0.5))[0], lambda d: tj.datasets.make_bars(n_docs=4, doc_length=9, alpha=0.5)[0]),
    Right("top_words/np.int64", lambda d: plsa().top_words(np.int64(2)), lambda d: plsa().top_words(2)),
]


def _same(got, expected) -> None:
    if isinstance(expected, Corpus):
        assert isinstance(got, Corpus) and got.equals(expected), (got, expected)
        assert got.doc_names == expected.doc_names and got.label_names == expected.label_names
    elif isinstance(expected, np.ndarray):
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)
    else:
        assert got == expected


def test_right_ids_are_unique():
    ids = [c.id for c in RIGHT]
    assert len(ids) == len(set(ids)), [i for i in ids if ids.count(i) > 1]


@pytest.mark.parametrize("case", RIGHT, ids=[c.id for c in RIGHT])
def test_right_result(tmp_path, case: Right):
    for name, content in case.files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    expected = case.expected(tmp_path)
    _same(case.got(tmp_path), expected)
    if isinstance(expected, Corpus):  # the expectation itself has no mark left in it
        assert not any(BOM in w for w in expected.vocab + (expected.doc_names or ()))


# ================================================================== issue 26: the command line's numeric options
@dataclass
class Command:
    """``topicjax ARGV`` (``argv(folder)`` after the files are written) must stop before any work:
    status 1, nothing on stdout and one line ``topicjax: error: ...`` matching ``message``."""

    id: str
    argv: Callable[[Path], list]
    message: str
    files: dict = field(default_factory=dict)


def saved_model(d: Path) -> Path:
    plsa().save(d / "m")
    return d / "m"


def store_of_tiny(d: Path) -> Path:
    return streaming.write_store([tiny()], d / "s", batch_size=2).folder


def fit_uci(*options):
    return lambda d: ["fit", d, "--topics", "2", "--iterations", "1", "--quiet", *options]


COMMAND_LINE = [
    Command("fit/--top negative (issue 26: printed all but 3 words)", fit_uci("--top", "-3"),
            r"--top must be an integer >= 1, got -3", uci(UCI)),
    Command("fit/--top 0 (printed no words)", fit_uci("--top", "0"), r"--top must be an integer >= 1, got 0", uci(UCI)),
    Command("select-order/--top negative", lambda d: ["select-order", d, "--max-topics", "2", "--quiet", "--top", "-1"],
            r"--top must be an integer >= 1, got -1", uci(UCI)),
    Command("fit-online/--top negative", lambda d: ["fit-online", store_of_tiny(d), "--topics", "2", "--top", "-2"],
            r"--top must be an integer >= 1, got -2"),
    Command("topics/-n negative (issue 26)", lambda d: ["topics", saved_model(d), "-n", "-2"],
            r"-n must be an integer >= 1, got -2"),
    Command("report/-n 0", lambda d: ["report", saved_model(d), "-n", "0"], r"-n must be an integer >= 1, got 0"),
    Command("fit/--heldout above 1 (was 'test_size=1.5 ...')", fit_uci("--heldout", "1.5"),
            r"--heldout must be a share of the documents in \[0, 1\), got 1\.5", uci(UCI)),
    Command("fit/--heldout negative (was taken as 0)", fit_uci("--heldout", "-0.1"),
            r"--heldout must be a share of the documents in \[0, 1\), got -0\.1", uci(UCI)),
    Command("fit/--heldout nan (was taken as 0)", fit_uci("--heldout", "nan"),
            r"--heldout must be a share of the documents in \[0, 1\), got nan", uci(UCI)),
    Command("fit/--docs 0 (was numpy's 'need at least one array to stack')",
            lambda d: ["fit", "--docs", "0", "--quiet"], r"--docs must be an integer >= 1, got 0"),
    Command("fit/--docs negative (was numpy's 'negative dimensions are not allowed')",
            lambda d: ["fit", "--docs", "-5", "--quiet"], r"--docs must be an integer >= 1, got -5"),
    Command("fit/--devices 0", fit_uci("--devices", "0"), r"--devices must be an integer >= 1, got 0", uci(UCI)),
    Command("fit/--min-df 0", lambda d: ["fit", d, "--quiet", "--min-df", "0"], r"--min-df must be an integer >= 1, got 0",
            {"a.txt": "alpha beta", "b.txt": "beta gamma"}),
    Command("fit/--sparse-start negative", fit_uci("--model", "artm", "--trajectory", "paper", "--sparse-start", "-1"),
            r"--sparse-start must be an integer >= 0, got -1", uci(UCI)),
    Command("fit/--decorrelation negative", fit_uci("--model", "artm", "--trajectory", "paper", "--decorrelation",
            "-1"), r"--decorrelation must be a number >= 0\.0, got -1\.0", uci(UCI)),
    Command("select-order/--max-topics 0 (was 'm_max must be ...', naming no option)",
            lambda d: ["select-order", d, "--max-topics", "0"], r"--max-topics must be an integer >= 1, got 0", uci(UCI)),
    Command("select-order/--min-topics 0", lambda d: ["select-order", d, "--max-topics", "3", "--min-topics", "0"],
            r"--min-topics must be an integer >= 1, got 0", uci(UCI)),
    Command("select-order/--step negative", lambda d: ["select-order", d, "--max-topics", "3", "--step", "-1"],
            r"--step must be an integer >= 1, got -1", uci(UCI)),
    Command("convert/--batch-size 0", lambda d: ["convert", d, d / "s", "--batch-size", "0"],
            r"--batch-size must be an integer >= 1, got 0", uci(UCI)),
    Command("fit-online/--passes 0 (was accepted: a model of no pass)", lambda d: ["fit-online", store_of_tiny(d),
            "--passes", "0"], r"--passes must be an integer >= 1, got 0"),
    Command("fit-online/--update-every 0", lambda d: ["fit-online", store_of_tiny(d), "--update-every", "0"],
            r"--update-every must be an integer >= 1, got 0"),
    Command("fit-online/--learning-offset negative",
            lambda d: ["fit-online", store_of_tiny(d), "--learning-offset", "-1"],
            r"--learning-offset must be a number >= 1\.0, got -1\.0"),
    Command("fit-online/--learning-decay nan", lambda d: ["fit-online", store_of_tiny(d), "--learning-decay", "nan"],
            r"--learning-decay must be a finite number, got nan"),
    Command("fit-online/--doc-passes 0", lambda d: ["fit-online", store_of_tiny(d), "--doc-passes", "0"],
            r"--doc-passes must be an integer >= 1, got 0"),
    Command("fit/--encoding unknown (was 'unknown encoding: utf9', naming no option)", fit_uci("--encoding", "utf9"),
            r"--encoding must be an encoding Python knows \(utf-8, latin-1, cp1252\.\.\.\), got 'utf9'", uci(UCI)),
    # ------------------------------------------------ empty inputs, named
    Command("fit/an empty VW file (issue 26: was '20 topics is more than the 0 tokens')",
            lambda d: ["fit", d / "x.vw", "--quiet"], r"x\.vw: " + EMPTY, {"x.vw": ""}),
    Command("fit/an empty lda-c file", lambda d: ["fit", d / "c.ldac", "--quiet"], r"c\.ldac: " + EMPTY, {"c.ldac": "\n"}),
    Command("fit/a folder of empty text files", lambda d: ["fit", d, "--quiet"],
            r": all 2 text files are empty \(no words to read\)", {"a.txt": "", "b.txt": ""}),
    Command("convert/an empty VW file", lambda d: ["convert", d / "x.vw", d / "s"], r"x\.vw: " + EMPTY, {"x.vw": ""}),
]


def test_command_ids_are_unique():
    ids = [c.id for c in COMMAND_LINE]
    assert len(ids) == len(set(ids)), [i for i in ids if ids.count(i) > 1]


@pytest.mark.parametrize("case", COMMAND_LINE, ids=[c.id for c in COMMAND_LINE])
def test_command_line(tmp_path, capsys, case: Command):
    for name, content in case.files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    argv = [str(a) for a in case.argv(tmp_path)]
    capsys.readouterr()
    status = cli.main(argv)
    out, err = capsys.readouterr()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert status == 1 and out == "", (status, out, err)
    assert len(lines) == 1 and lines[0].startswith("topicjax: error: "), err
    assert re.search(case.message, lines[0]), lines[0]


# ================================================================== issue 26: the report's stylesheet
def test_report_stylesheet_is_css(tmp_path):
    """report.html's <style> is CSS: rules ``selector{declarations}`` and nothing else (it was
    ``body{{...}}table{{...}}``: only the first piece of the string was an f-string, so no rule
    applied), with the table borders and padding."""
    plsa().save(tmp_path / "m")
    written = write_report(tmp_path / "m", html_page=True)
    page = (tmp_path / "m" / "report.html").read_text(encoding="utf-8")
    assert tmp_path / "m" / "report.html" in written
    styles = re.findall(r"<style>(.*?)</style>", page, re.S)
    assert len(styles) == 1
    css = styles[0]
    rules = re.findall(r"([^{}]+)\{([^{}]*)\}", css)
    assert "".join(f"{sel}{{{body}}}" for sel, body in rules) == css  # no doubled or stray braces
    declarations = {sel.strip(): dict(d.split(":", 1) for d in body.split(";") if d.strip()) for sel, body in rules}
    assert declarations["table"] == {"border-collapse": "collapse"}
    assert declarations["th,td"]["border"] == "1px solid #ccc" and declarations["th,td"]["padding"] == "2px 8px"
    assert declarations["body"]["font-family"] == "sans-serif"
