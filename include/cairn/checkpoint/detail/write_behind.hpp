#pragma once

// Writing files on a thread of its own while the caller gathers what goes in them, with a bound
// on the bytes waiting: how the whole-tensor formats save a model of any size in bounded memory,
// and how several ranks write their files at the same time.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

namespace cairn::detail {

/// Runs jobs in order on one thread. `submit` waits while the jobs queued hold more than
/// `budget` bytes (a larger job goes through alone, once the queue is empty), so what waits in
/// memory stays under max(budget, the largest job). The first job to throw is kept and the
/// jobs after it are dropped (their bytes freed); `finish` waits for the rest and rethrows it.
/// Destroyed before `finish`, it drops the jobs that have not started.
class write_behind {
public:
  static constexpr std::uint64_t default_budget = std::uint64_t{256} << 20;

  explicit write_behind(std::uint64_t budget = default_budget) : budget_(budget), worker_([this] { run(); }) {}
  write_behind(write_behind const&) = delete;
  write_behind& operator=(write_behind const&) = delete;
  ~write_behind() {
    {
      std::lock_guard lock(mutex_);
      closing_ = true;
    }
    changed_.notify_all();
    worker_.join();
  }

  /// Queues `job`, which holds `bytes` of memory until it has run.
  void submit(std::uint64_t bytes, std::function<void()> job) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return queued_ == 0 || queued_ + bytes <= budget_ || failure_; });
    if (failure_) return; // nothing more is written; finish() reports why
    queue_.push_back({bytes, std::move(job)});
    queued_ += bytes;
    if (queued_ > peak_) peak_ = queued_;
    changed_.notify_all();
  }

  /// Records a failure of the caller's own (the rank's part of the save), as if a job had thrown.
  void fail(std::exception_ptr failure) {
    std::lock_guard lock(mutex_);
    if (!failure_) failure_ = std::move(failure);
    changed_.notify_all();
  }

  /// Waits for every job queued; rethrows the first failure.
  void finish() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return (queue_.empty() && !running_) || (failure_ && !running_); });
    if (failure_) std::rethrow_exception(failure_);
  }

  /// The most bytes that waited at once (for the benchmarks).
  [[nodiscard]] std::uint64_t peak() const {
    std::lock_guard lock(mutex_);
    return peak_;
  }

private:
  struct job_entry {
    std::uint64_t bytes;
    std::function<void()> run;
  };

  void run() {
    std::unique_lock lock(mutex_);
    for (;;) {
      changed_.wait(lock, [&] { return closing_ || !queue_.empty(); });
      if (queue_.empty()) return;
      auto job = std::move(queue_.front());
      queue_.pop_front();
      if (!failure_ && !closing_) { // once closing (an error elsewhere), what is left is dropped
        running_ = true;
        lock.unlock();
        std::exception_ptr thrown;
        try {
          job.run();
        } catch (...) {
          thrown = std::current_exception();
        }
        job.run = nullptr; // frees what the job held before the budget says so
        lock.lock();
        running_ = false;
        if (thrown && !failure_) failure_ = thrown;
      }
      job.run = nullptr;
      queued_ -= job.bytes;
      changed_.notify_all();
    }
  }

  std::uint64_t budget_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<job_entry> queue_;
  std::uint64_t queued_ = 0;
  std::uint64_t peak_ = 0;
  bool running_ = false;
  bool closing_ = false;
  std::exception_ptr failure_;
  std::thread worker_; // last: started once the rest is ready
};

} // namespace cairn::detail
