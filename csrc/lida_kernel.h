// The parallel token sweep of the LIDA family (topicjax/lida/parallel.py), in C++.
//
// Same state, same semantics and the same random numbers as the JAX sweep with mh_steps = 0:
// documents are visited in blocks; the documents of a block are resampled in parallel (split
// between the threads), each with its own counts exact token by token (its n_kd, and its own
// changes to n_k and, within a run of one word, to n_vk); n_vk and n_k are read as they were at
// the start of the block and merged after it (AD-LDA).  A token's conditional is eq. (35)-(38)
// over the topics active in its document (θ̄_kd = 1; all K for LDA/SSTM), times φ̄_vk (LIDA/SSTM),
// drawn by inverse CDF with the uniform hash(token id, seed) of topicjax/lida/draw.py.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "split.h"
#include "thread_pool.h"

namespace topicjax {

struct LidaProblem {
  int64_t N, D, K, V;
  const int32_t* word;       // (N,) tokens sorted by document
  const int32_t* doc_start;  // (D + 1,) first token of every document
  int32_t* z;                // (N,) slot of every token (in place)
  int32_t* n_dk;             // (D, K) (in place)
  int32_t* n_wk;             // (V, K) (in place)
  int32_t* n_k;              // (K,) (in place)
  const bool* theta_bar;     // (D, K) or nullptr (every topic active)
  const bool* phi_bar;       // (V, K) or nullptr (every word active)
  const float* den;          // (K,) φ̄_·k β or W β
  const int32_t* blocks;     // (nb, C) documents of every block, >= D: padding
  int64_t nb, C;
  float alpha, beta;
  uint32_t seed;
};

inline uint32_t Mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7FEB352Du;
  x ^= x >> 15;
  x *= 0x846CA68Bu;
  return x ^ (x >> 16);
}

// token_uniform(token, seed, 0) of topicjax/lida/draw.py
inline float TokenUniform(uint32_t token, uint32_t seed) {
  uint32_t h = Mix32((token * 0x9E3779B9u) ^ seed);
  uint32_t b = Mix32(h ^ 0x85EBCA6Bu);
  return float(b >> 8) * (1.0f / 16777216.0f);
}

struct LidaChange {
  int32_t word, from, to;
};

struct LidaScratch {
  std::vector<int32_t> act, cnt, dk, dw, pos_of;
  std::vector<float> nkden, q, cs;
  std::vector<LidaChange> changes;
};

// One document: resample its tokens in order; record the (word, old, new) changes of the block.
inline void LidaDocument(const LidaProblem& p, int64_t d, LidaScratch& s) {
  const int64_t K = p.K;
  const int32_t t0 = p.doc_start[d], t1 = p.doc_start[d + 1];
  if (t1 <= t0) return;
  // the document's active list (increasing slots) and its counts on it
  s.act.clear();
  if (p.theta_bar) {
    const bool* tb = p.theta_bar + d * K;
    for (int64_t k = 0; k < K; ++k)
      if (tb[k]) s.act.push_back((int32_t)k);
  } else {
    for (int64_t k = 0; k < K; ++k) s.act.push_back((int32_t)k);
  }
  const int64_t A = (int64_t)s.act.size();
  s.cnt.assign(A, 0);
  s.dk.assign(A, 0);
  s.dw.assign(A, 0);
  s.nkden.resize(A);
  s.q.resize(A);
  s.cs.resize(A);
  int32_t* row = p.n_dk + d * K;
  for (int64_t a = 0; a < A; ++a) {
    const int32_t k = s.act[a];
    s.pos_of[k] = (int32_t)a;
    s.cnt[a] = row[k];
    s.nkden[a] = p.den[k] + (float)p.n_k[k];
  }
  // q[a] = (α + n_kd) / (den_k + n_k + own change): refreshed where a count moves
  auto refresh = [&](int64_t a) { s.q[a] = (p.alpha + (float)s.cnt[a]) / (s.nkden[a] + (float)s.dk[a]); };
  for (int64_t a = 0; a < A; ++a) refresh(a);
  for (int32_t t = t0; t < t1; ++t) {
    const int32_t v = p.word[t];
    if (t == t0 || p.word[t - 1] != v) std::fill(s.dw.begin(), s.dw.end(), 0);  // a new run
    const int32_t k0 = p.z[t];
    const int32_t j0 = s.pos_of[k0];
    --s.cnt[j0];
    --s.dk[j0];
    --s.dw[j0];
    refresh(j0);
    const int32_t* nw = p.n_wk + (int64_t)v * K;
    const bool* pb = p.phi_bar ? p.phi_bar + (int64_t)v * K : nullptr;
    float* pr = s.cs.data();
    const float* q = s.q.data();
    const int32_t* dw = s.dw.data();
    if (!p.theta_bar) {  // every topic active: contiguous rows, a loop the compiler vectorises
      for (int64_t a = 0; a < A; ++a) pr[a] = q[a] * (p.beta + (float)(nw[a] + dw[a]));
      if (pb)
        for (int64_t a = 0; a < A; ++a) pr[a] = pb[a] ? pr[a] : 0.0f;
    } else {
      const int32_t* act = s.act.data();
      for (int64_t a = 0; a < A; ++a) {
        const int32_t k = act[a];
        const float pa = q[a] * (p.beta + (float)(nw[k] + dw[a]));
        pr[a] = (pb && !pb[k]) ? 0.0f : pa;
      }
    }
    // total in 8 independent partial sums (vectorisable), then the inverse CDF by a running sum
    float part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t a8 = A - A % 8;
    for (int64_t a = 0; a < a8; a += 8)
      for (int l = 0; l < 8; ++l) part[l] += pr[a + l];
    float total = ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
    for (int64_t a = a8; a < A; ++a) total += pr[a];
    const float u = TokenUniform((uint32_t)t, p.seed) * total;
    int64_t j1 = 0, last = -1;
    float run = 0.0f;
    for (; j1 < A; ++j1) {
      if (pr[j1] > 0.0f) last = j1;
      run += pr[j1];
      if (run > u) break;
    }
    if (j1 >= A) j1 = last;  // u rounded up to the total: the last topic with positive probability
    ++s.cnt[j1];
    ++s.dk[j1];
    ++s.dw[j1];
    refresh(j1);
    const int32_t k1 = s.act[j1];
    if (k1 != k0) {
      p.z[t] = k1;
      s.changes.push_back({v, k0, k1});
    }
  }
  for (int64_t a = 0; a < A; ++a) row[s.act[a]] = s.cnt[a];
}

// The whole sweep: blocks in order, the documents of a block split between the pool's threads
// (contiguous shares of about equal tokens), the word-topic changes merged after every block.
inline void LidaSweep(const LidaProblem& p, ThreadPool& pool, std::vector<LidaScratch>& scratch) {
  const int nt = pool.size();
  scratch.resize(nt);
  for (auto& s : scratch) s.pos_of.assign(p.K, 0);
  std::vector<int64_t> members, weight;
  for (int64_t b = 0; b < p.nb; ++b) {
    members.clear();
    weight.clear();
    for (int64_t c = 0; c < p.C; ++c) {
      const int64_t d = p.blocks[b * p.C + c];
      if (d >= 0 && d < p.D) {
        members.push_back(d);
        weight.push_back(p.doc_start[d + 1] - p.doc_start[d]);
      }
    }
    // contiguous shares of about equal tokens; the draws do not depend on where the cuts fall
    const int64_t n = (int64_t)members.size();
    const std::vector<int64_t> cut = SplitByWeight(weight, nullptr, n, n, nt).row_cut;
    pool.run([&](int th) {
      LidaScratch& s = scratch[th];
      s.changes.clear();
      for (int64_t m = cut[th]; m < cut[th + 1]; ++m) LidaDocument(p, members[m], s);
    });
    for (auto& s : scratch)
      for (const auto& c : s.changes) {
        --p.n_wk[(int64_t)c.word * p.K + c.from];
        ++p.n_wk[(int64_t)c.word * p.K + c.to];
        --p.n_k[c.from];
        ++p.n_k[c.to];
      }
  }
}

}  // namespace topicjax
