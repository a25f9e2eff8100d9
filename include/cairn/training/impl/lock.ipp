// Definitions of <cairn/training/lock.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/detail/host.hpp>
#include <cairn/detail/writer.hpp>
#include <cairn/error.hpp>
#include <cairn/io/backend.hpp>
#include <cairn/io/error.hpp>
#include <cairn/io/file.hpp>
#include <cairn/training/lock.hpp>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <sys/file.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace cairn::detail {

/// The thread that rewrites a lease while its holder lives, and when it last did (a lease not
/// rewritten for lease_expiry seconds is another run's to take: its holder never rewrites it
/// again, and commits nothing once half of that has passed).
struct lease_keeper {
  using clock = std::chrono::steady_clock;
  std::mutex mutex;
  std::condition_variable wake;
  bool stop = false;
  clock::time_point renewed = clock::now(); ///< before the write that last succeeded
  bool lapsed = false;                      ///< not renewed in time, or found taken over
  std::thread thread;

  [[nodiscard]] std::int64_t seconds_since_renewal() const {
    return std::chrono::duration_cast<std::chrono::seconds>(clock::now() - renewed).count();
  }
};

/// Whether process `pid` of this host has ended: gone, or a zombie its parent has not reaped
/// (it runs nothing and holds no lock).
inline bool process_ended(std::int64_t pid) {
  if (pid <= 0) return false;
  if (::kill(static_cast<pid_t>(pid), 0) != 0) return errno == ESRCH;
  std::FILE* stat = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
  if (!stat) return false;
  char line[512] = {};
  auto got = std::fread(line, 1, sizeof line - 1, stat);
  std::fclose(stat);
  // "pid (command) state …": the command may hold spaces and parentheses, the last ')' ends it.
  std::string_view text(line, got);
  auto close = text.rfind(')');
  return close != std::string_view::npos && close + 2 < text.size() && text[close + 2] == 'Z';
}

inline std::int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

/// The number after `label` in a lease's record, when there is one.
inline std::optional<std::int64_t> lease_number(std::string const& record, std::string const& label) {
  auto at = record.find(label);
  if (at == std::string::npos) return std::nullopt;
  char* end = nullptr;
  auto value = std::strtoll(record.c_str() + at + label.size(), &end, 10);
  if (end == record.c_str() + at + label.size()) return std::nullopt;
  return value;
}

/// The lease's record without its final newline; nothing when there is no lease (any other
/// failure throws: a store that does not answer is never "no lease").
inline std::optional<std::string> read_lease(io::storage_location const& where) {
  std::string held;
  try {
    held = where.backend->read_all(where.key, 4096);
  } catch (io::io_error const& e) {
    if (e.kind() == std::errc::no_such_file_or_directory) return std::nullopt;
    throw;
  }
  while (!held.empty() && held.back() == '\n') held.pop_back();
  return held;
}

inline std::string lease_field(std::string const& record, std::string const& label) {
  auto at = record.find(label);
  if (at == std::string::npos) return {};
  auto begin = at + label.size();
  auto end = record.find_first_of(",\n", begin);
  return record.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

} // namespace cairn::detail

namespace cairn {

CAIRN_DECL std::string experiment_lock::lease_record() const {
  static auto const since = detail::unix_now();
  return "host " + detail::this_host() + ", pid " + std::to_string(::getpid()) + ", since unix time " +
         std::to_string(since) + ", refreshed unix time " + std::to_string(detail::unix_now()) + ", lease " + token_ +
         "\n";
}

CAIRN_DECL void experiment_lock::take_lease(std::filesystem::path const& dir) {
  std::random_device random;
  token_ = std::to_string(random()) + std::to_string(random());
  auto where = io::open_location(path_.string());
  bool const exact = where.backend->guarantees().conditional_create;
  bool took_over = false;
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto record = lease_record();
    auto started = detail::lease_keeper::clock::now();
    bool created = where.backend->create_exclusive(where.key, std::as_bytes(std::span(record)));
    std::optional<std::string> held;
    if (!exact || took_over) {
      // Without a conditional create (or after a takeover, whose delete is not conditional), two
      // runs that looked at the same time both write: the lease is whoever's record is there once
      // every write in flight has landed. Each waits longer than a competitor's look and write can
      // take (twice its own, a second at least), and reads until two reads agree.
      auto took = detail::lease_keeper::clock::now() - started;
      auto pause = std::max<detail::lease_keeper::clock::duration>(std::chrono::seconds(1), 2 * took);
      held = detail::read_lease(where);
      for (int read = 0; read < 10; ++read) {
        std::this_thread::sleep_for(pause);
        auto again = detail::read_lease(where);
        if (again == held) break;
        held = std::move(again);
      }
      created = held && detail::lease_field(*held, "lease ") == token_;
    }
    if (created) {
      since_ = detail::unix_milliseconds();
      name_ = detail::random_writer_name();
      start_keeper(where, started);
      return;
    }
    if (!held) held = detail::read_lease(where);
    if (!held) continue; // released meanwhile
    auto pid = detail::lease_number(*held, "pid ");
    auto refreshed = detail::lease_number(*held, "refreshed unix time ");
    bool dead_here = detail::lease_field(*held, "host ") == detail::this_host() && pid && detail::process_ended(*pid);
    bool expired = !refreshed || detail::unix_now() - *refreshed > lease_expiry;
    if (!dead_here && !expired)
      throw training_error(training_errc::in_use,
                           dir.string() + ": in use by another run (" + *held +
                               "); one run at a time may write an experiment directory (its lease ends " +
                               std::to_string(lease_expiry) + " s after its holder stops renewing it)");
    // Its holder is gone: taken over, unless another run took it over since it was read (then
    // that run's lease is judged afresh).
    if (detail::read_lease(where) != held) continue;
    where.backend->remove(where.key);
    took_over = true;
  }
  throw training_error(training_errc::in_use, dir.string() + ": another run took the lock at the same time");
}

CAIRN_DECL void experiment_lock::start_keeper(io::storage_location const& where,
                                              std::chrono::steady_clock::time_point written) {
  keeper_ = std::make_unique<detail::lease_keeper>();
  keeper_->renewed = written;
  keeper_->thread = std::thread([this, where] {
    std::unique_lock lock(keeper_->mutex);
    while (!keeper_->wake.wait_for(lock, std::chrono::seconds(lease_refresh), [&] { return keeper_->stop; })) {
      // A lease that went unrenewed for lease_expiry seconds may be another run's by now:
      // rewriting it would take it back from that run.
      if (keeper_->seconds_since_renewal() >= lease_expiry - lease_refresh) {
        keeper_->lapsed = true;
        return;
      }
      lock.unlock();     // check() reads the keeper meanwhile
      bool lost = false; // taken over, or renewed too late to be safely rewritten
      std::optional<detail::lease_keeper::clock::time_point> renewed;
      try {
        auto held = where.backend->read_all(where.key, 4096);
        lock.lock();
        lost = detail::lease_field(held, "lease ") != token_ ||
               keeper_->seconds_since_renewal() >= lease_expiry - lease_refresh; // the read took long
        lock.unlock();
        if (!lost) {
          auto writing = detail::lease_keeper::clock::now();
          auto renewal = lease_record();
          where.backend->write(where.key, std::as_bytes(std::span(renewal)));
          renewed = writing;
        }
      } catch (std::exception const&) {
        // The store did not answer this time: the next try is in lease_refresh seconds.
      }
      lock.lock();
      if (lost) {
        keeper_->lapsed = true;
        return;
      }
      if (renewed) keeper_->renewed = *renewed;
    }
  });
}

CAIRN_DECL experiment_lock::~experiment_lock() {
  if (!keeper_) return;
  {
    std::lock_guard lock(keeper_->mutex);
    keeper_->stop = true;
  }
  keeper_->wake.notify_all();
  keeper_->thread.join();
  try {
    auto where = io::open_location(path_.string());
    if (detail::lease_field(where.backend->read_all(where.key, 4096), "lease ") == token_)
      where.backend->remove(where.key);
  } catch (std::exception const&) {
    // Not released: it expires after lease_expiry seconds.
  }
}

CAIRN_DECL void experiment_lock::check() const {
  if (!keeper_) return;
  {
    // Half the lease's time at least is left for what is committed after this check: another run
    // takes the lease only once it has gone lease_expiry seconds unrenewed.
    std::lock_guard lock(keeper_->mutex);
    if (keeper_->lapsed || keeper_->seconds_since_renewal() > lease_expiry / 2)
      throw training_error(training_errc::in_use,
                           path_.string() + ": this run's lease was not renewed for " +
                               std::to_string(keeper_->seconds_since_renewal()) +
                               " s (the store did not answer, or another run holds it): nothing more is committed, "
                               "since another run may take it over after " +
                               std::to_string(lease_expiry) + " s");
  }
  auto where = io::open_location(path_.string());
  auto held = detail::read_lease(where).value_or("");
  if (detail::lease_field(held, "lease ") != token_) {
    throw training_error(training_errc::in_use, path_.string() + ": this run's lock was taken over (" +
                                                    (held.empty() ? std::string("now nobody's") : held) +
                                                    "): it stopped renewing it for longer than " +
                                                    std::to_string(lease_expiry) + " s; nothing more is committed");
  }
}

CAIRN_DECL experiment_lock::experiment_lock(std::filesystem::path const& dir) : path_(dir / ".cairn.lock") {
  if (io::is_object_store_path(dir.string())) {
    take_lease(dir);
    return;
  }
  io::make_directories(dir);
  // Never through a symbolic link (the lock truncates its file: a link to another file would
  // destroy it), and never anything but a regular file (a FIFO would block).
  fd_ = io::unique_fd(::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0644));
  if (!fd_ && errno == ELOOP)
    throw io::io_error(path_, "is a symbolic link: the experiment directory's lock must be a regular file of its own "
                              "(remove the link)");
  if (!fd_) throw io::system_error(path_, "cannot open the experiment directory's lock");
  struct stat info {};
  if (::fstat(fd_.get(), &info) != 0) throw io::system_error(path_, "cannot stat the experiment directory's lock");
  if (!S_ISREG(info.st_mode))
    throw io::io_error(path_, "is not a regular file: the experiment directory's lock must be one (remove it)");
  if (info.st_nlink > 1) // a hard link: recording the holder would overwrite the file it shares
    throw io::io_error(path_, "has other names (hard links): the experiment directory's lock must be a file of its "
                              "own (remove it)");
  if (::flock(fd_.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK) throw io::system_error(path_, "cannot lock the experiment directory");
    throw training_error(training_errc::in_use, dir.string() + ": in use by another run (" + holder() +
                                                    "); one run at a time may write an experiment directory");
  }
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  auto since =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  auto record = "host " + std::string(host) + ", pid " + std::to_string(::getpid()) + ", since unix time " +
                std::to_string(since) + "\n";
  if (::ftruncate(fd_.get(), 0) != 0 || ::pwrite(fd_.get(), record.data(), record.size(), 0) < 0)
    throw io::system_error(path_, "cannot record the lock's holder");
  since_ = detail::unix_milliseconds();
  name_ = detail::random_writer_name();
}

CAIRN_DECL std::string experiment_lock::holder() const {
  char text[512] = {};
  auto n = ::pread(fd_.get(), text, sizeof text - 1, 0);
  std::string record = n > 0 ? std::string(text, static_cast<std::size_t>(n)) : "";
  while (!record.empty() && record.back() == '\n') record.pop_back();
  return record.empty() ? "holder unknown" : record;
}

} // namespace cairn
