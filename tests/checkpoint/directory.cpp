// The directory of saves: a save is complete only once its marker is written, leftovers of
// interrupted saves are cleaned, and a failure at any file operation of a commit leaves the
// earlier saves complete.
#include <cairn/checkpoint/detail/write_behind.hpp>
#include <cairn/checkpoint/directory.hpp>
#include <cairn/config/json.hpp>
#include <cairn/io/error.hpp>
#include <cairn/io/file.hpp>

#include <doctest/doctest.h>

#include <fstream>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "io/temp_dir.hpp"

using cairn::save_directory;

namespace {

void write_text(std::filesystem::path const& path, std::string const& text) {
  std::ofstream(path, std::ios::binary) << text;
}

/// Stages and commits a save at `iteration` holding one file.
void save(save_directory& dir, std::int64_t iteration, std::string const& contents = "data") {
  auto staging = dir.begin(iteration);
  cairn::io::write_file_atomically(staging / "rank_0.safetensors", std::as_bytes(std::span(contents)));
  dir.commit(iteration);
}

using list = std::vector<std::int64_t>;

} // namespace

TEST_CASE("a committed save is complete, lists its files and sizes, and checks them") {
  temp_dir tmp;
  save_directory dir(tmp / "checkpoints");
  CHECK(dir.complete().empty());
  save(dir, 10, "twelve bytes");
  save(dir, 2);
  CHECK(dir.complete() == list{2, 10});
  CHECK_FALSE(dir.problem(10));
  auto marker = cairn::read_json_file(dir.path(10) / cairn::completion_marker);
  CHECK(marker.at("iteration").as_int64() == 10);
  CHECK(marker.at("files").at("rank_0.safetensors").at("size").as_int64() == 12);
  CHECK(marker.at("files").at("rank_0.safetensors").at("xxh3").as_string().size() == 16);
  CHECK_FALSE(std::filesystem::exists(dir.staging(10)));

  SUBCASE("a file shorter than the marker says") {
    std::filesystem::resize_file(dir.path(10) / "rank_0.safetensors", 3);
    auto problem = dir.problem(10);
    REQUIRE(problem);
    CHECK(problem->find("rank_0.safetensors: 3 bytes, the marker says 12") != std::string::npos);
  }
  SUBCASE("a file of the same size but another header (another save's) is refused") {
    write_text(dir.path(10) / "rank_0.safetensors", "twelve BYTES");
    auto problem = dir.problem(10);
    REQUIRE(problem);
    CHECK(problem->find("rank_0.safetensors: its header differs from the one the marker recorded") !=
          std::string::npos);
  }
  SUBCASE("a marker written before header checksums (sizes only) is still read") {
    write_text(dir.path(10) / cairn::completion_marker, R"({"iteration": 10, "files": {"rank_0.safetensors": 12}})");
    CHECK_FALSE(dir.problem(10));
    std::filesystem::resize_file(dir.path(10) / "rank_0.safetensors", 3);
    CHECK(dir.problem(10));
  }
  SUBCASE("a file listed by the marker is gone") {
    std::filesystem::remove(dir.path(10) / "rank_0.safetensors");
    REQUIRE(dir.problem(10));
    CHECK(dir.problem(10)->find("missing") != std::string::npos);
  }
  SUBCASE("a marker that is not JSON, or lists a path outside the save") {
    write_text(dir.path(10) / cairn::completion_marker, "{\"files\": ");
    CHECK(dir.problem(10));
    write_text(dir.path(10) / cairn::completion_marker, R"({"files": {"../escape": 1}})");
    REQUIRE(dir.problem(10));
    CHECK(dir.problem(10)->find("malformed entry '../escape'") != std::string::npos);
  }
  SUBCASE("no marker: not complete") {
    std::filesystem::remove(dir.path(10) / cairn::completion_marker);
    CHECK(dir.complete() == list{2});
    CHECK(dir.problem(10)->find("no completion marker") != std::string::npos);
  }
}

TEST_CASE("clean() removes what interrupted saves left and nothing complete") {
  temp_dir tmp;
  save_directory dir(tmp / "checkpoints");
  save(dir, 1);
  save(dir, 2);
  std::filesystem::create_directories(dir.staging(3)); // interrupted while writing
  std::filesystem::create_directories(dir.path(4));    // interrupted between rename and marker
  std::filesystem::create_directories(tmp / "checkpoints" / "notes");
  std::filesystem::create_directories(tmp / "checkpoints" / "007"); // not one of ours: left alone
  auto report = dir.clean();
  CHECK(report.size() == 2);
  CHECK(dir.complete() == list{1, 2});
  CHECK_FALSE(std::filesystem::exists(dir.staging(3)));
  CHECK_FALSE(std::filesystem::exists(dir.path(4)));
  CHECK(std::filesystem::exists(tmp / "checkpoints" / "notes"));
  CHECK(std::filesystem::exists(tmp / "checkpoints" / "007"));
  CHECK(dir.clean().empty());
}

TEST_CASE("replacing a complete save keeps the old one until the new one is complete") {
  temp_dir tmp;
  save_directory dir(tmp / "checkpoints");
  save(dir, 5, "old");
  save(dir, 5, "newer");
  CHECK(dir.complete() == list{5});
  CHECK(std::filesystem::file_size(dir.path(5) / "rank_0.safetensors") == 5);
  CHECK_FALSE(std::filesystem::exists(dir.replaced(5)));

  // A replacement interrupted after the old save was set aside: clean() puts it back.
  std::filesystem::rename(dir.path(5), dir.replaced(5));
  std::filesystem::create_directories(dir.path(5));
  dir.clean();
  CHECK(dir.complete() == list{5});
  CHECK_FALSE(dir.problem(5));
}

TEST_CASE("remove() takes the marker first, then the save") {
  temp_dir tmp;
  save_directory dir(tmp / "checkpoints");
  save(dir, 1);
  save(dir, 2);
  dir.remove(1);
  CHECK(dir.complete() == list{2});
  CHECK_FALSE(std::filesystem::exists(dir.path(1)));
  dir.remove(7); // nothing there
}

TEST_CASE("a symbolic link among the saves is never resumed from, cleaned or deleted through") {
  temp_dir tmp;
  save_directory other(tmp / "other" / "checkpoints");
  save(other, 7);
  save_directory dir(tmp / "checkpoints");
  save(dir, 1);
  std::filesystem::create_directory_symlink(other.path(7), dir.path(7));
  CHECK(dir.complete() == list{1});
  auto report = dir.clean();
  REQUIRE(report.size() == 1);
  CHECK(report[0].find("symbolic link") != std::string::npos);
  CHECK_THROWS_AS(dir.remove(7), cairn::io::io_error);
  CHECK(std::filesystem::is_symlink(dir.path(7)));
  CHECK(other.complete() == list{7});
  CHECK_FALSE(other.problem(7));
}

namespace {
int fail_at = 0;
int operations = 0;
void failing_hook(char const* operation, std::filesystem::path const& path) {
  if (++operations == fail_at)
    throw cairn::io::io_error(path, std::string(operation) + " failed: No space left on device");
}
} // namespace

TEST_CASE("a failure at any file operation of a save leaves the earlier saves complete") {
  // Count the operations of one save, then fail each in turn.
  temp_dir probe;
  save_directory counted(probe / "checkpoints");
  save(counted, 1);
  int total = 0;
  {
    cairn::io::scoped_fault_injection counting(failing_hook);
    operations = 0;
    fail_at = 0;
    save(counted, 2);
    total = operations;
  }
  CHECK(total >= 8);

  for (fail_at = 1; fail_at <= total; ++fail_at) {
    CAPTURE(fail_at);
    temp_dir tmp;
    save_directory dir(tmp / "checkpoints");
    save(dir, 1);
    operations = 0;
    bool failed = false;
    {
      cairn::io::scoped_fault_injection failing(failing_hook);
      try {
        save(dir, 2);
      } catch (cairn::io::io_error const& e) {
        failed = true;
        CHECK(std::string(e.what()).find(tmp.path.string()) == 0); // names the path
      }
    }
    CHECK(failed);
    auto complete = dir.complete();
    REQUIRE(!complete.empty());
    CHECK(complete.front() == 1);
    for (auto iteration : complete) CHECK_FALSE(dir.problem(iteration));
    dir.clean();
    CHECK_FALSE(std::filesystem::exists(dir.staging(2)));
  }
}

TEST_CASE("writing behind: jobs run in order, the bytes waiting stay within the budget, the first failure is kept") {
  using cairn::detail::write_behind;
  std::vector<int> order;
  {
    write_behind behind(100);
    for (int i = 0; i < 20; ++i) behind.submit(40, [&order, i] { order.push_back(i); });
    behind.submit(500, [&order] { order.push_back(20); }); // larger than the budget: goes through alone
    behind.finish();
    CHECK(behind.peak() <= 500);
  }
  std::vector<int> expected(21);
  for (int i = 0; i < 21; ++i) expected[std::size_t(i)] = i;
  CHECK(order == expected);
  {
    write_behind behind(40);
    for (int i = 0; i < 5; ++i) behind.submit(40, [] {});
    CHECK(behind.peak() <= 40);
    behind.finish();
  }

  std::vector<int> ran;
  write_behind behind;
  behind.submit(1, [&] { ran.push_back(1); });
  behind.submit(1, [] { throw std::runtime_error("disk full"); });
  behind.submit(1, [&] { ran.push_back(3); }); // after a failure: dropped
  CHECK_THROWS_WITH_AS(behind.finish(), "disk full", std::runtime_error);
  CHECK(ran == std::vector<int>{1});

  write_behind caller;
  caller.fail(std::make_exception_ptr(std::runtime_error("gather failed")));
  caller.submit(1, [&] { ran.push_back(4); });
  CHECK_THROWS_WITH_AS(caller.finish(), "gather failed", std::runtime_error);
  CHECK(ran == std::vector<int>{1});
}

TEST_CASE("a complete save is complete wherever it lies: copied under another name, it verifies") {
  temp_dir tmp;
  save_directory dir(tmp / "experiment" / "checkpoints");
  save(dir, 200, "twelve bytes");
  std::filesystem::copy(dir.path(200), tmp / "backup", std::filesystem::copy_options::recursive);
  auto copied = cairn::save_status(tmp / "backup");
  CHECK(copied.is_save);
  CHECK_FALSE(copied.problem);
  // Its marker still checks its files there.
  std::filesystem::resize_file(tmp / "backup" / "rank_0.safetensors", 3);
  auto damaged = cairn::save_status(tmp / "backup");
  REQUIRE(damaged.problem);
  CHECK(damaged.problem->find("3 bytes, the marker says 12") != std::string::npos);
  // Copied under another iteration's name in a directory of saves: the marker's iteration is not
  // the name's, refused.
  std::filesystem::copy(dir.path(200), dir.path(300), std::filesystem::copy_options::recursive);
  auto renamed = cairn::save_status(dir.path(300));
  REQUIRE(renamed.problem);
  CHECK(renamed.problem->find("the save of another iteration (200)") != std::string::npos);
}

TEST_CASE("generations (a store's saves, downloaded): the newest complete one is the save") {
  temp_dir tmp;
  auto root = tmp / "checkpoints";
  // What a store holds, as downloaded: checkpoints/<n>/gen-<since>-<writer>-<k>/.
  auto generation = [&](std::int64_t iteration, cairn::save_generation const& g, bool complete,
                        std::string const& contents) {
    auto folder = root / std::to_string(iteration) / g.name();
    std::filesystem::create_directories(folder);
    write_text(folder / "rank_0.safetensors", contents);
    if (complete) {
      auto marker = "{\"iteration\": " + std::to_string(iteration) +
                    ", \"files\": {\"rank_0.safetensors\": " + std::to_string(contents.size()) + "}}";
      write_text(folder / cairn::completion_marker, marker);
    }
    return folder;
  };
  cairn::save_generation old{1000, "aaaaaaaa", 1}, newer{2000, "bbbbbbbb", 1}, newest{3000, "cccccccc", 1};
  CHECK(cairn::save_generation::parse(newer.name()) == newer);
  CHECK(old < newer);
  CHECK(cairn::save_generation{2000, "bbbbbbbb", 10} > cairn::save_generation{2000, "bbbbbbbb", 9});
  for (auto bad : {"gen-", "gen-1-x-1", "gen-01-ab-1", "gen-1-ab", "gen-1-AB-1", "gen--ab-1", "1-ab-1",
                   "gen-9223372036854775807-ab-1", "gen-1000000000000001-ab-1", "gen-1-ab-1000000000000001"})
    CHECK_FALSE(cairn::save_generation::parse(bad)); // dates and counts past max_number are no generation's
  CHECK(cairn::save_generation::parse("gen-1000000000000000-ab-1000000000000000"));

  generation(5, old, true, "old");
  auto second = generation(5, newer, true, "newer");
  generation(5, newest, false, "torn"); // the newest generation, torn: not the save
  CHECK(cairn::resolve_save(root / "5") == second);
  save_directory dir(root);
  CHECK(dir.complete() == list{5});
  CHECK_FALSE(dir.problem(5));
  CHECK(cairn::save_status(root / "5").is_save);
  CHECK_FALSE(cairn::save_status(root / "5").problem);
  CHECK_FALSE(cairn::save_status(second).problem); // the generation itself, given by a user
  // Its file altered: the save (its newest complete generation) is not sound, and an older
  // generation never stands in for it.
  write_text(second / "rank_0.safetensors", "altered: longer");
  CHECK(dir.problem(5));
  CHECK(cairn::resolve_save(root / "5") == second);
}
