"""A plain fused numba PLSA pass: the compiled reference the benchmarks time our step against
(never imported by the package).

One pass over the non-zeros of each document ``d`` (topic row ``θ_d``; word ``w``, count ``n_dw``):

    p = Σ_t φ_wt θ_td,   r = n_dw / p,   L += n_dw log p,
    n_td += r φ_wt θ_td  (the θ update, ARTM eq. 8),   n_wt += r φ_wt θ_td  (eq. 7)

followed, for the whole EM pass (:meth:`NumbaEStep.em_pass`), by the M-step: ``θ_d ← n_td / Σ_t``
(written into Θ as soon as the document is done: it needs nothing from the other documents) and
``Φ ← n_wt / Σ_w n_wt`` (after all documents; the column sums are those of the n_td).  Everything
is float32 with ``fastmath`` (the loops over topics vectorise); ``L`` is summed in float64.
Documents are cut into one contiguous block per thread, of about equal work (non-zeros plus a
per-document share), run with ``numba.prange``; each thread adds its ``n_wt`` into its own (W, T)
slab, and one parallel pass over the words sums the slabs, multiplies by Φ and the column
normalisers, writes Φ in place and zeroes the slabs for the next pass (so no allocation, no
zero-filling pass and no Python between the E- and the M-step).

The two compiled functions are cached on disk (numba's ``cache=True``: in ``__pycache__`` beside
this file, or numba's user-wide folder, rebuilt when this file changes): each argument signature
compiles once (about 4 s), not once in every process that times or tests the reference.

(The earlier version of this file took about twice as long per pass: its scalars ``p`` and ``r``
were float64 literals, so the loops over topics ran in float64 with conversions, at half the
vector width; and the pass was six calls from Python with a fresh zeroed (W, T) array, a pass
over the slabs, two passes for Φ's normalisation and one for Θ's.)

Usage::

    from numba_reference import NumbaEStep
    k = NumbaEStep(doc_offsets, word_ids, counts, n_words, n_threads=2)
    loglik, g_phi, g_theta = k(phi, theta)          # E-step alone; theta (T, D), g_theta (D, T)
    loglik, phi, theta_t = k.em_pass(phi, theta_t)  # one EM pass, in place on float32 C arrays

Timed alone in its own process (median over rounds after warm-up passes; the corpus is the same
90 % training split that ``bench_em.py`` and ``bench_threads.py`` time)::

    python experiments/numba_reference.py --time kos --topics 100 --threads 2
"""

from __future__ import annotations

import argparse
import os
os.environ.setdefault("TOPICJAX_CACHE", "off")  # compilation is timed here: never loaded from topicjax's cache
import statistics
import sys
import time
from pathlib import Path

import numba
import numpy as np

_TINY = np.float32(1e-30)  # floor of p = φ_w · θ_d (a word no topic of the document explains)
_ONE = np.float32(1.0)


@numba.njit(fastmath=True, inline="always")
def _document(phi, th, offsets, words, counts, d, slab, acc, pbuf):
    """The non-zeros of document ``d``: ``acc[t] = Σ_w n_dw φ_wt / p_dw`` and
    ``slab[w, t] += n_dw θ_dt / p_dw``; returns ``Σ_w n_dw log p_dw`` (float64).  The p's wait in
    ``pbuf`` and their logs are taken after the loop (a call inside it would stall it)."""
    T = th.shape[0]
    for t in range(T):
        acc[t] = 0.0
    lo = offsets[d]
    for i in range(lo, offsets[d + 1]):
        w = words[i]
        p = np.float32(0.0)
        for t in range(T):
            p += phi[w, t] * th[t]
        if p < _TINY:
            p = _TINY
        pbuf[i - lo] = p
        r = counts[i] / p
        for t in range(T):
            acc[t] += r * phi[w, t]
            slab[w, t] += r * th[t]
    ll = 0.0
    for i in range(lo, offsets[d + 1]):
        ll += counts[i] * np.log(pbuf[i - lo])
    return ll


@numba.njit(parallel=True, fastmath=True, cache=True)
def _em_pass(phi, theta_t, offsets, words, counts, bounds, max_len, slabs, col_parts, ll_parts):
    """One PLSA EM pass in place on ``phi`` (W, T) and ``theta_t`` (D, T); ``slabs`` (B, W, T)
    must be zero on entry and are zero again on return; ``col_parts`` (B, T) is scratch."""
    W, T = phi.shape
    nb = bounds.size - 1
    # E-step and Θ's M-step, one block of documents per thread.  Σ_w n_wt = Σ_d n_td (both are
    # Σ_dw n_dw φ_wt θ_td / p_dw), so Φ's column sums come from the n_td of the θ updates.
    for b in numba.prange(nb):
        slab = slabs[b]
        cs = col_parts[b]
        for t in range(T):
            cs[t] = 0.0
        acc = np.empty(T, np.float32)
        pbuf = np.empty(max_len, np.float32)
        ll = 0.0
        for d in range(bounds[b], bounds[b + 1]):
            th = theta_t[d]
            ll += _document(phi, th, offsets, words, counts, d, slab, acc, pbuf)
            s = np.float32(0.0)
            for t in range(T):
                v = th[t] * acc[t]  # n_td
                acc[t] = v
                cs[t] += v
                s += v
            inv = _ONE / s if s > 0 else np.float32(0.0)
            for t in range(T):
                th[t] = acc[t] * inv
        ll_parts[b] = ll
    inv_col = np.empty(T, np.float32)
    for t in range(T):
        total = 0.0
        for b in range(nb):
            total += col_parts[b, t]
        inv_col[t] = 1.0 / total if total > 0 else 0.0
    # Φ's M-step in one pass over the words: φ_wt ← φ_wt Σ_b slab_b[w, t] / Σ_w n_wt; slabs zeroed.
    step = (W + nb - 1) // nb
    for b in numba.prange(nb):
        for w in range(b * step, min(W, (b + 1) * step)):
            for k in range(1, nb):
                for t in range(T):
                    slabs[0, w, t] += slabs[k, w, t]
                    slabs[k, w, t] = 0.0
            for t in range(T):
                phi[w, t] *= slabs[0, w, t] * inv_col[t]
                slabs[0, w, t] = 0.0


@numba.njit(parallel=True, fastmath=True, cache=True)
def _estep(phi, theta, offsets, words, counts, bounds, max_len, slabs, g_phi, g_theta, ll_parts):
    """The E-step alone: ``g_theta[d] = Σ_w n_dw φ_w / p_dw`` (D, T), ``g_phi = Σ_b slab_b``
    (W, T); ``theta`` is (T, D) in any memory order (the columns of 16 documents at a time are
    copied into rows)."""
    W, T = phi.shape
    nb = bounds.size - 1
    for b in numba.prange(nb):
        slab = slabs[b]
        rows = np.empty((16, T), np.float32)
        pbuf = np.empty(max_len, np.float32)
        ll = 0.0
        for d0 in range(bounds[b], bounds[b + 1], 16):
            m = min(16, bounds[b + 1] - d0)
            for t in range(T):
                for j in range(m):
                    rows[j, t] = theta[t, d0 + j]
            for j in range(m):
                ll += _document(phi, rows[j], offsets, words, counts, d0 + j, slab, g_theta[d0 + j], pbuf)
        ll_parts[b] = ll
    step = (W + nb - 1) // nb
    for b in numba.prange(nb):
        for w in range(b * step, min(W, (b + 1) * step)):
            for t in range(T):
                g_phi[w, t] = slabs[0, w, t]
                slabs[0, w, t] = 0.0
            for k in range(1, nb):
                for t in range(T):
                    g_phi[w, t] += slabs[k, w, t]
                    slabs[k, w, t] = 0.0


def balanced_bounds(doc_offsets, n_blocks, doc_weight=1.0):
    """Document boundaries ``(n_blocks + 1,)`` of contiguous blocks of about equal work, a
    document's work being its non-zeros plus ``doc_weight`` (its θ update and loop)."""
    off = np.asarray(doc_offsets, np.int64)
    D = off.size - 1
    work = off[1:].astype(np.float64) + doc_weight * np.arange(1, D + 1)  # cumulative, after doc d
    targets = np.linspace(0.0, work[-1] if D else 0.0, n_blocks + 1)[1:-1]
    inner = np.searchsorted(work, targets, side="left") + 1
    return np.concatenate([[0], np.minimum(inner, D), [D]]).astype(np.int64)


class NumbaEStep:
    """Fused PLSA E-step / EM pass over a document-sorted corpus (CSR layout) on ``n_threads``
    numba threads (at most ``numba.config.NUMBA_NUM_THREADS``)."""

    def __init__(self, doc_offsets, word_ids, counts, n_words, n_threads=None, dtype=np.float32):
        if np.dtype(dtype) != np.float32:
            raise ValueError(f"the reference kernel is float32 only, got dtype={np.dtype(dtype)}")
        # writable (copies of read-only arrays, a Corpus's say): numba types a read-only array
        # apart from a writable one and would compile every function once more for it
        self.offsets = np.require(doc_offsets, np.int64, ["C", "W"])
        self.words = np.require(word_ids, np.int32, ["C", "W"])
        self.counts = np.require(counts, np.float32, ["C", "W"])
        self.n_words = int(n_words)
        self.n_docs = self.offsets.size - 1
        if self.words.size and not 0 <= self.words.min() <= self.words.max() < self.n_words:
            raise ValueError(f"word ids must lie in [0, {self.n_words})")  # the kernels do not check
        if self.offsets[0] != 0 or self.offsets[-1] != self.words.size or np.any(np.diff(self.offsets) < 0):
            raise ValueError("doc_offsets must rise from 0 to the number of non-zeros")
        self.n_threads = int(n_threads or numba.config.NUMBA_NUM_THREADS)
        if not 1 <= self.n_threads <= numba.config.NUMBA_NUM_THREADS:
            raise ValueError(f"n_threads={self.n_threads}: numba has {numba.config.NUMBA_NUM_THREADS} threads "
                             "(set NUMBA_NUM_THREADS before starting Python for more)")
        self.dtype = np.float32
        self.bounds = balanced_bounds(self.offsets, self.n_threads)
        self.max_len = int(np.diff(self.offsets).max(initial=0))
        self._ll = np.zeros(self.n_threads, np.float64)
        self._slabs = self._cols = None

    def _buffers(self, T):
        if self._slabs is None or self._slabs.shape[2] != T:
            self._slabs = np.zeros((self.n_threads, self.n_words, T), np.float32)
            self._cols = np.zeros((self.n_threads, T), np.float64)
        return self._slabs, self._cols

    def _check(self, phi, rows, name):
        if phi.ndim != 2 or phi.shape[0] != self.n_words:
            raise ValueError(f"phi must be ({self.n_words}, T), got {phi.shape}")
        if rows.shape != (self.n_docs, phi.shape[1]):
            raise ValueError(f"{name} must be ({self.n_docs}, {phi.shape[1]}), got {rows.shape}")

    def __call__(self, phi, theta):
        """The E-step: ``(loglik, g_phi (W, T), g_theta (D, T))`` for Φ (W, T) and Θ (T, D),
        with ``n_wt = φ_wt g_phi[w, t]`` and ``n_td = θ_td g_theta[d, t]`` (ARTM eq. 7-8)."""
        numba.set_num_threads(self.n_threads)
        phi = np.ascontiguousarray(phi, np.float32)
        theta = np.asarray(theta, np.float32)
        self._check(phi, theta.T, "theta.T")
        W, T = phi.shape
        slabs, _ = self._buffers(T)
        g_phi = np.empty((W, T), np.float32)
        g_theta = np.empty((self.n_docs, T), np.float32)
        _estep(phi, theta, self.offsets, self.words, self.counts, self.bounds, self.max_len, slabs, g_phi, g_theta,
               self._ll)
        return float(self._ll.sum()), g_phi, g_theta

    def em_pass(self, phi, theta_t):
        """One PLSA EM pass (ARTM eq. 6-8) on Φ (W, T) and Θᵀ (D, T): ``(loglik, Φ', Θᵀ')``,
        the log-likelihood being that of the Φ, Θ given.  Float32 C-contiguous writable arguments
        are updated in place and returned; others are copied first (use the returned arrays)."""
        numba.set_num_threads(self.n_threads)
        phi, theta_t = _own(phi), _own(theta_t)
        self._check(phi, theta_t, "theta_t")
        slabs, cols = self._buffers(phi.shape[1])
        _em_pass(phi, theta_t, self.offsets, self.words, self.counts, self.bounds, self.max_len, slabs, cols,
                 self._ll)
        return float(self._ll.sum()), phi, theta_t


def _own(a):
    """``a`` itself when it is a writable float32 C-contiguous ndarray, else such a copy."""
    if isinstance(a, np.ndarray) and a.dtype == np.float32 and a.flags.c_contiguous and a.flags.writeable:
        return a
    return np.array(a, np.float32, order="C", copy=True)


# ------------------------------------------------------------------------------- timing alone
def _affinity():
    try:
        return os.sched_getaffinity(0)
    except (AttributeError, OSError):
        return None


def _pin(k):
    """Restrict this process (and the numba threads it starts later) to its first ``k`` usable
    cores; returns them (``None`` where affinity cannot be set)."""
    try:
        cores = sorted(os.sched_getaffinity(0))[:k]
        os.sched_setaffinity(0, cores)
        return cores
    except (AttributeError, OSError):
        return None


def time_rounds(run, rounds, per_round, warmup):
    """``run()`` timed: ``warmup`` untimed calls, then ``rounds`` rounds of ``per_round`` calls back
    to back; returns the median and minimum wall milliseconds per call over the rounds and the
    median CPU milliseconds per call of the whole process (all threads; under load, wall time
    counts the time the threads wait for a core and CPU time does not)."""
    for _ in range(warmup):
        run()
    wall, cpu = [], []
    for _ in range(rounds):
        c0, t0 = time.process_time(), time.perf_counter()
        for _ in range(per_round):
            run()
        wall.append((time.perf_counter() - t0) / per_round * 1e3)
        cpu.append((time.process_time() - c0) / per_round * 1e3)
    return statistics.median(wall), min(wall), statistics.median(cpu)


def time_passes(k, phi, theta_t, rounds, per_round, warmup):
    """:func:`time_rounds` of ``k.em_pass`` (each pass starting from the previous one's Φ, Θ)."""
    state = [phi, theta_t]

    def run():
        _, state[0], state[1] = k.em_pass(state[0], state[1])

    return time_rounds(run, rounds, per_round, warmup)


def time_estep(k, phi, theta, rounds, per_round, warmup):
    """:func:`time_rounds` of the E-step alone, ``k(phi, theta)`` with Θ of shape (T, D)."""
    return time_rounds(lambda: k(phi, theta), rounds, per_round, warmup)


def main(argv=None):
    ap = argparse.ArgumentParser(description="Time the plain fused numba PLSA pass alone in this process "
                                             "(without --time: a self-check against numpy).")
    ap.add_argument("--time", metavar="CORPUS", default=None,
                    help="kos, 20ng, bars or a saved corpus path (the 90%% training split of bench_em.py)")
    ap.add_argument("--topics", type=int, default=100)
    ap.add_argument("--threads", type=int, default=numba.config.NUMBA_NUM_THREADS)
    ap.add_argument("--rounds", type=int, default=15, help="timed rounds (the median over them is reported)")
    ap.add_argument("--per-round", type=int, default=5, help="back-to-back passes per round")
    ap.add_argument("--warmup", type=int, default=5, help="untimed passes after compiling")
    ap.add_argument("--estep", action="store_true", help="also time the E-step alone")
    ap.add_argument("--full", action="store_true", help="the whole corpus instead of the training split")
    ap.add_argument("--no-pin", action="store_true", help="do not restrict the process to --threads cores")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.time is None:
        return self_check()

    if not 1 <= args.threads <= numba.config.NUMBA_NUM_THREADS:
        ap.error(f"--threads {args.threads}: numba has {numba.config.NUMBA_NUM_THREADS} threads here "
                 "(NUMBA_NUM_THREADS=N python ... for more)")
    here = Path(__file__).resolve().parent
    if str(here) not in sys.path:
        sys.path.insert(0, str(here))
    import bench_em

    corpus = bench_em.load_corpus(args.time, quick=False)
    train = corpus if args.full else bench_em.split(corpus, args.seed)[0]
    W, D, T = train.n_words, train.n_docs, args.topics
    rng = np.random.default_rng(args.seed)
    phi = rng.random((W, T), dtype=np.float32) + np.float32(0.01)
    phi /= phi.sum(0, keepdims=True)
    theta_t = rng.random((D, T), dtype=np.float32) + np.float32(0.01)
    theta_t /= theta_t.sum(1, keepdims=True)

    before = _affinity()
    cores = None if args.no_pin else _pin(args.threads)  # before numba starts its threads
    try:
        k = NumbaEStep(train.doc_offsets, train.word_ids, train.counts, W, args.threads)
        t0 = time.perf_counter()
        k.em_pass(phi.copy(), theta_t.copy())
        if args.estep:
            k(phi, theta_t.T)
        compile_s = time.perf_counter() - t0
        res = {"corpus": args.time, "W": W, "D": D, "nnz": int(k.offsets[-1]), "T": T, "threads": args.threads,
               "cores": cores, "layer": numba.threading_layer(), "compile_s": compile_s,
               "load_start": os.getloadavg()}
        res["pass_ms"] = time_passes(k, phi, theta_t, args.rounds, args.per_round, args.warmup)
        if args.estep:
            theta = np.ascontiguousarray(theta_t.T)
            res["estep_ms"] = time_estep(k, phi, theta, args.rounds, args.per_round, args.warmup)
        res["load_end"] = os.getloadavg()
    finally:
        if cores is not None and before is not None:
            os.sched_setaffinity(0, before)
    print(f"numba reference: {args.time}{'' if args.full else ' (training split)'} (W={W}, D={D}, "
          f"nnz={res['nnz']}), T={T}, {args.threads} thread(s) on cores {cores if cores is not None else 'any'}, "
          f"threading layer {res['layer']}, compile {compile_s:.1f} s")
    for key, what in (("pass_ms", "EM pass"), ("estep_ms", "E-step alone")):
        if key in res:
            med, lo, cpu = res[key]
            print(f"  {what}: median {med:.2f} ms, min {lo:.2f} ms, CPU {cpu:.2f} ms "
                  f"({args.rounds} rounds x {args.per_round} after {args.warmup} warm-up)")
    print("  load average (1, 5, 15 min): start " + " ".join(f"{x:.2f}" for x in res["load_start"])
          + ", end " + " ".join(f"{x:.2f}" for x in res["load_end"]))
    return res


def self_check():
    """The E-step and one EM pass against a dense float64 numpy computation."""
    rng = np.random.default_rng(0)
    D, W, T = 30, 40, 7
    dense = rng.poisson(0.3, (D, W))
    dense[:, 0] += 1
    d, w = np.nonzero(dense)
    off = np.concatenate([[0], np.cumsum(np.bincount(d, minlength=D))])
    phi = rng.random((W, T)); phi /= phi.sum(0)
    theta = rng.random((T, D)); theta /= theta.sum(0)
    k = NumbaEStep(off, w, dense[d, w], W, min(2, numba.config.NUMBA_NUM_THREADS))
    ll, gp, gt = k(phi, theta)
    P = phi @ theta
    R = dense.T / P
    assert np.isclose(ll, np.sum(dense.T * np.log(P)), rtol=1e-5)
    assert np.allclose(gp, R @ theta.T, rtol=1e-4) and np.allclose(gt, (phi.T @ R).T, rtol=1e-4)
    _, phi2, theta2_t = k.em_pass(phi, theta.T)
    nwt, ntd = phi * (R @ theta.T), theta * (phi.T @ R)
    assert np.allclose(phi2, nwt / nwt.sum(0), rtol=1e-4, atol=1e-7)
    assert np.allclose(theta2_t.T, ntd / ntd.sum(0), rtol=1e-4, atol=1e-7)
    print("numba reference agrees with numpy")


if __name__ == "__main__":
    main()
