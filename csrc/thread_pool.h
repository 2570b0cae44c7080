// A small persistent thread pool for the compiled kernels (topicjax/core/kernels.py).
//
// The workers live for the whole process.  `run(f)` calls f(0) on the calling thread and f(1) ...
// f(n-1) on the workers, and returns when all have finished.  Between calls a worker first spins
// for a short while (kSpin) watching for the next call, then sleeps on a condition variable; the
// caller likewise spins before it sleeps waiting for the workers.  Why: waking a sleeping thread
// costs tens of microseconds on a virtual machine, and the LIDA sweep calls `run` twice per block
// of documents (dozens of times per sweep), which at 2 threads cost more than the merge it ran.
// Calls to `run` must not overlap (the kernels serialise their calls with the engine's mutex).
//
// Every thread of a call computes with subnormal floats flushed to zero (FTZ and DAZ), as XLA's
// own CPU threads do: the kernels then give the pure-JAX path's values where products underflow,
// and do not slow down there.  (Workers used to inherit the mode of the thread that made the pool,
// Python's, which has it off: a KOS PLSA fit at T = 100 went from 6 to 25-30 ms per pass as Φ and
// Θ grew subnormal entries, on the workers' share of the documents only.)  x86 only; elsewhere
// the threads keep the mode they start with.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TOPICJAX_PAUSE() _mm_pause()
#else
#define TOPICJAX_PAUSE() std::this_thread::yield()
#endif

namespace topicjax {

// Subnormals flushed to zero on this thread (x86 MXCSR: FTZ bit 15, DAZ bit 6) while in scope.
class FlushSubnormals {
 public:
#if defined(__x86_64__) || defined(__i386__)
  FlushSubnormals() : saved_(_mm_getcsr()) { _mm_setcsr(saved_ | 0x8040u); }
  ~FlushSubnormals() { _mm_setcsr(saved_); }

 private:
  unsigned saved_;
#endif
};

class ThreadPool {
 public:
  // How long an idle thread watches before it sleeps.
  static constexpr std::chrono::microseconds kSpin{200};

  explicit ThreadPool(int n_threads) : n_(n_threads < 1 ? 1 : n_threads) {
    for (int i = 1; i < n_; ++i) workers_.emplace_back([this, i] { Loop(i); });
  }

  ~ThreadPool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_.store(true);
    }
    start_.notify_all();
    for (auto& t : workers_) t.join();
  }

  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_; }

  void run(const std::function<void(int)>& f) {
    if (n_ == 1) {
      FlushSubnormals flush;
      f(0);
      return;
    }
    job_ = &f;
    pending_.store(n_ - 1, std::memory_order_relaxed);
    {
      // the increment under the mutex: a worker about to sleep either sees it or gets the notify
      std::lock_guard<std::mutex> lock(mu_);
      generation_.fetch_add(1, std::memory_order_release);
    }
    start_.notify_all();
    FlushSubnormals flush;
    f(0);
    if (!SpinUntil([this] { return pending_.load(std::memory_order_acquire) == 0; })) {
      std::unique_lock<std::mutex> lock(mu_);
      done_.wait(lock, [this] { return pending_.load(std::memory_order_acquire) == 0; });
    }
    job_ = nullptr;
  }

 private:
  template <typename Pred>
  static bool SpinUntil(Pred ready) {
    const auto until = std::chrono::steady_clock::now() + kSpin;
    for (int i = 0;; ++i) {
      if (ready()) return true;
      TOPICJAX_PAUSE();
      if ((i & 63) == 63 && std::chrono::steady_clock::now() > until) return ready();
    }
  }

  void Loop(int index) {
    FlushSubnormals flush;  // for the thread's whole life
    uint64_t seen = 0;
    for (;;) {
      auto moved = [&] {
        return stop_.load(std::memory_order_acquire) || generation_.load(std::memory_order_acquire) != seen;
      };
      if (!SpinUntil(moved)) {
        std::unique_lock<std::mutex> lock(mu_);
        start_.wait(lock, moved);
      }
      if (stop_.load(std::memory_order_acquire)) return;
      seen = generation_.load(std::memory_order_acquire);
      (*job_)(index);
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lock(mu_);  // the caller may be between its check and its wait
        done_.notify_one();
      }
    }
  }

  const int n_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_, done_;
  const std::function<void(int)>* job_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace topicjax
