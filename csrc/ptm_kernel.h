// Fused CPU kernels of the parsimonious topic model's GEM step (topicjax/ptm/kernels.py).
//
// Both walk the PTM layout (topicjax/ptm/layout.py: rows of `width` entries of one document,
// rows of one word) one document at a time, on all threads:
//
// * EStep -- the E-step of 2014 eq. 6 at proportions a (D, P) and effective topics B (N, P):
//   for every token (d, w) with count n,
//       p = max(Σ_j B_wj a_dj, tiny),  r = n / p,  ll_d += n log p,
//       s1_dj += r B_wj,  s2_dj += min(r / p, cap) B_wj²   (the ranking derivatives of trial flips)
//   and, by word rows, g_wj = Σ_d r_dw a_dj (x_jw = B_wj g_wj is eq. 9).
// * Trials -- the exact likelihood changes of candidate topic-switch flips (2014 eq. 31) of
//   every document (topicjax.ptm.bic.v_trial_deltas: turning a topic on with the mixing weight
//   t found by EM and bracketed Newton steps; turning one off by renormalising or spreading the
//   mass uniformly), with s1, s2 at the same proportions for the next round's ranking.
//
// a is zero outside a document's active topics (M_d of them, about 1.6 on 20 Newsgroups), so p
// and g are sums over the active topics only; s1 and s2 are dense over the P topics.
//
// Precision: float32 inputs and outputs; the terms of one row are summed in float32 (as the XLA
// path does), rows and tokens of a document or word in float64.  Threads own contiguous ranges
// of documents (and of words for g) with about equal numbers of non-zeros; every value is
// summed by one thread in a fixed order, so the results are the same bits for any number of
// threads.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "split.h"
#include "thread_pool.h"

namespace topicjax {
namespace ptm {

// One of the two row layouts, flattened: row i belongs to item item[i] (an item is a document
// or a word; padding rows carry n_items) and has entries e = i * width .. (i + 1) * width - 1.
// Document rows have other[e] (the word) and count[e] (0: padding); word rows have only pos[e],
// the entry's slot in the document rows (whose slot order is the flat order; the entry's
// document is the item of that slot's row), padding entries pointing at pad_pos (the last
// slot, a padding slot).
struct RowLayout {
  int64_t n_rows = 0, width = 0, n_items = 0;
  const int32_t* item = nullptr;
  const int32_t* other = nullptr;  // nullptr for word rows
  const float* count = nullptr;    // nullptr for word rows
  const int32_t* pos = nullptr;    // nullptr for document rows
  int64_t pad_pos = -1;            // the position of word rows' padding entries
};

// What went wrong (the first bad value seen), reported to Python as an error.
struct PtmBadInput {
  int kind = 0;  // 0 none, 1 word id, 2 document id, 3 position, 4 item order, 5 candidate topic
  int64_t index = 0, value = 0;
};

inline PtmBadInput CheckRows(const RowLayout& rl) {
  for (int64_t i = 0; i < rl.n_rows; ++i) {
    const int64_t it = rl.item[i];
    if (it < 0 || it > rl.n_items || (i > 0 && it < rl.item[i - 1])) return PtmBadInput{4, i, it};
  }
  return PtmBadInput{};
}

// Contiguous item ranges and their rows (split.h), about equal numbers of non-zeros each.
inline RangeSplit SplitItems(const RowLayout& rl, int64_t max_threads) {
  // Fewest rows worth a thread of their own (a wake-up costs about as much as a few rows).
  constexpr int64_t kMinRows = 64;
  const int64_t nt = std::max<int64_t>(1, std::min<int64_t>(max_threads, rl.n_rows / kMinRows));
  std::vector<int64_t> weight(nt > 1 ? rl.n_rows : 0);
  for (int64_t i = 0; nt > 1 && i < rl.n_rows; ++i) {
    int64_t live = 1;
    if (rl.count != nullptr) {
      const float* c = rl.count + i * rl.width;
      for (int64_t e = 0; e < rl.width; ++e) live += c[e] != 0.0f;
    } else {
      const int32_t* p = rl.pos + i * rl.width;
      for (int64_t e = 0; e < rl.width; ++e) live += p[e] != rl.pad_pos;
    }
    weight[i] = rl.item[i] < rl.n_items ? live : 0;
  }
  return SplitByWeight(weight, rl.item, rl.n_rows, rl.n_items, nt);
}

// Runs f(item, row_begin, row_end) for every item of thread k's range, in order (items without
// rows get an empty row range).
template <typename Fn>
inline void ForItems(const RowLayout& rl, const RangeSplit& sp, int64_t k, Fn&& f) {
  int64_t r = sp.row_cut[k];
  const int64_t r_end = sp.row_cut[k + 1];
  for (int64_t it = sp.owner_cut[k]; it < sp.owner_cut[k + 1]; ++it) {
    const int64_t r0 = r;
    while (r < r_end && rl.item[r] == it) ++r;
    if (!f(it, r0, r)) return;
  }
}

// Per-thread buffers of a document: its active topics, float row sums and double totals.
// One per thread, on cache lines of its own (its vectors' headers change at every document).
struct alignas(64) DocScratch {
  std::vector<int32_t> act;
  std::vector<float> s1_row, s2_row;
  std::vector<double> s1, s2;
  // trial flips: per-token counts, ratios of the on / off candidates, and Σ_active b / p
  std::vector<float> n, q, rho_off, rsum;
  std::vector<double> x;         // arguments of a sum of logs
  std::vector<int32_t> on, off;  // a document's allowed candidates
  void resize(int64_t P, int64_t K = 0) {
    act.resize(P);
    on.resize(K);
    off.resize(K);
    s1_row.resize(P);
    s2_row.resize(P);
    s1.resize(P);
    s2.resize(P);
  }
};

// Active topics of one document: the j with mask[j] != 0, increasing.
template <typename T>
inline int64_t ActiveTopics(const T* mask, int64_t P, int32_t* act) {
  int64_t m = 0;
  for (int64_t j = 0; j < P; ++j)
    if (mask[j] != T(0)) act[m++] = (int32_t)j;
  return m;
}

// The token terms shared by both kernels: p (clamped), then s1, s2 of the row.
inline float TokenP(const float* __restrict brow, const float* __restrict ad, const int32_t* act, int64_t m,
                    float tiny) {
  float p = 0.0f;
  for (int64_t k = 0; k < m; ++k) p += brow[act[k]] * ad[act[k]];
  return p < tiny ? tiny : p;  // max(p, tiny), keeping a NaN as jnp.maximum does
}

// A document's active topic and its proportion, kept together for the E-step's word pass.
struct ActiveTopic {
  int32_t j;
  float a;
};

// TokenP over a document's compact active list (the same terms in the same order as TokenP).
inline float TokenPActive(const float* __restrict brow, const ActiveTopic* act, int64_t m, float tiny) {
  float p = 0.0f;
  for (int64_t k = 0; k < m; ++k) p += brow[act[k].j] * act[k].a;
  return p < tiny ? tiny : p;
}

inline void RowDerivs(const float* __restrict brow, float r, float rp, float* __restrict s1, float* __restrict s2,
                      int64_t P) {
#pragma omp simd
  for (int64_t j = 0; j < P; ++j) {
    const float b = brow[j];
    s1[j] += r * b;
    s2[j] += rp * b * b;
  }
}

inline void AddRow(const float* __restrict row, double* __restrict acc, float* __restrict clear, int64_t P) {
  for (int64_t j = 0; j < P; ++j) {
    acc[j] += double(row[j]);
    clear[j] = 0.0f;
  }
}

// ---------------------------------------------------------------------------------- E-step
struct EStepArgs {
  int64_t N = 0, D = 0, P = 0;
  const float* B = nullptr;  // (N, P)
  const float* a = nullptr;  // (D, P)
  RowLayout docs, words;
  float tiny = 1e-30f, cap = 1e30f;
  float* g = nullptr;   // (N, P)
  float* ll = nullptr;  // (D,)
  float* s1 = nullptr;  // (D, P)
  float* s2 = nullptr;  // (D, P)
};

// The word pass reads each entry's count and document through its slot in the document rows
// and computes p (and r = n / p) again from the document's active topics, exactly as the
// document pass computed it (the same TokenPActive on the same numbers), instead of keeping r
// per non-zero: no buffer of the corpus's size (and no (D, P) table of active topics: they are
// kept compressed, (topic, proportion) pairs, a few per document) is allocated beside XLA's.
// It gathers a row's counts and documents first and their active lists next, so that those
// scattered loads overlap instead of waiting for one another entry by entry.
inline PtmBadInput RunEStep(const EStepArgs& A, ThreadPool& pool) {
  const int64_t P = A.P, W = A.docs.width;
  PtmBadInput bad = CheckRows(A.docs);
  if (bad.kind) return bad;
  if ((bad = CheckRows(A.words)).kind) return bad;
  const int64_t n_pool = pool.size();
  const int64_t n_flat = A.docs.n_rows * W;
  // active topics (a_dj != 0) of document d: act[act_off[d] .. act_off[d + 1]), increasing
  std::vector<int64_t> act_off(A.D + 1, 0);
  for (int64_t d = 0; d < A.D; ++d) {
    const float* ad = A.a + d * P;
    int64_t m = 0;
    for (int64_t j = 0; j < P; ++j) m += ad[j] != 0.0f;
    act_off[d + 1] = act_off[d] + m;
  }
  std::vector<ActiveTopic> act(act_off[A.D]);
  std::vector<DocScratch> scratch(n_pool);
  std::vector<PtmBadInput> bads(n_pool);

  const RangeSplit sd = SplitItems(A.docs, n_pool);
  pool.run([&](int k) {
    if (k >= sd.nt) return;
    DocScratch& s = scratch[k];
    s.resize(P);
    std::fill(s.s1_row.begin(), s.s1_row.end(), 0.0f);
    std::fill(s.s2_row.begin(), s.s2_row.end(), 0.0f);
    ForItems(A.docs, sd, k, [&](int64_t d, int64_t r0, int64_t r1) {
      const float* ad = A.a + d * P;
      ActiveTopic* ac = act.data() + act_off[d];
      int64_t m = 0;
      for (int64_t j = 0; j < P; ++j)
        if (ad[j] != 0.0f) ac[m++] = ActiveTopic{(int32_t)j, ad[j]};
      std::fill(s.s1.begin(), s.s1.end(), 0.0);
      std::fill(s.s2.begin(), s.s2.end(), 0.0);
      double ll = 0.0;
      for (int64_t r = r0; r < r1; ++r) {
        for (int64_t e = r * W; e < (r + 1) * W; ++e) {
          const float n = A.docs.count[e];
          if (n == 0.0f) continue;
          const int64_t w = A.docs.other[e];
          if (w < 0 || w >= A.N) {
            bads[k] = PtmBadInput{1, e, w};
            return false;
          }
          const float* brow = A.B + w * P;
          const float p = TokenPActive(brow, ac, m, A.tiny);
          const float rr = n / p;
          const float rp = std::min(rr / p, A.cap);
          ll += double(n) * double(std::log(p));
          RowDerivs(brow, rr, rp, s.s1_row.data(), s.s2_row.data(), P);
        }
        AddRow(s.s1_row.data(), s.s1.data(), s.s1_row.data(), P);
        AddRow(s.s2_row.data(), s.s2.data(), s.s2_row.data(), P);
      }
      A.ll[d] = float(ll);
      for (int64_t j = 0; j < P; ++j) {
        A.s1[d * P + j] = float(s.s1[j]);
        A.s2[d * P + j] = float(s.s2[j]);
      }
      return true;
    });
  });
  for (auto& b : bads)
    if (b.kind) return b;

  const RangeSplit sw = SplitItems(A.words, n_pool);
  const int64_t WW = A.words.width;
  // the document row of a slot, pos / W: a shift for the usual power-of-two widths
  const int w_shift = W > 0 && (W & (W - 1)) == 0 ? __builtin_ctzll((unsigned long long)W) : -1;
  pool.run([&](int k) {
    if (k >= sw.nt) return;
    std::vector<double> acc(P);
    std::vector<int64_t> docs(WW), offs(WW);  // a row's entries: document, start of its active list
    std::vector<float> counts(WW);
    ForItems(A.words, sw, k, [&](int64_t w, int64_t r0, int64_t r1) {
      std::fill(acc.begin(), acc.end(), 0.0);
      const float* brow = A.B + w * P;
      for (int64_t r = r0; r < r1; ++r) {
        int64_t cnt = 0;
        for (int64_t e = r * WW; e < (r + 1) * WW; ++e) {
          const int64_t pos = A.words.pos[e];
          if (pos < 0 || pos >= n_flat) {
            bads[k] = PtmBadInput{3, e, pos};
            return false;
          }
          docs[cnt] = A.docs.item[w_shift >= 0 ? pos >> w_shift : pos / W];
          counts[cnt] = A.docs.count[pos];
          offs[cnt] = e;
          cnt += 1;
        }
        int64_t live = 0;
        for (int64_t i = 0; i < cnt; ++i) {
          if (counts[i] == 0.0f) continue;  // padding
          const int64_t d = docs[i];
          if (d >= A.D) {  // a count in a padding row (items are checked to be in [0, D])
            bads[k] = PtmBadInput{2, offs[i], d};
            return false;
          }
          docs[live] = d;
          counts[live] = counts[i];
          offs[live] = act_off[d];
          __builtin_prefetch(act.data() + offs[live]);
          live += 1;
        }
        for (int64_t i = 0; i < live; ++i) {
          const int64_t d = docs[i];
          const ActiveTopic* ac = act.data() + offs[i];
          const int64_t m = act_off[d + 1] - offs[i];
          const float rr = counts[i] / TokenPActive(brow, ac, m, A.tiny);
          for (int64_t q = 0; q < m; ++q) acc[ac[q].j] += double(rr * ac[q].a);
        }
      }
      float* gw = A.g + w * P;
      for (int64_t j = 0; j < P; ++j) gw[j] = float(acc[j]);
      return true;
    });
  });
  for (auto& b : bads)
    if (b.kind) return b;
  return PtmBadInput{};
}

// ---------------------------------------------------------------------------------- trial flips
struct TrialArgs {
  int64_t N = 0, D = 0, P = 0, K = 0, n_on = 0, newton_iters = 0;
  const float* B = nullptr;        // (N, P)
  const float* a = nullptr;        // (D, P), zero outside vv
  const bool* vv = nullptr;        // (D, P), true on the active topics
  const int32_t* cand = nullptr;   // (D, K): n_on topics to turn on, then K - n_on to turn off
  const float* t_start = nullptr;  // (D, K)
  const bool* ok = nullptr;        // (D, K): the allowed flips, the others skipped (nullptr: all)
  RowLayout docs;
  float tiny = 1e-30f, cap = 1e30f, t_max = 1.0f - 1e-6f;
  float* dl = nullptr;          // (D, K)
  float* t = nullptr;           // (D, K)
  int32_t* variant = nullptr;   // (D, K)
  float* s1 = nullptr;          // (D, P)
  float* s2 = nullptr;          // (D, P)
};

namespace detail {

// log x for a positive, normal, finite double x, within a few ulp, written with bit operations
// and one polynomial so that a loop over it vectorises (the trial flips take millions of logs;
// libm's are calls, one value at a time).  x = 2^e m with m in [√½, √2), then
// log m = 2 atanh(s) = 2 s Σ_k s^2k / (2k + 1), s = (m - 1) / (m + 1), |s| < 0.1716: the
// terms up to s^24 leave a relative error below 1e-17.
inline double VLog(double x) {
  constexpr uint64_t kSqrtHalf = 0x3fe6a09e667f3bcdULL;  // the bits of √½
  constexpr uint64_t kExpMask = 0xfff0000000000000ULL;
  const uint64_t bits = __builtin_bit_cast(uint64_t, x);
  const uint64_t shifted = bits - kSqrtHalf;  // exponent field: e (two's complement)
  const uint64_t mbits = bits - (shifted & kExpMask);
  const double m = __builtin_bit_cast(double, mbits);
  // e as a double without a 64-bit integer conversion: 2^52 + (e + 1023) has e + 1023 in its
  // low mantissa bits
  const uint64_t ebits = ((shifted + (uint64_t(1023) << 52)) >> 52) | 0x4330000000000000ULL;
  const double e = __builtin_bit_cast(double, ebits) - (4503599627370496.0 + 1023.0);
  const double sm = (m - 1.0) / (m + 1.0), z = sm * sm;
  double poly = 1.0 / 25;
  poly = poly * z + 1.0 / 23;
  poly = poly * z + 1.0 / 21;
  poly = poly * z + 1.0 / 19;
  poly = poly * z + 1.0 / 17;
  poly = poly * z + 1.0 / 15;
  poly = poly * z + 1.0 / 13;
  poly = poly * z + 1.0 / 11;
  poly = poly * z + 1.0 / 9;
  poly = poly * z + 1.0 / 7;
  poly = poly * z + 1.0 / 5;
  poly = poly * z + 1.0 / 3;
  constexpr double kLn2Hi = 6.93147180369123816490e-01, kLn2Lo = 1.90821492927058770002e-10;
  return e * kLn2Hi + (e * kLn2Lo + (2.0 * sm + 2.0 * sm * z * poly));
}

// Whether VLog takes x: positive, normal and finite.
inline bool VLogDomain(double x) { return (x >= 2.2250738585072014e-308) & (x <= 1.7976931348623157e308); }

// Σ_i n_i log x_i, vectorised (VLog); with std::log if an x_i is outside VLog's domain (a NaN
// or an infinity from corrupted inputs), so that those propagate as usual.  (The loops are
// kept free of selects: GCC 12 does not vectorise VLog next to one.)
inline double SumNLog(const float* n, const double* x, int64_t T) {
  int64_t outside = 0;
  for (int64_t i = 0; i < T; ++i) outside += !VLogDomain(x[i]);
  double acc = 0.0;
  if (outside != 0) {
    for (int64_t i = 0; i < T; ++i) acc += double(n[i]) * std::log(x[i]);
    return acc;
  }
#pragma omp simd reduction(+ : acc)
  for (int64_t i = 0; i < T; ++i) acc += double(n[i]) * VLog(x[i]);
  return acc;
}

// φ(t) = Σ n log1p(t q), vectorised: log1p(y) = log u + (y - (u - 1)) / u with u = 1 + y
// rounded (the second term restores what the rounding of u lost; for tiny y it is y).  The
// clamp max(t q, -1 + 1e-7) of bic.v_trial_deltas never binds here: t <= t_max < 1 - 1e-7 and
// q = b / p - 1 >= -1.
inline double SumNLog1p(const float* n, const float* q, int64_t T, double t) {
  int64_t outside = 0;
  for (int64_t i = 0; i < T; ++i) outside += !VLogDomain(1.0 + t * double(q[i]));
  double acc = 0.0;
  if (outside != 0) {
    for (int64_t i = 0; i < T; ++i) acc += double(n[i]) * std::log1p(std::max(t * double(q[i]), -1.0 + 1e-7));
    return acc;
  }
#pragma omp simd reduction(+ : acc)
  for (int64_t i = 0; i < T; ++i) {
    const double y = t * double(q[i]), u = 1.0 + y;
    acc += double(n[i]) * (VLog(u) + (y - (u - 1.0)) / u);
  }
  return acc;
}

// φ'(t) and φ''(t) (negated) of φ(t) = Σ n log(1 + t q): Σ n q / den and Σ n (q / den)².
inline void Derivs(const float* n, const float* q, int64_t T, double t, double* d1, double* d2) {
  double a = 0.0, b = 0.0;
#pragma omp simd reduction(+ : a, b)
  for (int64_t i = 0; i < T; ++i) {
    const double den = 1.0 + t * double(q[i]);
    const double r = double(q[i]) / std::max(den, 1e-12);
    a += double(n[i]) * r;
    b += double(n[i]) * r * r;
  }
  *d1 = a;
  *d2 = b;
}

// One EM step for the mixing weight: t Σ n (q + 1) / (1 + t q) / L, clipped to [0, t_max].
inline double EmStep(const float* n, const float* q, int64_t T, double t, double L, double t_max) {
  double share = 0.0;
#pragma omp simd reduction(+ : share)
  for (int64_t i = 0; i < T; ++i) {
    const double den = 1.0 + t * double(q[i]);
    share += double(n[i]) * (double(q[i]) + 1.0) / std::max(den, 1e-12);
  }
  return std::min(std::max(t * share / std::max(L, 1.0), 0.0), t_max);
}

}  // namespace detail

inline PtmBadInput RunTrials(const TrialArgs& A, ThreadPool& pool) {
  const int64_t P = A.P, K = A.K, n_on = A.n_on, W = A.docs.width;
  PtmBadInput bad = CheckRows(A.docs);
  if (bad.kind) return bad;
  for (int64_t i = 0; i < A.D * K; ++i)
    if (A.cand[i] < 0 || A.cand[i] >= P) return PtmBadInput{5, i, A.cand[i]};
  const int64_t n_pool = pool.size();
  std::vector<DocScratch> scratch(n_pool);
  std::vector<PtmBadInput> bads(n_pool);
  const double t_max = double(A.t_max), tiny = double(A.tiny);
  const RangeSplit sd = SplitItems(A.docs, n_pool);
  pool.run([&](int k) {
    if (k >= sd.nt) return;
    DocScratch& s = scratch[k];
    s.resize(P, K);
    std::fill(s.s1_row.begin(), s.s1_row.end(), 0.0f);
    std::fill(s.s2_row.begin(), s.s2_row.end(), 0.0f);
    ForItems(A.docs, sd, k, [&](int64_t d, int64_t r0, int64_t r1) {
      const float* ad = A.a + d * P;
      const int32_t* cd = A.cand + d * K;
      int32_t* ac = s.act.data();
      const int64_t m = ActiveTopics(A.vv + d * P, P, ac);
      // the allowed candidates, on then off (the others' results are never used: skipped)
      int32_t* on = s.on.data();
      int32_t* off = s.off.data();
      int64_t n_on_ok = 0, n_off_ok = 0;
      for (int64_t c = 0; c < K; ++c) {
        const int64_t o = d * K + c;
        if (A.ok == nullptr || A.ok[o]) {
          if (c < n_on)
            on[n_on_ok++] = (int32_t)c;
          else
            off[n_off_ok++] = (int32_t)c;
        } else {
          A.dl[o] = -INFINITY;
          A.t[o] = 0.0f;
          A.variant[o] = 0;
        }
      }
      // token buffers, candidate-major (each candidate's loops run over contiguous tokens)
      const int64_t cap_tokens = (r1 - r0) * W;
      if ((int64_t)s.n.size() < cap_tokens) {
        s.n.resize(cap_tokens);
        s.rsum.resize(cap_tokens);
        s.x.resize(cap_tokens);
      }
      if ((int64_t)s.q.size() < cap_tokens * n_on_ok) s.q.resize(cap_tokens * n_on_ok);
      if ((int64_t)s.rho_off.size() < cap_tokens * n_off_ok) s.rho_off.resize(cap_tokens * n_off_ok);
      std::fill(s.s1.begin(), s.s1.end(), 0.0);
      std::fill(s.s2.begin(), s.s2.end(), 0.0);
      int64_t T = 0;
      double L = 0.0;
      for (int64_t r = r0; r < r1; ++r) {
        for (int64_t e = r * W; e < (r + 1) * W; ++e) {
          const float n = A.docs.count[e];
          if (n == 0.0f) continue;
          const int64_t w = A.docs.other[e];
          if (w < 0 || w >= A.N) {
            bads[k] = PtmBadInput{1, e, w};
            return false;
          }
          const float* brow = A.B + w * P;
          const float p = TokenP(brow, ad, ac, m, A.tiny);
          float bs = 0.0f;
          for (int64_t q = 0; q < m; ++q) bs += brow[ac[q]];
          const float rr = n / p;
          s.n[T] = n;
          s.rsum[T] = bs / p;
          for (int64_t i = 0; i < n_on_ok; ++i) s.q[i * cap_tokens + T] = brow[cd[on[i]]] / p - 1.0f;
          for (int64_t i = 0; i < n_off_ok; ++i) s.rho_off[i * cap_tokens + T] = brow[cd[off[i]]] / p;
          RowDerivs(brow, rr, std::min(rr / p, A.cap), s.s1_row.data(), s.s2_row.data(), P);
          L += double(n);
          ++T;
        }
        AddRow(s.s1_row.data(), s.s1.data(), s.s1_row.data(), P);
        AddRow(s.s2_row.data(), s.s2.data(), s.s2_row.data(), P);
      }
      for (int64_t j = 0; j < P; ++j) {
        A.s1[d * P + j] = float(s.s1[j]);
        A.s2[d * P + j] = float(s.s2[j]);
      }
      const float* nn = s.n.data();
      // turning a topic on: α+ = (1 - t) α + t e_j, t maximising φ(t) = Σ n log(1 + t q)
      for (int64_t i = 0; i < n_on_ok; ++i) {
        const int64_t o = d * K + on[i];
        const float* q = s.q.data() + i * cap_tokens;
        const double ts = A.t_start[o];
        double t = (ts > 0.0 && ts < 0.9 * t_max) ? ts : 0.5;
        for (int it = 0; it < 2; ++it) t = detail::EmStep(nn, q, T, t, L, t_max);
        double lo = 0.0, hi = t_max;
        for (int64_t it = 0; it < A.newton_iters; ++it) {
          double d1, d2;
          detail::Derivs(nn, q, T, t, &d1, &d2);
          const bool up = d1 > 0.0;
          if (up)
            lo = t;
          else
            hi = t;
          // a step outside the bracket (or inf / inf) falls back to bisection; a converged one
          // (t + d1 / d2 == t with a finite d2) stays, although t is now an end of the bracket
          const double step = t + d1 / std::max(d2, 1e-30);
          const bool inside = (step > lo && step < hi) || (step == t && std::isfinite(d2));
          double t_new = (inside && std::isfinite(step)) ? step : 0.5 * (lo + hi);
          if (up && t >= t_max) t_new = t;
          t = t_new;
        }
        const double phi = detail::SumNLog1p(nn, q, T, t);
        const bool gain = phi > 0.0;  // φ is concave with φ(0) = 0: otherwise stay at t = 0
        A.t[o] = gain ? float(t) : 0.0f;
        A.dl[o] = gain ? float(phi) : 0.0f;
        A.variant[o] = 0;
      }
      // turning a topic off: renormalise the others (variant 0) or spread the mass uniformly
      // (1); with two active topics both give the other topic all the mass, a tie that only
      // round-off would break, and the uniform one (exactly one-hot) is taken
      const double log_md = std::log(std::max(double(m) - 1.0, 1.0));
      const float* rs = s.rsum.data();
      for (int64_t i = 0; i < n_off_ok; ++i) {
        const int64_t o = d * K + off[i];
        const float* rho = s.rho_off.data() + i * cap_tokens;
        double* x = s.x.data();
        for (int64_t e = 0; e < T; ++e) x[e] = std::max(double(rs[e]) - double(rho[e]), tiny);
        const double dl_b = detail::SumNLog(nn, x, T) - L * log_md;
        double dl_a = -INFINITY;
        const double aj = ad[cd[off[i]]];
        const double keep = std::max(1.0 - aj, 0.0);
        if (m > 2 && keep > 1e-6) {
          for (int64_t e = 0; e < T; ++e) x[e] = std::max(1.0 - aj * double(rho[e]), tiny);
          dl_a = detail::SumNLog(nn, x, T) - L * std::log(std::max(keep, tiny));
        }
        const bool uniform = dl_b > dl_a || m <= 2;
        A.variant[o] = uniform;
        A.dl[o] = float(uniform ? dl_b : dl_a);
        A.t[o] = 0.0f;
      }
      return true;
    });
  });
  for (auto& b : bads)
    if (b.kind) return b;
  return PtmBadInput{};
}

// ---------------------------------------------------------------------------------- flip ranking
// lax.top_k(-x, K) restricted to the finite negative entries of x: their indices in increasing
// order of x (ties: lower index first, as top_k), then index 0 with value +inf.  The callers
// use only the leading finite negative entries (a prefix ends at the first other one), which
// are the same as top_k's whenever at most K entries are negative (they check that).
inline void SmallestNegatives(const float* x, int64_t n, int64_t K, float* vals, int32_t* idx,
                              std::vector<int64_t>& buf) {
  buf.clear();
  for (int64_t i = 0; i < n; ++i)
    if (x[i] < 0.0f && std::isfinite(x[i])) buf.push_back(i);
  const int64_t m = std::min<int64_t>((int64_t)buf.size(), K);
  auto less = [x](int64_t a, int64_t b) { return x[a] < x[b] || (x[a] == x[b] && a < b); };
  if ((int64_t)buf.size() > K) std::nth_element(buf.begin(), buf.begin() + K, buf.end(), less);
  std::sort(buf.begin(), buf.begin() + m, less);
  for (int64_t k = 0; k < m; ++k) {
    vals[k] = x[buf[k]];
    idx[k] = (int32_t)buf[k];
  }
  for (int64_t k = m; k < K; ++k) {
    vals[k] = std::numeric_limits<float>::infinity();
    idx[k] = 0;
  }
}

}  // namespace ptm
}  // namespace topicjax
