// Saves damaged the ways files get damaged, or forged: whatever a load refuses, `verify` refuses
// too; metadata that lies about sizes or types never makes a reader touch bytes outside the
// tensor it names; conversions never write into another save or leave half an output; loads
// into any layout put every element where it belongs, checked value by value.
#include <cairn/checkpoint/convert.hpp>
#include <cairn/checkpoint/directory.hpp>
#include <cairn/checkpoint/format_files.hpp>
#include <cairn/comm/single_process.hpp>
#include <cairn/config/json.hpp>
#include <cairn/io/index.hpp>
#include <cairn/io/safetensors_writer.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "../io/temp_dir.hpp"
#include "model.hpp"

namespace {

using test_model::scheme;
using enum cairn::checkpoint_format;
namespace fs = std::filesystem;

cairn::comm::single_process comm;

cairn::checkpoint_save_config save_config(fs::path path, cairn::checkpoint_format format) {
  cairn::checkpoint_save_config config;
  config.path = std::move(path);
  config.format = format;
  config.optimizer_state = true;
  config.parameters_per_file = std::uint64_t{1} << 20;
  return config;
}

cairn::checkpoint_load_config load_config(fs::path path, cairn::checkpoint_format format) {
  cairn::checkpoint_load_config config;
  config.path = std::move(path);
  config.format = format;
  config.optimizer_state = true;
  return config;
}

/// Why loading `path` into a fresh state fails, or "loaded".
std::string load_error(fs::path const& path, cairn::checkpoint_format format) {
  auto state = test_model::make(scheme::dim, 0, 1, false);
  try {
    cairn::load_checkpoint(state, comm, load_config(path, format));
  } catch (cairn::error const& e) {
    return (e.kind() ? "" : "without a kind: ") + std::string(e.what());
  } catch (std::exception const& e) {
    return "not a cairn::error: " + std::string(e.what());
  }
  return test_model::mismatches(state) == 0 ? "loaded" : "loaded wrong values";
}

std::string read_bytes(fs::path const& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_bytes(fs::path const& path, std::string const& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

void flip_byte(fs::path const& file, std::uint64_t from_end) {
  auto bytes = read_bytes(file);
  bytes[bytes.size() - from_end] = static_cast<char>(bytes[bytes.size() - from_end] ^ 0x5a);
  write_bytes(file, bytes);
}

boost::json::value read_json(fs::path const& path) { return cairn::read_json_file(path); }
void write_json(fs::path const& path, boost::json::value const& value) {
  write_bytes(path, boost::json::serialize(value));
}

/// Rewrites the safetensors file `path` through `edit`, which may drop or change tensors; the
/// bytes and the metadata (checksums, identity) of every tensor it keeps are kept.
void rewrite(fs::path const& path, std::function<bool(cairn::io::tensor_info&)> const& edit,
             bool keep_identity = true) {
  auto copy = path.parent_path() / "rewritten.tmp";
  {
    cairn::io::safetensors_file file(path);
    cairn::io::safetensors_writer writer(copy, cairn::io::checksums::skip);
    for (auto const& [key, value] : file.metadata())
      if (keep_identity || (key != cairn::formats::save_id_key && key != cairn::formats::rank_key &&
                            key != cairn::formats::world_size_key && key != cairn::formats::layout_key))
        writer.set_metadata(key, value);
    for (auto t : file.tensors()) {
      auto bytes = file.bytes(t);
      if (edit(t)) writer.add(t.name, t.dtype, t.shape, bytes);
    }
    writer.write();
  }
  fs::rename(copy, path);
}

/// The conversion of the distributed checkpoint `in` to a state_dict one at `out`.
cairn::convert_config to_state_dict(fs::path in, fs::path out, bool replace = false) {
  cairn::convert_config config;
  config.input.path = std::move(in);
  config.input.format = distributed;
  config.output.path = std::move(out);
  config.output.format = state_dict;
  config.replace = replace;
  return config;
}

/// A pristine save of the test model in `format` at `path`.
void save(fs::path const& path, cairn::checkpoint_format format) {
  auto state = test_model::make(scheme::dim, 0, 1, true);
  cairn::save_checkpoint(state, comm, save_config(path, format));
}

struct damage {
  std::string name;
  std::function<void(fs::path const&)> apply;
};

std::vector<damage> distributed_damages(fs::path const& other_save) {
  auto rank0 = [](fs::path const& p) { return p / "rank_0.safetensors"; };
  auto metadata = [](fs::path const& p) { return p / "metadata.json"; };
  // Metadata of version 1 (before save identities) is trusted for its sizes alone; its files
  // recorded no identity either (one that does is refused as another save's: see below).
  auto as_version_1 = [=](boost::json::value& doc, fs::path const& p) {
    doc.as_object()["version"] = "1";
    doc.as_object().erase("save_id");
    rewrite(
        rank0(p), [](cairn::io::tensor_info&) { return true; }, false);
  };
  return {
      {"a byte of the last tensor flipped", [=](fs::path const& p) { flip_byte(rank0(p), 1); }},
      {"a byte of the first tensor flipped",
       [=](fs::path const& p) {
         cairn::io::safetensors_file file(rank0(p));
         auto first = file.tensors().front();
         auto size = fs::file_size(rank0(p));
         auto offset = size - (file.tensors().back().end - first.begin);
         flip_byte(rank0(p), size - offset);
       }},
      {"the rank file one byte short",
       [=](fs::path const& p) { fs::resize_file(rank0(p), fs::file_size(rank0(p)) - 1); }},
      {"the rank file missing", [=](fs::path const& p) { fs::remove(rank0(p)); }},
      {"the rank file of another save",
       [=](fs::path const& p) { fs::copy_file(rank0(other_save), rank0(p), fs::copy_options::overwrite_existing); }},
      {"a tensor missing from the rank file",
       [=](fs::path const& p) {
         rewrite(rank0(p), [](cairn::io::tensor_info& t) { return t.name != "norm/exp_avg"; });
       }},
      {"a tensor's dtype changed in the rank file (its bytes and checksum kept)",
       [=](fs::path const& p) {
         rewrite(rank0(p), [](cairn::io::tensor_info& t) {
           if (t.name == "embedding/weights") t.dtype = cairn::io::dtype::I32;
           return true;
         });
       }},
      {"metadata.json not JSON", [=](fs::path const& p) { write_bytes(metadata(p), "{\"format\": "); }},
      {"metadata.json a FIFO",
       [=](fs::path const& p) {
         fs::remove(metadata(p));
         REQUIRE(::mkfifo(metadata(p).c_str(), 0644) == 0);
       }},
      {"metadata.json 8 GiB (sparse)",
       [=](fs::path const& p) { fs::resize_file(metadata(p), std::uint64_t{8} << 30); }},
      {"metadata.json with a key given twice",
       [=](fs::path const& p) {
         auto text = read_bytes(metadata(p));
         write_bytes(metadata(p), "{\"format\": \"state_dict\", " + text.substr(text.find('{') + 1));
       }},
      {"metadata.json without its save_id, and the rank file of another save",
       [=](fs::path const& p) {
         fs::copy_file(rank0(other_save), rank0(p), fs::copy_options::overwrite_existing);
         auto doc = read_json(metadata(p));
         doc.as_object().erase("save_id");
         write_json(metadata(p), doc);
       }},
      {"metadata.json as of version 1 (no save_id) over a rank file that records its save",
       [=](fs::path const& p) {
         auto doc = read_json(metadata(p));
         doc.as_object()["version"] = "1";
         doc.as_object().erase("save_id");
         write_json(metadata(p), doc);
       }},
      {"metadata (version 1) claiming more elements than the file holds",
       [=](fs::path const& p) {
         auto doc = read_json(metadata(p));
         as_version_1(doc, p);
         auto& embedding = doc.at("ranks").at(0).at("parameters").at(0).as_object();
         REQUIRE(embedding.at("name") == "embedding");
         embedding["shape"] = boost::json::array{12, 4};
         embedding["shard"].as_object()["lengths"] = boost::json::array{12, 4};
         write_json(metadata(p), doc);
       }},
      {"metadata (version 1) claiming another dtype",
       [=](fs::path const& p) {
         auto doc = read_json(metadata(p));
         as_version_1(doc, p);
         doc.at("ranks").at(0).at("parameters").at(1).as_object()["dtype"] = "F32"; // layer.weight is F64
         write_json(metadata(p), doc);
       }},
      {"metadata (version 1) claiming 2^40 elements",
       [=](fs::path const& p) {
         auto doc = read_json(metadata(p));
         as_version_1(doc, p);
         auto& embedding = doc.at("ranks").at(0).at("parameters").at(0).as_object();
         embedding["shape"] = boost::json::array{std::uint64_t{1} << 38, 4};
         embedding["shard"].as_object()["lengths"] = boost::json::array{std::uint64_t{1} << 38, 4};
         write_json(metadata(p), doc);
       }},
  };
}

std::vector<damage> state_dict_damages(fs::path const& other_save) {
  auto index = [](fs::path const& p) { return p / "state_dict.safetensors.index.json"; };
  auto file0 = [](fs::path const& p) { return p / "state_dict_0.safetensors"; };
  auto parameter = [](boost::json::value& doc, std::string const& name) -> boost::json::object& {
    for (auto& p : doc.at("metadata").at("parameters").as_array())
      if (p.at("name") == name.c_str()) return p.as_object();
    FAIL("no parameter " << name);
    throw std::logic_error("unreachable");
  };
  return {
      {"a byte of the last tensor flipped", [=](fs::path const& p) { flip_byte(file0(p), 1); }},
      {"the file one byte short", [=](fs::path const& p) { fs::resize_file(file0(p), fs::file_size(file0(p)) - 1); }},
      {"the file missing", [=](fs::path const& p) { fs::remove(file0(p)); }},
      {"the file of another save (same tensors)",
       [=](fs::path const& p) { fs::copy_file(file0(other_save), file0(p), fs::copy_options::overwrite_existing); }},
      {"the index giving a parameter another shape",
       [=](fs::path const& p) {
         auto doc = read_json(index(p));
         auto& embedding = parameter(doc, "embedding");
         embedding["shape"] = boost::json::array{4, 10};
         embedding["shard"].as_object()["lengths"] = boost::json::array{4, 10};
         write_json(index(p), doc);
       }},
      {"the index giving a parameter another dtype",
       [=](fs::path const& p) {
         auto doc = read_json(index(p));
         parameter(doc, "layer.weight")["dtype"] = "F32";
         write_json(index(p), doc);
       }},
      {"a parameter and its weight_map entries gone from the index",
       [=](fs::path const& p) {
         auto doc = read_json(index(p));
         auto& parameters = doc.at("metadata").at("parameters").as_array();
         parameters.erase(std::remove_if(parameters.begin(), parameters.end(),
                                         [](boost::json::value const& v) { return v.at("name") == "norm"; }),
                          parameters.end());
         auto& map = doc.at("weight_map").as_object();
         for (auto shard : {"weights", "exp_avg", "exp_avg_sq"}) map.erase(std::string("norm/") + shard);
         write_json(index(p), doc);
       }},
      {"a weight_map entry naming a file without the tensor",
       [=](fs::path const& p) {
         auto doc = read_json(index(p));
         doc.at("weight_map").as_object()["norm/weights"] = "state_dict_9.safetensors";
         write_json(index(p), doc);
       }},
      {"the index not JSON", [=](fs::path const& p) { write_bytes(index(p), "{\"weight_map\": "); }},
      {"the index a FIFO",
       [=](fs::path const& p) {
         fs::remove(index(p));
         REQUIRE(::mkfifo(index(p).c_str(), 0644) == 0);
       }},
      {"a tensor missing from the file",
       [=](fs::path const& p) {
         rewrite(file0(p), [](cairn::io::tensor_info& t) { return t.name != "steps/exp_avg"; });
       }},
  };
}

} // namespace

TEST_CASE("verify refuses every damaged save that a load refuses, naming a file") {
  temp_dir dir;
  for (auto format : {distributed, state_dict}) {
    auto pristine = dir / (std::string(cairn::format_name(format)) + "-pristine");
    auto other = dir / (std::string(cairn::format_name(format)) + "-other");
    save(pristine, format);
    save(other, format);
    REQUIRE(load_error(pristine, format) == "loaded");
    REQUIRE(cairn::verify_checkpoint(pristine).ok());
    auto damages = format == distributed ? distributed_damages(other) : state_dict_damages(other);
    int n = 0;
    for (auto const& d : damages) {
      CAPTURE(cairn::format_name(format));
      CAPTURE(d.name);
      auto path = dir / (std::string(cairn::format_name(format)) + "-" + std::to_string(n++));
      fs::copy(pristine, path);
      d.apply(path);
      auto load = load_error(path, format);
      auto report = cairn::verify_checkpoint(path);
      CHECK(load != "loaded");
      CHECK(load != "loaded wrong values");
      CHECK(load.rfind("without a kind: ", 0) != 0); // a program can tell a refusal's kind
      CHECK(load.rfind("not a cairn::error: ", 0) != 0);
      CHECK_FALSE(report.ok());
      if (!report.ok()) CHECK(report.problems.front().find(path.string()) != std::string::npos);
      // A conversion reads what a load reads: refused too, and nothing written.
      cairn::convert_config convert;
      convert.input.path = path;
      convert.input.format = format;
      convert.output.path = path.string() + "-converted";
      convert.output.format = format == distributed ? state_dict : distributed;
      CHECK_THROWS(cairn::convert_checkpoint(convert));
      CHECK_FALSE(fs::exists(convert.output.path));
    }
  }
}

TEST_CASE("sizes and types in metadata are checked against the file's tensors before any byte is read") {
  temp_dir dir;
  auto path = dir / "d";
  save(path, distributed);
  auto other = dir / "other";
  save(other, distributed);
  auto damages = distributed_damages(other);
  auto apply = [&](std::string const& name, fs::path const& target) {
    fs::copy(path, target);
    for (auto const& d : damages)
      if (d.name == name) return d.apply(target);
    FAIL("no damage " << name);
  };

  SUBCASE("convert refuses metadata claiming more elements, naming the file, and writes nothing") {
    apply("metadata (version 1) claiming more elements than the file holds", dir / "more");
    auto config = to_state_dict(dir / "more", dir / "out");
    CHECK_THROWS_WITH_AS(cairn::convert_checkpoint(config),
                         ((dir / "more" / "rank_0.safetensors").string() +
                          ": tensor 'embedding/weights' holds 40 elements, the checkpoint's metadata says 48")
                             .c_str(),
                         cairn::io::io_error);
    CHECK_FALSE(fs::exists(dir / "out"));
    for (auto const& entry : fs::directory_iterator(dir.path))
      CHECK(entry.path().filename().string().find(".partial-") == std::string::npos);
  }
  SUBCASE("a claimed size of 2^40 elements is an error, not an allocation") {
    apply("metadata (version 1) claiming 2^40 elements", dir / "huge");
    auto config = to_state_dict(dir / "huge", dir / "out");
    CHECK_THROWS_WITH_AS(cairn::convert_checkpoint(config), doctest::Contains("the checkpoint's metadata says"),
                         cairn::io::io_error);
    CHECK_FALSE(cairn::verify_checkpoint(dir / "huge").ok());
  }
  SUBCASE("a model of the claimed shape is not initialised from the neighbouring tensor's bytes") {
    // As a pretrained load would: the model agrees with the lying metadata, so only the file
    // can tell.
    apply("metadata (version 1) claiming more elements than the file holds", dir / "more");
    auto state = test_model::make(scheme::dim, 0, 1, false);
    state.parameters[0].layout.shape = {12, 4};
    state.parameters[0].layout.shard = cairn::shard_layout::whole({12, 4});
    for (auto& t : state.parameters[0].shards) t = at::zeros({48}, at::kFloat);
    CHECK_THROWS_WITH_AS(cairn::load_checkpoint(state, comm, load_config(dir / "more", distributed)),
                         doctest::Contains("tensor 'embedding/weights' holds 40 elements, the checkpoint's metadata "
                                           "says 48"),
                         cairn::checkpoint_error);
  }
  SUBCASE("convert refuses a dtype the metadata does not give") {
    apply("metadata (version 1) claiming another dtype", dir / "dtype");
    auto config = to_state_dict(dir / "dtype", dir / "out");
    CHECK_THROWS_WITH_AS(cairn::convert_checkpoint(config),
                         doctest::Contains("tensor 'layer.weight/weights' is stored as F64, the checkpoint's metadata "
                                           "says F32"),
                         cairn::io::io_error);
  }
}

TEST_CASE("a state_dict file of another save is refused by load and verify") {
  // Two saves of the same model have the same tensors, shapes and sizes: only the save identity
  // each file records tells them apart.
  temp_dir dir;
  save(dir / "a", state_dict);
  save(dir / "b", state_dict);
  fs::copy_file(dir / "b" / "state_dict_0.safetensors", dir / "a" / "state_dict_0.safetensors",
                fs::copy_options::overwrite_existing);
  CHECK(load_error(dir / "a", state_dict).find("belongs to another save") != std::string::npos);
  auto report = cairn::verify_checkpoint(dir / "a");
  REQUIRE_FALSE(report.ok());
  CHECK(report.problems.front().find("belongs to another save") != std::string::npos);
}

TEST_CASE("verify checks everything a load reads, for each format") {
  temp_dir dir;
  SUBCASE("a corrupt last tensor of a file is found (every tensor is checked)") {
    save(dir / "d", distributed);
    cairn::io::safetensors_file before(dir / "d" / "rank_0.safetensors");
    auto last = before.tensors().back().name;
    flip_byte(dir / "d" / "rank_0.safetensors", 1);
    auto report = cairn::verify_checkpoint(dir / "d");
    REQUIRE(report.problems.size() == 1);
    CHECK(report.problems[0] == (dir / "d" / "rank_0.safetensors").string() + ": tensor '" + last +
                                    "' is corrupt: its checksum does not match");
  }
  SUBCASE("the state_dict index: shapes, parameters missing with their entries, stray tensors") {
    save(dir / "s", state_dict);
    for (auto const& d : state_dict_damages(dir / "s")) {
      if (d.name != "a parameter and its weight_map entries gone from the index") continue;
      d.apply(dir / "s");
    }
    auto report = cairn::verify_checkpoint(dir / "s");
    REQUIRE(report.problems.size() == 3);
    for (auto shard : {"weights", "exp_avg", "exp_avg_sq"})
      CHECK(std::find(report.problems.begin(), report.problems.end(),
                      (dir / "s" / "state_dict_0.safetensors").string() + ": holds 'norm/" + shard +
                          "', which the index does not map to it") != report.problems.end());
  }
}

TEST_CASE("conversions are written aside and renamed into place, never over another save") {
  temp_dir dir;
  save(dir / "in", distributed);
  auto convert = [&](fs::path const& out, bool replace) {
    return cairn::convert_checkpoint(to_state_dict(dir / "in", out, replace));
  };
  auto no_leftovers = [&] {
    for (auto const& entry : fs::recursive_directory_iterator(dir.path)) {
      auto name = entry.path().filename().string();
      CHECK_MESSAGE(name.find(".partial-") == std::string::npos, entry.path());
      CHECK_MESSAGE(name.find(".replaced") == std::string::npos, entry.path());
    }
  };

  SUBCASE("onto another complete checkpoint: refused, which stays as it was") {
    save(dir / "kept", distributed);
    auto before = read_bytes(dir / "kept" / "rank_0.safetensors");
    CHECK_THROWS_WITH_AS(convert(dir / "kept", false), doctest::Contains("is not empty"), cairn::config_error);
    CHECK(read_bytes(dir / "kept" / "rank_0.safetensors") == before);
    CHECK(cairn::verify_checkpoint(dir / "kept").ok());
    no_leftovers();
  }
  SUBCASE("with replace=true an earlier conversion is replaced whole: none of its files stay") {
    convert(dir / "out", false);
    // A file of an earlier conversion that had more of them.
    write_bytes(dir / "out" / "state_dict_7.safetensors", "{}");
    convert(dir / "out", true);
    CHECK_FALSE(fs::exists(dir / "out" / "state_dict_7.safetensors"));
    CHECK(cairn::verify_checkpoint(dir / "out").ok());
    CHECK(load_error(dir / "out", state_dict) == "loaded");
    no_leftovers();
  }
  SUBCASE("a save of an experiment is never replaced, even with replace=true") {
    cairn::save_directory saves(dir / "experiment" / "checkpoints");
    auto staging = saves.begin(5);
    save(staging, distributed);
    saves.commit(5);
    auto before = read_bytes(saves.path(5) / "rank_0.safetensors");
    CHECK_THROWS_WITH_AS(convert(saves.path(5), true), doctest::Contains("is a save of an experiment"),
                         cairn::config_error);
    CHECK(read_bytes(saves.path(5) / "rank_0.safetensors") == before);
    CHECK_FALSE(saves.problem(5));
    no_leftovers();
  }
  SUBCASE("replace=true replaces an earlier conversion only: never an experiment directory or what holds one") {
    // An experiment directory (its lock, its checkpoints/) or any directory above one.
    cairn::save_directory saves(dir / "runs" / "live" / "checkpoints");
    save(saves.begin(8), distributed);
    saves.commit(8);
    write_bytes(dir / "runs" / "live" / ".cairn.lock", "host h, pid 1\n");
    for (auto target : {dir / "runs" / "live", dir / "runs"}) {
      CAPTURE(target);
      CHECK_THROWS_WITH_AS(convert(target, true), doctest::Contains("replace=true replaces an earlier conversion only"),
                           cairn::config_error);
    }
    CHECK(saves.complete() == std::vector<std::int64_t>{8});
    CHECK(fs::exists(dir / "runs" / "live" / ".cairn.lock"));
    no_leftovers();
  }
  SUBCASE("replace=true replaces only the files a conversion writes: not a Hugging Face directory, not a README") {
    convert(dir / "hf", false);
    write_bytes(dir / "hf" / "config.json", "{}");
    CHECK_THROWS_WITH_AS(convert(dir / "hf", true), doctest::Contains("holds config.json, which no conversion writes"),
                         cairn::config_error);
    CHECK(fs::exists(dir / "hf" / "config.json"));
    // What a failed conversion left (its files, no index) is replaced.
    fs::remove(dir / "hf" / "config.json");
    fs::remove(cairn::formats::state_dict_index(dir / "hf"));
    convert(dir / "hf", true);
    CHECK(cairn::verify_checkpoint(dir / "hf").ok());
    no_leftovers();
  }
  SUBCASE("never where an experiment keeps its saves, even a name no save has yet") {
    cairn::save_directory saves(dir / "experiment" / "checkpoints");
    save(saves.begin(8), distributed);
    saves.commit(8);
    for (auto name : {"99", ".partial-20", ".replaced-8"}) {
      CAPTURE(name);
      CHECK_THROWS_WITH_AS(convert(dir / "experiment" / "checkpoints" / name, false),
                           doctest::Contains("is where an experiment keeps its saves"), cairn::config_error);
    }
    CHECK_THROWS_WITH_AS(convert(dir / "experiment" / "export" / "12", false),
                         doctest::Contains("is where an experiment keeps its saves"), cairn::config_error);
    // Nor inside a save: retention would remove it with the save.
    CHECK_THROWS_WITH_AS(convert(dir / "experiment" / "checkpoints" / "8" / "inside", false),
                         doctest::Contains("is where an experiment keeps its saves"), cairn::config_error);
    // A folder named export elsewhere, holding a name that is not a save's, is fine.
    convert(dir / "experiment" / "export" / "hf-copy", false);
    CHECK(cairn::verify_checkpoint(dir / "experiment" / "export" / "hf-copy").ok());
  }
  SUBCASE("an empty directory is filled; a file in the way is refused") {
    fs::create_directories(dir / "empty");
    convert(dir / "empty", false);
    CHECK(cairn::verify_checkpoint(dir / "empty").ok());
    write_bytes(dir / "file", "x");
    CHECK_THROWS_WITH_AS(convert(dir / "file", true), doctest::Contains("exists and is not a directory"),
                         cairn::config_error);
  }
  SUBCASE("a conversion that fails leaves nothing") {
    flip_byte(dir / "in" / "rank_0.safetensors", 1);
    CHECK_THROWS_AS(convert(dir / "out", false), cairn::error);
    CHECK_FALSE(fs::exists(dir / "out"));
    no_leftovers();
  }
  SUBCASE("two conversions into one output at once: one wins whole, the other is refused") {
    for (int round = 0; round < 6; ++round) {
      CAPTURE(round);
      auto out = dir / ("race-" + std::to_string(round));
      pid_t children[2];
      for (auto& child : children) {
        child = ::fork();
        REQUIRE(child >= 0);
        if (child == 0) {
          try {
            convert(out, false);
            ::_exit(0);
          } catch (cairn::error const&) {
            ::_exit(3);
          }
        }
      }
      int succeeded = 0;
      for (auto child : children) {
        int status = 0;
        ::waitpid(child, &status, 0);
        REQUIRE(WIFEXITED(status));
        if (WEXITSTATUS(status) == 0) ++succeeded;
      }
      CHECK(succeeded >= 1);
      CHECK(cairn::verify_checkpoint(out).ok());
      CHECK(load_error(out, state_dict) == "loaded");
    }
    no_leftovers();
  }
}

TEST_CASE("loads into any layout put every element where it belongs, value by value") {
  // One saved layout (whole), many live ones: each live shard's elements are compared with
  // their known values, so an element copied to the wrong offset is found, not only a crash.
  temp_dir dir;
  for (auto format : {distributed, state_dict}) {
    auto path = dir / cairn::format_name(format);
    save(path, format);
    for (auto how : {scheme::dim, scheme::flat, scheme::mixed})
      for (int size : {2, 3, 4})
        for (int rank = 0; rank < size; ++rank) {
          CAPTURE(cairn::format_name(format));
          CAPTURE(static_cast<int>(how));
          CAPTURE(size);
          CAPTURE(rank);
          auto state = test_model::make(how, rank, size, false);
          cairn::load_checkpoint(state, comm, load_config(path, format));
          CHECK(test_model::mismatches(state) == 0);
        }
  }
}

TEST_CASE("verify of a Hugging Face directory: its structure always, checksums where recorded or required") {
  temp_dir dir;
  auto hf = dir / "hf";
  fs::create_directories(hf);
  std::vector<float> values(8, 1.5f);
  auto write_file = [&](std::string const& name, std::vector<std::string> const& tensors, cairn::io::checksums policy) {
    cairn::io::safetensors_writer writer(hf / name, policy);
    writer.set_metadata("format", "pt");
    for (auto const& t : tensors) writer.add(t, cairn::io::dtype::F32, {2, 4}, std::as_bytes(std::span(values)));
    writer.write();
  };
  write_bytes(hf / "config.json", R"({"model_type": "llama", "hidden_size": 4})");
  write_file("model-00001-of-00002.safetensors", {"a"}, cairn::io::checksums::skip);
  write_file("model-00002-of-00002.safetensors", {"b"}, cairn::io::checksums::skip);
  cairn::io::safetensors_index index;
  index.weight_map = {{"a", "model-00001-of-00002.safetensors"}, {"b", "model-00002-of-00002.safetensors"}};
  cairn::io::write_index(hf / "model.safetensors.index.json", index);

  SUBCASE("files of another tool without checksums: ok, with a note; refused when checksums are required") {
    auto report = cairn::verify_checkpoint(hf);
    CHECK(report.ok());
    CHECK(report.notes.size() == 2);
    CHECK(report.notes.front().find("no checksums recorded") != std::string::npos);
    cairn::verify_options strict;
    strict.require_checksums = true;
    CHECK_FALSE(cairn::verify_checkpoint(hf, strict).ok());
  }
  SUBCASE("a config.json that is not JSON") {
    write_bytes(hf / "config.json", "{\"model_type\": ");
    auto report = cairn::verify_checkpoint(hf);
    REQUIRE_FALSE(report.ok());
    CHECK(report.problems.front().find((hf / "config.json").string() + ": invalid JSON") != std::string::npos);
  }
  SUBCASE("a config.json naming no model_type") {
    write_bytes(hf / "config.json", "[1]");
    CHECK_FALSE(cairn::verify_checkpoint(hf).ok());
  }
  SUBCASE("a tensor its index lists, missing from the file the index names") {
    write_file("model-00002-of-00002.safetensors", {"c"}, cairn::io::checksums::skip);
    auto report = cairn::verify_checkpoint(hf);
    REQUIRE_FALSE(report.ok());
    CHECK(report.problems.front() ==
          (hf / "model.safetensors.index.json").string() + ": 'b' is not in model-00002-of-00002.safetensors");
  }
  SUBCASE("a file that records checksums for some tensors only") {
    write_file("model-00001-of-00002.safetensors", {"a"}, cairn::io::checksums::record);
    {
      cairn::io::safetensors_file file(hf / "model-00001-of-00002.safetensors");
      cairn::io::safetensors_writer writer(hf / "model-00001-of-00002.safetensors", cairn::io::checksums::skip);
      writer.set_metadata(cairn::io::checksum_key("a"), file.metadata().at(cairn::io::checksum_key("a")));
      writer.add("a", cairn::io::dtype::F32, {2, 4}, std::as_bytes(std::span(values)));
      writer.add("extra", cairn::io::dtype::F32, {2, 4}, std::as_bytes(std::span(values)));
      writer.write();
    }
    auto report = cairn::verify_checkpoint(hf);
    REQUIRE_FALSE(report.ok());
    CHECK(report.problems.front().find("1 of its 2 tensors have no recorded checksum") != std::string::npos);
  }
}

namespace {

/// Resident memory of this process now, in KiB.
long resident_kib() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.starts_with("VmRSS:")) return std::stol(line.substr(6));
  return 0;
}

/// A save whose metadata.json names a parameter with `megabytes` MiB of letters.
fs::path long_name_save(fs::path const& dir, std::size_t megabytes) {
  save(dir, distributed);
  auto metadata = read_bytes(dir / "metadata.json");
  auto at = metadata.find("\"name\": \"");
  if (at == std::string::npos) at = metadata.find("\"name\":\"");
  REQUIRE(at != std::string::npos);
  at = metadata.find('"', at + 6) + 1;
  std::ofstream out(dir / "metadata.json", std::ios::binary | std::ios::trunc);
  out << metadata.substr(0, at);
  std::string mebibyte(std::size_t{1} << 20, 'n');
  for (std::size_t i = 0; i < megabytes; ++i) out << mebibyte;
  out << metadata.substr(at);
  return dir;
}

} // namespace

TEST_CASE("hostile metadata is refused before it costs memory: a name of hundreds of MiB, an array of millions") {
  temp_dir tmp;
  for (std::size_t megabytes : {100, 400}) {
    CAPTURE(megabytes);
    auto dir = long_name_save(tmp / ("long-" + std::to_string(megabytes)), megabytes);
    // A pretrained load in a process of its own, its memory measured from its start.
    std::fflush(nullptr);
    pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      std::ofstream("/proc/self/clear_refs") << "5"; // the peak starts again from here
      auto before = resident_kib();
      auto error = load_error(dir, distributed);
      auto grown = resident_kib() - before;
      std::ifstream self("/proc/self/status");
      long peak = 0;
      for (std::string line; std::getline(self, line);)
        if (line.starts_with("VmHWM:")) peak = std::stol(line.substr(6));
      bool refused = error.find("longer than 1048576 bytes") != std::string::npos &&
                     error.find("metadata.json") != std::string::npos;
      // VmHWM is the peak of the whole process (libtorch and the test included): what the load
      // added is at most the peak less the memory before it.
      ::_exit(refused && peak - before < 300 * 1024 && grown < 300 * 1024 ? 0 : 1);
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    auto report = cairn::verify_checkpoint(dir);
    REQUIRE_FALSE(report.ok());
    CHECK_MESSAGE(report.problems.front().find("a string longer than 1048576 bytes at 'ranks[0].parameters[0].name'") !=
                      std::string::npos,
                  report.problems.front());
  }
  // A document of many small values: refused at the parse's memory budget, naming the file.
  auto dir = tmp / "many";
  save(dir, distributed);
  std::string many = "{\"pad\": [";
  for (int i = 0; i < (24 << 20); ++i) many += "0,";
  many += "0]}";
  write_bytes(dir / "metadata.json", many);
  auto error = load_error(dir, distributed);
  INFO(error);
  CHECK(error.find("needs more than 128 MiB of memory to read: refused") != std::string::npos);
  CHECK(error.find("metadata.json") != std::string::npos);
}
