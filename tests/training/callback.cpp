// Callbacks: shell-like splitting without a shell, environments, non-blocking start.
#include <cairn/config.hpp>
#include <cairn/training/callback.hpp>

#include <doctest/doctest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

#include "../error_kind.hpp"

using words = std::vector<std::string>;

TEST_CASE("a script string splits like a shell would, with nothing expanded") {
  CHECK(cairn::split_words("sync.sh --dest /data") == words{"sync.sh", "--dest", "/data"});
  CHECK(cairn::split_words("  a   b\tc ") == words{"a", "b", "c"});
  CHECK(cairn::split_words("cp 'my file' \"other file\"") == words{"cp", "my file", "other file"});
  CHECK(cairn::split_words(R"(echo "a \"quoted\" \$HOME" \$x a\ b)") ==
        words{"echo", R"(a "quoted" $HOME)", "$x", "a b"});
  CHECK(cairn::split_words("echo $HOME `id` ; rm -rf /") == words{"echo", "$HOME", "`id`", ";", "rm", "-rf", "/"});
  CHECK(cairn::split_words("a''b \"\"") == words{"ab", ""});
  CHECK(cairn::split_words("") == words{});
  CHECK_THROWS_WITH_AS(cairn::split_words("echo 'oops"), "unterminated single quote", cairn::error);
  CHECK_KIND(cairn::split_words("echo 'oops"), cairn::training_errc::callback);
  CHECK_THROWS_WITH_AS(cairn::split_words("echo \"oops"), "unterminated double quote", cairn::error);
  CHECK_THROWS_WITH_AS(cairn::split_words("echo \\"), "trailing backslash", cairn::error);
}

TEST_CASE("the script is a string or an argv list in JSON") {
  auto from_string = cairn::from_string<cairn::callback_config>(R"({"script": "upload.sh 'a b'"})");
  auto from_list = cairn::from_string<cairn::callback_config>(R"({"script": ["upload.sh", "a b"]})");
  CHECK(from_string.script.argv == words{"upload.sh", "a b"});
  CHECK(from_string.script == from_list.script);
  CHECK(cairn::to_json(from_string).at("script") == boost::json::array{"upload.sh", "a b"});
  CHECK_THROWS_WITH_AS(cairn::from_string<cairn::callback_config>(R"({"script": "x 'y"})"),
                       "1 config error:\n  script: unterminated single quote", cairn::config_error);
  CHECK_THROWS_WITH_AS(cairn::from_string<cairn::callback_config>(R"({"script": 3})"),
                       "1 config error:\n  script: expected a command (a string or a list of strings), got number 3",
                       cairn::config_error);
  CHECK_FALSE(cairn::callback_config{}.enabled());
}

TEST_CASE("run starts the program without a shell, with the extra environment, and returns at once") {
  auto out = std::filesystem::temp_directory_path() / ("cairn_callback_" + std::to_string(::getpid()));
  cairn::callback_config config;
  // sh is the *program* here, given explicitly: cairn itself never runs a shell.
  config.script.argv = {"sh", "-c", "printf '%s|%s|%s' \"$CAIRN_A\" \"$CAIRN_B\" \"$1\" > \"$OUT\"", "sh", "$HOME;x"};
  config.environment = {{"CAIRN_A", "from config"}, {"CAIRN_B", "overridden"}};
  auto child = config.run({{"CAIRN_B", "from caller"}, {"OUT", out.string()}});
  CHECK(child.pid() > 0);
  CHECK(child.wait() == 0);
  std::ifstream in(out);
  std::stringstream text;
  text << in.rdbuf();
  CHECK(text.str() == "from config|from caller|$HOME;x"); // the argument reached it unexpanded
  std::filesystem::remove(out);
}

TEST_CASE("the exit status of the program is reported") {
  cairn::callback_config config;
  config.script.argv = {"false"};
  CHECK(config.run().wait() == 1);
}

TEST_CASE("a missing program is an error naming it") {
  cairn::callback_config config;
  config.script.argv = {"/nonexistent/cairn-callback"};
  CHECK_THROWS_WITH_AS((void)config.run(),
                       "callback: cannot start '/nonexistent/cairn-callback': No such file or directory", cairn::error);
  cairn::callback_config empty;
  CHECK_KIND((void)empty.run(), cairn::training_errc::callback);
}

namespace {

/// Whether process `pid` is gone (or a zombie nobody reaped yet: it runs no more).
bool gone(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), {});
  if (text.empty()) return true;
  auto state = text.find(") ");
  return state != std::string::npos && (text[state + 2] == 'Z' || text[state + 2] == 'X');
}

} // namespace

TEST_CASE("a callback past its timeout is stopped with everything it started; one that ends in time is not") {
  auto dir = std::filesystem::temp_directory_path() / ("cairn_callback_timeout_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto pid_file = dir / "pid";
  cairn::callback_config slow;
  // A script that starts a child of its own and waits for it, as an upload script would.
  slow.script.argv = {"sh", "-c", "sleep 300 & echo $! > " + pid_file.string() + "; wait"};
  slow.timeout = 0.3;
  cairn::running_callbacks running;
  running.start(slow, "save-1", 1, "checkpoint");
  cairn::callback_config quick;
  quick.script.argv = {"true"};
  running.start(quick, "save-2", 2, "checkpoint");
  CHECK(running.size() == 2);
  auto started = std::chrono::steady_clock::now();
  running.wait_all();
  CHECK(running.size() == 0);
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(60)); // not the child's 300 s
  std::ifstream in(pid_file);
  pid_t child = 0;
  in >> child;
  REQUIRE(child > 0);
  for (int i = 0; i < 100 && !gone(child); ++i) ::usleep(20'000);
  CHECK(gone(child));
  std::filesystem::remove_all(dir);
}

TEST_CASE("at most max_running callbacks run at once: the next waits for the oldest") {
  auto dir = std::filesystem::temp_directory_path() / ("cairn_callback_limit_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  cairn::callback_config config;
  config.script.argv = {"sh", "-c", "sleep 0.2; echo done >> " + (dir / "log").string()};
  config.max_running = 2;
  cairn::running_callbacks running;
  for (int i = 1; i <= 5; ++i) {
    running.start(config, "save", i, "checkpoint");
    CHECK(running.size() <= 2);
  }
  running.wait_all();
  std::ifstream in(dir / "log");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  CHECK(text == "done\ndone\ndone\ndone\ndone\n");
  std::filesystem::remove_all(dir);
}

TEST_CASE("timeout and max_running are checked") {
  CHECK_THROWS_WITH_AS(cairn::from_string<cairn::callback_config>(R"({"timeout": 0})"),
                       "1 config error:\n  timeout: must be > 0, got 0", cairn::config_error);
  CHECK_THROWS_WITH_AS(cairn::from_string<cairn::callback_config>(R"({"max_running": 0})"),
                       "1 config error:\n  max_running: must be > 0, got 0", cairn::config_error);
  CHECK_FALSE(cairn::from_string<cairn::callback_config>(R"({"timeout": null})").timeout);
}

TEST_CASE("a callback is told to stop when the program ends without waiting for it") {
  auto dir = std::filesystem::temp_directory_path() / ("cairn_callback_orphan_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto pid_file = dir / "pid";
  auto program = ::fork();
  REQUIRE(program >= 0);
  if (program == 0) { // a trainer that fails while its callback runs
    cairn::callback_config config;
    config.script.argv = {"sh", "-c", "echo $$ > " + pid_file.string() + "; exec sleep 300"};
    cairn::running_callbacks running;
    running.start(config, "save", 1, "checkpoint");
    for (int i = 0; i < 500 && !std::filesystem::exists(pid_file); ++i) ::usleep(10'000);
    ::_exit(1);
  }
  int status = 0;
  ::waitpid(program, &status, 0);
  std::ifstream in(pid_file);
  pid_t callback = 0;
  in >> callback;
  REQUIRE(callback > 0);
  for (int i = 0; i < 250 && !gone(callback); ++i) ::usleep(20'000);
  CHECK(gone(callback));
  std::filesystem::remove_all(dir);
}
