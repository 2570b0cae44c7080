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
// The sparse draw (LDA: every topic active, every word active) splits it as SparseLDA does (Yao,
// Mimno & McCallum 2009):
//     (α + n_kd)(β + n_vk) / D_k  =  β q_k  +  q_k n_vk,      q_k = (α + n_kd) / D_k,
// with Σ_k q_k kept up to date as counts move (O(1) a token) and the second term summed over the
// topics the word holds (n_vk > 0: lists kept per word, updated where the merge moves a count to
// or from zero).  The same conditional, O(topics of the word) a token instead of O(K); the topics
// are visited in another order, so a uniform picks another topic than the dense draw would.
#pragma once

#include <algorithm>
#include <atomic>
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
  bool sparse_draw = false;  // the sparse draw (theta_bar and phi_bar nullptr only)
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

struct LidaChange {
  int32_t word, from, to;
};

// A list of changes on cache lines of its own: its header changes at every change recorded.
struct alignas(64) LidaChanges {
  std::vector<LidaChange> list;
};

// One per thread, each on its own cache lines: headers of neighbouring threads' vectors on one line
// would bounce it between the cores at every token.
struct alignas(64) LidaScratch {
  std::vector<int32_t> act, cnt, dk, dw, pos_of;
  std::vector<int32_t> nk_delta;                 // this thread's changes to n_k in the block
  std::vector<LidaChanges> out;                  // its changes to n_vk, by the thread that merges them
  std::vector<float> nkden, q, cs, chunk;
  // the sparse draw: the run's word's topics (lt), their counts n_vk + own changes (lc), where a
  // topic sits in them (lpos, valid where lstamp is the run's number)
  std::vector<int32_t> lt, lc, lpos, lstamp;
  int32_t run = 0;
};

// The topics with n_vk > 0 of every word (the sparse draw), in no particular order: word v's are
// topic[start[v] .. start[v] + len[v]).  A word holds at most min(K, its tokens) topics, so the
// lists take at most min(V K, N) entries.
struct LidaWordTopics {
  std::vector<int64_t> start;  // (V + 1,)
  std::vector<int32_t> len;    // (V,)
  std::vector<int32_t> topic;
  std::atomic<bool> overflow{false};  // a list outgrew its room: n_wk disagrees with the tokens
  // a block's D_k = den_k + n_k, α / D_k (q_k of a topic the document does not hold) and their sum
  std::vector<float> nkden, aq;
  double aqsum = 0.0;
};

// Token t (word v) moved from topic k0 to k1: its assignment, and the change of the block recorded
// in the list of the thread that merges v and in this thread's n_k changes.
inline void LidaMove(const LidaProblem& p, LidaScratch& s, const int32_t* merger, int32_t t, int32_t v, int32_t k0,
                     int32_t k1) {
  p.z[t] = k1;
  s.out[merger[v]].list.push_back({v, k0, k1});
  --s.nk_delta[k0];
  ++s.nk_delta[k1];
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

// One document by the sparse draw (LDA: theta_bar, phi_bar nullptr); records changes as
// LidaDocument does.  The conditional of a token is split into β Σ_k q_k (all topics, its sum
// kept as counts move, in double) and Σ_{k: n_vk > 0} q_k n_vk (the word's topics); a uniform
// below the second part is found among the word's topics (two-level inverse CDF), above it among
// all topics (rare: the part is β/(β + n_vk) of a topic's mass).
inline void LidaDocumentSparse(const LidaProblem& p, int64_t d, LidaScratch& s, const int32_t* merger,
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
  int32_t* lt = s.lt.data();
  int32_t* lc = s.lc.data();
  int32_t* lpos = s.lpos.data();
  int32_t* lstamp = s.lstamp.data();
  float* cum = s.cs.data();
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
  // q_k refreshed where a count moves, its sum with it
  auto refresh = [&](int64_t k) {
    const float old = q[k];
    q[k] = (p.alpha + (float)cnt[k]) / (nkden[k] + (float)dk[k]);
    qsum += (double)q[k] - (double)old;
  };
  int32_t n = 0;  // topics in the run's list
  const int32_t* nw = nullptr;
  // where topic k sits in the run's list (added with its count n_vk where it is not yet there)
  auto slot = [&](int32_t k) -> int32_t {
    if (lstamp[k] == s.run) return lpos[k];
    lstamp[k] = s.run;
    lt[n] = k;
    lc[n] = nw[k];
    lpos[k] = n;
    return n++;
  };
  const double beta = p.beta;
  for (int32_t t = t0; t < t1; ++t) {
    const int32_t v = p.word[t];
    if (t == t0 || p.word[t - 1] != v) {  // a new run: the word's topics and their counts
      ++s.run;
      n = 0;
      nw = p.n_wk + (int64_t)v * K;
      const int32_t* tp = wt.topic.data() + wt.start[v];
      for (int32_t j = 0, m = wt.len[v]; j < m; ++j) {
        const int32_t k = tp[j];
        lstamp[k] = s.run;
        lt[j] = k;
        lc[j] = nw[k];
        lpos[k] = j;
      }
      n = wt.len[v];
      // fetch ahead: the list of the word two tokens on, and the counts of the next word's topics
      // (its list was fetched a run ago): reading a list just asked for would wait on it
      if (t + 2 < t1) __builtin_prefetch(wt.topic.data() + wt.start[p.word[t + 2]]);
      if (t + 1 < t1 && p.word[t + 1] != v) {
        const int32_t u = p.word[t + 1];
        const int32_t* ut = wt.topic.data() + wt.start[u];
        const int32_t* un = p.n_wk + (int64_t)u * K;
        const int32_t m = wt.len[u];
        if (m <= 16)
          for (int32_t j = 0; j < m; ++j) __builtin_prefetch(un + ut[j]);
        else
          for (int64_t k = 0; k < K; k += 16) __builtin_prefetch(un + k);
      }
    }
    const int32_t k0 = p.z[t];
    // the token's own count out: kept to restore where it returns to k0 (most tokens, once a chain
    // has mixed), which saves the second division and keeps the sum from drifting
    const float q0 = q[k0];
    const double qsum0 = qsum;
    --cnt[k0];
    --dk[k0];
    refresh(k0);
    const int32_t j0 = slot(k0);
    --lc[j0];
    // the word's part, q_k (n_vk + own changes), as a running sum over the list
    float acc = 0.0f;
    for (int32_t j = 0; j < n; ++j) {
      acc += q[lt[j]] * (float)lc[j];
      cum[j] = acc;
    }
    const double u = (double)TokenUniform((uint32_t)t, p.seed) * ((double)acc + beta * qsum);
    int32_t k1 = -1;
    if (u < (double)acc) {
      const float uf = (float)u;
      for (int32_t j = 0; j < n; ++j)
        if (cum[j] > uf) {
          k1 = lt[j];
          break;
        }
      if (k1 < 0)  // uf rounded up to the total: the last topic with mass
        for (int32_t j = n - 1; j >= 0 && k1 < 0; --j)
          if (lc[j] > 0) k1 = lt[j];
    }
    if (k1 < 0) {  // the smoothing part: β q_k over all topics
      const double r = u - (double)acc;
      double run = 0.0;
      k1 = (int32_t)K - 1;
      for (int64_t k = 0; k < K; ++k) {
        run += beta * q[k];
        if (run > r) {
          k1 = (int32_t)k;
          break;
        }
      }
    }
    ++cnt[k1];
    ++dk[k1];
    if (k1 == k0) {
      q[k0] = q0;
      qsum = qsum0;
      ++lc[j0];
    } else {
      refresh(k1);
      ++lc[slot(k1)];
      LidaMove(p, s, merger, t, v, k0, k1);
    }
  }
  std::copy(cnt, cnt + K, row);
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

// The whole sweep: blocks in order, the documents of a block split between the pool's threads
// (contiguous shares of about equal tokens), the word-topic changes merged after every block (split
// between the threads by word).  The sparse draw's word lists (`wt`) are built here from n_wk and
// kept by the merge; their order depends on the changes in document order only, so the draws do
// not depend on the number of threads.
inline void LidaSweep(const LidaProblem& p, ThreadPool& pool, std::vector<LidaScratch>& scratch, LidaWordTopics& wt) {
  const int nt = pool.size();
  scratch.resize(nt);
  for (auto& s : scratch) {
    s.pos_of.assign(p.K, 0);
    s.nk_delta.assign(p.K, 0);
    s.out.resize(nt);
    for (auto& o : s.out) o.list.clear();
    if (p.sparse_draw) {  // the sparse draw's K-sized scratch (LidaDocumentSparse)
      s.lstamp.assign(p.K, -1);
      s.lpos.assign(p.K, 0);
      s.lt.assign(p.K, 0);
      s.lc.assign(p.K, 0);
      s.cnt.assign(p.K, 0);
      s.dk.assign(p.K, 0);
      s.q.assign(p.K, 0.0f);
      s.cs.assign(p.K, 0.0f);
      s.run = 0;
    }
  }
  const bool lists = p.sparse_draw;
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
    pool.run([&](int th) {
      for (int64_t v = p.V * th / nt; v < p.V * (th + 1) / nt; ++v) {
        const int32_t* r = p.n_wk + v * p.K;
        int32_t* out = wt.topic.data() + wt.start[v];
        const int64_t room = wt.start[v + 1] - wt.start[v];
        int32_t n = 0;
        for (int64_t k = 0; k < p.K && n < room; ++k)
          if (r[k] > 0) out[n++] = (int32_t)k;
        wt.len[v] = n;
      }
    });
  }
  // thread th merges the words of [V th / nt, V (th + 1) / nt)
  std::vector<int32_t> merger(p.V);
  for (int64_t v = 0; v < p.V; ++v) merger[v] = (int32_t)(v * nt / p.V);
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
    // contiguous shares of about equal tokens; the draws do not depend on where the cuts fall
    const int64_t n = (int64_t)members.size();
    const std::vector<int64_t> cut = SplitByWeight(weight, nullptr, n, n, nt).row_cut;
    pool.run([&](int th) {
      LidaScratch& s = scratch[th];
      if (lists)
        for (int64_t m = cut[th]; m < cut[th + 1]; ++m) LidaDocumentSparse(p, members[m], s, merger.data(), wt);
      else
        for (int64_t m = cut[th]; m < cut[th + 1]; ++m) LidaDocument(p, members[m], s, merger.data());
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
          if (--r[c.from] == 0 && lists) {  // the word no longer holds the topic: out of its list
            int32_t* tp = wt.topic.data() + wt.start[c.word];
            int32_t& n = wt.len[c.word];
            for (int32_t j = 0; j < n; ++j)
              if (tp[j] == c.from) {
                tp[j] = tp[--n];
                break;
              }
          }
          if (++r[c.to] == 1 && lists) {  // a topic new to the word: into its list
            if (wt.start[c.word] + wt.len[c.word] < wt.start[c.word + 1])
              wt.topic[wt.start[c.word] + wt.len[c.word]++] = c.to;
            else
              wt.overflow = true;
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
