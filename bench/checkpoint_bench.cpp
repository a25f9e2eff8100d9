// Checkpoint formats against baselines in the same run, in one process:
//   distributed save / load of the state against a plain write (with fsync) / read of its bytes,
//   a resharding load against the same-layout load,
//   state_dict save / load against libtorch's own torch::save / torch::load of the same tensors.
//
//     build/bin/cairn-bench-checkpoint [GiB, default 2] [directory, default the temp directory]
#include <cairn/checkpoint.hpp>
#include <cairn/comm/single_process.hpp>
#include <cairn/io/file.hpp>

#include <ATen/ATen.h>
#include <torch/serialize.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <unistd.h>
#include <vector>

#include "model_state.hpp"

namespace {

using clock_type = std::chrono::steady_clock;
double since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }

// Runs `f`, keeps the best time in `best`, returns this time.
template <class F> double timed(double& best, F&& f) {
  auto t0 = clock_type::now();
  f();
  auto took = since(t0);
  best = std::min(best, took);
  return took;
}

// The time of `baseline` over that of `contender`, run in the order `baseline_first` says.
template <class B, class C> double ratio_in_turns(bool baseline_first, B&& baseline, C&& contender) {
  if (baseline_first) {
    auto b = baseline();
    return b / contender();
  }
  auto c = contender();
  return baseline() / c;
}

} // namespace

int main(int argc, char** argv) {
  double gib = argc > 1 ? std::atof(argv[1]) : 2.0;
  auto dir = std::filesystem::path(argc > 2 ? argv[2] : std::filesystem::temp_directory_path().string()) /
             ("cairn-bench-checkpoint-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto bytes = static_cast<std::size_t>(gib * double(1u << 30));
  cairn::comm::single_process comm;
  auto state = bench::make_state(bytes, false);
  auto target = bench::make_state(bytes, false);
  auto resharded = bench::make_state(bytes, true); // another layout of the same elements: the overlap path
  std::vector<at::Tensor> tensors;
  for (auto const& p : state.parameters) tensors.push_back(p.shards[0]);

  auto save_config = [&](cairn::checkpoint_format format, std::string const& name) {
    cairn::checkpoint_save_config c;
    c.path = dir / name;
    c.format = format;
    return c;
  };
  auto load_config = [&](cairn::checkpoint_format format, std::string const& name) {
    cairn::checkpoint_load_config c;
    c.path = dir / name;
    c.format = format;
    return c;
  };
  auto plain = dir / "plain.bin";
  std::vector<std::byte> buffer(bytes);

  double t_plain_write = 1e30, t_plain_read = 1e30, t_dist_save = 1e30, t_dist_load = 1e30, t_reshard = 1e30,
         t_sd_save = 1e30, t_sd_load = 1e30, t_torch_save = 1e30, t_torch_load = 1e30, t_fast_load = 1e30;
  int const rounds = 5;      // interleaved, so that the disk's drift hits every contender alike
  int const save_rounds = 8; // each of the two goes first in half of them
  int const load_pairs = 3;
  std::vector<double> verify_ratios, save_ratios;

  // The distributed save against the plain write of the same bytes, the two alone, taking turns
  // to go first, their ratio taken round by round. Every save goes to a fresh place, as
  // checkpoints do; freeing the old files is not timed, nor what the filesystem does about it
  // (hence the sync). Seen with strace on the development machines (ext4 mounted with
  // `discard`): after GiBs were deleted, the next journal commits were slow, and the save's small
  // fsyncs (directory, metadata.json) took up to 0.3 s where the plain write, one fsync, paid
  // nothing; in rounds shared with the other formats' saves and loads, the writes of whichever
  // went second also slowed (page allocation after a few GiB). Apart, after a sync: 0.94-0.98x.
  auto plain_write = [&](double& best) {
    return timed(best, [&] {
      auto fd = cairn::io::open_file(plain, O_WRONLY | O_CREAT | O_TRUNC);
      for (auto const& x : tensors) cairn::io::write_all(fd.get(), cairn::detail::tensor_bytes(x), plain);
      cairn::io::fsync_file(fd.get(), plain);
    });
  };
  auto dist_save = [&](double& best) {
    return timed(
        best, [&] { cairn::save_checkpoint(state, comm, save_config(cairn::checkpoint_format::distributed, "dist")); });
  };
  for (int round = -1; round < save_rounds; ++round) { // round -1 warms up: not counted
    for (auto const* name : {"plain.bin", "dist"}) std::filesystem::remove_all(dir / name);
    ::sync();
    double ignored = 0;
    if (round < 0) {
      plain_write(ignored);
      dist_save(ignored);
      continue;
    }
    save_ratios.push_back(ratio_in_turns(
        round % 2 == 0, [&] { return plain_write(t_plain_write); }, [&] { return dist_save(t_dist_save); }));
  }

  for (int round = 0; round < rounds; ++round) {
    for (auto const* name : {"sd", "torch.pt"}) std::filesystem::remove_all(dir / name);
    auto t = clock_type::now();
    cairn::save_checkpoint(state, comm, save_config(cairn::checkpoint_format::state_dict, "sd"));
    t_sd_save = std::min(t_sd_save, since(t));
    t = clock_type::now();
    torch::save(tensors, (dir / "torch.pt").string());
    {
      auto fd = cairn::io::open_file(dir / "torch.pt", O_RDONLY);
      cairn::io::fsync_file(fd.get(), dir / "torch.pt"); // durable, as the others are
    }
    t_torch_save = std::min(t_torch_save, since(t));

    t = clock_type::now();
    {
      auto fd = cairn::io::open_file(plain, O_RDONLY);
      std::size_t done = 0;
      while (done < bytes) {
        auto n = ::read(fd.get(), buffer.data() + done, bytes - done);
        if (n <= 0) break;
        done += static_cast<std::size_t>(n);
      }
    }
    t_plain_read = std::min(t_plain_read, since(t));
    // The verified and the unverified load take turns going first, so that neither gains from
    // the other's reading the files into the page cache; their ratio is taken pair by pair (a
    // load takes a fraction of a second, and this machine's speed drifts more than that between
    // rounds) and the median pair reported.
    auto verified = [&] {
      return timed(t_dist_load, [&] {
        cairn::load_checkpoint(target, comm, load_config(cairn::checkpoint_format::distributed, "dist"));
      });
    };
    auto unverified = [&] {
      return timed(t_fast_load, [&] {
        cairn::load_checkpoint(target, comm, load_config(cairn::checkpoint_format::distributed, "dist"),
                               cairn::verification::none);
      });
    };
    for (int pair = 0; pair < load_pairs; ++pair)
      verify_ratios.push_back(ratio_in_turns((round + pair) % 2 != 0, unverified, verified));
    t = clock_type::now();
    cairn::load_checkpoint(resharded, comm, load_config(cairn::checkpoint_format::distributed, "dist"));
    t_reshard = std::min(t_reshard, since(t));
    t = clock_type::now();
    cairn::load_checkpoint(target, comm, load_config(cairn::checkpoint_format::state_dict, "sd"));
    t_sd_load = std::min(t_sd_load, since(t));
    t = clock_type::now();
    std::vector<at::Tensor> loaded;
    torch::load(loaded, (dir / "torch.pt").string());
    t_torch_load = std::min(t_torch_load, since(t));
  }
  if (!target.parameters[0].shards[0].equal(state.parameters[0].shards[0])) {
    std::fprintf(stderr, "the loaded state differs from the saved one\n");
    return 1;
  }
  double gb = double(bytes) / 1e9;
  std::printf("checkpoint formats: %.2f GiB of F32 in %zu parameters, one process, best of %d (saves: of %d), in %s\n",
              gib, state.parameters.size(), rounds, save_rounds, dir.c_str());
  std::printf("  plain write + fsync (baseline)        %6.2f GB/s\n", gb / t_plain_write);
  std::sort(save_ratios.begin(), save_ratios.end());
  auto middle = save_ratios.size() / 2; // an even count: the mean of the middle two
  std::printf("  distributed save                      %6.2f GB/s  (%.2fx the plain write; median of %zu rounds "
              "%.2fx, target >= 0.95)\n",
              gb / t_dist_save, t_plain_write / t_dist_save, save_ratios.size(),
              (save_ratios[middle - 1] + save_ratios[middle]) / 2);
  std::printf("  plain read (baseline)                 %6.2f GB/s\n", gb / t_plain_read);
  std::printf("  distributed load, same layout         %6.2f GB/s  (%.2fx the plain read)\n", gb / t_dist_load,
              t_plain_read / t_dist_load);
  std::printf("  the same, checksums not verified      %6.2f GB/s  (%.2fx the plain read)\n", gb / t_fast_load,
              t_plain_read / t_fast_load);
  std::sort(verify_ratios.begin(), verify_ratios.end());
  std::printf("  verified / not verified               %6.2fx  (target >= 0.95; median of %zu pairs)\n",
              verify_ratios[verify_ratios.size() / 2], verify_ratios.size());
  std::printf("  distributed load, resharded           %6.2f GB/s  (%.2fx the same-layout load)\n", gb / t_reshard,
              t_dist_load / t_reshard);
  std::printf("  torch::save + fsync (baseline)        %6.2f GB/s\n", gb / t_torch_save);
  std::printf("  state_dict save                       %6.2f GB/s  (%.2fx torch::save)\n", gb / t_sd_save,
              t_torch_save / t_sd_save);
  std::printf("  torch::load (baseline)                %6.2f GB/s\n", gb / t_torch_load);
  std::printf("  state_dict load                       %6.2f GB/s  (%.2fx torch::load)\n", gb / t_sd_load,
              t_torch_load / t_sd_load);
  std::filesystem::remove_all(dir);
  return 0;
}
