// own-trainer: the trainer of docs/own-trainer.md as a program, built as a user's program is
// (examples/own/CMakeLists.txt: find_package(cairn)).
#include "own_trainer.hpp"

int main(int argc, char** argv) {
  auto cfg = cairn::parse_command_line<own_config>(argc, argv); // --config, key.path=value, --help
  if (!cfg) return cfg.exit_status();
  return cairn::exit_status("own-trainer", [&] { return train(*cfg); });
}
