"""PTM's device layout (topicjax.ptm.layout.build_layout) against the corpus it was built from,
read entry by entry with Python loops."""

import numpy as np
import pytest

from topicjax.ptm import layout


def csr(rng, D, N, empty_doc=True):
    dense = rng.poisson(0.9, size=(D, N)) * (rng.random((D, N)) < 0.4)
    if empty_doc:
        dense[2] = 0
    dense[:, 1] = 0  # a word without documents
    dense[4, :] = rng.integers(1, 3, N)  # a long document: many rows
    dense[4, 1] = 0
    d_idx, w_idx = np.nonzero(dense)
    offsets = np.concatenate([[0], np.cumsum(np.bincount(d_idx, minlength=D))])
    return dense, offsets, w_idx.astype(np.int32), dense[d_idx, w_idx]


@pytest.mark.parametrize("widths", [(3, 2, 12, 0), (4, 5, 20, 1), (16, 16, 4096, 0)])
def test_rows_hold_every_entry_once_and_positions_point_at_it(widths, monkeypatch):
    doc_width, word_width, block, extra = widths
    monkeypatch.setattr(layout, "_FILL_BLOCK", 7)  # many fill blocks: the running per-word counts matter
    rng = np.random.default_rng(sum(widths))
    D, N = 13, 11
    dense, offsets, words, counts = csr(rng, D, N)
    docs, wrows = layout.build_layout(offsets, words, counts, N, doc_width=doc_width, word_width=word_width,
                                      block_tokens=block, extra_chunks=extra)
    d_item = np.asarray(docs.item).reshape(-1)
    d_other = np.asarray(docs.other).reshape(-1, doc_width)
    d_count = np.asarray(docs.count).reshape(-1, doc_width)
    assert docs.pos is None and wrows.count is None and wrows.other is None
    # document rows: each document's entries, in order, in consecutive slots of its rows
    seen = np.zeros((D, N))
    for r, d in enumerate(d_item):
        for e in range(doc_width):
            if d_count[r, e] > 0:
                assert d < D
                seen[d, d_other[r, e]] += d_count[r, e]
    np.testing.assert_array_equal(seen, dense)
    assert np.all(np.diff(d_item) >= 0) and d_item[-1] == D
    flat_count = d_count.reshape(-1)
    flat_doc = np.repeat(d_item, doc_width)
    flat_word = d_other.reshape(-1)
    assert flat_count[-1] == 0, "the last slot is padding (word rows' padding points at it)"
    # word rows: each position names an entry of that word (its document: the slot's row's), every
    # entry exactly once; padding entries point at the last slot
    w_item = np.asarray(wrows.item).reshape(-1)
    w_pos = np.asarray(wrows.pos).reshape(-1, word_width)
    slot_doc = np.asarray(layout.slot_docs(docs, np.asarray(wrows.pos))).reshape(-1, word_width)
    hits = np.zeros(flat_count.size, int)
    for r, w in enumerate(w_item):
        for e in range(word_width):
            p = w_pos[r, e]
            if flat_count[p] == 0:
                assert p == flat_count.size - 1 and slot_doc[r, e] == D
                continue
            d = flat_doc[p]
            assert w < N and flat_word[p] == w and slot_doc[r, e] == d < D and flat_count[p] == dense[d, w]
            hits[p] += 1
    np.testing.assert_array_equal(hits, (flat_count > 0).astype(int))
    assert np.all(np.diff(w_item) >= 0) and w_item[-1] == N
    # a word's entries are in corpus (document) order
    for w in range(N):
        ds = [slot_doc[r, e] for r in np.flatnonzero(w_item == w) for e in range(word_width) if slot_doc[r, e] < D]
        assert ds == sorted(ds) and ds == list(np.flatnonzero(dense[:, w]))
