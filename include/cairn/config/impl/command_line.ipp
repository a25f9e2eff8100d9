// Definitions of <cairn/config/command_line.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/config/command_line.hpp>
#include <cairn/config/schema.hpp>

#include <exception>
#include <string_view>

namespace cairn::detail {

inline std::string usage_of(command_line_request const& request, command_line_options const& options) {
  std::string flags;
  for (auto const& [flag, key] : options.flags) flags += " [" + flag + " " + key + "]";
  auto const& p = request.program;
  std::string print = find_config_file_format("yaml") ? "--print-config[=json|yaml]" : "--print-config";
  return "usage: " + p + " [--config FILE]" + flags + " [key.path=value ...]\n" + "       " + p +
         " --help | --schema | " + print + " [--config FILE] [key.path=value ...]\n";
}

CAIRN_DECL command_line_request read_arguments(std::span<char const* const> arguments,
                                               command_line_options const& options) {
  command_line_request request;
  request.program = options.program;
  if (request.program.empty()) {
    std::string_view zeroth = arguments.empty() || !arguments[0] ? "program" : arguments[0];
    auto slash = zeroth.find_last_of('/');
    request.program = std::string(slash == std::string_view::npos ? zeroth : zeroth.substr(slash + 1));
  }
  auto refuse = [&](std::string const& why) {
    std::fprintf(options.err, "%s: %s\n%s", request.program.c_str(), why.c_str(), usage_of(request, options).c_str());
    request.what = command_line_request::action::refused;
    return request;
  };
  bool help = false, schema = false;
  for (std::size_t i = 1; i < arguments.size(); ++i) {
    std::string_view a = arguments[i] ? arguments[i] : "";
    auto value_of = [&](std::string_view flag) -> std::optional<std::string> {
      if (a.size() > flag.size() && a.starts_with(flag) && a[flag.size()] == '=')
        return std::string(a.substr(flag.size() + 1));
      if (a == flag && i + 1 < arguments.size() && arguments[i + 1]) return std::string(arguments[++i]);
      return std::nullopt;
    };
    if (a == "--help" || a == "-h") {
      help = true;
    } else if (a == "--schema") {
      schema = true;
    } else if (a == "--print-config" || a.starts_with("--print-config=")) {
      request.what = command_line_request::action::print_config;
      if (a != "--print-config") request.print_format = std::string(a.substr(a.find('=') + 1));
      if (request.print_format != "json" && !find_config_file_format(request.print_format))
        return refuse("--print-config: unknown format '" + request.print_format + "' (json" +
                      (find_config_file_format("yaml") ? ", yaml" : "") + ")");
    } else if (a == "--config" || a.starts_with("--config=")) {
      auto file = value_of("--config");
      if (!file || file->empty()) return refuse("--config needs a file");
      if (request.file) return refuse("--config given twice ('" + *request.file + "' and '" + *file + "')");
      request.file = std::move(file);
    } else if (auto flag = options.flags.find(std::string(a.substr(0, a.find('=')))); flag != options.flags.end()) {
      auto value = value_of(flag->first);
      if (!value) return refuse(flag->first + " needs a value (" + flag->second + ")");
      request.overrides.push_back(flag->second + "=" + *value);
    } else if (a.starts_with("-") || a.find('=') == std::string_view::npos || a.front() == '=') {
      return refuse("unknown argument '" + std::string(a) + "' (overrides are key.path=value)");
    } else {
      request.overrides.emplace_back(a);
    }
  }
  if (help)
    request.what = command_line_request::action::help;
  else if (schema)
    request.what = command_line_request::action::schema;
  return request;
}

CAIRN_DECL int answer(command_line_request const& request, command_line_options const& options, config_ops const& ops,
                      void* config) {
  using action = command_line_request::action;
  switch (request.what) {
  case action::refused:
    return 2;
  case action::help: {
    std::string text;
    if (!options.description.empty()) text += options.description + "\n\n";
    text += usage_of(request, options);
    text += "\nConfiguration (in the --config file, or key.path=value):\n\n" + document(ops, {});
    std::fputs(text.c_str(), options.out);
    return 0;
  }
  case action::schema:
    std::fputs(pretty(config_json_schema(ops)).c_str(), options.out);
    return 0;
  default:
    break;
  }
  try {
    boost::json::value document = request.file ? read_config_file(*request.file) : boost::json::object{};
    build_config(ops, document, request.overrides, config);
  } catch (config_error const& e) {
    std::fprintf(options.err, "%s: invalid configuration: %s\n", request.program.c_str(), e.what());
    return 2;
  }
  if (request.what == action::print_config) {
    auto json = config_to_json(ops, config, output::all);
    auto text =
        request.print_format == "json" ? pretty(json) : find_config_file_format(request.print_format)->write(json);
    std::fputs(text.c_str(), options.out);
    return 0;
  }
  return -1;
}

} // namespace cairn::detail
