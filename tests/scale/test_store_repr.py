"""Issue 45 item 4: a batch store says what it holds in its repr."""

from __future__ import annotations

import numpy as np

from topicjax.data import Corpus
from topicjax.scale.store import BatchStore, write_store


def test_repr_names_folder_documents_words_tokens_batches(tmp_path):
    dense = np.zeros((2500, 3), np.int32)
    dense[:, 0] = 1
    dense[::2, 2] = 3  # 2,500 + 1,250 * 3 = 6,250 tokens
    corpus = Corpus.from_dense(dense, vocab=["a", "b", "c"])
    folder = tmp_path / "it's here"
    write_store([corpus], folder, batch_size=1000)
    assert repr(BatchStore(folder)) == (f"BatchStore({str(folder)!r}, docs=2,500, words=3, tokens=6,250, "
                                        "batches=3 of 1,000 documents)")
