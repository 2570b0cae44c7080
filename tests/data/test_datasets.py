"""The bundled bars corpus and the loaders of the shared real corpora (skipped when absent)."""

from __future__ import annotations

import csv
import re
import tarfile
import time

import numpy as np
import pytest

from topicjax import datasets
from topicjax.data.corpus import Corpus
from topicjax.data.formats import read_ldac, read_uci, read_vw, write_ldac, write_uci, write_vw

NEWSGROUPS = [
    "alt.atheism", "comp.graphics", "comp.os.ms-windows.misc", "comp.sys.ibm.pc.hardware",
    "comp.sys.mac.hardware", "comp.windows.x", "misc.forsale", "rec.autos", "rec.motorcycles",
    "rec.sport.baseball", "rec.sport.hockey", "sci.crypt", "sci.electronics", "sci.med", "sci.space",
    "soc.religion.christian", "talk.politics.guns", "talk.politics.mideast", "talk.politics.misc",
    "talk.religion.misc",
]


# ---------------------------------------------------------------------- bundled corpus
def test_bars_topics_are_bars():
    phi = datasets.bars_topics(5)
    assert phi.shape == (25, 10)
    np.testing.assert_allclose(phi.sum(0), 1.0)
    for k in range(5):
        row = np.zeros((5, 5))
        row[k, :] = 0.2
        np.testing.assert_allclose(phi[:, k].reshape(5, 5), row)
        np.testing.assert_allclose(phi[:, 5 + k].reshape(5, 5), row.T)


def test_make_bars_is_seeded():
    c, phi, _ = datasets.make_bars(n_docs=30, doc_length=40, seed=3)
    assert (c.n_docs, c.n_words) == (30, 25) and c.vocab[:6] == ("r0c0", "r0c1", "r0c2", "r0c3", "r0c4", "r1c0")
    assert c.doc_lengths.tolist() == [40] * 30
    assert np.array_equal(phi, datasets.bars_topics(5))
    assert datasets.make_bars(n_docs=30, doc_length=40, seed=3)[0].equals(c)
    assert not datasets.make_bars(n_docs=30, doc_length=40, seed=4)[0].equals(c)


def test_sample_lda_corpus_draws_words_from_the_documents_topics():
    # With a tiny alpha each document uses one or two bars; every word it contains must lie on
    # a bar whose weight in the document is not negligible.
    phi = datasets.bars_topics(5)
    c, _, theta = datasets.sample_lda_corpus(phi, 30, doc_length=50, alpha=1e-2, seed=0)
    for d, row in enumerate(c.to_dense()):
        support = phi[:, theta[:, d] > 1e-6].sum(1) > 0
        assert support[row > 0].all()
        assert support.sum() < 25  # the check is not vacuous


def test_sample_lda_corpus_lengths_and_theta():
    phi = datasets.bars_topics(3)
    c, _, theta = datasets.sample_lda_corpus(phi, 25, doc_length=(5, 9), alpha=0.5, seed=1)
    assert theta.shape == (6, 25)
    np.testing.assert_allclose(theta.sum(0), 1.0)
    assert c.doc_lengths.min() >= 5 and c.doc_lengths.max() <= 9
    assert datasets.sample_lda_corpus(phi, 25, doc_length=(5, 9), alpha=0.5, seed=1)[0].equals(c)


def test_bars_picture():
    lines = datasets.bars_picture(datasets.bars_topics(5)[:, 2])
    assert lines == ["          ", "          ", "@@@@@@@@@@", "          ", "          "]


# ---------------------------------------------------------------------- data location
def test_shared_data_dir_honours_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("TOPICJAX_DATA", str(tmp_path))
    assert datasets.shared_data_dir() == tmp_path
    with pytest.raises(FileNotFoundError, match=r"shared corpus folder .*kos is absent"):
        datasets.load_kos()
    with pytest.raises(FileNotFoundError, match=r"bbc_news is absent"):
        datasets.load_bbc_news()
    with pytest.raises(FileNotFoundError, match=r"20newsgroups is absent"):
        datasets.load_20newsgroups(n_docs=5)
    monkeypatch.setenv("TOPICJAX_DATA", str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError, match=r"TOPICJAX_DATA must be an existing folder, got '.*missing'"):
        datasets.shared_data_dir()


def test_loader_arguments_are_checked():
    with pytest.raises(ValueError, match="subset must be 'train', 'val', 'test' or 'all', got 'tset'"):
        datasets.load_bbc_news("tset")
    with pytest.raises(ValueError, match="subset must be 'train', 'test' or 'all'"):
        datasets.load_20newsgroups("val")
    with pytest.raises(ValueError, match="n_docs must be a positive integer or None, got 0"):
        datasets.load_20newsgroups(n_docs=0)


# ---------------------------------------------------------------------- KOS (UCI)
@pytest.fixture(scope="module")
def kos(shared_data) -> Corpus:
    return Corpus.from_uci(shared_data / "kos")


def test_kos_from_folder_and_docword_file(kos, shared_data):
    assert (kos.n_docs, kos.n_words, kos.n_tokens, kos.nnz) == (3430, 6906, 467714, 353160)
    assert kos.vocab[:3] == ("aarp", "abandon", "abandoned")
    assert kos.labels is None and kos.dropped_docs.size == 0
    assert Corpus.from_uci(shared_data / "kos" / "docword.kos.txt.gz").equals(kos)
    assert datasets.load_kos().equals(kos)
    # The first entry of the file is "1 61 2": document 1, word 61, twice (1-based ids).
    assert (kos.doc_ids[0], kos.word_ids[0], kos.counts[0]) == (0, 60, 2)


def test_kos_reads_fast(shared_data):
    start = time.perf_counter()
    Corpus.from_uci(shared_data / "kos")
    assert time.perf_counter() - start < 5.0  # about 0.3 s on one core


def test_kos_round_trips_through_every_format(kos, tmp_path):
    docword, _ = write_uci(kos, tmp_path / "uci", "kos", compress=True)
    assert read_uci(docword).equals(kos)
    path, _ = write_ldac(kos, tmp_path / "kos.ldac")
    assert read_ldac(path).equals(kos)
    path = write_vw(kos, tmp_path / "kos.vw.gz", vocab_path=tmp_path / "kos.vocab", overwrite=True)  # the lda-c one's name
    assert read_vw(path, vocab=tmp_path / "kos.vocab").equals(kos)


def test_kos_splits(kos):
    train, test = kos.train_test_split(0.1, seed=0)
    assert (train.n_docs, test.n_docs) == (3087, 343)
    assert train.n_tokens + test.n_tokens == kos.n_tokens
    obs, held = test.completion_split("words", seed=0)
    assert obs.n_tokens + held.n_tokens == test.n_tokens
    assert not ((obs.to_sparse().multiply(held.to_sparse())).nnz)


# ---------------------------------------------------------------------- BBC News
def test_bbc_news(shared_data):
    bbc = datasets.load_bbc_news()
    assert (bbc.n_docs, bbc.n_words, bbc.n_tokens) == (2225, 2949, 267259)
    assert bbc.label_names == ("business", "entertainment", "politics", "sport", "tech")
    assert np.bincount(bbc.label_ids).tolist() == [510, 386, 417, 511, 401]
    parts = {s: datasets.load_bbc_news(s) for s in ("train", "val", "test")}
    assert {s: p.n_docs for s, p in parts.items()} == {"train": 1556, "val": 334, "test": 335}
    assert all(p.vocab == bbc.vocab for p in parts.values())
    assert sum(p.n_tokens for p in parts.values()) == bbc.n_tokens
    # Independent check of the first document against the raw file.
    with open(shared_data / "bbc_news" / "corpus.tsv", encoding="utf-8") as fh:
        text, _, label = fh.readline().rstrip("\n").split("\t")
    tokens = text.split()
    row = bbc.to_sparse()[0]
    assert row.sum() == len(tokens)
    assert row[0, bbc.vocab.index(tokens[0])] == tokens.count(tokens[0])
    assert bbc.label_names[bbc.label_ids[0]] == label


# ---------------------------------------------------------------------- 20 Newsgroups
@pytest.fixture(scope="module")
def news_sample(shared_data):
    start = time.perf_counter()
    corpus = datasets.load_20newsgroups(n_docs=200, seed=0)
    return corpus, time.perf_counter() - start


def test_20newsgroups_sample(news_sample, shared_data):
    news, seconds = news_sample
    assert seconds < 15.0  # about 1.5 s: the tarball is read once, up to the last wanted post
    assert news.n_docs + news.dropped_docs.size == 200
    assert set(news.label_names) <= set(NEWSGROUPS) and len(news.label_names) >= 15
    assert not news.multilabel
    # Vectorizer defaults: min_df=5, max_df=0.5, letters only.
    n_sampled = 200
    assert news.doc_frequency.min() >= 5 and news.doc_frequency.max() <= 0.5 * n_sampled
    assert all(w.isalpha() for w in news.vocab)
    # Names, labels and texts stay aligned: check a document against index.tsv and the tarball.
    with open(shared_data / "20newsgroups" / "index.tsv", encoding="utf-8") as fh:
        index = {r["doc_id"]: r for r in csv.DictReader(fh, delimiter="\t") if r["split"] == "train"}
    d = int(np.argmax(news.doc_lengths))
    row = index[news.doc_names[d]]
    assert news.label_names[news.label_ids[d]] == row["label"]
    with tarfile.open(shared_data / "20newsgroups" / "20news-bydate.tar.gz", "r:gz") as tar:
        raw = tar.extractfile(row["path_in_tar"]).read().decode("latin-1")
    body = raw.partition("\n\n")[2].lower()
    words = re.findall(r"\b[a-z][a-z]+\b", body)  # the loader's token pattern, after lowercasing
    dense = news.to_sparse()[d].toarray().ravel()
    for j in np.flatnonzero(dense)[:20]:
        assert dense[j] == words.count(news.vocab[j])


def test_20newsgroups_sample_is_seeded(news_sample, shared_data):
    news, _ = news_sample
    again = datasets.load_20newsgroups(n_docs=200, seed=0)
    assert again.equals(news) and again.doc_names == news.doc_names
