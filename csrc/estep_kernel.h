// The fused E-step of PLSA/ARTM on the CPU: one pass over the non-zeros of every document.
//
// For a document d with topic vector θ_d and each of its words w (count n = n_dw):
//
//     p = max(Σ_t φ_wt θ_td, eps),   L += n log p,   g_θ[d] += (n/p) φ_w,   g_φ[w] += (n/p) θ_d
//
// which is L of ARTM eq. 4 and its gradients (the counts n_wt = φ_wt g_φ[w,t] and
// n_td = θ_td g_θ[d,t] of eq. 7-8).  The data are the sliced layout of topicjax.core.layout
// (DocWordCounts): P pieces of L slots, `piece_doc[i]` the document of piece i, padding slots
// with count 0.  φ is (W, T) and θ (T, D), row-major, as XLA hands them over; G models on one
// corpus are G such problems sharing the word ids (and the counts, or a column each).
//
// Threads, for one model: contiguous ranges of pieces cut at document boundaries (so a
// document's θ gradient has one owner) holding equal numbers of non-zeros; every thread but the
// first accumulates g_φ in a private slab (two threads' documents share words), and the slabs
// are summed into the output at the end.  For G models: whole models per thread where there
// are at least as many models as threads (no slabs), the rest one after another as above.  The
// order of every sum depends only on the layout and the number of threads: a given thread count
// gives the same bits run after run.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "split.h"
#include "thread_pool.h"

namespace topicjax {

// One model's E-step.
template <typename F>
struct EStepProblem {
  int64_t W = 0, D = 0, T = 0;  // words, documents, topics
  int64_t P = 0, L = 0;         // pieces, slots per piece
  int64_t count_stride = 1;     // elements between the counts of consecutive slots
  const F* phi = nullptr;       // (W, T)
  const F* theta = nullptr;     // (T, D)
  const int32_t* word = nullptr;       // (P L)
  const F* count = nullptr;            // slot s at count[s * count_stride]
  const int32_t* piece_doc = nullptr;  // (P)
  F* g_phi = nullptr;                  // (W, T), or nullptr when not wanted
  F* g_theta = nullptr;                // (T, D), or nullptr when not wanted
  double ll = 0.0;                     // output: L
  F eps = F(1e-30);
};

// A 64-byte aligned buffer that only grows, reused from call to call.
class Scratch {
 public:
  Scratch() = default;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  Scratch(Scratch&& o) noexcept : data_(o.data_), size_(o.size_) {
    o.data_ = nullptr;
    o.size_ = 0;
  }
  ~Scratch() { std::free(data_); }
  void* get(size_t bytes) {
    if (bytes > size_) {
      std::free(data_);
      size_ = (bytes + 63) / 64 * 64;
      data_ = std::aligned_alloc(64, size_);
      if (data_ == nullptr) size_ = 0;
    }
    return data_;
  }
  void release() {
    std::free(data_);
    data_ = nullptr;
    size_ = 0;
  }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

// What went wrong in a call (the first bad id seen), reported to Python as an error.
struct BadInput {
  int kind = 0;  // 0: none, 1: word id out of range, 2: document id out of range, 3: no memory
  int64_t index = 0, value = 0;
};

namespace detail {

// The rows of Φ and g_φ of a slot some way ahead are prefetched: rows are scattered over W x T
// arrays larger than L2, so their loads would otherwise stall (about 15-30% of the time on KOS
// and 20 Newsgroups at T = 100, measured with interleaved runs).  The distance is about this
// many bytes of rows (8 slots of 100 float32 topics), at least one slot and at most 16.
constexpr int64_t kPrefetchBytes = 3200;

// Four dot products with one vector θ: the loads of θ are shared and four independent sums
// keep the floating-point units busy.
template <typename F>
inline void Dot4(const F* __restrict r0, const F* __restrict r1, const F* __restrict r2, const F* __restrict r3,
                 const F* __restrict th, int64_t T, F* out) {
  F s0 = 0, s1 = 0, s2 = 0, s3 = 0;
#pragma omp simd reduction(+ : s0, s1, s2, s3)
  for (int64_t t = 0; t < T; ++t) {
    const F x = th[t];
    s0 += r0[t] * x;
    s1 += r1[t] * x;
    s2 += r2[t] * x;
    s3 += r3[t] * x;
  }
  out[0] = s0;
  out[1] = s1;
  out[2] = s2;
  out[3] = s3;
}

// gt += r row (the document's θ gradient) and gp += r th (the word's Φ gradient), one pass.
template <typename F, bool kPhi, bool kTheta>
inline void Update(F r, const F* __restrict row, const F* __restrict th, F* __restrict gt, F* __restrict gp,
                   int64_t T) {
#pragma omp simd
  for (int64_t t = 0; t < T; ++t) {
    if constexpr (kTheta) gt[t] += r * row[t];
    if constexpr (kPhi) gp[t] += r * th[t];
  }
}

// Update for four words at once (their g_φ rows must be distinct): gt is read and written once.
template <typename F, bool kPhi, bool kTheta>
inline void Update4(const F* r, const F* const* rows, const F* __restrict th, F* __restrict gt, F* const* gps,
                    int64_t T) {
  const F a0 = r[0], a1 = r[1], a2 = r[2], a3 = r[3];
  const F* __restrict r0 = rows[0];
  const F* __restrict r1 = rows[1];
  const F* __restrict r2 = rows[2];
  const F* __restrict r3 = rows[3];
  F* __restrict g0 = gps[0];
  F* __restrict g1 = gps[1];
  F* __restrict g2 = gps[2];
  F* __restrict g3 = gps[3];
#pragma omp simd
  for (int64_t t = 0; t < T; ++t) {
    if constexpr (kTheta) gt[t] += a0 * r0[t] + a1 * r1[t] + a2 * r2[t] + a3 * r3[t];
    if constexpr (kPhi) {
      const F x = th[t];
      g0[t] += a0 * x;
      g1[t] += a1 * x;
      g2[t] += a2 * x;
      g3[t] += a3 * x;
    }
  }
}

// Per-thread scratch of a sweep: θ_d gathered, its gradient, a zero row and three dummy g_φ
// rows (for the dummy slots that fill a document's last group of four).
template <typename F>
struct SweepBuffers {
  F* th;
  F* gt;
  F* zero;
  F* dummy;
  static size_t elements(int64_t T) { return 6 * T + 64; }
  SweepBuffers(F* base, int64_t T) : th(base), gt(base + T), zero(base + 2 * T), dummy(base + 3 * T) {
    std::fill(zero, zero + T, F(0));
  }
};

// One group of up to four slots with non-zero counts, all of document θ_d = `th`: the
// likelihood terms and both gradient updates.  m < 4 slots are completed with dummies (count 0,
// a zero row of Φ, a scratch row of g_φ).  Returns false on a bad word id.
template <typename F, bool kPhi, bool kTheta>
inline bool Group(const EStepProblem<F>& pb, const int64_t* slots, int m, const F* th, F* gt, F* g_phi,
                  const SweepBuffers<F>& buf, double* ll, BadInput* bad) {
  const int64_t T = pb.T;
  int64_t w[4];
  const F* rows[4];
  F* gps[4];
  F n[4], p[4], r[4];
  for (int k = 0; k < 4; ++k) {
    if (k < m) {
      w[k] = pb.word[slots[k]];
      if (w[k] < 0 || w[k] >= pb.W) {
        *bad = BadInput{1, slots[k], w[k]};
        return false;
      }
      rows[k] = pb.phi + w[k] * T;
      gps[k] = kPhi ? g_phi + w[k] * T : nullptr;
      n[k] = pb.count[slots[k] * pb.count_stride];
    } else {
      w[k] = -1 - k;  // distinct from real words and from each other
      rows[k] = buf.zero;
      gps[k] = buf.dummy + (k - 1) * T;
      n[k] = F(0);
    }
  }
  Dot4(rows[0], rows[1], rows[2], rows[3], th, T, p);
  for (int k = 0; k < 4; ++k) {
    const F q = p[k] < pb.eps ? pb.eps : p[k];  // max(p, eps) that keeps a NaN, as jnp.maximum
    // log in the working precision (as XLA's kernel; float's is the faster), summed in double
    if (n[k] != F(0)) *ll += double(n[k]) * double(std::log(q));
    r[k] = n[k] / q;
  }
  // A word repeated within the group (hand-built data) would alias two g_φ rows in Update4.
  if (w[0] != w[1] && w[0] != w[2] && w[0] != w[3] && w[1] != w[2] && w[1] != w[3] && w[2] != w[3]) {
    Update4<F, kPhi, kTheta>(r, rows, th, gt, gps, T);
  } else {
    for (int k = 0; k < 4; ++k) Update<F, kPhi, kTheta>(r[k], rows[k], th, gt, gps[k], T);
  }
  return true;
}

// One thread's share of one model: pieces [p_lo, p_hi) whose documents lie in [d_lo, d_hi).
// `g_phi` is the output or this thread's slab (zeroed by the caller); the θ gradient of
// documents [d_lo, d_hi) is zeroed here and then accumulated.  Returns L of these pieces.
template <typename F, bool kPhi, bool kTheta>
double Sweep(const EStepProblem<F>& pb, int64_t p_lo, int64_t p_hi, int64_t d_lo, int64_t d_hi, F* g_phi,
             const SweepBuffers<F>& buf, BadInput* bad) {
  const int64_t T = pb.T, L = pb.L, D = pb.D, cs = pb.count_stride;
  double ll = 0.0;
  if (kTheta) {
    for (int64_t t = 0; t < T; ++t) std::fill(pb.g_theta + t * D + d_lo, pb.g_theta + t * D + d_hi, F(0));
  }
  const int64_t s_end = p_hi * L;
  const int64_t row_bytes = int64_t(sizeof(F)) * T;
  const int64_t ahead = std::min<int64_t>(16, std::max<int64_t>(1, kPrefetchBytes / row_bytes));
  F* gt = buf.gt;
  int64_t i = p_lo;
  while (i < p_hi) {
    const int64_t d = pb.piece_doc[i];
    int64_t j = i + 1;
    while (j < p_hi && pb.piece_doc[j] == d) ++j;
    if (d < d_lo || d >= d_hi) {
      *bad = BadInput{2, i, d};
      return ll;
    }
    for (int64_t t = 0; t < T; ++t) buf.th[t] = pb.theta[t * D + d];  // θ_d: a strided column of (T, D)
    if (kTheta) std::fill(gt, gt + T, F(0));
    int64_t group[4];
    int m = 0;
    for (int64_t s = i * L; s < j * L; ++s) {
      if (pb.count[s * cs] == F(0)) continue;  // padding and zero counts contribute nothing
      if (s + ahead < s_end) {
        const int64_t wn = pb.word[s + ahead];
        if (wn >= 0 && wn < pb.W) {
          const char* a = reinterpret_cast<const char*>(pb.phi + wn * T);
          const char* b = reinterpret_cast<const char*>(g_phi + wn * T);
          for (int64_t o = 0; o < row_bytes; o += 64) {
            __builtin_prefetch(a + o, 0, 3);
            if (kPhi) __builtin_prefetch(b + o, 1, 3);
          }
        }
      }
      group[m++] = s;
      if (m == 4) {
        if (!Group<F, kPhi, kTheta>(pb, group, 4, buf.th, gt, g_phi, buf, &ll, bad)) return ll;
        m = 0;
      }
    }
    if (m > 0 && !Group<F, kPhi, kTheta>(pb, group, m, buf.th, gt, g_phi, buf, &ll, bad)) return ll;
    if (kTheta) {
      for (int64_t t = 0; t < T; ++t) pb.g_theta[t * D + d] += gt[t];
    }
    i = j;
  }
  return ll;
}

template <typename F>
double SweepAny(const EStepProblem<F>& pb, int64_t p_lo, int64_t p_hi, int64_t d_lo, int64_t d_hi, F* g_phi,
                const SweepBuffers<F>& buf, BadInput* bad) {
  const bool need_phi = pb.g_phi != nullptr, need_theta = pb.g_theta != nullptr;
  auto sweep = need_phi ? (need_theta ? Sweep<F, true, true> : Sweep<F, true, false>)
                        : (need_theta ? Sweep<F, false, true> : Sweep<F, false, false>);
  return sweep(pb, p_lo, p_hi, d_lo, d_hi, g_phi, buf, bad);
}

}  // namespace detail

// Per-thread buffers kept between calls.
struct Workspace {
  std::vector<Scratch> slabs, rows;
  void resize(int n) {
    while ((int)slabs.size() < n) {
      slabs.emplace_back();
      rows.emplace_back();
    }
  }
  void release() {
    for (auto* v : {&slabs, &rows})
      for (auto& s : *v) s.release();
  }
};

// Fewest pieces a thread is given when one model is split over threads.
constexpr int64_t kMinPiecesPerThread = 16;

// How one model's pieces are split over threads (split.h): `nt` ranges of pieces holding about
// equal numbers of non-zeros, cut at document boundaries, with the documents each range owns.
template <typename F>
RangeSplit MakeSplit(const EStepProblem<F>& pb, int64_t max_threads, bool need_phi) {
  // Cutting at document boundaries needs the pieces sorted by document (as em.prepare leaves
  // them); otherwise one thread does all the work.
  bool sorted = true;
  for (int64_t i = 1; i < pb.P; ++i) {
    if (pb.piece_doc[i] < pb.piece_doc[i - 1]) {
      sorted = false;
      break;
    }
  }
  int64_t nt = std::min<int64_t>(max_threads, std::max<int64_t>(1, pb.P / kMinPiecesPerThread));
  // A private slab of g_φ costs about one slot's work per word (zeroing and summing it): more
  // threads than non-zeros per word would not pay.
  if (need_phi) nt = std::min<int64_t>(nt, std::max<int64_t>(1, pb.P * pb.L / std::max<int64_t>(pb.W, 1)));
  if (!sorted) nt = 1;
  // Equal work, not equal pieces: a piece weighs its slots with a count (padding is skipped, and
  // the last chunk may be mostly padding) plus one for starting a document.
  std::vector<int64_t> weight(nt > 1 ? pb.P : 0);
  for (int64_t i = 0; nt > 1 && i < pb.P; ++i) {
    const F* c = pb.count + i * pb.L * pb.count_stride;
    int64_t live = 0;
    for (int64_t e = 0; e < pb.L; ++e) live += c[e * pb.count_stride] != F(0);
    weight[i] = live + (i == 0 || pb.piece_doc[i] != pb.piece_doc[i - 1]);
  }
  return SplitByWeight(weight, pb.piece_doc, pb.P, pb.D, nt);
}

// The E-step of G >= 1 models on one layout (`models[g]` differ in Φ, Θ, counts and outputs).
template <typename F>
BadInput RunEStep(std::vector<EStepProblem<F>>& models, ThreadPool& pool, Workspace& ws) {
  const int64_t G = models.size();
  if (G == 0) return BadInput{};
  const EStepProblem<F>& first = models[0];
  const bool need_phi = first.g_phi != nullptr;
  const int64_t T = first.T, n_pool = pool.size();
  ws.resize((int)n_pool);
  std::vector<F*> rows(n_pool);
  for (int64_t k = 0; k < n_pool; ++k) {
    rows[k] = static_cast<F*>(ws.rows[k].get(sizeof(F) * detail::SweepBuffers<F>::elements(T)));
    if (rows[k] == nullptr) return BadInput{3, 0, 0};
  }
  std::vector<BadInput> bad(n_pool);

  // Whole models per thread, as many rounds as fill every thread.
  const int64_t whole = n_pool > 1 ? G / n_pool * n_pool : 0;
  if (whole > 0) {
    pool.run([&](int k) {
      detail::SweepBuffers<F> buf(rows[k], T);
      for (int64_t g = k; g < whole; g += n_pool) {
        EStepProblem<F>& pb = models[g];
        if (pb.g_phi) std::fill(pb.g_phi, pb.g_phi + pb.W * T, F(0));
        pb.ll = detail::SweepAny(pb, 0, pb.P, 0, pb.D, pb.g_phi, buf, &bad[k]);
        if (bad[k].kind) return;
      }
    });
    for (auto& b : bad)
      if (b.kind) return b;
  }
  if (whole == G) return BadInput{};

  // The other models one at a time, each split over the threads.
  const RangeSplit sp = MakeSplit(first, n_pool, need_phi);
  const int64_t nt = sp.nt;
  std::vector<F*> slab(nt, nullptr);
  for (int64_t k = 1; k < nt && need_phi; ++k) {
    slab[k] = static_cast<F*>(ws.slabs[k].get(sizeof(F) * first.W * T));
    if (slab[k] == nullptr) return BadInput{3, 0, 0};
  }
  std::vector<double> ll(nt);
  for (int64_t g = whole; g < G; ++g) {
    EStepProblem<F>& pb = models[g];
    slab[0] = pb.g_phi;
    pool.run([&](int k) {
      if (k >= nt) return;
      detail::SweepBuffers<F> buf(rows[k], T);
      if (need_phi) std::fill(slab[k], slab[k] + pb.W * T, F(0));
      ll[k] = detail::SweepAny(pb, sp.row_cut[k], sp.row_cut[k + 1], sp.owner_cut[k], sp.owner_cut[k + 1], slab[k], buf, &bad[k]);
    });
    for (auto& b : bad)
      if (b.kind) return b;
    if (need_phi && nt > 1) {
      const int64_t n_el = pb.W * T;
      pool.run([&](int k) {
        if (k >= nt) return;
        const int64_t lo = n_el * k / nt, hi = n_el * (k + 1) / nt;
        F* __restrict out = pb.g_phi;
        for (int64_t m = 1; m < nt; ++m) {
          const F* __restrict src = slab[m];
#pragma omp simd
          for (int64_t e = lo; e < hi; ++e) out[e] += src[e];
        }
      });
    }
    pb.ll = 0.0;
    for (int64_t k = 0; k < nt; ++k) pb.ll += ll[k];
  }
  return BadInput{};
}

}  // namespace topicjax
