// XLA FFI handler for the parallel LIDA-family token sweep (lida_kernel.h).  It is part of the
// extension module of estep_ffi.cc, which hands it to JAX (topicjax/lida/kernel.py registers it
// through topicjax.core.kernels) and shares its thread pool and thread count (engine.h).
//
//   topicjax_lida_sweep  word (N,), doc_start (D+1,), z (N,), n_dk (D, K), n_wk (V, K), n_k (K,),
//                        theta_bar (D, K) bool, phi_bar (V, K) bool, den (K,) f32, blocks (nb, C),
//                        alpha (), beta () f32, seed () u32
//                        -> z, n_dk, n_wk, n_k (aliased to the inputs)
//   attributes: focused (θ̄ read), sparse (φ̄ read), draw (0: the dense draw, the XLA sweep's
//   uniform-to-topic map; 1: the sparse draw, LDA only: focused = sparse = 0, its vector list
//   arithmetic where the CPU has AVX-512; 2: the sparse draw with its portable list arithmetic, the
//   same bits: for tests; 3: adaptive, the sparse draw or, for a sweep whose word lists are long,
//   the dense one).
//   topicjax_count_histogram  values (any shape) s32 -> hist (L,) s32: hist[c] = the number of values
//                        equal to c, for 0 <= c < L (others dropped); the count tables' histograms of
//                        the hyperparameter step (topicjax/lida/hyper.py), which XLA's scatter-add
//                        takes ~3 ns a value for (one value at a time per bin).
//
// Calls are serialised by the engine's mutex: each call uses the whole thread pool.
#include <algorithm>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "engine.h"
#include "lida_kernel.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

ffi::Error Invalid(const std::string& msg) { return ffi::Error::InvalidArgument("topicjax LIDA kernel: " + msg); }

template <typename B>
void CopyIfApart(const B& in, ffi::Result<B>& out) {
  if (in.untyped_data() != out->untyped_data()) std::memcpy(out->untyped_data(), in.untyped_data(), in.size_bytes());
}

ffi::Error Sweep(ffi::Buffer<ffi::S32> word, ffi::Buffer<ffi::S32> doc_start, ffi::Buffer<ffi::S32> z,
                 ffi::Buffer<ffi::S32> n_dk, ffi::Buffer<ffi::S32> n_wk, ffi::Buffer<ffi::S32> n_k,
                 ffi::Buffer<ffi::PRED> theta_bar, ffi::Buffer<ffi::PRED> phi_bar, ffi::Buffer<ffi::F32> den,
                 ffi::Buffer<ffi::S32> blocks, ffi::Buffer<ffi::F32> alpha, ffi::Buffer<ffi::F32> beta,
                 ffi::Buffer<ffi::U32> seed, ffi::Result<ffi::Buffer<ffi::S32>> z_out,
                 ffi::Result<ffi::Buffer<ffi::S32>> n_dk_out, ffi::Result<ffi::Buffer<ffi::S32>> n_wk_out,
                 ffi::Result<ffi::Buffer<ffi::S32>> n_k_out, int32_t focused, int32_t sparse,
                 int32_t draw) {
  auto dk = n_dk.dimensions(), wk = n_wk.dimensions(), bd = blocks.dimensions();
  if (dk.size() != 2 || wk.size() != 2 || bd.size() != 2) return Invalid("n_dk, n_wk and blocks must be matrices");
  topicjax::LidaProblem p;
  p.N = (int64_t)word.element_count();
  p.D = dk[0];
  p.K = dk[1];
  p.V = wk[0];
  if (wk[1] != p.K || (int64_t)n_k.element_count() != p.K || (int64_t)den.element_count() != p.K)
    return Invalid("n_dk, n_wk, n_k and den disagree on the number of topics");
  if ((int64_t)z.element_count() != p.N || (int64_t)doc_start.element_count() != p.D + 1)
    return Invalid("z must have one entry per token and doc_start D + 1 entries");
  if (theta_bar.dimensions().size() != 2 || theta_bar.dimensions()[0] != p.D || theta_bar.dimensions()[1] != p.K ||
      phi_bar.dimensions().size() != 2 || phi_bar.dimensions()[0] != p.V || phi_bar.dimensions()[1] != p.K)
    return Invalid("theta_bar must be (D, K) and phi_bar (V, K)");
  if (draw < 0 || draw > 3)
    return Invalid("draw must be 0 (dense), 1 (sparse), 2 (sparse, portable) or 3 (sparse or dense by sweep)");
  if (draw != 0 && (focused || sparse)) return Invalid("the sparse draw is for LDA only (focused = sparse = 0)");
  CopyIfApart(z, z_out);
  CopyIfApart(n_dk, n_dk_out);
  CopyIfApart(n_wk, n_wk_out);
  CopyIfApart(n_k, n_k_out);
  p.word = word.typed_data();
  p.doc_start = doc_start.typed_data();
  p.z = z_out->typed_data();
  p.n_dk = n_dk_out->typed_data();
  p.n_wk = n_wk_out->typed_data();
  p.n_k = n_k_out->typed_data();
  p.theta_bar = focused ? theta_bar.typed_data() : nullptr;
  p.phi_bar = sparse ? phi_bar.typed_data() : nullptr;
  p.den = den.typed_data();
  p.blocks = blocks.typed_data();
  p.nb = bd[0];
  p.C = bd[1];
  p.alpha = alpha.typed_data()[0];
  p.beta = beta.typed_data()[0];
  p.seed = seed.typed_data()[0];
  p.sparse_draw = draw != 0;
  p.portable_lists = draw == 2;
  p.adaptive = draw == 3;
  for (int64_t d = 0; d < p.D; ++d)
    if (p.doc_start[d] < 0 || p.doc_start[d] > p.doc_start[d + 1] || p.doc_start[d + 1] > p.N)
      return Invalid("doc_start is not increasing within [0, N]");
  try {
    topicjax::Engine& e = topicjax::engine();
    std::lock_guard<std::mutex> lock(e.mu);
    topicjax::ThreadPool& pool = e.get_pool();
    // bad ids would write outside the arrays: checked once (O(N), split between the threads)
    const int nt = pool.size();
    std::vector<topicjax::LidaBadToken> bad(nt);
    pool.run([&](int th) { bad[th] = topicjax::LidaCheckDocuments(p, p.D * th / nt, p.D * (th + 1) / nt); });
    for (const auto& b : bad)  // the first thread's range comes first: its bad token is the first one
      if (b.token >= 0) return Invalid("token " + std::to_string(b.token) + " " + b.why);
    topicjax::LidaSweep(p, pool, e.lida_scratch, e.lida_words);
    if (p.sparse_draw && e.lida_words.overflow)
      return Invalid("n_wk disagrees with the tokens (a word holds more topics than it has tokens)");
  } catch (const std::bad_alloc&) {
    return ffi::Error(ffi::ErrorCode::kResourceExhausted, "topicjax LIDA kernel: out of memory");
  }
  return ffi::Error::Success();
}

ffi::Error CountHistogram(ffi::Buffer<ffi::S32> values, ffi::Result<ffi::Buffer<ffi::S32>> hist) {
  const int64_t n = (int64_t)values.element_count();
  const int64_t L = (int64_t)hist->element_count();
  const int32_t* v = values.typed_data();
  int32_t* h = hist->typed_data();
  std::fill(h, h + L, 0);
  if (L == 0 || n == 0) return ffi::Error::Success();
  // Most cells of a count table hold 0 or a few tokens, so consecutive values hit the same bins, and
  // each increment would wait for the one before (store-to-load forwarding): small values go to four
  // interleaved copies of the first bins (on the stack), summed at the end.  A value is seen as
  // unsigned: negatives become large and are dropped with the values >= L.
  auto count = [v, L](int64_t lo, int64_t hi, int32_t* out) {
    constexpr int kLanes = 4;
    constexpr uint32_t kSmall = 256;
    int32_t small[kLanes][kSmall] = {};
    auto one = [&](int lane, uint32_t x) {
      if (x < kSmall)
        ++small[lane][x];
      else if ((int64_t)x < L)
        ++out[x];
    };
    int64_t i = lo;
    for (; i + kLanes <= hi; i += kLanes)
      for (int r = 0; r < kLanes; ++r) one(r, (uint32_t)v[i + r]);
    for (; i < hi; ++i) one(0, (uint32_t)v[i]);
    for (int64_t c = 0; c < std::min<int64_t>(kSmall, L); ++c)
      out[c] += small[0][c] + small[1][c] + small[2][c] + small[3][c];
  };
  try {
    topicjax::Engine& e = topicjax::engine();
    std::lock_guard<std::mutex> lock(e.mu);
    topicjax::ThreadPool& pool = e.get_pool();
    const int nt = pool.size();
    // a thread's share must outweigh its own histogram's zeroing and summing
    if (nt == 1 || n < 8 * L || n < (1 << 16)) {
      count(0, n, h);
      return ffi::Error::Success();
    }
    std::vector<int32_t> part((size_t)(nt - 1) * (size_t)L, 0);
    pool.run([&](int th) { count(n * th / nt, n * (th + 1) / nt, th == 0 ? h : part.data() + (size_t)(th - 1) * L); });
    for (int th = 1; th < nt; ++th) {
      const int32_t* p = part.data() + (size_t)(th - 1) * L;
      for (int64_t c = 0; c < L; ++c) h[c] += p[c];
    }
  } catch (const std::bad_alloc&) {
    return ffi::Error(ffi::ErrorCode::kResourceExhausted, "topicjax count histogram: out of memory");
  }
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(TopicjaxCountHistogram, CountHistogram,
                              ffi::Ffi::Bind().Arg<ffi::Buffer<ffi::S32>>().Ret<ffi::Buffer<ffi::S32>>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(TopicjaxLidaSweep, Sweep,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::PRED>>()
                                  .Arg<ffi::Buffer<ffi::PRED>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Ret<ffi::Buffer<ffi::S32>>()
                                  .Ret<ffi::Buffer<ffi::S32>>()
                                  .Ret<ffi::Buffer<ffi::S32>>()
                                  .Ret<ffi::Buffer<ffi::S32>>()
                                  .Attr<int32_t>("focused")
                                  .Attr<int32_t>("sparse")
                                  .Attr<int32_t>("draw"));
