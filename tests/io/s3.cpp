// The S3 backend against a real S3-compatible server (s3rver) behind a proxy that checks every
// request's Signature V4 and Content-MD5 and injects faults (tests/io/s3_server.sh starts both).
#include <cairn/checkpoint/directory.hpp>
#include <cairn/io/backend.hpp>
#include <cairn/io/file.hpp>
#include <cairn/io/s3.hpp>
#include <cairn/io/storage.hpp>
#include <cairn/training/lock.hpp>

#include <boost/json/parse.hpp>
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <span>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "../error_kind.hpp"
#include "s3_proxy.hpp"
#include "temp_dir.hpp"

using namespace cairn::io;

namespace {

using s3_test::env;
using s3_test::proxy_stats;
using s3_test::run;

/// Sets the proxy's faults (a JSON object) and zeroes its counters.
void faults(std::string const& json) { s3_test::proxy("faults", json); }

std::int64_t requests(boost::json::object const& stats, char const* operation) {
  auto const* n = stats.at("requests").as_object().if_contains(operation);
  return n ? n->as_int64() : 0;
}

s3_settings settings(std::uint64_t part_size = 5 << 20, int in_flight = 3, double retry = 20) {
  auto out = s3_settings::from_environment();
  out.part_size = part_size;
  out.parts_in_flight = in_flight;
  out.retry_seconds = retry;
  out.request_timeout = 5;
  return out;
}

std::shared_ptr<storage_backend> backend(s3_settings s = settings()) {
  return make_s3_backend(env("CAIRN_TEST_S3_BUCKET"), std::move(s));
}

std::vector<std::byte> pattern(std::size_t n, unsigned seed) {
  std::vector<std::byte> out(n);
  std::mt19937 random(seed);
  for (auto& b : out) b = static_cast<std::byte>(random());
  return out;
}

std::span<std::byte const> bytes_of(std::string const& text) { return std::as_bytes(std::span(text)); }

/// Writes `data` as the object `key` through a writer, committed.
void put_whole(storage_backend& s3, std::string const& key, std::span<std::byte const> data) {
  auto writer = s3.open_writer(key);
  writer->write(data);
  writer->commit();
}

/// A key of its own for each test case, so that cases never see each other's objects.
std::string fresh(std::string const& name) {
  static int counter = 0;
  return "case-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + "/" + name;
}

} // namespace

TEST_CASE("objects are written, sized, read in ranges, listed and removed") {
  faults("{}");
  auto s3 = backend();
  auto dir = fresh("dir");
  std::string text = "the quick brown fox";
  s3->write(dir + "/a b/x+y é.txt", bytes_of(text)); // a key that must be percent-encoded
  s3->write(dir + "/top.json", bytes_of(text));
  CHECK(s3->size(dir + "/a b/x+y é.txt") == text.size());
  CHECK_FALSE(s3->size(dir + "/missing").has_value());

  std::vector<std::byte> part(5);
  s3->read(dir + "/a b/x+y é.txt", 4, part);
  CHECK(std::string(reinterpret_cast<char const*>(part.data()), part.size()) == "quick");
  CHECK(s3->read_all(dir + "/top.json", 1000) == text);
  CHECK_THROWS_WITH_AS(s3->read_all(dir + "/top.json", 5), doctest::Contains("larger than 5 bytes"), io_error);
  CHECK_THROWS_WITH_AS(s3->read_all(dir + "/missing", 5), doctest::Contains("no such object"), io_error);
  std::vector<std::byte> past(10);
  CHECK_THROWS_AS(s3->read(dir + "/top.json", 15, past), io_error);

  auto listed = s3->list(dir);
  REQUIRE(listed.size() == 2);
  CHECK(listed[0].name == "a b");
  CHECK(listed[0].directory);
  CHECK(listed[1].name == "top.json");
  CHECK(listed[1].size == text.size());
  CHECK_FALSE(listed[1].directory);
  CHECK(s3->list(dir + "/a b").at(0).name == "x+y é.txt");
  CHECK(s3->list(fresh("nothing")).empty());

  s3->remove(dir + "/top.json");
  s3->remove(dir + "/top.json"); // nothing there is not an error
  CHECK_FALSE(s3->size(dir + "/top.json").has_value());
  s3->remove_tree(dir);
  CHECK(s3->list(dir).empty());
  CHECK(proxy_stats().at("bad_signatures").as_int64() == 0);
}

TEST_CASE("a listing of more than one page is read whole") {
  faults(R"({"page_size": 7})");
  auto s3 = backend();
  auto dir = fresh("many");
  std::string empty;
  for (int i = 0; i < 20; ++i) s3->write(dir + "/k" + std::to_string(i), bytes_of(empty));
  for (int i = 0; i < 4; ++i) s3->write(dir + "/sub" + std::to_string(i) + "/x", bytes_of(empty));
  auto listed = s3->list(dir);
  CHECK(listed.size() == 24);
  CHECK(std::count_if(listed.begin(), listed.end(), [](auto const& e) { return e.directory; }) == 4);
  CHECK(requests(proxy_stats(), "LIST") == 4); // 24 entries, 7 a page
  s3->remove_tree(dir);
  CHECK(s3->list(dir).empty());
}

TEST_CASE("a large object is a multipart upload with parts in flight at once, read back bitwise in ranges") {
  faults("{}");
  auto s3 = backend(settings(5 << 20, 3));
  auto key = fresh("big.bin");
  auto data = pattern((23 << 20) + 17, 1); // 4 full parts of 5 MiB and a short last one
  {
    auto writer = s3->open_writer(key);
    // Fed in pieces that do not align with the parts.
    for (std::size_t at = 0; at < data.size(); at += 3'000'001)
      writer->write(std::span(data).subspan(at, std::min<std::size_t>(3'000'001, data.size() - at)));
    CHECK(writer->size() == data.size());
    CHECK_FALSE(s3->size(key).has_value()); // nothing visible before the commit
    writer->commit();
  }
  auto stats = proxy_stats();
  CHECK(requests(stats, "UploadPart") == 5);
  CHECK(requests(stats, "CompleteMultipartUpload") == 1);
  CHECK(stats.at("parts_in_flight_max").as_int64() >= 2);
  CHECK(stats.at("parts_in_flight_max").as_int64() <= 3);
  CHECK(stats.at("bad_digests").as_int64() == 0);
  CHECK(stats.at("bad_signatures").as_int64() == 0);
  CHECK(s3->size(key) == data.size());

  faults("{}");
  std::vector<std::byte> back(data.size());
  s3->read(key, 0, back);
  CHECK(back == data);
  // A range reads exactly its bytes.
  faults("{}");
  std::vector<std::byte> middle(1234567);
  s3->read(key, 7'000'003, middle);
  CHECK(std::equal(middle.begin(), middle.end(), data.begin() + 7'000'003));
  CHECK(proxy_stats().at("ranged_bytes").as_int64() == 1234567);
  s3->remove(key);
}

TEST_CASE("an object written and never committed leaves nothing, and its upload is aborted") {
  faults("{}");
  auto s3 = backend(settings(5 << 20, 2));
  auto key = fresh("torn.bin");
  auto data = pattern(12 << 20, 2);
  {
    auto writer = s3->open_writer(key);
    writer->write(data);
  }
  CHECK_FALSE(s3->size(key).has_value());
  CHECK(s3->list(key.substr(0, key.find('/'))).empty());
  CHECK(proxy_stats().at("aborted").as_int64() == 1);
}

TEST_CASE("503 SlowDown on every other request is retried to success") {
  faults(R"({"fail_every": 2, "fail_status": 503, "fail_code": "SlowDown"})");
  auto s3 = backend(settings(5 << 20, 2));
  auto key = fresh("slow.bin");
  auto data = pattern(11 << 20, 3);
  put_whole(*s3, key, data);
  std::vector<std::byte> back(data.size());
  s3->read(key, 0, back);
  CHECK(back == data);
  CHECK(s3->list(key.substr(0, key.find('/'))).size() == 1);
  CHECK(proxy_stats().at("injected").as_int64() >= 3);
  CHECK(statistics_of(*s3).retries >= 3);
}

TEST_CASE("a store that keeps failing is an error naming the key, the operation, the status and the code, "
          "within the retry time") {
  faults(R"({"fail_every": 1, "fail_status": 503, "fail_code": "SlowDown"})");
  auto s3 = backend(settings(5 << 20, 2, 1.5));
  auto key = fresh("never.json");
  std::string text = "{}";
  auto start = std::chrono::steady_clock::now();
  try {
    s3->write(key, bytes_of(text));
    FAIL("the write succeeded");
  } catch (s3_error const& e) {
    std::string message = e.what();
    CHECK(message.find("s3://" + env("CAIRN_TEST_S3_BUCKET") + "/" + key) != std::string::npos);
    CHECK(message.find("PUT failed: HTTP 503 SlowDown") != std::string::npos);
    CHECK(message.find("attempts") != std::string::npos);
    CHECK(e.status() == 503);
    CHECK(e.code() == "SlowDown");
    CHECK(e.operation() == "PUT");
    CHECK(e.kind() == cairn::io_errc::storage);
  }
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
  // A listing that fails is an error, never "nothing there": a resume must not start afresh.
  CHECK_THROWS_WITH_AS((void)s3->list(key), doctest::Contains("LIST failed: HTTP 503"), s3_error);
  CHECK_THROWS_AS((void)s3->size(key), s3_error);
  faults("{}");
}

TEST_CASE("a connection reset in the middle of a part is retried, and the object is whole") {
  faults(R"({"reset_after": 1000000, "reset_count": 2})");
  auto s3 = backend(settings(5 << 20, 2));
  auto key = fresh("reset.bin");
  auto data = pattern(16 << 20, 4);
  put_whole(*s3, key, data);
  CHECK(proxy_stats().at("resets").as_int64() == 2);
  std::vector<std::byte> back(data.size());
  s3->read(key, 0, back);
  CHECK(back == data);
}

TEST_CASE("a part altered on the way is refused by its Content-MD5 and sent again") {
  faults(R"({"corrupt_count": 1})");
  auto s3 = backend(settings(5 << 20, 2));
  auto key = fresh("digest.bin");
  auto data = pattern(10 << 20, 5);
  put_whole(*s3, key, data);
  auto stats = proxy_stats();
  CHECK(stats.at("corrupted").as_int64() == 1);
  CHECK(stats.at("bad_digests").as_int64() == 1);
  std::vector<std::byte> back(data.size());
  s3->read(key, 0, back);
  CHECK(back == data);
}

TEST_CASE("a request done by the store whose answer was lost is not reported as failed when sent again") {
  SUBCASE("a multipart completion: the object is whole, and a writer's object is what it wrote") {
    faults(R"({"lose_match": "CompleteMultipartUpload", "lose_count": 1})");
    auto s3 = backend(settings(5 << 20, 2));
    auto key = fresh("lost-answer.bin");
    auto data = pattern((12 << 20) + 5, 7);
    put_whole(*s3, key, data);
    auto stats = proxy_stats();
    CHECK(stats.at("lost").as_int64() == 1);
    CHECK(requests(stats, "CompleteMultipartUpload") == 2);
    std::vector<std::byte> back(data.size());
    s3->read(key, 0, back);
    CHECK(back == data);
  }
  SUBCASE("an exclusive create through If-None-Match: won by the writer whose bytes are there, not lost to itself") {
    faults(R"({"conditional": true, "lose_match": "PUT", "lose_count": 1})");
    auto s = settings();
    s.conditional_create = true;
    auto s3 = backend(s);
    auto key = fresh("lock");
    std::string mine = "mine 81726354", theirs = "theirs 18273645";
    CHECK(s3->create_exclusive(key, bytes_of(mine)));
    CHECK(proxy_stats().at("lost").as_int64() == 1);
    CHECK_FALSE(s3->create_exclusive(key, bytes_of(theirs)));
    CHECK(s3->read_all(key, 100) == mine);
  }
  faults("{}");
}

TEST_CASE("a wrong secret is refused by the signature check, and never printed") {
  faults("{}");
  auto s = settings();
  s.secret_access_key = "not-the-secret-4f1c";
  s.retry_seconds = 0;
  auto s3 = backend(s);
  try {
    (void)s3->read_all(fresh("x"), 100);
    FAIL("a request with a wrong signature was accepted");
  } catch (s3_error const& e) {
    std::string message = e.what();
    CHECK(e.status() == 403);
    CHECK(e.code() == "SignatureDoesNotMatch");
    CHECK(message.find("not-the-secret-4f1c") == std::string::npos);
    CHECK(message.find("credentials from AWS_ACCESS_KEY_ID") != std::string::npos);
  }
  CHECK(proxy_stats().at("bad_signatures").as_int64() == 1);
}

TEST_CASE("an exclusive create is won by one writer only") {
  std::string first = "first", second = "second";
  SUBCASE("through If-None-Match where the store honours it") {
    faults(R"({"conditional": true})");
    auto s = settings();
    s.conditional_create = true;
    auto s3 = backend(s);
    auto key = fresh("lock");
    CHECK(s3->create_exclusive(key, bytes_of(first)));
    CHECK_FALSE(s3->create_exclusive(key, bytes_of(second)));
    CHECK(s3->read_all(key, 100) == "first");
  }
  SUBCASE("looked for, written and read back where it does not (s3rver ignores If-None-Match)") {
    faults("{}");
    auto s3 = backend();
    REQUIRE_FALSE(s3->guarantees().conditional_create);
    auto key = fresh("lock");
    CHECK(s3->create_exclusive(key, bytes_of(first)));
    CHECK_FALSE(s3->create_exclusive(key, bytes_of(second)));
    CHECK(s3->read_all(key, 100) == "first");
  }
}

TEST_CASE("the one-writer lock on an object store is a lease: held, refused, released, taken over from the dead") {
  faults("{}");
  std::string dir = "s3://" + env("CAIRN_TEST_S3_BUCKET") + "/" + fresh("experiment");
  auto s3 = backend();
  auto lease = dir.substr(dir.find('/', 5) + 1) + "/.cairn.lock";
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  // A lease as another run records it.
  auto record = [&](std::string const& on, long pid, long refreshed) {
    auto text = "host " + on + ", pid " + std::to_string(pid) + ", since unix time 1, refreshed unix time " +
                std::to_string(refreshed) + ", lease 1234\n";
    s3->write(lease, bytes_of(text));
  };
  auto now = static_cast<long>(std::time(nullptr));

  SUBCASE("a second run is refused while the first holds it; the first's release frees it") {
    {
      cairn::experiment_lock first(dir);
      CHECK(s3->read_all(lease, 4096).find("pid " + std::to_string(::getpid()) + ",") != std::string::npos);
      CHECK_THROWS_WITH_AS(cairn::experiment_lock{dir}, doctest::Contains("in use by another run (host "),
                           cairn::training_error);
      first.check();
    }
    CHECK_FALSE(s3->size(lease));
    cairn::experiment_lock again(dir);
    again.check();
  }
  SUBCASE("a lease renewed now by a live process elsewhere is refused") {
    record("another-host", ::getpid(), now);
    CHECK_THROWS_WITH_AS(cairn::experiment_lock{dir}, doctest::Contains("another-host"), cairn::training_error);
    CHECK(s3->read_all(lease, 4096).find("lease 1234") != std::string::npos); // left as it was
  }
  SUBCASE("a lease not renewed for longer than its expiry is taken over") {
    record("another-host", 1, now - cairn::experiment_lock::lease_expiry - 5);
    cairn::experiment_lock taken(dir);
    CHECK(s3->read_all(lease, 4096).find("pid " + std::to_string(::getpid()) + ",") != std::string::npos);
  }
  SUBCASE("a lease of an ended process of this host is taken over at once, a zombie's too") {
    for (bool reaped : {true, false}) {
      CAPTURE(reaped);
      pid_t child = ::fork();
      REQUIRE(child >= 0);
      if (child == 0) ::_exit(0);
      siginfo_t info{};
      if (reaped)
        ::waitpid(child, nullptr, 0);
      else
        ::waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT); // ended, left a zombie
      record(host, child, now);
      {
        cairn::experiment_lock taken(dir);
        taken.check();
      }
      if (!reaped) ::waitpid(child, nullptr, 0);
    }
  }
  SUBCASE("a lease recorded by a longer name is read whole: the second run is told its holder") {
    std::string long_host(600, 'h');
    record(long_host, ::getpid(), now);
    auto expected = "in use by another run (host " + long_host;
    CHECK_THROWS_WITH_AS(cairn::experiment_lock{dir}, doctest::Contains(expected.c_str()), cairn::training_error);
  }
  SUBCASE("a holder whose lease another run took over commits nothing more") {
    cairn::experiment_lock held(dir);
    record("another-host", 1, now);
    CHECK_THROWS_WITH_AS(held.check(), doctest::Contains("this run's lock was taken over (host another-host"),
                         cairn::training_error);
  }
}

TEST_CASE("of two runs that take the lease at once, exactly one wins, the other names it, and nothing is left") {
  // s3rver ignores If-None-Match: the lease is taken by a look, a write and reads until they
  // agree. On a fast store and on a slow one (every request 0.3 s late).
  for (auto const* slow : {"{}", R"({"latency": 0.3})"})
    for (int trial = 0; trial < 2; ++trial) {
      CAPTURE(slow);
      CAPTURE(trial);
      faults(slow);
      std::string dir = "s3://" + env("CAIRN_TEST_S3_BUCKET") + "/" + fresh("raced");
      int go[2], said[2];
      REQUIRE(::pipe(go) == 0);
      REQUIRE(::pipe(said) == 0);
      std::vector<pid_t> runs;
      for (int k = 0; k < 2; ++k) {
        pid_t child = ::fork();
        REQUIRE(child >= 0);
        if (child == 0) {
          char start = 0;
          if (::read(go[0], &start, 1) != 1) ::_exit(3);
          std::string outcome;
          try {
            {
              cairn::experiment_lock lock(dir);
              outcome = "won " + std::to_string(::getpid()) + "\n";
              (void)!::write(said[1], outcome.data(), outcome.size());
              std::this_thread::sleep_for(std::chrono::seconds(3)); // held while the other decides
              lock.check();
            } // released
            ::_exit(0);
          } catch (std::exception const& e) {
            outcome = std::string("refused ") + e.what();
            for (auto& c : outcome)
              if (c == '\n') c = ' ';
            outcome += "\n";
            (void)!::write(said[1], outcome.data(), outcome.size());
            ::_exit(1);
          }
        }
        runs.push_back(child);
      }
      ::close(said[1]);
      REQUIRE(::write(go[1], "xx", 2) == 2); // both at once
      ::close(go[1]);
      std::string outcomes;
      char buffer[4096];
      for (ssize_t n; (n = ::read(said[0], buffer, sizeof buffer)) > 0;)
        outcomes.append(buffer, static_cast<std::size_t>(n));
      ::close(said[0]);
      ::close(go[0]);
      int won = 0;
      for (auto child : runs) {
        int status = 0;
        ::waitpid(child, &status, 0);
        won += WIFEXITED(status) && WEXITSTATUS(status) == 0;
      }
      INFO(outcomes);
      REQUIRE(won == 1);
      auto winner = outcomes.substr(outcomes.find("won ") + 4);
      winner = winner.substr(0, winner.find('\n'));
      CHECK(outcomes.find("refused " + dir + ": in use by another run (host ") != std::string::npos);
      CHECK(outcomes.find(", pid " + winner + ",") != std::string::npos); // the winner, named
      auto s3 = backend();
      CHECK_FALSE(s3->size(dir.substr(dir.find('/', 5) + 1) + "/.cairn.lock")); // released, nothing stale
    }
  faults("{}");
}

TEST_CASE("leftovers under a directory of saves on a store are cleaned or skipped, never renamed") {
  faults("{}");
  auto s3 = backend();
  auto root = fresh("experiment") + "/checkpoints";
  auto url = "s3://" + env("CAIRN_TEST_S3_BUCKET") + "/" + root;
  cairn::save_directory dir(url);
  auto staged = dir.begin(2);
  s3->write(root + "/2/" + staged.filename().string() + "/rank_0.safetensors", bytes_of("a save"));
  dir.commit(2);
  // Strays of a POSIX experiment copied here: a save set aside by a replacement (whose own save
  // is gone), a staging directory, and one set aside beside a complete save.
  s3->write(root + "/.replaced-3/complete.json", bytes_of(R"({"iteration": 3, "files": {}})"));
  s3->write(root + "/.replaced-3/rank_0.safetensors", bytes_of("x"));
  s3->write(root + "/.partial-4/rank_0.safetensors", bytes_of("x"));
  s3->write(root + "/.replaced-2/complete.json", bytes_of(R"({"iteration": 2, "files": {}})"));
  // And a generation torn by a crash, of a writer older than this one.
  s3->write(root + "/5/" + cairn::save_generation{1, "abcdef01", 1}.name() + "/rank_0.safetensors", bytes_of("x"));
  auto said = dir.clean();
  std::string all;
  for (auto const& line : said) all += line + "\n";
  INFO(all);
  CHECK(all.find("left " + url + "/.replaced-3 alone") != std::string::npos);
  CHECK(all.find("removed " + url + "/.partial-4") != std::string::npos);
  CHECK(all.find("removed " + url + "/.replaced-2") != std::string::npos);
  CHECK(all.find("removed " + url + "/5/gen-1-abcdef01-1: it has no completion marker") != std::string::npos);
  CHECK(s3->size(root + "/.replaced-3/rank_0.safetensors")); // never deleted
  CHECK_FALSE(s3->size(root + "/.partial-4/rank_0.safetensors"));
  CHECK(dir.complete() == std::vector<std::int64_t>{2});
  CHECK_FALSE(dir.problem(2));
  CHECK(dir.clean().size() == 1); // the stray set aside, said again; nothing else
}

TEST_CASE("a generation dated ahead of this host's clock does not outrank this writer's saves; a newer writer's does") {
  faults("{}");
  auto s3 = backend();
  auto now = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
                 .count();
  auto marker = [](std::int64_t iteration) {
    return R"({"iteration": )" + std::to_string(iteration) + R"(, "files": {}})";
  };
  auto save = [&](cairn::save_directory& dir, std::int64_t iteration) {
    auto staged = dir.begin(iteration);
    s3->write(cairn::io::open_location((staged / "rank_0.safetensors").string()).key, bytes_of("a save"));
    return dir.commit(iteration);
  };
  SUBCASE("dated ahead: passed, then removed as an older writer's") {
    auto root = fresh("experiment") + "/checkpoints";
    auto url = "s3://" + env("CAIRN_TEST_S3_BUCKET") + "/" + root;
    // A save of 6 dated an hour ahead (a host whose clock runs ahead, or copied in).
    cairn::save_generation ahead{now + 3'600'000, "ffffffff", 1};
    s3->write(root + "/6/" + ahead.name() + "/complete.json", bytes_of(marker(6)));
    cairn::save_directory dir(url);
    dir.set_writer(now - 5000, "12345678");
    auto moved = dir.pass_future_generations();
    REQUIRE(moved);
    CHECK(moved->find(url + "/6/" + ahead.name()) != std::string::npos);
    CHECK(moved->find("ahead of this host's clock") != std::string::npos);
    CHECK_FALSE(dir.pass_future_generations()); // past it now
    auto six = save(dir, 6);
    CHECK(dir.resolved(6) == six);
    CHECK(six.filename().string().starts_with("gen-" + std::to_string(ahead.since + 1) + "-12345678-"));
    CHECK_FALSE(s3->size(root + "/6/" + ahead.name() + "/complete.json"));
  }
  SUBCASE("dated past any clock: no generation, or one that cannot be passed, said") {
    auto root = fresh("experiment") + "/checkpoints";
    auto url = "s3://" + env("CAIRN_TEST_S3_BUCKET") + "/" + root;
    // Past what a generation's name may hold (an int64's largest): no generation at all.
    s3->write(root + "/12/gen-9223372036854775807-ffffffff-1/complete.json", bytes_of(marker(12)));
    cairn::save_directory dir(url);
    dir.set_writer(now - 5000, "12345678");
    CHECK_FALSE(dir.pass_future_generations());
    auto twelve = save(dir, 12);
    CHECK(dir.resolved(12) == twelve);
    // The latest date a generation may have: said, never overflowed past.
    cairn::save_generation last{cairn::save_generation::max_number, "ffffffff", 1};
    s3->write(root + "/13/" + last.name() + "/complete.json", bytes_of(marker(13)));
    auto said = dir.pass_future_generations();
    REQUIRE(said);
    CHECK(said->find("the latest date a generation may have") != std::string::npos);
    CHECK(dir.resolved(12) == twelve);
  }
  SUBCASE("dated after this writer took the experiment, before now: a newer writer's, left ahead") {
    auto root = fresh("experiment") + "/checkpoints";
    auto url = "s3://" + env("CAIRN_TEST_S3_BUCKET") + "/" + root;
    cairn::save_generation newer_writer{now - 1000, "eeeeeeee", 1};
    s3->write(root + "/7/" + newer_writer.name() + "/complete.json", bytes_of(marker(7)));
    cairn::save_directory dir(url);
    dir.set_writer(now - 5000, "12345678");
    CHECK_FALSE(dir.pass_future_generations());
    save(dir, 7);
    CHECK(dir.resolved(7) == std::filesystem::path(url + "/7/" + newer_writer.name()));
    CHECK(s3->size(root + "/7/" + newer_writer.name() + "/complete.json"));
  }
}

TEST_CASE("the AWS command-line tool reads what cairn wrote, and cairn reads what it wrote") {
  if (run("test -x /usr/bin/aws").first != 0) {
    MESSAGE("skipped: no /usr/bin/aws (scripts/install-deps.sh installs awscli)");
    return;
  }
  faults("{}");
  temp_dir dir;
  auto s3 = backend();
  auto key = fresh("shared.bin");
  auto data = pattern((13 << 20) + 5, 6);
  put_whole(*s3, key, data);
  auto url = "s3://" + env("CAIRN_TEST_S3_BUCKET") + "/" + key;
  auto aws = "AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null /usr/bin/aws --endpoint-url " +
             env("AWS_ENDPOINT_URL") + " s3 ";
  auto [status, out] = run(aws + "cp '" + url + "' '" + (dir / "down.bin").string() + "' 2>&1");
  REQUIRE_MESSAGE(status == 0, out);
  mapped_file down(dir / "down.bin");
  CHECK(std::equal(down.bytes().begin(), down.bytes().end(), data.begin(), data.end()));

  // awscli's own multipart upload (8 MiB parts), read by cairn.
  auto [up_status, up_out] = run(aws + "cp '" + (dir / "down.bin").string() + "' '" + url + ".copy' 2>&1");
  REQUIRE_MESSAGE(up_status == 0, up_out);
  std::vector<std::byte> back(data.size());
  s3->read(key + ".copy", 0, back);
  CHECK(back == data);
  CHECK(proxy_stats().at("bad_signatures").as_int64() == 0); // the proxy's check agrees with awscli's signing
}

TEST_CASE("check-storage reports what the store guarantees") {
  faults("{}");
  auto report = check_storage("s3://" + env("CAIRN_TEST_S3_BUCKET") + "/" + fresh("check"));
  auto text = to_string(report);
  INFO(text);
  auto holds = [&](std::string const& name) {
    for (auto const& c : report.checks)
      if (c.name == name) return c.holds;
    FAIL("no check named " << name);
    return false;
  };
  CHECK(holds("write and read back"));
  CHECK(holds("ranged read"));
  CHECK(holds("list after write"));
  CHECK(holds("multipart upload"));
  CHECK(holds("delete"));
  CHECK_FALSE(holds("conditional create")); // s3rver overwrites under If-None-Match: *
  CHECK(text.find("If-None-Match") != std::string::npos);
}
