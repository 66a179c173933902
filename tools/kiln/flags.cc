#include "tools/kiln/flags.h"

#include <fmt/format.h>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <new>
#include <system_error>

#include "base/parse_number.h"

namespace kiln::cli {

std::string Args::get(std::string_view name, std::string fallback) const {
  auto it = flags.find(name);
  return it == flags.end() || it->second.empty() ? fallback : it->second.back();
}

std::vector<std::string> Args::all(std::string_view name) const {
  auto it = flags.find(name);
  return it == flags.end() ? std::vector<std::string>() : it->second;
}

Result<Args> parse_args(std::string_view command, std::span<char* const> argv, std::span<const FlagSpec> specs) {
  Args args;
  for (size_t i = 0; i < argv.size(); ++i) {
    std::string_view a = argv[i];
    if (a == "-h" || a == "--help") {
      args.help = true;
      continue;
    }
    if (!a.starts_with("--")) {
      if (a.size() > 1 && a[0] == '-')
        return make_error(fmt::format("{}: error: unknown flag '{}'; see '{} --help'", command, a, command));
      args.positional.emplace_back(a);
      continue;
    }
    std::string_view body = a.substr(2);
    size_t eq = body.find('=');
    std::string_view name = body.substr(0, eq);
    const FlagSpec* spec = nullptr;
    for (const FlagSpec& s : specs)
      if (s.name == name) spec = &s;
    if (!spec)
      return make_error(fmt::format("{}: error: unknown flag '--{}'; see '{} --help'", command, name, command));
    std::string value;
    if (spec->takes_value) {
      if (eq != std::string_view::npos) {
        value = std::string(body.substr(eq + 1));
      } else if (i + 1 < argv.size()) {
        value = argv[++i];
      } else {
        return make_error(fmt::format("{}: error: --{} needs a value; see '{} --help'", command, name, command));
      }
    } else if (eq != std::string_view::npos) {
      return make_error(fmt::format("{}: error: --{} takes no value", command, name));
    }
    auto& values = args.flags[std::string(name)];
    if (!values.empty() && !spec->repeatable)
      return make_error(fmt::format("{}: error: --{} is given more than once", command, name));
    values.push_back(std::move(value));
  }
  return args;
}

Result<int64_t> integer_flag(const Args& args, std::string_view name, int64_t fallback, int64_t min, int64_t max) {
  if (!args.has(name)) return fallback;
  const std::string text = args.get(name);
  std::optional<int64_t> value = parse_integer(text);
  if (!value || *value < min || *value > max)
    return make_error(fmt::format("--{} must be an integer from {} to {}, got '{}'", name, min, max, text));
  return *value;
}

Result<std::vector<NamedValue>> named_values(const Args& args, std::string_view flag, std::string_view form) {
  std::vector<NamedValue> values;
  for (const std::string& spec : args.all(flag)) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size() || (eq == 1 && spec[0] == '%'))
      return make_error(fmt::format("--{} expects {}, got '{}'", flag, form, spec));
    NamedValue v{spec.substr(spec[0] == '%' ? 1 : 0, spec[0] == '%' ? eq - 1 : eq), spec.substr(eq + 1)};
    for (const NamedValue& seen : values)
      if (seen.name == v.name) return make_error(fmt::format("--{} gives %{} twice", flag, v.name));
    values.push_back(std::move(v));
  }
  return values;
}

void enter_user_directory() {
  const char* dir = std::getenv("BUILD_WORKING_DIRECTORY");
  if (!dir || !*dir) return;
  std::error_code ec;
  std::filesystem::current_path(dir, ec);
}

int run_guarded(std::string_view command, const std::function<int()>& body) {
  // Messages here use stdio, which never throws: stderr itself may be what failed.
  auto report = [&](const std::string& message) {
    std::fprintf(stderr, "%.*s: error: %s\n", static_cast<int>(command.size()), command.data(), message.c_str());
    return 1;
  };
  int status = 1;
  try {
    status = body();
  } catch (const std::bad_alloc&) {
    return report("out of memory");
  } catch (const std::system_error& e) {  // fmt::print on a stream that cannot be written
    return report(std::string("cannot write the output: ") + e.code().message());
  }
  if (std::fflush(stdout) != 0 || std::ferror(stdout))
    return report(std::string("cannot write the output: ") + std::strerror(errno));
  return status;
}

int fail(std::string_view command, std::string_view message) {
  fmt::print(stderr, "{}: error: {}\n", command, message);
  return 1;
}

int fail_located(const Error& error) {
  fmt::print(stderr, "{}\n", error.message);
  return 1;
}

}  // namespace kiln::cli
