#pragma once

#include <boost/json/fwd.hpp>

// cairn's headers only declare Boost.JSON's types: their templates name them through a template
// parameter, so that the complete types are needed only where such a template is used. A
// header-only build includes the definitions anyway (with cairn's ordinary functions); with
// CAIRN_SEPARATE_COMPILATION, a translation unit that works with JSON values includes
// <boost/json.hpp> itself.

namespace cairn::detail {

template <class T, class U> struct dependent_on { using type = U; };

/// `boost::json::value`, as a type that depends on T.
template <class T> using json_value = typename dependent_on<T, boost::json::value>::type;
/// `boost::json::object`, as a type that depends on T.
template <class T> using json_object = typename dependent_on<T, boost::json::object>::type;

} // namespace cairn::detail
