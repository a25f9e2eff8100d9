#pragma once
// cairn: requires libtorch

// Small collectives over any communicator, for ranks that agree on something: a boolean, a list
// of integers, strings, how a step went. Values travel as tensors of their own type, never as
// text.

#include <cairn/comm/communicator.hpp>
#include <cairn/error.hpp>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace cairn::comm {

/// Whether `value` is true on every rank. Collective.
template <communicator C> bool all_of(C& comm, bool value) {
  auto flag = at::full({1}, value ? 0 : 1, at::TensorOptions().dtype(at::kInt).device(comm.device()));
  comm.all_reduce(flag, reduce_op::max);
  return flag.to(c10::Device(c10::kCPU)).template item<int>() == 0;
}

/// Whether `value` is true on any rank. Collective.
template <communicator C> bool any_of(C& comm, bool value) { return !all_of(comm, !value); }

/// The sum of every rank's `value`. Collective.
template <communicator C> std::int64_t sum(C& comm, std::int64_t value) {
  auto t = at::full({1}, value, at::TensorOptions().dtype(at::kLong).device(comm.device()));
  comm.all_reduce(t, reduce_op::sum);
  return t.to(c10::Device(c10::kCPU)).template item<std::int64_t>();
}

/// `values` of rank `root`, on every rank (the others' argument is ignored). Collective.
template <communicator C>
std::vector<std::int64_t> broadcast_integers(C& comm, std::vector<std::int64_t> const& values, int root = 0) {
  auto size = at::full({1}, comm.rank() == root ? static_cast<std::int64_t>(values.size()) : 0,
                       at::TensorOptions().dtype(at::kLong).device(comm.device()));
  comm.broadcast(size, root);
  auto n = size.to(c10::Device(c10::kCPU)).template item<std::int64_t>();
  auto data = at::empty({n}, at::TensorOptions().dtype(at::kLong));
  if (comm.rank() == root && n > 0) std::memcpy(data.data_ptr(), values.data(), values.size() * sizeof(std::int64_t));
  auto moved = data.to(comm.device());
  if (n > 0) comm.broadcast(moved, root);
  auto cpu = moved.to(c10::Device(c10::kCPU)).contiguous();
  auto const* begin = static_cast<std::int64_t const*>(cpu.data_ptr());
  return {begin, begin + n};
}

/// Every rank's string, in rank order: for agreeing on paths, messages and small metadata.
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
  bool mine = comm.rank() == root;
  auto size = at::full({1}, mine ? static_cast<std::int64_t>(text.size()) : 0, at::TensorOptions().dtype(at::kLong))
                  .to(comm.device());
  comm.broadcast(size, root);
  auto n = size.to(c10::Device(c10::kCPU)).template item<std::int64_t>();
  if (n == 0) return {};
  auto bytes = at::empty({n}, at::TensorOptions().dtype(at::kByte));
  if (mine) std::memcpy(bytes.data_ptr(), text.data(), text.size());
  bytes = bytes.to(comm.device());
  comm.broadcast(bytes, root);
  auto cpu = bytes.to(c10::Device(c10::kCPU)).contiguous();
  return {static_cast<char const*>(cpu.data_ptr()), static_cast<std::size_t>(n)};
}

/// Runs `f` on this rank, then agrees with every rank on how it went: if it threw anywhere,
/// every rank throws. The rank whose `f` threw rethrows its own exception; the others throw a
/// cairn::error that starts with `what`, names each failed rank and its message, and carries
/// the kind of the lowest failed rank (comm_errc::other_rank when that was not a cairn::error).
/// A collective that replaces a closing barrier, so that a failure on one rank never leaves the
/// others waiting for it.
template <communicator C, class F> void all_succeed(C& comm, std::string const& what, F&& f) {
  std::exception_ptr failure;
  std::string report; // "category\0value\0message" when f threw; empty when it did not
  try {
    std::forward<F>(f)();
  } catch (std::exception const& e) {
    failure = std::current_exception();
    auto const* known = dynamic_cast<cairn::error const*>(&e);
    auto kind = known ? known->kind() : std::error_code();
    report = std::string(kind ? kind.category().name() : "") + '\0' + std::to_string(kind.value()) + '\0' +
             (*e.what() ? e.what() : "failed");
  }
  // Whether any rank failed first (8 bytes a rank); what each said only then.
  auto failed = at::full({1}, failure ? 1 : 0, at::TensorOptions().dtype(at::kLong)).to(comm.device());
  comm.all_reduce(failed, reduce_op::max);
  if (failed.to(c10::Device(c10::kCPU)).template item<std::int64_t>() == 0) return;
  auto reports = all_gather_strings(comm, report);
  if (failure) std::rethrow_exception(failure);
  std::string text;
  std::error_code kind;
  for (std::size_t r = 0; r < reports.size(); ++r) {
    if (reports[r].empty()) continue;
    auto name_end = reports[r].find('\0');
    auto value_end = reports[r].find('\0', name_end + 1);
    if (!kind) {
      auto const* category = cairn::detail::category_named(std::string_view(reports[r]).substr(0, name_end));
      kind = category ? std::error_code(std::atoi(reports[r].c_str() + name_end + 1), *category)
                      : std::error_code(comm_errc::other_rank);
    }
    text += "\n  rank " + std::to_string(r) + ": " + reports[r].substr(value_end + 1);
  }
  if (!text.empty()) throw error(kind, what + ":" + text);
}

} // namespace cairn::comm
