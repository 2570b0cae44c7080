// A small persistent thread pool for the E-step kernel (topicjax/core/kernels.py).
//
// The workers live for the whole process and sleep on a condition variable between calls, so an
// E-step call pays one wake-up, not a thread creation.  `run(f)` calls f(0) on the calling
// thread and f(1) ... f(n-1) on the workers, and returns when all have finished.  Calls to `run`
// must not overlap (the kernel serialises its calls with a mutex of its own).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace topicjax {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads) : n_(n_threads < 1 ? 1 : n_threads) {
    for (int i = 1; i < n_; ++i) workers_.emplace_back([this, i] { Loop(i); });
  }

  ~ThreadPool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    start_.notify_all();
    for (auto& t : workers_) t.join();
  }

  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_; }

  void run(const std::function<void(int)>& f) {
    if (n_ == 1) {
      f(0);
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      job_ = &f;
      pending_ = n_ - 1;
      ++generation_;
    }
    start_.notify_all();
    f(0);
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, [this] { return pending_ == 0; });
    job_ = nullptr;
  }

 private:
  void Loop(int index) {
    uint64_t seen = 0;
    for (;;) {
      const std::function<void(int)>* job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        start_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
        job = job_;
      }
      (*job)(index);
      bool last;
      {
        std::lock_guard<std::mutex> lock(mu_);
        last = --pending_ == 0;
      }
      if (last) done_.notify_one();
    }
  }

  const int n_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_, done_;
  const std::function<void(int)>* job_ = nullptr;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
};

}  // namespace topicjax
