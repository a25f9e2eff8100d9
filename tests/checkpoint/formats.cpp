// The distributed and state_dict formats in one process: bitwise round trips, partial loads,
// dtype conversion, metadata versions, and broken checkpoints reported with file and parameter.
#include <cairn/checkpoint/convert.hpp>
#include <cairn/checkpoint/formats/distributed.hpp>
#include <cairn/checkpoint/formats/state_dict.hpp>
#include <cairn/checkpoint/generator.hpp>
#include <cairn/checkpoint/verify.hpp>
#include <cairn/comm/single_process.hpp>
#include <cairn/io/file.hpp>

#include <doctest/doctest.h>

#include <fcntl.h>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>

#include "../error_kind.hpp"
#include "../io/temp_dir.hpp"
#include "model.hpp"

namespace {

cairn::comm::single_process comm;

cairn::checkpoint_save_config save_config(std::filesystem::path path, cairn::checkpoint_format format) {
  cairn::checkpoint_save_config config;
  config.path = std::move(path);
  config.format = format;
  config.optimizer_state = true;
  return config;
}

cairn::checkpoint_load_config load_config(std::filesystem::path path, cairn::checkpoint_format format,
                                          bool optimizer = true) {
  cairn::checkpoint_load_config config;
  config.path = std::move(path);
  config.format = format;
  config.optimizer_state = optimizer;
  return config;
}

bool bitwise_equal(cairn::model_state const& a, cairn::model_state const& b) {
  for (std::size_t i = 0; i < a.parameters.size(); ++i)
    for (std::size_t s = 0; s < a.shard_names.size(); ++s)
      if (!a.parameters[i].shards[s].equal(b.parameters[i].shards[s])) return false;
  return true;
}

std::string load_error(cairn::model_state& state, cairn::checkpoint_load_config const& config) {
  try {
    cairn::load_checkpoint(state, comm, config);
  } catch (cairn::error const& e) {
    return e.what();
  }
  return "loaded";
}

using test_model::scheme;
using enum cairn::checkpoint_format;

} // namespace

TEST_CASE("distributed -> state_dict -> distributed is bitwise") {
  temp_dir dir;
  auto original = test_model::make(scheme::dim, 0, 1, true);
  cairn::save_checkpoint(original, comm, save_config(dir / "a", distributed), {}, boost::json::object{{"step", 1}});
  auto first = test_model::make(scheme::dim, 0, 1, false);
  auto metadata = cairn::load_checkpoint(first, comm, load_config(dir / "a", distributed));
  CHECK(metadata.metadata.at("step") == 1);
  CHECK(metadata.shard_names == test_model::shard_names);
  CHECK(bitwise_equal(original, first));

  cairn::save_checkpoint(first, comm, save_config(dir / "b", state_dict));
  auto second = test_model::make(scheme::flat, 0, 1, false);
  cairn::load_checkpoint(second, comm, load_config(dir / "b", state_dict));
  CHECK(test_model::mismatches(second) == 0);
  cairn::save_checkpoint(second, comm, save_config(dir / "c", distributed));
  auto third = test_model::make(scheme::dim, 0, 1, false);
  cairn::load_checkpoint(third, comm, load_config(dir / "c", distributed));
  CHECK(bitwise_equal(original, third));
}

TEST_CASE("the state_dict files: whole tensors named parameter/shard, split by size, with an index") {
  temp_dir dir;
  auto state = test_model::make(scheme::dim, 0, 1, true);
  auto config = save_config(dir / "sd", state_dict);
  config.parameters_per_file = 1 << 20;
  cairn::save_checkpoint(state, comm, config);
  auto index = cairn::io::read_index(dir / "sd" / "state_dict.safetensors.index.json");
  CHECK(index.weight_map.at("embedding/exp_avg") == "state_dict_0.safetensors");
  cairn::io::safetensors_file file(dir / "sd" / "state_dict_0.safetensors");
  CHECK(file.at("embedding/weights").shape == std::vector<std::uint64_t>{10, 4});
  CHECK(file.at("layer.bias/weights").dtype == cairn::io::dtype::BF16);
  CHECK_NOTHROW(file.verify());
  CHECK(index.metadata.at("format") == "state_dict");
}

TEST_CASE("a weights-only load zeroes the optimizer state") {
  temp_dir dir;
  auto state = test_model::make(scheme::dim, 0, 1, true);
  cairn::save_checkpoint(state, comm, save_config(dir / "a", distributed));
  auto loaded = test_model::make(scheme::dim, 0, 1, true); // optimizer shards hold stale values
  cairn::load_checkpoint(loaded, comm, load_config(dir / "a", distributed, false));
  CHECK(test_model::mismatches(loaded, {1, 2}) == 0);
}

TEST_CASE("data_type converts floating tensors on save") {
  temp_dir dir;
  auto state = test_model::make(scheme::dim, 0, 1, true);
  auto config = save_config(dir / "a", state_dict);
  config.data_type = cairn::data_type::bfloat16;
  cairn::save_checkpoint(state, comm, config);
  cairn::io::safetensors_file file(dir / "a" / "state_dict_0.safetensors");
  CHECK(file.at("embedding/weights").dtype == cairn::io::dtype::BF16);
  CHECK(file.at("steps/weights").dtype == cairn::io::dtype::I64); // integers keep their type
  auto loaded = test_model::make(scheme::dim, 0, 1, false);
  cairn::load_checkpoint(loaded, comm, load_config(dir / "a", state_dict));
  for (std::size_t i = 0; i < state.parameters.size(); ++i) {
    for (std::size_t s = 0; s < state.shard_names.size(); ++s) {
      auto const& original = state.parameters[i].shards[s];
      auto expected = original.is_floating_point() ? original.to(at::kBFloat16).to(original.scalar_type()) : original;
      CHECK_MESSAGE(loaded.parameters[i].shards[s].equal(expected), state.parameters[i].layout.name);
    }
  }
}

TEST_CASE("missing, unexpected and mismatched parameters are reported together") {
  temp_dir dir;
  auto state = test_model::make(scheme::dim, 0, 1, true);
  cairn::save_checkpoint(state, comm, save_config(dir / "a", distributed));
  auto other = test_model::make(scheme::dim, 0, 1, false);
  other.parameters[0].layout.name = "renamed"; // missing here, unexpected there
  other.parameters[1].layout.shape = {3, 6};   // same size, another shape
  other.parameters[1].layout.shard = cairn::shard_layout::whole({3, 6});
  auto text = load_error(other, load_config(dir / "a", distributed));
  CHECK(text.find("cannot load checkpoint " + (dir / "a").string()) != std::string::npos);
  CHECK(text.find("renamed: missing from the checkpoint") != std::string::npos);
  CHECK(text.find("embedding: in the checkpoint but not in the model") != std::string::npos);
  CHECK(text.find("layer.weight/weights: has shape [6, 3] in the checkpoint, [3, 6] here") != std::string::npos);
  CHECK(text.find("5 problems") != std::string::npos);
}

TEST_CASE("an optimizer state the checkpoint lacks is named") {
  temp_dir dir;
  auto state = test_model::make(scheme::dim, 0, 1, true);
  auto config = save_config(dir / "a", distributed);
  config.optimizer_state = false;
  cairn::save_checkpoint(state, comm, config);
  auto loaded = test_model::make(scheme::dim, 0, 1, false);
  auto text = load_error(loaded, load_config(dir / "a", distributed));
  CHECK(text.find("exp_avg: state shard not in the checkpoint (it holds weights)") != std::string::npos);

  // The other way: optimizer state the checkpoint holds and the state has no place for would be
  // lost; the load refuses, as the dry run does, unless it takes the weights alone.
  cairn::save_checkpoint(state, comm, save_config(dir / "b", distributed));
  auto fewer = test_model::make(scheme::dim, 0, 1, false);
  fewer.shard_names.pop_back();
  for (auto& p : fewer.parameters) p.shards.pop_back();
  text = load_error(fewer, load_config(dir / "b", distributed));
  CHECK(text.find("exp_avg_sq: state shard of the checkpoint this state does not have: it would be lost") !=
        std::string::npos);
  cairn::load_checkpoint(fewer, comm, load_config(dir / "b", distributed, false));
  // An optimizer-only save: its first shard is optimizer state too, and checked as such.
  auto optimizer_only = save_config(dir / "c", distributed);
  optimizer_only.model_weights = false;
  cairn::save_checkpoint(state, comm, optimizer_only);
  auto no_exp_avg = test_model::make(scheme::dim, 0, 1, false);
  no_exp_avg.shard_names.erase(no_exp_avg.shard_names.begin() + 1);
  for (auto& p : no_exp_avg.parameters) p.shards.erase(p.shards.begin() + 1);
  auto moments = load_config(dir / "c", distributed);
  moments.model_weights = false;
  text = load_error(no_exp_avg, moments);
  CHECK(text.find("exp_avg: state shard of the checkpoint this state does not have") != std::string::npos);
}

TEST_CASE("broken checkpoints name the file and the parameter") {
  temp_dir dir;
  auto state = test_model::make(scheme::dim, 0, 1, true);
  auto path = dir / "a";
  cairn::save_checkpoint(state, comm, save_config(path, distributed));
  auto fresh = [] { return test_model::make(scheme::dim, 0, 1, false); };

  SUBCASE("a flipped byte fails its checksum") {
    auto file = path / "rank_0.safetensors";
    auto size = std::filesystem::file_size(file);
    auto fd = cairn::io::open_file(file, O_RDWR);
    std::byte b{0x77};
    cairn::io::pwrite_all(fd.get(), std::span(&b, 1), size - 3, file);
    auto loaded = fresh();
    auto text = load_error(loaded, load_config(path, distributed));
    CHECK(text.find(file.string() + ": tensor '") != std::string::npos);
    CHECK(text.find("is corrupt: its checksum does not match") != std::string::npos);
  }
  SUBCASE("a truncated file") {
    auto file = path / "rank_0.safetensors";
    std::filesystem::resize_file(file, std::filesystem::file_size(file) - 10);
    auto loaded = fresh();
    auto text = load_error(loaded, load_config(path, distributed));
    CHECK(text.find(file.string() + ": tensor '") != std::string::npos);
    CHECK(text.find("runs past the end of the file") != std::string::npos);
  }
  SUBCASE("a missing rank file") {
    std::filesystem::remove(path / "rank_0.safetensors");
    auto loaded = fresh();
    auto text = load_error(loaded, load_config(path, distributed));
    CHECK(text.find((path / "rank_0.safetensors").string() + ": cannot open: No such file or directory") !=
          std::string::npos);
  }
  SUBCASE("metadata of an unknown version") {
    auto metadata = cairn::read_json_file(path / "metadata.json");
    metadata.as_object()["version"] = "99";
    std::ofstream(path / "metadata.json") << boost::json::serialize(metadata);
    auto loaded = fresh();
    auto text = load_error(loaded, load_config(path, distributed));
    CHECK(text.find((path / "metadata.json").string() + ": unknown version \"99\" (this build reads 0, 1, 2, 3, 4)") !=
          std::string::npos);
  }
  SUBCASE("a tensor whose checksum entry was renamed is refused, not loaded unchecked") {
    auto file = path / "rank_0.safetensors";
    std::string tensor;
    {
      cairn::io::safetensors_file f(file);
      tensor = f.tensors().front().name;
    }
    std::string bytes;
    {
      std::ifstream in(file, std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(in), {});
    }
    auto key = cairn::io::checksum_key(tensor);
    auto at = bytes.find(key);
    REQUIRE(at != std::string::npos);
    bytes[at + key.size() - 1] = bytes[at + key.size() - 1] == 'x' ? 'y' : 'x';  // same length: header intact
    bytes[bytes.size() - 3] = static_cast<char>(bytes[bytes.size() - 3] ^ 0x5a); // and corrupt data
    std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
    auto loaded = fresh();
    auto text = load_error(loaded, load_config(path, distributed));
    CHECK(text.find(file.string() + ": tensor '" + tensor + "' has no recorded checksum") != std::string::npos);
  }
  SUBCASE("a parameter listed twice (another renamed to it) is refused, naming both") {
    auto metadata = cairn::read_json_file(path / "metadata.json");
    auto& parameters = metadata.at("ranks").at(0).at("parameters").as_array();
    REQUIRE(parameters.size() >= 2);
    auto first = std::string(parameters.at(0).at("name").as_string());
    parameters.at(1).as_object()["name"] = first;
    std::ofstream(path / "metadata.json") << boost::json::serialize(metadata);
    auto loaded = fresh();
    auto text = load_error(loaded, load_config(path, distributed));
    CHECK(text.find("'" + first + "' is listed twice by rank 0") != std::string::npos);
    CHECK_FALSE(cairn::verify_checkpoint(path).ok());
  }
  SUBCASE("a layout that does not cover a parameter") {
    auto metadata = cairn::read_json_file(path / "metadata.json");
    auto& shard = metadata.at("ranks").at(0).at("parameters").at(0).at("shard").as_object();
    shard["flat"] = boost::json::object{{"begin", 0}, {"end", 30}}; // 30 of the embedding's 40
    std::ofstream(path / "metadata.json") << boost::json::serialize(metadata);
    auto loaded = fresh();
    auto text = load_error(loaded, load_config(path, distributed));
    CHECK(text.find("'embedding': the ranks' shards hold 30 of its 40 elements") != std::string::npos);
    // The rank file was written for the layout metadata.json gave before the edit.
    CHECK(text.find("rank_0.safetensors: was written for another layout") != std::string::npos);
  }
}

TEST_CASE("a grid's layouts are stored as its rules; rules edited, inflated or doubled are refused") {
  temp_dir dir;
  test_model::grid_scheme const grid{1, 1, 1, 1};
  auto path = dir / "a";
  cairn::save_checkpoint(test_model::make(grid, 0, true), comm, save_config(path, distributed));
  auto stored = cairn::read_json_file(path / "metadata.json");
  CHECK(stored.at("ranks").as_array().empty());
  REQUIRE(stored.at("rules").at("parameters").as_array().size() == test_model::parameters().size());
  auto loaded = test_model::make(grid, 0, false);
  cairn::load_checkpoint(loaded, comm, load_config(path, distributed));
  CHECK(test_model::mismatches(loaded) == 0);

  auto edited = [&](auto&& edit) {
    auto metadata = stored;
    edit(metadata.as_object());
    std::ofstream(path / "metadata.json") << boost::json::serialize(metadata);
    auto state = test_model::make(grid, 0, false);
    return load_error(state, load_config(path, distributed));
  };
  // Another rule than the save's: the rank file was written for the layout the rules gave then.
  auto text = edited([](boost::json::object& m) { m["rules"].at("parameters").at(0).as_object()["zero"] = false; });
  CHECK(text.find("rank_0.safetensors: was written for another layout") != std::string::npos);
  // A grid of a billion ranks from a few bytes: refused before anything is expanded.
  text = edited([](boost::json::object& m) { m["rules"].as_object()["data"] = 1 << 30; });
  CHECK(text.find("metadata.json: rules: layout rules: data is 1073741824") != std::string::npos);
  // A million ranks from a directory of one rank file: refused before the rules are expanded.
  text = edited([](boost::json::object& m) { m["rules"].as_object()["data"] = 1 << 20; });
  CHECK_MESSAGE(text.find("rules: a grid of 1048576 ranks, but the directory holds the files of 1 (rank_0.safetensors "
                          "up to rank_0)") != std::string::npos,
                text);
  CHECK(text.find("refused before they are expanded") != std::string::npos);
  // A few ranks more than the files: expanded, and refused for what the files say.
  text = edited([](boost::json::object& m) { m["rules"].as_object()["data"] = 3; });
  CHECK_MESSAGE(
      text.find("rank_0.safetensors: was written by one of 1 ranks, the metadata lists 3") != std::string::npos, text);
  text = edited([](boost::json::object& m) { m["rules"].at("parameters").at(1).as_object()["stage"] = 1; });
  CHECK(text.find("'layer.weight': stage 1 of a pipeline of 1") != std::string::npos);
  // Rules in metadata of a version before them; metadata with no layout at all; rules of no parameter.
  text = edited([](boost::json::object& m) { m["version"] = "3"; });
  CHECK(text.find("metadata.json: rules: in metadata of version 3") != std::string::npos);
  text = edited([](boost::json::object& m) { m.erase("rules"); });
  CHECK(text.find("ranks: a distributed checkpoint's metadata lists no rank's layout") != std::string::npos);
  (void)edited([](boost::json::object& m) { m["rules"].at("parameters") = boost::json::array{}; });
  cairn::convert_config convert;
  convert.input.path = path;
  convert.output.path = dir / "converted";
  convert.output.format = state_dict;
  CHECK_THROWS_WITH(cairn::convert_checkpoint(convert), doctest::Contains("holds no parameter: nothing to convert"));
  CHECK_FALSE(std::filesystem::exists(dir / "converted"));
  // Rules that would expand to more memory than a reader gives them, from a few bytes.
  text = edited([](boost::json::object& m) {
    auto& rules = m["rules"].as_object();
    auto first = rules.at("parameters").at(0);
    first.as_object()["name"] = std::string(4000, 'x');
    rules["parameters"] = boost::json::array{first};
    rules["data"] = 1 << 20; // a million copies of one rule of 4,000 characters
  });
  CHECK(text.find("refused before they are expanded") != std::string::npos);
  text = edited([](boost::json::object& m) {
    m["rules"].at("parameters").at(0).as_object()["shape"] = boost::json::array(100, boost::json::value(1));
  });
  CHECK(text.find("a shape of 100 dimensions (at most 4096 and 64)") != std::string::npos);
  // Rules and ranks both: which is the save's?
  text = edited([](boost::json::object& m) {
    m["ranks"] = boost::json::array{boost::json::object{{"parameters", boost::json::array{}}}};
  });
  CHECK(text.find("rules: stands for 'ranks', which the metadata lists too") != std::string::npos);
}

TEST_CASE("a rank's items: saved in its rank file, checksummed, loaded back; refused when corrupt or unsavable") {
  temp_dir dir;
  auto state = test_model::make(scheme::dim, 0, 1, true);
  at::rand({3}); // the generator somewhere past its seed
  state.items["generator"] = cairn::cpu_generator_state();
  state.items["data"] = R"({"epoch": 2, "position": 1234})";
  state.items["empty"] = "";
  auto expected = at::rand({5}); // what the generator draws next
  auto path = dir / "a";
  cairn::save_checkpoint(state, comm, save_config(path, distributed));
  auto loaded = test_model::make(scheme::dim, 0, 1, false);
  loaded.items["stale"] = "from before the load";
  cairn::load_checkpoint(loaded, comm, load_config(path, distributed));
  CHECK(loaded.items == state.items);
  at::rand({7}); // the generator moves on; restored, it draws what it drew after the save
  cairn::set_cpu_generator_state(loaded.items.at("generator"));
  CHECK(at::rand({5}).equal(expected));
  CHECK_KIND(cairn::set_cpu_generator_state("not a generator"), cairn::checkpoint_errc::invalid_state);
  if (!at::hasCUDA()) { // no CUDA device: said, not crashed
    CHECK_KIND(static_cast<void>(cairn::cuda_generator_state(0)), cairn::checkpoint_errc::invalid_state);
    CHECK_KIND(cairn::set_cuda_generator_state(0, "bytes"), cairn::checkpoint_errc::invalid_state);
  }
  CHECK(cairn::verify_checkpoint(path).problems.empty());

  // The whole-tensor formats keep no items; loading one leaves none.
  cairn::save_checkpoint(state, comm, save_config(dir / "b", state_dict));
  cairn::load_checkpoint(loaded, comm, load_config(dir / "b", state_dict));
  CHECK(loaded.items.empty());

  // One hexadecimal digit of an item changed in the rank file: refused, naming the item.
  auto file = path / "rank_0.safetensors";
  std::string bytes;
  {
    std::ifstream in(file, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto data_hex = std::string("7b2265706f6368223a"); // '{"epoch":' in hexadecimal
  auto at = bytes.find(data_hex);
  REQUIRE(at != std::string::npos);
  bytes[at + 1] = 'c'; // '{' becomes '|'
  std::ofstream(file, std::ios::binary) << bytes;
  auto text = load_error(loaded, load_config(path, distributed));
  CHECK(text.find(file.string() + ": item 'data' is corrupt: its checksum does not match") != std::string::npos);
  auto report = cairn::verify_checkpoint(path);
  REQUIRE(report.problems.size() == 1);
  CHECK(report.problems[0].find("item 'data' is corrupt") != std::string::npos);

  // Items no save writes, found in a file, are refused as a save would refuse them.
  std::map<std::string, std::string> recorded;
  cairn::detail::put_items(recorded, {{"", "nameless"}});
  std::vector<std::string> problems;
  CHECK(cairn::detail::read_items(recorded, problems).empty());
  REQUIRE(problems.size() == 1);
  CHECK(problems[0] == "an item has an empty name (no save writes that)");

  // A conversion carries tensors alone, and says that it leaves the items behind.
  std::vector<std::string> warnings;
  {
    cairn::scoped_diagnostic_sink sink([&](cairn::severity level, cairn::diagnostic const& d) {
      if (level == cairn::severity::warning) warnings.push_back(d.message);
    });
    cairn::save_checkpoint(state, comm, save_config(dir / "d", distributed));
    cairn::convert_config convert;
    convert.input.path = dir / "d";
    convert.output.path = dir / "e";
    convert.output.format = distributed;
    cairn::convert_checkpoint(convert);
  }
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0] == "the ranks' items (rank 0's 'data', say) are not converted: a conversion carries tensors alone");

  // Items a save cannot take are refused before anything is written, naming them.
  auto unsavable = [&](std::string const& name, std::string value) {
    auto s = test_model::make(scheme::dim, 0, 1, true);
    s.items[name] = std::move(value);
    try {
      cairn::save_checkpoint(s, comm, save_config(dir / "c", distributed));
    } catch (cairn::error const& e) {
      CHECK_FALSE(std::filesystem::exists(dir / "c" / "metadata.json"));
      return std::string(e.what());
    }
    return std::string("saved");
  };
  CHECK(unsavable("", "x").find("an item has an empty name") != std::string::npos);
  CHECK(unsavable("bad\nname", "x").find("item 'bad\nname': a control character in its name") != std::string::npos);
  CHECK(unsavable("huge", std::string(cairn::max_item_bytes + 1, 'x')).find("more than a rank may save") !=
        std::string::npos);
}

TEST_CASE("metadata of an earlier version loads through the migration chain") {
  auto metadata = cairn::read_checkpoint_metadata(std::string(CAIRN_TEST_DATA_DIR) + "/data/metadata_v0.json");
  CHECK(metadata.version == "4");
  CHECK(metadata.replica_writers == cairn::replica_writer_rule::rank_0); // rank 0 wrote every replica then
  CHECK(metadata.save_id.empty()); // a save before identities: its files are not checked against one
  CHECK(metadata.shard_names == std::vector<std::string>{"weights"});
  REQUIRE(metadata.ranks.size() == 1);
  CHECK(metadata.ranks[0].parameters[0].name == "w");
  CHECK(metadata.metadata.at("iteration") == 7);
  CHECK(metadata.iteration == 7); // a save of any version gives its iteration typed
}

TEST_CASE("checkpoints an earlier cairn wrote (2 ranks, rows split) still verify and load bitwise") {
  // tests/data/checkpoints: written by `checkpoint_formats_worker save DIR FORMAT dim` on 2 ranks
  // by the cairn of 2026-12 (metadata version 2), before exports were streamed. Never regenerate
  // them: they stand for the files users already have.
  auto data = std::filesystem::path(CAIRN_TEST_DATA_DIR) / "data" / "checkpoints";
  for (auto [name, format] : {std::pair{"distributed_v2", distributed}, std::pair{"state_dict_v2", state_dict}}) {
    CAPTURE(name);
    auto report = cairn::verify_checkpoint(data / name);
    CHECK(report.ok());
    CHECK(report.files == (format == distributed ? 2u : 1u));
    for (auto how : {scheme::dim, scheme::flat}) { // into one process, whole rows or one flat range
      auto state = test_model::make(how, 0, 1, false);
      auto metadata = cairn::load_checkpoint(state, comm, load_config(data / name, format));
      CHECK(test_model::mismatches(state) == 0);
      CHECK(metadata.metadata.at("iteration") == 42);
      CHECK(metadata.iteration == 42);
      CHECK(metadata.replica_writers == cairn::replica_writer_rule::rank_0); // its replicas are in rank 0's file
      CHECK(metadata.config.at("program") == "worker");
    }
  }
}

TEST_CASE("state builders: shards taken from whole tensors, optimizer state zeroed, and saved as such") {
  auto whole = at::arange(35, at::kFloat).view({7, 5});
  auto rows = cairn::take_shard(whole, cairn::split_rows({7, 5}, 1, 3)); // rows 3, 4
  CHECK(rows.equal(at::arange(15, 25, at::kFloat)));
  auto columns = cairn::take_shard(whole, cairn::split_columns({7, 5}, 0, 2)); // columns 0..2
  CHECK(columns.equal(whole.narrow(1, 0, 3).reshape({-1})));
  auto flat = cairn::take_shard(whole, cairn::flat_slice({7, 5}, 2, 3)); // elements 23..34
  CHECK(flat.equal(at::arange(23, 35, at::kFloat)));

  auto state = cairn::whole_state({{"w", whole}, {"b", at::ones({5})}}, {"exp_avg"});
  CHECK(state.shard_names == std::vector<std::string>{"weights", "exp_avg"});
  REQUIRE(state.parameters.size() == 2);
  CHECK(state.parameters[0].layout.shape == std::vector<std::uint64_t>{7, 5});
  CHECK(state.parameters[0].shards[1].equal(at::zeros({35})));
  state.check();
  temp_dir dir;
  cairn::save_checkpoint(state, comm, save_config(dir / "a", state_dict));
  auto loaded = cairn::whole_state({{"w", at::zeros({7, 5})}, {"b", at::zeros({5})}}, {"exp_avg"});
  cairn::load_checkpoint(loaded, comm, load_config(dir / "a", state_dict));
  CHECK(bitwise_equal(state, loaded));
}

TEST_CASE("long work reports progress: bytes done of the total, throughput, time left; then ends its line") {
  // Every byte counts at once here; by default the first report comes after 2 s, then every 5 s.
  auto previous = cairn::set_progress_timing({std::chrono::milliseconds(0), std::chrono::milliseconds(0)});
  struct restore {
    cairn::progress_timing timing;
    ~restore() { cairn::set_progress_timing(timing); }
  } restore_timing{previous};
  std::vector<cairn::diagnostic> reports;
  cairn::scoped_diagnostic_sink sink([&](cairn::severity level, cairn::diagnostic const& d) {
    if (level == cairn::severity::progress) reports.push_back(d);
  });
  auto done_of = [](std::string const& message) { return message.substr(0, message.find(" of ")); };

  temp_dir dir;
  auto state = test_model::make(scheme::dim, 0, 1, true);
  auto total = cairn::size_text(double(state.bytes()));
  cairn::save_checkpoint(state, comm, save_config(dir / "a", distributed));
  REQUIRE(reports.size() >= 3); // one per tensor written, then the end
  CHECK(reports.front().path == (dir / "a").string());
  CHECK(reports.front().message.starts_with("saving: "));
  CHECK(reports.front().message.find(" of " + total + " (") != std::string::npos);
  CHECK(reports.front().message.find("/s") != std::string::npos);
  CHECK(reports[reports.size() - 2].message.find("saving: " + total + " of " + total) == 0);
  CHECK(reports.back().message.empty()); // the work ended
  CHECK(done_of(reports.front().message) != done_of(reports[reports.size() - 2].message));

  reports.clear();
  auto into = test_model::make(scheme::flat, 0, 1, false);
  cairn::load_checkpoint(into, comm, load_config(dir / "a", distributed));
  REQUIRE(reports.size() >= 2);
  CHECK(reports[reports.size() - 2].message.find("loading: " + total + " of " + total) == 0);

  reports.clear();
  CHECK(cairn::verify_checkpoint(dir / "a").ok());
  REQUIRE(reports.size() >= 2);
  CHECK(reports.front().message.starts_with("verifying: "));

  // A conversion is one piece of work: the load and the save inside it report as part of it.
  reports.clear();
  cairn::convert_config convert;
  convert.input.path = dir / "a";
  convert.output.path = dir / "b";
  convert.output.format = state_dict;
  cairn::convert_checkpoint(convert);
  REQUIRE(reports.size() >= 2);
  for (std::size_t i = 0; i + 1 < reports.size(); ++i) CHECK(reports[i].message.starts_with("converting: "));
  CHECK(reports[reports.size() - 2].message.find("converting: " + cairn::size_text(2.0 * double(state.bytes()))) == 0);
}

TEST_CASE("a save is a plan: its files, their writers, tensors and sources are known before any byte moves") {
  auto state = test_model::make(scheme::dim, 0, 1, true);
  auto config = save_config("unused", state_dict);
  config.parameters_per_file = std::uint64_t{1} << 20;
  auto plan = cairn::formats::state_dict::plan(state, comm, config, {}, {});
  REQUIRE(plan.files.size() == 1);
  CHECK(plan.files[0].name == "state_dict_0.safetensors");
  CHECK(plan.files[0].writer == 0);
  CHECK(plan.files[0].items.size() == test_model::parameters().size() * test_model::shard_names.size());
  for (auto const& item : plan.files[0].items) CHECK(item.source == cairn::write_source::gathered);
  REQUIRE(plan.closing.size() == 1);
  CHECK(plan.closing[0].name == "state_dict.safetensors.index.json");

  auto distributed_plan = cairn::formats::distributed::plan(state, comm, save_config("unused", distributed), {}, {});
  REQUIRE(distributed_plan.files.size() == 1);
  CHECK(distributed_plan.files[0].name == "rank_0.safetensors");
  for (auto const& item : distributed_plan.files[0].items) {
    CHECK(item.source == cairn::write_source::own_shard);
    CHECK(item.shape.size() == 1); // flat: the rank's shard as it holds it
  }
  CHECK(distributed_plan.files[0].metadata.at("cairn.save_id").size() == 32);
  CHECK(distributed_plan.closing.at(0).name == "metadata.json");
  // What each rank writes, before it does: the state's bytes (and the closing file) on rank 0.
  auto bytes = distributed_plan.bytes_per_rank(1);
  CHECK(bytes.at(0) == state.bytes() + distributed_plan.closing[0].text.size());
  auto described = cairn::describe(distributed_plan);
  CHECK(described.at("files").at(0).at("tensors").at(0).at("source") == "own_shard");
}

TEST_CASE("a resharded load reads a tensor of more than 2^24 rows from the files that hold it") {
  // A [8194, 4096, 1] tensor saved as one flat slice, loaded into its first 4,097 rows: their
  // intersection has 4,097 x 4,096 rows, more than the run-by-run overlap count goes through
  // (2^24), so the load may skip a holding's file only where their spans are apart.
  temp_dir tmp;
  std::vector<std::uint64_t> shape{8194, 4096, 1};
  auto make = [&](cairn::shard_layout shard, bool fill) {
    cairn::model_state state;
    cairn::parameter_state p;
    p.layout = {"w", shape, cairn::io::dtype::U8, false, std::move(shard)};
    auto n = static_cast<std::int64_t>(p.layout.shard.numel());
    p.shards.push_back(fill ? (at::arange(n, at::kLong) % 251).to(at::kByte) : at::zeros({n}, at::kByte));
    state.parameters.push_back(std::move(p));
    return state;
  };
  auto whole = cairn::shard_layout::whole(shape);
  whole.flat = cairn::flat_range{0, whole.box_numel()};
  cairn::save_checkpoint(make(whole, true), comm, save_config(tmp / "d", distributed), {}, {});
  auto part = make(cairn::split_dimension(shape, 0, 0, 2), false);
  REQUIRE(load_error(part, load_config(tmp / "d", distributed)) == "loaded");
  auto n = static_cast<std::int64_t>(part.parameters[0].layout.shard.numel());
  CHECK(part.parameters[0].shards[0].equal((at::arange(n, at::kLong) % 251).to(at::kByte)));
}
