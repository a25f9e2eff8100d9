// A distributed save and load through the S3 backend against Debian's awscli copying the same
// bytes to and from the same store, in one run, taking turns:
//   save of the state to s3://… against `aws s3 cp` of a local file of its bytes up,
//   load from s3://… (the saving layout) against `aws s3 cp` of that object down.
// The endpoint and credentials are the AWS variables' (tests/io/s3_server.sh sets them for a
// local s3rver: `AWS_ENDPOINT_URL=$CAIRN_TEST_S3_DIRECT` skips the tests' proxy). awscli's copy
// down is to a local file (page cache), cairn's load into the model's tensors.
//
//     build/bin/cairn-bench-s3 s3://bucket/prefix [GiB, default 1] [rounds, default 3]
#include <cairn/checkpoint.hpp>
#include <cairn/comm/single_process.hpp>
#include <cairn/io/backend.hpp>
#include <cairn/io/file.hpp>
#include <cairn/io/s3.hpp>

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <string>
#include <unistd.h>
#include <vector>

#include "model_state.hpp"

namespace {

using clock_type = std::chrono::steady_clock;
double since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }

double run(std::string const& command) {
  auto t0 = clock_type::now();
  if (std::system(command.c_str()) != 0) {
    std::fprintf(stderr, "failed: %s\n", command.c_str());
    std::exit(1);
  }
  return since(t0);
}

/// The baseline, then the contender in odd rounds; the other way round in even ones.
template <class B, class C> void in_turns(int round, B&& baseline, C&& contender) {
  if (round % 2) {
    baseline();
    contender();
  } else {
    contender();
    baseline();
  }
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: cairn-bench-s3 s3://bucket/prefix [GiB] [rounds]\n");
    return 2;
  }
  std::string root = argv[1];
  double gib = argc > 2 ? std::atof(argv[2]) : 1.0;
  int rounds = argc > 3 ? std::atoi(argv[3]) : 3;
  auto bytes = static_cast<std::size_t>(gib * double(1u << 30));
  auto settings = cairn::io::s3_settings::from_environment();
  cairn::comm::single_process comm;
  auto state = bench::make_state(bytes);
  auto target = bench::make_state(bytes);

  auto local = std::filesystem::temp_directory_path() / ("cairn-bench-s3-" + std::to_string(::getpid()));
  std::filesystem::create_directories(local);
  auto plain = local / "plain.bin";
  {
    auto fd = cairn::io::open_file(plain, O_WRONLY | O_CREAT | O_TRUNC);
    for (auto const& p : state.parameters)
      cairn::io::write_all(fd.get(), cairn::detail::tensor_bytes(p.shards[0]), plain);
  }
  std::string aws = "AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null /usr/bin/aws --only-show-errors" +
                    std::string(settings.endpoint.empty() ? "" : " --endpoint-url " + settings.endpoint) + " s3 cp ";

  double best_save = 1e30, best_up = 1e30, best_load = 1e30, best_down = 1e30;
  for (int round = 0; round < rounds; ++round) {
    auto name = root + "/dist-" + std::to_string(round);
    auto up = [&] { best_up = std::min(best_up, run(aws + plain.string() + " " + root + "/plain.bin")); };
    auto save = [&] {
      cairn::checkpoint_save_config c;
      c.path = name;
      c.format = cairn::checkpoint_format::distributed;
      auto t0 = clock_type::now();
      cairn::save_checkpoint(state, comm, c);
      best_save = std::min(best_save, since(t0));
    };
    in_turns(round, up, save);
    auto down = [&] {
      best_down = std::min(best_down, run(aws + root + "/plain.bin " + (local / "down.bin").string()));
    };
    auto load = [&] {
      cairn::checkpoint_load_config c;
      c.path = name;
      c.format = cairn::checkpoint_format::distributed;
      auto t0 = clock_type::now();
      cairn::load_checkpoint(target, comm, c);
      best_load = std::min(best_load, since(t0));
    };
    in_turns(round, down, load);
  }
  auto where = cairn::io::open_location(root);
  where.backend->remove_tree(where.key);
  std::filesystem::remove_all(local);

  auto rate = [&](double t) { return gib / t; };
  std::printf("%.2f GiB, %zu tensors, %d rounds (best of each); part size %s, %d parts in flight\n", gib,
              state.parameters.size(), rounds,
              settings.part_size ? (std::to_string(settings.part_size >> 20) + " MiB").c_str() : "8 MiB (default)",
              settings.parts_in_flight);
  std::printf("save: cairn %.2f s (%.2f GiB/s), aws s3 cp up %.2f s (%.2f GiB/s): %.2fx awscli\n", best_save,
              rate(best_save), best_up, rate(best_up), best_up / best_save);
  std::printf("load: cairn %.2f s (%.2f GiB/s), aws s3 cp down %.2f s (%.2f GiB/s): %.2fx awscli\n", best_load,
              rate(best_load), best_down, rate(best_down), best_down / best_load);
  return 0;
}
