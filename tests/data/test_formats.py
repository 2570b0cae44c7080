"""Readers and writers: UCI, Vowpal Wabbit, lda-c, raw text, dispatch; round trips and errors.

Bad files and their messages are catalogued in tests/data/test_bad_inputs.py.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from topicjax._outputs import OutputRefusedError
from topicjax.data.corpus import Corpus, CorpusError, CorpusWarning
from topicjax.data.formats import (
    DEFAULT_MODALITY,
    corpus_kind,
    read_corpus,
    read_ldac,
    read_text_folder,
    read_texts,
    read_uci,
    read_vocab,
    read_vw,
    vw_token,
    write_ldac,
    write_uci,
    write_vw,
)


def _write(path: Path, text: str, *, gz: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = text.encode("utf-8")
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


# ====================================================================== UCI
UCI_TEXT = "3\n4\n6\n1 1 2\n1 3 1\n2 2 3\n2 4 1\n3 1 1\n3 4 5\n"
UCI_VOCAB = "apple\nbanana\ncherry\ndate\n"
UCI_DENSE = [[2, 0, 1, 0], [0, 3, 0, 1], [1, 0, 0, 5]]


def _uci(tmp_path, body=UCI_TEXT, vocab=UCI_VOCAB, name="t", gz=False) -> Path:
    _write(tmp_path / f"vocab.{name}.txt", vocab)
    return _write(tmp_path / (f"docword.{name}.txt" + (".gz" if gz else "")), body, gz=gz)


@pytest.mark.parametrize("gz", [False, True])
def test_read_uci_folder_and_docword_file(tmp_path, gz):
    docword = _uci(tmp_path, gz=gz)
    for path in (tmp_path, docword, str(docword)):
        c = read_uci(path)
        assert c.to_dense().tolist() == UCI_DENSE
        assert c.vocab == ("apple", "banana", "cherry", "date")
    assert Corpus.from_uci(tmp_path).equals(c)


@pytest.mark.parametrize("block", [1, 7, 12, 1 << 24])
def test_read_uci_in_blocks_of_lines(tmp_path, monkeypatch, block):
    """The body is parsed a block of whole lines at a time (BLOCK_CHARS characters or more): the
    same corpus whatever the block, int32 arrays, and errors that name the right line (a bad line,
    more entries than NNZ, a truncated file) where blocks are cut before them."""
    from topicjax.data.readers import uci

    monkeypatch.setattr(uci, "BLOCK_CHARS", block)
    c = read_uci(_uci(tmp_path))
    np.testing.assert_array_equal(c.to_dense(), UCI_DENSE)
    assert c.word_ids.dtype == np.int32 and c.counts.dtype == np.int32
    blank = "3\n4\n6\n1 1 2\n\n1 3 1\n2 2 3\n2 4 1\n3 1 1.0\n3 4 5\n"  # a blank line, a count the slow path reads
    np.testing.assert_array_equal(read_uci(_uci(tmp_path / "b", blank)).to_dense(), UCI_DENSE)
    bad = "3\n4\n6\n1 1 2\n1 3 1\n2 2 3\n2 4 1\n3 1 x\n3 4 5\n"
    with pytest.raises(CorpusError, match=r"line 8\b"):
        read_uci(_uci(tmp_path / "c", bad))
    more = UCI_TEXT.replace("3\n4\n6\n", "3\n4\n5\n", 1)
    with pytest.raises(CorpusError, match=r"line 9\b.*more entries than NNZ=5"):
        read_uci(_uci(tmp_path / "d", more))
    short = UCI_TEXT.replace("3\n4\n6\n", "3\n4\n7\n", 1)
    with pytest.raises(CorpusError, match=r"line 9\b.*ends after 6 entries"):
        read_uci(_uci(tmp_path / "e", short))


@pytest.mark.parametrize("gz", [False, True])
def test_read_uci_reserves_what_the_file_can_hold(tmp_path, monkeypatch, gz):
    """The columns are reserved for min(NNZ, what the file's size allows): a header NNZ of 10**12
    over a few lines is the truncation error, not a MemoryError; where the first guess is short (a
    gzip trailer records the size modulo 2**32, and only of its last member) further segments are
    added and joined, with the same corpus."""
    from topicjax.data.readers import uci

    path = _uci(tmp_path / "a", gz=gz)
    assert uci._entries_bound(path) >= 6
    monkeypatch.setattr(uci, "BLOCK_CHARS", 12)
    monkeypatch.setattr(uci, "_entries_bound", lambda _: 1)
    c = read_uci(path)
    np.testing.assert_array_equal(c.to_dense(), UCI_DENSE)
    assert c.doc_ids.dtype == c.word_ids.dtype == c.counts.dtype == np.int32
    monkeypatch.undo()
    hostile = UCI_TEXT.replace("3\n4\n6\n", "3\n4\n1000000000000\n", 1)
    with pytest.raises(CorpusError, match=r"line 9\b.*ends after 6 entries but the header says NNZ=1000000000000"):
        read_uci(_uci(tmp_path / "b", hostile, gz=gz))


def test_read_uci_explicit_vocabulary(tmp_path):
    f = _write(tmp_path / "counts.txt", UCI_TEXT)
    with pytest.raises(CorpusError, match=r"counts.txt: not named docword.NAME.txt\[.gz\], so pass the vocabulary file"):
        read_uci(f)
    v = _write(tmp_path / "words.txt", UCI_VOCAB)
    assert read_uci(f, v).to_dense().tolist() == UCI_DENSE
    assert read_uci(f, ["p", "q", "r", "s"]).vocab == ("p", "q", "r", "s")
    # Other keywords reach Corpus.from_entries.
    assert read_uci(f, v, labels=["x", "y", "x"]).label_ids.tolist() == [0, 1, 0]


def test_read_uci_slow_path_accepts_integral_float_counts_and_blank_lines(tmp_path):
    # numpy's fast parser refuses "2.0" and skips blank lines; the line scanner is the reference.
    _uci(tmp_path, UCI_TEXT.replace("1 1 2\n", "1 1 2.0\n\n"))
    assert read_uci(tmp_path).to_dense().tolist() == UCI_DENSE


def test_read_uci_repeated_entries_are_summed(tmp_path):
    _uci(tmp_path, "1\n2\n3\n1 1 2\n1 2 1\n1 1 3\n", "a\nb\n")
    assert read_uci(tmp_path).to_dense().tolist() == [[5, 1]]


def test_read_uci_empty_documents(tmp_path):
    body = "4\n4\n4\n1 1 2\n1 3 1\n3 2 3\n3 4 1\n"  # documents 2 and 4 have no entries
    _uci(tmp_path, body)
    with pytest.raises(CorpusError, match=r"docword\.t\.txt: document 2 \(1-based, as in the file\) has no tokens \(2 empty"):
        read_uci(tmp_path)
    c = read_uci(tmp_path, empty_docs="drop")
    assert c.n_docs == 2 and c.dropped_docs.tolist() == [1, 3]
    assert c.to_dense().tolist() == [[2, 0, 1, 0], [0, 3, 0, 1]]


def test_read_uci_folder_choice(tmp_path):
    with pytest.raises(CorpusError, match=r"no docword\.\*\.txt\[\.gz\] file in this folder"):
        read_uci(tmp_path)
    _uci(tmp_path, name="one")
    _uci(tmp_path, "1\n4\n1\n1 2 7\n", name="two")
    with pytest.raises(CorpusError, match=r"several UCI corpora in this folder \(one, two\); pass name="):
        read_uci(tmp_path)
    assert read_uci(tmp_path, name="two").to_dense().tolist() == [[0, 7, 0, 0]]
    with pytest.raises(FileNotFoundError):
        read_uci(tmp_path / "missing")


@pytest.mark.parametrize("compress", [False, True])
def test_uci_round_trip(tmp_path, random_corpus, compress):
    docword, vocab = write_uci(random_corpus, tmp_path / "out", "rnd", compress=compress)
    assert docword.name == "docword.rnd.txt" + (".gz" if compress else "") and vocab.name == "vocab.rnd.txt"
    assert read_uci(tmp_path / "out").equals(random_corpus)
    assert read_uci(docword).equals(random_corpus)


def test_write_uci_exact_text_and_reproducible_gzip(tmp_path, tiny_corpus):
    docword, vocab = write_uci(tiny_corpus, tmp_path, "tiny")
    assert docword.read_text() == "3\n4\n8\n1 1 2\n1 3 1\n2 2 3\n2 4 1\n3 1 1\n3 2 1\n3 3 1\n3 4 1\n"
    assert vocab.read_text() == "apple\nbanana\ncherry\ndate\n"
    a, _ = write_uci(tiny_corpus, tmp_path / "a", "tiny", compress=True)
    b, _ = write_uci(tiny_corpus, tmp_path / "b", "tiny", compress=True)
    assert a.read_bytes() == b.read_bytes()
    assert gzip.decompress(a.read_bytes()).decode() == docword.read_text()
    bad = Corpus.from_dense(np.ones((1, 2)), vocab=["ok", " spaced "])
    with pytest.raises(CorpusError, match=r"vocabulary entry 1 \(' spaced '\) cannot be written"):
        write_uci(bad, tmp_path / "c")
    with pytest.raises(ValueError, match="plain file-name part"):
        write_uci(tiny_corpus, tmp_path, "a/b")


# ====================================================================== Vowpal Wabbit
VW_TEXT = (
    "doc1 match sport:2 |@tag sport news\n"
    "doc2 |@default_class vote:3 |@tag news:2\n"
    "\n"
    "doc3 |@tag sport | match match:2\n"
)


def test_read_vw_modalities_and_keys(tmp_path):
    c = read_vw(_write(tmp_path / "c.vw", VW_TEXT))
    assert c.vocab == ("match", "sport", "@tag|sport", "@tag|news", "vote")
    assert c.modality_names == ("@default_class", "@tag")
    assert c.modalities.tolist() == [0, 0, 1, 1, 0]
    assert c.doc_names == ("doc1", "doc2", "doc3")
    # "sport" of the text and "sport" of the tags are two entries; the repeated "match" adds up.
    assert c.to_dense().tolist() == [[1, 2, 1, 1, 0], [0, 0, 0, 2, 3], [3, 0, 1, 0, 0]]
    assert [vw_token(k) for k in c.vocab[1:3]] == [(DEFAULT_MODALITY, "sport"), ("@tag", "sport")]
    assert c.select_modality("@tag").to_dense().tolist() == [[1, 1], [0, 2], [1, 0]]


def test_read_vw_plain_file_has_no_modalities(tmp_path):
    c = read_vw(_write(tmp_path / "p.vw", "a x y:4\nb |@default_class y z\n|  x\n"))
    assert c.modalities is None and c.modality_names == ()
    assert c.vocab == ("x", "y", "z")
    assert c.doc_names == ("a", "b", "doc2")  # a line without a name gets doc{index}
    assert c.to_dense().tolist() == [[1, 4, 0], [0, 1, 1], [1, 0, 0]]


def test_read_vw_label_modality(tmp_path):
    path = _write(tmp_path / "l.vw", "d1 |@default_class a b |@labels sport\nd2 a:2 |@labels tech sport\nd3 b\n")
    c = read_vw(path, label_modality="@labels")
    assert c.vocab == ("a", "b") and c.modalities is None
    assert c.label_names == ("sport", "tech")
    assert c.labels.tolist() == [[True, False], [True, True], [False, False]]
    fixed = read_vw(path, label_modality="@labels", label_names=["tech", "sport", "arts"])
    assert fixed.labels.tolist() == [[False, True, False], [True, True, False], [False, False, False]]
    # "@labels" is the default label namespace (where write_vw writes labels); label_modality=None
    # reads it as an ordinary modality of words.
    assert read_vw(path).labels.tolist() == c.labels.tolist()
    assert read_vw(path, label_modality=None).modality_names == ("@default_class", "@labels")
    with pytest.raises(ValueError, match="either label_modality .* or labels, not both"):
        read_vw(path, label_modality="@labels", labels=[0, 1, 0])
    with pytest.raises(ValueError, match=r"l\.vw, line 1: the file has labels in '@labels' and labels= was passed"):
        read_vw(path, labels=[0, 1, 0])
    assert read_vw(path, label_modality=None, labels=[0, 1, 0]).label_ids.tolist() == [0, 1, 0]
    plain = _write(tmp_path / "p.vw", "d1 a\nd2 b\n")
    assert read_vw(plain).labels is None
    assert read_vw(plain, labels=["x", "y"]).label_names == ("x", "y")
    bad = _write(tmp_path / "lb.vw", "d1 a |@labels sport:2\n")
    with pytest.raises(CorpusError, match=r"lb\.vw, line 1: document 'd1': label 'sport:2' has a count"):
        read_vw(bad, label_modality="@labels")


def test_read_vw_empty_documents_dropped(tmp_path):
    c = read_vw(_write(tmp_path / "e.vw", "d1 a\nd2\nd3 b |@tag\nd4 |@t\n"), empty_docs="drop")
    assert c.doc_names == ("d1", "d3") and c.dropped_docs.tolist() == [1, 3]


def test_read_vw_fixed_vocabulary(tmp_path):
    path = _write(tmp_path / "v.vw", "d1 b |@tag x\nd2 a\n")
    c = read_vw(path, vocab=["a", "b", "c", "@tag|x"])
    assert c.vocab == ("a", "b", "c", "@tag|x") and c.modalities.tolist() == [0, 0, 0, 1]
    assert c.to_dense().tolist() == [[0, 1, 0, 1], [1, 0, 0, 0]]
    with pytest.raises(CorpusError, match=r"v\.vw, line 1: document 'd1': word 'x' of modality '@tag' is not in the given vocabulary"):
        read_vw(path, vocab=["a", "b", "x"])


def test_vw_round_trip_with_modalities_labels_and_names(tmp_path, multimodal_corpus):
    path = write_vw(multimodal_corpus, tmp_path / "m.vw")
    text = path.read_text().splitlines()
    assert text[0] == "m1 |@default_class match:2 sport |@tag sport news |@labels s"
    # what write_vw writes, read_vw reads back identically by default: labels, modalities, names
    back = read_vw(path)
    assert back.equals(multimodal_corpus)
    assert back.labels.tolist() == multimodal_corpus.labels.tolist()
    assert back.label_names == multimodal_corpus.label_names
    assert back.doc_names == multimodal_corpus.doc_names
    assert read_corpus(path).equals(multimodal_corpus)


def test_vw_round_trip_labels_in_any_order_with_vocabulary_file(tmp_path, multimodal_corpus):
    """Label columns in an order of their own and a label no document has, a vocabulary order
    other than first appearance: the vocabulary file carries both, and the corpus reads back
    identically; a label outside it is an error naming the line."""
    c = Corpus.from_entries(
        multimodal_corpus.doc_ids, 4 - multimodal_corpus.word_ids, multimodal_corpus.counts,
        vocab=list(multimodal_corpus.vocab)[::-1], modalities=list(np.asarray(multimodal_corpus.modality_names)[
            multimodal_corpus.modalities])[::-1], modality_names=["@default_class", "@tag"],
        labels=[["s"], ["p"], ["s", "p"]], label_names=["zz", "s", "p"], doc_names=["m1", "m2", "m3"])
    path = write_vw(c, tmp_path / "m.vw", vocab_path=tmp_path / "m.vocab")
    assert (tmp_path / "m.vocab").read_text().splitlines()[-3:] == ["@labels|zz", "@labels|s", "@labels|p"]
    back = read_vw(path, vocab=tmp_path / "m.vocab")
    assert back.equals(c) and back.label_names == ("zz", "s", "p") and back.doc_names == c.doc_names
    with pytest.raises(ValueError, match="holds the label names"):
        read_vw(path, vocab=tmp_path / "m.vocab", label_names=["s", "p", "zz"])
    _write(tmp_path / "x.vw", "d1 match |@labels q\n")
    with pytest.raises(CorpusError, match=r"x\.vw, line 1: document 'd1': label 'q' is not among the labels of"):
        read_vw(tmp_path / "x.vw", vocab=tmp_path / "m.vocab")


def test_vw_words_modality_named_like_the_label_namespace(tmp_path):
    c = Corpus.from_dense([[1, 2]], vocab=["a", "@labels|b"], modalities=["@default_class", "@labels"],
                          modality_names=["@default_class", "@labels"])
    with pytest.raises(CorpusError, match="modality '@labels' of the words is the namespace of labels; pass "
                                          "label_modality=None"):
        write_vw(c, tmp_path / "w.vw")
    path = write_vw(c, tmp_path / "w.vw", label_modality=None)
    assert read_vw(path, label_modality=None).equals(c)


@pytest.mark.parametrize("suffix", [".vw", ".vw.gz"])
def test_vw_round_trip_any_corpus_with_vocabulary_file(tmp_path, random_corpus, suffix):
    # A vocabulary order other than first appearance, and a word that never occurs.
    c = Corpus.from_entries(
        random_corpus.doc_ids, random_corpus.word_ids, random_corpus.counts,
        vocab=[f"w{i}" for i in range(random_corpus.n_words)][::-1] + ["never"], doc_names=random_corpus.doc_names,
    )
    path = write_vw(c, tmp_path / f"r{suffix}", vocab_path=tmp_path / "r.vocab")
    if suffix.endswith(".gz"):
        assert path.read_bytes()[:2] == b"\x1f\x8b"
    assert read_vw(path, vocab=tmp_path / "r.vocab").equals(c)
    assert read_corpus(path, vocab=tmp_path / "r.vocab").equals(c)
    # Without the vocabulary the words are in order of appearance, which loses only the order.
    plain = read_vw(path)
    assert plain.with_vocab(c.vocab).equals(c)


def test_vw_round_trip_of_read_corpus(tmp_path):
    src = read_vw(_write(tmp_path / "c.vw", VW_TEXT))
    assert read_vw(write_vw(src, tmp_path / "again.vw")).equals(src)


def test_write_vw_errors(tmp_path):
    bad_word = Corpus.from_dense(np.ones((1, 2)), vocab=["ok", "two words"])
    with pytest.raises(CorpusError, match=r"word 'two words' cannot be written in Vowpal Wabbit format"):
        write_vw(bad_word, tmp_path / "a.vw")
    bad_name = Corpus.from_dense(np.ones((1, 2)), vocab=["a", "b"], doc_names=["my doc"])
    with pytest.raises(CorpusError, match=r"document name 'my doc' cannot be written"):
        write_vw(bad_name, tmp_path / "b.vw")
    bad_label = Corpus.from_dense(np.ones((1, 2)), vocab=["a", "b"], labels=["x:y"])
    with pytest.raises(CorpusError, match=r"label 'x:y' cannot be written"):
        write_vw(bad_label, tmp_path / "c.vw")
    # A word with ':' is always written with its count, so it reads back.
    colon = Corpus.from_dense(np.array([[1, 2]]), vocab=["http://x", "b"])
    assert read_vw(write_vw(colon, tmp_path / "d.vw")).equals(colon)


# ====================================================================== lda-c
LDAC_TEXT = "2 0:2 2:1\n2 1:3 3:1\n3 0:1 3:5 1:1\n"
LDAC_DENSE = [[2, 0, 1, 0], [0, 3, 0, 1], [1, 1, 0, 5]]


def test_read_ldac_vocabulary_forms(tmp_path):
    path = _write(tmp_path / "c.ldac", LDAC_TEXT)
    inferred = read_ldac(path)  # no vocabulary beside it: size from the largest id
    assert inferred.vocab == ("w0", "w1", "w2", "w3") and inferred.to_dense().tolist() == LDAC_DENSE
    assert read_ldac(path, n_words=6).n_words == 6
    assert read_ldac(path, ["a", "b", "c", "d", "e"]).vocab == ("a", "b", "c", "d", "e")
    v = _write(tmp_path / "words.txt", "a\nb\nc\nd\n")
    assert read_ldac(path, v).vocab == ("a", "b", "c", "d")
    _write(tmp_path / "c.vocab", "p\nq\nr\ns\n")  # found beside the corpus
    assert read_ldac(path).vocab == ("p", "q", "r", "s")
    assert Corpus.from_ldac(path).vocab == ("p", "q", "r", "s")
    with pytest.raises(CorpusError, match=r"n_words=5 but .*words\.txt has 4 words"):
        read_ldac(path, v, n_words=5)


def test_read_ldac_drop_empty_and_trailing_newlines(tmp_path):
    c = read_ldac(_write(tmp_path / "c.ldac", "1 0:2\n0\n1 2:1\n\n\n"), ["a", "b", "c"], empty_docs="drop")
    assert c.n_docs == 2 and c.dropped_docs.tolist() == [1]


@pytest.mark.parametrize("name", ["r.ldac", "r.dat", "r.ldac.gz"])
def test_ldac_round_trip(tmp_path, random_corpus, name):
    path, vocab = write_ldac(random_corpus, tmp_path / name)
    assert vocab == tmp_path / "r.vocab"
    assert read_ldac(path).equals(random_corpus)  # vocabulary found beside it
    assert read_corpus(path).equals(random_corpus)


def test_write_ldac_text(tmp_path, tiny_corpus):
    path, vocab = write_ldac(tiny_corpus, tmp_path / "t.ldac", vocab_path=False)
    assert vocab is None and not (tmp_path / "t.vocab").exists()
    assert path.read_text() == "2 0:2 2:1\n2 1:3 3:1\n4 0:1 1:1 2:1 3:1\n"
    with pytest.raises(OutputRefusedError, match="t.ldac exists; pass overwrite=True"):
        write_ldac(tiny_corpus, tmp_path / "t.ldac", tmp_path / "vocab.txt")
    assert not (tmp_path / "vocab.txt").exists()  # refused before anything was written
    write_ldac(tiny_corpus, tmp_path / "t.ldac", tmp_path / "vocab.txt", overwrite=True)
    assert read_vocab(tmp_path / "vocab.txt") == list(tiny_corpus.vocab)


# ====================================================================== raw texts
TEXTS = [
    "The cat sat on the mat. The cat!",
    "A dog and a cat and a dog.",
    "Dogs bark; cats purr.",
]


def test_read_texts_counts_by_hand():
    c = read_texts(TEXTS, labels=["pets", "pets", "noise"], doc_names=["t0", "t1", "t2"], stop_words=["the", "on", "and"])
    # CountVectorizer: lowercase, tokens of 2+ word characters ("a" is dropped), sorted vocabulary.
    assert c.vocab == ("bark", "cat", "cats", "dog", "dogs", "mat", "purr", "sat")
    assert c.to_dense().tolist() == [
        [0, 2, 0, 0, 0, 1, 0, 1],
        [0, 1, 0, 2, 0, 0, 0, 0],
        [1, 0, 1, 0, 1, 0, 1, 0],
    ]
    assert c.label_names == ("noise", "pets") and c.label_ids.tolist() == [1, 1, 0]
    assert c.doc_names == ("t0", "t1", "t2")
    assert Corpus.from_texts(TEXTS, stop_words=["the", "on", "and"]).equals(
        Corpus.from_sparse(c.to_sparse(), vocab=c.vocab)
    )


def test_read_texts_min_df_and_reused_vocabulary():
    c = read_texts(TEXTS[:2], min_df=2)
    assert c.vocab == ("cat",)
    test = read_texts(["a cat and a dog", "cat"], vocabulary=["cat", "dog"])
    assert test.vocab == ("cat", "dog") and test.to_dense().tolist() == [[1, 1], [1, 0]]


def test_read_texts_empty_documents():
    texts = ["the cat", "the and of", "a dog"]
    with pytest.raises(CorpusError, match=r"texts: text 1 \(b\), after tokenising \(stop words, min_df, max_df, token pattern\), has no tokens"):
        read_texts(texts, doc_names=["a", "b", "c"], stop_words="english")
    c = read_texts(texts, labels=["x", "y", "z"], empty_docs="drop", stop_words="english")
    assert c.n_docs == 2 and c.dropped_docs.tolist() == [1] and c.label_ids.tolist() == [0, 2]
    with pytest.raises(CorpusError, match=r"CountVectorizer found no usable words: empty vocabulary"):
        read_texts(["the", "of and"], stop_words="english")


def test_read_texts_bad_arguments():
    with pytest.raises(TypeError, match="not a single string"):
        read_texts("one text")
    with pytest.raises(CorpusError, match="text 1 is a int, not a string"):
        read_texts(["a text", 3])
    with pytest.raises(CorpusError, match="1 labels for 2 texts"):
        read_texts(["a cat", "a dog"], labels=["x"])


def _text_tree(root: Path) -> None:
    _write(root / "sport" / "001.txt", "goal goal match")
    _write(root / "sport" / "002.txt", "match referee")
    _write(root / "tech" / "001.txt", "chip code code")
    _write(root / "tech" / ".hidden", "ignored words")
    _write(root / ".git" / "config", "ignored too")


def test_read_text_folder_with_label_subfolders(tmp_path):
    _text_tree(tmp_path)
    c = read_text_folder(tmp_path)
    assert c.doc_names == ("sport/001.txt", "sport/002.txt", "tech/001.txt")
    assert c.label_names == ("sport", "tech") and c.label_ids.tolist() == [0, 0, 1]
    assert c.vocab == ("chip", "code", "goal", "match", "referee")
    assert c.to_dense().tolist() == [[0, 0, 2, 1, 0], [0, 0, 0, 1, 1], [1, 2, 0, 0, 0]]
    assert read_text_folder(tmp_path, labels=False).labels is None
    assert read_corpus(tmp_path).equals(c)


def test_read_text_folder_flat_mixed_and_encoding(tmp_path):
    flat = tmp_path / "flat"
    _write(flat / "b.txt", "beta words")
    _write(flat / "a.txt", "alpha words")
    _write(flat / "notes.md", "markdown words")
    c = read_text_folder(flat, suffixes=(".txt",))
    assert c.labels is None and c.doc_names == ("a.txt", "b.txt") and c.vocab == ("alpha", "beta", "words")
    _write(flat / "sub" / "c.txt", "gamma")
    with pytest.raises(CorpusError, match=r"files both at the top \(a\.txt\) and in sub-folders"):
        read_text_folder(flat)
    with pytest.raises(CorpusError, match=r"labels=True but a\.txt is not in a sub-folder"):
        read_text_folder(flat, labels=True)
    assert read_text_folder(flat, labels=False).n_docs == 4
    latin = tmp_path / "latin"
    latin.mkdir()
    (latin / "post").write_bytes(b"caf\xe9 au lait\nsecond line\n")
    with pytest.raises(CorpusError, match=r"post, line 1: byte b'\\xe9' is not valid utf-8; pass encoding='latin-1'"):
        read_text_folder(latin)
    assert read_text_folder(latin, encoding="latin-1").vocab == ("au", "café", "lait", "line", "second")
    with pytest.raises(CorpusError, match="no text files in this folder"):
        read_text_folder(latin, suffixes=(".txt",))


# ====================================================================== dispatch
def test_read_corpus_dispatch(tmp_path, tiny_corpus):
    docword, _ = write_uci(tiny_corpus, tmp_path / "uci", "tiny", compress=True)
    write_vw(tiny_corpus, tmp_path / "c.vw")
    write_vw(tiny_corpus, tmp_path / "c.vw.txt")
    write_ldac(tiny_corpus, tmp_path / "c.ldac")
    write_ldac(tiny_corpus, tmp_path / "d.dat")
    expected = {
        tmp_path / "uci": "uci", docword: "uci", tmp_path / "c.vw": "vw", tmp_path / "c.vw.txt": "vw",
        tmp_path / "c.ldac": "ldac", tmp_path / "d.dat": "ldac",
    }
    for path, kind in expected.items():
        assert corpus_kind(path) == kind
        got = read_corpus(path)
        if kind == "vw":  # VW has no vocabulary: words come in order of first appearance
            assert got.vocab == ("apple", "cherry", "banana", "date")
            got = got.with_vocab(tiny_corpus.vocab)
        assert got.equals(tiny_corpus), path
        assert Corpus.load(str(path)).to_dense().sum() == tiny_corpus.n_tokens
    _write(tmp_path / "other.csv", "a,b\n")
    with pytest.raises(CorpusError, match=r"other\.csv: unknown corpus form; expected a UCI folder"):
        read_corpus(tmp_path / "other.csv")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_corpus(tmp_path / "nothing.vw")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(CorpusError, match=r"empty: no text documents of a known kind \(files named \*\.txt, "
                                          r"\*\.text or without a suffix\) \(it is empty\)"):
        read_corpus(empty)
    with pytest.raises(ValueError, match="format must be one of"):
        read_corpus(tmp_path / "c.vw", format="csv")
    # format= overrides the form of the path
    assert read_corpus(tmp_path / "c.vw", format="vw").n_docs == tiny_corpus.n_docs


def test_read_corpus_folder_of_known_text_kinds(tmp_path):
    """A folder is read as text documents only for files of a known kind; others are skipped with
    a warning naming them; a folder with none says what it holds."""
    (tmp_path / "a").mkdir()
    _write(tmp_path / "a" / "one.txt", "apple banana apple")
    _write(tmp_path / "a" / "53068", "banana cherry")
    _write(tmp_path / "a" / "notes.md", "not a document")
    with pytest.warns(CorpusWarning, match=r"1 file\(s\) of other kinds skipped \(notes\.md\)"):
        c = read_corpus(tmp_path / "a")
    assert c.doc_names == ("53068", "one.txt") and c.n_docs == 2
    (tmp_path / "b").mkdir()
    _write(tmp_path / "b" / "x.docx", "PK")
    _write(tmp_path / "b" / "y.pdf", "%PDF")
    with pytest.raises(CorpusError, match=r"b: no text documents of a known kind .*; it holds x\.docx, y\.pdf"):
        read_corpus(tmp_path / "b")


def test_table_folder_is_read_only_when_asked(tmp_path):
    """OCTIS's layout (corpus.tsv + vocabulary.txt + metadata.json) is not four text documents:
    an error asks for format='tsv', which reads one document per line with labels."""
    folder = tmp_path / "octis"
    _write(folder / "corpus.tsv", "apple banana apple\ttrain\tfood\ncar bus\ttest\ttravel\nbus\tval\ttravel\n")
    _write(folder / "vocabulary.txt", "apple\nbanana\nbus\ncar\nunused\n")
    _write(folder / "metadata.json", "{}")
    with pytest.raises(CorpusError, match=r"octis: holds corpus\.tsv, metadata\.json, a table .* format='tsv'"):
        read_corpus(folder)
    c = read_corpus(folder, format="tsv")
    assert c.vocab == ("apple", "banana", "bus", "car", "unused")
    assert c.to_dense().tolist() == [[2, 1, 0, 0, 0], [0, 0, 1, 1, 0], [0, 0, 1, 0, 0]]
    assert c.label_names == ("food", "travel") and c.label_ids.tolist() == [0, 1, 1]
    assert c.doc_names == ("line 1", "line 2", "line 3")
    assert read_corpus(folder / "corpus.tsv", format="tsv", labels=False).labels is None
    train = read_corpus(folder, format="tsv", partitions={"train", "val"})
    assert train.n_docs == 2 and train.label_ids.tolist() == [0, 1]
    # without a vocabulary file the texts are tokenised by CountVectorizer
    (folder / "vocabulary.txt").unlink()
    c = read_corpus(folder, format="tsv")
    assert c.vocab == ("apple", "banana", "bus", "car") and c.n_tokens == 6
    # a word outside the vocabulary, and a line with another number of columns, name the line
    _write(folder / "vocabulary.txt", "apple\nbanana\nbus\n")
    with pytest.raises(CorpusError, match=r"corpus\.tsv, line 2: word 'car' is not in the vocabulary"):
        read_corpus(folder, format="tsv")
    _write(folder / "corpus.tsv", "apple\tfood\nbus\n")
    with pytest.raises(CorpusError, match=r"corpus\.tsv, line 2: 1 tab-separated columns, but line 1 has 2"):
        read_corpus(folder, format="tsv")
