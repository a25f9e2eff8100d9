// What a replica set should do at load: every member read the bytes it needs from the file
// system, or one member read them and broadcast them to the others (Megatron's choice for
// fully-sharded loads; cairn's question in #31). On every rank of a launch, the same file:
//   each reads:  every rank reads the file (warm: from the page cache; cold: the cache dropped
//                first, every rank going to the disk at once);
//   one reads:   rank 0 reads it and broadcasts it over the communicator, 8 MiB at a time.
// Printed: seconds until every rank has the bytes, each way, and which is faster here.
//
//     cairn launch -n 2 -- build/bin/cairn-bench-replica-read [MiB, default 256] [directory]
#include <cairn/comm/gloo.hpp>
#include <cairn/io/file.hpp>

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <string>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;
double since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }

constexpr std::int64_t chunk = std::int64_t{8} << 20;

void drop_cache(std::filesystem::path const& file) {
  auto fd = cairn::io::open_file(file, O_RDONLY);
  ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_DONTNEED);
}

/// The whole file, read by this rank.
void read_file(std::filesystem::path const& file, at::Tensor& into) {
  cairn::io::mapped_file mapped(file);
  auto bytes = std::span(static_cast<std::byte*>(into.data_ptr()), static_cast<std::size_t>(into.numel()));
  for (std::size_t offset = 0; offset < bytes.size(); offset += static_cast<std::size_t>(chunk)) {
    auto n = std::min(bytes.size() - offset, static_cast<std::size_t>(chunk));
    mapped.read_at(offset, bytes.subspan(offset, n));
  }
}

} // namespace

int main(int argc, char** argv) {
  auto comm = cairn::comm::gloo_from_environment(std::chrono::minutes(10));
  std::int64_t mib = argc > 1 ? std::atoll(argv[1]) : 256;
  std::filesystem::path dir = argc > 2 ? argv[2] : std::filesystem::temp_directory_path() / "cairn-bench-replica";
  auto file = dir / "replica.bin";
  auto bytes = mib << 20;
  auto buffer = at::empty({bytes}, at::kByte);
  if (comm.rank() == 0) {
    std::filesystem::create_directories(dir);
    auto fd = cairn::io::open_file(file, O_WRONLY | O_CREAT | O_TRUNC);
    buffer.random_(0, 256);
    cairn::io::write_all(fd.get(), std::as_bytes(std::span(buffer.data_ptr<std::uint8_t>(), std::size_t(bytes))), file);
    cairn::io::fsync_file(fd.get(), file);
  }
  comm.barrier();

  auto each_reads = [&](bool cold) {
    if (cold && comm.rank() == 0) drop_cache(file);
    comm.barrier();
    auto start = clock_type::now();
    read_file(file, buffer);
    comm.barrier();
    return since(start);
  };
  auto one_reads = [&](bool cold) {
    if (cold && comm.rank() == 0) drop_cache(file);
    comm.barrier();
    auto start = clock_type::now();
    if (comm.rank() == 0) read_file(file, buffer);
    for (std::int64_t offset = 0; offset < bytes; offset += chunk) {
      auto part = buffer.slice(0, offset, std::min(bytes, offset + chunk));
      comm.broadcast(part, 0);
    }
    comm.barrier();
    return since(start);
  };

  each_reads(false); // the page cache warm for the warm rounds
  double best[4] = {1e9, 1e9, 1e9, 1e9};
  for (int round = 0; round < 3; ++round) {
    best[0] = std::min(best[0], each_reads(false));
    best[1] = std::min(best[1], one_reads(false));
    best[2] = std::min(best[2], each_reads(true));
    best[3] = std::min(best[3], one_reads(true));
  }
  if (comm.rank() == 0) {
    auto gbs = [&](double s) { return double(bytes) / s / 1e9; };
    std::printf("%d ranks, %lld MiB each, best of 3:\n", comm.size(), static_cast<long long>(mib));
    std::printf("  warm page cache: each reads %.3f s (%.2f GB/s a rank), one reads and broadcasts %.3f s: %s\n",
                best[0], gbs(best[0]), best[1], best[0] <= best[1] ? "each reads" : "one reads");
    std::printf("  cache dropped:   each reads %.3f s (%.2f GB/s a rank), one reads and broadcasts %.3f s: %s\n",
                best[2], gbs(best[2]), best[3], best[2] <= best[3] ? "each reads" : "one reads");
    std::filesystem::remove_all(dir);
  }
  return 0;
}
