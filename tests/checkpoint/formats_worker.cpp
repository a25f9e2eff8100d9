// The multi-process format tests. One rank, started by `cairn launch -n N`:
//
//     checkpoint_formats_worker save DIR FORMAT SCHEME     a known model, saved
//     checkpoint_formats_worker load DIR FORMAT SCHEME     loaded into this world's layout, checked
//     checkpoint_formats_worker exchange                   plans of saves one after the other: the
//                                                          layouts exchanged again only when changed
//     checkpoint_formats_worker export DIR                 the tiny model exported in several
//                                                          files (written by several ranks), loaded back
//
// Any world size and scheme may load what any other saved: that is resharding, tested case after
// case, the ranks of each save and load forked from the driver, by
//
//     checkpoint_formats_worker reshard FORMAT WORK_DIR
//
// and between TP x PP x DP grids at ZeRO stages (SCHEME "tp2pp1dp2z1"), weights and optimizer
// state bitwise, by
//
//     checkpoint_formats_worker grid FORMAT WORK_DIR
#include <cairn/checkpoint/formats/distributed.hpp>
#include <cairn/checkpoint/formats/state_dict.hpp>
#include <cairn/comm.hpp>
#include <cairn/comm/gloo.hpp>
#include <cairn/io/error.hpp>
#include <cairn/io/file.hpp>
#include <cairn/io/safetensors.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "forked_ranks.hpp"
#include "model.hpp"
#include "tiny_model.hpp"

namespace {

/// Fails the first write to the second file of an export (rank 1 writes it; the other ranks
/// write their parts of its tensors into it, and fail on it just the same).
void fail_second_file(char const* operation, std::filesystem::path const& path) {
  auto name = path.filename().string();
  if (std::string(operation) == "write" &&
      (name.find("state_dict_1.safetensors") != std::string::npos || name.find("model-00002-of-") != std::string::npos))
    throw cairn::io::system_error(path, "write failed", ENOSPC);
}

int export_and_load(char const* dir) {
  auto comm = cairn::comm::gloo_from_environment(std::chrono::seconds(60));
  test_model::tiny_model model{8, 3, 16};
  auto conv = test_model::tiny_converter();
  auto state = test_model::tiny_state(model, true, true, comm.rank(), comm.size());
  cairn::checkpoint_save_config save;
  save.path = dir;
  save.parameters_per_file = 200; // below what a config allows: several files, so several writers
  cairn::external::save(state, comm, conv, model, save);
  auto files = cairn::io::read_index(save.path / "model.safetensors.index.json").files().size();

  // Loaded into another layout (whole on every rank), every element where it was.
  auto whole = test_model::tiny_state(model, false, true);
  auto loaded = test_model::tiny_state(model, false, false);
  cairn::checkpoint_load_config load;
  load.path = dir;
  cairn::external::load(loaded, comm, conv, model, load);
  long long bad = 0;
  for (std::size_t i = 0; i < whole.parameters.size(); ++i)
    bad += loaded.parameters[i].shards[0].ne(whole.parameters[i].shards[0]).sum().item<std::int64_t>();
  std::printf("rank %d of %d: exported %zu files, loaded back, %lld wrong elements\n", comm.rank(), comm.size(), files,
              bad);
  if (bad != 0 || files < 3) return 1;

  // Flat shards: every tensor of a state_dict export is written in place by its holders, each
  // rank writing its own share of every file (no bytes gathered).
  auto planned = cairn::formats::state_dict::plan(state, comm, save, {}, {});
  std::size_t co_written = 0, items = 0;
  for (auto const& file : planned.files)
    for (auto const& item : file.items) {
      ++items;
      co_written += item.source == cairn::write_source::co_written ? 1 : 0;
    }
  auto shares = planned.bytes_per_rank(comm.size());
  for (auto const& closing : planned.closing) shares[0] -= closing.text.size(); // the tensors' bytes alone
  auto [least, most] = std::minmax_element(shares.begin(), shares.end());
  std::printf("rank %d: %zu of %zu tensors written in place by their holders, %llu to %llu bytes per rank\n",
              comm.rank(), co_written, items, static_cast<unsigned long long>(*least),
              static_cast<unsigned long long>(*most));
  if (co_written != items || *most > *least + *least / 4) return 1;

  // A disk error on one rank's writer, of either export: every rank fails (none waits forever),
  // the error names that rank and its file, and no file of the failed export is left complete
  // under a final name of a directory that claims to be a checkpoint.
  bool failed_everywhere = true;
  for (auto format : {cairn::checkpoint_format::state_dict, cairn::checkpoint_format::external}) {
    auto failed = save;
    std::string name = format == cairn::checkpoint_format::external ? "external" : "state_dict";
    failed.path = std::filesystem::path(dir) / ("failed_" + name);
    failed.format = format;
    if (comm.rank() == 0) std::filesystem::remove_all(failed.path); // from an earlier run
    comm.barrier();
    std::string message;
    {
      // The file's writer fails in one export, another rank writing its part of it in the other.
      int failing = format == cairn::checkpoint_format::external ? 1 : 0;
      cairn::io::scoped_fault_injection fault(comm.rank() == failing ? fail_second_file : nullptr);
      try {
        if (format == cairn::checkpoint_format::external)
          cairn::external::save(state, comm, conv, model, failed);
        else
          cairn::save_checkpoint(state, comm, failed);
      } catch (std::exception const& e) {
        message = e.what();
      }
    }
    auto second = format == cairn::checkpoint_format::external ? "model-00002-of-" : "state_dict_1.safetensors";
    int failing = format == cairn::checkpoint_format::external ? 1 : 0;
    bool named = message.find("rank " + std::to_string(failing)) != std::string::npos || comm.rank() == failing;
    comm.barrier();         // every rank has given up its files
    bool left_over = false; // a temporary or shared file, or the failed file under its final name
    for (auto const& entry : std::filesystem::directory_iterator(failed.path))
      left_over = left_over || entry.path().filename().string().find(second) != std::string::npos ||
                  entry.path().filename().string().front() == '.';
    bool ok = !message.empty() && named && message.find(second) != std::string::npos && !left_over &&
              !std::filesystem::exists(failed.path / (format == cairn::checkpoint_format::external
                                                          ? "config.json"
                                                          : "state_dict.safetensors.index.json"));
    std::printf("rank %d: a write failing on rank %d (%s): %s\n", comm.rank(), failing, name.c_str(),
                ok ? "refused on every rank" : ("NOT AS EXPECTED: " + message).c_str());
    failed_everywhere = failed_everywhere && ok;
  }
  return failed_everywhere ? 0 : 1;
}

/// A communicator that counts the bytes each collective brings this rank.
struct counting {
  cairn::comm::gloo_communicator& inner;
  std::uint64_t received = 0;
  [[nodiscard]] c10::Device device() const { return inner.device(); }
  [[nodiscard]] int rank() const { return inner.rank(); }
  [[nodiscard]] int size() const { return inner.size(); }
  void barrier() { inner.barrier(); }
  void broadcast(at::Tensor& t, int root) {
    inner.broadcast(t, root);
    received += t.nbytes();
  }
  void all_reduce(at::Tensor& t, cairn::comm::reduce_op op) {
    inner.all_reduce(t, op);
    received += t.nbytes();
  }
  std::vector<at::Tensor> all_gather(at::Tensor const& t) {
    auto all = inner.all_gather(t);
    for (auto const& part : all) received += part.nbytes();
    return all;
  }
  void gather_into(at::Tensor const& t, int root, std::vector<at::Tensor>& outputs) {
    inner.gather_into(t, root, outputs);
    if (rank() == root)
      for (auto const& part : outputs) received += part.nbytes();
  }
};

/// Plans of saves one after the other on one exchange: the layouts travel at the first, and
/// again only when some rank's changed; unchanged, a save's agreement brings each rank at most
/// 1 KB, whatever the number of ranks.
int exchange() {
  auto gloo = cairn::comm::gloo_from_environment(std::chrono::seconds(60));
  counting comm{gloo};
  auto rank = comm.rank();
  cairn::detail::layout_exchange kept;
  cairn::checkpoint_save_config config;
  config.path = "unused";
  auto plan = [&](cairn::model_state const& state) {
    comm.received = 0;
    auto out = cairn::formats::distributed::plan(state, comm, config, {}, {}, &kept);
    return std::pair{out, comm.received};
  };
  auto flat = test_model::make(test_model::scheme::flat, rank, comm.size(), false);
  auto [first, first_bytes] = plan(flat);
  auto [second, second_bytes] = plan(flat);
  auto dim = test_model::make(test_model::scheme::dim, rank, comm.size(), false);
  auto [third, third_bytes] = plan(dim);
  std::string lone; // one rank alone changes: every rank sees it, none reuses what it kept
  try {
    auto odd = rank == 1 ? dim : flat;
    (void)plan(odd);
  } catch (cairn::error const& e) {
    lone = e.what();
  }
  bool ok = first.ranks == second.ranks && second_bytes <= 1024 && first_bytes > 1024 && third.ranks != first.ranks &&
            third.ranks[static_cast<std::size_t>(rank)] == dim.layout() && third_bytes > 1024 &&
            lone.find("overlap") != std::string::npos;
  std::printf("rank %d: bytes received by the plans: %llu, %llu (unchanged), %llu (changed); one rank changed: %s%s\n",
              rank, static_cast<unsigned long long>(first_bytes), static_cast<unsigned long long>(second_bytes),
              static_cast<unsigned long long>(third_bytes), lone.empty() ? "planned" : "refused",
              ok ? "" : " -- NOT AS EXPECTED");

  // A grid's layouts, its grid named: the ranks agree on its rules without exchanging layouts.
  // Each rank plans its own file alone; rank 0 gathers the stages' rules for metadata.json. The
  // plan is the one the enumerated exchange gives (the same files, the same rules stored). The
  // bytes a rank receives are those cairn-bench-grid counts at scale: 144 and 40 a stage at the
  // first save, 88 after it.
  test_model::grid_scheme scheme{2, 2, 1, 1};
  auto on_grid = test_model::make(scheme, rank, false);
  auto unnamed = on_grid;
  unnamed.grid.reset();
  cairn::detail::layout_exchange ruled_kept;
  comm.received = 0;
  auto ruled = cairn::formats::distributed::plan(on_grid, comm, config, {}, {}, &ruled_kept);
  auto ruled_bytes = comm.received;
  comm.received = 0;
  auto again = cairn::formats::distributed::plan(on_grid, comm, config, {}, {}, &ruled_kept);
  auto again_bytes = comm.received;
  auto listed = cairn::formats::distributed::plan(unnamed, comm, config, {}, {});
  auto stored_rules = [](cairn::save_plan const& p) { return cairn::parse_json(p.closing.at(0).text).at("rules"); };
  auto own_file = [&](cairn::save_plan const& p) -> cairn::planned_file const* {
    for (auto const& f : p.files)
      if (f.writer == rank) return &f;
    return nullptr;
  };
  auto same_file = [&](cairn::planned_file const* a, cairn::planned_file const* b) {
    if (!a || !b || a->name != b->name || a->items.size() != b->items.size()) return false;
    for (std::size_t i = 0; i < a->items.size(); ++i)
      if (a->items[i].tensor != b->items[i].tensor || a->items[i].shape != b->items[i].shape) return false;
    using namespace cairn::formats;
    return a->metadata.at(layout_key) == b->metadata.at(layout_key) &&
           a->metadata.at(world_size_key) == b->metadata.at(world_size_key);
  };
  bool rules_ok = ruled.ranks.empty() && ruled.files.size() == 1 && listed.files.size() == 4 &&
                  same_file(own_file(ruled), own_file(listed)) && same_file(own_file(again), own_file(listed)) &&
                  (rank != 0 || stored_rules(ruled) == stored_rules(listed)) &&
                  (rank == 0 || ruled_bytes == 144 + 40 * 2) && again_bytes == 88;
  std::printf("rank %d: a grid's rules agreed, bytes received %llu, then %llu (unchanged)%s\n", rank,
              static_cast<unsigned long long>(ruled_bytes), static_cast<unsigned long long>(again_bytes),
              rules_ok ? "" : " -- NOT AS EXPECTED");
  ok = ok && rules_ok;
  return ok ? 0 : 1;
}

/// One rank's save (of the known model in `scheme`'s layout) or load (into it, checked).
int save_or_load(std::string const& mode, char const* dir, std::string const& format_name, char const* scheme) {
  auto comm = cairn::comm::gloo_from_environment(std::chrono::seconds(60));
  auto how = test_model::parse_scheme(scheme);
  auto grid = test_model::parse_grid(scheme);
  if (grid && grid->ranks() != comm.size())
    throw std::runtime_error(std::string("the grid ") + scheme + " is not of " + std::to_string(comm.size()) +
                             " ranks");
  auto make = [&](bool fill) {
    return grid ? test_model::make(*grid, comm.rank(), fill) : test_model::make(how, comm.rank(), comm.size(), fill);
  };
  auto format =
      format_name == "state_dict" ? cairn::checkpoint_format::state_dict : cairn::checkpoint_format::distributed;
  if (mode == "save") {
    auto state = make(true);
    state.items["who"] = "rank " + std::to_string(comm.rank()) + " of " + std::to_string(comm.size());
    cairn::checkpoint_save_config config;
    config.path = dir;
    config.format = format;
    config.optimizer_state = true;
    config.parameters_per_file = std::uint64_t{1} << 20;
    cairn::save_checkpoint(state, comm, config, boost::json::object{{"program", "worker"}},
                           boost::json::object{{"iteration", 42}});
    return 0;
  }
  auto state = make(false);
  cairn::checkpoint_load_config config;
  config.path = dir;
  config.format = format;
  config.optimizer_state = true;
  auto metadata = cairn::load_checkpoint(state, comm, config);
  auto bad = test_model::mismatches(state);
  if (metadata.metadata.at("iteration") != 42) bad += 1;
  // Each rank's items back where as many ranks saved them in the distributed format; else none.
  bool own = format == cairn::checkpoint_format::distributed && metadata.world_size() == comm.size();
  auto expected_items = own ? std::map<std::string, std::string>{{"who", "rank " + std::to_string(comm.rank()) +
                                                                             " of " + std::to_string(comm.size())}}
                            : std::map<std::string, std::string>{};
  if (state.items != expected_items) bad += 1;
  std::printf("rank %d of %d: loaded %s (%s layout), %lld wrong elements\n", comm.rank(), comm.size(),
              format_name.c_str(), scheme, static_cast<long long>(bad));
  return bad == 0 ? 0 : 1;
}

struct world {
  int ranks;
  char const* scheme;
};

std::vector<std::pair<world, world>> const layout_cases{
    {{1, "dim"}, {2, "flat"}},
    {{2, "dim"}, {2, "dim"}},
    {{2, "flat"}, {4, "dim"}},
    {{4, "mixed"}, {1, "dim"}},
    {{4, "dim"}, {2, "mixed"}},
    {{2, "mixed"}, {4, "flat"}},
    {{4, "flat"}, {4, "flat"}},
    // Data parallel: the replicas spread over the saving ranks' files, read back from each.
    {{4, "replicated"}, {4, "replicated"}},
    {{3, "replicated"}, {2, "flat"}},
    {{2, "dim"}, {3, "replicated"}},
    // Tensor parallel shards replicated over data-parallel groups: each written once, by a
    // member of its group; loaded back, into other grids and world sizes.
    {{4, "tp_dp"}, {4, "tp_dp"}},
    {{4, "tp_dp"}, {2, "flat"}},
    {{2, "mixed"}, {4, "tp_dp"}},
    {{4, "tp_dp"}, {1, "dim"}},
    {{2, "tp_dp"}, {4, "tp_dp"}},
    // Pipeline stages: each rank holds its stage's parameters alone.
    {{4, "pp"}, {4, "pp"}},
    {{4, "pp"}, {2, "flat"}},
    {{2, "flat"}, {4, "pp"}},
    {{2, "pp"}, {4, "tp_dp"}}};

/// The grid matrix: TP {1,2,4} x PP {1,2} x DP {1,2,4} within 8 ranks, ZeRO {0,1,3}, every axis
/// changing alone (each of them both ways) and several together.
std::vector<std::pair<world, world>> const grid_cases{
    {{4, "tp2pp1dp2z1"}, {4, "tp2pp1dp2z1"}}, // the saving grid
                                              // The tensor-parallel size alone.
    {{2, "tp1pp1dp2z1"}, {4, "tp2pp1dp2z1"}},
    {{8, "tp4pp1dp2z0"}, {4, "tp2pp1dp2z0"}},
    // The pipeline alone.
    {{4, "tp2pp1dp2z1"}, {8, "tp2pp2dp2z1"}},
    {{8, "tp1pp2dp4z3"}, {4, "tp1pp1dp4z3"}},
    // The data-parallel size alone.
    {{4, "tp2pp2dp1z1"}, {8, "tp2pp2dp2z1"}},
    {{4, "tp1pp1dp4z1"}, {2, "tp1pp1dp2z1"}},
    // The ZeRO stage alone.
    {{4, "tp2pp1dp2z0"}, {4, "tp2pp1dp2z1"}},
    {{8, "tp2pp2dp2z3"}, {8, "tp2pp2dp2z0"}},
    {{4, "tp1pp1dp4z1"}, {4, "tp1pp1dp4z3"}},
    // Several together.
    {{8, "tp2pp2dp2z1"}, {4, "tp4pp1dp1z0"}},
    {{8, "tp1pp2dp4z3"}, {8, "tp4pp1dp2z1"}},
    {{8, "tp4pp2dp1z0"}, {1, "tp1pp1dp1z1"}},
    {{1, "tp1pp1dp1z0"}, {8, "tp2pp2dp2z3"}},
    {{8, "tp2pp1dp4z1"}, {4, "tp1pp2dp2z0"}},
    {{2, "tp2pp1dp1z3"}, {6, "tp1pp2dp3z1"}}};

/// Saves with one world size and layout and loads with another, case after case, for `format`:
/// the ranks are forked from this process (as `cairn launch` would start them).
int reshard(std::string const& format, std::filesystem::path const& work,
            std::vector<std::pair<world, world>> const& cases) {
  for (auto const& [saved, loaded] : cases) {
    auto dir = work / (format + "_" + std::to_string(saved.ranks) + saved.scheme + "_" + std::to_string(loaded.ranks) +
                       loaded.scheme);
    std::filesystem::remove_all(dir);
    auto one = [&](char const* mode, world w) {
      return forked_ranks::run(w.ranks, [&](int) { return save_or_load(mode, dir.c_str(), format, w.scheme); });
    };
    if (int status = one("save", saved); status != 0) {
      std::fprintf(stderr, "%s: the save on %d ranks (%s) failed: %d\n", format.c_str(), saved.ranks, saved.scheme,
                   status);
      return 1;
    }
    if (format == "distributed") { // a grid's layouts stored as its rules; others enumerated
      auto stored = cairn::read_json_file(dir / "metadata.json");
      bool rules = stored.as_object().contains("rules") && !stored.at("rules").is_null();
      std::string scheme = saved.scheme;
      bool grid = test_model::parse_grid(scheme).has_value() || scheme == "flat";
      bool irregular = scheme == "mixed" && saved.ranks == 4; // flat halves of row blocks
      if ((grid && (!rules || !stored.at("ranks").as_array().empty())) || (irregular && rules)) {
        std::fprintf(stderr, "%s: the save on %d ranks (%s) stored its layouts %s\n", format.c_str(), saved.ranks,
                     saved.scheme, rules ? "as rules" : "enumerated");
        return 1;
      }
    }
    if (format == "distributed" && std::string(saved.scheme) == "replicated") {
      // Every replica written once, and not all by rank 0: each of the saving ranks' files holds some.
      int holding = 0;
      for (int r = 0; r < saved.ranks; ++r)
        holding +=
            cairn::io::safetensors_file(dir / ("rank_" + std::to_string(r) + ".safetensors")).tensors().empty() ? 0 : 1;
      if (holding < 2) {
        std::fprintf(stderr, "%s: the replicas of %d ranks are in %d rank files\n", format.c_str(), saved.ranks,
                     holding);
        return 1;
      }
    }
    if (int status = one("load", loaded); status != 0) {
      std::fprintf(stderr, "%s: %d ranks (%s) -> %d ranks (%s) failed: %d\n", format.c_str(), saved.ranks, saved.scheme,
                   loaded.ranks, loaded.scheme, status);
      return 1;
    }
    std::printf("%s: %d ranks (%s) -> %d ranks (%s): ok\n", format.c_str(), saved.ranks, saved.scheme, loaded.ranks,
                loaded.scheme);
    std::filesystem::remove_all(dir);
  }
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  try {
    if (argc == 3 && std::string(argv[1]) == "export") return export_and_load(argv[2]);
    if (argc == 4 && std::string(argv[1]) == "reshard") return reshard(argv[2], argv[3], layout_cases);
    if (argc == 4 && std::string(argv[1]) == "grid") return reshard(argv[2], argv[3], grid_cases);
    if (argc == 2 && std::string(argv[1]) == "exchange") return exchange();
    if (argc == 5) return save_or_load(argv[1], argv[2], argv[3], argv[4]);
  } catch (std::exception const& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr,
               "usage: %s save|load DIR distributed|state_dict dim|flat|mixed|replicated|tp_dp|pp|tpTppPdpDzZ\n"
               "       %s reshard|grid distributed|state_dict WORK_DIR\n"
               "       %s export DIR\n",
               argv[0], argv[0], argv[0]);
  return 2;
}
