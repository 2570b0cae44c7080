"""Issue 45 item 2: an FTM fit with more slots than topics counts and lists only the topics that
hold tokens.  The reference is the sampler's own assignments ``z`` (one slot per token), counted
here by hand."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from topicjax.persistence import SavedModelError

from .common import est

# the settings of test_lida_model.test_growth_auto_and_error (shared compiled sweeps): a large IBP
# mass eta activates many slots in documents, most of which receive none of their tokens
KW = dict(init_topics=16, eta=1e4, max_iter=1, hyper_start=1, eval_every=0)


def test_ftm_counts_and_lists_only_topics_holding_tokens(small, tmp_path):
    corpus, true_phi = small
    ftm = est("ftm", **KW).fit(corpus)
    z = np.asarray(ftm.state_.z)
    assert z.size == corpus.n_tokens
    holding = {int(k) for k in z}  # slots that hold at least one token of the last sample
    slots = [int(s) for s in ftm.topic_slots_]
    assert holding <= set(slots)  # every topic with tokens has its column of phi_
    live = np.array([s in holding for s in slots])
    assert live.sum() > true_phi.shape[1] and not live.all()  # K_max exceeds the truth, empty columns exist

    assert ftm.n_topics_ == len(holding)
    np.testing.assert_array_equal(ftm.topic_live_, live)
    names = [f"lida{j}" for j in range(len(slots))]
    assert ftm.empty_topics_ == [names[j] for j in np.flatnonzero(~live)]
    assert ftm.history_[-1]["n_topics"] == len(holding)

    words = ftm.top_words(3)
    assert len(words) == len(slots)
    for j in range(len(slots)):  # live: the 3 largest entries of its column, found by a loop
        col = ftm.phi_[:, j]
        best = sorted(range(col.size), key=lambda i: (-col[i], i))[:3]
        assert words[j] == ([corpus.vocab[i] for i in best] if live[j] else [])

    out = io.StringIO()
    lines = ftm.print_topics(3, file=out)
    assert out.getvalue().splitlines() == lines and len(lines) == len(slots)
    for j, line in enumerate(lines):
        assert line == (f"{names[j]}: {' '.join(words[j])}" if live[j] else f"{names[j]} (empty)")

    # the bridges to other libraries leave the empty topics out too
    from topicjax.interop.common import topic_word_matrix
    from topicjax.interop.gensim import gensim_topics

    assert not topic_word_matrix(ftm)[~live].any()
    assert gensim_topics(ftm, 3) == [words[j] for j in np.flatnonzero(live)]

    # a saved model reloads with the same count; a count of every column (what older versions
    # saved) is read as the live ones, any other count is refused
    ftm.save(tmp_path / "m")
    back = type(ftm).load(tmp_path / "m")
    assert back.n_topics_ == ftm.n_topics_ and back.empty_topics_ == ftm.empty_topics_
    meta_file = tmp_path / "m" / "meta.json"
    meta = json.loads(meta_file.read_text())
    for count, ok in ((len(slots), True), (len(holding) + 1, False)):
        meta["n_topics_"] = count
        meta_file.write_text(json.dumps(meta))
        if ok:
            assert type(ftm).load(tmp_path / "m").n_topics_ == len(holding)
        else:
            said = rf"'n_topics_' is {count}, but the arrays hold {len(holding)} live topics"
            with pytest.raises(SavedModelError, match=said):
                type(ftm).load(tmp_path / "m")
