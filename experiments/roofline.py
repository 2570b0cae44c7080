"""Roofline limits of a PLSA/ARTM EM pass and of an LDA Gibbs sweep on a GPU (issue 41, item 4).

A *limit* is the least time any program could take for the work, on the device's peak figures:

    limit = max(L2 bytes / L2 bandwidth,  HBM bytes / HBM bandwidth,  flops / FP32 rate)
            + launches x launch latency

where the bytes are the traffic the work cannot avoid, counted at two levels: between the SMs and
the L2 cache (every global-memory access a kernel makes goes through L2) and between L2 and HBM
(what does not stay in L2).  A measured time divided by its limit is its *ratio*; ratio 1 is
the device at its peak.  The counts assume nothing about how XLA lays out the work: they are what
one ideal kernel over the same layout would move.  ``launches`` is the number of kernels of the
program (default 1: one fused kernel per pass or sweep).

Notation.  S = slots of the sliced layout (non-zeros + padding), P = its pieces (``PIECE`` = 16
slots each; S = 16 P), W words, D documents, T topics, G models sharing the layout (``ARTM.
fit_many``; G = 1 for one model), f = bytes of a float (4), i = bytes of an index (4), C = L2
capacity in bytes.  These are a :class:`LayoutStats`: :func:`layout_stats` gets them from a
corpus the way :func:`topicjax.core.layout.prepare` pads it, :func:`stats_of_layout` from the
arrays of a built layout, :func:`estimated_stats` from sizes alone.

**One PLSA/ARTM EM pass** (:func:`pass_cost`; E-step ARTM eq. 4, 7-8 over the sliced layout of
:mod:`topicjax.core.layout`, then the M-step normalisation of eq. 14-16):

    L2 traffic = S (i + f) + P i                 word id + count per slot, document per piece
               + S G T f                         Φ[w] gathered per slot
               + S G T f                         ∂L/∂Φ added per slot (one f per value: the
                                                 read-modify-write of an atomic add is done in L2)
               + 2 P G T f                       θ_d read and ∂L/∂θ_d added once per piece
               + G (W T + T D) f                 both gradients zeroed
               + 5 G (W T + T D) f               M-step over W x T and T x D: a sweep for the
                                                 column sums (reads Φ and ∂L/∂Φ, Θ and ∂L/∂Θ) and
                                                 one that normalises (reads both again, writes)
    flops      = S G (6 T + 3)                   p = Σ_t φ_wt θ_td (2T), n/p and n log p (3),
                                                 ∂L/∂θ += r φ (2T), ∂L/∂Φ += r θ (2T)
               + 3 G (W T + T D)                 n = φ ∂L/∂φ, the column sums, the division

How ∂L/∂Φ is reduced does not change these counts to first order: the per-slot scatter-add
(``TOPICJAX_ESTEP=xla_scatter``) moves S G T f of atomic adds; the per-piece reduction over the
word-sorted mirror of the layout (:class:`topicjax.core.layout.WordMirror`, ``xla``) instead reads
a row of Θ per mirrored slot (S G T f again) and writes a gradient row per word piece, plus its
4-byte slot index per slot.  The model counts the first, the smaller of the two.

HBM traffic.  If the working set ``S (i + f) + P i + 3 G (W T + T D) f`` (the layout, Φ and Θ,
their gradients, the new Φ and Θ) fits in C, a loop of passes keeps it all in L2 and a pass
moves **no** HBM bytes (KOS at T = 100: 15.6 MB of 50 MB).  Otherwise:

    HBM traffic = S (i + f) + P i                the layout, streamed once
                + 2 G T D f                      Θ read and ∂L/∂Θ written once: a document's
                                                 pieces are consecutive, so θ_d stays in L2
                + 2 G T f  x  cached words       Φ row read once, gradient row written once
                + 3 G T f  x  slots of the other words
                                                 Φ row read, gradient row read and written back
                + (3 or 5) G (W T + T D) f       the M-step: 3 when Φ, Θ and their gradients
                                                 fit in C together (its second sweep hits L2)

The cached words are the most frequent ones (by number of slots, padding slots counted on word 0
where they gather), as many as C holds a Φ row and a gradient row for: ``floor(C / (2 G T f))``.
This idealised cache is what makes the limit a bound; without per-word counts (:func:`estimated_
stats`) every word is taken as equally frequent, which overstates the misses of a Zipfian corpus.

**One LDA Gibbs sweep** (:func:`sweep_cost`; N tokens, K topics, c = bytes of a count (int32)):

    L2 traffic = N (4 i)                         word id, document id, old topic read; topic written
               + N 6 c                           n_wk, n_dk, n_k: -1 at the old topic, +1 at the new
               + N 2 K c                         dense draw (mh_steps = 0): rows n_wk[w] and n_dk[d]
               | N s (3 c + 2 i + 5 i / s)       or s Metropolis-Hastings steps: per step n_wk, n_dk,
                                                 n_k at the proposal, a random other token of the
                                                 document / word and its topic, plus the five
                                                 per-token index arrays of the proposals
               + N draw_bytes                    uniforms: 0 by default, since the sampler hashes
                                                 (token, seed) on chip (a program that stores its
                                                 uniforms moves f per draw)
    flops      = N 6 K                           (n_dk + α)(n_wk + β)/(n_k + W β): 3 adds, 1 mul,
                                                 1 div per topic, and the running sum
               | N 12 s                          MH: two such ratios and a compare per step

n_k (K counts) is held on chip.  HBM: nothing when the tokens (3 i N), n_wk (W K c), n_dk (D K c)
fit in C; otherwise the token arrays stream once (4 i N, + 5 i N for MH), n_dk is read and written
once (2 D K c: a document's tokens are consecutive) and n_wk follows the cached-rows model above
(row K c; cached words once each way, every token of another word its row and its two updates).

Device figures (:data:`DEVICES`).  HBM bandwidth, L2 size and FP32 (non-tensor) rate are NVIDIA's
data-sheet figures: H100 SXM 3.35 TB/s, 50 MB L2, 67 TFLOP/s ("NVIDIA H100 Tensor Core GPU" data
sheet and the Hopper architecture whitepaper); H200 SXM 4.8 TB/s, the same GH100 die and so the same
50 MB L2 and 67 TFLOP/s ("NVIDIA H200 Tensor Core GPU" data sheet).  **L2 bandwidth is not on any
data sheet**: 7.0 TB/s is an estimate (microbenchmarks of the H100 PCIe report L2 bandwidths of a
few TB/s, e.g. Chips and Cheese, "Nvidia's H100: Funny L2, and Tons of Bandwidth", 2023; the SXM
parts have 132 SMs at up to 1.98 GHz against the PCIe card's 114 at 1.755 GHz, 1.31x as much),
unconfirmed: ``--l2-tbps`` overrides it.  The launch latency, 2 µs, is likewise an assumption: the
order of the gap between dependent kernels on one stream (the H200 profile of this project's LDA
sweep shows ~2.5 µs per kernel, ``experiments/results/gpu_2026-11-26_nvidia-h200.md``).

KOS at T = 100 on an H200 (S = 393,216 slots, P = 24,576 pieces): 362 MB through L2, nothing from
HBM, 0.24 GFLOP: 51.8 µs + 2 µs = **0.054 ms**, inside the issue's 0.05-0.06 ms; the L2 term is
87 % the per-slot Φ gathers and gradient adds (2 S T f), which no kernel over this
document-sorted layout avoids.

    python experiments/roofline.py --corpus kos --topics 100 --device h200
    python experiments/roofline.py --from-results experiments/results/gpu_2026-11-26_nvidia-h200.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

__all__ = ["Device", "DEVICES", "device_spec", "LayoutStats", "layout_stats", "stats_of_layout", "estimated_stats",
           "Cost", "pass_cost", "sweep_cost", "table", "main"]

MB = 1 << 20


@dataclass(frozen=True)
class Device:
    """Peak figures of a device (see the module docstring for their sources)."""

    name: str
    hbm_bytes_per_s: float
    l2_bytes: int
    l2_bytes_per_s: float
    fp32_flops: float
    launch_s: float


#: The devices the limits are computed for: NVIDIA data-sheet HBM bandwidth, L2 size and FP32
#: (non-tensor) rate; L2 bandwidth and launch latency are estimates (module docstring).
DEVICES = {
    "h100": Device("NVIDIA H100 SXM", 3.35e12, 50 * MB, 7.0e12, 67e12, 2e-6),
    "h200": Device("NVIDIA H200 SXM", 4.8e12, 50 * MB, 7.0e12, 67e12, 2e-6),
}

#: Sizes of the corpora the device check uses (documents, words, non-zeros, tokens), for when the
#: corpus itself is not at hand: KOS and 20 Newsgroups' training set as ``topicjax.datasets``
#: loads them, the NYTimes-sized generated corpus of ``experiments/results/gpu_2026-11-26_nvidia-h200.json``.
KNOWN_SIZES = {
    "kos": (3430, 6906, 353_160, 467_714),
    "20ng": (11292, 21196, 922_462, 1_435_718),
    "nytimes": (300_000, 102_660, 66_984_702, 99_525_475),
}


def device_spec(name: str) -> Device:
    """The :class:`Device` for ``name``: a key of :data:`DEVICES` or a JAX ``device_kind`` /
    report name that contains one ("NVIDIA H200", "NVIDIA H100 80GB HBM3", "gpu_..._nvidia-h200").
    Raises ``ValueError`` naming the device when it is not in the table."""
    key = str(name).lower()
    for k in DEVICES:
        if k in key:
            return DEVICES[k]
    raise ValueError(f"device {name!r} is not in the roofline table (known: {', '.join(DEVICES)})")


@dataclass(frozen=True)
class LayoutStats:
    """What the limits need of a corpus and its sliced layout.

    ``slots`` and ``pieces`` include the padding (``slots == pieces * width``); ``word_slots``
    (length W, summing to ``slots``) the slots that gather each word's row, padding on word 0;
    ``word_tokens`` (length W, summing to ``tokens``) each word's tokens.  Either may be ``None``
    (every word then counts as equally frequent).  ``estimated`` marks statistics computed from
    sizes alone.
    """

    n_docs: int
    n_words: int
    nnz: int
    tokens: int
    pieces: int
    slots: int
    width: int = 16
    word_slots: np.ndarray | None = field(default=None, compare=False, repr=False)
    word_tokens: np.ndarray | None = field(default=None, compare=False, repr=False)
    estimated: bool = False

    def __post_init__(self):
        for name in ("n_docs", "n_words", "nnz", "tokens", "pieces", "slots", "width"):
            v = getattr(self, name)
            if not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        if self.slots != self.pieces * self.width:
            raise ValueError(f"slots ({self.slots}) must be pieces ({self.pieces}) x width ({self.width})")
        if self.slots < self.nnz:
            raise ValueError(f"slots ({self.slots}) cannot be fewer than the non-zeros ({self.nnz})")
        if self.tokens < self.nnz:
            raise ValueError(f"tokens ({self.tokens}) cannot be fewer than the non-zeros ({self.nnz})")
        for name, total in (("word_slots", self.slots), ("word_tokens", self.tokens)):
            a = getattr(self, name)
            if a is not None and (np.shape(a) != (self.n_words,) or int(np.sum(a)) != total):
                raise ValueError(f"{name} must have n_words ({self.n_words}) entries summing to {total}, "
                                 f"got shape {np.shape(a)} and sum {int(np.sum(a))}")


def _pieces_per_chunk(n_pieces: int, width: int, chunk: int | None, accelerator: bool) -> int:
    """Pieces per stored chunk, as :func:`topicjax.core.layout.prepare` chooses them."""
    from topicjax.core import layout

    if chunk is not None:
        return -(-int(chunk) // width)
    default = layout.ACCEL_CHUNK if accelerator else layout.DEFAULT_CHUNK
    k = min(default // width, n_pieces)
    return -(-k // 64) * 64 if k > 64 else k


def layout_stats(corpus, *, chunk: int | None = None, accelerator: bool = True) -> LayoutStats:
    """:class:`LayoutStats` of ``corpus`` in the layout :func:`topicjax.core.layout.prepare`
    builds on an accelerator (``accelerator=False``: on the CPU) with ``chunk`` slots per chunk,
    counted without building it."""
    from topicjax.core import layout

    if chunk is not None and int(chunk) < 1:
        raise ValueError(f"chunk must be a positive number of slots, got {chunk}")
    width = layout.PIECE if chunk is None else min(layout.PIECE, int(chunk))
    lens = np.diff(np.asarray(corpus.doc_offsets, np.int64))
    n_pieces = int((-(-lens // width)).sum())
    k = _pieces_per_chunk(n_pieces, width, chunk, accelerator)
    pieces = max(1, -(-n_pieces // k)) * k
    word_ids = np.asarray(corpus.word_ids)
    word_slots = np.bincount(word_ids, minlength=corpus.n_words).astype(np.int64)
    word_slots[0] += pieces * width - int(corpus.nnz)  # padding slots gather word 0
    word_tokens = np.bincount(word_ids, weights=np.asarray(corpus.counts, np.float64),
                              minlength=corpus.n_words).astype(np.int64)
    return LayoutStats(int(corpus.n_docs), int(corpus.n_words), int(corpus.nnz), int(corpus.n_tokens), pieces,
                       pieces * width, width, word_slots, word_tokens)


def stats_of_layout(word, piece_doc, n_docs: int, n_words: int, nnz: int, tokens: int) -> LayoutStats:
    """:class:`LayoutStats` of a built sliced layout: its ``word`` (C, B) and ``piece_doc`` (C, K)
    arrays (numpy or JAX) and the corpus sizes; ``word_tokens`` is not known from these."""
    word = np.asarray(word)
    pieces = int(np.size(piece_doc))
    width = int(word.size) // pieces
    return LayoutStats(int(n_docs), int(n_words), int(nnz), int(tokens), pieces, pieces * width, width,
                       np.bincount(word.ravel(), minlength=n_words).astype(np.int64), None)


def estimated_stats(n_docs: int, n_words: int, nnz: int, tokens: int, *, width: int = 16,
                    chunk: int = 65536) -> LayoutStats:
    """:class:`LayoutStats` from sizes alone: each document's last piece taken as half padded
    (``(width - 1) / 2`` slots, the mean for lengths uniform modulo ``width``), pieces in chunks of
    ``chunk`` slots; no per-word counts."""
    for name, v in (("n_docs", n_docs), ("n_words", n_words), ("nnz", nnz), ("tokens", tokens)):
        if int(v) < 1:
            raise ValueError(f"{name} must be positive, got {v}")
    n_pieces = math.ceil((nnz + n_docs * (width - 1) / 2) / width)
    k = min(chunk // width, n_pieces)
    k = -(-k // 64) * 64 if k > 64 else k
    pieces = -(-n_pieces // k) * k
    return LayoutStats(int(n_docs), int(n_words), int(nnz), int(tokens), pieces, pieces * width, width,
                       estimated=True)


@dataclass(frozen=True)
class Cost:
    """Bytes and flops of one piece of work on ``device``, and its limit (seconds)."""

    what: str
    device: Device
    l2_bytes: float
    hbm_bytes: float
    flops: float
    launches: int
    resident: bool
    parts: dict = field(default_factory=dict, compare=False)

    @property
    def terms(self) -> dict:
        d = self.device
        return {"L2": self.l2_bytes / d.l2_bytes_per_s, "HBM": self.hbm_bytes / d.hbm_bytes_per_s,
                "FP32": self.flops / d.fp32_flops}

    @property
    def bound(self) -> str:
        """The term that sets the limit: ``"L2"``, ``"HBM"`` or ``"FP32"``."""
        t = self.terms
        return max(t, key=t.get)

    @property
    def limit_s(self) -> float:
        return max(self.terms.values()) + self.launches * self.device.launch_s

    def scaled(self, n: int, what: str | None = None) -> "Cost":
        """``n`` times this work, as ``n`` programs (bytes, flops and launches times ``n``)."""
        return replace(self, what=what or f"{n} x {self.what}", l2_bytes=n * self.l2_bytes,
                       hbm_bytes=n * self.hbm_bytes, flops=n * self.flops, launches=n * self.launches,
                       parts={k: n * v for k, v in self.parts.items()})

    def record(self) -> dict:
        """A JSON-ready summary (for the device check's results)."""
        return {"l2_bytes": self.l2_bytes, "hbm_bytes": self.hbm_bytes, "flops": self.flops,
                "launches": self.launches, "resident_in_l2": self.resident, "bound": self.bound,
                "limit_s": self.limit_s, "device": self.device.name}


def _cached(weights, n_rows: int, rows_fit: int, total: float) -> tuple[int, float]:
    """``(rows kept in L2, uses of them)``: the ``rows_fit`` most used rows (``weights``, or every
    row used alike when ``None``) of ``n_rows`` rows used ``total`` times in all."""
    if weights is None:
        kept = min(rows_fit, n_rows)
        return kept, total * kept / n_rows
    w = np.sort(np.asarray(weights, np.int64)[np.asarray(weights) > 0])[::-1]
    kept = min(rows_fit, w.size)
    return kept, float(w[:kept].sum())


def _check_positive(**kw):
    for name, v in kw.items():
        if not isinstance(v, (int, np.integer)) or v < (0 if name in ("launches", "draw_bytes", "mh_steps") else 1):
            raise ValueError(f"{name} must be a {'non-negative' if name in ('launches', 'draw_bytes', 'mh_steps') else 'positive'} "
                             f"integer, got {v!r}")


def pass_cost(stats: LayoutStats, n_topics: int, device: Device, *, models: int = 1, float_bytes: int = 4,
              int_bytes: int = 4, launches: int = 1) -> Cost:
    """Bytes, flops and limit of one PLSA/ARTM EM pass of ``models`` models at ``n_topics`` topics
    over the layout of ``stats`` (the formulas of the module docstring)."""
    _check_positive(n_topics=n_topics, models=models, float_bytes=float_bytes, int_bytes=int_bytes, launches=launches)
    S, P, W, D = stats.slots, stats.pieces, stats.n_words, stats.n_docs
    T, G, f, i = n_topics, models, float_bytes, int_bytes
    C = device.l2_bytes
    layout_b = S * (i + f) + P * i
    params = G * (W * T + T * D) * f  # one copy of Φ and Θ (or of their gradients)
    parts = {"layout": layout_b, "phi rows": S * G * T * f, "dL/dphi adds": S * G * T * f,
             "theta, dL/dtheta per piece": 2 * P * G * T * f, "zeroing": params, "M-step": 5 * params}
    l2 = float(sum(parts.values()))
    flops = float(S * G * (6 * T + 3) + 3 * G * (W * T + T * D))
    resident = layout_b + 3 * params <= C
    if resident:
        hbm = 0.0
    else:
        rows_fit = C // (2 * G * T * f)
        kept, hit = _cached(stats.word_slots, W, rows_fit, S)
        hbm = float(layout_b + 2 * G * T * D * f + 2 * G * T * f * kept + 3 * G * T * f * (S - hit)
                    + (3 if 2 * params <= C else 5) * params)
    return Cost(f"PLSA pass, T = {T}" + (f", {G} models" if G > 1 else ""), device, l2, hbm, flops, launches,
                resident, parts)


def sweep_cost(stats: LayoutStats, n_topics: int, device: Device, *, mh_steps: int = 0, count_bytes: int = 4,
               int_bytes: int = 4, draw_bytes: int = 0, launches: int = 1) -> Cost:
    """Bytes, flops and limit of one LDA Gibbs sweep over the ``stats.tokens`` tokens at
    ``n_topics`` topics: the dense draw (``mh_steps=0``) or ``mh_steps`` Metropolis-Hastings steps
    per token (the formulas of the module docstring)."""
    _check_positive(n_topics=n_topics, count_bytes=count_bytes, int_bytes=int_bytes, draw_bytes=draw_bytes,
                    mh_steps=mh_steps, launches=launches)
    N, W, D, K = stats.tokens, stats.n_words, stats.n_docs, n_topics
    c, i, s = count_bytes, int_bytes, mh_steps
    C = device.l2_bytes
    parts = {"token ids and topics": N * 4 * i, "count updates": N * 6 * c, "draws": N * draw_bytes}
    if s == 0:
        parts["n_wk and n_dk rows"] = N * 2 * K * c
        flops = float(N * 6 * K)
    else:
        parts["MH proposals and counts"] = N * (s * (3 * c + 2 * i) + 5 * i)
        flops = float(N * 12 * s)
    l2 = float(sum(parts.values()))
    resident = 3 * i * N + (W + D) * K * c <= C
    if resident:
        hbm = 0.0
    else:
        rows_fit = C // (K * c)
        kept, hit = _cached(stats.word_tokens, W, rows_fit, N)
        per_miss = (K * c if s == 0 else s * c) + 4 * c  # the row (or the entries MH reads) and two updates
        hbm = float(N * (4 * i + (5 * i if s else 0) + draw_bytes) + 2 * D * K * c + 2 * K * c * kept
                    + per_miss * (N - hit))
    what = f"LDA sweep, K = {K}" + (f", {s} MH steps" if s else "")
    return Cost(what, device, l2, hbm, flops, launches, resident, parts)


# ------------------------------------------------------------------------------------ output
def _fmt_s(s: float | None) -> str:
    if s is None:
        return "—"
    return f"{s * 1e3:.3f} ms" if s < 1 else f"{s:.3f} s"


def table(rows) -> list[str]:
    """Markdown rows ``| what | bytes (L2 / HBM) | flops | limit | measured | ratio |`` for
    ``rows`` of ``(label, Cost, measured seconds or None)``."""
    out = ["| what | bytes (L2 / HBM) | flops | limit | measured | ratio |", "|---|---|---|---|---|---|"]
    for label, cost, measured in rows:
        ratio = f"{measured / cost.limit_s:.1f}x" if measured is not None else "—"
        out.append(f"| {label} | {cost.l2_bytes / 1e6:,.1f} MB / {cost.hbm_bytes / 1e6:,.1f} MB | "
                   f"{cost.flops / 1e9:,.3g} G | {_fmt_s(cost.limit_s)} ({cost.bound}) | {_fmt_s(measured)} | {ratio} |")
    return out


def corpus_stats(name: str) -> LayoutStats:
    """Statistics of a corpus by name (``kos``, ``20ng``, ``nytimes``) or UCI path: exact from the
    corpus when it loads, else :func:`estimated_stats` from :data:`KNOWN_SIZES`."""
    import topicjax as tj

    key = name.lower()
    try:
        if key == "kos":
            return layout_stats(tj.datasets.load_kos())
        if key in ("20ng", "20newsgroups"):
            return layout_stats(tj.datasets.load_20newsgroups("train"))
        if key not in KNOWN_SIZES:
            return layout_stats(tj.Corpus.from_uci(name))
    except FileNotFoundError:
        if key not in KNOWN_SIZES and key != "20newsgroups":
            raise
    sizes = KNOWN_SIZES["20ng" if key == "20newsgroups" else key]
    return estimated_stats(*sizes)


def from_results(path: Path, device: Device) -> list[str]:
    """The device check's results JSON ``path`` with the limit of every timing beside it."""
    r = json.loads(Path(path).read_text())
    t = r.get("timings", {})
    stats: dict = {}

    def st(name):
        if name not in stats:
            stats[name] = corpus_stats(name)
        return stats[name]

    rows = []
    for p in t.get("passes", []):
        c = pass_cost(st(p["corpus"]), p["T"], device)
        rows.append((f"PLSA pass {p['corpus']}, T = {p['T']} (per call)", c, p["ms"] / 1e3))
        if "loop_ms" in p:
            rows.append((f"PLSA pass {p['corpus']}, T = {p['T']} (in a compiled loop)", c, p["loop_ms"] / 1e3))
    n = t.get("nytimes", {})
    if "pass_s" in n:
        s = estimated_stats(n["docs"], n["words"], n["nnz"], n["tokens"])
        rows.append((f"PLSA pass NYTimes-sized, T = {n['T']} (estimated layout)", pass_cost(s, n["T"], device),
                     n["pass_s"]))
    g = t.get("grid")
    if g:
        one = pass_cost(st(g["corpus"]), g["T"], device)
        many = pass_cost(st(g["corpus"]), g["T"], device, models=g["models"])
        rows.append((f"{g['models']} sequential fits x {g['iterations']} iterations", one.scaled(g["models"] * g["iterations"]),
                     g["sequential_s"]))
        rows.append((f"fit_many, {g['models']} models x {g['iterations']} iterations", many.scaled(g["iterations"]),
                     g["grid_s"]))
    for x in t.get("lda", []):
        K = x.get("K", 100)
        rows.append((f"LDA sweep KOS, K = {K}, {x['sampler']}", sweep_cost(st("kos"), K, device,
                                                                            mh_steps=x.get("mh_steps", 0)),
                     x["s_per_sweep"]))
    p = t.get("ptm")
    if p:
        rows.append((f"PTM GEM iteration 20NG, M = {p['M']} (lower bound: its E-step)",
                     pass_cost(st(p.get("corpus", "20ng")), p["M"], device), p["gem_iteration_s"]))
    u = t.get("tuner")
    if u:
        rows.append((f"tuner step, {u['iterations']} EM iterations (lower bound: the forward passes)",
                     pass_cost(st(u.get("corpus", "kos")), u["T"], device).scaled(u["iterations"]), u["step_s"]))
    for a in t.get("ab", []):
        if a.get("loop_ms") is not None:
            rows.append((f"A/B {a['label']}: KOS T = {a['T']} (in a compiled loop)", pass_cost(st("kos"), a["T"], device),
                         a["loop_ms"] / 1e3))
    notes = [f"{k}: {'estimated from sizes' if v.estimated else 'exact'} layout, {v.slots:,} slots, {v.pieces:,} pieces"
             for k, v in stats.items()]
    return [f"Limits on {device.name} for `{path}`", ""] + notes + [""] + table(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", default="kos", help="kos, 20ng, nytimes (sizes only) or a UCI docword path")
    ap.add_argument("--topics", type=int, default=100, help="T of the pass and K of the LDA sweep")
    ap.add_argument("--models", type=int, default=1, help="models sharing the layout (ARTM.fit_many)")
    ap.add_argument("--mh-steps", type=int, default=0, help="Metropolis-Hastings steps per token of the sweep")
    ap.add_argument("--launches", type=int, default=1, help="kernel launches of the program")
    ap.add_argument("--device", default=None, help=f"one of {', '.join(DEVICES)} (default h100, or the one named "
                                                   "by the --from-results file)")
    ap.add_argument("--l2-tbps", type=float, default=None, help="override the L2 bandwidth estimate (TB/s)")
    ap.add_argument("--measured-ms", type=float, default=None, help="a measured pass time to compare")
    ap.add_argument("--from-results", default=None, help="a device check results JSON: limits beside its timings")
    args = ap.parse_args(argv)
    if args.device is not None:
        device = device_spec(args.device)
    elif args.from_results:
        try:
            device = device_spec(Path(args.from_results).name)
        except ValueError:
            raise SystemExit(f"--device: the file name {args.from_results!r} names no known device; give --device")
    else:
        device = DEVICES["h100"]
    if args.l2_tbps is not None:
        if not args.l2_tbps > 0:
            raise SystemExit(f"--l2-tbps must be positive, got {args.l2_tbps}")
        device = replace(device, l2_bytes_per_s=args.l2_tbps * 1e12)
    if args.from_results:
        path = Path(args.from_results)
        if not path.is_file():
            raise SystemExit(f"--from-results: no file {path}")
        print("\n".join(from_results(path, device)))
        return 0
    s = corpus_stats(args.corpus)
    print(f"{args.corpus}: {s.n_docs:,} documents, {s.n_words:,} words, {s.nnz:,} non-zeros, {s.tokens:,} tokens; "
          f"{'estimated' if s.estimated else 'exact'} layout: {s.slots:,} slots in {s.pieces:,} pieces; {device.name}")
    measured = None if args.measured_ms is None else args.measured_ms / 1e3
    rows = [(f"PLSA pass {args.corpus}", pass_cost(s, args.topics, device, models=args.models, launches=args.launches),
             measured),
            (f"LDA sweep {args.corpus}", sweep_cost(s, args.topics, device, mh_steps=args.mh_steps,
                                                     launches=args.launches), None)]
    print("\n".join(table(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
