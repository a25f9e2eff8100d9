// Comparing configs field by field, and architecture fields alone.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "fixtures.hpp"

namespace {

std::vector<std::string> paths(std::vector<cairn::difference> const& differences) {
  std::vector<std::string> out;
  for (auto const& d : differences) out.push_back(d.path);
  return out;
}

} // namespace

TEST_CASE("compare lists each differing field by path") {
  fixture::trainer_config a, b;
  CHECK(cairn::compare(a, b).empty());
  b.model.layers = 3;
  b.optimizer.betas = {0.5};
  b.seed = 1;
  auto differences = cairn::compare(a, b);
  CHECK(paths(differences) == std::vector<std::string>{"model.layers", "optimizer.betas", "seed"});
  // The values, as compact JSON text.
  CHECK(differences[0].left == "2");
  CHECK(differences[0].right == "3");
  CHECK(differences[1].left == "[0.9, 0.999]");
  CHECK(differences[1].right == "[0.5]");
}

TEST_CASE("architecture comparison looks only at architecture fields, at any depth") {
  fixture::trainer_config a, b;
  b.model.dropout = 0.5; // inside the architecture-hinted `model`: counted
  b.seed = 99;           // not architecture: ignored
  CHECK(paths(cairn::compare(a, b, cairn::field_selection::architecture)) == std::vector<std::string>{"model.dropout"});

  fixture::model_config m1, m2;
  m2.hidden_size = 128;
  m2.dropout = 0.1; // in model_config itself only hidden_size and layers are architecture
  CHECK(paths(cairn::compare(m1, m2, cairn::field_selection::architecture)) == std::vector<std::string>{"hidden_size"});
}

TEST_CASE("the caller chooses whether an architecture mismatch is an error or a warning") {
  fixture::model_config saved, wanted;
  wanted.layers = 4;
  CHECK_THROWS_WITH_AS(cairn::check_architecture(saved, wanted, cairn::on_mismatch::error, "checkpoint architecture"),
                       "1 config error:\n  layers: checkpoint architecture differs: expected 2, got 4",
                       cairn::config_error);

  std::vector<std::string> warnings;
  cairn::scoped_diagnostic_sink sink(
      [&](cairn::severity, cairn::diagnostic const& d) { warnings.push_back(d.to_string()); });
  CHECK_NOTHROW(cairn::check_architecture(saved, wanted, cairn::on_mismatch::warning, "checkpoint architecture"));
  CHECK(warnings == std::vector<std::string>{"layers: checkpoint architecture differs: expected 2, got 4"});
  CHECK_NOTHROW(cairn::check_architecture(saved, saved, cairn::on_mismatch::error, "checkpoint architecture"));
}

TEST_CASE("copy_fields takes the architecture of one config into another") {
  fixture::model_config stored{256, 8, 0.3};
  fixture::model_config mine{64, 2, 0.1};
  cairn::copy_fields(mine, stored, cairn::field_selection::architecture);
  CHECK(mine.hidden_size == 256);
  CHECK(mine.layers == 8);
  CHECK(mine.dropout == 0.1);
}
