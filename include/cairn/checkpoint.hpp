#pragma once
// cairn: requires libtorch

/// cairn's checkpoint layer: sharded model state, its layouts, the formats (distributed,
/// state_dict, external through converters), save_checkpoint / load_checkpoint, the directory
/// of saves and the checkpoint manager.

#include <cairn/checkpoint/config.hpp>
#include <cairn/checkpoint/directory.hpp>
#include <cairn/checkpoint/external.hpp>
#include <cairn/checkpoint/layout.hpp>
#include <cairn/checkpoint/manager.hpp>
#include <cairn/checkpoint/metadata.hpp>
#include <cairn/checkpoint/save_load.hpp>
#include <cairn/checkpoint/state.hpp>
#include <cairn/checkpoint/stored_config.hpp>
