"""Reference coherence (C_V, C_NPMI, C_UCI, UMass) against hand-enumerated windows, a brute-force
Python loop of the definitions, and values recorded once from gensim's CoherenceModel."""

from __future__ import annotations

import functools
import importlib.util
import math
import re
from pathlib import Path

import numpy as np
import pytest

from topicjax import Corpus
from topicjax.evaluation.coherence import reference_coherence, topic_word_ids
from topicjax.evaluation.reference_texts import ReferenceTexts
from topicjax.evaluation.window_counts import window_counts

MEASURES = ("c_v", "c_npmi", "c_uci", "u_mass")
WINDOWS = {"c_v": 110, "c_npmi": 10, "c_uci": 10, "u_mass": None}


# ------------------------------------------------------------------ brute force (independent)
def brute_windows(docs, window, counting):
    """Every virtual document (a set of words) of ``docs`` (lists of words, None for a gap).

    ``window=None``: one per document.  A document no longer than the window is one window (an
    empty one too).  ``"exact"``: the set of the window's words.  ``"gensim"``: gensim's
    incremental rule, replayed step by step: the word leaving at the left edge is marked absent,
    then the word entering at the right edge present."""
    out = []
    for d in docs:
        if window is None or len(d) <= window:
            out.append(set(d) - {None})
            continue
        if counting == "exact":
            out += [set(d[k:k + window]) - {None} for k in range(len(d) - window + 1)]
            continue
        present = set(d[:window])
        out.append(present - {None})
        for k in range(1, len(d) - window + 1):
            present.discard(d[k - 1])
            present.add(d[k + window - 1])
            out.append(present - {None})
    return out


def brute_measure(topic, windows, measure, eps=1e-12):
    """The definitions of Röder et al. (2015) as gensim applies them, by plain loops."""
    n = len(windows)
    windows = [win & set(topic) for win in windows]

    @functools.lru_cache(maxsize=None)
    def p(*words):
        return sum(all(w in win for w in words) for win in windows) / n

    k = len(topic)
    if measure == "u_mass":
        vals = []
        for i in range(1, k):
            for j in range(i):
                pj = p(topic[j])
                vals.append(math.log((p(topic[i], topic[j]) + eps) / pj) if pj > 0 else 0.0)
        return sum(vals) / len(vals)

    def pmi(a, b):
        return math.log((p(a, b) + eps) / (p(a) * p(b)))

    def npmi(a, b):
        return pmi(a, b) / -math.log(p(a, b) + eps)

    pairs = [(a, b) for a in topic for b in topic if a != b]
    if measure == "c_uci":
        return sum(pmi(a, b) for a, b in pairs) / len(pairs)
    if measure == "c_npmi":
        return sum(npmi(a, b) for a, b in pairs) / len(pairs)
    vec = {a: [npmi(a, b) for b in topic] for a in topic}
    whole = [sum(vec[a][j] for a in topic) for j in range(k)]
    cos = []
    for a in topic:
        dot = sum(x * y for x, y in zip(vec[a], whole))
        cos.append(dot / (math.sqrt(sum(x * x for x in vec[a])) * math.sqrt(sum(y * y for y in whole))))
    return sum(cos) / k


# ------------------------------------------------------------------ reference texts
def test_reference_texts_keep_order_and_gaps():
    ref = ReferenceTexts.from_texts(["The cat sat on the mat", "", "Dog, cat!"], vocab=["cat", "dog", "mat"])
    assert ref.n_docs == 3 and ref.n_tokens == 8 and ref.n_gaps == 4
    assert ref.documents() == [[None, "cat", None, None, None, "mat"], [], ["dog", "cat"]]
    assert ref.doc_lengths.tolist() == [6, 0, 2]
    # windows of 3: 4 in the first document; the empty and the short document one each
    assert ref.n_windows(3) == 6 and ref.n_windows(None) == 3
    own = ReferenceTexts.from_token_lists([["b", "a"], ["c"]])
    assert own.vocab == ("a", "b", "c") and own.token_ids.tolist() == [1, 0, 2]
    custom = ReferenceTexts.from_texts(["A-b a"], tokenizer=str.split)
    assert custom.vocab == ("A-b", "a")


def test_reference_texts_errors_name_the_input():
    with pytest.raises(ValueError, match="appears twice"):
        ReferenceTexts.from_token_lists([["a"]], vocab=["a", "a"])
    with pytest.raises(TypeError, match="document 1: token 3"):
        ReferenceTexts.from_token_lists([["a"], ["b", 3]])
    with pytest.raises(TypeError, match="text 1 is bytes"):
        ReferenceTexts.from_texts(["a", b"b"])
    with pytest.raises(TypeError, match="not a single string"):
        ReferenceTexts.from_texts("a b")
    with pytest.raises(ValueError, match="document 1, token 0: id 5"):
        ReferenceTexts.from_ids([[0, -1], [5]], vocab=["a", "b"])


# ------------------------------------------------------------------ window counts by hand
def test_window_counts_enumerated_by_hand():
    # doc 0 = a a b c (windows of 2: [a a] [a b] [b c]); doc 1 = b (one short window);
    # doc 2 empty (one empty window); doc 3 = a x b with x a gap ([a x] [x b]).  N = 7.
    ref = ReferenceTexts.from_token_lists([list("aabc"), ["b"], [], list("axb")], vocab=["a", "b", "c"])
    exact = window_counts(ref, [0, 1, 2], window=2, counting="exact")
    assert exact.n_windows == 7
    # a: [a a] [a b] [a x] = 3; b: [a b] [b c] [b] [x b] = 4; c: 1; ab: [a b]; bc: [b c]; ac: none
    assert np.asarray(exact.cooccurrences).tolist() == [[3, 1, 0], [1, 4, 1], [0, 1, 1]]
    gensim = window_counts(ref, [0, 1, 2], window=2, counting="gensim")
    # gensim drops a from [a b]: the a leaving [a a] at the left edge is marked absent
    assert np.asarray(gensim.cooccurrences).tolist() == [[2, 0, 0], [0, 4, 1], [0, 1, 1]]
    docs = window_counts(ref, [0, 1, 2], window=None)
    assert docs.n_windows == 4 and np.asarray(docs.cooccurrences).tolist() == [[2, 2, 1], [2, 3, 1], [1, 1, 1]]


@pytest.mark.parametrize("counting", ["exact", "gensim"])
def test_window_counts_equal_brute_force(counting):
    rng = np.random.default_rng(7)
    words = list("abcdefg")
    docs = [[words[i] if i < 7 else None for i in rng.integers(0, 9, size=rng.integers(0, 30))] for _ in range(9)]
    ref = ReferenceTexts.from_ids([[words.index(t) if t else -1 for t in d] for d in docs], vocab=words)
    for window in (1, 2, 3, 5, 8, 40, None):
        wins = brute_windows(docs, window, counting)
        got = window_counts(ref, [2, 0, 5, 6], window=window, counting=counting)
        sel = [words[i] for i in (2, 0, 5, 6)]
        want = [[sum(a in w and b in w for w in wins) for b in sel] for a in sel]
        assert got.n_windows == len(wins)
        assert np.asarray(got.cooccurrences).tolist() == want, (window, counting)


def test_gensim_counting_never_above_exact():
    rng = np.random.default_rng(3)
    ref = ReferenceTexts.from_ids([rng.integers(-1, 5, size=60) for _ in range(20)], vocab=list("abcde"))
    for window in (3, 10):
        g = np.asarray(window_counts(ref, range(5), window=window, counting="gensim").cooccurrences)
        e = np.asarray(window_counts(ref, range(5), window=window, counting="exact").cooccurrences)
        assert np.all(g <= e) and np.any(g < e)


# ------------------------------------------------------------------ measures by brute force
@pytest.mark.parametrize("counting", ["exact", "gensim"])
def test_measures_equal_brute_force_loops(counting):
    rng = np.random.default_rng(11)
    words = list("abcdefghij")
    docs = [[words[i] if i < 10 else None for i in rng.integers(0, 12, size=rng.integers(3, 50))] for _ in range(12)]
    docs.append(words)  # every word occurs
    ref = ReferenceTexts.from_token_lists([[t if t else "<gap>" for t in d] for d in docs], vocab=words)
    topics = [list(rng.choice(words, size=4, replace=False)) for _ in range(5)]
    for measure in MEASURES:
        for window in ((None,) if measure == "u_mass" else (3, 7)):
            kw = {} if measure == "u_mass" else {"window": window}
            got = reference_coherence(topics, ref, measure=measure, counting=counting, **kw)
            wins = brute_windows(docs, window, counting)
            want = [brute_measure(t, wins, measure) for t in topics]
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-10, err_msg=f"{measure} window={window}")


def test_umass_is_a_mean_and_accepts_a_bag_of_words():
    texts = [list("abxab"), list("cb"), list("ac"), list("bd")]
    ref = ReferenceTexts.from_token_lists(texts)
    corpus = Corpus.from_lists([[(ref.vocab.index(w), n) for w, n in sorted({w: t.count(w) for w in t}.items())]
                                for t in texts], vocab=list(ref.vocab))
    topics = [["a", "b", "c"], ["b", "d", "x"]]
    a = reference_coherence(topics, ref, measure="u_mass")
    b = reference_coherence(topics, corpus, measure="u_mass")
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-15)
    # topic 0: pairs (b|a), (c|a), (c|b): log((1/4)/(2/4)), log((1/4)/(2/4)), log((1/4)/(3/4)), mean
    assert a[0] == pytest.approx((2 * math.log(0.5 + 2e-12) + math.log(1 / 3 + 4e-12 / 3)) / 3, abs=1e-12)
    with pytest.raises(TypeError, match="without token order"):
        reference_coherence(topics, corpus, measure="c_v")


# ------------------------------------------------------------------ batching
def test_models_and_topics_batched_equal_a_loop():
    rng = np.random.default_rng(5)
    vocab = [f"w{i}" for i in range(30)]
    ref = ReferenceTexts.from_ids([rng.integers(-1, 30, size=rng.integers(20, 200)) for _ in range(40)], vocab=vocab)
    phi = rng.dirichlet(np.full(30, 0.3), size=(3, 6)).transpose(0, 2, 1)  # (G, W, T)
    for measure in MEASURES:
        grid = reference_coherence(phi, ref, measure=measure, top_n=5)
        assert grid.shape == (3, 6)
        loop = np.stack([reference_coherence(phi[g], ref, measure=measure, top_n=5) for g in range(3)])
        np.testing.assert_allclose(grid, loop, rtol=0, atol=1e-12)
        one = np.array([reference_coherence(phi[g][:, [t]], ref, measure=measure, top_n=5)[0]
                        for g in range(3) for t in range(6)]).reshape(3, 6)
        np.testing.assert_allclose(grid, one, rtol=0, atol=1e-12)
        small = reference_coherence(phi, ref, measure=measure, top_n=5, max_union=7)  # many groups of topics
        np.testing.assert_allclose(small, grid, rtol=0, atol=1e-12)
    ragged = reference_coherence([phi[0], phi[1][:, :2]], ref, top_n=5)
    assert [r.shape for r in ragged] == [(6,), (2,)]
    np.testing.assert_allclose(ragged[1], reference_coherence(phi[1], ref, top_n=5)[:2], rtol=0, atol=1e-12)
    both = reference_coherence(phi[0], ref, measure=["c_npmi", "c_uci", "c_v"], top_n=5)
    assert set(both) == {"c_npmi", "c_uci", "c_v"}
    np.testing.assert_allclose(both["c_uci"], reference_coherence(phi[0], ref, measure="c_uci", top_n=5), atol=1e-12)


def test_topics_as_models_ids_and_other_vocabularies():
    class Fitted:  # duck-typed fitted model
        def __init__(self, phi, vocab):
            self.phi_, self.vocab_ = phi, vocab

    ref = ReferenceTexts.from_token_lists([list("abcab"), list("cadb"), list("dd")])
    phi = np.array([[0.5, 0.0], [0.3, 0.1], [0.2, 0.2], [0.0, 0.7]])  # rows: d c b a (reversed order)
    model = Fitted(phi, ["d", "c", "b", "a"])
    got = reference_coherence(model, ref, measure="c_npmi", window=2, top_n=2)
    want = reference_coherence([["d", "c"], ["a", "b"]], ref, measure="c_npmi", window=2)
    np.testing.assert_allclose(got, want, atol=1e-15)
    ids = reference_coherence(np.array([[3, 2], [0, 1]]), ref, measure="c_npmi", window=2)  # ids into ref.vocab
    np.testing.assert_allclose(ids, want, atol=1e-15)
    strings = reference_coherence(np.array([["d", "c"], ["a", "b"]]), ref, measure="c_npmi", window=2)
    np.testing.assert_allclose(strings, want, atol=1e-15)
    assert len(reference_coherence([model, model], ref, measure="c_npmi", window=2, top_n=2)) == 2
    groups, shape = topic_word_ids(phi, ref.vocab, vocab=model.vocab_, top_n=2)
    assert shape == "flat" and groups[0][0].tolist() == [[3, 2], [0, 1]]


# ------------------------------------------------------------------ bad input, removed topics
def test_removed_topic_scores_nan_and_missing_words_are_named():
    ref = ReferenceTexts.from_token_lists([list("abcab"), list("cab")], vocab=list("abcz"))
    phi = np.array([[0.5, 0.0, 0.4], [0.3, 0.0, 0.0], [0.2, 0.0, 0.0], [0.0, 0.0, 0.6]])
    with pytest.raises(ValueError, match="topic 2: top word 0 'z' has no window"):
        reference_coherence(phi, ref, top_n=2)
    got = reference_coherence(phi, ref, top_n=2, missing="nan")
    assert np.isfinite(got[0]) and np.isnan(got[1]) and np.isnan(got[2])
    with pytest.raises(ValueError, match="'q'.*unknown|unknown"):
        reference_coherence([["a", "q"]], ref)
    with pytest.raises(ValueError, match="unknown coherence measure"):
        reference_coherence([["a", "b"]], ref, measure="c_w2v")
    with pytest.raises(ValueError, match="topic 1 has 3 words"):
        reference_coherence([["a", "b"], ["a", "b", "c"]], ref)
    with pytest.raises(ValueError, match="repeats a word"):
        reference_coherence([["a", "a"]], ref)
    with pytest.raises(ValueError, match="pass vocab="):
        reference_coherence(np.ones((3, 2)), ref)
    with pytest.raises(ValueError, match="u_mass counts documents"):
        reference_coherence([["a", "b"]], ref, measure="u_mass", window=5)
    with pytest.raises(ValueError, match="counting must be"):
        reference_coherence([["a", "b"]], ref, counting="palmetto")


# ------------------------------------------------------------------ gensim parity
# Values produced once by `python experiments/record_gensim_coherence.py` (gensim 4.4.0, numpy 2.4.6;
# 300 documents, 60302 tokens): CoherenceModel(topics=TOPICS, texts=texts, dictionary=Dictionary(texts),
# coherence=m, topn=10, processes=1).get_coherence_per_topic(), texts = tokenize(line) of every line
# of gensim/test/test_data/lee_background.cor.
TOPICS = [
    "afghanistan taliban bin laden qaeda al forces afghan tora bora".split(),
    "israeli palestinian arafat sharon hamas gaza israel suicide yasser peace".split(),
    "fire bushfire sydney wales firefighters homes blaze south winds hill".split(),
    "qantas workers union industrial unions staff commission action pay company".split(),
    "test match india team cricket australia wickets runs south africa".split(),
    "economy christmas hospital metres river child court meeting foreign morning".split(),
    "government minister prime howard australian federal election labor party says".split(),
    "vacate mittagong thunderstorms karachi srinagar fire sydney homes blaze winds".split(),
]
GENSIM_LEE = {
    "c_v": [
        0.9397442760729147,
        0.9322421381394074,
        0.7805702162897942,
        0.8405936900186386,
        0.5865520855467762,
        0.33799585399852433,
        0.44670900059676716,
        0.42082454096196625,
    ],
    "c_npmi": [
        0.27340473136052873,
        0.1371711378762716,
        0.04554244879577991,
        0.05803465306394807,
        0.03498476289766004,
        -0.43479157706531624,
        -0.054520818738839336,
        -0.2838656694994334,
    ],
    "c_uci": [
        1.8841737398322398,
        -0.16955490193381967,
        -2.262621115832641,
        -2.3504992353803114,
        -2.9430980020983397,
        -12.653326800002676,
        -3.912428244938019,
        -8.921982290581495,
    ],
    "u_mass": [
        -0.6386996249175267,
        -0.4677010279798803,
        -1.2825487671900697,
        -1.0469534546645147,
        -4.1551931612479835,
        -10.229346527257016,
        -2.28383613366239,
        -8.120410581062622,
    ],
}


def tokenize(line: str) -> list[str]:
    """As in experiments/record_gensim_coherence.py."""
    return re.findall(r"[a-z]+", line.lower())


@pytest.fixture(scope="module")
def lee_texts() -> list[list[str]]:
    """gensim's lee_background.cor, found inside an installed gensim without importing it."""
    spec = importlib.util.find_spec("gensim")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("gensim is not installed (its test corpus lee_background.cor is read from it)")
    for folder in spec.submodule_search_locations:
        path = Path(folder) / "test" / "test_data" / "lee_background.cor"
        if path.is_file():
            return [tokenize(line) for line in path.read_text(encoding="utf-8").splitlines()]
    pytest.skip("the installed gensim has no test/test_data/lee_background.cor")


def test_equal_to_gensim_on_lee_background(lee_texts):
    # A vocabulary without the rarest words: their tokens become gaps, as gensim treats every
    # token that is not a top word.
    freq: dict[str, int] = {}
    for t in lee_texts:
        for w in t:
            freq[w] = freq.get(w, 0) + 1
    vocab = sorted({w for w, n in freq.items() if n >= 3} | {w for t in TOPICS for w in t})
    ref = ReferenceTexts.from_token_lists(lee_texts, vocab=vocab)
    assert ref.n_gaps > 0 and ref.n_docs == 300
    got = reference_coherence(TOPICS, ref, measure=MEASURES)
    for m in MEASURES:
        np.testing.assert_allclose(got[m], GENSIM_LEE[m], rtol=0, atol=1e-6, err_msg=m)
    # the same topics as two "models" of a batch
    grid = reference_coherence([TOPICS[:4], TOPICS[4:]], ref, measure="c_v")
    np.testing.assert_allclose(np.concatenate(grid), GENSIM_LEE["c_v"], rtol=0, atol=1e-6)
    # a Corpus of the same texts gives gensim's UMass too
    corpus = Corpus.from_texts([" ".join(t) for t in lee_texts], vocabulary=vocab, token_pattern=r"[a-z]+")
    np.testing.assert_allclose(reference_coherence(TOPICS, corpus, measure="u_mass"), GENSIM_LEE["u_mass"], rtol=0, atol=1e-6)


def test_exact_counting_differs_from_gensim_on_lee(lee_texts):
    ref = ReferenceTexts.from_token_lists(lee_texts)
    exact = reference_coherence(TOPICS[:2], ref, measure="c_v", counting="exact")
    wins = brute_windows(lee_texts, 110, "exact")
    want = [brute_measure(t, wins, "c_v") for t in TOPICS[:1]]
    np.testing.assert_allclose(exact[:1], want, rtol=0, atol=1e-10)
    assert np.all(np.abs(exact - np.asarray(GENSIM_LEE["c_v"][:2])) > 1e-4)


def test_benchmark_script_runs_quick(shared_data, load_experiment, capsys):
    load_experiment("bench_coherence").main(["--quick", "--no-gensim"])
    assert "topicjax c_v" in capsys.readouterr().out
