// The process-wide state of the compiled kernels (csrc/estep_ffi.cc, csrc/ptm_ffi.cc,
// csrc/lida_ffi.cc): one thread pool, the per-thread buffers of the E-step and of the LIDA sweep,
// the thread count, and the mutex that serialises kernel calls (each call uses the whole pool;
// XLA may call from several threads at once, e.g. one per host device in the sharded fit).
#pragma once

#include <pthread.h>

#include <memory>
#include <mutex>
#include <new>
#include <vector>

#include "estep_kernel.h"
#include "lida_kernel.h"
#include "thread_pool.h"

namespace topicjax {

struct Engine {
  std::mutex mu;
  std::unique_ptr<ThreadPool> pool;
  Workspace ws;
  std::vector<LidaScratch> lida_scratch;
  LidaWordTopics lida_words;  // the sparse draw's word lists (kept between sweeps: no reallocation)
  int threads = 1;

  // The pool, started on first use with the current thread count (call with `mu` held).
  ThreadPool& get_pool() {
    if (!pool) pool = std::make_unique<ThreadPool>(threads);
    return *pool;
  }
};

// A child process made by fork() has none of the parent's pool threads (and the mutex may have
// been held by one of them): it forgets the parent's pool, leaking it, and starts its own.
void EngineAfterForkInChild();

// One Engine for the whole extension module (an inline function's static is shared by every
// translation unit that includes this header).
inline Engine& engine() {
  static Engine* e = [] {
    pthread_atfork(nullptr, nullptr, EngineAfterForkInChild);
    return new Engine();  // never destroyed: XLA may call during interpreter exit
  }();
  return *e;
}

inline void EngineAfterForkInChild() {
  Engine& e = engine();
  new (&e.mu) std::mutex();
  (void)e.pool.release();
  new (&e.lida_scratch) std::vector<LidaScratch>();
  new (&e.lida_words) LidaWordTopics();
}

}  // namespace topicjax
