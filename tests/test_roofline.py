"""The roofline model of experiments/roofline.py (issue 41): byte and flop counts against a hand
count, its layout statistics against the layout topicjax builds, the KOS-size limit, the CLI."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from child_env import quick_child_env

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "experiments"))

import roofline as RL  # noqa: E402


def tiny_corpus():
    """Two documents over W = 25 words: document 0 holds words 0, 1, 2 (counts 2, 1, 1), document 1
    words 1 and 3..22 (word 1 three times, the others once): 24 non-zeros, 27 tokens; 3 and 21
    distinct words make 1 + 2 pieces of 16 slots."""
    import topicjax as tj

    docs = [0, 0, 0] + [1] * 21
    words = [0, 1, 2] + [1] + list(range(3, 23))
    counts = [2, 1, 1] + [3] + [1] * 20
    return tj.Corpus.from_entries(np.array(docs), np.array(words), np.array(counts), n_docs=2, n_words=25)


# A device with round figures, so that each term of a limit can be checked by hand.
UNIT = RL.Device("unit", hbm_bytes_per_s=1e9, l2_bytes=50 * RL.MB, l2_bytes_per_s=1e9, fp32_flops=1e9, launch_s=0.0)


def test_layout_statistics_are_those_of_the_built_layout(monkeypatch):
    from topicjax.core import layout

    corpus = tiny_corpus()
    st = RL.layout_stats(corpus, chunk=64)
    # 3 pieces in chunks of 64 slots = 4 pieces: one chunk, the last piece all padding
    assert (st.pieces, st.slots, st.nnz, st.tokens) == (4, 64, 24, 27)
    data = layout.prepare(corpus, chunk=64)
    assert data.word.size == st.slots and data.piece_doc.size == st.pieces
    assert np.array_equal(st.word_slots, np.bincount(np.asarray(data.word).ravel(), minlength=25))
    assert st.word_slots[0] == 1 + 40 and st.word_tokens[1] == 4 and st.word_tokens.sum() == 27
    # the default chunks: CPU and accelerator rules, each against prepare on that backend
    cpu = RL.layout_stats(corpus, accelerator=False)
    assert layout.prepare(corpus).word.size == cpu.slots == 48
    monkeypatch.setattr(layout.jax, "default_backend", lambda: "gpu")
    acc = RL.layout_stats(corpus)
    built = layout.prepare(corpus)
    assert (built.word.size, built.piece_doc.size) == (acc.slots, acc.pieces)
    same = RL.stats_of_layout(built.word, built.piece_doc, 2, 25, 24, 27)
    assert (same.pieces, same.slots) == (acc.pieces, acc.slots)


def test_pass_bytes_and_flops_equal_a_hand_count():
    st = RL.layout_stats(tiny_corpus(), chunk=64)  # S = 64 slots, P = 4 pieces, W = 25, D = 2
    c = RL.pass_cost(st, 3, UNIT)  # T = 3, f = i = 4 bytes
    layout_bytes = 64 * 8 + 4 * 4  # word + count per slot, document per piece: 528
    gathers = 64 * 3 * 4  # a row of Φ per slot: 768
    adds = 64 * 3 * 4  # a row of ∂L/∂Φ per slot: 768
    pieces = 2 * 4 * 3 * 4  # θ_d and ∂L/∂θ_d per piece: 96
    params = (25 * 3 + 3 * 2) * 4  # W T + T D floats: 324
    assert c.l2_bytes == layout_bytes + gathers + adds + pieces + params + 5 * params == 4104
    assert c.flops == 64 * (6 * 3 + 3) + 3 * (25 * 3 + 3 * 2) == 1587
    assert c.resident and c.hbm_bytes == 0  # 528 + 3 x 324 bytes fit in 50 MB
    assert c.bound == "L2" and c.limit_s == pytest.approx(4104 / 1e9)
    # two models on the layout: everything but the layout doubles
    c2 = RL.pass_cost(st, 3, UNIT, models=2)
    assert c2.l2_bytes == 528 + 2 * (4104 - 528)
    # launches add their latency on top of the largest term
    slow = replace(UNIT, launch_s=1e-6)
    assert RL.pass_cost(st, 3, slow, launches=3).limit_s == pytest.approx(4104 / 1e9 + 3e-6)


def test_pass_hbm_bytes_when_the_working_set_does_not_fit():
    st = RL.layout_stats(tiny_corpus(), chunk=64)
    # L2 of 48 bytes: room for the Φ row and the gradient row (2 x 3 x 4 bytes) of two words, the two
    # with most slots: word 0 (1 + 40 padding slots) and word 1 (2); 64 - 43 = 21 slots miss
    small = replace(UNIT, l2_bytes=48, hbm_bytes_per_s=0.5e9)
    c = RL.pass_cost(st, 3, small)
    layout_bytes = 528
    theta = 2 * 3 * 2 * 4  # Θ read and ∂L/∂Θ written once: 48
    kept = 2 * (2 * 3 * 4)  # two cached words, row read and gradient written once: 48
    missed = 21 * 3 * (3 * 4)  # per slot: row read, gradient read and written back: 756
    mstep = 5 * 324  # Φ, Θ and gradients (648 bytes) do not fit in 48: both M-step sweeps from HBM
    assert not c.resident
    assert c.hbm_bytes == layout_bytes + theta + kept + missed + mstep == 3000
    assert c.bound == "HBM" and c.limit_s == pytest.approx(3000 / 0.5e9)
    # without per-word counts every word is equally frequent: 2 of 25 rows cached, 64 x 2 / 25 slots hit
    flat = replace(st, word_slots=None)
    hit = 64 * 2 / 25
    assert RL.pass_cost(flat, 3, small).hbm_bytes == pytest.approx(528 + 48 + 48 + 3 * 12 * (64 - hit) + 1620)


def test_sweep_bytes_and_flops_equal_a_hand_count():
    st = RL.layout_stats(tiny_corpus(), chunk=64)  # N = 27 tokens, K = 3, c = i = 4 bytes
    dense = RL.sweep_cost(st, 3, UNIT)
    assert dense.l2_bytes == 27 * (4 * 4 + 6 * 4 + 2 * 3 * 4) == 1728
    assert dense.flops == 27 * 6 * 3 and dense.hbm_bytes == 0
    mh = RL.sweep_cost(st, 3, UNIT, mh_steps=2)
    assert mh.l2_bytes == 27 * (4 * 4 + 6 * 4 + 2 * (3 * 4 + 2 * 4) + 5 * 4) == 2700
    assert mh.flops == 27 * 12 * 2
    # L2 of 24 bytes: n_wk rows (3 x 4 bytes) of two words: word 1 (4 tokens) and word 0 (2)
    c = RL.sweep_cost(st, 3, replace(UNIT, l2_bytes=24))
    assert c.hbm_bytes == 27 * 16 + 2 * 2 * 3 * 4 + 2 * 3 * 4 * 2 + (3 * 4 + 4 * 4) * (27 - 6) == 1116


def test_kos_pass_limit_on_an_h200():
    """KOS at T = 100 in the accelerator layout (3,430 documents, 6,906 words, 353,160 non-zeros:
    23,691 pieces, padded to 6 chunks of 4,096): everything fits in L2, so the limit is the L2
    traffic at 7 TB/s plus one launch: 0.0538 ms, inside the issue's 0.05-0.06 ms."""
    st = RL.LayoutStats(3430, 6906, 353_160, 467_714, 24_576, 393_216)
    c = RL.pass_cost(st, 100, RL.DEVICES["h200"])
    l2 = 393_216 * 8 + 24_576 * 4 + 2 * 393_216 * 400 + 2 * 24_576 * 400 + 6 * (6906 * 100 + 100 * 3430) * 4
    assert c.l2_bytes == l2 == 362_284_032 and c.hbm_bytes == 0
    assert c.limit_s == pytest.approx(l2 / 7.0e12 + 2e-6)
    assert 0.05e-3 < c.limit_s < 0.06e-3
    # the H100 has the same L2: the same limit; NYTimes-sized work does not fit and needs HBM
    assert RL.pass_cost(st, 100, RL.DEVICES["h100"]).limit_s == pytest.approx(c.limit_s)
    big = RL.estimated_stats(300_000, 102_660, 66_984_702, 99_525_475)
    assert RL.pass_cost(big, 100, RL.DEVICES["h200"]).hbm_bytes > 0


def test_kos_statistics_from_the_corpus():
    import topicjax as tj
    from topicjax.core import layout

    try:
        kos = tj.datasets.load_kos()
    except FileNotFoundError:
        pytest.skip("KOS is not in the shared data")
    st = RL.layout_stats(kos)
    built = layout.prepare(kos, chunk=layout.ACCEL_CHUNK)  # on accelerators KOS gets whole 65,536-slot chunks
    assert (st.slots, st.pieces) == (built.word.size, built.piece_doc.size) == (393_216, 24_576)


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="not in the roofline table"):
        RL.device_spec("tpu v5")
    assert RL.device_spec("NVIDIA H100 80GB HBM3") is RL.DEVICES["h100"]
    with pytest.raises(ValueError, match="slots"):
        RL.LayoutStats(2, 25, 24, 27, 4, 60)
    st = RL.layout_stats(tiny_corpus(), chunk=64)
    with pytest.raises(ValueError, match="n_topics"):
        RL.pass_cost(st, 0, UNIT)
    with pytest.raises(ValueError, match="word_slots"):
        replace(st, word_slots=np.ones(25, np.int64))


def test_cli_prints_limits_beside_recorded_times(tmp_path):
    results = ROOT / "experiments" / "results" / "gpu_2026-11-26_nvidia-h200.json"
    # no shared data: the corpora's sizes stand in (estimated layouts), which keeps the run short
    env = quick_child_env(TOPICJAX_DATA=str(tmp_path))
    proc = subprocess.run([sys.executable, str(ROOT / "experiments" / "roofline.py"), "--from-results", str(results)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "NVIDIA H200" in out and "| what | bytes (L2 / HBM) | flops | limit | measured | ratio |" in out
    row = next(line for line in out.splitlines() if line.startswith("| PLSA pass kos, T = 100 (per call)"))
    assert "0.668 ms" in row and row.rstrip(" |").endswith("x")
    assert "estimated" in out


def test_cli_for_a_corpus(capsys):
    assert RL.main(["--corpus", "nytimes", "--topics", "100", "--device", "h200", "--measured-ms", "49.4"]) == 0
    out = capsys.readouterr().out
    assert "estimated layout" in out and "| PLSA pass nytimes |" in out and "49.400 ms" in out
