// One rank of the multi-process format tests, started by `cairn launch -n N`:
//
//     checkpoint_formats_worker save DIR FORMAT SCHEME     a known model, saved
//     checkpoint_formats_worker load DIR FORMAT SCHEME     loaded into this world's layout, checked
//
// Any world size and scheme may load what any other saved: that is resharding.
#include <cairn/comm.hpp>

#include <cstdio>
#include <string>

#include "model.hpp"

int main(int argc, char** argv) {
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
