// Definitions of <cairn/checkpoint/detail/executor.hpp>: inline in a header-only build, compiled
// once by <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once
// cairn: requires libtorch

#include <cairn/checkpoint/detail/executor.hpp>
#include <cairn/checkpoint/detail/gather.hpp>
#include <cairn/checkpoint/detail/identity.hpp>
#include <cairn/checkpoint/detail/save_files.hpp>
#include <cairn/checkpoint/detail/write_behind.hpp>
#include <cairn/checkpoint/format_files.hpp>
#include <cairn/checkpoint/tensor.hpp>
#include <cairn/comm/collectives.hpp>
#include <cairn/io/backend.hpp>
#include <cairn/io/file.hpp>
#include <cairn/io/safetensors_writer.hpp>
#include <cairn/progress.hpp>

#include <ATen/core/Tensor.h>

#include <algorithm>
#include <exception>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace cairn::detail {

namespace executor {

/// The state's parameters by name.
inline std::map<std::string, parameter_state const*, std::less<>> parameters_by_name(model_state const& state) {
  std::map<std::string, parameter_state const*, std::less<>> out;
  for (auto const& p : state.parameters) out.emplace(p.layout.name, &p);
  return out;
}

/// This rank's shard `item` names, on CPU, densely: the live tensor itself when it is one.
inline at::Tensor own_shard(std::map<std::string, parameter_state const*, std::less<>> const& mine,
                            write_item const& item) {
  auto found = mine.find(item.parameter);
  if (found == mine.end())
    throw checkpoint_error(checkpoint_errc::invalid_state,
                           "the plan names a parameter this rank does not hold: '" + item.parameter + "'");
  return found->second->shards.at(item.shard).to(c10::Device(c10::kCPU)).reshape({-1}).contiguous();
}

/// Bytes a tensor handed to the writer holds of its own (nothing when it is the live state's).
inline std::uint64_t held_bytes(at::Tensor const& handed, at::Tensor const& live) {
  return handed.data_ptr() == live.data_ptr() ? 0 : static_cast<std::uint64_t>(handed.nbytes());
}

/// Whether some tensor of `file` is co_written: its holders write their parts into it.
inline bool shared(planned_file const& file) {
  return std::any_of(file.items.begin(), file.items.end(),
                     [](write_item const& item) { return item.source == write_source::co_written; });
}

/// The writer of `file` into `dir`: its metadata and every tensor declared.
inline std::unique_ptr<io::safetensors_writer> declared(planned_file const& file, std::filesystem::path const& dir) {
  auto writer = std::make_unique<io::safetensors_writer>(dir / file.name);
  for (auto const& [key, value] : file.metadata) writer->set_metadata(key, value);
  for (auto const& item : file.items)
    if (item.source == write_source::co_written)
      writer->declare_shared(item.tensor, item.dtype, item.shape, item.stored);
    else
      writer->declare(item.tensor, item.dtype, item.shape, item.stored);
  return writer;
}

/// Rank 0's closing files.
inline void write_closing(save_plan const& plan, std::filesystem::path const& dir) {
  for (auto const& c : plan.closing) io::write_stored((dir / c.name).string(), std::as_bytes(std::span(c.text)));
}

/// The outputs of `rule` for `file`'s items of it, checked against what the plan says of them.
inline std::vector<at::Tensor> convert(external::weight_rule const& rule, std::vector<at::Tensor> const& ours,
                                       planned_file const& file, std::size_t rule_index) {
  std::vector<at::Tensor> theirs;
  for (auto& t : rule.to_theirs(ours)) theirs.push_back(t.contiguous());
  if (theirs.size() != rule.theirs.size())
    throw checkpoint_error(checkpoint_errc::mismatch, "the weight rule for '" + rule.theirs.front() + "' gave " +
                                                          std::to_string(theirs.size()) + " tensors for " +
                                                          std::to_string(rule.theirs.size()) + " names");
  for (auto const& item : file.items) {
    if (item.source != write_source::converted || item.rule != rule_index) continue;
    auto const& t = theirs.at(item.output);
    std::vector<std::uint64_t> shape(t.sizes().begin(), t.sizes().end());
    if (to_dtype(t.scalar_type()) != item.dtype || shape != item.shape)
      throw checkpoint_error(checkpoint_errc::mismatch,
                             "the weight rule for '" + rule.theirs.front() +
                                 "' gave other shapes or types than it does on meta tensors");
  }
  return theirs;
}

/// A tensor to write: the whole of an item, or (`first`) this rank's part of a co_written one,
/// with the bytes of it this rank keeps alive only for the write.
struct produced {
  at::Tensor tensor;
  std::uint64_t held = 0;
  std::optional<std::uint64_t> first{};
};

/// Where each rank's part of each co_written parameter lies in it.
inline std::map<std::string, std::vector<flat_range>>
co_written_parts(save_plan const& plan, std::map<std::string, parameter_layout> const& whole) {
  std::map<std::string, std::vector<flat_range>> out;
  for (auto const& file : plan.files)
    for (auto const& item : file.items) {
      if (item.source != write_source::co_written || out.contains(item.parameter)) continue;
      auto runs = part_runs(plan.ranks, whole.at(item.parameter));
      if (!runs)
        throw checkpoint_error(checkpoint_errc::invalid_state,
                               "the plan writes '" + item.parameter + "' in parts its holders do not hold");
      out.emplace(item.parameter, std::move(*runs));
    }
  return out;
}

/// A save under way on this rank: what it needs to produce the tensors of the plan's items.
struct save_run {
  save_plan const& plan;
  model_state const& state;
  comm::communicator_ref comm;
  std::span<external::weight_rule const> rules;
  std::map<std::string, parameter_state const*, std::less<>> mine = parameters_by_name(state);
  std::map<std::string, parameter_layout> whole = parameters_of(plan.ranks); // for the gathers
  std::vector<std::vector<at::Tensor>> converted = std::vector<std::vector<at::Tensor>>(plan.files.size());
  std::map<std::string, std::vector<flat_range>> parts = co_written_parts(plan, whole); // by parameter

  /// The tensor item `k` of file `f` writes, or nothing when another rank writes it (this rank
  /// still takes part in gathers); this rank's part when the item is co_written.
  std::optional<produced> produce(std::size_t f, std::size_t k) {
    auto const& file = plan.files[f];
    auto const& item = file.items[k];
    bool writes = file.writer == comm.rank();
    switch (item.source) {
    case write_source::own_shard: {
      if (!writes) return std::nullopt;
      auto tensor = own_shard(mine, item);
      return produced{tensor, held_bytes(tensor, mine.at(item.parameter)->shards[item.shard])};
    }
    case write_source::co_written: {
      auto const& runs = parts.at(item.parameter);
      auto const& run = runs.at(static_cast<std::size_t>(comm.rank()));
      if (run.begin == run.end) return std::nullopt;
      auto tensor = own_shard(mine, item);
      return produced{tensor, held_bytes(tensor, mine.at(item.parameter)->shards[item.shard]), run.begin};
    }
    case write_source::gathered: { // every rank takes part
      auto gathered = gather_whole(state, comm, plan.ranks, whole.at(item.parameter), item.shard, file.writer);
      if (!gathered) return std::nullopt;
      return produced{*gathered, static_cast<std::uint64_t>(gathered->nbytes())};
    }
    case write_source::converted:
      break;
    }
    if (item.output == 0) convert_rule(f, item); // every rank takes part
    if (!writes) return std::nullopt;
    auto tensor = converted[f].at(item.output);
    if (k + 1 == file.items.size() || file.items[k + 1].rule != item.rule) converted[f].clear();
    return produced{tensor, static_cast<std::uint64_t>(tensor.nbytes())};
  }

  /// The rule of `item` applied to its parameters, gathered whole on the file's writer.
  void convert_rule(std::size_t f, write_item const& item) {
    auto const& file = plan.files[f];
    auto const& rule = rules[item.rule];
    std::vector<at::Tensor> ours;
    for (auto const& name : rule.ours) {
      auto const& p = whole.at(name);
      if (auto t = gather_whole(state, comm, plan.ranks, p, 0, file.writer))
        ours.push_back(t->view(std::vector<std::int64_t>(p.shape.begin(), p.shape.end())));
    }
    if (file.writer == comm.rank()) converted[f] = convert(rule, ours, file, item.rule);
  }
};

} // namespace executor

namespace executor {

using writer_list = std::vector<std::unique_ptr<io::safetensors_writer>>;

/// Opens the files this rank writes, headers written; shared ones under `token`'s name.
inline void open_files(save_plan const& plan, std::filesystem::path const& dir, int rank, std::string const& token,
                       writer_list& writers) {
  io::make_folder(dir.string());
  for (std::size_t f = 0; f < plan.files.size(); ++f) {
    auto const& file = plan.files[f];
    if (file.writer != rank) continue;
    writers[f] = declared(file, dir);
    if (!shared(file)) {
      writers[f]->open();
      if (file.items.empty()) writers[f]->commit(); // nothing to wait for
    } else {
      writers[f]->open_shared(token);
    }
  }
}

/// Joins the shared files of other writers that this rank writes parts of, once they are open.
inline void join_files(save_run const& run, std::filesystem::path const& dir, std::string const& token,
                       writer_list& writers) {
  auto rank = static_cast<std::size_t>(run.comm.rank());
  for (std::size_t f = 0; f < run.plan.files.size(); ++f) {
    auto const& file = run.plan.files[f];
    if (file.writer == run.comm.rank()) continue;
    for (auto const& item : file.items) {
      if (item.source != write_source::co_written) continue;
      auto const& part = run.parts.at(item.parameter).at(rank);
      if (part.begin == part.end || writers[f]) continue;
      writers[f] = declared(file, dir);
      writers[f]->join_shared(token);
    }
  }
}

/// Step 2 of the sequence: every item produced in its round and queued to be written behind.
inline void write_rounds(save_run& run, writer_list& writers, write_behind& behind) {
  for (std::size_t k = 0, rounds = run.plan.rounds(); k < rounds; ++k)
    for (std::size_t f = 0; f < run.plan.files.size(); ++f) {
      auto const& file = run.plan.files[f];
      if (k >= file.items.size()) continue;
      std::optional<produced> made;
      try {
        made = run.produce(f, k);
      } catch (std::exception const&) {
        behind.fail(std::current_exception()); // the writer's failure: agreed below, on every rank
        continue;
      }
      if (!made) continue;
      progress_scope::count(static_cast<std::uint64_t>(made->tensor.nbytes()));
      bool commit = k + 1 == file.items.size() && file.writer == run.comm.rank() && !shared(file);
      behind.submit(made->held, [&writers, f, &item = file.items[k], made = *made, commit] {
        if (made.first)
          writers[f]->put_part(item.tensor, *made.first, tensor_bytes(made.tensor));
        else
          writers[f]->put(item.tensor, tensor_bytes(made.tensor));
        if (commit) writers[f]->commit();
      });
    }
}

} // namespace executor

CAIRN_DECL void execute(save_plan const& planned, std::filesystem::path const& dir, model_state const& state,
                        comm::communicator_ref comm, std::span<external::weight_rule const> rules) {
  // Where several ranks cannot write one file at offsets of their own (an object store), each
  // tensor the plan has its holders write in place is gathered on its file's writer instead.
  std::optional<save_plan> gathered;
  if (!io::open_location(dir.string()).backend->guarantees().shared_writes &&
      std::any_of(planned.files.begin(), planned.files.end(), executor::shared)) {
    gathered = planned;
    for (auto& file : gathered->files)
      for (auto& item : file.items)
        if (item.source == write_source::co_written) item.source = write_source::gathered;
  }
  auto const& plan = gathered ? *gathered : planned;
  auto rank = comm.rank();
  executor::save_run run{plan, state, comm, rules};
  bool any_shared = std::any_of(plan.files.begin(), plan.files.end(), executor::shared);
  // The shared files' temporary names: the same on every rank, new to this save.
  auto token = any_shared ? comm::broadcast_string(comm, rank == 0 ? new_save_id() : std::string()) : std::string();
  auto failure = "cannot save checkpoint " + dir.string();
  executor::writer_list writers(plan.files.size());
  comm::all_succeed(comm, failure, [&] { executor::open_files(plan, dir, rank, token, writers); });
  write_behind behind;
  if (any_shared) behind.submit(0, [&] { executor::join_files(run, dir, token, writers); });
  executor::write_rounds(run, writers, behind);
  if (any_shared)
    behind.submit(0, [&] {
      for (std::size_t f = 0; f < plan.files.size(); ++f)
        if (writers[f] && plan.files[f].writer != rank) writers[f]->release();
    });
  comm::all_succeed(comm, failure, [&] { behind.finish(); });
  if (any_shared) // every part is durable in its file: the writers checksum them and commit
    comm::all_succeed(comm, failure, [&] {
      for (std::size_t f = 0; f < plan.files.size(); ++f)
        if (plan.files[f].writer == rank && executor::shared(plan.files[f])) writers[f]->commit();
    });
  // The closing files last, once every rank's files are whole: an index never names a missing file.
  comm::all_succeed(comm, failure, [&] {
    if (rank == 0) executor::write_closing(plan, dir);
  });
}

CAIRN_DECL void execute_alone(save_plan const& plan, std::filesystem::path const& dir, model_state const& state,
                              int rank) {
  auto mine = executor::parameters_by_name(state);
  io::make_folder(dir.string());
  for (auto const& file : plan.files) {
    if (file.writer != rank) continue;
    io::safetensors_writer writer(dir / file.name);
    for (auto const& [key, value] : file.metadata) writer.set_metadata(key, value);
    std::vector<at::Tensor> keep_alive; // CPU copies stay valid until the file is written
    for (auto const& item : file.items) {
      if (item.source != write_source::own_shard)
        throw checkpoint_error(checkpoint_errc::invalid_state,
                               "a plan with gathered or converted tensors takes every rank: " + file.name);
      keep_alive.push_back(executor::own_shard(mine, item));
      writer.add(item.tensor, item.dtype, item.shape, tensor_bytes(keep_alive.back()), item.stored);
    }
    writer.write();
  }
  if (rank == 0) executor::write_closing(plan, dir);
}

} // namespace cairn::detail
