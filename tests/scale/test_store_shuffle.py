"""``shuffle=True`` of the store writers (``write_store``, ``convert_uci``, ``convert_vw``, the
command line's ``convert --shuffle --seed``): the same documents, in the seeded order that the
writers document, ``numpy.random.default_rng(seed).permutation(n_docs)``.

The expected store is built here document by document from the corpus (a plain loop over the
permutation), not by the writer's block-wise gather."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from topicjax import cli, datasets
from topicjax.data.formats import write_uci, write_vw
from topicjax.scale import convert, store


def _docs(corpus_or_store) -> list[tuple]:
    """Every document as a sorted tuple of (word, count) pairs (duplicates added up)."""
    c = corpus_or_store.corpus() if isinstance(corpus_or_store, store.BatchStore) else corpus_or_store
    docs = []
    for d in range(c.n_docs):
        lo, hi = int(c.doc_offsets[d]), int(c.doc_offsets[d + 1])
        acc: dict[int, int] = {}
        for w, n in zip(c.word_ids[lo:hi].tolist(), c.counts[lo:hi].tolist()):
            acc[w] = acc.get(w, 0) + n
        docs.append(tuple(sorted(acc.items())))
    return docs


@pytest.fixture(scope="module")
def corpus():
    # lengths that differ from document to document, so that a wrong offset shows
    return datasets.sample_lda_corpus(datasets.bars_topics(4), 23, doc_length=(3, 30), alpha=0.3, seed=5).corpus


@pytest.mark.parametrize("block_docs", [1 << 16, 4])
def test_write_store_shuffled_is_the_seeded_permutation(corpus, tmp_path, monkeypatch, block_docs):
    # blocks of 4 documents: the gather across blocks of the permutation, not only within one
    monkeypatch.setattr(store.StoreWriter, "_permute",
                        functools.partialmethod(store.StoreWriter._permute, block_docs=block_docs))
    original = _docs(corpus)
    st = store.write_store([corpus], tmp_path / "s", batch_size=5, shuffle=True, seed=7)
    got = _docs(st)
    perm = np.random.default_rng(7).permutation(corpus.n_docs)
    assert got == [original[p] for p in perm]
    assert sorted(got) == sorted(original)           # the same multiset of documents
    assert got != original                          # and in another order
    assert st.meta["shuffle_seed"] == 7 and st.n_tokens == corpus.n_tokens and st.n_batches == 5
    # the same seed gives the same store, another seed another order
    again = _docs(store.write_store([corpus], tmp_path / "t", batch_size=5, shuffle=True, seed=7))
    other = _docs(store.write_store([corpus], tmp_path / "u", batch_size=5, shuffle=True, seed=8))
    assert again == got and other != got and sorted(other) == sorted(original)


def test_unshuffled_store_keeps_the_order(corpus, tmp_path):
    st = store.write_store([corpus, corpus], tmp_path / "s", batch_size=10)
    assert _docs(st) == _docs(corpus) * 2 and "shuffle_seed" not in st.meta


def test_shuffle_spans_every_part(corpus, tmp_path):
    st = store.write_store([corpus, corpus], tmp_path / "s", batch_size=10, shuffle=True, seed=1)
    both = _docs(corpus) * 2
    perm = np.random.default_rng(1).permutation(2 * corpus.n_docs)
    assert _docs(st) == [both[p] for p in perm]


def test_converters_shuffle(corpus, tmp_path):
    write_uci(corpus, tmp_path / "uci", "bars")
    write_vw(corpus, tmp_path / "bars.vw")
    perm = np.random.default_rng(3).permutation(corpus.n_docs)
    plain_uci = _docs(convert.convert_uci(tmp_path / "uci", tmp_path / "u0", batch_size=4))
    shuffled_uci = convert.convert_uci(tmp_path / "uci", tmp_path / "u1", batch_size=4, shuffle=True, seed=3)
    assert _docs(shuffled_uci) == [plain_uci[p] for p in perm]
    assert list(shuffled_uci.vocab()) == list(corpus.vocab)
    plain_vw = _docs(convert.convert_vw(tmp_path / "bars.vw", tmp_path / "v0", batch_size=4))
    shuffled_vw = convert.convert_vw(tmp_path / "bars.vw", tmp_path / "v1", batch_size=4, shuffle=True, seed=3)
    assert _docs(shuffled_vw) == [plain_vw[p] for p in perm]


@pytest.mark.parametrize("bad,match", [(dict(shuffle=1), "shuffle must be True or False"),
                                       (dict(shuffle=True, seed=-1), "seed must be an integer >= 0"),
                                       (dict(shuffle=True, seed=1.5), "seed must be an integer")])
def test_bad_shuffle_arguments_are_refused_before_writing(corpus, tmp_path, bad, match):
    with pytest.raises(ValueError, match=match):
        store.write_store([corpus], tmp_path / "s", batch_size=5, **bad)
    assert not (tmp_path / "s").exists()


def test_command_line_convert_shuffle(corpus, tmp_path, capsys):
    write_uci(corpus, tmp_path / "uci", "bars")
    status = cli.main(["convert", str(tmp_path / "uci"), str(tmp_path / "s"), "--batch-size", "6", "--shuffle",
                       "--seed", "4"])
    out, err = capsys.readouterr()
    assert status == 0, err
    assert "shuffled with seed 4" in out
    perm = np.random.default_rng(4).permutation(corpus.n_docs)
    original = _docs(corpus)
    assert _docs(store.BatchStore(tmp_path / "s")) == [original[p] for p in perm]
