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

template <typename F>
inline F Dot(const F* __restrict a, const F* __restrict b, int64_t T) {
  F s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t t = 0; t < T; ++t) s += a[t] * b[t];
  return s;
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

// One thread's share: pieces [p_lo, p_hi) whose documents lie in [d_lo, d_hi).  `g_phi` is the
// output or this thread's slab (zeroed by the caller); the θ gradient of documents [d_lo, d_hi)
// is zeroed here and then accumulated.  `th` and `gt` hold G T values each, `ll` G doubles.
template <typename F, bool kPhi, bool kTheta>
void Sweep(const EStepProblem<F>& pb, int64_t p_lo, int64_t p_hi, int64_t d_lo, int64_t d_hi, F* __restrict g_phi,
           F* __restrict th_buf, F* __restrict gt, double* __restrict ll, BadInput* bad) {
  const int64_t G = pb.G, T = pb.T, GT = G * T, L = pb.L, D = pb.D, Gc = pb.Gc;
  for (int64_t g = 0; g < G; ++g) ll[g] = 0.0;
  if (kTheta) {
    if (pb.theta_by_topic) {
      for (int64_t t = 0; t < T; ++t) std::fill(pb.g_theta + t * D + d_lo, pb.g_theta + t * D + d_hi, F(0));
    } else {
      std::fill(pb.g_theta + d_lo * GT, pb.g_theta + d_hi * GT, F(0));
    }
  }
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
      for (int64_t t = 0; t < T; ++t) th_buf[t] = pb.theta[t * D + d];
      th = th_buf;
    } else {
      th = pb.theta + d * GT;
    }
    if (kTheta) std::fill(gt, gt + GT, F(0));
    for (int64_t s = i * L; s < j * L; ++s) {
      const int64_t w = pb.word[s];
      const F* n_s = pb.count + s * Gc;
      for (int64_t g = 0; g < G; ++g) {
        const F n = n_s[Gc == 1 ? 0 : g];
        if (n == F(0)) continue;  // padding
        if (w < 0 || w >= pb.W) {
          *bad = BadInput{1, s, w};
          return;
        }
        const F* row = pb.phi + (w * G + g) * T;
        const F* thg = th + g * T;
        F p = Dot(row, thg, T);
        p = p < pb.eps ? pb.eps : p;  // max(p, eps) that keeps a NaN, as jnp.maximum does
        ll[g] += double(n) * std::log(double(p));
        const F r = n / p;
        Update<F, kPhi, kTheta>(r, row, thg, gt + g * T, kPhi ? g_phi + (w * G + g) * T : nullptr, T);
      }
    }
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
  std::vector<F*> slab(nt, nullptr), th(nt), gt(nt);
  std::vector<double*> ll(nt);
  for (int64_t k = 0; k < nt; ++k) {
    if (need_phi) slab[k] = k == 0 ? pb.g_phi : static_cast<F*>(ws.slabs[k].get(sizeof(F) * pb.W * GT));
    F* r = static_cast<F*>(ws.rows[k].get(sizeof(F) * (2 * GT + 16)));
    th[k] = r;
    gt[k] = r + GT;
    ll[k] = static_cast<double*>(ws.lls[k].get(sizeof(double) * pb.G));
    if ((need_phi && slab[k] == nullptr) || r == nullptr || ll[k] == nullptr) return BadInput{3, 0, 0};
  }
  std::vector<BadInput> bad(nt);

  pool.run([&](int k) {
    if (k >= nt) return;
    if (need_phi) std::fill(slab[k], slab[k] + pb.W * GT, F(0));
    auto sweep = need_phi ? (need_theta ? detail::Sweep<F, true, true> : detail::Sweep<F, true, false>)
                          : (need_theta ? detail::Sweep<F, false, true> : detail::Sweep<F, false, false>);
    sweep(pb, p_cut[k], p_cut[k + 1], d_cut[k], d_cut[k + 1], slab[k], th[k], gt[k], ll[k], &bad[k]);
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
