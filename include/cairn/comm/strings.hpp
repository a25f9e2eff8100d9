#pragma once
// cairn: requires libtorch

#include <cairn/comm/communicator.hpp>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include <cstdint>
#include <cstring>
#include <string>
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

} // namespace cairn::comm
