// safetensors write and read of tensors of mixed sizes, against a plain write (with fsync) and
// a plain read of the same bytes in the same run.
//
//     build/bin/cairn-bench-io [GiB, default 2] [directory, default the system temp directory]
#include <cairn/io.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <string>
#include <unistd.h>
#include <vector>

using namespace cairn::io;
using clock_type = std::chrono::steady_clock;

namespace {

double seconds_since(clock_type::time_point start) {
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

} // namespace

int main(int argc, char** argv) {
  double gib = argc > 1 ? std::atof(argv[1]) : 2.0;
  auto dir = std::filesystem::path(argc > 2 ? argv[2] : std::filesystem::temp_directory_path().string()) /
             ("cairn-bench-io-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto total = static_cast<std::size_t>(gib * double(1u << 30));

  // Tensors of mixed sizes, from 256 MiB down to 4 KiB, cycling until the total is reached.
  std::vector<std::byte> data(total);
  for (std::size_t i = 0; i < total; i += 4096) data[i] = static_cast<std::byte>(i * 2654435761u >> 24);
  std::vector<std::pair<std::size_t, std::size_t>> tensors; // offset, size
  std::size_t const sizes[] = {256u << 20, 64u << 20, 16u << 20, 1u << 20, 64u << 10, 4u << 10};
  for (std::size_t at = 0, i = 0; at < total; ++i) {
    auto size = std::min(sizes[i % 6], total - at);
    tensors.emplace_back(at, size);
    at += size;
  }

  auto plain_path = dir / "plain.bin";
  auto plain_write = [&] {
    auto start = clock_type::now();
    auto fd = open_file(plain_path, O_WRONLY | O_CREAT | O_TRUNC);
    write_all(fd.get(), data, plain_path);
    fsync_file(fd.get(), plain_path);
    return seconds_since(start);
  };
  auto cairn_write = [&](checksums policy) {
    return [&, policy] {
      auto start = clock_type::now();
      safetensors_writer writer(dir / "model.safetensors", policy);
      for (std::size_t i = 0; i < tensors.size(); ++i)
        writer.add(std::string("t").append(std::to_string(i)), dtype::U8, {tensors[i].second},
                   std::span(data).subspan(tensors[i].first, tensors[i].second));
      writer.write();
      return seconds_since(start);
    };
  };
  std::vector<std::byte> target(total);
  auto plain_read = [&] {
    auto start = clock_type::now();
    auto fd = open_file(plain_path, O_RDONLY);
    std::size_t done = 0;
    while (done < total) {
      auto n = ::read(fd.get(), target.data() + done, total - done);
      if (n <= 0) std::abort();
      done += static_cast<std::size_t>(n);
    }
    return seconds_since(start);
  };
  auto cairn_read = [&](bool verify) {
    return [&, verify] {
      auto start = clock_type::now();
      safetensors_file file(dir / "model.safetensors");
      std::size_t at = 0;
      for (auto const& t : file.tensors()) {
        if (verify) file.verify(t);
        auto bytes = file.bytes(t);
        std::memcpy(target.data() + at, bytes.data(), bytes.size());
        at += bytes.size();
      }
      return seconds_since(start);
    };
  };

  // Rounds interleave the contenders, so that the disk's drift over time hits them alike.
  int const runs = 5;
  double w_plain = 1e30, w_sum = 1e30, w_nosum = 1e30, r_plain = 1e30, r_map = 1e30, r_verify = 1e30;
  for (int round = 0; round < runs; ++round) {
    w_plain = std::min(w_plain, plain_write());
    w_nosum = std::min(w_nosum, cairn_write(checksums::skip)());
    w_sum = std::min(w_sum, cairn_write(checksums::record)()); // last: the file read below has checksums
  }
  for (int round = 0; round < runs; ++round) {
    r_plain = std::min(r_plain, plain_read());
    r_map = std::min(r_map, cairn_read(false)());
    r_verify = std::min(r_verify, cairn_read(true)());
  }
  double gb = double(total) / 1e9;
  std::printf("safetensors I/O: %.2f GiB in %zu tensors of 4 KiB to 256 MiB, best of %d, in %s\n", gib, tensors.size(),
              runs, dir.c_str());
  std::printf("  write + fsync, plain (baseline)     %6.2f GB/s\n", gb / w_plain);
  std::printf("  write, checksums recorded           %6.2f GB/s  (%.2fx the baseline)\n", gb / w_sum, w_plain / w_sum);
  std::printf("  write, no checksums                 %6.2f GB/s  (%.2fx the baseline)\n", gb / w_nosum,
              w_plain / w_nosum);
  std::printf("  read, plain read() (baseline)       %6.2f GB/s\n", gb / r_plain);
  std::printf("  read via mmap, copied out           %6.2f GB/s  (%.2fx the baseline)\n", gb / r_map, r_plain / r_map);
  std::printf("  read via mmap, checksums verified   %6.2f GB/s  (%.2fx the baseline)\n", gb / r_verify,
              r_plain / r_verify);
  std::filesystem::remove_all(dir);
  return 0;
}
