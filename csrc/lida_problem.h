// The state a LIDA token sweep works on (csrc/lida_kernel.h, csrc/lida_sparse.h): the problem, the
// token uniforms of topicjax/lida/draw.py, the per-thread scratch and the sparse draw's word lists.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

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
  bool sparse_draw = false;     // the sparse draw (theta_bar and phi_bar nullptr only)
  bool portable_lists = false;  // the sparse draw's portable list arithmetic even where AVX-512 runs
  bool adaptive = false;        // the sparse draw, or the dense one for a sweep whose word lists are long
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
  // the sparse draw: the run's word's topics (lt) and their counts n_vk + own changes (lc)
  std::vector<int32_t> lt, lc;
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

}  // namespace topicjax
