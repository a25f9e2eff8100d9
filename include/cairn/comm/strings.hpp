#pragma once
// cairn: requires libtorch

#include <cairn/comm/communicator.hpp>
#include <cairn/error.hpp>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include <cstdint>
#include <cstring>
#include <exception>
#include <string>
#include <utility>
#include <vector>

namespace cairn::comm {

/// Every rank's string, in rank order: for agreeing on iterations, paths and small metadata.
template <communicator C> std::vector<std::string> all_gather_strings(C& comm, std::string const& text) {
  auto bytes = at::empty({static_cast<std::int64_t>(text.size())}, at::TensorOptions().dtype(at::kByte));
  if (!text.empty()) std::memcpy(bytes.data_ptr(), text.data(), text.size());
  std::vector<std::string> out;
  for (auto const& t : comm.all_gather(bytes.to(comm.device()))) {
    auto cpu = t.to(c10::Device(c10::kCPU)).contiguous();
    out.emplace_back(static_cast<char const*>(cpu.data_ptr()), static_cast<std::size_t>(cpu.numel()));
  }
  return out;
}

/// `text` of rank `root`, on every rank.
template <communicator C> std::string broadcast_string(C& comm, std::string const& text, int root = 0) {
  return all_gather_strings(comm, comm.rank() == root ? text : std::string())[static_cast<std::size_t>(root)];
}

/// Runs `f` on this rank, then agrees with every rank on how it went: if it threw anywhere,
/// every rank throws. The rank whose `f` threw rethrows its own exception; the others throw a
/// cairn::error that starts with `what` and names each failed rank and its message. A collective
/// that replaces a closing barrier, so that a failure on one rank never leaves the others
/// waiting for it.
template <communicator C, class F> void all_succeed(C& comm, std::string const& what, F&& f) {
  std::exception_ptr failure;
  std::string message;
  try {
    std::forward<F>(f)();
  } catch (std::exception const& e) {
    failure = std::current_exception();
    message = *e.what() ? e.what() : "failed";
  }
  auto messages = all_gather_strings(comm, message);
  if (failure) std::rethrow_exception(failure);
  std::string text;
  for (std::size_t r = 0; r < messages.size(); ++r)
    if (!messages[r].empty()) text += "\n  rank " + std::to_string(r) + ": " + messages[r];
  if (!text.empty()) throw error(what + ":" + text);
}

} // namespace cairn::comm
