#pragma once

#include <cairn/config/detail/type_name.hpp>

#include <boost/describe/bases.hpp>
#include <boost/describe/members.hpp>

#include <string_view>
#include <type_traits>

namespace cairn {

/// A struct described with BOOST_DESCRIBE_STRUCT: cairn reads, writes, validates and documents it.
template <class T>
concept described_config = std::is_class_v<T> && boost::describe::has_describe_members<T>::value &&
    boost::describe::has_describe_bases<T>::value;

/// The name cairn gives a config type in messages and documentation.
template <class T> constexpr std::string_view config_name() { return detail::type_name<T>(); }

} // namespace cairn
