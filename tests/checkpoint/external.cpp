// The external format through a converter: config.json and tensors in the other framework's
// names, shapes and layout, and back, bitwise; everything unmapped reported.
#include <cairn/checkpoint/accounting.hpp>
#include <cairn/checkpoint/external.hpp>
#include <cairn/checkpoint/layout.hpp>
#include <cairn/checkpoint/plan.hpp>
#include <cairn/checkpoint/save_load.hpp>
#include <cairn/checkpoint/state.hpp>
#include <cairn/checkpoint/verify.hpp>
#include <cairn/comm/single_process.hpp>
#include <cairn/io/index.hpp>
#include <cairn/io/safetensors.hpp>
#include <cairn/io/safetensors_writer.hpp>

#include <ATen/ATen.h>
#include <boost/describe/class.hpp>
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <numeric>

#include "../error_kind.hpp"
#include "../io/temp_dir.hpp"
#include "tiny_model.hpp"

namespace {

using test_model::tiny_converter;
using test_model::tiny_model;
using test_model::tiny_state;

cairn::comm::single_process comm;

/// A copy of the directory `from` in `to`, with the tensor `name` of its model.safetensors
/// called `renamed` (of the same length) in the file's header.
void fs_copy_renamed(std::filesystem::path const& from, std::filesystem::path const& to, std::string const& name,
                     std::string const& renamed) {
  REQUIRE(name.size() == renamed.size());
  std::filesystem::copy(from, to);
  auto file = to / "model.safetensors";
  std::string bytes;
  {
    std::ifstream in(file, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto at = bytes.find('"' + name + '"');
  REQUIRE(at != std::string::npos);
  bytes.replace(at + 1, name.size(), renamed);
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
}

} // namespace

TEST_CASE("save in the external format and load back, bitwise") {
  temp_dir dir;
  tiny_model model;
  auto conv = tiny_converter();
  auto state = tiny_state(model, false, true);
  cairn::checkpoint_save_config save;
  save.path = dir / "hf";
  save.format = cairn::checkpoint_format::external;
  save.model_type = "tiny";
  cairn::external::save(state, comm, conv, model, save);

  auto config = cairn::read_json_file(dir / "hf" / "config.json").as_object();
  CHECK(config.at("model_type") == "tiny");
  CHECK(config.at("hidden_size") == 4);
  CHECK(config.at("num_hidden_layers") == 2);
  CHECK(config.at("intermediate_size") == 16);
  CHECK(config.at("architectures") == boost::json::array{"TinyForCausalLM"});

  cairn::io::safetensors_file file(dir / "hf" / "model.safetensors");
  CHECK(file.at("model.layers.1.self_attn.k_proj.weight").shape == std::vector<std::uint64_t>{4, 4});
  CHECK(file.at("model.layers.0.self_attn.o_proj.weight").shape == std::vector<std::uint64_t>{8, 4}); // transposed
  CHECK(file.metadata().at("format") == "pt");
  CHECK(file.tensors().size() == 2 + 2 * 4);
  CHECK(file.at("model.norm.weight").shape == std::vector<std::uint64_t>{8}); // two of ours, merged

  auto read_back = cairn::external::load_config(conv, dir / "hf");
  CHECK(read_back.hidden == 4);
  CHECK(read_back.layers == 2);
  // A model type the program has no converter for is refused, naming the one it has.
  CHECK_THROWS_WITH_AS(cairn::external::load_config(conv, dir / "hf", "llama"),
                       doctest::Contains("\"llama\" has no converter in this program (it converts \"tiny\")"),
                       cairn::config_error);

  auto loaded = tiny_state(model, true, false);
  cairn::checkpoint_load_config load;
  load.path = dir / "hf";
  load.format = cairn::checkpoint_format::external;
  load.model_type = "tiny";
  cairn::external::load(loaded, comm, conv, model, load);
  for (std::size_t i = 0; i < state.parameters.size(); ++i) {
    CHECK_MESSAGE(loaded.parameters[i].shards[0].equal(state.parameters[i].shards[0]), state.parameters[i].layout.name);
    CHECK(loaded.parameters[i].shards[1].equal(at::zeros_like(loaded.parameters[i].shards[1]))); // optimizer zeroed
  }
}

TEST_CASE("large models are split into numbered files with an index") {
  temp_dir dir;
  tiny_model model{32, 2, 64};
  auto conv = tiny_converter();
  auto state = tiny_state(model, false, true);
  cairn::checkpoint_save_config save;
  save.path = dir / "hf";
  save.parameters_per_file = 2048; // below the 2^20 a config allows, to force several files here
  cairn::external::save(state, comm, conv, model, save);
  auto index = cairn::io::read_index(dir / "hf" / "model.safetensors.index.json");
  CHECK(index.files().size() > 1);
  CHECK(index.files().front() == "model-00001-of-0000" + std::to_string(index.files().size()) + ".safetensors");
  auto loaded = tiny_state(model, true, false);
  cairn::checkpoint_load_config load;
  load.path = dir / "hf";
  cairn::external::load(loaded, comm, conv, model, load);
  for (std::size_t i = 0; i < state.parameters.size(); ++i)
    CHECK(loaded.parameters[i].shards[0].equal(state.parameters[i].shards[0]));
}

TEST_CASE("unmapped parameters, unmapped tensors and wrong configs are refused") {
  temp_dir dir;
  tiny_model model;
  auto conv = tiny_converter();
  auto state = tiny_state(model, false, true);
  cairn::parameter_state extra = state.parameters[0];
  extra.layout.name = "lm_head";
  state.parameters.push_back(extra);
  cairn::checkpoint_save_config save;
  save.path = dir / "hf";
  CHECK_THROWS_WITH_AS(cairn::external::save(state, comm, conv, model, save),
                       "parameter 'lm_head' has no external name in the tiny converter", cairn::error);
  CHECK_KIND(cairn::external::save(state, comm, conv, model, save), cairn::checkpoint_errc::missing_tensor);

  state.parameters.pop_back();
  cairn::external::save(state, comm, conv, model, save);
  auto fewer = tiny_model{4, 1, 8};
  auto loaded = tiny_state(fewer, false, false);
  cairn::checkpoint_load_config load;
  load.path = dir / "hf";
  try {
    cairn::external::load(loaded, comm, conv, fewer, load);
    FAIL("loaded");
  } catch (cairn::checkpoint_error const& e) {
    std::string text = e.what();
    CHECK(text.find("model.layers.1.self_attn.q_proj.weight: in the checkpoint but not mapped by the tiny converter") !=
          std::string::npos);
  }

  // One tensor renamed in the file (a name of the same length, patched in its header): one
  // problem, naming both names, not a missing tensor, a missing parameter and an unmapped one.
  fs_copy_renamed(dir / "hf", dir / "renamed", "model.layers.0.self_attn.k_proj.weight",
                  "model.layers.0.self_attn.k_prej.weight");
  auto same = tiny_state(model, false, false);
  load.path = dir / "renamed";
  try {
    cairn::external::load(same, comm, conv, model, load);
    FAIL("loaded");
  } catch (cairn::checkpoint_error const& e) {
    std::string text = e.what();
    CHECK_MESSAGE(text.find("1 problem") != std::string::npos, text);
    CHECK_MESSAGE(text.find("tensor 'model.layers.0.self_attn.k_proj.weight' is not in the checkpoint, which holds "
                            "'model.layers.0.self_attn.k_prej.weight' instead, a name the tiny converter does not "
                            "map (renamed?)") != std::string::npos,
                  text);
    CHECK(text.find("missing from the checkpoint") == std::string::npos);
    CHECK(text.find("but not mapped") == std::string::npos);
  }
  load.path = dir / "hf";

  auto config = cairn::read_json_file(dir / "hf" / "config.json").as_object();
  config["architectures"] = boost::json::array{"Other"};
  config["rope_theta"] = 10000;
  std::ofstream(dir / "hf" / "config.json") << boost::json::serialize(config);
  try {
    (void)cairn::external::load_config(conv, dir / "hf");
    FAIL("accepted");
  } catch (cairn::config_error const& e) {
    REQUIRE(e.errors().size() == 2);
    CHECK(e.errors()[0].message == R"('architectures' must be ["TinyForCausalLM"], got ["Other"])");
    CHECK(e.errors()[1].message == "unknown key 'rope_theta'");
  }

  // A value the model refuses is named by the file and its key there, not only the model's.
  config.erase("rope_theta");
  config["architectures"] = boost::json::array{"TinyForCausalLM"};
  config["hidden_size"] = "8";
  std::ofstream(dir / "hf" / "config.json") << boost::json::serialize(config);
  try {
    (void)cairn::external::load_config(conv, dir / "hf");
    FAIL("accepted");
  } catch (cairn::config_error const& e) {
    REQUIRE(e.errors().size() == 1);
    CHECK(e.errors()[0].path == (dir / "hf" / "config.json").string() + ": hidden_size");
    CHECK(e.errors()[0].message.find("(the model's hidden)") != std::string::npos);
  }
}

TEST_CASE("an export knows its files before it moves data: rules run on meta tensors, or once when they cannot") {
  temp_dir dir;
  tiny_model model;
  auto state = tiny_state(model, false, true);
  cairn::checkpoint_save_config save;
  save.path = dir / "hf";
  cairn::checkpoint_load_config load;
  load.path = dir / "hf";

  // A rule with an operation that has no meta kernel (here: one that refuses meta tensors) is
  // run once to learn its shapes; the export is the same.
  auto conv = tiny_converter();
  auto plain = conv.weights;
  int real_runs = 0;
  conv.weights = [&](tiny_model const& m) {
    auto rules = plain(m);
    auto inner = rules[0].to_theirs;
    rules[0].to_theirs = [&real_runs, inner](std::vector<at::Tensor> const& t) {
      if (t[0].is_meta()) throw std::runtime_error("no meta kernel");
      ++real_runs;
      return inner(t);
    };
    return rules;
  };
  cairn::external::save(state, comm, conv, model, save);
  CHECK(real_runs == 2); // once to plan, once to write
  auto loaded = tiny_state(model, true, false);
  cairn::external::load(loaded, comm, tiny_converter(), model, load);
  for (std::size_t i = 0; i < state.parameters.size(); ++i)
    CHECK(loaded.parameters[i].shards[0].equal(state.parameters[i].shards[0]));

  // A rule that gives other shapes on real tensors than on meta ones is refused; nothing is left
  // half written under the final names.
  std::filesystem::remove_all(dir / "hf");
  conv.weights = [&](tiny_model const& m) {
    auto rules = plain(m);
    rules[0].to_theirs = [](std::vector<at::Tensor> const& t) {
      return std::vector<at::Tensor>{t[0].is_meta() ? t[0] : t[0].t().contiguous()};
    };
    return rules;
  };
  CHECK_THROWS_WITH_AS(cairn::external::save(state, comm, conv, model, save),
                       "the weight rule for 'model.embed_tokens.weight' gave other shapes or types than it does on "
                       "meta tensors",
                       cairn::error);
  CHECK_KIND(cairn::external::save(state, comm, conv, model, save), cairn::checkpoint_errc::mismatch);
  CHECK_FALSE(std::filesystem::exists(dir / "hf" / "model.safetensors"));
  CHECK_FALSE(std::filesystem::exists(dir / "hf" / "config.json"));
}

TEST_CASE("a checkpointer saves and loads every format, the external one through the converter bound to it") {
  temp_dir dir;
  tiny_model model;
  auto state = tiny_state(model, false, true);
  auto bound = cairn::external::bind(tiny_converter(), model);
  CHECK(bound.model_type == "tiny");
  CHECK(bound.config.at("model_type") == "tiny");
  cairn::checkpoint_save_config save;
  save.path = dir / "hf";
  save.format = cairn::checkpoint_format::external;
  // Without it, the error says what to give.
  CHECK_THROWS_WITH_AS(cairn::save_checkpoint(state, comm, save), doctest::Contains("takes the model's converter"),
                       cairn::config_error);
  cairn::checkpointer checkpoints(comm, {}, bound);
  checkpoints.save(state, save);
  // The same files as the converter's own save writes.
  cairn::checkpoint_save_config direct = save;
  direct.path = dir / "direct";
  cairn::external::save(state, comm, tiny_converter(), model, direct);
  cairn::io::safetensors_file a(dir / "hf" / "model.safetensors"), b(dir / "direct" / "model.safetensors");
  REQUIRE(a.tensors().size() == b.tensors().size());
  for (auto const& t : a.tensors()) {
    auto bytes_a = a.bytes(t), bytes_b = b.bytes(b.at(t.name));
    CHECK(std::equal(bytes_a.begin(), bytes_a.end(), bytes_b.begin(), bytes_b.end()));
  }
  CHECK(cairn::read_json_file(dir / "hf" / "config.json") == cairn::read_json_file(dir / "direct" / "config.json"));

  auto loaded = tiny_state(model, true, false);
  cairn::checkpoint_load_config load;
  load.path = dir / "hf";
  load.format = cairn::checkpoint_format::external;
  auto metadata = checkpoints.load(loaded, load);
  CHECK(metadata.format == cairn::checkpoint_format::external);
  CHECK(metadata.config.at("hidden_size") == 4);
  for (std::size_t i = 0; i < state.parameters.size(); ++i)
    CHECK(loaded.parameters[i].shards[0].equal(state.parameters[i].shards[0]));
  // The other formats ignore the converter.
  save.format = cairn::checkpoint_format::state_dict;
  save.path = dir / "sd";
  checkpoints.save(state, save);
  CHECK(cairn::verify_checkpoint(dir / "sd").ok());
  // A load config naming another model type is refused, naming both.
  load.model_type = "llama";
  CHECK_THROWS_WITH_AS(checkpoints.load(loaded, load),
                       doctest::Contains("\"llama\" has no converter in this program (it converts \"tiny\")"),
                       cairn::config_error);
}

TEST_CASE(
    "an export's plan: files of whole rules, each rule's outputs in order, the index and config.json closing it") {
  tiny_model model;
  auto state = tiny_state(model, false, true);
  auto bound = cairn::external::bind(tiny_converter(), model);
  cairn::checkpoint_save_config save;
  save.format = cairn::checkpoint_format::external;
  save.parameters_per_file = std::uint64_t{1} << 20;
  auto plan = cairn::checkpointer(comm, {}, bound).plan(state, save);
  REQUIRE(plan.files.size() == 1);
  CHECK(plan.files[0].name == "model.safetensors");
  CHECK(plan.files[0].writer == 0);
  CHECK(plan.files[0].metadata.at("format") == "pt");
  std::size_t expected = 0;
  for (auto const& rule : bound.weights) expected += rule.theirs.size();
  CHECK(plan.files[0].items.size() == expected);
  for (auto const& item : plan.files[0].items) {
    CHECK(item.source == cairn::write_source::converted);
    CHECK(bound.weights.at(item.rule).theirs.at(item.output) == item.tensor);
  }
  REQUIRE(plan.closing.size() == 1);
  CHECK(plan.closing[0].name == "config.json");
  auto described = cairn::describe(plan);
  CHECK(described.at("format") == "external");
  CHECK(described.at("files").at(0).at("tensors").as_array().size() == expected);
}

namespace {
struct one_matrix {
  std::int64_t rows = 8;
};
BOOST_DESCRIBE_STRUCT(one_matrix, (), (rows))
} // namespace

TEST_CASE("an import reads each rank's rows of a renamed tensor where they lie, converting; bytes_read counts it") {
  temp_dir dir;
  std::vector<float> values(8 * 16);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = 0.25f * float(i);
  cairn::external::converter<one_matrix> conv;
  conv.model_type = "one";
  conv.config.renamed("rows", "rows");
  conv.weights = [](one_matrix const&) {
    return std::vector<cairn::external::weight_rule>{cairn::external::renamed("w", "model.w")};
  };
  auto write = [&](cairn::io::dtype stored, cairn::io::checksums policy) {
    std::filesystem::create_directories(dir / "hf");
    std::ofstream(dir / "hf" / "config.json") << R"({"model_type": "one", "rows": 8})";
    cairn::io::safetensors_writer writer(dir / "hf" / "model.safetensors", policy);
    writer.set_metadata("format", "pt");
    writer.add("model.w", cairn::io::dtype::F32, {8, 16}, std::as_bytes(std::span(values)), stored);
    writer.write();
  };
  cairn::checkpoint_load_config from;
  from.path = dir / "hf";
  from.format = cairn::checkpoint_format::external;
  // Rank 1 of 2 of a tensor-parallel group: rows 4 to 7, placed without the whole tensor.
  auto rank_state = [] {
    cairn::model_state state;
    state.shard_names = {"weights", "exp_avg"};
    auto place = cairn::place_on_grid({8, 16}, cairn::tensor_split::rows, 1, 2, 0, 1, 0);
    auto& p = cairn::add_parameter(state, "w", {8, 16}, place);
    CHECK(p.shards.size() == 2);
    CHECK(p.shards[0].numel() == 64);
    CHECK(p.layout.shard.offsets == std::vector<std::uint64_t>{4, 0});
    return state;
  };
  auto rows_4_to_7 = at::from_blob(values.data(), {8, 16}, at::kFloat).slice(0, 4, 8).reshape({-1});

  SUBCASE("a file of another tool, F32: the rank reads its 64 elements alone") {
    write(cairn::io::dtype::F32, cairn::io::checksums::skip);
    auto state = rank_state();
    auto before = cairn::bytes_read();
    cairn::external::load(state, comm, conv, one_matrix{}, from);
    auto read = cairn::bytes_read() - before;
    CHECK(read.tensor_bytes == 64 * 4);
    CHECK(read.files == 1);
    CHECK(read.header_bytes > 8);
    CHECK(read.header_bytes < 512);
    CHECK(state.parameters[0].shards[0].equal(rows_4_to_7));
  }
  SUBCASE("F16 and BF16 files: converted to the state's float32, half the bytes read") {
    for (auto stored : {cairn::io::dtype::F16, cairn::io::dtype::BF16}) {
      write(stored, cairn::io::checksums::skip);
      auto state = rank_state();
      auto before = cairn::bytes_read();
      cairn::external::load(state, comm, conv, one_matrix{}, from);
      CHECK((cairn::bytes_read() - before).tensor_bytes == 64 * 2);
      CHECK(state.parameters[0].shards[0].equal(rows_4_to_7)); // multiples of 0.25 below 32: exact in both
    }
  }
  SUBCASE("a file cairn wrote: each tensor's checksum checked, so read whole; a corrupt one refused") {
    write(cairn::io::dtype::F32, cairn::io::checksums::record);
    auto state = rank_state();
    auto before = cairn::bytes_read();
    cairn::external::load(state, comm, conv, one_matrix{}, from);
    CHECK((cairn::bytes_read() - before).tensor_bytes == 128 * 4);
    CHECK(state.parameters[0].shards[0].equal(rows_4_to_7));
    values[3] = -1; // in rows this rank does not load: the checksum still sees it
    {
      cairn::io::safetensors_file file(dir / "hf" / "model.safetensors");
      auto recorded = file.metadata().at(cairn::io::checksum_key("model.w"));
      cairn::io::safetensors_writer writer(dir / "hf" / "model.safetensors", cairn::io::checksums::skip);
      writer.set_metadata("format", "pt");
      writer.set_metadata(cairn::io::checksum_key("model.w"), recorded);
      writer.add("model.w", cairn::io::dtype::F32, {8, 16}, std::as_bytes(std::span(values)));
      writer.write();
    }
    CHECK_THROWS_WITH_AS(cairn::external::load(state, comm, conv, one_matrix{}, from),
                         doctest::Contains("checksum does not match"), cairn::checkpoint_error);
  }
  SUBCASE("a second copy of a tensor in another file, or one the index does not map: refused, naming both") {
    std::filesystem::create_directories(dir / "hf");
    std::ofstream(dir / "hf" / "config.json") << R"({"model_type": "one", "rows": 8})";
    std::vector<float> other(values.size(), 0.5f);
    for (auto [name, data] : {std::pair{"model-00001-of-00002.safetensors", &other},
                              std::pair{"model-00002-of-00002.safetensors", &values}}) {
      cairn::io::safetensors_writer writer(dir / "hf" / name, cairn::io::checksums::skip);
      writer.add("model.w", cairn::io::dtype::F32, {8, 16}, std::as_bytes(std::span(*data)));
      if (data == &values) {
        writer.add("model.extra", cairn::io::dtype::F32, {2}, std::as_bytes(std::span(*data)).first(8));
        writer.add("model.unlisted", cairn::io::dtype::F32, {2}, std::as_bytes(std::span(*data)).first(8));
      }
      writer.write();
    }
    cairn::io::safetensors_index index;
    index.weight_map = {{"model.w", "model-00001-of-00002.safetensors"},
                        {"model.extra", "model-00002-of-00002.safetensors"}};
    cairn::io::write_index(dir / "hf" / "model.safetensors.index.json", index);
    auto state = rank_state();
    CHECK_THROWS_WITH_AS(
        cairn::external::load(state, comm, conv, one_matrix{}, from),
        doctest::Contains(
            "model.w: in two files, model-00002-of-00002.safetensors and model-00001-of-00002.safetensors"),
        cairn::checkpoint_error);
    auto report = cairn::verify_checkpoint(dir / "hf");
    auto problems = std::accumulate(report.problems.begin(), report.problems.end(), std::string(),
                                    [](std::string a, std::string const& b) { return a + b + "\n"; });
    CHECK(problems.find("holds a second copy of 'model.w', which model.safetensors.index.json maps to "
                        "model-00001-of-00002.safetensors") != std::string::npos);
    CHECK(problems.find("holds 'model.unlisted', which model.safetensors.index.json does not map") !=
          std::string::npos);
  }
  SUBCASE("an index naming one file two ways (\"./a\" and \"a\") names one file") {
    std::filesystem::create_directories(dir / "hf");
    std::ofstream(dir / "hf" / "config.json") << R"({"model_type": "one", "rows": 8})";
    {
      cairn::io::safetensors_writer writer(dir / "hf" / "model-00001-of-00001.safetensors", cairn::io::checksums::skip);
      writer.add("model.w", cairn::io::dtype::F32, {8, 16}, std::as_bytes(std::span(values)));
      writer.add("model.v", cairn::io::dtype::F32, {8, 16}, std::as_bytes(std::span(values)));
      writer.write();
    }
    cairn::io::safetensors_index index;
    index.weight_map = {{"model.w", "./model-00001-of-00001.safetensors"},
                        {"model.v", "model-00001-of-00001.safetensors"}};
    cairn::io::write_index(dir / "hf" / "model.safetensors.index.json", index);
    auto two = conv;
    two.weights = [](one_matrix const&) {
      return std::vector<cairn::external::weight_rule>{cairn::external::renamed("w", "model.w"),
                                                       cairn::external::renamed("v", "model.v")};
    };
    auto state = rank_state();
    cairn::add_parameter(state, "v", {8, 16}, cairn::place_on_grid({8, 16}, cairn::tensor_split::rows, 1, 2, 0, 1, 0));
    cairn::external::load(state, comm, two, one_matrix{}, from);
    CHECK(state.parameters[1].shards[0].equal(rows_4_to_7));
    CHECK(cairn::verify_checkpoint(dir / "hf").ok());
  }
  SUBCASE("a tensor the converter skips (a buffer an older writer saved) is skipped; others are refused") {
    std::filesystem::create_directories(dir / "hf");
    std::ofstream(dir / "hf" / "config.json") << R"({"model_type": "one", "rows": 8})";
    {
      cairn::io::safetensors_writer writer(dir / "hf" / "model.safetensors", cairn::io::checksums::skip);
      writer.add("model.w", cairn::io::dtype::F32, {8, 16}, std::as_bytes(std::span(values)));
      writer.add("model.buffer", cairn::io::dtype::F32, {2}, std::as_bytes(std::span(values)).first(8));
      writer.write();
    }
    auto state = rank_state();
    CHECK_THROWS_WITH_AS(cairn::external::load(state, comm, conv, one_matrix{}, from),
                         doctest::Contains("model.buffer: in the checkpoint but not mapped by the one converter"),
                         cairn::checkpoint_error);
    auto skipping = conv;
    skipping.skipped = [](std::string const& name) { return name == "model.buffer"; };
    cairn::external::load(state, comm, skipping, one_matrix{}, from);
    CHECK(state.parameters[0].shards[0].equal(rows_4_to_7));
    state.parameters[0].shards[0].zero_();
    cairn::checkpointer(comm, {}, cairn::external::bind(skipping, one_matrix{})).load(state, from); // bound alike
    CHECK(state.parameters[0].shards[0].equal(rows_4_to_7));
  }
  SUBCASE("a tensor of another shape is refused, naming the parameter") {
    std::filesystem::create_directories(dir / "hf");
    std::ofstream(dir / "hf" / "config.json") << R"({"model_type": "one", "rows": 8})";
    cairn::io::safetensors_writer writer(dir / "hf" / "model.safetensors", cairn::io::checksums::skip);
    writer.add("model.w", cairn::io::dtype::F32, {16, 8}, std::as_bytes(std::span(values)));
    writer.write();
    auto state = rank_state();
    CHECK_THROWS_WITH_AS(cairn::external::load(state, comm, conv, one_matrix{}, from),
                         doctest::Contains("w: has another shape in the checkpoint"), cairn::checkpoint_error);
  }
}

TEST_CASE("an external save without the model's weights is refused: the format holds nothing else") {
  CHECK_THROWS_WITH_AS(cairn::from_json<cairn::checkpoint_save_config>(
                           boost::json::object{{"path", "out"}, {"format", "external"}, {"model_weights", false}}),
                       doctest::Contains("model_weights: is false, but the external format holds the model's weights"),
                       cairn::config_error);
  CHECK_NOTHROW(cairn::from_json<cairn::checkpoint_save_config>(
      boost::json::object{{"path", "out"}, {"format", "external"}, {"model_weights", true}}));
  // A config filled in by hand, never validated: refused by the save itself, before any file.
  temp_dir dir;
  tiny_model model;
  auto state = tiny_state(model, false, true);
  cairn::checkpoint_save_config save;
  save.path = dir / "out";
  save.format = cairn::checkpoint_format::external;
  save.model_weights = false;
  save.optimizer_state = false;
  CHECK_THROWS_WITH_AS(cairn::external::save(state, comm, tiny_converter(), model, save),
                       doctest::Contains("model_weights: is false"), cairn::config_error);
  CHECK_FALSE(std::filesystem::exists(dir / "out"));
}
