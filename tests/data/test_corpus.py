"""Corpus: construction, validation errors (issue point 4), conversions, labels and splits."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import scipy.sparse as sp

from topicjax.data.corpus import Corpus, CorpusError

VOCAB3 = ["a", "b", "c"]


# ---------------------------------------------------------------------- construction
def test_from_entries_sorts_merges_and_drops_zero_entries():
    c = Corpus.from_entries([1, 0, 1, 0, 1], [2, 1, 0, 1, 1], [1, 2, 3, 4, 0], vocab=VOCAB3)
    # Sorted by document then word; the two (0, 1) entries summed; the zero entry gone.
    assert c.doc_ids.tolist() == [0, 1, 1]
    assert c.word_ids.tolist() == [1, 0, 2]
    assert c.counts.tolist() == [6, 3, 1]
    assert c.doc_ids.dtype == c.word_ids.dtype == c.counts.dtype == np.int32
    assert (c.n_docs, c.n_words, c.n_tokens, c.nnz) == (2, 3, 10, 3)
    assert c.to_dense().tolist() == [[0, 6, 0], [3, 0, 1]]


def test_summaries_match_a_numpy_loop(random_corpus):
    dense = random_corpus.to_dense()
    assert random_corpus.doc_lengths.tolist() == [int(row.sum()) for row in dense]
    assert random_corpus.word_counts.tolist() == [int(col.sum()) for col in dense.T]
    assert random_corpus.doc_frequency.tolist() == [int((col > 0).sum()) for col in dense.T]
    off = random_corpus.doc_offsets
    for d in range(random_corpus.n_docs):
        assert set(random_corpus.doc_ids[off[d] : off[d + 1]].tolist()) == {d}
        assert off[d + 1] - off[d] == int((dense[d] > 0).sum())


def test_corpus_is_immutable(tiny_corpus):
    with pytest.raises(dataclasses.FrozenInstanceError):
        tiny_corpus.n_docs = 5


def test_default_vocab_and_repr():
    c = Corpus.from_entries([0, 1], [0, 2], [1, 1], n_words=4)
    assert c.vocab == ("w0", "w1", "w2", "w3")
    assert repr(c) == "Corpus(n_docs=2, n_words=4, n_tokens=2, nnz=2)"
    with pytest.raises(CorpusError, match="either vocab or n_words"):
        Corpus.from_entries([0], [0], [1])
    with pytest.raises(CorpusError, match="n_words=4 but the vocabulary has 3 entries"):
        Corpus.from_entries([0], [0], [1], vocab=VOCAB3, n_words=4)


def test_equals(tiny_corpus):
    same = Corpus.from_dense(tiny_corpus.to_dense(), vocab=tiny_corpus.vocab)
    assert same.equals(tiny_corpus)
    assert not tiny_corpus.equals(tiny_corpus.with_labels([0, 1, 0]))
    assert not tiny_corpus.equals(Corpus.from_dense(tiny_corpus.to_dense() * 2, vocab=tiny_corpus.vocab))
    assert not tiny_corpus.equals(Corpus.from_dense(tiny_corpus.to_dense(), vocab=["w", "x", "y", "z"]))
    assert not tiny_corpus.equals(tiny_corpus.to_dense())


# ---------------------------------------------------------------------- bad input (issue point 4)
# The bad inputs with their messages are catalogued in tests/data/test_bad_inputs.py.
def test_non_integer_count_names_document_and_value():
    with pytest.raises(CorpusError, match=r"document 1, word 1: count 1.5 is not an integer"):
        Corpus.from_entries([0, 1], [0, 1], [2.0, 1.5], vocab=VOCAB3)
    # Integral floats are counts.
    assert Corpus.from_entries([0], [1], [3.0], vocab=VOCAB3).counts.tolist() == [3]
    with pytest.raises(CorpusError, match="counts must be numeric"):
        Corpus.from_entries([0], [1], ["3"], vocab=VOCAB3)


def test_empty_documents_dropped_on_request_are_recorded():
    c = Corpus.from_entries(
        [0, 2, 4], [0, 1, 2], [1, 2, 3], vocab=VOCAB3, n_docs=6,
        doc_names=list("pqrstu"), labels=["x", "y", "x", "y", "z", "z"], empty_docs="drop",
    )
    assert c.n_docs == 3
    assert c.dropped_docs.tolist() == [1, 3, 5]
    assert c.doc_names == ("p", "r", "t")
    assert c.to_dense().tolist() == [[1, 0, 0], [0, 2, 0], [0, 0, 3]]
    assert c.label_names == ("x", "y", "z")  # the label set is kept, even if a label lost its documents
    assert c.label_ids.tolist() == [0, 0, 2]


def test_trailing_empty_documents_are_known_from_names_and_labels():
    # No n_docs: the names say there are 4 documents, the last two without entries.
    with pytest.raises(CorpusError, match=r"document 2 \(z\) has no tokens \(2 empty"):
        Corpus.from_entries([0, 1], [0, 1], [1, 1], vocab=VOCAB3, doc_names=["x", "y", "z", "t"])
    c = Corpus.from_entries([0, 1], [0, 1], [1, 1], vocab=VOCAB3, doc_names=["x", "y", "z", "t"], empty_docs="drop")
    assert (c.n_docs, c.doc_names, c.dropped_docs.tolist()) == (2, ("x", "y"), [2, 3])
    c = Corpus.from_entries([0, 1], [0, 1], [1, 1], vocab=VOCAB3, labels=["u", "v", "w"], empty_docs="drop")
    assert (c.n_docs, c.dropped_docs.tolist(), c.label_names) == (2, [2], ("u", "v", "w"))
    with pytest.raises(CorpusError, match="2 document names for 3 documents"):
        Corpus.from_entries([0, 2], [0, 1], [1, 1], vocab=VOCAB3, doc_names=["x", "y"])


def test_more_topics_than_tokens(tiny_corpus):
    tiny_corpus.check_topics(tiny_corpus.n_tokens)
    with pytest.raises(ValueError, match=r"12 topics is more than the 11 tokens of the corpus"):
        tiny_corpus.check_topics(12)
    with pytest.raises(ValueError, match=r"positive integer, got 0"):
        tiny_corpus.check_topics(0)
    with pytest.raises(ValueError, match=r"positive integer, got 2.5"):
        tiny_corpus.check_topics(2.5)


def test_vocabulary_mismatch_between_train_and_test(tiny_corpus):
    tiny_corpus.check_same_vocab(Corpus.from_dense(np.ones((1, 4)), vocab=tiny_corpus.vocab))
    other = Corpus.from_dense(np.ones((1, 3)), vocab=["apple", "banana", "cherry"])
    with pytest.raises(CorpusError, match=r"test corpus has a different vocabulary \(3 words vs 4\); use corpus.with_vocab"):
        tiny_corpus.check_same_vocab(other)
    swapped = Corpus.from_dense(np.ones((1, 4)), vocab=["apple", "cherry", "banana", "date"])
    with pytest.raises(CorpusError, match=r"word 1 is 'cherry' vs 'banana'"):
        tiny_corpus.check_same_vocab(swapped)
    with pytest.raises(CorpusError, match=r"the held-out part has"):
        tiny_corpus.check_same_vocab(other, what="held-out part")


# ---------------------------------------------------------------------- with_vocab
def test_with_vocab_reindexes_and_drops_unknown_words(tiny_corpus):
    target = ["date", "cherry", "fig", "apple", "banana"]  # a permutation plus a new word
    re = tiny_corpus.with_vocab(target)
    tiny_corpus.check_same_vocab(re.with_vocab(tiny_corpus.vocab))
    dense, new = tiny_corpus.to_dense(), re.to_dense()
    for j, w in enumerate(target):
        expected = dense[:, tiny_corpus.vocab.index(w)] if w in tiny_corpus.vocab else np.zeros(3)
        assert new[:, j].tolist() == expected.tolist()
    assert re.with_vocab(tiny_corpus.vocab).equals(tiny_corpus)
    assert re.doc_names == tiny_corpus.doc_names

    small = tiny_corpus.with_vocab(["apple", "banana"])  # cherry and date dropped (ARTM sec. 5)
    assert small.to_dense().tolist() == [[2, 0], [0, 3], [1, 1]]
    with pytest.raises(CorpusError, match=r"word 'cherry' is not in the target vocabulary \(2 entries affected\)"):
        tiny_corpus.with_vocab(["apple", "banana", "date"], unknown="error")
    with pytest.raises(ValueError, match="unknown must be"):
        tiny_corpus.with_vocab(tiny_corpus.vocab, unknown="ignore")


def test_with_vocab_emptying_a_document(tiny_corpus):
    with pytest.raises(CorpusError, match=r"document 1 \(d1\) has no tokens"):
        tiny_corpus.with_vocab(["apple", "cherry"])
    c = tiny_corpus.with_vocab(["apple", "cherry"], empty_docs="drop")
    assert (c.n_docs, c.dropped_docs.tolist(), c.doc_names) == (2, [1], ("d0", "d2"))


def test_with_vocab_keeps_modalities_and_labels(multimodal_corpus):
    target = ["vote", "@tag|news", "sport", "match", "@tag|sport"]
    c = multimodal_corpus.with_vocab(target)
    assert [c.modality_names[m] for m in c.modalities] == ["@default_class", "@tag", "@default_class", "@default_class", "@tag"]
    assert np.array_equal(c.labels, multimodal_corpus.labels)
    assert c.with_vocab(multimodal_corpus.vocab).equals(multimodal_corpus)


# ---------------------------------------------------------------------- subset and splits
def test_subset_renumbers_and_carries_labels_and_names(labelled_corpus):
    s = labelled_corpus.subset([3, 0])
    assert s.to_dense().tolist() == labelled_corpus.to_dense()[[3, 0]].tolist()
    assert s.doc_names == ("d", "a")
    assert [s.label_names[i] for i in s.label_ids] == ["arts", "sport"]
    mask = np.array([False, True, True, False])
    assert labelled_corpus.subset(mask).doc_names == ("b", "c")
    assert labelled_corpus.subset([]).n_docs == 0
    with pytest.raises(ValueError, match=r"document index 4 is outside \[0, 4\)"):
        labelled_corpus.subset([0, 4])
    with pytest.raises(ValueError, match=r"boolean mask of shape \(3,\) for 4 documents"):
        labelled_corpus.subset([True, False, True])


def test_train_test_split_is_seeded_disjoint_and_complete(random_corpus):
    train, test = random_corpus.train_test_split(0.25, seed=3)
    assert (train.n_docs, test.n_docs) == (30, 10)
    names_train, names_test = set(train.doc_names), set(test.doc_names)
    assert not names_train & names_test
    assert names_train | names_test == set(random_corpus.doc_names)
    assert train.vocab == test.vocab == random_corpus.vocab
    dense = random_corpus.to_dense()
    for part in (train, test):
        rows = [int(n[3:]) for n in part.doc_names]
        assert part.to_dense().tolist() == dense[rows].tolist()
    again_train, again_test = random_corpus.train_test_split(0.25, seed=3)
    assert again_train.equals(train) and again_test.equals(test)
    _, other_test = random_corpus.train_test_split(0.25, seed=4)
    assert set(other_test.doc_names) != names_test
    assert random_corpus.train_test_split(7, seed=0)[1].n_docs == 7
    for bad in (0, 40, 0.0, 1.0):
        with pytest.raises(ValueError, match="leaves no training or no test documents out of 40"):
            random_corpus.train_test_split(bad)


def test_completion_split_tokens_adds_up(random_corpus):
    obs, held = random_corpus.completion_split("tokens", seed=1)
    dense = random_corpus.to_dense()
    assert (obs.to_dense() + held.to_dense()).tolist() == dense.tolist()  # per entry
    assert obs.vocab == held.vocab == random_corpus.vocab
    assert obs.doc_names == held.doc_names == random_corpus.doc_names
    assert (obs.doc_lengths > 0).all() and (held.doc_lengths > 0).all()
    # Each token is observed with probability 1/2: the observed share is near 1/2.
    share = obs.n_tokens / random_corpus.n_tokens
    assert 0.4 < share < 0.6
    obs2, held2 = random_corpus.completion_split("tokens", seed=1)
    assert obs2.equals(obs) and held2.equals(held)
    assert not random_corpus.completion_split("tokens", seed=2)[0].equals(obs)
    # A word may appear on both sides in this protocol.
    assert ((obs.to_dense() > 0) & (held.to_dense() > 0)).any()


def test_completion_split_tokens_fraction(random_corpus):
    obs, _ = random_corpus.completion_split("tokens", fraction=0.8, seed=0)
    assert 0.7 < obs.n_tokens / random_corpus.n_tokens < 0.9


def test_completion_split_words_gives_disjoint_word_sets(random_corpus):
    obs, held = random_corpus.completion_split("words", seed=5)
    o, h, dense = obs.to_dense(), held.to_dense(), random_corpus.to_dense()
    assert not ((o > 0) & (h > 0)).any()  # disjoint word sets in every document
    assert (o + h).tolist() == dense.tolist()  # each word keeps its whole count on its side
    assert ((o > 0).sum(1) > 0).all() and ((h > 0).sum(1) > 0).all()
    obs2, _ = random_corpus.completion_split("words", seed=5)
    assert obs2.equals(obs)


def test_completion_split_keeps_both_sides_non_empty_for_short_documents():
    # Two-token documents: with fraction 0.99 (tokens) almost every draw leaves held-out empty.
    c = Corpus.from_dense(np.array([[1, 1, 0], [0, 2, 0], [0, 0, 2]] * 5), vocab=VOCAB3)
    for seed in range(3):
        obs, held = c.completion_split("tokens", fraction=0.99, seed=seed)
        assert obs.doc_lengths.tolist() == held.doc_lengths.tolist() == [1] * 15
    d = Corpus.from_dense(np.array([[1, 3, 0], [0, 2, 5]] * 5), vocab=VOCAB3)
    obs, held = d.completion_split("words", fraction=0.01, seed=0)
    assert ((obs.to_dense() > 0).sum(1) == 1).all() and ((held.to_dense() > 0).sum(1) == 1).all()


def test_completion_split_too_short_documents():
    one_token = Corpus.from_dense(np.array([[2, 1, 0], [0, 0, 1]]), vocab=VOCAB3)
    with pytest.raises(CorpusError, match=r"document 1 has 1 token\(s\); document completion needs at least 2"):
        one_token.completion_split("tokens")
    one_word = Corpus.from_dense(np.array([[2, 1, 0], [0, 0, 5]]), vocab=VOCAB3)
    one_word.completion_split("tokens")  # 5 tokens of one word can be split by tokens
    with pytest.raises(CorpusError, match=r"document 1 has 1 distinct word\(s\); the disjoint-words completion needs at least 2"):
        one_word.completion_split("words")
    with pytest.raises(ValueError, match="protocol must be"):
        one_word.completion_split("halves")
    with pytest.raises(ValueError, match=r"fraction must be in \(0, 1\)"):
        one_word.completion_split("tokens", fraction=1.0)


# ---------------------------------------------------------------------- conversions
def test_from_lists_and_to_lists_round_trip():
    docs = [[(0, 2), (3, 1)], [(1, 4)], [(3, 1), (0, 1), (2, 2)]]
    c = Corpus.from_lists(docs, vocab=["a", "b", "c", "d"])
    assert c.to_lists() == [sorted(d) for d in docs]
    assert all(isinstance(w, int) and isinstance(n, int) for d in c.to_lists() for w, n in d)
    assert Corpus.from_lists(c.to_lists(), vocab=c.vocab).equals(c)
    # gensim's Dictionary is a mapping id -> word.
    assert Corpus.from_lists(docs, vocab={3: "d", 0: "a", 1: "b", 2: "c"}).equals(c)
    # Without a vocabulary its size is the largest id + 1.
    assert Corpus.from_lists(docs).vocab == ("w0", "w1", "w2", "w3")


def test_from_lists_errors():
    with pytest.raises(CorpusError, match=r"document 1: entry 3 is not a \(word_id, count\) pair"):
        Corpus.from_lists([[(0, 1)], [3]], vocab=["a", "b"])
    with pytest.raises(CorpusError, match=r"document 1 has no tokens"):
        Corpus.from_lists([[(0, 1)], [], [(1, 1)]], vocab=["a", "b"])
    with pytest.raises(CorpusError, match=r"document 0, word 1: count -1 is negative"):
        Corpus.from_lists([[(1, -1)]], vocab=["a", "b"])
    with pytest.raises(CorpusError, match=r"no word for id 1"):
        Corpus.from_lists([[(0, 1)]], vocab={0: "a", 2: "c"})


def test_from_sparse_and_to_sparse(random_corpus):
    dense = random_corpus.to_dense()
    for fmt in ("csr", "csc", "coo"):
        c = Corpus.from_sparse(sp.csr_matrix(dense).asformat(fmt), vocab=random_corpus.vocab)
        assert c.equals(random_corpus)
    assert (random_corpus.to_sparse().toarray() == dense).all()
    # A coo matrix with repeated coordinates means their sum.
    coo = sp.coo_matrix((np.array([1, 2, 5]), (np.array([0, 0, 1]), np.array([1, 1, 0]))), shape=(2, 2))
    assert Corpus.from_sparse(coo, vocab=["x", "y"]).to_dense().tolist() == [[0, 3], [5, 0]]
    # A dense array is accepted too.
    assert Corpus.from_sparse(dense, vocab=random_corpus.vocab).equals(random_corpus)


# ---------------------------------------------------------------------- labels
def test_single_labels(labelled_corpus):
    assert labelled_corpus.label_names == ("arts", "sport", "tech")  # sorted
    assert labelled_corpus.label_ids.tolist() == [1, 2, 1, 0]
    assert not labelled_corpus.multilabel
    assert labelled_corpus.labels.dtype == bool and labelled_corpus.labels.sum(1).tolist() == [1, 1, 1, 1]
    ints = labelled_corpus.with_labels([2, 0, 2, 1])
    assert ints.label_names == ("0", "1", "2") and ints.label_ids.tolist() == [2, 0, 2, 1]
    named = labelled_corpus.with_labels([1, 0, 1, 0], label_names=["neg", "pos"])
    assert named.label_names == ("neg", "pos") and named.label_ids.tolist() == [1, 0, 1, 0]
    fixed = labelled_corpus.with_labels(["tech", "tech", "arts", "tech"], label_names=["tech", "arts", "sport"])
    assert fixed.label_ids.tolist() == [0, 0, 1, 0]


def test_multi_labels(tiny_corpus):
    c = tiny_corpus.with_labels([["x", "y"], [], {"y"}])
    assert c.label_names == ("x", "y")
    assert c.labels.tolist() == [[True, True], [False, False], [False, True]]
    assert c.multilabel
    with pytest.raises(ValueError, match="multi-label"):
        c.label_ids
    matrix = np.array([[1, 0, 1], [0, 1, 0], [1, 1, 1]])
    m = tiny_corpus.with_labels(matrix, label_names=["p", "q", "r"])
    assert m.labels.tolist() == matrix.astype(bool).tolist() and m.label_names == ("p", "q", "r")
    assert tiny_corpus.with_labels(matrix).label_names == ("0", "1", "2")
    with pytest.raises(ValueError, match="has no labels"):
        tiny_corpus.label_ids


def test_mixed_and_boolean_labels(tiny_corpus):
    mixed = tiny_corpus.with_labels([5, "a", 5])  # ints are names when labels are not all ints
    assert mixed.label_names == ("5", "a") and mixed.label_ids.tolist() == [0, 1, 0]
    flags = tiny_corpus.with_labels([True, False, True])
    assert flags.label_names == ("False", "True") and flags.label_ids.tolist() == [1, 0, 1]
    arr = tiny_corpus.with_labels(np.array(["n", "m", "n"]))
    assert arr.label_names == ("m", "n") and arr.label_ids.tolist() == [1, 0, 1]


def test_label_errors(tiny_corpus):
    with pytest.raises(CorpusError, match="2 labels for 3 documents"):
        tiny_corpus.with_labels(["a", "b"])
    with pytest.raises(CorpusError, match=r"document 1: label 'z' is not among the label names"):
        tiny_corpus.with_labels(["a", "z", "a"], label_names=["a", "b"])
    with pytest.raises(CorpusError, match=r"document 2: label 4 is outside \[0, 2\)"):
        tiny_corpus.with_labels([0, 1, 4], label_names=["a", "b"])
    with pytest.raises(CorpusError, match=r"document 1: label -1 is negative"):
        tiny_corpus.with_labels([0, -1, 1])
    with pytest.raises(CorpusError, match="label matrix has 2 rows for 3 documents"):
        tiny_corpus.with_labels(np.ones((2, 2)))
    with pytest.raises(CorpusError, match="1 label names for 2 label columns"):
        tiny_corpus.with_labels(np.ones((3, 2)), label_names=["a"])


# ---------------------------------------------------------------------- modalities
def test_modalities_and_select_modality(multimodal_corpus):
    c = multimodal_corpus
    assert c.modality_names == ("@default_class", "@tag")
    assert c.modalities.tolist() == [0, 0, 1, 1, 0]
    tags = c.select_modality("@tag")
    assert tags.vocab == ("@tag|sport", "@tag|news")
    assert tags.to_dense().tolist() == [[1, 1], [0, 1], [1, 0]]
    assert "modalities" in repr(c)
    with pytest.raises(ValueError, match="unknown modality '@x'"):
        c.select_modality("@x")
    with pytest.raises(CorpusError, match=r"modality 'other' is not among the modality names"):
        Corpus.from_dense(np.ones((1, 2)), vocab=["a", "b"], modalities=["m", "other"], modality_names=["m"])
    with pytest.raises(CorpusError, match=r"one modality per word \(2\)"):
        Corpus.from_dense(np.ones((1, 2)), vocab=["a", "b"], modalities=[0])
