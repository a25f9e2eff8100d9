// Definitions of <cairn/comm/store.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once
// cairn: requires libtorch

#include <cairn/comm/environment.hpp>
#include <cairn/comm/store.hpp>
#include <cairn/error.hpp>

#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <netdb.h>
#include <optional>
#include <poll.h>
#include <string>
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

} // namespace detail

CAIRN_DECL c10::intrusive_ptr<c10d::Store> make_store(distributed_environment const& env,
                                                      std::chrono::milliseconds timeout) {
  if (env.world_size == 1) return c10::make_intrusive<c10d::HashStore>();
  if (env.rank != 0) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    if (auto failure = detail::wait_until_listening(env.master_addr, env.master_port, deadline))
      throw comm_error(comm_errc::unreachable,
                       "rank " + std::to_string(env.rank) + ": no store listens at " + env.master_addr + ":" +
                           std::to_string(env.master_port) + " (MASTER_ADDR:MASTER_PORT) within " +
                           std::to_string(timeout.count()) + " ms: " + *failure + " (is rank 0 alive?)");
  }
  c10d::TCPStoreOptions options;
  options.port = env.master_port;
  options.isServer = env.rank == 0;
  options.numWorkers = env.world_size;
  options.waitWorkers = true;
  options.timeout = timeout;
  return c10::make_intrusive<c10d::TCPStore>(env.master_addr, options);
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
