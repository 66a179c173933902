// libFuzzer target for command-line flags: any argv (the input split at NUL bytes) is
// parsed into flags or refused with a message; integer flags are exact or refused; never a
// crash, hang or ASan/UBSan report.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/parse_number.h"
#include "tools/kiln/flags.h"

namespace {

void require(bool ok, const char* what, const std::string& text) {
  if (ok) return;
  std::fprintf(stderr, "%s: '%s'\n", what, text.c_str());
  std::abort();
}

// The property parse_integer must have: it accepts exactly -?[0-9]+ within int64, and
// the value prints back as the text without its leading zeros.
void check_integer(const std::string& text) {
  std::optional<int64_t> value = kiln::parse_integer(text);
  size_t digits = text.starts_with('-') ? 1 : 0;
  bool shaped = text.size() > digits && text.find_first_not_of("0123456789", digits) == std::string::npos;
  if (!shaped) {
    require(!value, "parse_integer accepted a malformed integer", text);
    return;
  }
  if (!value) {
    // Refused only beyond int64: compare the significant digits with its bounds.
    std::string significant = text.substr(digits);
    significant.erase(0, std::min(significant.find_first_not_of('0'), significant.size()));
    const std::string bound = digits ? "9223372036854775808" : "9223372036854775807";
    bool beyond = significant.size() > bound.size() || (significant.size() == bound.size() && significant > bound);
    require(beyond, "parse_integer refused an integer in range", text);
    return;
  }
  std::string canonical = std::to_string(*value);
  std::string stripped = text.substr(digits);
  stripped.erase(0, std::min(stripped.find_first_not_of('0'), stripped.size() - 1));
  if (digits && stripped != "0") stripped = "-" + stripped;
  require(canonical == stripped, "parse_integer read a different value", text);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> words(1);
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0) words.emplace_back();
    else words.back() += static_cast<char>(data[i]);
  }
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  constexpr kiln::cli::FlagSpec specs[] = {
      {"threads", true}, {"repeat", true}, {"input", true, true}, {"output", true}, {"quick"}};
  auto args = kiln::cli::parse_args("kiln fuzz", argv, specs);
  for (const std::string& w : words) check_integer(w);
  if (!args.ok()) {
    require(args.error().message.starts_with("kiln fuzz: error: "), "an error without the command",
            args.error().message);
    return 0;
  }
  for (const char* flag : {"threads", "repeat"}) {
    auto n = kiln::cli::integer_flag(*args, flag, -5, 1, 1024);
    if (n.ok()) require(*n == -5 || (*n >= 1 && *n <= 1024), "integer_flag out of bounds", args->get(flag));
  }
  auto named = kiln::cli::named_values(*args, "input", "NAME=PATH");
  if (named.ok())
    for (const auto& v : *named)
      require(!v.name.empty() && !v.value.empty(), "an empty name or value", v.name + "=" + v.value);
  return 0;
}
