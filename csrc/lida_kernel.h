// The parallel token sweep of the LIDA family (topicjax/lida/parallel.py), in C++.
//
// Same state, same semantics and the same random numbers as the JAX sweep with mh_steps = 0:
// documents are visited in blocks; the documents of a block are resampled in parallel (split
// between the threads), each with its own counts exact token by token (its n_kd, and its own
// changes to n_k and, within a run of one word, to n_vk); n_vk and n_k are read as they were at
// the start of the block and merged after it (AD-LDA).  A token's conditional is eq. (35)-(38)
// over the topics active in its document (θ̄_kd = 1; all K for LDA/SSTM), times φ̄_vk (LIDA/SSTM),
// drawn by inverse CDF with the uniform hash(token id, seed) of topicjax/lida/draw.py.
//
// Two draws of that conditional.  The dense draw (every variant) sums it over the active topics,
// token by token, in the XLA sweep's topic order: the same uniform picks the same topic as there.
// The sparse draw (LDA: every topic active, every word active; csrc/lida_sparse.h) splits it as
// SparseLDA does, O(topics of the word) a token instead of O(K), the word's topics kept in lists
// per word, updated where the merge moves a count to or from zero; the topics are visited in
// another order, so a uniform picks another topic than the dense draw would.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

#include "lida_problem.h"
#include "lida_sparse.h"
#include "thread_pool.h"

namespace topicjax {

// Topics per chunk of the two-level inverse CDF.
constexpr int64_t kChunk = 16;

// The sum of x[0 .. 16) as a tree (its adds are independent of one another).
inline float ChunkSum(const float* x) {
  float h[8];
  for (int l = 0; l < 8; ++l) h[l] = x[l] + x[l + 8];
  return ((h[0] + h[4]) + (h[2] + h[6])) + ((h[1] + h[5]) + (h[3] + h[7]));
}

// The first a with pr[0] + ... + pr[a] > u, found through the chunk sums; pr[a] > 0 for the a
// returned.  Where rounding leaves every partial sum <= u (u close to the total), the last topic with
// positive probability.
inline int64_t InverseCdf(const float* pr, const float* chunk, int64_t A, int64_t nch, float u) {
  float run = 0.0f;
  int64_t c = 0;
  while (c < nch && !(run + chunk[c] > u)) run += chunk[c++];
  for (int64_t a = c * kChunk; a < A; ++a) {  // from that chunk on (its sum may round apart from its terms)
    run += pr[a];
    if (run > u) return a;  // run grew past u here, so pr[a] > 0
  }
  int64_t a = A - 1;
  while (a > 0 && !(pr[a] > 0.0f)) --a;
  return a;
}

// One document: resample its tokens in order; record the (word, old, new) changes of the block,
// each in the list of the thread that merges its word (merger[word]).
inline void LidaDocument(const LidaProblem& p, int64_t d, LidaScratch& s, const int32_t* merger) {
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
  s.cs.assign((A + kChunk - 1) / kChunk * kChunk, 0.0f);  // zeros past A: whole chunks
  s.chunk.resize((A + kChunk - 1) / kChunk);
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
    if (t + 1 < t1 && p.word[t + 1] != v) {  // the next word's row is a random one: fetch it meanwhile
      const int32_t* next = p.n_wk + (int64_t)p.word[t + 1] * K;
      if (!p.theta_bar) {  // the whole row (16 counts a line)
        for (int64_t k = 0; k < K; k += 16) __builtin_prefetch(next + k);
      } else if (A <= 256) {  // the entries of the document's active topics
        for (int64_t a = 0; a < A; ++a) __builtin_prefetch(next + s.act[a]);
      }
    }
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
    // the inverse CDF in two levels: sums of 16-topic chunks (independent adds, vectorisable), the
    // chunk that holds u, then the topics inside it.  One running sum over all A topics would be a
    // chain of A dependent adds per token, the longest part of the draw at K = 100.
    const int64_t nch = (A + kChunk - 1) / kChunk;
    float* chunk = s.chunk.data();
    for (int64_t c = 0; c < nch; ++c) chunk[c] = ChunkSum(pr + c * kChunk);
    float total = 0.0f;
    for (int64_t c = 0; c < nch; ++c) total += chunk[c];
    const float u = TokenUniform((uint32_t)t, p.seed) * total;
    const int64_t j1 = InverseCdf(pr, chunk, A, nch, u);
    ++s.cnt[j1];
    ++s.dk[j1];
    ++s.dw[j1];
    refresh(j1);
    const int32_t k1 = s.act[j1];
    if (k1 != k0) LidaMove(p, s, merger, t, v, k0, k1);
  }
  for (int64_t a = 0; a < A; ++a) row[s.act[a]] = s.cnt[a];
}

// The first token (of the documents of [d0, d1)) whose ids would reach outside the arrays or whose
// topic is inactive for it, and why; {-1, nullptr} where there is none.  O(tokens of the range).
struct LidaBadToken {
  int64_t token = -1;
  const char* why = nullptr;
};

inline LidaBadToken LidaCheckDocuments(const LidaProblem& p, int64_t d0, int64_t d1) {
  for (int64_t d = d0; d < d1; ++d) {
    const bool* tb = p.theta_bar ? p.theta_bar + d * p.K : nullptr;
    for (int32_t t = p.doc_start[d]; t < p.doc_start[d + 1]; ++t) {
      const int32_t v = p.word[t], k = p.z[t];
      if (v < 0 || v >= p.V) return {t, "has a word id outside [0, V)"};
      if (k < 0 || k >= p.K) return {t, "has a topic outside [0, K)"};
      if (p.phi_bar && !p.phi_bar[(int64_t)v * p.K + k]) return {t, "holds a topic in which its word is not active"};
      if (tb && !tb[k]) return {t, "holds a topic that is not active in its document"};
    }
  }
  return {};
}

// The whole sweep: blocks in order, the documents of a block claimed by the pool's threads a few at a
// time, the word-topic changes merged after every block (split between the threads by word).  The
// sparse draw's word lists (`wt`) are built here from n_wk and kept by the merge in increasing topic
// order: what they hold after a block does not depend on the order of its changes, so the draws do
// not depend on the number of threads or on which thread swept which document.
inline void LidaSweep(const LidaProblem& p, ThreadPool& pool, std::vector<LidaScratch>& scratch, LidaWordTopics& wt) {
  const int nt = pool.size();
  scratch.resize(nt);
  for (auto& s : scratch) {
    s.pos_of.assign(p.K, 0);
    s.nk_delta.assign(p.K, 0);
    s.out.resize(nt);
    for (auto& o : s.out) o.list.clear();
    if (p.sparse_draw) {  // the sparse draw's K-sized scratch (LidaDocumentSparse)
      // whole vectors of 16 past the list (the AVX-512 code stores them), 64 for register-held lists
      s.lt.assign(std::max<int64_t>(p.K, 64) + 16, 0);
      s.lc.assign(std::max<int64_t>(p.K, 64) + 16, 0);
      s.cnt.assign(p.K, 0);
      s.dk.assign(p.K, 0);
      s.q.assign(p.K, 0.0f);
      s.cs.assign(p.K, 0.0f);
    }
  }
  bool lists = p.sparse_draw;
  if (lists) {  // room for min(K, tokens of the word) topics a word; the topics in increasing order
    wt.overflow = false;
    wt.len.assign(p.V, 0);
    wt.start.assign(p.V + 1, 0);
    pool.run([&](int th) {
      for (int64_t v = p.V * th / nt; v < p.V * (th + 1) / nt; ++v) {
        const int32_t* r = p.n_wk + v * p.K;
        int64_t tot = 0;
        for (int64_t k = 0; k < p.K; ++k) tot += std::max(r[k], 0);
        wt.start[v + 1] = std::min<int64_t>(p.K, tot);
      }
    });
    for (int64_t v = 0; v < p.V; ++v) wt.start[v + 1] += wt.start[v];
    wt.topic.resize(wt.start[p.V]);
    std::vector<double> held(nt, 0.0);  // Σ over a thread's words of tokens x topics held
    pool.run([&](int th) {
      for (int64_t v = p.V * th / nt; v < p.V * (th + 1) / nt; ++v) {
        const int32_t* r = p.n_wk + v * p.K;
        int32_t* out = wt.topic.data() + wt.start[v];
        const int64_t room = wt.start[v + 1] - wt.start[v];
        int32_t n = 0;
        int64_t tot = 0;
        for (int64_t k = 0; k < p.K; ++k) {
          tot += std::max(r[k], 0);
          if (r[k] > 0 && n < room) out[n++] = (int32_t)k;
        }
        wt.len[v] = n;
        held[th] += (double)tot * (double)n;
      }
    });
    // adaptive: where a token's word holds more than a third of the topics on average (a chain's
    // first sweeps; a few words holding most tokens), the dense draw's contiguous pass over the K
    // topics costs less than the lists' gathers; the lists are rebuilt at the next sweep's start
    double total = 0.0;
    for (double h : held) total += h;
    if (p.adaptive && 3.0 * total > (double)p.K * (double)p.N) lists = false;
  }
  // thread th merges the words of [V th / nt, V (th + 1) / nt)
  std::vector<int32_t> merger(p.V);
  for (int64_t v = 0; v < p.V; ++v) merger[v] = (int32_t)(v * nt / p.V);
  std::vector<int64_t> members;
  for (int64_t b = 0; b < p.nb; ++b) {
    members.clear();
    for (int64_t c = 0; c < p.C; ++c) {
      const int64_t d = p.blocks[b * p.C + c];
      if (d >= 0 && d < p.D) members.push_back(d);
    }
    if (lists) {  // the block's denominators (n_k as at its start) for the sparse draw
      wt.nkden.resize(p.K);
      wt.aq.resize(p.K);
      wt.aqsum = 0.0;
      for (int64_t k = 0; k < p.K; ++k) {
        wt.nkden[k] = p.den[k] + (float)p.n_k[k];
        wt.aq[k] = p.alpha / wt.nkden[k];
        wt.aqsum += wt.aq[k];
      }
    }
    // the documents claimed by the threads a few at a time as they free up (a thread slowed down,
    // by another process say, does not hold the block back); which thread sweeps a document does
    // not change its draws, and the merge's integer adds and sorted word lists do not depend on
    // the order of the changes
    const int64_t n = (int64_t)members.size();
    const int64_t grain = std::max<int64_t>(1, n / (8 * (int64_t)nt));
    std::atomic<int64_t> next{0};
    pool.run([&](int th) {
      LidaScratch& s = scratch[th];
      for (;;) {
        const int64_t m0 = next.fetch_add(grain, std::memory_order_relaxed);
        if (m0 >= n) break;
        const int64_t m1 = std::min(n, m0 + grain);
        if (lists)
          for (int64_t m = m0; m < m1; ++m) LidaDocumentSparse(p, members[m], s, merger.data(), wt, p.portable_lists);
        else
          for (int64_t m = m0; m < m1; ++m) LidaDocument(p, members[m], s, merger.data());
      }
    });
    // the merge, in parallel by word (integer adds: the same counts for any split)
    pool.run([&](int th) {
      for (auto& s : scratch) {
        const auto& list = s.out[th].list;
        const int64_t n = (int64_t)list.size();
        for (int64_t i = 0; i < n; ++i) {
          const LidaChange& c = list[i];
          if (i + 8 < n) {  // random rows: ask for the lines of a later change ahead of time
            const LidaChange& f = list[i + 8];
            __builtin_prefetch(p.n_wk + (int64_t)f.word * p.K + f.from, 1);
            __builtin_prefetch(p.n_wk + (int64_t)f.word * p.K + f.to, 1);
          }
          int32_t* r = p.n_wk + (int64_t)c.word * p.K;
          if (--r[c.from] == 0 && lists) {  // the word no longer holds the topic: out of its (sorted) list
            int32_t* tp = wt.topic.data() + wt.start[c.word];
            int32_t& len = wt.len[c.word];
            int32_t j = 0;
            while (j < len && tp[j] != c.from) ++j;
            if (j < len) {
              std::copy(tp + j + 1, tp + len, tp + j);
              --len;
            }
          }
          if (++r[c.to] == 1 && lists) {  // a topic new to the word: into its list, in order
            int32_t* tp = wt.topic.data() + wt.start[c.word];
            int32_t& len = wt.len[c.word];
            if (wt.start[c.word] + len < wt.start[c.word + 1]) {
              int32_t j = len;
              while (j > 0 && tp[j - 1] > c.to) --j;
              std::copy_backward(tp + j, tp + len, tp + len + 1);
              tp[j] = c.to;
              ++len;
            } else {
              wt.overflow = true;
            }
          }
        }
        s.out[th].list.clear();
      }
    });
    for (auto& s : scratch)
      for (int64_t k = 0; k < p.K; ++k) {
        p.n_k[k] += s.nk_delta[k];
        s.nk_delta[k] = 0;
      }
  }
}

}  // namespace topicjax
