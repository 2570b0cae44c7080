// XLA FFI handlers of the PTM kernels (ptm_kernel.h), registered with the E-step's handlers by
// the module in estep_ffi.cc (topicjax/ptm/kernels.py calls them).  float32 throughout.
//
//   topicjax_ptm_estep   B (N, P), a (D, P), document rows (item (C, R), word (C, R, W),
//                        count), word rows (item, pos: the entry's document slot)
//                        -> g (N, P), ll (D,), s1 (D, P), s2 (D, P)
//                        attributes tiny, cap
//   topicjax_ptm_trials  B (N, P), a (D, P), vv (D, P) bool, cand (D, K) int32, t_start (D, K),
//                        document rows (item, word, count)
//                        -> dl (D, K), t (D, K), variant (D, K) int32, s1 (D, P), s2 (D, P)
//                        attributes n_on, newton_iters, tiny, cap, t_max
//   topicjax_ptm_smallest x (n,) -> values (K,), indices (K,) int32: the K smallest finite
//                        negative entries in increasing order (ptm::SmallestNegatives)
#include <mutex>
#include <string>
#include <vector>

#include "engine.h"
#include "ptm_kernel.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

using topicjax::ptm::PtmBadInput;
using topicjax::ptm::RowLayout;

ffi::Error Invalid(const std::string& msg) { return ffi::Error::InvalidArgument("topicjax PTM kernel: " + msg); }

std::string Dims(ffi::Span<const int64_t> d) {
  std::string s = "(";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + (d.size() == 1 ? ",)" : ")");
}

// Rows (item (C, R) and (C, R, W) arrays: document rows other and count, word rows pos) as a
// RowLayout; "" or what is wrong.  Word rows' padding entries have pos == pad_pos.
std::string MakeRows(const char* name, ffi::Buffer<ffi::S32>& item, ffi::Buffer<ffi::S32>* other,
                     ffi::Buffer<ffi::F32>* count, ffi::Buffer<ffi::S32>* pos, int64_t n_items, int64_t pad_pos,
                     RowLayout* out) {
  auto id = item.dimensions();
  auto od = other != nullptr ? other->dimensions() : pos->dimensions();
  if (id.size() != 2 || od.size() != 3 || od[0] != id[0] || od[1] != id[1])
    return std::string(name) + " rows: item " + Dims(id) + " and entries " + Dims(od) +
           " must be (C, R) and (C, R, W)";
  auto same = [&](ffi::Span<const int64_t> d) { return d.size() == 3 && d[0] == od[0] && d[1] == od[1] && d[2] == od[2]; };
  if (count != nullptr) {
    if (!same(count->dimensions()))
      return std::string(name) + " rows: counts " + Dims(count->dimensions()) + " must match " + Dims(od);
    out->count = count->typed_data();
  }
  if (pos != nullptr) {
    if (!same(pos->dimensions()))
      return std::string(name) + " rows: positions " + Dims(pos->dimensions()) + " must match " + Dims(od);
    out->pos = pos->typed_data();
  }
  out->n_rows = id[0] * id[1];
  out->width = od[2];
  out->n_items = n_items;
  out->pad_pos = pad_pos;
  out->item = item.typed_data();
  out->other = other != nullptr ? other->typed_data() : nullptr;
  return "";
}

ffi::Error Report(const PtmBadInput& bad, const char* what_other) {
  switch (bad.kind) {
    case 0:
      return ffi::Error::Success();
    case 1:
      return Invalid("word id " + std::to_string(bad.value) + " at entry " + std::to_string(bad.index) +
                     " is out of range");
    case 2:
      return Invalid(std::string(what_other) + " id " + std::to_string(bad.value) + " at entry " +
                     std::to_string(bad.index) + " is out of range");
    case 3:
      return Invalid("flat position " + std::to_string(bad.value) + " at entry " + std::to_string(bad.index) +
                     " is out of range");
    case 4:
      return Invalid("row " + std::to_string(bad.index) + " has item " + std::to_string(bad.value) +
                     ": items must be sorted and in [0, number of items]");
    default:
      return Invalid("candidate topic " + std::to_string(bad.value) + " at " + std::to_string(bad.index) +
                     " is out of range");
  }
}

template <typename Fn>
PtmBadInput Locked(Fn&& f) {
  topicjax::Engine& e = topicjax::engine();
  std::lock_guard<std::mutex> lock(e.mu);
  return f(e.get_pool());
}

ffi::Error PtmEStep(ffi::Buffer<ffi::F32> B, ffi::Buffer<ffi::F32> a, ffi::Buffer<ffi::S32> d_item,
                    ffi::Buffer<ffi::S32> d_word, ffi::Buffer<ffi::F32> d_count, ffi::Buffer<ffi::S32> w_item,
                    ffi::Buffer<ffi::S32> w_pos, ffi::ResultBuffer<ffi::F32> g,
                    ffi::ResultBuffer<ffi::F32> ll, ffi::ResultBuffer<ffi::F32> s1, ffi::ResultBuffer<ffi::F32> s2,
                    float tiny, float cap) {
  auto bd = B.dimensions(), ad = a.dimensions();
  if (bd.size() != 2 || ad.size() != 2 || ad[1] != bd[1])
    return Invalid("B " + Dims(bd) + " and a " + Dims(ad) + " must be (N, P) and (D, P)");
  topicjax::ptm::EStepArgs A;
  A.N = bd[0];
  A.P = bd[1];
  A.D = ad[0];
  A.B = B.typed_data();
  A.a = a.typed_data();
  A.tiny = tiny;
  A.cap = cap;
  std::string err = MakeRows("document", d_item, &d_word, &d_count, nullptr, A.D, -1, &A.docs);
  const int64_t last_slot = A.docs.n_rows * A.docs.width - 1;  // word rows' padding points at it
  if (err.empty()) err = MakeRows("word", w_item, nullptr, nullptr, &w_pos, A.N, last_slot, &A.words);
  if (!err.empty()) return Invalid(err);
  if (g->element_count() != size_t(A.N * A.P) || ll->element_count() != size_t(A.D) ||
      s1->element_count() != size_t(A.D * A.P) || s2->element_count() != size_t(A.D * A.P))
    return Invalid("results have the wrong sizes");
  A.g = g->typed_data();
  A.ll = ll->typed_data();
  A.s1 = s1->typed_data();
  A.s2 = s2->typed_data();
  return Report(Locked([&](topicjax::ThreadPool& pool) { return topicjax::ptm::RunEStep(A, pool); }), "document");
}

ffi::Error PtmTrials(ffi::Buffer<ffi::F32> B, ffi::Buffer<ffi::F32> a, ffi::Buffer<ffi::PRED> vv,
                     ffi::Buffer<ffi::S32> cand, ffi::Buffer<ffi::F32> t_start, ffi::Buffer<ffi::S32> d_item,
                     ffi::Buffer<ffi::S32> d_word, ffi::Buffer<ffi::F32> d_count, ffi::ResultBuffer<ffi::F32> dl,
                     ffi::ResultBuffer<ffi::F32> t, ffi::ResultBuffer<ffi::S32> variant,
                     ffi::ResultBuffer<ffi::F32> s1, ffi::ResultBuffer<ffi::F32> s2, int64_t n_on,
                     int64_t newton_iters, float tiny, float cap, float t_max) {
  auto bd = B.dimensions(), ad = a.dimensions(), vd = vv.dimensions(), cd = cand.dimensions(),
       td = t_start.dimensions();
  if (bd.size() != 2 || ad.size() != 2 || ad[1] != bd[1] || vd.size() != 2 || vd[0] != ad[0] || vd[1] != ad[1])
    return Invalid("B " + Dims(bd) + ", a " + Dims(ad) + " and vv " + Dims(vd) + " must be (N, P), (D, P), (D, P)");
  if (cd.size() != 2 || cd[0] != ad[0] || td.size() != 2 || td[0] != cd[0] || td[1] != cd[1])
    return Invalid("cand " + Dims(cd) + " and t_start " + Dims(td) + " must be (D, K)");
  if (n_on < 0 || n_on > cd[1]) return Invalid("n_on must be in [0, K]");
  topicjax::ptm::TrialArgs A;
  A.N = bd[0];
  A.P = bd[1];
  A.D = ad[0];
  A.K = cd[1];
  A.n_on = n_on;
  A.newton_iters = newton_iters;
  A.B = B.typed_data();
  A.a = a.typed_data();
  A.vv = vv.typed_data();
  A.cand = cand.typed_data();
  A.t_start = t_start.typed_data();
  A.tiny = tiny;
  A.cap = cap;
  A.t_max = t_max;
  std::string err = MakeRows("document", d_item, &d_word, &d_count, nullptr, A.D, -1, &A.docs);
  if (!err.empty()) return Invalid(err);
  const size_t dk = size_t(A.D * A.K), dp = size_t(A.D * A.P);
  if (dl->element_count() != dk || t->element_count() != dk || variant->element_count() != dk ||
      s1->element_count() != dp || s2->element_count() != dp)
    return Invalid("results have the wrong sizes");
  A.dl = dl->typed_data();
  A.t = t->typed_data();
  A.variant = variant->typed_data();
  A.s1 = s1->typed_data();
  A.s2 = s2->typed_data();
  return Report(Locked([&](topicjax::ThreadPool& pool) { return topicjax::ptm::RunTrials(A, pool); }), "document");
}

ffi::Error PtmSmallest(ffi::Buffer<ffi::F32> x, ffi::ResultBuffer<ffi::F32> vals, ffi::ResultBuffer<ffi::S32> idx) {
  const int64_t n = x.element_count(), K = vals->element_count();
  if (idx->element_count() != size_t(K)) return Invalid("values and indices must have one size");
  if (n > int64_t(INT32_MAX)) return Invalid("more than 2^31 entries");
  std::vector<int64_t> buf;
  topicjax::ptm::SmallestNegatives(x.typed_data(), n, K, vals->typed_data(), idx->typed_data(), buf);
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(TopicjaxPtmEStep, PtmEStep,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Attr<float>("tiny")
                                  .Attr<float>("cap"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(TopicjaxPtmTrials, PtmTrials,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::PRED>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::S32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Attr<int64_t>("n_on")
                                  .Attr<int64_t>("newton_iters")
                                  .Attr<float>("tiny")
                                  .Attr<float>("cap")
                                  .Attr<float>("t_max"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(TopicjaxPtmSmallest, PtmSmallest,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::S32>>());
