// Definitions of <cairn/training/background_tasks.hpp>: inline in a header-only build, compiled
// once by <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/training/background_tasks.hpp>

#include <algorithm>
#include <exception>

namespace cairn {

CAIRN_DECL background_tasks::~background_tasks() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

CAIRN_DECL void background_tasks::post(std::string key, std::function<void()> task) {
  {
    std::lock_guard lock(mutex_);
    auto waiting = std::find_if(queue_.begin(), queue_.end(), [&](auto const& queued) { return queued.first == key; });
    if (waiting != queue_.end())
      waiting->second = std::move(task);
    else
      queue_.emplace_back(std::move(key), std::move(task));
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  changed_.notify_all();
}

CAIRN_DECL void background_tasks::wait() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return queue_.empty() && !busy_; });
}

CAIRN_DECL void background_tasks::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return; // stopped, and nothing left to run
    auto task = std::move(queue_.front().second);
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    try {
      task();
    } catch (...) {
      // the task reports its own failures
    }
    lock.lock();
    busy_ = false;
    changed_.notify_all();
  }
}

} // namespace cairn
