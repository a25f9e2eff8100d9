// Definitions of <cairn/comm/store.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once
// cairn: requires libtorch

#include <cairn/comm/environment.hpp>
#include <cairn/comm/store.hpp>
#include <cairn/error.hpp>

#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <netdb.h>
#include <optional>
#include <poll.h>
#include <string>
#include <string_view>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace cairn::comm {

namespace detail {

/// Waits until something accepts TCP connections at `host`:`port`, or until `deadline`; returns
/// nothing then, or what the last attempt found. libtorch's TCPStore client, refused by a server
/// that does not listen yet, retries a second later: ranks started together paid that second
/// whenever one reached rank 0's store before it listened.
CAIRN_DECL std::optional<std::string> wait_until_listening(std::string const& host, int port,
                                                           std::chrono::steady_clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  auto service = std::to_string(port);
  std::string last_failure = "no attempt";
  while (std::chrono::steady_clock::now() < deadline) {
    addrinfo* found = nullptr;
    if (int failed = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); failed != 0) {
      last_failure = "'" + host + "' does not resolve: " + ::gai_strerror(failed);
    } else {
      for (auto* a = found; a != nullptr; a = a->ai_next) {
        int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
        if (fd < 0) continue;
        int failure = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
        if (failure == EINPROGRESS) { // a remote host: its answer, or 200 ms
          pollfd p{fd, POLLOUT, 0};
          socklen_t length = sizeof failure;
          if (::poll(&p, 1, 200) != 1)
            failure = ETIMEDOUT;
          else if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &failure, &length) != 0)
            failure = errno;
        }
        ::close(fd);
        if (failure == 0) {
          ::freeaddrinfo(found);
          return std::nullopt;
        }
        last_failure = std::strerror(failure);
      }
      ::freeaddrinfo(found);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return last_failure;
}

/// The first line of what libtorch says, without its backtrace.
inline std::string torch_message(std::exception const& e) {
  std::string text = e.what();
  if (auto const* torch_error = dynamic_cast<c10::Error const*>(&e)) text = torch_error->what_without_backtrace();
  if (auto end = text.find('\n'); end != std::string::npos) text.resize(end);
  return text;
}

inline std::vector<std::uint8_t> bytes_of(std::string_view text) { return {text.begin(), text.end()}; }

inline std::string text_of(std::vector<std::uint8_t> const& bytes) { return {bytes.begin(), bytes.end()}; }

/// `terms` as lines `name=value`, and back.
inline std::string encode_terms(rendezvous_terms const& terms) {
  std::string text;
  for (auto const& [name, value] : terms) text += name + "=" + value + "\n";
  return text;
}

inline rendezvous_terms decode_terms(std::string_view text) {
  rendezvous_terms terms;
  while (!text.empty()) {
    auto end = std::min(text.find('\n'), text.size());
    auto line = text.substr(0, end);
    auto equals = std::min(line.find('='), line.size());
    terms.emplace_back(std::string(line.substr(0, equals)),
                       std::string(equals < line.size() ? line.substr(equals + 1) : std::string_view()));
    text.remove_prefix(std::min(end + 1, text.size()));
  }
  return terms;
}

/// The first term on which rank `me` (`mine`) and rank 0 (`theirs`) differ: "world size: rank 0
/// has 4, rank 5 has 8".
inline std::optional<std::string> first_difference(rendezvous_terms const& mine, rendezvous_terms const& theirs,
                                                   int me) {
  auto find = [](rendezvous_terms const& terms, std::string const& name) -> std::optional<std::string> {
    for (auto const& [n, v] : terms)
      if (n == name) return v;
    return std::nullopt;
  };
  auto says = [](std::optional<std::string> const& v) { return v ? *v : std::string("nothing"); };
  auto differs = [&](std::string const& name) -> std::optional<std::string> {
    auto a = find(theirs, name), b = find(mine, name);
    if (a == b) return std::nullopt;
    return name + ": rank 0 has " + says(a) + ", rank " + std::to_string(me) + " has " + says(b);
  };
  for (auto const& [name, value] : mine)
    if (auto d = differs(name)) return d;
  for (auto const& [name, value] : theirs)
    if (auto d = differs(name)) return d;
  return std::nullopt;
}

/// The ranks of `env`'s job meet in `store` (see `make_store`).
inline void meet(c10d::Store& store, distributed_environment const& env, rendezvous_terms const& terms,
                 std::chrono::milliseconds timeout) {
  std::string const at = "cairn.rendezvous/";
  auto const me = "rank " + std::to_string(env.rank);
  auto const where = env.master_addr + ":" + std::to_string(env.master_port) + " (MASTER_ADDR:MASTER_PORT)";
  auto const within = " within " + std::to_string(timeout.count()) + " ms";
  rendezvous_terms mine{{"world size", std::to_string(env.world_size)}};
  mine.insert(mine.end(), terms.begin(), terms.end());
  // A refusal any rank finds reaches rank 0, and from it every rank that waits for its verdict.
  // Each rank other than 0 that registered says when it is done with the rendezvous ("told"):
  // rank 0, whose store it is, waits for that (a little) before it ends with a refusal.
  auto told = [&] { store.add(at + "told", 1); };
  auto refuse = [&](std::string const& why) {
    store.set(at + "refused", bytes_of(why));
    return comm_error(comm_errc::environment, why);
  };
  auto deadline = std::chrono::steady_clock::now() + timeout;
  if (store.add(at + "claim/" + std::to_string(env.rank), 1) > 1)
    throw refuse(me + " was started twice at " + where +
                 ": two launchers of this job were given one node rank, or another job uses the same port");
  store.set(at + "rank/" + std::to_string(env.rank), bytes_of(encode_terms(mine)));
  if (env.rank != 0) {
    store.add(at + "registered", 1);
    try {
      store.wait({at + "rank/0"}, timeout);
    } catch (std::exception const& e) {
      throw comm_error(comm_errc::timeout,
                       me + ": rank 0 did not come to the rendezvous at " + where + within + ": " + torch_message(e));
    }
    if (auto difference = first_difference(mine, decode_terms(text_of(store.get(at + "rank/0"))), env.rank)) {
      auto error = refuse("the ranks of this job disagree on the " + *difference +
                          " (launchers given different -n or --nnodes, or programs with different grids or "
                          "backends?)");
      told();
      throw error;
    }
    store.add(at + "arrived", 1);
    std::string verdict;
    try {
      // Rank 0 gives its verdict by `deadline`: on the ranks that never came, too.
      store.wait({at + "verdict"}, timeout + std::chrono::seconds(10));
      verdict = text_of(store.get(at + "verdict"));
    } catch (std::exception const& e) {
      throw comm_error(comm_errc::timeout, me + ": rank 0 gave no verdict on the rendezvous at " + where + within +
                                               ": " + torch_message(e));
    }
    told();
    if (verdict == "agreed") return;
    bool timed_out = verdict.starts_with("timeout:");
    throw comm_error(timed_out ? comm_errc::timeout : comm_errc::environment, verdict.substr(verdict.find(':') + 1));
  }
  // Rank 0: a refusal goes to every rank waiting, which rank 0 gives them a moment to read.
  auto end_with = [&](comm_errc kind, std::string const& why) {
    store.set(at + "verdict", bytes_of((kind == comm_errc::timeout ? "timeout:" : "refused:") + why));
    auto grace = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (store.add(at + "told", 0) < store.add(at + "registered", 0) && std::chrono::steady_clock::now() < grace)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return comm_error(kind, why);
  };
  while (store.add(at + "arrived", 0) < env.world_size - 1) {
    if (store.check({at + "refused"})) throw end_with(comm_errc::environment, text_of(store.get(at + "refused")));
    if (std::chrono::steady_clock::now() > deadline) {
      std::string missing;
      int count = 0;
      for (int r = 1; r < env.world_size; ++r) {
        if (store.check({at + "rank/" + std::to_string(r)})) continue;
        if (++count <= 16) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      }
      if (count > 16) missing += ", ...";
      throw end_with(comm_errc::timeout, "ranks " + missing + " (" + std::to_string(count) + " of " +
                                             std::to_string(env.world_size) + ") did not come to the rendezvous at " +
                                             where + within);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  store.set(at + "verdict", bytes_of(std::string("agreed")));
}

} // namespace detail

CAIRN_DECL c10::intrusive_ptr<c10d::Store>
make_store(distributed_environment const& env, std::chrono::milliseconds timeout, rendezvous_terms const& terms) {
  if (env.world_size == 1) return c10::make_intrusive<c10d::HashStore>();
  auto const where = env.master_addr + ":" + std::to_string(env.master_port) + " (MASTER_ADDR:MASTER_PORT)";
  bool serve = env.rank == 0 && !env.agent_store;
  if (!serve) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    if (auto failure = detail::wait_until_listening(env.master_addr, env.master_port, deadline))
      throw comm_error(comm_errc::unreachable,
                       "rank " + std::to_string(env.rank) + ": no store listens at " + where + " within " +
                           std::to_string(timeout.count()) + " ms: " + *failure +
                           (env.agent_store ? " (is torchrun's agent alive?)" : " (is rank 0 alive?)"));
  }
  c10d::TCPStoreOptions options;
  options.port = env.master_port;
  options.isServer = serve;
  options.numWorkers = env.world_size;
  options.waitWorkers = false; // the ranks meet below, where a missing one is named
  options.timeout = timeout;
  c10::intrusive_ptr<c10d::Store> store;
  try {
    store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, options);
    // torchrun's agent keeps its store across restarts: each attempt meets under a prefix of its own.
    if (env.agent_store)
      store = c10::make_intrusive<c10d::PrefixStore>("/worker/attempt_" + std::to_string(env.attempt), store);
    detail::meet(*store, env, terms, timeout);
  } catch (comm_error const&) {
    throw;
  } catch (std::exception const& e) {
    throw comm_error(comm_errc::unreachable,
                     "rank " + std::to_string(env.rank) + (serve ? ": cannot serve the store at " : ": the store at ") +
                         where + (serve ? ": " : " failed: ") + detail::torch_message(e) +
                         (serve ? " (another job, or a second launcher of node 0, on this port?)" : ""));
  }
  return store;
}

CAIRN_DECL std::vector<std::uint8_t> share_from_rank0(c10d::Store& store, distributed_environment const& env,
                                                      std::string const& key,
                                                      std::function<std::vector<std::uint8_t>()> const& make,
                                                      std::chrono::milliseconds timeout) {
  auto failed = [&](std::string const& what) {
    return error("rank " + std::to_string(env.rank) + ": " + what + " '" + key + "' within " +
                 std::to_string(timeout.count()) + " ms (is rank 0 alive?)");
  };
  std::vector<std::uint8_t> value;
  if (env.rank == 0) {
    value = make();
    store.set(key, value);
  } else {
    try {
      store.wait({key}, timeout);
    } catch (std::exception const&) {
      throw failed("nothing was published under");
    }
    value = store.get(key);
  }
  auto read = key + "/read";
  store.add(read, 1);
  if (env.rank == 0) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (store.add(read, 0) < env.world_size) {
      if (std::chrono::steady_clock::now() > deadline) throw failed("not every rank read");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  return value;
}

} // namespace cairn::comm
