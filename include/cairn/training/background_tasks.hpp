#pragma once

// One thread beside training that runs what nothing waits for, in order: rank 0's retention after
// each commit (a listing and a marker read a save on a store, growing with the saves kept), so
// that a save's pause on the training thread does not grow with them. No libtorch.

#include <cairn/detail/decl.hpp>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

namespace cairn {

class background_tasks {
public:
  background_tasks() = default;
  background_tasks(background_tasks const&) = delete;
  background_tasks& operator=(background_tasks const&) = delete;
  /// Runs what is queued, then ends the thread.
  CAIRN_DECL ~background_tasks();

  /// Queues `task` to run after those queued before it. A task of the same `key` still waiting
  /// is replaced by this one (two retentions of one directory: the later one does all the work).
  /// What a task throws is its own to report: it is caught and dropped.
  CAIRN_DECL void post(std::string key, std::function<void()> task);

  /// Waits until every task posted so far has run.
  CAIRN_DECL void wait();

private:
  CAIRN_DECL void run();

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::pair<std::string, std::function<void()>>> queue_;
  bool busy_ = false;
  bool stop_ = false;
  std::thread thread_;
};

} // namespace cairn

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/training/impl/background_tasks.ipp>
#endif
