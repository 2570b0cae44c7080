// The fused E-step of PLSA/ARTM on the CPU: one pass over the non-zeros of every document.
//
// For a document d with topic vector θ_d and each of its words w (count n = n_dw):
//
//     p = max(Σ_t φ_wt θ_td, eps),   L += n log p,   g_θ[d] += (n/p) φ_w,   g_φ[w] += (n/p) θ_d
//
// which is L of ARTM eq. 4 and its gradients (the counts n_wt = φ_wt g_φ[w,t] and
// n_td = θ_td g_θ[d,t] of eq. 7-8).  The data are the sliced layout of topicjax.core.em
// (DocWordCounts): P pieces of L slots, `piece_doc[i]` the document of piece i, padding slots
// with count 0.  G models may share one corpus: φ is (W, G, T) and θ either (T, D) (one model,
// as the E-step receives it) or rows (D, G, T) (a batch of models).
//
// Threads work on contiguous ranges of pieces cut at document boundaries, so a document's θ
// gradient is owned by one thread; every thread but the first accumulates g_φ in a private slab
// (two threads' documents share words), and the slabs are summed into the output at the end.
// The sum over a thread's documents, and the order of the final reduction, depend only on the
// number of threads: a given thread count gives the same bits run after run.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "thread_pool.h"

namespace topicjax {

template <typename F>
struct EStepProblem {
  int64_t W = 0, D = 0, G = 1, T = 0;  // words, documents, models, topics
  int64_t P = 0, L = 0;                // pieces, slots per piece
  int64_t Gc = 1;                      // count columns: 1 (shared by the models) or G
  bool theta_by_topic = true;          // θ and g_θ are (T, D) (one model) or rows (D, G, T)
  const F* phi = nullptr;              // (W, G, T)
  const F* theta = nullptr;
  const int32_t* word = nullptr;       // (P L)
  const F* count = nullptr;            // (P L, Gc)
  const int32_t* piece_doc = nullptr;  // (P)
  F* g_phi = nullptr;                  // (W, G, T), or nullptr when not wanted
  F* g_theta = nullptr;                // like θ, or nullptr when not wanted
  double* ll = nullptr;                // (G)
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
  size_t size() const { return size_; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

// What went wrong in a call (the first bad id seen), reported to Python as an error.
struct BadInput {
  int kind = 0;  // 0: none, 1: word id out of range, 2: document id out of range
  int64_t index = 0, value = 0;
};

namespace detail {

// Slots ahead whose rows of Φ and g_φ are prefetched: rows are scattered over W x T arrays
// larger than L2, so their loads would otherwise stall (about 15-30% of the time on KOS and
// 20 Newsgroups at T = 100, measured with interleaved runs).
constexpr int64_t kPrefetchSlots = 8;

template <typename F>
inline F Dot(const F* __restrict a, const F* __restrict b, int64_t T) {
  F s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t t = 0; t < T; ++t) s += a[t] * b[t];
  return s;
}

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
  static size_t elements(int64_t GT) { return 6 * GT + 64; }
  SweepBuffers(F* base, int64_t GT) : th(base), gt(base + GT), zero(base + 2 * GT), dummy(base + 3 * GT) {
    std::fill(zero, zero + GT, F(0));
  }
};

// One group of up to four slots with non-zero counts, all of document θ_d = `th`: the
// likelihood terms and both gradient updates, for every model g.  m < 4 slots are completed
// with dummies (count 0, a zero row of Φ, a scratch row of g_φ).  Returns false on a bad id.
template <typename F, bool kPhi, bool kTheta>
bool Group(const EStepProblem<F>& pb, const int64_t* slots, int m, const F* th, F* gt, F* g_phi,
           const SweepBuffers<F>& buf, double* ll, BadInput* bad) {
  const int64_t G = pb.G, T = pb.T, GT = G * T, Gc = pb.Gc;
  int64_t w[4];
  for (int k = 0; k < 4; ++k) {
    if (k < m) {
      w[k] = pb.word[slots[k]];
      if (w[k] < 0 || w[k] >= pb.W) {
        *bad = BadInput{1, slots[k], w[k]};
        return false;
      }
    } else {
      w[k] = -1 - k;  // distinct from real words and from each other
    }
  }
  // A word repeated within the group (hand-built data) would alias two g_φ rows in Update4.
  const bool distinct =
      w[0] != w[1] && w[0] != w[2] && w[0] != w[3] && w[1] != w[2] && w[1] != w[3] && w[2] != w[3];
  for (int64_t g = 0; g < G; ++g) {
    const F* rows[4];
    F* gps[4];
    F n[4], p[4], r[4];
    for (int k = 0; k < 4; ++k) {
      if (k < m) {
        rows[k] = pb.phi + (w[k] * G + g) * T;
        gps[k] = kPhi ? g_phi + (w[k] * G + g) * T : nullptr;
        n[k] = pb.count[slots[k] * Gc + (Gc == 1 ? 0 : g)];
      } else {
        rows[k] = buf.zero + g * T;
        gps[k] = buf.dummy + (k - 1) * GT + g * T;
        n[k] = F(0);
      }
    }
    const F* thg = th + g * T;
    Dot4(rows[0], rows[1], rows[2], rows[3], thg, T, p);
    for (int k = 0; k < 4; ++k) {
      const F q = p[k] < pb.eps ? pb.eps : p[k];  // max(p, eps) that keeps a NaN, as jnp.maximum
      if (n[k] != F(0)) ll[g] += double(n[k]) * std::log(double(q));
      r[k] = n[k] / q;
    }
    if (distinct) {
      Update4<F, kPhi, kTheta>(r, rows, thg, gt + g * T, gps, T);
    } else {
      for (int k = 0; k < 4; ++k) Update<F, kPhi, kTheta>(r[k], rows[k], thg, gt + g * T, gps[k], T);
    }
  }
  return true;
}

// One thread's share: pieces [p_lo, p_hi) whose documents lie in [d_lo, d_hi).  `g_phi` is the
// output or this thread's slab (zeroed by the caller); the θ gradient of documents [d_lo, d_hi)
// is zeroed here and then accumulated.  `ll` receives G sums.
template <typename F, bool kPhi, bool kTheta>
void Sweep(const EStepProblem<F>& pb, int64_t p_lo, int64_t p_hi, int64_t d_lo, int64_t d_hi, F* g_phi,
           const SweepBuffers<F>& buf, double* ll, BadInput* bad) {
  const int64_t G = pb.G, T = pb.T, GT = G * T, L = pb.L, D = pb.D, Gc = pb.Gc;
  for (int64_t g = 0; g < G; ++g) ll[g] = 0.0;
  if (kTheta) {
    if (pb.theta_by_topic) {
      for (int64_t t = 0; t < T; ++t) std::fill(pb.g_theta + t * D + d_lo, pb.g_theta + t * D + d_hi, F(0));
    } else {
      std::fill(pb.g_theta + d_lo * GT, pb.g_theta + d_hi * GT, F(0));
    }
  }
  const int64_t s_end = p_hi * L;
  const int64_t row_bytes = int64_t(sizeof(F)) * GT;
  F* gt = buf.gt;
  int64_t i = p_lo;
  while (i < p_hi) {
    const int64_t d = pb.piece_doc[i];
    int64_t j = i + 1;
    while (j < p_hi && pb.piece_doc[j] == d) ++j;
    if (d < d_lo || d >= d_hi) {
      *bad = BadInput{2, i, d};
      return;
    }
    const F* th;
    if (pb.theta_by_topic) {  // one model's θ_d is a strided column of (T, D): gather it once
      for (int64_t t = 0; t < T; ++t) buf.th[t] = pb.theta[t * D + d];
      th = buf.th;
    } else {
      th = pb.theta + d * GT;
    }
    if (kTheta) std::fill(gt, gt + GT, F(0));
    int64_t group[4];
    int m = 0;
    for (int64_t s = i * L; s < j * L; ++s) {
      bool live = false;  // padding and zero counts contribute nothing
      for (int64_t g = 0; g < Gc; ++g) live |= pb.count[s * Gc + g] != F(0);
      if (!live) continue;
      if (s + kPrefetchSlots < s_end) {
        const int64_t wn = pb.word[s + kPrefetchSlots];
        if (wn >= 0 && wn < pb.W) {
          const char* a = reinterpret_cast<const char*>(pb.phi + wn * GT);
          const char* b = reinterpret_cast<const char*>(g_phi + wn * GT);
          for (int64_t o = 0; o < row_bytes; o += 64) {
            __builtin_prefetch(a + o, 0, 3);
            if (kPhi) __builtin_prefetch(b + o, 1, 3);
          }
        }
      }
      group[m++] = s;
      if (m == 4) {
        if (!Group<F, kPhi, kTheta>(pb, group, 4, th, gt, g_phi, buf, ll, bad)) return;
        m = 0;
      }
    }
    if (m > 0 && !Group<F, kPhi, kTheta>(pb, group, m, th, gt, g_phi, buf, ll, bad)) return;
    if (kTheta) {
      if (pb.theta_by_topic) {
        for (int64_t t = 0; t < T; ++t) pb.g_theta[t * D + d] += gt[t];
      } else {
        F* out = pb.g_theta + d * GT;
        for (int64_t k = 0; k < GT; ++k) out[k] += gt[k];
      }
    }
    i = j;
  }
}

}  // namespace detail

// Per-thread buffers kept between calls.
struct Workspace {
  std::vector<Scratch> slabs, rows, lls;
  void resize(int n) {
    if ((int)slabs.size() < n) {
      slabs.resize(n);
      rows.resize(n);
      lls.resize(n);
    }
  }
  void release() {
    for (auto* v : {&slabs, &rows, &lls})
      for (auto& s : *v) s.release();
  }
};

// Fewest pieces a thread is given, and the least slot work per word of Φ that pays for one
// more private slab of g_φ (zeroing and summing it costs about as much as a slot per word).
constexpr int64_t kMinPiecesPerThread = 16;

template <typename F>
BadInput RunEStep(const EStepProblem<F>& pb, ThreadPool& pool, Workspace& ws) {
  BadInput none;
  const bool need_phi = pb.g_phi != nullptr, need_theta = pb.g_theta != nullptr;
  const int64_t GT = pb.G * pb.T;

  // Threads cut the pieces only at document boundaries, which needs the documents sorted (as
  // em.prepare leaves them); otherwise one thread does all the work.
  bool sorted = true;
  for (int64_t i = 1; i < pb.P; ++i) {
    if (pb.piece_doc[i] < pb.piece_doc[i - 1]) {
      sorted = false;
      break;
    }
  }
  int64_t nt = std::min<int64_t>(pool.size(), std::max<int64_t>(1, pb.P / kMinPiecesPerThread));
  if (need_phi) nt = std::min<int64_t>(nt, std::max<int64_t>(1, pb.P * pb.L / std::max<int64_t>(pb.W, 1)));
  if (!sorted) nt = 1;

  std::vector<int64_t> p_cut(nt + 1), d_cut(nt + 1);
  p_cut[0] = 0;
  p_cut[nt] = pb.P;
  for (int64_t k = 1; k < nt; ++k) {
    int64_t s = std::max(p_cut[k - 1], pb.P * k / nt);
    while (s > 0 && s < pb.P && pb.piece_doc[s] == pb.piece_doc[s - 1]) ++s;
    p_cut[k] = s;
  }
  d_cut[0] = 0;
  d_cut[nt] = pb.D;
  for (int64_t k = 1; k < nt; ++k) {
    int64_t d = p_cut[k] < pb.P ? pb.piece_doc[p_cut[k]] : pb.D;
    d_cut[k] = std::min<int64_t>(std::max<int64_t>(d, d_cut[k - 1]), pb.D);
  }

  ws.resize((int)nt);
  std::vector<F*> slab(nt, nullptr), rows(nt);
  std::vector<double*> ll(nt);
  for (int64_t k = 0; k < nt; ++k) {
    if (need_phi) slab[k] = k == 0 ? pb.g_phi : static_cast<F*>(ws.slabs[k].get(sizeof(F) * pb.W * GT));
    rows[k] = static_cast<F*>(ws.rows[k].get(sizeof(F) * detail::SweepBuffers<F>::elements(GT)));
    ll[k] = static_cast<double*>(ws.lls[k].get(sizeof(double) * pb.G));
    if ((need_phi && slab[k] == nullptr) || rows[k] == nullptr || ll[k] == nullptr) return BadInput{3, 0, 0};
  }
  std::vector<BadInput> bad(nt);

  pool.run([&](int k) {
    if (k >= nt) return;
    if (need_phi) std::fill(slab[k], slab[k] + pb.W * GT, F(0));
    auto sweep = need_phi ? (need_theta ? detail::Sweep<F, true, true> : detail::Sweep<F, true, false>)
                          : (need_theta ? detail::Sweep<F, false, true> : detail::Sweep<F, false, false>);
    detail::SweepBuffers<F> buf(rows[k], GT);
    sweep(pb, p_cut[k], p_cut[k + 1], d_cut[k], d_cut[k + 1], slab[k], buf, ll[k], &bad[k]);
  });
  for (auto& b : bad)
    if (b.kind) return b;

  if (need_phi && nt > 1) {
    const int64_t W = pb.W;
    pool.run([&](int k) {
      if (k >= nt) return;
      const int64_t lo = W * k / nt * GT, hi = W * (k + 1) / nt * GT;
      F* __restrict out = pb.g_phi;
      for (int64_t m = 1; m < nt; ++m) {
        const F* __restrict src = slab[m];
#pragma omp simd
        for (int64_t e = lo; e < hi; ++e) out[e] += src[e];
      }
    });
  }
  for (int64_t g = 0; g < pb.G; ++g) {
    double s = 0.0;
    for (int64_t k = 0; k < nt; ++k) s += ll[k][g];
    pb.ll[g] = s;
  }
  return none;
}

}  // namespace topicjax
