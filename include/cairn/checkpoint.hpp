#pragma once
// cairn: requires libtorch

/// cairn's checkpoint layer, the mechanism: sharded model state and its layouts, the formats
/// (distributed, state_dict, external through converters), save_checkpoint / load_checkpoint,
/// the directory of saves, verification and conversion. The checkpoint manager and the run
/// policy are the training layer's (<cairn/training/manager.hpp>, <cairn/training/run.hpp>).

#include <cairn/checkpoint/accounting.hpp>
#include <cairn/checkpoint/config.hpp>
#include <cairn/checkpoint/convert.hpp>
#include <cairn/checkpoint/converters/llama.hpp>
#include <cairn/checkpoint/converters/llama_model.hpp>
#include <cairn/checkpoint/directory.hpp>
#include <cairn/checkpoint/external.hpp>
#include <cairn/checkpoint/format_files.hpp>
#include <cairn/checkpoint/generator.hpp>
#include <cairn/checkpoint/layout.hpp>
#include <cairn/checkpoint/layout_rules.hpp>
#include <cairn/checkpoint/load_plan.hpp>
#include <cairn/checkpoint/metadata.hpp>
#include <cairn/checkpoint/model_program.hpp>
#include <cairn/checkpoint/plan.hpp>
#include <cairn/checkpoint/save_load.hpp>
#include <cairn/checkpoint/state.hpp>
#include <cairn/checkpoint/stored_config.hpp>
#include <cairn/checkpoint/verify.hpp>
#include <cairn/checkpoint/weight_rule.hpp>
