// XLA FFI handler for the parallel LIDA-family token sweep (lida_kernel.h), and the Python module
// that hands it to JAX (topicjax/lida/kernel.py registers it with jax.ffi.register_ffi_target).
//
//   topicjax_lida_sweep  word (N,), doc_start (D+1,), z (N,), n_dk (D, K), n_wk (V, K), n_k (K,),
//                        theta_bar (D, K) bool, phi_bar (V, K) bool, den (K,) f32, blocks (nb, C),
//                        alpha (), beta () f32, seed () u32
//                        -> z, n_dk, n_wk, n_k (aliased to the inputs)
//   attributes: focused (θ̄ read), sparse (φ̄ read).
//
// Calls are serialised by one mutex: each call uses the whole thread pool.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "lida_kernel.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

struct Engine {
  std::mutex mu;
  std::unique_ptr<topicjax::ThreadPool> pool;
  std::vector<topicjax::LidaScratch> scratch;
  int threads = 1;
};

void AfterForkInChild();

Engine& engine() {
  static Engine* e = [] {
    pthread_atfork(nullptr, nullptr, AfterForkInChild);
    return new Engine();  // never destroyed: XLA may call during interpreter exit
  }();
  return *e;
}

// A forked child has none of the parent's pool threads: forget them (leak) and start anew.
void AfterForkInChild() {
  Engine& e = engine();
  new (&e.mu) std::mutex();
  (void)e.pool.release();
  new (&e.scratch) std::vector<topicjax::LidaScratch>();
}

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
                 ffi::Result<ffi::Buffer<ffi::S32>> n_k_out, int32_t focused, int32_t sparse) {
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
  // bad ids would write outside the arrays: check them once (O(N))
  for (int64_t t = 0; t < p.N; ++t) {
    if (p.word[t] < 0 || p.word[t] >= p.V) return Invalid("word id outside [0, V) at token " + std::to_string(t));
    if (p.z[t] < 0 || p.z[t] >= p.K) return Invalid("topic outside [0, K) at token " + std::to_string(t));
    if (p.phi_bar && !p.phi_bar[(int64_t)p.word[t] * p.K + p.z[t]])
      return Invalid("token " + std::to_string(t) + " holds a topic in which its word is not active");
  }
  for (int64_t d = 0; d < p.D; ++d) {
    if (p.doc_start[d] > p.doc_start[d + 1] || p.doc_start[d + 1] > p.N) return Invalid("doc_start is not increasing");
    if (p.theta_bar)
      for (int32_t t = p.doc_start[d]; t < p.doc_start[d + 1]; ++t)
        if (!p.theta_bar[d * p.K + p.z[t]])
          return Invalid("token " + std::to_string(t) + " holds a topic that is not active in its document");
  }
  try {
    Engine& e = engine();
    std::lock_guard<std::mutex> lock(e.mu);
    if (!e.pool) e.pool = std::make_unique<topicjax::ThreadPool>(e.threads);
    topicjax::LidaSweep(p, *e.pool, e.scratch);
  } catch (const std::bad_alloc&) {
    return ffi::Error(ffi::ErrorCode::kResourceExhausted, "topicjax LIDA kernel: out of memory");
  }
  return ffi::Error::Success();
}

}  // namespace

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
                                  .Attr<int32_t>("sparse"));

// ------------------------------------------------------------------------------ Python module

#ifndef TOPICJAX_SOURCE_HASH
#define TOPICJAX_SOURCE_HASH ""
#endif

static PyObject* py_handlers(PyObject*, PyObject*) {
  PyObject* d = PyDict_New();
  if (d == nullptr) return nullptr;
  PyObject* cap = PyCapsule_New(reinterpret_cast<void*>(&TopicjaxLidaSweep), nullptr, nullptr);
  if (cap == nullptr || PyDict_SetItemString(d, "topicjax_lida_sweep", cap) < 0) {
    Py_XDECREF(cap);
    Py_DECREF(d);
    return nullptr;
  }
  Py_DECREF(cap);
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
  Py_BEGIN_ALLOW_THREADS
  {
    std::lock_guard<std::mutex> lock(e.mu);
    if (e.threads != n) {
      e.pool.reset();
      e.threads = (int)n;
    }
  }
  Py_END_ALLOW_THREADS
  Py_RETURN_NONE;
}

static PyObject* py_get_threads(PyObject*, PyObject*) { return PyLong_FromLong(engine().threads); }

static PyObject* py_build_info(PyObject*, PyObject*) {
  return Py_BuildValue("{s:s}", "source_hash", TOPICJAX_SOURCE_HASH);
}

static PyMethodDef methods[] = {
    {"handlers", py_handlers, METH_NOARGS, "FFI handler capsules by target name."},
    {"set_threads", py_set_threads, METH_O, "Set the number of threads of the sweep (>= 1)."},
    {"get_threads", py_get_threads, METH_NOARGS, "The number of threads of the sweep."},
    {"build_info", py_build_info, METH_NOARGS, "Source hash of this build."},
    {nullptr, nullptr, 0, nullptr}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_lida_ffi",
                                    "Parallel LIDA-family token sweep (XLA FFI); see topicjax.lida.kernel.", -1,
                                    methods};

PyMODINIT_FUNC PyInit__lida_ffi(void) { return PyModule_Create(&module); }
