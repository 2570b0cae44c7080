"""Offline PLSA/ARTM EM streamed from a batch store (topicjax.scale.offline.fit_store, issue 27)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from forked_peaks import measure_forked, measured_env

import topicjax as tj
from topicjax import regularizers as R
from topicjax.core.errors import NumericalError
from topicjax.scale import offline, store

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bars_store(tmp_path_factory):
    corpus, _, _ = tj.datasets.make_bars(n_docs=250, seed=0)
    return store.write_store([corpus], tmp_path_factory.mktemp("store"), batch_size=60)  # 5 batches, last short


@pytest.mark.parametrize("doc_passes", [None, 3])
@pytest.mark.parametrize("with_reg", [False, True])
def test_equals_the_in_memory_fit(bars_store, doc_passes, with_reg):
    regs = [(R.smooth_phi(), 0.1), (R.sparse_theta(), 0.05)] if with_reg else None
    assert bars_store.n_batches >= 3
    m = offline.fit_store(bars_store, 7, max_iter=6, doc_passes=doc_passes, regularizers=regs, random_state=3,
                          progress=False)
    a = tj.ARTM(7, max_iter=6, doc_passes=doc_passes, regularizers=regs, random_state=3,
                progress=False).fit(bars_store.corpus())
    np.testing.assert_allclose(m.phi_, a.phi_, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(m.theta_, a.theta_, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose([h["objective"] for h in m.history_], [h["objective"] for h in a.history_], rtol=1e-5)
    np.testing.assert_allclose([h["regularizer"] for h in m.history_], [h["regularizer"] for h in a.history_],
                               rtol=1e-4, atol=1e-3)
    assert m.vocab_ == a.vocab_ and m.n_iter_ == 6 and isinstance(m, tj.ARTM)
    if with_reg:
        assert m.history_[-1]["tau/smooth_phi"] == pytest.approx(0.1)
    np.testing.assert_allclose(m.transform(bars_store.corpus()), a.transform(bars_store.corpus()), rtol=1e-3, atol=1e-5)


def test_initial_phi_and_errors(bars_store):
    # T = 7 and random_state=3, as test_equals_the_in_memory_fit[False-None]: its compiled programs
    a = offline.fit_store(bars_store, 7, max_iter=2, random_state=3, progress=False)
    b = offline.fit_store(bars_store, 7, max_iter=1, phi=a.phi_, progress=False)
    assert b.history_[0]["objective"] > a.history_[0]["objective"]
    with pytest.raises(ValueError, match="phi is"):
        offline.fit_store(bars_store, 7, phi=np.ones((3, 7)), progress=False)
    with pytest.raises(ValueError, match="improve_coherence.*corpus as a whole"):
        offline.fit_store(bars_store, 7, regularizers=[(R.improve_coherence(), 1.0)], max_iter=1, progress=False)
    with pytest.raises(NumericalError):
        offline.fit_store(bars_store, 7, regularizers=[(lambda p, t: -1e30 * (p * p).sum(), 1.0)], max_iter=2,
                          progress=False)


#: the setup of the measuring child (tests/forked_peaks.py); ``fit(how, n_docs)`` runs in a process
#: forked from it and returns the peak of its fit alone and the store's non-zeros
SETUP = r"""
import tempfile, numpy as np
import topicjax as tj
from topicjax.data import synthetic
from topicjax.scale import offline, store

def fit(how, n_docs):
    with tempfile.TemporaryDirectory() as folder:
        w = store.StoreWriter(folder, 2000, "test")
        gen = synthetic.LDAGenerator(n_docs=n_docs, n_words=3000, mean_length=120.0, n_topics=20, seed=0)
        for c in gen.chunks(2000):
            w.append(np.diff(c.offsets), c.word_ids, c.counts)
        st = w.close([f"w{i}" for i in range(3000)])
        nnz = int(st.doc_offsets()[-1])
        del w, gen
        # the peak of the fit alone: writing the store does not count (Linux resets VmHWM on "5")
        open("/proc/self/clear_refs", "w").write("5")
        if how == "store":
            offline.fit_store(st, 8, max_iter=2, progress=False)
        else:
            tj.PLSA(8, max_iter=2, random_state=0, progress=False).fit(st.corpus())
        peak = peak_bytes()
    return {"peak": peak, "nnz": nnz}
"""


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux's /proc for the peak resident memory")
def test_peak_memory_grows_much_less_than_the_in_memory_fit():
    """From 5,000 to 40,000 documents (0.38 M -> 3.0 M non-zeros), T = 8: the in-memory PLSA fit's
    peak grows by 46-52 bytes per added non-zero (the corpus, 12, its device layout and the
    temporaries of building it; measured), the store's fit by 10-11 (measured; O(documents) state:
    Θ and its M-step temporaries, the document lengths, the offsets; the entries: one batch and the
    prefetched next).  A fit that held the corpus and its layout again would add >= 24.  Each fit
    in a fresh process forked from one child (tests/forked_peaks.py), compiling its own programs."""
    env = measured_env(JAX_PLATFORMS="cpu", TOPICJAX_THREADS="1", PYTHONPATH=str(ROOT))
    small, big = measure_forked(SETUP, ["fit('store', 5000)", "fit('store', 40000)"], env, timeout=300)
    per_nnz = (big["peak"] - small["peak"]) / (big["nnz"] - small["nnz"])
    assert per_nnz < 20, per_nnz


PASSES_SCRIPT = r"""
import json, sys, tempfile, numpy as np
def kb():
    return int([l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1]) * 1024
from topicjax.data import synthetic
from topicjax.scale import offline, store
gen = synthetic.LDAGenerator(n_docs=30000, n_words=10000, mean_length=200.0, n_topics=20, seed=0)
w = store.StoreWriter(tempfile.mkdtemp(), 3000, "test")
for c in gen.chunks(3000):
    w.append(np.diff(c.offsets), c.word_ids, c.counts)
st = w.close([f"w{i}" for i in range(10000)])
del w, gen
out = []
for n in (2, 8):
    open("/proc/self/clear_refs", "w").write("5")  # VmHWM from here
    offline.fit_store(st, 32, max_iter=n, random_state=0, progress=False)
    out.append(kb())
print(json.dumps(out))
"""


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux's /proc for the peak resident memory")
def test_peak_memory_does_not_grow_with_passes():
    """Eight passes over a store (10 batches, 5.3 M tokens) peak where two do: the loop waits for
    each batch's step before the next is read (else the batches queued for the device add up),
    and one malloc arena (``topicjax._malloc``) lets the blocks freed by one thread serve the
    others (measured: +6-9 MB from 2 to 8 passes; with glibc's default arenas +140-175 MB, and
    1.9 GiB instead of 1.1 GiB at NYTimes size)."""
    env = measured_env(JAX_PLATFORMS="cpu", TOPICJAX_THREADS="2", PYTHONPATH=str(ROOT))
    env.pop("MALLOC_ARENA_MAX", None)
    out = subprocess.run([sys.executable, "-c", PASSES_SCRIPT], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    two, eight = json.loads(out.stdout.strip().splitlines()[-1])
    assert eight - two < 60 << 20, (two >> 20, eight >> 20)

