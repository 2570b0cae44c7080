// XLA FFI handlers for the fused E-step (estep_kernel.h), and the Python module that hands them
// to JAX (topicjax/core/kernels.py registers them with jax.ffi.register_ffi_target).
//
// Two handlers:
//   topicjax_estep         φ (W, T), θ (T, D), word (C, B) int32, count (C, B), piece_doc (C, K)
//                          -> ll (), [g_φ (W, T)], [g_θ (T, D)]
//   topicjax_estep_models  φ (G, W, T), θ (G, T, D), word (C, B), count (C, B, Gc), piece_doc (C, K)
//                          -> ll (G,), [g_φ (G, W, T)], [g_θ (G, T, D)]   (Gc = 1: counts shared)
// with integer attributes need_phi and need_theta saying which gradients are returned, float32
// or float64 throughout (count has the dtype of φ).
//
// Calls are serialised by one mutex: each call uses the whole thread pool (XLA may call from
// several threads at once, e.g. one per host device in the sharded fit); see engine.h.  The
// module also hands over the PTM kernels' handlers (ptm_ffi.cc) and the LIDA-family token sweep's
// and count histogram's (lida_ffi.cc): one module, one thread pool, one thread count for all of them.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>

#include <memory>
#include <mutex>
#include <new>
#include <string>

#include "engine.h"
#include "estep_kernel.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

using topicjax::engine;
using topicjax::Engine;

std::string Shape(const ffi::AnyBuffer& b) {
  std::string s = "(";
  auto dims = b.dimensions();
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + (dims.size() == 1 ? ",)" : ")");
}

ffi::Error Invalid(const std::string& msg) { return ffi::Error::InvalidArgument("topicjax E-step kernel: " + msg); }

template <typename F>
ffi::Error Run(std::vector<topicjax::EStepProblem<F>>& models, const ffi::AnyBuffer& ll_buf) {
  topicjax::BadInput bad;
  {
    Engine& e = engine();
    std::lock_guard<std::mutex> lock(e.mu);
    bad = topicjax::RunEStep(models, e.get_pool(), e.ws);
  }
  if (bad.kind == 0) {
    F* out = static_cast<F*>(ll_buf.untyped_data());
    for (size_t g = 0; g < models.size(); ++g) out[g] = F(models[g].ll);
    return ffi::Error::Success();
  }
  const auto& pb = models[0];
  if (bad.kind == 1)
    return Invalid("word id " + std::to_string(bad.value) + " at slot " + std::to_string(bad.index) +
                   " is outside [0, " + std::to_string(pb.W) + ")");
  if (bad.kind == 2)
    return Invalid("document id " + std::to_string(bad.value) + " of piece " + std::to_string(bad.index) +
                   " is outside [0, " + std::to_string(pb.D) + ")");
  return ffi::Error(ffi::ErrorCode::kResourceExhausted, "topicjax E-step kernel: out of memory");
}

// Shared checks and dispatch: `models` selects the batched layout (a leading axis of G models).
ffi::Error EStep(bool models, ffi::AnyBuffer phi, ffi::AnyBuffer theta, ffi::Buffer<ffi::S32> word,
                 ffi::AnyBuffer count, ffi::Buffer<ffi::S32> piece_doc, ffi::RemainingRets rets, int32_t need_phi,
                 int32_t need_theta) {
  const auto dt = phi.element_type();
  if (dt != ffi::DataType::F32 && dt != ffi::DataType::F64) return Invalid("phi must be float32 or float64");
  if (theta.element_type() != dt || count.element_type() != dt)
    return Invalid("phi, theta and count must have one dtype");
  auto pd = phi.dimensions(), td = theta.dimensions(), wd = word.dimensions(), cd = count.dimensions(),
       kd = piece_doc.dimensions();
  const size_t rank = models ? 3 : 2, m = models ? 1 : 0;
  if (pd.size() != rank || td.size() != rank)
    return Invalid("phi " + Shape(phi) + " and theta " + Shape(theta) + " must have rank " + std::to_string(rank));
  if (wd.size() != 2 || kd.size() != 2 || kd[0] != wd[0] || kd[1] == 0 || wd[1] % kd[1] != 0)
    return Invalid("word (C, B) and piece_doc (C, K) must have B a multiple of K");
  if (cd.size() != rank || cd[0] != wd[0] || cd[1] != wd[1]) return Invalid("count must match word " + Shape(count));
  const int64_t G = models ? pd[0] : 1, W = pd[m], T = pd[m + 1], D = td[m + 1];
  if (td[m] != T || (models && td[0] != G))
    return Invalid("theta " + Shape(theta) + " does not match phi " + Shape(phi));
  const int64_t Gc = models ? cd[2] : 1;
  if (Gc != 1 && Gc != G) return Invalid("count must have 1 or G columns, got " + Shape(count));
  const int64_t n_out = 1 + (need_phi ? 1 : 0) + (need_theta ? 1 : 0);
  if ((int64_t)rets.size() != n_out) return Invalid("wrong number of results");

  auto ll = rets.get<ffi::AnyBuffer>(0);
  if (ll.has_error()) return ll.error();
  ffi::Result<ffi::AnyBuffer> ll_buf = *ll;
  if (ll_buf->element_count() != size_t(G)) return Invalid("ll has the wrong size");
  char* g_phi = nullptr;
  char* g_theta = nullptr;
  size_t next = 1;
  if (need_phi) {
    auto r = rets.get<ffi::AnyBuffer>(next++);
    if (r.has_error()) return r.error();
    if ((*r)->element_count() != size_t(G * W * T)) return Invalid("g_phi has the wrong size");
    g_phi = static_cast<char*>((*r)->untyped_data());
  }
  if (need_theta) {
    auto r = rets.get<ffi::AnyBuffer>(next++);
    if (r.has_error()) return r.error();
    if ((*r)->element_count() != size_t(G * T * D)) return Invalid("g_theta has the wrong size");
    g_theta = static_cast<char*>((*r)->untyped_data());
  }

  auto run = [&](auto zero) {
    using F = decltype(zero);
    std::vector<topicjax::EStepProblem<F>> problems(G);
    for (int64_t g = 0; g < G; ++g) {
      auto& pb = problems[g];
      pb.W = W;
      pb.D = D;
      pb.T = T;
      pb.P = kd[0] * kd[1];
      pb.L = wd[1] / kd[1];
      pb.count_stride = Gc;
      pb.phi = static_cast<const F*>(phi.untyped_data()) + g * W * T;
      pb.theta = static_cast<const F*>(theta.untyped_data()) + g * T * D;
      pb.word = word.typed_data();
      pb.count = static_cast<const F*>(count.untyped_data()) + (Gc == 1 ? 0 : g);
      pb.piece_doc = piece_doc.typed_data();
      pb.g_phi = g_phi ? reinterpret_cast<F*>(g_phi) + g * W * T : nullptr;
      pb.g_theta = g_theta ? reinterpret_cast<F*>(g_theta) + g * T * D : nullptr;
    }
    return Run(problems, *ll_buf);
  };
  return dt == ffi::DataType::F32 ? run(float(0)) : run(double(0));
}

ffi::Error EStepOne(ffi::AnyBuffer phi, ffi::AnyBuffer theta, ffi::Buffer<ffi::S32> word, ffi::AnyBuffer count,
                    ffi::Buffer<ffi::S32> piece_doc, ffi::RemainingRets rets, int32_t need_phi, int32_t need_theta) {
  return EStep(false, phi, theta, word, count, piece_doc, rets, need_phi, need_theta);
}

ffi::Error EStepModels(ffi::AnyBuffer phi, ffi::AnyBuffer theta, ffi::Buffer<ffi::S32> word, ffi::AnyBuffer count,
                       ffi::Buffer<ffi::S32> piece_doc, ffi::RemainingRets rets, int32_t need_phi,
                       int32_t need_theta) {
  return EStep(true, phi, theta, word, count, piece_doc, rets, need_phi, need_theta);
}

}  // namespace

// Both handlers take the same arguments (one model, or G models along a leading axis).
static auto EStepBinding() {
  return ffi::Ffi::Bind()
      .Arg<ffi::AnyBuffer>()
      .Arg<ffi::AnyBuffer>()
      .Arg<ffi::Buffer<ffi::S32>>()
      .Arg<ffi::AnyBuffer>()
      .Arg<ffi::Buffer<ffi::S32>>()
      .RemainingRets()
      .Attr<int32_t>("need_phi")
      .Attr<int32_t>("need_theta");
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(TopicjaxEStep, EStepOne, EStepBinding());
XLA_FFI_DEFINE_HANDLER_SYMBOL(TopicjaxEStepModels, EStepModels, EStepBinding());

// The PTM kernels' handlers (csrc/ptm_ffi.cc), handed to JAX by the same module.
XLA_FFI_DECLARE_HANDLER_SYMBOL(TopicjaxPtmEStep);
XLA_FFI_DECLARE_HANDLER_SYMBOL(TopicjaxPtmTrials);
XLA_FFI_DECLARE_HANDLER_SYMBOL(TopicjaxPtmSmallest);
// The LIDA-family token sweep's and count histogram's handlers (csrc/lida_ffi.cc).
XLA_FFI_DECLARE_HANDLER_SYMBOL(TopicjaxLidaSweep);
XLA_FFI_DECLARE_HANDLER_SYMBOL(TopicjaxCountHistogram);

// ------------------------------------------------------------------------------ Python module

#ifndef TOPICJAX_BUILD_FLAGS
#define TOPICJAX_BUILD_FLAGS "?"
#endif
#ifndef TOPICJAX_SOURCE_HASH
#define TOPICJAX_SOURCE_HASH ""
#endif

static PyObject* py_handlers(PyObject*, PyObject*) {
  PyObject* d = PyDict_New();
  if (d == nullptr) return nullptr;
  struct {
    const char* name;
    void* fn;
  } items[] = {{"topicjax_estep", reinterpret_cast<void*>(&TopicjaxEStep)},
               {"topicjax_estep_models", reinterpret_cast<void*>(&TopicjaxEStepModels)},
               {"topicjax_ptm_estep", reinterpret_cast<void*>(&TopicjaxPtmEStep)},
               {"topicjax_ptm_trials", reinterpret_cast<void*>(&TopicjaxPtmTrials)},
               {"topicjax_ptm_smallest", reinterpret_cast<void*>(&TopicjaxPtmSmallest)},
               {"topicjax_lida_sweep", reinterpret_cast<void*>(&TopicjaxLidaSweep)},
               {"topicjax_count_histogram", reinterpret_cast<void*>(&TopicjaxCountHistogram)}};
  for (auto& it : items) {
    PyObject* cap = PyCapsule_New(it.fn, nullptr, nullptr);
    if (cap == nullptr || PyDict_SetItemString(d, it.name, cap) < 0) {
      Py_XDECREF(cap);
      Py_DECREF(d);
      return nullptr;
    }
    Py_DECREF(cap);
  }
  return d;
}

static PyObject* py_set_threads(PyObject*, PyObject* arg) {
  long n = PyLong_AsLong(arg);
  if (n == -1 && PyErr_Occurred()) return nullptr;
  if (n < 1 || n > 4096) {
    PyErr_Format(PyExc_ValueError, "the number of threads must be between 1 and 4096, got %ld", n);
    return nullptr;
  }
  Engine& e = engine();
  {
    Py_BEGIN_ALLOW_THREADS  // a running E-step holds the mutex until it finishes
    std::lock_guard<std::mutex> lock(e.mu);
    if (e.threads != n) {  // a pool of the new size, started here so that no kernel call pays for it
      e.pool.reset();
      e.threads = (int)n;
      e.get_pool();
    }
    Py_END_ALLOW_THREADS
  }
  Py_RETURN_NONE;
}

static PyObject* py_get_threads(PyObject*, PyObject*) { return PyLong_FromLong(engine().threads); }

static PyObject* py_release(PyObject*, PyObject*) {
  Engine& e = engine();
  Py_BEGIN_ALLOW_THREADS
  std::lock_guard<std::mutex> lock(e.mu);
  e.ws.release();
  std::vector<topicjax::LidaScratch>().swap(e.lida_scratch);
  Py_END_ALLOW_THREADS
  Py_RETURN_NONE;
}

static PyObject* py_build_info(PyObject*, PyObject*) {
  return Py_BuildValue("{s:s,s:s}", "flags", TOPICJAX_BUILD_FLAGS, "source_hash", TOPICJAX_SOURCE_HASH);
}

static PyMethodDef methods[] = {
    {"handlers", py_handlers, METH_NOARGS, "FFI handler capsules by target name."},
    {"set_threads", py_set_threads, METH_O, "Set the number of threads of the kernels (>= 1)."},
    {"get_threads", py_get_threads, METH_NOARGS, "The number of threads of the kernels."},
    {"release_buffers", py_release, METH_NOARGS, "Free the per-thread buffers kept between calls."},
    {"build_info", py_build_info, METH_NOARGS, "Compiler flags and source hash of this build."},
    {nullptr, nullptr, 0, nullptr}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_estep_ffi",
                                    "Fused CPU kernels (XLA FFI): E-step, PTM, LIDA sweep; see topicjax.core.kernels.",
                                    -1, methods};

PyMODINIT_FUNC PyInit__estep_ffi(void) { return PyModule_Create(&module); }
