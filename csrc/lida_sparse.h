// The sparse draw of LDA's token conditional (csrc/lida_kernel.h): one document at a time.
//
// The conditional (35)-(38) of a token of word v with every topic active splits as SparseLDA does
// (Yao, Mimno & McCallum 2009):
//     (α + n_kd)(β + n_vk) / D_k  =  β q_k  +  q_k n_vk,      q_k = (α + n_kd) / D_k,
// Σ_k q_k kept up to date as counts move (double, O(1) a token), the second term summed over the
// topics the word holds (its list, kept by the sweep), the rare smoothing part β q_k over all topics.
//
// The word's part is computed in chunks of 16 list entries: w_j = q_j n_j, its inclusive prefix sum
// inside the chunk by four shifted adds (1, 2, 4 and 8 entries back), plus the total of the chunks
// before; the first entry whose running sum exceeds the uniform is the topic.  With AVX-512 (chosen
// at run time where the CPU has it) a chunk is one vector, and up to four chunks (64 topics) stay in
// registers from the products to the search.  The portable code adds in the same order: both give
// the same bits.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "lida_problem.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TOPICJAX_LIDA_AVX512 1
#include <immintrin.h>
#endif

namespace topicjax {

// x as a rounded float: no fused multiply-add across it (GCC fuses a product into a later add
// otherwise, and the portable and the vector code would round apart)
inline float LidaRounded(float x) {
#if defined(__GNUC__) && defined(__x86_64__)
  asm("" : "+x"(x));
#endif
  return x;
}

// A token's draw from the word's part: the list's topics lt[0 .. n) with counts lc (n_vk and the
// document's own changes, the token's own count still in at j0) and the q's of the document, q_j0
// replaced by qn (the token's topic's q with the token out).  `U` the token's uniform and `bqs`
// β Σ_k q_k: u = U (acc + bqs) with acc the word's part; returns the entry j with the running sum
// first above u where u < acc, else -1 (the smoothing part); `acc` and `u` out.
struct LidaDraw {
  float acc;
  double u;
};

// The list arithmetic entry by entry (any CPU).
struct LidaListPortable {
  static constexpr bool kRegs = false;  // no register-held lists (LidaSparseDocumentWith)
  template <int C>
  struct Regs {};
  // lt[0 .. n) = tp[0 .. n), lc[j] = nw[lt[j]]
  static void Load(int32_t* lt, int32_t* lc, const int32_t* tp, int32_t n, const int32_t* nw) {
    for (int32_t j = 0; j < n; ++j) {
      lt[j] = tp[j];
      lc[j] = nw[tp[j]];
    }
  }
  // where k sits in lt[0 .. n), or -1
  static int32_t Find(const int32_t* lt, int32_t n, int32_t k) {
    for (int32_t j = 0; j < n; ++j)
      if (lt[j] == k) return j;
    return -1;
  }
  static int32_t Draw(const float* q, const int32_t* lt, const int32_t* lc, int32_t n, int32_t j0, float qn, float U,
                      double bqs, float* cum, LidaDraw& out) {
    float base = 0.0f;
    for (int32_t c = 0; c < n; c += 16) {
      float w[16], x[16];
      for (int i = 0; i < 16; ++i) {
        const int32_t j = c + i;
        w[i] = j >= n ? 0.0f : j == j0 ? LidaRounded(qn * (float)(lc[j] - 1)) : LidaRounded(q[lt[j]] * (float)lc[j]);
      }
      for (int sh = 1; sh < 16; sh *= 2) {
        std::memcpy(x, w, sizeof w);
        for (int i = sh; i < 16; ++i) w[i] = x[i] + x[i - sh];
      }
      for (int i = 0; i < 16 && c + i < n; ++i) cum[c + i] = base + w[i];
      base = base + w[15];
    }
    out.acc = base;
    out.u = (double)U * ((double)base + bqs);
    if (!(out.u < (double)base)) return -1;
    const float uf = (float)out.u;
    for (int32_t j = 0; j < n; ++j)
      if (cum[j] > uf) return j;
    for (int32_t j = n - 1; j >= 0; --j)  // u rounded up to the total: the last topic with mass
      if (lc[j] - (j == j0) > 0) return j;
    return -1;
  }
};

#ifdef TOPICJAX_LIDA_AVX512
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,bmi,bmi2")
inline __m512 LidaRounded(__m512 x) {
  asm("" : "+v"(x));
  return x;
}

// The same arithmetic, 16 entries a vector.
struct LidaListAvx512 {
  static constexpr bool kRegs = true;
  template <int C>
  struct Regs;
  static __mmask16 Lanes(int32_t left) {
    return left >= 16 ? (__mmask16)0xFFFF : left <= 0 ? (__mmask16)0 : (__mmask16)((1u << left) - 1u);
  }
  static void Load(int32_t* lt, int32_t* lc, const int32_t* tp, int32_t n, const int32_t* nw) {
    for (int32_t c = 0; c < n; c += 16) {
      const __mmask16 m = Lanes(n - c);
      const __m512i idx = _mm512_maskz_loadu_epi32(m, tp + c);
      // whole vectors (the arrays have room): a masked store would not forward to the loads that follow
      _mm512_storeu_si512(lt + c, idx);
      _mm512_storeu_si512(lc + c, _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, idx, nw, 4));
    }
  }
  static int32_t Find(const int32_t* lt, int32_t n, int32_t k) {
    const __m512i key = _mm512_set1_epi32(k);
    for (int32_t c = 0; c < n; c += 16) {
      const __mmask16 m = Lanes(n - c);
      const unsigned hit = _mm512_mask_cmpeq_epi32_mask(m, _mm512_maskz_loadu_epi32(m, lt + c), key);
      if (hit) return c + __builtin_ctz(hit);
    }
    return -1;
  }
  static __m512 Shifted(__m512 x, int sh) {  // lanes moved sh up, zeros in
    const __m512i xi = _mm512_castps_si512(x), z = _mm512_setzero_si512();
    switch (sh) {
      case 1: return _mm512_castsi512_ps(_mm512_alignr_epi32(xi, z, 15));
      case 2: return _mm512_castsi512_ps(_mm512_alignr_epi32(xi, z, 14));
      case 4: return _mm512_castsi512_ps(_mm512_alignr_epi32(xi, z, 12));
      default: return _mm512_castsi512_ps(_mm512_alignr_epi32(xi, z, 8));
    }
  }
  // chunk c's products (lane j0 - 16 c patched) and their running sums plus `base`
  static __m512 Chunk(const float* q, const int32_t* lt, const int32_t* lc, int32_t n, int32_t j0, float qn, int32_t c,
                      __m512 base) {
    const __mmask16 m = Lanes(n - c);
    const __m512i idx = _mm512_maskz_loadu_epi32(m, lt + c);
    __m512 qv = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, q, 4);
    __m512 lv = _mm512_cvtepi32_ps(_mm512_maskz_loadu_epi32(m, lc + c));
    const __mmask16 own = (j0 >= c && j0 < c + 16) ? (__mmask16)(1u << (j0 - c)) : (__mmask16)0;
    qv = _mm512_mask_mov_ps(qv, own, _mm512_set1_ps(qn));
    lv = _mm512_mask_sub_ps(lv, own, lv, _mm512_set1_ps(1.0f));
    __m512 w = LidaRounded(_mm512_mul_ps(qv, lv));
    w = _mm512_add_ps(w, Shifted(w, 1));
    w = _mm512_add_ps(w, Shifted(w, 2));
    w = _mm512_add_ps(w, Shifted(w, 4));
    w = _mm512_add_ps(w, Shifted(w, 8));
    return _mm512_add_ps(base, w);
  }
  static __m512 Last(__m512 run) { return _mm512_permutexvar_ps(_mm512_set1_epi32(15), run); }
  // The draw from the running sums run[0 .. C) of n entries (the last lane of run[C - 1] their
  // total acc): fills `out`; the entry picked, -1 for the smoothing part, or -2 where u rounded up
  // to the total (the caller picks the last topic with mass)
  template <int C>
  static int32_t Search(const __m512* run, int32_t n, float U, double bqs, LidaDraw& out) {
    const float acc = _mm512_cvtss_f32(Last(run[C - 1]));
    out.acc = acc;
    out.u = (double)U * ((double)acc + bqs);
    if (!(out.u < (double)acc)) return -1;
    const __m512 uv = _mm512_set1_ps((float)out.u);
    for (int c = 0; c < C; ++c) {
      const unsigned hit = _mm512_mask_cmp_ps_mask(Lanes(n - 16 * c), run[c], uv, _CMP_GT_OQ);
      if (hit) return 16 * c + __builtin_ctz(hit);
    }
    return -2;
  }
  // C chunks (n <= 16 C) in registers
  template <int C>
  static int32_t DrawIn(const float* q, const int32_t* lt, const int32_t* lc, int32_t n, int32_t j0, float qn,
                        float U, double bqs, LidaDraw& out) {
    __m512 run[C];
    __m512 base = _mm512_setzero_ps();
    for (int c = 0; c < C; ++c) {
      run[c] = Chunk(q, lt, lc, n, j0, qn, 16 * c, base);
      base = Last(run[c]);
    }
    const int32_t j = Search<C>(run, n, U, bqs, out);
    return j == -2 ? LastWithMass(lc, n, j0) : j;
  }
  static int32_t LastWithMass(const int32_t* lc, int32_t n, int32_t j0) {
    for (int32_t j = n - 1; j >= 0; --j)
      if (lc[j] - (j == j0) > 0) return j;
    return -1;
  }
  static int32_t Draw(const float* q, const int32_t* lt, const int32_t* lc, int32_t n, int32_t j0, float qn, float U,
                      double bqs, float* cum, LidaDraw& out) {
    switch ((n + 15) / 16) {
      case 0:
      case 1: return DrawIn<1>(q, lt, lc, n, j0, qn, U, bqs, out);
      case 2: return DrawIn<2>(q, lt, lc, n, j0, qn, U, bqs, out);
      case 3: return DrawIn<3>(q, lt, lc, n, j0, qn, U, bqs, out);
      case 4: return DrawIn<4>(q, lt, lc, n, j0, qn, U, bqs, out);
      default: break;
    }
    __m512 base = _mm512_setzero_ps();  // longer lists: the running sums through memory
    for (int32_t c = 0; c < n; c += 16) {
      const __m512 run = Chunk(q, lt, lc, n, j0, qn, c, base);
      _mm512_mask_storeu_ps(cum + c, Lanes(n - c), run);
      base = Last(run);
    }
    const float acc = _mm512_cvtss_f32(base);
    out.acc = acc;
    out.u = (double)U * ((double)acc + bqs);
    if (!(out.u < (double)acc)) return -1;
    const __m512 uv = _mm512_set1_ps((float)out.u);
    for (int32_t c = 0; c < n; c += 16) {
      const __mmask16 m = Lanes(n - c);
      const unsigned hit = _mm512_mask_cmp_ps_mask(m, _mm512_maskz_loadu_ps(m, cum + c), uv, _CMP_GT_OQ);
      if (hit) return c + __builtin_ctz(hit);
    }
    return LastWithMass(lc, n, j0);
  }
};
// A run's list held in registers, C chunks (16 C >= the list's topics and whatever the run's tokens
// may add): topics, counts and the q's, gathered once a run and patched lane by lane as the run's
// tokens move (a topic's q changes only where the document's own counts move).  The topics are
// also written to `lt` (read where a token's topic is picked).
template <int C>
struct LidaListAvx512::Regs {
  int32_t* lt;
  const float* q;
  int32_t n = 0;
  __m512i tv[C], cv[C];
  __m512 qv[C];

  Regs(int32_t* lt_, const float* q_) : lt(lt_), q(q_) {}
  void Load(const int32_t* tp, int32_t n_, const int32_t* nw) {
    n = n_;
    for (int c = 0; c < C; ++c) {
      const __mmask16 m = Lanes(n - 16 * c);
      tv[c] = _mm512_maskz_loadu_epi32(m, tp + 16 * c);
      _mm512_storeu_si512(lt + 16 * c, tv[c]);
      cv[c] = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, tv[c], nw, 4);
      qv[c] = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, tv[c], q, 4);
    }
  }
  int32_t Find(int32_t k) const {
    const __m512i key = _mm512_set1_epi32(k);
    for (int c = 0; c < C; ++c) {
      const unsigned hit = _mm512_mask_cmpeq_epi32_mask(Lanes(n - 16 * c), tv[c], key);
      if (hit) return 16 * c + __builtin_ctz(hit);
    }
    return -1;
  }
  int32_t Append(int32_t k, int32_t count) {
    for (int c = 0; c < C; ++c)
      if (n >> 4 == c) {
        const __mmask16 m = (__mmask16)(1u << (n & 15));
        tv[c] = _mm512_mask_mov_epi32(tv[c], m, _mm512_set1_epi32(k));
        cv[c] = _mm512_mask_mov_epi32(cv[c], m, _mm512_set1_epi32(count));
        qv[c] = _mm512_mask_mov_ps(qv[c], m, _mm512_set1_ps(q[k]));
      }
    lt[n] = k;
    return n++;
  }
  void Add(int32_t j, int32_t delta) {
    for (int c = 0; c < C; ++c)
      if (j >> 4 == c) cv[c] = _mm512_mask_add_epi32(cv[c], (__mmask16)(1u << (j & 15)), cv[c], _mm512_set1_epi32(delta));
  }
  void SetQ(int32_t j, float value) {
    for (int c = 0; c < C; ++c)
      if (j >> 4 == c) qv[c] = _mm512_mask_mov_ps(qv[c], (__mmask16)(1u << (j & 15)), _mm512_set1_ps(value));
  }
  int32_t Topic(int32_t j) const { return lt[j]; }
  int32_t Draw(int32_t j0, float qn, float U, double bqs, LidaDraw& out) const {
    __m512 run[C];
    __m512 base = _mm512_setzero_ps();
    for (int c = 0; c < C; ++c) {
      const __mmask16 own = (j0 >> 4) == c ? (__mmask16)(1u << (j0 & 15)) : (__mmask16)0;
      const __m512 qc = _mm512_mask_mov_ps(qv[c], own, _mm512_set1_ps(qn));
      const __m512i cc = _mm512_mask_sub_epi32(cv[c], own, cv[c], _mm512_set1_epi32(1));
      __m512 w = LidaRounded(_mm512_maskz_mul_ps(Lanes(n - 16 * c), qc, _mm512_cvtepi32_ps(cc)));
      w = _mm512_add_ps(w, Shifted(w, 1));
      w = _mm512_add_ps(w, Shifted(w, 2));
      w = _mm512_add_ps(w, Shifted(w, 4));
      w = _mm512_add_ps(w, Shifted(w, 8));
      run[c] = _mm512_add_ps(base, w);
      base = Last(run[c]);
    }
    const int32_t j = Search<C>(run, n, U, bqs, out);
    if (j != -2) return j;
    for (int c = C - 1; c >= 0; --c) {  // u rounded up to the total: the last topic with mass
      const __mmask16 own = (j0 >> 4) == c ? (__mmask16)(1u << (j0 & 15)) : (__mmask16)0;
      const __m512i cc = _mm512_mask_sub_epi32(cv[c], own, cv[c], _mm512_set1_epi32(1));
      const unsigned has = _mm512_mask_cmpgt_epi32_mask(Lanes(n - 16 * c), cc, _mm512_setzero_si512());
      if (has) return 16 * c + 31 - __builtin_clz(has);
    }
    return -1;
  }
};
#pragma GCC pop_options
#endif

// How many tokens ahead a run fetches the counts of a word.
constexpr int32_t kFetchAhead = 4;

// A run's list in memory (any CPU; with AVX-512 the lists too long for registers): topics and
// counts in the thread's scratch, the q's read from the document's.
template <class L>
struct LidaListMemory {
  int32_t* lt;
  int32_t* lc;
  float* cum;
  const float* q;
  int32_t n = 0;

  void Load(const int32_t* tp, int32_t n_, const int32_t* nw) {
    n = n_;
    L::Load(lt, lc, tp, n, nw);
  }
  int32_t Find(int32_t k) const { return L::Find(lt, n, k); }
  int32_t Append(int32_t k, int32_t count) {
    lt[n] = k;
    lc[n] = count;
    return n++;
  }
  void Add(int32_t j, int32_t delta) { lc[j] += delta; }
  void SetQ(int32_t, float) {}  // read from the document's q's
  int32_t Topic(int32_t j) const { return lt[j]; }
  int32_t Draw(int32_t j0, float qn, float U, double bqs, LidaDraw& out) const {
    return L::Draw(q, lt, lc, n, j0, qn, U, bqs, cum, out);
  }
};

// One document by the sparse draw (LDA: theta_bar, phi_bar nullptr), `L` the list arithmetic, a run
// (the consecutive tokens of one word) at a time; records its changes as LidaDocument does.  A
// uniform below the word's part is found among the word's topics, above it among all topics (rare:
// the part is β/(β + n_vk) of a topic's mass).
template <class L>
inline void LidaSparseDocumentWith(const LidaProblem& p, int64_t d, LidaScratch& s, const int32_t* merger,
                                   const LidaWordTopics& wt) {
  const int64_t K = p.K;
  const int32_t t0 = p.doc_start[d], t1 = p.doc_start[d + 1];
  if (t1 <= t0) return;
  int32_t* row = p.n_dk + d * K;
  // K-sized scratch, sized once a sweep (LidaSweep): raw pointers, no size checks a token
  int32_t* cnt = s.cnt.data();
  int32_t* dk = s.dk.data();
  const float* nkden = wt.nkden.data();
  float* q = s.q.data();
  // q_k = α / D_k for the topics the document does not hold (the block's, no division), the others
  // computed; their sum likewise
  std::copy(row, row + K, cnt);
  std::fill(dk, dk + K, 0);
  std::copy(wt.aq.begin(), wt.aq.end(), q);
  double qsum = wt.aqsum;
  for (int64_t k = 0; k < K; ++k)
    if (cnt[k] != 0) {
      q[k] = (p.alpha + (float)cnt[k]) / nkden[k];
      qsum += (double)q[k] - (double)wt.aq[k];
    }
  const double beta = p.beta;
  const int32_t* nw = nullptr;  // the run's word's counts n_vk
  int32_t v = 0;
  // token t of the run, its list `ls`
  auto token = [&](auto& ls, int32_t t) {
    const int32_t k0 = p.z[t];
    int32_t j0 = ls.Find(k0);
    if (j0 < 0) j0 = ls.Append(k0, nw[k0]);
    // the token's own count out: q_k0 and the sum as values, stored only where the token moves (a
    // token that returns to k0 leaves them as they were); the draw reads q_k0 from a register
    --cnt[k0];
    --dk[k0];
    const float q0 = q[k0];
    const float qn = (p.alpha + (float)cnt[k0]) / (nkden[k0] + (float)dk[k0]);
    const double qs = qsum + ((double)qn - (double)q0);
    LidaDraw dr;
    int32_t j1 = ls.Draw(j0, qn, TokenUniform((uint32_t)t, p.seed), beta * qs, dr);
    ls.Add(j0, -1);
    int32_t k1;
    if (j1 >= 0) {
      k1 = ls.Topic(j1);
    } else {  // the smoothing part: β q_k over all topics
      q[k0] = qn;
      const double r = dr.u - (double)dr.acc;
      double run = 0.0;
      k1 = (int32_t)K - 1;
      for (int64_t k = 0; k < K; ++k) {
        run += beta * q[k];
        if (run > r) {
          k1 = (int32_t)k;
          break;
        }
      }
      q[k0] = q0;
      j1 = ls.Find(k1);
      if (j1 < 0) j1 = ls.Append(k1, nw[k1]);
    }
    ++cnt[k1];
    ++dk[k1];
    ls.Add(j1, 1);
    if (k1 != k0) {
      q[k0] = qn;
      ls.SetQ(j0, qn);
      const float old = q[k1];
      q[k1] = (p.alpha + (float)cnt[k1]) / (nkden[k1] + (float)dk[k1]);
      ls.SetQ(j1, q[k1]);
      qsum = qs + ((double)q[k1] - (double)old);
      LidaMove(p, s, merger, t, v, k0, k1);
    }
  };
  LidaListMemory<L> memory{s.lt.data(), s.lc.data(), s.cs.data(), q};
  for (int32_t t = t0; t < t1;) {
    v = p.word[t];
    int32_t te = t + 1;
    while (te < t1 && p.word[te] == v) ++te;
    nw = p.n_wk + (int64_t)v * K;
    const int32_t n = wt.len[v];
    const int32_t* tp = wt.topic.data() + wt.start[v];
    // fetch ahead: the counts of the word kFetchAhead tokens on and the list of the one twice as far
    // (a row asked for one run ahead was often not there in time)
    if (te + 2 * kFetchAhead < t1) __builtin_prefetch(wt.topic.data() + wt.start[p.word[te + 2 * kFetchAhead]]);
    if (te + kFetchAhead < t1) {
      const int32_t u = p.word[te + kFetchAhead];
      const int32_t* un = p.n_wk + (int64_t)u * K;
      for (int64_t k = 0; k < K; k += 16) __builtin_prefetch(un + k);
    }
    if constexpr (L::kRegs) {  // room for the list and a topic added by each token of the run
      const int32_t room = n + 2 * (te - t);
      auto in_registers = [&](auto& ls) {
        ls.Load(tp, n, nw);
        for (; t < te; ++t) token(ls, t);
      };
      if (room <= 16) {
        typename L::template Regs<1> ls(s.lt.data(), q);
        in_registers(ls);
        continue;
      }
      if (room <= 32) {
        typename L::template Regs<2> ls(s.lt.data(), q);
        in_registers(ls);
        continue;
      }
      if (room <= 48) {
        typename L::template Regs<3> ls(s.lt.data(), q);
        in_registers(ls);
        continue;
      }
      if (room <= 64) {
        typename L::template Regs<4> ls(s.lt.data(), q);
        in_registers(ls);
        continue;
      }
    }
    memory.Load(tp, n, nw);
    for (; t < te; ++t) token(memory, t);
  }
  std::copy(cnt, cnt + K, row);
}

// Whether this CPU runs the AVX-512 list arithmetic (checked once).
inline bool LidaHasAvx512() {
#ifdef TOPICJAX_LIDA_AVX512
  static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                          __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2");
  return yes;
#else
  return false;
#endif
}

#ifdef TOPICJAX_LIDA_AVX512
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,bmi,bmi2")
inline void LidaSparseDocumentAvx512(const LidaProblem& p, int64_t d, LidaScratch& s, const int32_t* merger,
                                     const LidaWordTopics& wt) {
  LidaSparseDocumentWith<LidaListAvx512>(p, d, s, merger, wt);
}
#pragma GCC pop_options
#endif

// One document by the sparse draw: the vector list arithmetic where the CPU has it and `portable`
// is false, else the portable one (the same adds in the same order, the same bits).
inline void LidaDocumentSparse(const LidaProblem& p, int64_t d, LidaScratch& s, const int32_t* merger,
                               const LidaWordTopics& wt, bool portable) {
#ifdef TOPICJAX_LIDA_AVX512
  if (!portable && LidaHasAvx512()) return LidaSparseDocumentAvx512(p, d, s, merger, wt);
#endif
  LidaSparseDocumentWith<LidaListPortable>(p, d, s, merger, wt);
}

}  // namespace topicjax
