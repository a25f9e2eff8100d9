#pragma once

// The machinery of <cairn/config/reflect.hpp>.
// How reflection is laid out, for compile time: each described config gets one runtime table
// of its fields (name, metadata, an accessor, and the operations of the field's value type).
// Every algorithm (read, write, validate, compare, document, schema) is an ordinary function
// over that table, compiled once per translation unit, not once per field.

#include <cairn/config/described.hpp>
#include <cairn/config/detail/type_name.hpp>
#include <cairn/config/field.hpp>
#include <cairn/config/legacy.hpp>
#include <cairn/config/validation.hpp>
#include <cairn/config/value.hpp>
#include <cairn/detail/decl.hpp>

#include <boost/describe/bases.hpp>
#include <boost/describe/members.hpp>
#include <boost/describe/modifiers.hpp>
#include <boost/mp11/algorithm.hpp>

#include <array>
#include <cstddef>
#include <exception>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace cairn {

namespace detail {

template <class T> using members_of =
    boost::describe::describe_members<T, boost::describe::mod_public | boost::describe::mod_inherited>;
template <class T> using bases_of = boost::describe::describe_bases<T, boost::describe::mod_public>;

template <class P> struct member_pointer_value;
template <class C, class V> struct member_pointer_value<V C::*> { using type = V; };
/// The value type of a described member (descriptor D).
template <class D> using member_value_t = typename member_pointer_value<std::remove_cv_t<decltype(D::pointer)>>::type;

template <class> inline constexpr bool always_false = false;

enum class value_kind { text, json, unknown };

struct config_ops;

struct container_ops;

/// The operations cairn needs on a value of one type, reached through `void*`. For a described
/// config only `config` is set, for a `std::optional`, `std::vector` or `std::map` with string
/// keys `container` (and `assign`): the ordinary functions below handle both through their
/// tables. Every other type goes through its `value_traits`.
struct type_ops {
  void (*read)(boost::json::value const&, void*, read_context&);
  void (*write)(void const*, boost::json::value& out);
  std::string (*type_name)();
  void (*schema)(boost::json::object&);
  void (*assign)(void*, void const*);
  config_ops const& (*config)();          ///< set for a described config
  config_ops const& (*optional_config)(); ///< set for std::optional of a described config
  container_ops const* container;         ///< set for optional, vector and map
  bool holds_config;                      ///< whether the value is or contains configs
  bool textual;                           ///< whether the value is written as a JSON string
  std::string (*enum_names)();            ///< set for described enums
};

enum class container_kind : unsigned char { optional, vector, map };

/// A container's elements, reached through `void*`; `element` are the elements' operations.
struct container_ops {
  container_kind kind;
  type_ops const* element;
  std::size_t (*size)(void const*);         ///< optional: 0 or 1
  void* (*at)(void*, std::size_t);          ///< optional and vector
  void (*clear)(void*);                     ///< all: no elements
  void* (*emplace)(void*);                  ///< optional: a new `U{}`
  void (*resize)(void*, std::size_t);       ///< vector: n elements `U{}`
  void* (*insert)(void*, std::string_view); ///< map: the element at a key, `U{}` if new
  /// map: calls `visit(context, key, element)` on each element, in key order.
  void (*for_each)(void*, void* context, void (*visit)(void*, std::string_view, void*));
};

/// A check of a field, with its type erased; `check` points into the config's static field list.
struct erased_check {
  void const* check;
  std::optional<std::string> (*test)(void const* check, void const* value);
  std::string (*describe)(void const* check);
  void (*schema)(void const* check, boost::json::object&);
};

/// One field of a config, after the updates of derived configs.
struct field_info {
  std::string_view name;
  std::string_view description;
  cairn::hint hint = cairn::hint::core;
  std::vector<erased_check> checks;
  std::size_t offset; ///< of the member within its config (configs have no virtual bases)
  type_ops const* type;

  [[nodiscard]] void* member(void* object) const { return static_cast<char*>(object) + offset; }
  [[nodiscard]] void const* member(void const* object) const { return static_cast<char const*>(object) + offset; }
};

/// Everything cairn knows about one config type.
struct config_ops {
  std::string_view name;
  std::vector<field_info> fields;
  std::vector<legacy_rule> legacy;
  void (*validate_chain)(void*, validation&); ///< null when no class of the config declares `validate`
  void const* (*defaults)();                  ///< a `T{}` that lives as long as the program

  [[nodiscard]] field_info const* find(std::string_view key) const {
    for (auto const& f : fields)
      if (f.name == key) return &f;
    return nullptr;
  }
  [[nodiscard]] field_info* at_offset(std::size_t offset) {
    for (auto& f : fields)
      if (f.offset == offset) return &f;
    return nullptr;
  }
};

template <class T> config_ops const& config_of();

// --- checks ---------------------------------------------------------------------------------

template <class Check, class V> struct check_ops {
  static std::optional<std::string> test(void const* check, void const* value) {
    auto const& c = *static_cast<Check const*>(check);
    auto const& v = *static_cast<V const*>(value);
    if constexpr (std::is_invocable_v<Check const&, V const&>) {
      return c(v);
    } else if constexpr (is_optional<V>) {
      static_assert(std::is_invocable_v<Check const&, typename V::value_type const&>,
                    "This check does not apply to the field's type (e.g. a numeric bound on a string).");
      return v ? c(*v) : std::nullopt;
    } else {
      static_assert(always_false<Check>,
                    "This check does not apply to the field's type (e.g. a numeric bound on a string).");
    }
  }
  static std::string describe(void const* check) { return static_cast<Check const*>(check)->describe(); }
  static void schema(void const* check, boost::json::object& s) { static_cast<Check const*>(check)->add_schema(s); }
};

template <class V, class Check> erased_check erase_check(Check const& check) {
  return {&check, &check_ops<Check, V>::test, &check_ops<Check, V>::describe, &check_ops<Check, V>::schema};
}

/// Appends the checks in `checks` (a `pack<Checks...>` with static storage), type-erased for a
/// field of type V. One function per field type and list of check types, shared by all configs.
template <class V, class Pack> void erase_checks(void const* checks, std::vector<erased_check>& out) {
  auto const& list = *static_cast<Pack const*>(checks);
  out.clear();
  out.reserve(Pack::size);
  list.for_each([&](auto const& c) { out.push_back(erase_check<V>(c)); });
}

// --- field metadata -------------------------------------------------------------------------
//
// Per config type only thin functions are instantiated: they gather names, offsets and
// pointers into arrays and hand them to the ordinary functions below, which do the work once
// for every config.

template <class T> constexpr auto declared_fields() {
  if constexpr (requires { cairn_fields(static_cast<T const*>(nullptr)); })
    return cairn_fields(static_cast<T const*>(nullptr));
  else
    return pack<>();
}

/// Whether T's `cairn_fields` is a constant expression (it is when declared constexpr).
template <class T>
concept constant_fields = requires {
  typename std::bool_constant<(declared_fields<T>(), true)>;
};

/// The field list of T, with static storage so that checks can be pointed to; a constant
/// where it can be, so that it costs no code.
template <class T> auto const& field_list() {
  if constexpr (constant_fields<T>) {
    static constexpr auto list = declared_fields<T>();
    return list;
  } else {
    static auto const list = declared_fields<T>();
    return list;
  }
}

/// Where `member` lies within `object`.
template <class T, class M> std::size_t offset_in(T const& object, M const& member) {
  // std::addressof without <memory>: the builtin it is made of (GCC, Clang and MSVC have it).
  return static_cast<std::size_t>(reinterpret_cast<char const*>(__builtin_addressof(member)) -
                                  reinterpret_cast<char const*>(__builtin_addressof(object)));
}

/// One entry of a `cairn_fields` list, a definition or an update, with its types erased.
struct field_entry {
  std::size_t offset;
  std::optional<std::string_view> description;
  std::optional<cairn::hint> hint;
  void const* checks;                                     ///< null: the entry keeps the field's checks
  void (*erase)(void const*, std::vector<erased_check>&); ///< turns `checks` into the field's
};

CAIRN_DECL void apply_field_entries(config_ops& ops, std::span<field_entry const> entries);

// An error here about `std::is_base_of_v<C, T>` means that a `cairn::field` names a member of
// another struct: a config describes its own members with `field` and inherited ones with `update`.

template <class T, class C, class V, class... Checks>
field_entry entry_of(T const& object, field_definition<C, V, Checks...> const& entry) {
  static_assert(std::is_base_of_v<C, T>, "cairn_fields names a member of an unrelated struct");
  return {offset_in(object, object.*entry.pointer), entry.description, entry.hint, &entry.checks,
          &erase_checks<V, pack<Checks...>>};
}

template <class T, class C, class V, class Checks, bool Replaces>
field_entry entry_of(T const& object, field_update<C, V, Checks, Replaces> const& entry) {
  static_assert(std::is_base_of_v<C, T>, "cairn_fields names a member of an unrelated struct");
  return {offset_in(object, object.*entry.pointer), entry.new_description, entry.new_hint,
          Replaces ? &entry.new_checks : nullptr, &erase_checks<V, Checks>};
}

template <class B> using is_virtual_base = std::bool_constant<(B::modifiers & boost::describe::mod_virtual) != 0>;

/// The entries of T's bases first, then T's own: definitions, then updates down the hierarchy.
template <class T, class Object> void apply_entries(config_ops& ops, Object const& object) {
  static_assert(!boost::mp11::mp_any_of<boost::describe::describe_bases<T, boost::describe::mod_any_access>,
                                        is_virtual_base>::value,
                "a config cannot have virtual bases: cairn reaches fields by their offset");
  boost::mp11::mp_for_each<bases_of<T>>([&](auto base) { apply_entries<typename decltype(base)::type>(ops, object); });
  field_list<T>().apply([&](auto const&... entries) {
    if constexpr (sizeof...(entries) > 0) {
      field_entry const list[] = {entry_of(object, entries)...};
      apply_field_entries(ops, list);
    }
  });
}

/// Appends the rules of `more` that `rules` does not have yet (a mixin reached twice).
CAIRN_DECL void add_legacy_rules(std::vector<legacy_rule>& rules, std::vector<legacy_rule> more);

/// Legacy rules of T and of each of its bases, base first.
template <class T> void collect_legacy_rules(std::vector<legacy_rule>& rules) {
  boost::mp11::mp_for_each<bases_of<T>>([&](auto base) { collect_legacy_rules<typename decltype(base)::type>(rules); });
  if constexpr (requires { cairn_legacy(static_cast<T const*>(nullptr)); }) {
    add_legacy_rules(rules, cairn_legacy(static_cast<T const*>(nullptr)));
  }
}

template <class T>
concept declares_validate = requires {
  requires std::is_same_v<decltype(&T::validate), void (T::*)(validation&)> ||
      std::is_same_v<decltype(&T::validate), void (T::*)(validation&) const>;
};
template <class T>
concept declares_plain_validate = requires {
  requires std::is_same_v<decltype(&T::validate), void (T::*)()> ||
      std::is_same_v<decltype(&T::validate), void (T::*)() const>;
};

/// The class a pointer to member belongs to.
template <class M> struct member_of;
template <class R, class C> struct member_of<R C::*> { using type = C; };
/// A `validate` of T's own that is neither form cairn calls (it would be silently skipped).
template <class T>
concept declares_other_validate = requires {
  requires std::is_same_v<typename member_of<decltype(&T::validate)>::type, T>;
}
&&!declares_validate<T> && !declares_plain_validate<T>;

template <class T> constexpr bool has_validation();
template <template <class...> class L, class... B> constexpr bool any_validates(L<B...>) {
  return (has_validation<typename B::type>() || ...);
}
/// Whether T or one of its bases declares `validate`.
template <class T> constexpr bool has_validation() {
  return declares_validate<T> || declares_plain_validate<T> || declares_other_validate<T> ||
         any_validates(bases_of<T>());
}

template <class T> void run_validate_chain(void* object, validation& ctx);

/// The function that runs the `validate` chain of T, or none when no class in it has one.
template <class T> constexpr void (*validate_chain_of())(void*, validation&) {
  if constexpr (has_validation<T>())
    return &run_validate_chain<T>;
  else
    return nullptr;
}

/// `T{}`, made once and never destroyed: a config's defaults outlive every use of its table, and
/// no destructor of T is compiled for them.
template <class T> void const* default_of() {
  static T const* const value = new T{};
  return value;
}

/// A member named after a C++ keyword takes a trailing underscore (`export_`); its key does not.
CAIRN_DECL void add_fields(config_ops& ops, std::span<char const* const> names, std::span<std::size_t const> offsets,
                           std::span<type_ops const* const> types);

template <class V> constexpr type_ops make_type_ops();
/// The operations of V: a constant, so that reaching them costs no code.
template <class V> inline constexpr type_ops type_ops_of = make_type_ops<V>();

template <class T, template <class...> class L, class... D>
void add_members(config_ops& ops, T const& object, L<D...>) {
  if constexpr (sizeof...(D) > 0) {
    static constexpr char const* names[] = {D::name...};
    static constexpr type_ops const* types[] = {&type_ops_of<member_value_t<D>>...};
    std::size_t const offsets[] = {offset_in(object, object.*D::pointer)...};
    add_fields(ops, names, offsets, types);
  }
}

/// Fills the field table of T from its description, given `T{}`.
template <class T> void fill_config_ops(config_ops& ops, void const* object) {
  auto const& defaults = *static_cast<T const*>(object);
  add_members(ops, defaults, members_of<T>());
  apply_entries<T>(ops, defaults);
  collect_legacy_rules<T>(ops.legacy);
}

/// The table of a config, made once and kept for the program.
CAIRN_DECL config_ops const& make_config_ops(std::string_view name, void (*validate_chain)(void*, validation&),
                                             void const* (*defaults)(), void (*fill)(config_ops&, void const*));

template <class T> config_ops const& config_of() {
  static config_ops const& ops =
      make_config_ops(config_name<T>(), validate_chain_of<T>(), &default_of<T>, &fill_config_ops<T>);
  return ops;
}

// --- algorithms over the field table --------------------------------------------------------

CAIRN_DECL std::size_t edit_distance(std::string_view a, std::string_view b);

CAIRN_DECL std::string unknown_key_message(config_ops const& ops, std::string_view key);

CAIRN_DECL void apply_rules(config_ops const& ops, boost::json::object& object, read_context& ctx);

CAIRN_DECL void read_config(config_ops const& ops, boost::json::value const& j, void* config, read_context& ctx);
CAIRN_DECL boost::json::value write_config(config_ops const& ops, void const* config);
CAIRN_DECL void config_schema(config_ops const& ops, boost::json::object& s);
CAIRN_DECL value_kind config_kind_at(config_ops const& ops, std::span<std::string_view const> path);
/// Nested configs first, then field checks, then the configs' own `validate` (skipped when
/// anything below failed, since it may rely on sound fields).
CAIRN_DECL void validate_config(config_ops const& ops, void* config, validation& ctx);
CAIRN_DECL void apply_config_legacy(config_ops const& ops, boost::json::value& j, read_context& ctx);

CAIRN_DECL void read_value(type_ops const& type, boost::json::value const& j, void* value, read_context& ctx);
CAIRN_DECL boost::json::value write_value(type_ops const& type, void const* value);
CAIRN_DECL std::string type_name_of(type_ops const& type);
CAIRN_DECL void schema_of(type_ops const& type, boost::json::object& s);
/// What an override at `path` below a value of this type holds.
CAIRN_DECL value_kind kind_of(type_ops const& type, std::span<std::string_view const> path);
/// Validates the configs inside a value.
CAIRN_DECL void validate_value(type_ops const& type, void* value, validation& ctx);
/// Applies the legacy rules of every config inside a value, before overrides are added.
CAIRN_DECL void apply_legacy_value(type_ops const& type, boost::json::value& j, read_context& ctx);

CAIRN_DECL void read_fields(config_ops const& ops, boost::json::object const& object, void* config, read_context& ctx);

// --- type operations ------------------------------------------------------------------------

template <class V> constexpr bool holds_config() {
  if constexpr (described_config<V>)
    return true;
  else if constexpr (is_optional<V> || is_vector<V>)
    return holds_config<typename V::value_type>();
  else if constexpr (is_string_map<V>)
    return holds_config<typename V::mapped_type>();
  else
    return false;
}

template <class V> constexpr container_ops make_container_ops() {
  container_ops ops{};
  if constexpr (is_optional<V>) {
    using U = typename V::value_type;
    ops.kind = container_kind::optional;
    ops.element = &type_ops_of<U>;
    ops.size = [](void const* c) -> std::size_t { return static_cast<V const*>(c)->has_value() ? 1 : 0; };
    ops.at = [](void* c, std::size_t) -> void* { return &**static_cast<V*>(c); };
    ops.clear = [](void* c) { static_cast<V*>(c)->reset(); };
    ops.emplace = [](void* c) -> void* { return &static_cast<V*>(c)->emplace(); };
  } else if constexpr (is_vector<V>) {
    using U = typename V::value_type;
    ops.kind = container_kind::vector;
    ops.element = &type_ops_of<U>;
    ops.size = [](void const* c) { return static_cast<V const*>(c)->size(); };
    ops.at = [](void* c, std::size_t i) -> void* { return &(*static_cast<V*>(c))[i]; };
    ops.clear = [](void* c) { static_cast<V*>(c)->clear(); };
    ops.resize = [](void* c, std::size_t n) { static_cast<V*>(c)->assign(n, U{}); };
  } else {
    ops.kind = container_kind::map;
    ops.element = &type_ops_of<typename V::mapped_type>;
    ops.size = [](void const* c) { return static_cast<V const*>(c)->size(); };
    ops.clear = [](void* c) { static_cast<V*>(c)->clear(); };
    ops.insert = [](void* c, std::string_view key) -> void* { return &(*static_cast<V*>(c))[std::string(key)]; };
    ops.for_each = [](void* c, void* context, void (*visit)(void*, std::string_view, void*)) {
      for (auto& [key, value] : *static_cast<V*>(c)) visit(context, key, &value);
    };
  }
  return ops;
}
/// The operations of a container type: a constant, like `type_ops_of`.
template <class V> inline constexpr container_ops container_ops_of = make_container_ops<V>();

template <class V> constexpr type_ops make_type_ops() {
  type_ops ops{};
  ops.holds_config = holds_config<V>();
  if constexpr (described_config<V>) {
    ops.config = &config_of<V>;
    return ops;
  } else {
    ops.assign = [](void* to, void const* from) { *static_cast<V*>(to) = *static_cast<V const*>(from); };
    if constexpr (is_optional<V> || is_vector<V> || is_string_map<V>) {
      ops.container = &container_ops_of<V>;
      if constexpr (is_optional<V>)
        if constexpr (described_config<typename V::value_type>)
          ops.optional_config = &config_of<typename V::value_type>;
    } else {
      ops.read = [](boost::json::value const& j, void* v, read_context& ctx) {
        value_traits<V>::read(j, *static_cast<V*>(v), ctx);
      };
      if constexpr (requires(V const& v, boost::json::value& out) { value_traits<V>::write_to(v, out); })
        ops.write = [](void const* v, boost::json::value& out) {
          value_traits<V>::write_to(*static_cast<V const*>(v), out);
        };
      else
        ops.write = [](void const* v, boost::json::value& out) {
          out = value_traits<V>::write(*static_cast<V const*>(v));
        };
      ops.type_name = &value_traits<V>::type_name;
      ops.schema = &value_traits<V>::schema;
      if constexpr (requires { value_traits<V>::textual; }) ops.textual = value_traits<V>::textual;
      if constexpr (requires { value_traits<V>::names(); }) ops.enum_names = &value_traits<V>::names;
    }
    return ops;
  }
}

template <class V> type_ops const& type_ops_for() { return type_ops_of<V>; }

/// value_traits of a container, read, written and described through its type operations.
template <class V> struct container_traits {
  static void read(boost::json::value const& j, V& v, read_context& ctx) { read_value(type_ops_for<V>(), j, &v, ctx); }
  static json_value<V> write(V const& v) { return write_value(type_ops_for<V>(), &v); }
  static std::string type_name() { return type_name_of(type_ops_for<V>()); }
  static void schema(boost::json::object& s) { schema_of(type_ops_for<V>(), s); }
};

// --- validation ----------------------------------------------------------------------------

/// Each class's own `validate`, most basic class first.
template <class T> void run_validate_chain(void* object, validation& ctx) {
  // An error here means that a config's `validate` is none that cairn calls: declare it
  // `void validate(cairn::validation&)` or `void validate()`, const or not.
  static_assert(!declares_other_validate<T>, "a config's validate must be void validate(cairn::validation&) or "
                                             "void validate(), const or not");
  auto& config = *static_cast<T*>(object);
  boost::mp11::mp_for_each<bases_of<T>>([&](auto base) {
    using base_type = typename decltype(base)::type;
    if constexpr (has_validation<base_type>()) run_validate_chain<base_type>(static_cast<base_type*>(&config), ctx);
  });
  if constexpr (declares_validate<T> || declares_plain_validate<T>) {
    try {
      if constexpr (declares_validate<T>)
        config.T::validate(ctx);
      else
        config.T::validate();
    } catch (config_error const& e) {
      for (auto const& d : e.errors()) ctx.error(d.path, d.message);
    } catch (std::exception const& e) {
      ctx.error("", e.what());
    }
  }
}

} // namespace detail

} // namespace cairn
