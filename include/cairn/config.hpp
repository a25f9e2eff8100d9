#pragma once

/// cairn's configuration layer: described structs read from JSON and overrides, validated,
/// compared, documented and exported as JSON Schema. No libtorch.

#include <cairn/config/check.hpp>
#include <cairn/config/command_line.hpp>
#include <cairn/config/compare.hpp>
#include <cairn/config/docs.hpp>
#include <cairn/config/field.hpp>
#include <cairn/config/hint.hpp>
#include <cairn/config/json.hpp>
#include <cairn/config/legacy.hpp>
#include <cairn/config/mixin.hpp>
#include <cairn/config/override.hpp>
#include <cairn/config/reflect.hpp>
#include <cairn/config/schema.hpp>
#include <cairn/config/validation.hpp>
#include <cairn/config/value.hpp>
#include <cairn/diagnostics.hpp>
#include <cairn/error.hpp>
