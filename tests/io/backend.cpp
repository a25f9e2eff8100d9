// The storage interface: the POSIX backend, the choice of backend from a path, and (with S3
// support) s3:// addresses and the settings read from the AWS variables and files.
#include <cairn/io/backend.hpp>
#include <cairn/io/error.hpp>
#ifdef CAIRN_WITH_S3
#include <cairn/io/s3.hpp>
#endif

#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "../error_kind.hpp"
#include "temp_dir.hpp"

using namespace cairn::io;

namespace {
std::span<std::byte const> bytes_of(std::string const& text) { return std::as_bytes(std::span(text)); }
} // namespace

TEST_CASE("a path chooses its backend: s3:// an object store, anything else POSIX") {
  CHECK(is_object_store_path("s3://bucket/a"));
  CHECK_FALSE(is_object_store_path("/data/s3://x"));
  CHECK_FALSE(is_object_store_path("S3://bucket")); // a relative POSIX path, as a shell would take it
  auto local = open_location("/tmp/run");
  CHECK(local.backend == posix_backend());
  CHECK(local.key == "/tmp/run");
  CHECK((local / "checkpoints").key == "/tmp/run/checkpoints");
  CHECK(local.backend->guarantees().atomic_rename);
#ifndef CAIRN_WITH_S3
  CHECK_THROWS_WITH_AS(open_location("s3://bucket/a"), doctest::Contains("no S3 support"), io_error);
#endif
}

TEST_CASE("the POSIX backend writes, reads, lists and removes as the S3 one does") {
  temp_dir dir;
  auto posix = posix_backend();
  auto root = dir.path.string();
  std::string text = "0123456789";
  CHECK_THROWS_AS(posix->write(root + "/a/b/file.txt", bytes_of(text)), io_error); // no directory made
  make_folder(root + "/a/b");
  posix->write(root + "/a/b/file.txt", bytes_of(text));
  CHECK(posix->size(root + "/a/b/file.txt") == 10);
  CHECK_FALSE(posix->size(root + "/a/b/missing").has_value());
  CHECK_FALSE(posix->size(root + "/a/b/file.txt/below").has_value());
  std::vector<std::byte> piece(4);
  posix->read(root + "/a/b/file.txt", 3, piece);
  CHECK(std::string(reinterpret_cast<char const*>(piece.data()), 4) == "3456");
  CHECK_THROWS_WITH_AS(posix->read(root + "/a/b/file.txt", 8, piece), doctest::Contains("past the end"), io_error);
  CHECK(posix->read_all(root + "/a/b/file.txt", 10) == text);
  CHECK_THROWS_AS((void)posix->read_all(root + "/a/b/file.txt", 9), io_error);

  {
    auto writer = posix->open_writer(root + "/a/streamed");
    writer->write(bytes_of(text));
    writer->write(bytes_of(text));
    CHECK(writer->size() == 20);
    CHECK_FALSE(posix->size(root + "/a/streamed").has_value()); // not under its name before the commit
    writer->commit();
  }
  CHECK(posix->size(root + "/a/streamed") == 20);
  {
    auto writer = posix->open_writer(root + "/a/torn");
    writer->write(bytes_of(text));
  }
  CHECK_FALSE(posix->size(root + "/a/torn").has_value());

  auto listed = posix->list(root + "/a");
  REQUIRE(listed.size() == 2); // no temporary left behind
  CHECK(listed[0].name == "b");
  CHECK(listed[0].directory);
  CHECK(listed[1].name == "streamed");
  CHECK(listed[1].size == 20);
  CHECK(posix->list(root + "/nothing").empty());
  std::ofstream(dir / "plain") << "x";
  CHECK_THROWS_AS((void)posix->list(root + "/plain"), io_error); // a listing that fails is never "empty"

  posix->remove(root + "/a/streamed");
  posix->remove(root + "/a/streamed");
  CHECK_FALSE(posix->size(root + "/a/streamed").has_value());
  posix->remove_tree(root + "/a");
  CHECK(posix->list(root + "/a").empty());
}

TEST_CASE("of writers racing for an exclusive create on POSIX, exactly one wins, and its bytes are whole") {
  temp_dir dir;
  auto posix = posix_backend();
  auto key = (dir / "lock").string();
  std::vector<std::thread> threads;
  std::vector<int> won(8, 0);
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&, i] {
      auto text = "writer " + std::to_string(i);
      won[static_cast<std::size_t>(i)] = posix->create_exclusive(key, bytes_of(text)) ? 1 : 0;
    });
  for (auto& t : threads) t.join();
  int winners = 0, winner = -1;
  for (int i = 0; i < 8; ++i)
    if (won[static_cast<std::size_t>(i)]) ++winners, winner = i;
  REQUIRE(winners == 1);
  CHECK(posix->read_all(key, 100) == "writer " + std::to_string(winner));
  CHECK(posix->list(dir.path.string()).size() == 1); // no temporary left behind
}

#ifdef CAIRN_WITH_S3
TEST_CASE("s3:// addresses are split into bucket and key, and bad ones are refused naming them") {
  auto a = s3_address::parse("s3://my-bucket/runs/7/");
  CHECK(a.bucket == "my-bucket");
  CHECK(a.key == "runs/7");
  CHECK(s3_address::parse("s3://my-bucket").key.empty());
  for (auto bad :
       {"s3://", "s3://ab/x", "s3://Upper/x", "s3://b_u/x", "s3://bucket//x", "s3://bucket/a/../b", "s3://bucket/./a"})
    CHECK_THROWS_WITH_AS(s3_address::parse(bad), doctest::Contains(bad), io_error);
}

TEST_CASE("S3 settings come from the AWS variables, else the profile's files, and never print a secret") {
  temp_dir dir;
  std::ofstream(dir / "credentials") << "[default]\naws_access_key_id = DEFAULTID\naws_secret_access_key = s3cr3t-d\n"
                                     << "[team]\naws_access_key_id=TEAMID\naws_secret_access_key=s3cr3t-t\n"
                                     << "aws_session_token = tok\n";
  std::ofstream(dir / "config") << "[profile team]\nregion = eu-west-3\nendpoint_url = http://127.0.0.1:9000\n";
  std::map<std::string, std::string> vars{{"HOME", dir.path.string()},
                                          {"AWS_SHARED_CREDENTIALS_FILE", (dir / "credentials").string()},
                                          {"AWS_CONFIG_FILE", (dir / "config").string()}};
  auto lookup = [&](char const* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };

  auto defaults = s3_settings::from_environment(lookup);
  CHECK(defaults.access_key_id == "DEFAULTID");
  CHECK(defaults.secret_access_key == "s3cr3t-d");
  CHECK(defaults.region == "us-east-1");
  CHECK(defaults.endpoint.empty());
  CHECK(defaults.conditional_create); // AWS honours If-None-Match
  CHECK(defaults.credentials_source.find("profile 'default'") != std::string::npos);

  vars["AWS_PROFILE"] = "team";
  auto team = s3_settings::from_environment(lookup);
  CHECK(team.access_key_id == "TEAMID");
  CHECK(team.session_token == "tok");
  CHECK(team.region == "eu-west-3");
  CHECK(team.endpoint == "http://127.0.0.1:9000");
  CHECK_FALSE(team.conditional_create); // a custom endpoint: not assumed

  vars["AWS_ACCESS_KEY_ID"] = "ENVID";
  CHECK_THROWS_WITH_AS(s3_settings::from_environment(lookup), doctest::Contains("AWS_SECRET_ACCESS_KEY"), io_error);
  vars["AWS_SECRET_ACCESS_KEY"] = "s3cr3t-e";
  vars["AWS_REGION"] = "ap-south-1";
  vars["AWS_ENDPOINT_URL"] = "http://localhost:1";
  vars["CAIRN_S3_PARTS_IN_FLIGHT"] = "16";
  vars["CAIRN_S3_PART_SIZE"] = "16777216";
  auto from_vars = s3_settings::from_environment(lookup);
  CHECK(from_vars.access_key_id == "ENVID");
  CHECK(from_vars.region == "ap-south-1");
  CHECK(from_vars.endpoint == "http://localhost:1");
  CHECK(from_vars.parts_in_flight == 16);
  CHECK(from_vars.part_size == 16u << 20);

  for (auto [name, value] : std::vector<std::pair<char const*, char const*>>{{"CAIRN_S3_PARTS_IN_FLIGHT", "0"},
                                                                             {"CAIRN_S3_PART_SIZE", "1000"},
                                                                             {"CAIRN_S3_RETRY_SECONDS", "ten"},
                                                                             {"AWS_ENDPOINT_URL", "localhost:9000"}}) {
    auto saved = vars[name];
    vars[name] = value;
    try {
      (void)s3_settings::from_environment(lookup);
      FAIL(name << "=" << value << " was accepted");
    } catch (io_error const& e) {
      std::string message = e.what();
      CHECK(message.find(name) != std::string::npos);
      CHECK(message.find("s3cr3t") == std::string::npos);
    }
    vars[name] = saved;
  }

  vars.erase("AWS_ACCESS_KEY_ID");
  vars["AWS_PROFILE"] = "nobody";
  CHECK_THROWS_WITH_AS(s3_settings::from_environment(lookup), doctest::Contains("no credentials"), io_error);
}
#endif
