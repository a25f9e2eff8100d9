// Definitions of <cairn/config/legacy.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/config/legacy.hpp>

#include <boost/json/object.hpp>

namespace cairn::legacy {

CAIRN_DECL legacy_rule rename(std::string old_key, std::string new_key) {
  auto summary = old_key + " -> " + new_key;
  std::vector<std::string> old_keys{old_key};
  return {std::move(summary),
          [old_key = std::move(old_key), new_key = std::move(new_key)](boost::json::object& object,
                                                                       legacy_context const& context) {
            auto it = object.find(old_key);
            if (it == object.end()) return;
            if (object.contains(new_key)) {
              context.error(old_key, "both '" + old_key + "' (deprecated) and '" + new_key +
                                         "' are given; keep only '" + new_key + "'");
              object.erase(it); // reported once: later passes see only the new key
              return;
            }
            context.deprecated(old_key, "renamed to '" + new_key + "'");
            auto value = std::move(it->value());
            object.erase(it);
            object[new_key] = std::move(value);
          },
          std::move(old_keys)};
}

CAIRN_DECL legacy_rule rename_value(std::string key, std::string old_value, std::string new_value) {
  auto summary = key + ": \"" + old_value + "\" -> \"" + new_value + "\"";
  return {std::move(summary),
          [key = std::move(key), old_value = std::move(old_value),
           new_value = std::move(new_value)](boost::json::object& object, legacy_context const& context) {
            auto* value = object.if_contains(key);
            if (!value || !value->is_string() || value->get_string() != old_value) return;
            context.deprecated(key, "value " + detail::show(old_value) + " is now " + detail::show(new_value));
            *value = boost::json::string(new_value);
          }};
}

CAIRN_DECL legacy_rule merge(std::vector<std::string> old_keys, std::string new_key,
                             std::function<boost::json::value(boost::json::object const&)> combine) {
  std::string summary;
  for (auto const& key : old_keys) summary += (summary.empty() ? "" : ", ") + key;
  summary += " -> " + new_key;
  auto listed = old_keys;
  return {std::move(summary),
          [old_keys = std::move(old_keys), new_key = std::move(new_key),
           combine = std::move(combine)](boost::json::object& object, legacy_context const& context) {
            boost::json::object old;
            for (auto const& key : old_keys)
              if (auto* value = object.if_contains(key)) old[key] = *value;
            if (old.empty()) return;
            auto const& first = old.begin()->key();
            if (object.contains(new_key)) {
              context.error(first, "deprecated key '" + std::string(first) + "' given together with '" + new_key +
                                       "'; keep only '" + new_key + "'");
              for (auto const& key : old_keys) object.erase(key);
              return;
            }
            for (auto const& entry : old) context.deprecated(entry.key(), "merged into '" + new_key + "'");
            try {
              object[new_key] = combine(old);
            } catch (std::exception const& e) {
              context.error(first, e.what());
            }
            for (auto const& key : old_keys) object.erase(key);
          },
          std::move(listed)};
}

} // namespace cairn::legacy
