// Definitions of <cairn/training/local_tier.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once
// cairn: requires libtorch

#include <cairn/checkpoint/detail/identity.hpp>
#include <cairn/comm/collectives.hpp>
#include <cairn/detail/host.hpp>
#include <cairn/error.hpp>
#include <cairn/io/backend.hpp>
#include <cairn/io/error.hpp>
#include <cairn/training/local_tier.hpp>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include <vector>

namespace cairn {

CAIRN_DECL std::string local_nodes::describe(int node) const {
  auto const& members = ranks.at(static_cast<std::size_t>(node));
  std::string text = members.size() == 1 ? "rank " : "ranks ";
  bool consecutive = members.back() - members.front() + 1 == static_cast<int>(members.size());
  if (consecutive && members.size() > 2) {
    text += std::to_string(members.front()) + "-" + std::to_string(members.back());
  } else {
    for (std::size_t i = 0; i < members.size(); ++i) text += (i ? ", " : "") + std::to_string(members[i]);
  }
  return text + " on " + hosts.at(static_cast<std::size_t>(node));
}

namespace detail {

/// "0,2,3" to {0, 2, 3}.
inline std::vector<int> parse_ranks(std::string const& text) {
  std::vector<int> out;
  std::size_t at = 0;
  while (at < text.size()) {
    auto end = text.find(',', at);
    if (end == std::string::npos) end = text.size();
    out.push_back(std::stoi(text.substr(at, end - at)));
    at = end + 1;
  }
  return out;
}

} // namespace detail

CAIRN_DECL local_nodes find_local_nodes(comm::communicator_ref comm, std::filesystem::path const& dir) {
  auto const what = "training.checkpoint.local.directory " + dir.string();
  auto host = detail::this_host();
  auto id = comm::broadcast_string(comm, comm.rank() == 0 ? detail::new_save_id() : std::string());
  auto prefix = ".cairn-node-" + id + ".";
  auto probe = dir / (prefix + std::to_string(comm.rank()));
  auto remove_probe = [&] {
    try {
      auto where = io::open_location(probe.string());
      where.backend->remove(where.key);
    } catch (std::exception const&) {
      // a probe left behind is harmless: no save has its name
    }
  };
  // (Each rank's error names its own directory: the ranks' paths are the same, their disks not.)
  comm::all_succeed(comm, "training.checkpoint.local.directory cannot be used", [&] {
    io::make_folder(dir.string());
    io::write_stored(probe.string(), std::as_bytes(std::span(host.data(), host.size())));
  });
  // Every rank has written its probe: what each sees now is what shares its directory.
  std::string seen;
  try {
    comm::all_succeed(comm, "training.checkpoint.local.directory cannot be listed", [&] {
      auto where = io::open_location(dir.string());
      for (auto const& entry : where.backend->list(where.key))
        if (entry.name.starts_with(prefix)) seen += (seen.empty() ? "" : ",") + entry.name.substr(prefix.size());
    });
  } catch (...) {
    remove_probe();
    throw;
  }
  auto views = comm::all_gather_strings(comm, seen + ";" + host);
  comm.barrier(); // every rank has listed before any probe goes
  remove_probe();
  local_nodes out;
  out.node_of.assign(static_cast<std::size_t>(comm.size()), -1);
  std::vector<std::vector<int>> seen_by(views.size());
  std::vector<std::string> host_of(views.size());
  for (std::size_t r = 0; r < views.size(); ++r) {
    auto split = views[r].rfind(';');
    host_of[r] = views[r].substr(split + 1);
    seen_by[r] = detail::parse_ranks(views[r].substr(0, split));
    std::sort(seen_by[r].begin(), seen_by[r].end());
  }
  for (std::size_t r = 0; r < views.size(); ++r) {
    if (out.node_of[r] >= 0) continue;
    auto const& members = seen_by[r];
    if (std::find(members.begin(), members.end(), static_cast<int>(r)) == members.end())
      throw training_error(training_errc::storage, what + ": rank " + std::to_string(r) + " on " + host_of[r] +
                                                       " does not see the file it wrote there");
    std::set<std::string> hosts;
    for (auto m : members) {
      if (seen_by[static_cast<std::size_t>(m)] != members)
        throw training_error(training_errc::storage,
                             what + ": ranks " + std::to_string(r) + " and " + std::to_string(m) +
                                 " disagree on which ranks share it (a filesystem that does not show every file "
                                 "at once?): it must be each node's own disk");
      hosts.insert(host_of[static_cast<std::size_t>(m)]);
      out.node_of[static_cast<std::size_t>(m)] = out.count();
    }
    if (hosts.size() > 1) {
      std::string names;
      for (auto const& h : hosts) names += (names.empty() ? "" : ", ") + h;
      throw training_error(training_errc::storage,
                           what + " is shared by the hosts " + names +
                               " (each sees the others' files): a local tier needs each node's own disk "
                               "(local NVMe, /dev/shm), where a lost node takes its saves with it; the shared "
                               "filesystem is the persistent tier's (run.experiment_dir)");
    }
    out.ranks.push_back(members);
    out.hosts.push_back(host_of[r]);
  }
  return out;
}

CAIRN_DECL std::vector<int> replica_holders(local_nodes const& nodes, int rank, std::int64_t replicas) {
  std::vector<int> out;
  auto node = nodes.node_of.at(static_cast<std::size_t>(rank));
  auto const& own = nodes.ranks[static_cast<std::size_t>(node)];
  auto index = static_cast<std::size_t>(std::find(own.begin(), own.end(), rank) - own.begin());
  auto others = std::min<std::int64_t>(replicas, nodes.count() - 1);
  for (std::int64_t j = 1; j <= others; ++j) {
    auto const& peer = nodes.ranks[static_cast<std::size_t>((node + j) % nodes.count())];
    out.push_back(peer[index % peer.size()]);
  }
  return out;
}

CAIRN_DECL void detail::copy_file(std::filesystem::path const& from, std::filesystem::path const& to,
                                  std::uint64_t chunk) {
  auto source = io::open_location(from.string());
  auto size = source.backend->size(source.key);
  if (!size) throw io::io_error(from, "missing");
  auto target = io::open_location(to.string());
  auto writer = target.backend->open_writer(target.key);
  std::vector<std::byte> buffer(static_cast<std::size_t>(std::min(chunk, *size)));
  for (std::uint64_t at = 0; at < *size;) {
    auto n = static_cast<std::size_t>(std::min<std::uint64_t>(buffer.size(), *size - at));
    source.backend->read(source.key, at, std::span(buffer.data(), n));
    writer->write(std::span<std::byte const>(buffer.data(), n));
    at += n;
  }
  writer->commit();
}

namespace detail {

/// The transfers of `transfers` in rounds: in each, a rank sends one at most and receives one at
/// most (first come, first placed).
inline std::vector<std::vector<std::size_t>> transfer_rounds(std::vector<file_transfer> const& transfers) {
  std::vector<std::vector<std::size_t>> rounds;
  std::vector<std::set<int>> sending, receiving;
  for (std::size_t i = 0; i < transfers.size(); ++i) {
    auto const& t = transfers[i];
    std::size_t k = 0;
    while (k < rounds.size() && (sending[k].contains(t.from) || receiving[k].contains(t.to))) ++k;
    if (k == rounds.size()) {
      rounds.emplace_back();
      sending.emplace_back();
      receiving.emplace_back();
    }
    rounds[k].push_back(i);
    sending[k].insert(t.from);
    receiving[k].insert(t.to);
  }
  return rounds;
}

} // namespace detail

CAIRN_DECL std::vector<detail::transfer_outcome>
detail::run_transfers(comm::communicator_ref comm, std::vector<file_transfer> const& transfers,
                      std::filesystem::path const& from_dir, std::filesystem::path const& to_dir, std::uint64_t chunk) {
  auto const me = comm.rank();
  auto device = comm.device();
  bool on_host = device.is_cpu();
  auto bytes_options = at::TensorOptions().dtype(at::kByte);
  auto on_device = [&](at::Tensor const& t) { return on_host ? t : t.to(device); };
  auto number = [&](std::int64_t value) {
    return at::full({1}, value, at::TensorOptions().dtype(at::kLong).device(device));
  };
  auto value_of = [](at::Tensor const& t) { return t.to(c10::Device(c10::kCPU)).item<std::int64_t>(); };
  std::vector<transfer_outcome> out;
  for (auto const& round : transfer_rounds(transfers)) {
    std::optional<std::size_t> send, receive;
    for (auto i : round) {
      if (transfers[i].from == me) send = i;
      if (transfers[i].to == me) receive = i;
    }
    if (!send && !receive) continue; // the others' round: only the ends of a transfer take part
    int to = send ? transfers[*send].to : -1, from = receive ? transfers[*receive].from : -1;
    if (to == me)
      throw std::invalid_argument("run_transfers: rank " + std::to_string(me) + " sends " + transfers[*send].name +
                                  " to itself");
    // This rank's file to send, opened and sized (-1: it cannot be read).
    io::storage_location source;
    std::int64_t size = -1;
    std::string send_problem;
    if (send) {
      try {
        source = io::open_location((from_dir / transfers[*send].name).string());
        auto found = source.backend->size(source.key);
        if (!found) throw io::io_error(source.describe(), "missing");
        size = static_cast<std::int64_t>(*found);
      } catch (std::exception const& e) {
        send_problem = e.what();
      }
    }
    // 1. The sizes.
    auto sent_size = number(send ? size : 0), got_size = number(0);
    comm::exchange(comm, sent_size, to, got_size, from);
    std::int64_t incoming = receive ? value_of(got_size) : 0;
    // 2. The bytes, chunk by chunk: chunk k of the file sent with chunk k of the one received.
    auto chunks = [&](std::int64_t n) {
      return n <= 0 ? std::int64_t{0} : (n + static_cast<std::int64_t>(chunk) - 1) / static_cast<std::int64_t>(chunk);
    };
    auto out_chunks = send ? chunks(size) : 0, in_chunks = receive ? chunks(incoming) : 0;
    std::unique_ptr<io::object_writer> writer;
    std::string receive_problem;
    if (receive && incoming < 0) receive_problem = "rank " + std::to_string(from) + " could not read its copy";
    if (receive && incoming >= 0) {
      try {
        auto target = io::open_location((to_dir / transfers[*receive].name).string());
        writer = target.backend->open_writer(target.key);
      } catch (std::exception const& e) {
        receive_problem = e.what();
      }
    }
    at::Tensor outgoing, arriving;
    bool read_failed = !send_problem.empty();
    for (std::int64_t k = 0; k < std::max(out_chunks, in_chunks); ++k) {
      at::Tensor sent, got;
      if (k < out_chunks) {
        auto n = std::min<std::int64_t>(static_cast<std::int64_t>(chunk), size - k * static_cast<std::int64_t>(chunk));
        if (!outgoing.defined() || outgoing.numel() < n) outgoing = at::empty({n}, bytes_options);
        auto view = outgoing.narrow(0, 0, n);
        if (!read_failed) {
          try {
            source.backend->read(source.key, static_cast<std::uint64_t>(k) * chunk,
                                 std::span(static_cast<std::byte*>(view.data_ptr()), static_cast<std::size_t>(n)));
          } catch (std::exception const& e) { // the chunks still go: the receiver waits for them
            read_failed = true;
            send_problem = e.what();
          }
        }
        sent = on_device(view);
      }
      if (k < in_chunks) {
        auto n =
            std::min<std::int64_t>(static_cast<std::int64_t>(chunk), incoming - k * static_cast<std::int64_t>(chunk));
        if (!arriving.defined() || arriving.numel() < n) arriving = at::empty({n}, bytes_options.device(device));
        got = arriving.narrow(0, 0, n);
      }
      at::Tensor none;
      comm::exchange(comm, sent.defined() ? sent : none, k < out_chunks ? to : -1, got.defined() ? got : none,
                     k < in_chunks ? from : -1);
      if (got.defined() && writer && receive_problem.empty()) {
        auto host = on_host ? got : got.to(c10::Device(c10::kCPU));
        try {
          writer->write(
              std::span(static_cast<std::byte const*>(host.data_ptr()), static_cast<std::size_t>(host.numel())));
        } catch (std::exception const& e) {
          receive_problem = e.what();
        }
      }
    }
    // 3. Whether the sender read its whole file.
    auto sent_status = number(read_failed ? 1 : 0), got_status = number(0);
    if (incoming >= 0 || send)
      comm::exchange(comm, sent_status, send && size >= 0 ? to : -1, got_status, receive && incoming >= 0 ? from : -1);
    if (send) {
      std::string problem = send_problem.empty() ? "" : "rank " + std::to_string(me) + " cannot send " + send_problem;
      out.push_back({*send, false, read_failed ? 0 : static_cast<std::uint64_t>(size), problem});
    }
    if (receive) {
      if (receive_problem.empty() && value_of(got_status) != 0)
        receive_problem = "rank " + std::to_string(from) + " could not read all of its copy";
      if (receive_problem.empty()) {
        try {
          writer->commit();
        } catch (std::exception const& e) {
          receive_problem = e.what();
        }
      }
      writer.reset(); // uncommitted: nothing is left under its name
      out.push_back({*receive, true, receive_problem.empty() ? static_cast<std::uint64_t>(incoming) : 0,
                     receive_problem.empty() ? ""
                                             : (to_dir / transfers[*receive].name).string() + " from rank " +
                                                   std::to_string(from) + ": " + receive_problem});
    }
  }
  return out;
}

} // namespace cairn
