// One rank of the multi-process format tests, started by `cairn launch -n N`:
//
//     checkpoint_formats_worker save DIR FORMAT SCHEME     a known model, saved
//     checkpoint_formats_worker load DIR FORMAT SCHEME     loaded into this world's layout, checked
//     checkpoint_formats_worker export DIR                 the tiny model exported in several
//                                                          files (written by several ranks), loaded back
//
// Any world size and scheme may load what any other saved: that is resharding.
#include <cairn/comm.hpp>

#include <cstdio>
#include <string>

#include "model.hpp"
#include "tiny_model.hpp"

namespace {

int export_and_load(char const* dir) {
  auto comm = cairn::comm::gloo_from_environment(std::chrono::seconds(60));
  test_model::tiny_model model{8, 3, 16};
  auto conv = test_model::tiny_converter();
  auto state = test_model::tiny_state(model, true, true, comm.rank(), comm.size());
  cairn::checkpoint_save_config save;
  save.path = dir;
  save.parameters_per_file = 200; // below what a config allows: several files, so several writers
  cairn::external::save(state, comm, conv, model, save);
  auto files = cairn::io::read_index(save.path / "model.safetensors.index.json").files().size();

  // Loaded into another layout (whole on every rank), every element where it was.
  auto whole = test_model::tiny_state(model, false, true);
  auto loaded = test_model::tiny_state(model, false, false);
  cairn::checkpoint_load_config load;
  load.path = dir;
  cairn::external::load(loaded, comm, conv, model, load);
  long long bad = 0;
  for (std::size_t i = 0; i < whole.parameters.size(); ++i)
    bad += loaded.parameters[i].shards[0].ne(whole.parameters[i].shards[0]).sum().item<std::int64_t>();
  std::printf("rank %d of %d: exported %zu files, loaded back, %lld wrong elements\n", comm.rank(), comm.size(), files,
              bad);
  return bad == 0 && files >= 3 ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "export") {
    try {
      return export_and_load(argv[2]);
    } catch (std::exception const& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      return 1;
    }
  }
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s save|load DIR distributed|state_dict dim|flat|mixed\n", argv[0]);
    return 2;
  }
  std::string mode = argv[1];
  try {
    auto comm = cairn::comm::gloo_from_environment(std::chrono::seconds(60));
    auto how = test_model::parse_scheme(argv[4]);
    auto format = std::string(argv[3]) == "state_dict" ? cairn::checkpoint_format::state_dict
                                                       : cairn::checkpoint_format::distributed;
    if (mode == "save") {
      auto state = test_model::make(how, comm.rank(), comm.size(), true);
      cairn::checkpoint_save_config config;
      config.path = argv[2];
      config.format = format;
      config.optimizer_state = true;
      config.parameters_per_file = std::uint64_t{1} << 20;
      cairn::save_checkpoint(state, comm, config, boost::json::object{{"program", "worker"}},
                             boost::json::object{{"iteration", 42}});
      return 0;
    }
    auto state = test_model::make(how, comm.rank(), comm.size(), false);
    cairn::checkpoint_load_config config;
    config.path = argv[2];
    config.format = format;
    config.optimizer_state = true;
    auto metadata = cairn::load_checkpoint(state, comm, config);
    auto bad = test_model::mismatches(state);
    if (metadata.metadata.at("iteration") != 42) bad += 1;
    std::printf("rank %d of %d: loaded %s (%s layout), %lld wrong elements\n", comm.rank(), comm.size(), argv[3],
                argv[4], static_cast<long long>(bad));
    return bad == 0 ? 0 : 1;
  } catch (std::exception const& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
