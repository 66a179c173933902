#include "passes/pass_options.h"

#include <fmt/format.h>
#include <cctype>

namespace kiln::passes {
namespace {

bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'; }

// Parses "key=value key2=value2" (the text between a pass's braces).
Status parse_options(std::string_view pass, std::string_view text, std::map<std::string, std::string>& options) {
  size_t at = 0;
  while (at < text.size()) {
    if (text[at] == ' ') {
      ++at;
      continue;
    }
    size_t end = text.find(' ', at);
    std::string_view item = text.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at);
    at = end == std::string_view::npos ? text.size() : end;
    size_t eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0 || eq + 1 == item.size())
      return make_error(fmt::format("pass '{}': option '{}' is not KEY=VALUE", pass, item));
    std::string key(item.substr(0, eq));
    if (options.count(key)) return make_error(fmt::format("pass '{}': option '{}' is given twice", pass, key));
    options[key] = std::string(item.substr(eq + 1));
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<PassSpec>> parse_pipeline_text(std::string_view text) {
  std::vector<PassSpec> specs;
  size_t at = 0;
  while (at < text.size()) {
    if (text[at] == ',') {
      ++at;
      continue;
    }
    size_t name_end = at;
    while (name_end < text.size() && name_char(text[name_end])) ++name_end;
    PassSpec spec{std::string(text.substr(at, name_end - at)), {}};
    if (spec.name.empty())
      return make_error(fmt::format("pipeline '{}': expected a pass name at '{}'", text, text.substr(at)));
    at = name_end;
    if (at < text.size() && text[at] == '{') {
      size_t close = text.find('}', at);
      if (close == std::string_view::npos)
        return make_error(fmt::format("pipeline '{}': the '{{' after '{}' is not closed", text, spec.name));
      KILN_RETURN_IF_ERROR(parse_options(spec.name, text.substr(at + 1, close - at - 1), spec.options));
      at = close + 1;
    }
    if (at < text.size() && text[at] != ',')
      return make_error(
          fmt::format("pipeline '{}': expected ',' or '{{' after '{}', not '{}'", text, spec.name, text.substr(at, 1)));
    specs.push_back(std::move(spec));
  }
  return specs;
}

void set_option_default(std::vector<PassSpec>& specs, std::string_view pass, const std::string& key,
                        const std::string& value) {
  for (PassSpec& spec : specs)
    if (spec.name == pass) spec.options.try_emplace(key, value);
}

Result<bool> PassOptionReader::flag(std::string_view key, bool default_value) {
  known_.emplace(key);
  auto it = spec_.options.find(std::string(key));
  if (it == spec_.options.end()) return default_value;
  if (it->second == "true") return true;
  if (it->second == "false") return false;
  return make_error(fmt::format("pass '{}': option '{}' takes true or false, not '{}'", spec_.name, key, it->second));
}

Result<std::string> PassOptionReader::choice(std::string_view key, const std::vector<std::string>& allowed,
                                             std::string_view fallback) {
  known_.emplace(key);
  std::string choices;
  for (const std::string& a : allowed) choices += (choices.empty() ? "" : "|") + a;
  auto it = spec_.options.find(std::string(key));
  if (it == spec_.options.end()) {
    if (fallback.empty())
      return make_error(
          fmt::format("pass '{}' needs option '{}' ({}{{{}={}}})", spec_.name, key, spec_.name, key, choices));
    return std::string(fallback);
  }
  for (const std::string& a : allowed)
    if (it->second == a) return a;
  return make_error(fmt::format("pass '{}': option '{}' takes {}, not '{}'", spec_.name, key, choices, it->second));
}

std::vector<std::string> PassOptionReader::list(std::string_view key) {
  known_.emplace(key);
  std::vector<std::string> items;
  auto it = spec_.options.find(std::string(key));
  if (it == spec_.options.end()) return items;
  std::string_view rest = it->second;
  while (!rest.empty()) {
    size_t comma = rest.find(',');
    if (std::string_view item = rest.substr(0, comma); !item.empty()) items.emplace_back(item);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  return items;
}

Status PassOptionReader::done() const {
  for (const auto& [key, value] : spec_.options) {
    if (known_.count(key)) continue;
    if (known_.empty()) return make_error(fmt::format("pass '{}' takes no options (given: {})", spec_.name, key));
    return make_error(
        fmt::format("pass '{}' has no option '{}' (its options: {})", spec_.name, key, fmt::join(known_, ", ")));
  }
  return Status::Ok();
}

}  // namespace kiln::passes
