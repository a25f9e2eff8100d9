#pragma once
// cairn: requires libtorch

// The loader core every format shares: the state shards a load asks for, the files it has
// opened, staging into the live tensors, and the account of every element, agreed by all ranks
// at the end. A format adds only where each tensor's bytes are found.

#include <cairn/checkpoint/config.hpp>
#include <cairn/checkpoint/detail/transfer.hpp>
#include <cairn/checkpoint/state.hpp>
#include <cairn/comm/communicator.hpp>
#include <cairn/io/safetensors.hpp>
#include <cairn/progress.hpp>

#include <ATen/ops/zeros.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace cairn::detail {

class loader {
public:
  /// A load into `state` of what `config` asks for, from a checkpoint holding `saved_shards`.
  loader(model_state& state, checkpoint_load_config const& config, std::vector<std::string> const& saved_shards,
         verification verify)
      : state_(state), path_(config.path), verify_(verify) {
    state.check();
    for (auto const& p : state.parameters) live_.insert(p.layout.name);
    for (auto i : selected_shards(state.shard_names, config.model_weights, config.optimizer_state)) {
      auto const& name = state.shard_names[i];
      if (std::find(saved_shards.begin(), saved_shards.end(), name) == saved_shards.end())
        report_.add(name, "state shard not in the checkpoint (it holds " + join(saved_shards) + ")");
      else
        shards_.emplace_back(i, name);
    }
    // Optimizer state the checkpoint holds and this state has no place for would be lost: as the
    // dry run (`plan_load`) says, a load of the optimizer state takes all of it or none.
    if (config.optimizer_state)
      for (auto const& saved : saved_shards)
        if (saved != "weights" &&
            std::find(state.shard_names.begin(), state.shard_names.end(), saved) == state.shard_names.end())
          report_.add(saved, "state shard of the checkpoint this state does not have: it would be lost "
                             "(optimizer_state=false loads the weights alone)");
  }

  /// The live shards to load (index in the state), with the names they have in the checkpoint.
  [[nodiscard]] std::vector<std::pair<std::size_t, std::string>> const& shards() const noexcept { return shards_; }

  /// The file at `path`, opened once per load.
  io::safetensors_file& file(std::filesystem::path const& path) {
    auto& slot = files_[path.string()];
    if (!slot) {
      slot = std::make_unique<io::safetensors_file>(path);
      read_counts().header_bytes.fetch_add(slot->header_size(), std::memory_order_relaxed);
      read_counts().files.fetch_add(1, std::memory_order_relaxed);
    }
    return *slot;
  }

  /// Tensor `tensor` of `file`, saved as `dtype` with layout `saved`, with its checksum when
  /// verifying. Throws cairn::error naming the file when the tensor is not there, or holds
  /// another number of elements or another type than the metadata says.
  [[nodiscard]] load_source source(io::safetensors_file const& file, std::string const& tensor, shard_layout saved,
                                   io::dtype dtype) const {
    return source_from(file, file.at(tensor), std::move(saved), dtype, verify_);
  }

  /// Loads shard `live_index` of `p` from `sources`; what does not add up goes to the report
  /// under `path`.
  void load(parameter_state& p, std::size_t live_index, std::span<load_source const> sources, std::string const& path) {
    auto& live = p.shards[live_index];
    auto staging = staging_for(live);
    load_shard(p.layout, staging, sources, path, report_);
    finish_staging(live, staging);
    progress_scope::count(static_cast<std::uint64_t>(live.nbytes()));
  }

  /// Ends the load of `p`: optimizer state not loaded is zeroed, so that training restarts it
  /// cleanly.
  void finish(parameter_state& p) const {
    for (std::size_t i = 1; i < state_.shard_names.size(); ++i) {
      bool loaded = std::any_of(shards_.begin(), shards_.end(), [&](auto const& s) { return s.first == i; });
      if (!loaded) p.shards[i].zero_();
    }
  }

  void problem(std::string path, std::string message) { report_.add(std::move(path), std::move(message)); }
  void missing(std::string const& parameter) { problem(parameter, "missing from the checkpoint"); }
  /// A parameter of the checkpoint, given in the same order on every rank: a problem when no rank
  /// of the model holds it (a pipeline stage holds its own layers alone), found in `agree`.
  void saved(std::string const& parameter) { saved_.emplace_back(parameter, live_.contains(parameter)); }

  /// Throws on every rank when any rank found a problem. Collective.
  template <class Comm> void agree(Comm& comm) {
    if (!saved_.empty()) { // which saved parameters some rank holds: one small sum over the ranks
      auto held = at::zeros({static_cast<std::int64_t>(saved_.size())}, at::TensorOptions().dtype(at::kInt));
      auto* flags = held.data_ptr<std::int32_t>();
      for (std::size_t i = 0; i < saved_.size(); ++i) flags[i] = saved_[i].second ? 1 : 0;
      auto summed = held.to(comm.device());
      comm.all_reduce(summed, comm::reduce_op::sum);
      held = summed.to(c10::Device(c10::kCPU));
      flags = held.data_ptr<std::int32_t>();
      for (std::size_t i = 0; i < saved_.size(); ++i)
        if (flags[i] == 0 && comm.rank() == 0) problem(saved_[i].first, "in the checkpoint but not in the model");
    }
    report_.agree(comm, "cannot load checkpoint " + path_.string());
  }

private:
  static std::string join(std::vector<std::string> const& names) {
    std::string text;
    for (auto const& n : names) text += (text.empty() ? "" : ", ") + n;
    return text.empty() ? "nothing" : text;
  }

  model_state& state_;
  std::filesystem::path path_;
  verification verify_;
  std::set<std::string, std::less<>> live_;         // this rank's parameter names
  std::vector<std::pair<std::string, bool>> saved_; // the checkpoint's, and whether this rank holds each
  std::vector<std::pair<std::size_t, std::string>> shards_;
  std::map<std::string, std::unique_ptr<io::safetensors_file>> files_;
  load_report report_;
};

} // namespace cairn::detail
