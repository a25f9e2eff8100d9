// How the tool's paths scale with the size of what they read: each measured at two sizes ten
// times apart, as time per item at the larger over time per item at the smaller (1.0: linear;
// a step that compares every item with every other gives ~10), and against a baseline doing the
// least the same input needs, in the same run.
//
//   - parse_json of one object of N keys (cairn's duplicate-key check included) against
//     Boost.JSON's own parse of the same text;
//   - verify and convert of a distributed checkpoint of P small parameters against opening its
//     files and reading their headers;
//   - the resume dry run (plan_load, its tiling checks included) of a checkpoint of R ranks,
//     each holding a flat (ZeRO) slice of 8 parameters, into a run of R + 1 ranks (a reshard),
//     against one pass over every rank's holdings.
//
//     build/bin/cairn-bench-scale [DIR]
#include <cairn/checkpoint/convert.hpp>
#include <cairn/checkpoint/detail/identity.hpp>
#include <cairn/checkpoint/detail/save_files.hpp>
#include <cairn/checkpoint/format_files.hpp>
#include <cairn/checkpoint/load_plan.hpp>
#include <cairn/checkpoint/verify.hpp>
#include <cairn/config/json.hpp>
#include <cairn/io.hpp>

#include <boost/json/parse.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

/// The best of three runs of `work`, in seconds.
double best_of_three(std::function<void()> const& work) {
  double best = 1e300;
  for (int i = 0; i < 3; ++i) {
    auto start = clock_type::now();
    work();
    best = std::min(best, std::chrono::duration<double>(clock_type::now() - start).count());
  }
  return best;
}

std::string object_of(std::size_t keys) {
  std::string text = "{";
  for (std::size_t i = 0; i < keys; ++i) {
    if (i) text += ',';
    text += "\"key";
    text += std::to_string(i);
    text += "\": ";
    text += std::to_string(i);
  }
  return text + "}";
}

/// A distributed checkpoint of one rank holding `parameters` parameters of 16 floats each.
void write_checkpoint(fs::path const& dir, std::size_t parameters) {
  fs::remove_all(dir);
  fs::create_directories(dir);
  cairn::checkpoint_metadata metadata;
  metadata.format = cairn::checkpoint_format::distributed;
  metadata.save_id = cairn::detail::new_save_id();
  metadata.shard_names = {"weights"};
  cairn::rank_layout layout;
  for (std::size_t i = 0; i < parameters; ++i)
    layout.parameters.push_back({"layers." + std::to_string(i) + ".weight",
                                 {4, 4},
                                 cairn::io::dtype::F32,
                                 false,
                                 cairn::shard_layout::whole({4, 4})});
  metadata.ranks.push_back(layout);
  std::vector<float> values(16, 0.5f);
  cairn::io::safetensors_writer writer(cairn::formats::rank_file(dir, 0));
  writer.set_metadata("format", "cairn.distributed");
  cairn::detail::record_identity(writer, metadata, 0);
  for (auto const& p : layout.parameters)
    writer.add(cairn::detail::tensor_name(p.name, "weights"), cairn::io::dtype::F32, {16},
               std::as_bytes(std::span(values)));
  writer.write();
  cairn::detail::write_distributed_metadata(dir, metadata);
}

struct row {
  char const* what;
  double small_seconds, large_seconds, small_baseline, large_baseline;
  std::size_t small, large;
};

void print(row const& r) {
  auto per_item_growth = (r.large_seconds / double(r.large)) / (r.small_seconds / double(r.small));
  std::printf("%-34s %8zu: %8.3f s (%.2fx baseline)   %8zu: %8.3f s (%.2fx baseline)   per-item growth %.2f\n", r.what,
              r.small, r.small_seconds, r.small_seconds / r.small_baseline, r.large, r.large_seconds,
              r.large_seconds / r.large_baseline, per_item_growth);
}

} // namespace

int main(int argc, char** argv) {
  fs::path dir = argc > 1 ? fs::path(argv[1]) : fs::temp_directory_path() / "cairn-bench-scale";
  fs::create_directories(dir);
  cairn::scoped_diagnostic_sink quiet([](cairn::severity, cairn::diagnostic const&) {});

  {
    std::size_t small = 8'000, large = 80'000;
    auto small_text = object_of(small), large_text = object_of(large);
    row r{"parse_json, keys in one object",
          best_of_three([&] { (void)cairn::parse_json(small_text); }),
          best_of_three([&] { (void)cairn::parse_json(large_text); }),
          best_of_three([&] { (void)boost::json::parse(small_text); }),
          best_of_three([&] { (void)boost::json::parse(large_text); }),
          small,
          large};
    print(r);
  }

  std::size_t small = 2'000, large = 20'000;
  auto a = dir / "small", b = dir / "large";
  write_checkpoint(a, small);
  write_checkpoint(b, large);
  auto open_all = [](fs::path const& checkpoint) {
    return [checkpoint] {
      (void)cairn::read_checkpoint_metadata(cairn::formats::metadata_file(checkpoint));
      cairn::io::safetensors_file file(cairn::formats::rank_file(checkpoint, 0));
      std::size_t n = 0;
      for (auto const& t : file.tensors()) n += t.shape.size();
      if (n == 0) std::abort();
    };
  };
  auto baseline_small = best_of_three(open_all(a)), baseline_large = best_of_three(open_all(b));
  print({"verify, parameters", best_of_three([&] {
           if (!cairn::verify_checkpoint(a).ok()) std::abort();
         }),
         best_of_three([&] {
           if (!cairn::verify_checkpoint(b).ok()) std::abort();
         }),
         baseline_small, baseline_large, small, large});
  auto convert = [&](fs::path const& in) {
    return [&dir, in] {
      cairn::convert_config config;
      config.input.path = in;
      config.input.format = cairn::checkpoint_format::distributed;
      config.output.path = dir / "converted";
      config.output.format = cairn::checkpoint_format::state_dict;
      config.replace = true;
      (void)cairn::convert_checkpoint(config);
    };
  };
  print({"convert to state_dict, parameters", best_of_three(convert(a)), best_of_three(convert(b)), baseline_small,
         baseline_large, small, large});
  {
    auto layouts = [](int ranks) {
      std::vector<cairn::rank_layout> out(static_cast<std::size_t>(ranks));
      std::vector<std::string> const names{"p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7"};
      for (int r = 0; r < ranks; ++r)
        for (auto const& name : names)
          out[static_cast<std::size_t>(r)].parameters.push_back(
              {name, {4096, 1024}, cairn::io::dtype::F32, false, cairn::flat_slice({4096, 1024}, r, ranks)});
      return out;
    };
    std::size_t few = 1'000, many = 10'000;
    auto plan = [&](std::size_t ranks) {
      cairn::checkpoint_metadata saved;
      saved.shard_names = {"weights"};
      saved.ranks = layouts(static_cast<int>(ranks));
      cairn::run_layout run;
      run.ranks = layouts(static_cast<int>(ranks) + 1);
      auto pass = [saved] {
        std::uint64_t n = 0;
        for (auto const& r : saved.ranks)
          for (auto const& p : r.parameters) n += p.shard.numel();
        if (n == 0) std::abort();
      };
      auto dry_run = [saved, run] {
        if (!cairn::plan_load(saved, {}, run).problems.empty()) std::abort();
      };
      return std::pair{best_of_three(dry_run), best_of_three(pass)};
    };
    auto [plan_few, pass_few] = plan(few);
    auto [plan_many, pass_many] = plan(many);
    print({"plan_load (a reshard), ranks", plan_few, plan_many, pass_few, pass_many, few, many});
  }
  fs::remove_all(dir);
}
