// Definitions of <cairn/config/reflect.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/config/reflect.hpp>

#include <boost/json/value.hpp>

#include <memory>

namespace cairn::detail {

CAIRN_DECL config_ops const& make_config_ops(std::string_view name, void (*validate_chain)(void*, validation&),
                                             void const* (*defaults)(), void (*fill)(config_ops&, void const*)) {
  // Kept for the program, never destroyed: no config's table is torn down before a use of it.
  auto ops = std::make_unique<config_ops>(config_ops{name, {}, {}, validate_chain, defaults});
  fill(*ops, defaults());
  return *ops.release();
}

CAIRN_DECL void add_legacy_rules(std::vector<legacy_rule>& rules, std::vector<legacy_rule> more) {
  for (auto& rule : more) {
    bool seen = false;
    for (auto const& r : rules) seen = seen || r.summary() == rule.summary();
    if (!seen) rules.push_back(std::move(rule));
  }
}

CAIRN_DECL void apply_field_entries(config_ops& ops, std::span<field_entry const> entries) {
  for (auto const& entry : entries) {
    auto* field = ops.at_offset(entry.offset);
    if (!field) continue; // a member that is not described: nothing to attach the metadata to
    if (entry.description) field->description = *entry.description;
    if (entry.hint) field->hint = *entry.hint;
    if (entry.checks) entry.erase(entry.checks, field->checks);
  }
}

CAIRN_DECL void add_fields(config_ops& ops, std::span<char const* const> names, std::span<std::size_t const> offsets,
                           std::span<type_ops const* const> types) {
  ops.fields.reserve(names.size());
  for (std::size_t i = 0; i < names.size(); ++i) {
    std::string_view name = names[i];
    if (name.size() > 1 && name.back() == '_') name.remove_suffix(1);
    ops.fields.push_back({name, {}, cairn::hint::core, {}, offsets[i], types[i]});
  }
}

CAIRN_DECL std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

CAIRN_DECL std::string unknown_key_message(config_ops const& ops, std::string_view key) {
  std::string_view best;
  std::size_t best_distance = 3;
  for (auto const& f : ops.fields) {
    auto distance = edit_distance(key, f.name);
    if (distance < best_distance) {
      best = f.name;
      best_distance = distance;
    }
  }
  std::string message = "unknown key in " + std::string(ops.name);
  if (!best.empty()) message += "; did you mean '" + std::string(best) + "'?";
  return message;
}

CAIRN_DECL void apply_rules(config_ops const& ops, boost::json::object& object, read_context& ctx) {
  if (ops.legacy.empty()) return;
  legacy_context context(ctx, ops.name);
  for (auto const& rule : ops.legacy) rule.apply(object, context);
}

CAIRN_DECL void read_value(type_ops const& type, boost::json::value const& j, void* value, read_context& ctx) {
  if (type.config) return read_config(type.config(), j, value, ctx);
  if (!type.container) return type.read(j, value, ctx);
  auto const& c = *type.container;
  switch (c.kind) {
  case container_kind::optional:
    if (j.is_null())
      c.clear(value);
    else
      read_value(*c.element, j, c.emplace(value), ctx);
    return;
  case container_kind::vector: {
    if (!j.is_array()) return ctx.error("expected an array, got " + describe_json(j));
    auto const& array = j.get_array();
    c.resize(value, array.size());
    for (std::size_t i = 0; i < array.size(); ++i) {
      auto scope = ctx.enter(i);
      read_value(*c.element, array[i], c.at(value, i), ctx);
    }
    return;
  }
  case container_kind::map:
    if (!j.is_object()) return ctx.error("expected an object, got " + describe_json(j));
    c.clear(value);
    for (auto const& entry : j.get_object()) {
      auto scope = ctx.enter(entry.key());
      read_value(*c.element, entry.value(), c.insert(value, entry.key()), ctx);
    }
    return;
  }
}

CAIRN_DECL boost::json::value write_value(type_ops const& type, void const* value) {
  if (type.config) return write_config(type.config(), value);
  if (!type.container) {
    boost::json::value out;
    type.write(value, out);
    return out;
  }
  auto const& c = *type.container;
  auto* mutable_value = const_cast<void*>(value); // the container operations do not modify it here
  switch (c.kind) {
  case container_kind::optional:
    return c.size(value) ? write_value(*c.element, c.at(mutable_value, 0)) : boost::json::value(nullptr);
  case container_kind::vector: {
    boost::json::array out;
    out.reserve(c.size(value));
    for (std::size_t i = 0; i < c.size(value); ++i) out.push_back(write_value(*c.element, c.at(mutable_value, i)));
    return out;
  }
  case container_kind::map: {
    boost::json::object out;
    std::pair<boost::json::object*, type_ops const*> context{&out, c.element};
    c.for_each(mutable_value, &context, [](void* p, std::string_view key, void* element) {
      auto& [object, ops] = *static_cast<std::pair<boost::json::object*, type_ops const*>*>(p);
      (*object)[key] = write_value(*ops, element);
    });
    return out;
  }
  }
  return nullptr;
}

CAIRN_DECL std::string type_name_of(type_ops const& type) {
  if (type.config) return std::string(type.config().name);
  if (!type.container) return type.type_name();
  auto const& c = *type.container;
  auto element = type_name_of(*c.element);
  switch (c.kind) {
  case container_kind::optional:
    return "optional<" + element + ">";
  case container_kind::vector:
    return "list<" + element + ">";
  case container_kind::map:
    return "map<string, " + element + ">";
  }
  return element;
}

CAIRN_DECL void schema_of(type_ops const& type, boost::json::object& s) {
  if (type.config) return config_schema(type.config(), s);
  if (!type.container) return type.schema(s);
  auto const& c = *type.container;
  boost::json::object inner;
  schema_of(*c.element, inner);
  switch (c.kind) {
  case container_kind::optional:
    if (auto* list = inner.if_contains("enum"); list && list->is_array()) list->as_array().emplace_back(nullptr);
    if (auto* kind = inner.if_contains("type"); kind && kind->is_string() && !inner.contains("properties")) {
      boost::json::array both{*kind, "null"};
      inner["type"] = std::move(both);
      for (auto& entry : inner) s[entry.key()] = entry.value();
    } else {
      s["anyOf"] = boost::json::array{std::move(inner), boost::json::object{{"type", "null"}}};
    }
    return;
  case container_kind::vector:
    s["type"] = "array";
    s["items"] = std::move(inner);
    return;
  case container_kind::map:
    s["type"] = "object";
    s["additionalProperties"] = std::move(inner);
    return;
  }
}

CAIRN_DECL value_kind kind_of(type_ops const& type, std::span<std::string_view const> path) {
  if (type.config) return config_kind_at(type.config(), path);
  if (type.container && type.container->kind == container_kind::optional)
    return kind_of(*type.container->element, path);
  if (type.container && type.container->kind == container_kind::map)
    return path.empty() ? value_kind::json : kind_of(*type.container->element, path.subspan(1));
  if (!path.empty()) return value_kind::unknown;
  return type.textual ? value_kind::text : value_kind::json;
}

CAIRN_DECL void validate_value(type_ops const& type, void* value, validation& ctx) {
  if (type.config) return validate_config(type.config(), value, ctx);
  if (!type.container || !type.holds_config) return;
  auto const& c = *type.container;
  switch (c.kind) {
  case container_kind::optional:
    if (c.size(value)) validate_value(*c.element, c.at(value, 0), ctx);
    return;
  case container_kind::vector:
    for (std::size_t i = 0; i < c.size(value); ++i) {
      auto scope = ctx.enter(i);
      validate_value(*c.element, c.at(value, i), ctx);
    }
    return;
  case container_kind::map: {
    std::pair<validation*, type_ops const*> context{&ctx, c.element};
    c.for_each(value, &context, [](void* p, std::string_view key, void* element) {
      auto& [validate, ops] = *static_cast<std::pair<validation*, type_ops const*>*>(p);
      auto scope = validate->enter(key);
      validate_value(*ops, element, *validate);
    });
    return;
  }
  }
}

CAIRN_DECL void apply_legacy_value(type_ops const& type, boost::json::value& j, read_context& ctx) {
  if (type.config) return apply_config_legacy(type.config(), j, ctx);
  if (!type.container || !type.holds_config) return;
  auto const& c = *type.container;
  switch (c.kind) {
  case container_kind::optional:
    if (!j.is_null()) apply_legacy_value(*c.element, j, ctx);
    return;
  case container_kind::vector:
    if (!j.is_array()) return;
    for (std::size_t i = 0; i < j.get_array().size(); ++i) {
      auto scope = ctx.enter(i);
      apply_legacy_value(*c.element, j.get_array()[i], ctx);
    }
    return;
  case container_kind::map:
    if (!j.is_object()) return;
    for (auto& entry : j.get_object()) {
      auto scope = ctx.enter(entry.key());
      apply_legacy_value(*c.element, entry.value(), ctx);
    }
    return;
  }
}

CAIRN_DECL void read_fields(config_ops const& ops, boost::json::object const& object, void* config, read_context& ctx) {
  std::size_t matched = 0;
  for (auto const& f : ops.fields) {
    auto const* value = object.if_contains(f.name);
    if (!value) continue;
    ++matched;
    auto scope = ctx.enter(f.name);
    read_value(*f.type, *value, f.member(config), ctx);
  }
  if (matched == object.size()) return;
  for (auto const& entry : object)
    if (!ops.find(entry.key())) ctx.unknown_key(entry.key(), unknown_key_message(ops, entry.key()));
}

CAIRN_DECL void read_config(config_ops const& ops, boost::json::value const& j, void* config, read_context& ctx) {
  if (!j.is_object()) {
    ctx.error("expected an object (" + std::string(ops.name) + "), got " + describe_json(j));
    return;
  }
  if (ops.legacy.empty()) {
    read_fields(ops, j.get_object(), config, ctx);
  } else {
    boost::json::object current = j.get_object();
    apply_rules(ops, current, ctx);
    read_fields(ops, current, config, ctx);
  }
}

CAIRN_DECL boost::json::value write_config(config_ops const& ops, void const* config) {
  boost::json::object out;
  out.reserve(ops.fields.size());
  for (auto const& f : ops.fields) out[f.name] = write_value(*f.type, f.member(config));
  return out;
}

CAIRN_DECL void config_schema(config_ops const& ops, boost::json::object& s) {
  s["type"] = "object";
  s["title"] = ops.name;
  boost::json::object properties;
  auto const* defaults = ops.defaults();
  for (auto const& f : ops.fields) {
    boost::json::object property;
    schema_of(*f.type, property);
    auto* bounded = &property;
    if (auto* any = property.if_contains("anyOf")) bounded = &any->as_array()[0].as_object();
    for (auto const& check : f.checks) check.schema(check.check, *bounded);
    if (!f.description.empty()) property["description"] = f.description;
    property["default"] = write_value(*f.type, f.member(defaults));
    if (f.hint == hint::deprecated) property["deprecated"] = true;
    properties[f.name] = std::move(property);
  }
  // Old keys the legacy rules still accept: allowed, and marked deprecated.
  for (auto const& rule : ops.legacy)
    for (auto const& key : rule.old_keys())
      if (!properties.contains(key))
        properties[key] = boost::json::object{{"deprecated", true}, {"description", "Deprecated: " + rule.summary()}};
  s["properties"] = std::move(properties);
  s["additionalProperties"] = false;
}

CAIRN_DECL value_kind config_kind_at(config_ops const& ops, std::span<std::string_view const> path) {
  if (path.empty()) return value_kind::json;
  auto const* f = ops.find(path.front());
  if (!f) return value_kind::unknown;
  return kind_of(*f->type, path.subspan(1));
}

CAIRN_DECL void apply_config_legacy(config_ops const& ops, boost::json::value& j, read_context& ctx) {
  if (!j.is_object()) return;
  auto& object = j.get_object();
  apply_rules(ops, object, ctx);
  for (auto const& f : ops.fields) {
    if (!f.type->holds_config) continue;
    if (auto* child = object.if_contains(f.name)) {
      auto scope = ctx.enter(f.name);
      apply_legacy_value(*f.type, *child, ctx);
    }
  }
}

CAIRN_DECL void validate_config(config_ops const& ops, void* config, validation& ctx) {
  for (auto const& f : ops.fields) {
    if (!f.type->holds_config) continue;
    auto scope = ctx.enter(f.name);
    validate_value(*f.type, f.member(config), ctx);
  }
  for (auto const& f : ops.fields) {
    if (f.checks.empty() || ctx.has_errors_under(ctx.join(f.name))) continue;
    for (auto const& check : f.checks) {
      if (auto failure = check.test(check.check, f.member(config))) {
        ctx.error(f.name, std::move(*failure));
        break;
      }
    }
  }
  if (ops.validate_chain && !ctx.has_errors_under(ctx.path())) ops.validate_chain(config, ctx);
}

} // namespace cairn::detail
