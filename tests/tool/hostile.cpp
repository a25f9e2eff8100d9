// The `cairn` tool over a corpus of hostile inputs: loops of links, names too long, FIFOs,
// devices, sparse files of gigabytes, files where directories belong. Every subcommand ends
// with a message naming the path and exit status 1 or 2, never a signal or an abort, and none
// grows past 300 MiB.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <spawn.h>
#include <string>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "io/temp_dir.hpp"

extern char** environ;

namespace {

namespace fs = std::filesystem;

struct outcome {
  int status = 0;       ///< exit status, or 128 + the signal
  long max_rss_kib = 0; ///< the tool's peak resident memory
  std::string output;   ///< stdout and stderr
};

/// Runs `cairn ARGS`, with stdin from /dev/null (a FIFO must not wait for the terminal).
outcome tool(std::vector<std::string> args, fs::path const& log) {
  std::string program = CAIRN_TOOL;
  std::vector<char*> argv{program.data()};
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = 0;
  REQUIRE(::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ) == 0);
  posix_spawn_file_actions_destroy(&actions);
  // A tool blocked on a FIFO would never end: give it a minute, then kill it (a failure).
  int status = 0;
  rusage usage{};
  for (int waited = 0; ::wait4(pid, &status, WNOHANG, &usage) == 0; ++waited) {
    if (waited == 6000) ::kill(pid, SIGKILL);
    ::usleep(10'000);
  }
  std::ifstream in(log);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), usage.ru_maxrss,
          std::string(std::istreambuf_iterator<char>(in), {})};
}

void write_text(fs::path const& path, std::string const& text) { std::ofstream(path, std::ios::binary) << text; }

/// A copy of the test data's distributed checkpoint.
fs::path distributed(fs::path const& where) {
  fs::copy(fs::path(CAIRN_TEST_DATA_DIR) / "data" / "checkpoints" / "distributed_v2", where);
  return where;
}
fs::path state_dict(fs::path const& where) {
  fs::copy(fs::path(CAIRN_TEST_DATA_DIR) / "data" / "checkpoints" / "state_dict_v2", where);
  return where;
}

void fifo(fs::path const& path) {
  fs::remove(path);
  REQUIRE(::mkfifo(path.c_str(), 0644) == 0);
}

void sparse(fs::path const& path, std::string const& head = "{") {
  write_text(path, head);
  fs::resize_file(path, std::uint64_t{8} << 30);
}

struct hostile {
  std::string name;
  fs::path path;
};

} // namespace

TEST_CASE("every subcommand refuses hostile inputs with a message naming the path, never a signal or 300 MiB") {
  temp_dir tmp;
  std::vector<hostile> corpus;
  auto add = [&](std::string name, fs::path path) { corpus.push_back({std::move(name), std::move(path)}); };

  fs::create_symlink("loop", tmp / "loop");
  add("a link to itself", tmp / "loop");
  add("a name of 300 characters", tmp / std::string(300, 'n'));
  {
    auto d = distributed(tmp / "metadata-loop");
    fs::remove(d / "metadata.json");
    fs::create_symlink("metadata.json", d / "metadata.json");
    add("metadata.json a link to itself", d);
  }
  {
    auto d = distributed(tmp / "metadata-fifo");
    fifo(d / "metadata.json");
    add("metadata.json a FIFO", d);
  }
  {
    auto d = distributed(tmp / "rank-fifo");
    fifo(d / "rank_1.safetensors");
    add("a rank file that is a FIFO", d);
  }
  {
    auto d = distributed(tmp / "metadata-zero");
    fs::remove(d / "metadata.json");
    fs::create_symlink("/dev/zero", d / "metadata.json");
    add("metadata.json a link to /dev/zero", d);
  }
  {
    auto d = distributed(tmp / "rank-zero");
    fs::remove(d / "rank_0.safetensors");
    fs::create_symlink("/dev/zero", d / "rank_0.safetensors");
    add("a rank file linked to /dev/zero", d);
  }
  {
    auto d = distributed(tmp / "metadata-sparse");
    sparse(d / "metadata.json");
    add("metadata.json of 8 GiB (sparse)", d);
  }
  {
    auto d = distributed(tmp / "metadata-sparse-under-limit");
    write_text(d / "metadata.json", "{");
    fs::resize_file(d / "metadata.json",
                    std::uint64_t{900} << 20); // under the 1 GiB limit: read, until its first bad byte
    add("metadata.json of 900 MiB (sparse: zeros)", d);
  }
  {
    auto d = state_dict(tmp / "index-sparse-under-limit");
    write_text(d / "state_dict.safetensors.index.json", "{\"weight_map\": {");
    fs::resize_file(d / "state_dict.safetensors.index.json", std::uint64_t{1000} << 20);
    add("a state_dict index of 1000 MiB (sparse: zeros)", d);
  }
  {
    // A parameter name of 400 MiB of letters (valid JSON): refused at 1 MiB of it, never held.
    auto d = distributed(tmp / "metadata-long-name");
    std::ifstream in(d / "metadata.json");
    std::string text{std::istreambuf_iterator<char>(in), {}};
    auto at = text.find("\"name\": \"") + 9;
    std::ofstream out(d / "metadata.json", std::ios::binary | std::ios::trunc);
    out << text.substr(0, at);
    std::string mebibyte(std::size_t{1} << 20, 'n');
    for (int i = 0; i < 400; ++i) out << mebibyte;
    out << text.substr(at);
    add("metadata.json naming a parameter with 400 MiB", d);
  }
  {
    auto d = state_dict(tmp / "index-long-key");
    std::ofstream out(d / "state_dict.safetensors.index.json", std::ios::binary | std::ios::trunc);
    out << "{\"weight_map\": {\"";
    std::string mebibyte(std::size_t{1} << 20, 'k');
    for (int i = 0; i < 100; ++i) out << mebibyte;
    out << "\": \"state_dict_0.safetensors\"}}";
    add("a state_dict index with a key of 100 MiB", d);
  }
  {
    auto d = distributed(tmp / "rank-sparse");
    std::string head(8, '\0');
    head[4] = 1; // a header length of 2^32 bytes
    sparse(d / "rank_0.safetensors", head);
    add("a rank file of 8 GiB (sparse) claiming a 4 GiB header", d);
  }
  {
    auto d = distributed(tmp / "rank-directory");
    fs::remove(d / "rank_1.safetensors");
    fs::create_directory(d / "rank_1.safetensors");
    add("a rank file that is a directory", d);
  }
  {
    auto d = state_dict(tmp / "index-fifo");
    fifo(d / "state_dict.safetensors.index.json");
    add("a state_dict index that is a FIFO", d);
  }
  {
    auto d = state_dict(tmp / "index-zero");
    fs::remove(d / "state_dict.safetensors.index.json");
    fs::create_symlink("/dev/zero", d / "state_dict.safetensors.index.json");
    add("a state_dict index linked to /dev/zero", d);
  }
  {
    auto d = state_dict(tmp / "index-sparse");
    sparse(d / "state_dict.safetensors.index.json");
    add("a state_dict index of 8 GiB (sparse)", d);
  }
  {
    auto save = tmp / "experiment" / "checkpoints" / "4";
    fs::create_directories(save.parent_path());
    distributed(save);
    sparse(save / "complete.json");
    add("a completion marker of 8 GiB (sparse)", save);
  }
  {
    auto d = tmp / "hf-fifo";
    fs::create_directories(d);
    fifo(d / "config.json");
    add("a Hugging Face config.json that is a FIFO", d);
  }
  {
    auto d = tmp / "hf-index-zero";
    fs::create_directories(d);
    write_text(d / "config.json", R"({"model_type": "llama"})");
    fs::create_symlink("/dev/zero", d / "model.safetensors.index.json");
    add("a Hugging Face index linked to /dev/zero", d);
  }
  if (::geteuid() != 0) { // root reads whatever the permissions say
    auto d = distributed(tmp / "unreadable");
    fs::permissions(d / "rank_0.safetensors", fs::perms::none);
    add("a rank file without read permission", d);
    auto closed = distributed(tmp / "closed");
    fs::permissions(closed, fs::perms::owner_write);
    add("a directory without read permission", closed);
  }

  for (auto const& h : corpus) {
    for (std::string command : {"inspect", "verify", "convert"}) {
      CAPTURE(h.name);
      CAPTURE(command);
      std::vector<std::string> args{command, h.path.string()};
      if (command == "convert")
        args = {"convert", "input.path=" + h.path.string(), "input.format=distributed",
                "output.path=" + (tmp / "out").string(), "output.format=state_dict"};
      auto r = tool(args, tmp / "log");
      CHECK(r.status > 0);
      CHECK(r.status < 128);
      CHECK(r.max_rss_kib < 300 * 1024);
      // The message names the path (its last part: some messages give it relative to a link).
      CHECK_MESSAGE(r.output.find(h.path.filename().string().substr(0, 40)) != std::string::npos, r.output);
      CHECK_FALSE(fs::exists(tmp / "out"));
    }
  }
  if (::geteuid() != 0) {
    fs::permissions(tmp / "closed", fs::perms::owner_all);
    fs::permissions(tmp / "unreadable" / "rank_0.safetensors", fs::perms::owner_all);
  }
}

TEST_CASE("convert never writes into a device, a file, or a name too long, and says which") {
  temp_dir tmp;
  auto input = distributed(tmp / "in");
  for (std::string out : {std::string("/dev/null"), (tmp / "file").string(), (tmp / std::string(300, 'o')).string()}) {
    CAPTURE(out);
    write_text(tmp / "file", "x");
    auto r = tool({"convert", "input.path=" + input.string(), "input.format=distributed", "output.path=" + out,
                   "output.format=state_dict"},
                  tmp / "log");
    CHECK(r.status > 0);
    CHECK(r.status < 128);
    CHECK(r.output.find(out.substr(0, 40)) != std::string::npos);
  }
  CHECK(fs::exists("/dev/null"));
}

TEST_CASE("check-storage reports what the filesystem guarantees, each property on its own line") {
  temp_dir tmp;
  auto r = tool({"check-storage", (tmp / "run").string()}, tmp / "log");
  CHECK(r.status == 0);
  for (auto line :
       {"holds  fsync of a file", "holds  fsync of a directory", "holds  rename replaces a file atomically",
        "holds  rename of a directory", "holds  flock excludes a second process",
        "holds  read after write across processes", "holds  mmap reads what was written", "holds  free space"})
    CHECK_MESSAGE(r.output.find(line) != std::string::npos, r.output);
  // It leaves nothing behind, not even the directory it was given when it had to make it.
  CHECK_FALSE(fs::exists(tmp / "run"));
  fs::create_directories(tmp / "kept");
  CHECK(tool({"check-storage", (tmp / "kept").string()}, tmp / "log3").status == 0);
  CHECK(fs::is_empty(tmp / "kept"));
  auto bad = tool({"check-storage", "/dev/null/x"}, tmp / "log2");
  CHECK(bad.status == 1);
  CHECK(bad.output.find("/dev/null/x") != std::string::npos);
  // Missing parents are made for the check and removed after it, the deepest first; a parent
  // that holds something else afterwards stays.
  CHECK(tool({"check-storage", (tmp / "a" / "b" / "c").string() + "/"}, tmp / "log4").status == 0);
  CHECK_FALSE(fs::exists(tmp / "a"));
  CHECK(tool({"check-storage", (tmp / "a" / "b" / ".." / "c").string()}, tmp / "log4").status == 0);
  CHECK_FALSE(fs::exists(tmp / "a"));
  // --help is help, not a directory named --help; another option is refused.
  auto was = fs::current_path();
  fs::current_path(tmp.path);
  auto help = tool({"check-storage", "--help"}, tmp / "log5");
  CHECK(help.status == 0);
  CHECK(help.output.find("usage: cairn check-storage DIR") != std::string::npos);
  auto option = tool({"check-storage", "--fast"}, tmp / "log6");
  CHECK(option.status == 2);
  CHECK(option.output.find("unknown option '--fast'") != std::string::npos);
  fs::current_path(was);
  CHECK_FALSE(fs::exists(tmp / "--help"));
  CHECK_FALSE(fs::exists(tmp / "--fast"));
}

TEST_CASE("names from files reach the terminal escaped: no escape sequence, no forged line") {
  temp_dir tmp;
  // A safetensors file written by hand: a tensor and a metadata value whose names hold ESC, a
  // carriage return and a line break.
  std::string header = R"({"__metadata__":{"note":"a\u001b]0;title\u0007b","csi":"c\u009b2J"},")" +
                       std::string("w\\u001b[2J\\rforged\\nline") +
                       R"(":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  while (header.size() % 8 != 0) header += ' ';
  std::string file(8, '\0');
  auto length = static_cast<std::uint64_t>(header.size());
  for (int i = 0; i < 8; ++i) file[static_cast<std::size_t>(i)] = static_cast<char>((length >> (8 * i)) & 0xff);
  file += header + std::string(4, '\0');
  write_text(tmp / "odd.safetensors", file);
  auto r = tool({"inspect", (tmp / "odd.safetensors").string()}, tmp / "log");
  CHECK(r.output.find('\x1b') == std::string::npos);
  CHECK(r.output.find('\r') == std::string::npos);
  CHECK(r.output.find('\x07') == std::string::npos);
  CHECK_MESSAGE(r.output.find("w\\x1b[2J\\x0dforged\\x0aline") != std::string::npos, r.output);
  CHECK(r.output.find("\nline") == std::string::npos);
  CHECK_MESSAGE(r.output.find("a\\x1b]0;title\\x07b") != std::string::npos, r.output);
  // A C1 control (CSI, U+009B: two bytes in UTF-8) too.
  CHECK(r.output.find("\xc2\x9b") == std::string::npos);
  CHECK_MESSAGE(r.output.find("c\\xc2\\x9b2J") != std::string::npos, r.output);
  // In an error message too: a tensor whose bytes do not fit its shape, its name forging a line.
  std::string bad = R"({"a\nforged: ok":{"dtype":"F32","shape":[4],"data_offsets":[0,8]}})";
  while (bad.size() % 8 != 0) bad += ' ';
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i)
    bytes[static_cast<std::size_t>(i)] = static_cast<char>((static_cast<std::uint64_t>(bad.size()) >> (8 * i)) & 0xff);
  bytes += bad + std::string(8, '\0');
  write_text(tmp / "forged.safetensors", bytes);
  auto v = tool({"verify", (tmp / "forged.safetensors").string()}, tmp / "log2");
  CHECK(v.status != 0);
  CHECK_MESSAGE(v.output.find("\nforged: ok") == std::string::npos, v.output);
  CHECK_MESSAGE(v.output.find("a\\x0aforged: ok") != std::string::npos, v.output);
}
