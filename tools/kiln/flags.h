// Command-line flags of the kiln subcommands and kiln-run: one parser, strict numbers.
// Runtime only: kiln-run links it without the compiler.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace kiln::cli {

/// A flag a subcommand accepts.
struct FlagSpec {
  std::string_view name;     ///< without the leading "--"
  bool takes_value = false;  ///< --name=VALUE or --name VALUE
  bool repeatable = false;
};

/// Parsed command line of a subcommand.
struct Args {
  std::vector<std::string> positional;
  std::map<std::string, std::vector<std::string>, std::less<>> flags;
  bool help = false;

  bool has(std::string_view name) const { return flags.count(name) != 0; }
  /// The last value of a flag, or `fallback`.
  std::string get(std::string_view name, std::string fallback = "") const;
  /// Every value of a repeatable flag, in order.
  std::vector<std::string> all(std::string_view name) const;
};

/// Parses args for `command` ("kiln opt"); errors are whole lines ("kiln opt: error:
/// unknown flag '--fast'; see 'kiln opt --help'"). -h and --help set `help`; "-" alone is
/// a positional argument (standard input).
Result<Args> parse_args(std::string_view command, std::span<char* const> argv, std::span<const FlagSpec> specs);

/// The value of the integer flag --NAME, `fallback` when it is absent. The whole value
/// must be a decimal integer within [min, max]: "--threads must be an integer from 1 to
/// 1024, got 'abc'".
Result<int64_t> integer_flag(const Args& args, std::string_view name, int64_t fallback, int64_t min, int64_t max);

/// A NAME=VALUE flag's values (--input x=x.npy), in order: NAME without a leading '%',
/// each name at most once. `form` is the form errors show ("NAME=PATH.npy").
struct NamedValue {
  std::string name, value;
};
Result<std::vector<NamedValue>> named_values(const Args& args, std::string_view flag, std::string_view form);

/// Under `bazel run`, makes the directory the command was typed in ($BUILD_WORKING_DIRECTORY)
/// the current one, so relative paths on the command line are the user's, not the
/// runfiles tree's. Does nothing elsewhere.
void enter_user_directory();

/// Runs a command's body: an allocation failure that is not checked where it is made, or
/// output that cannot be written (a full disk, a closed stdout or stderr), is an error and
/// exit code 1, never an abort; stdout is flushed and checked before its exit code stands.
int run_guarded(std::string_view command, const std::function<int()>& body);

/// Prints "COMMAND: error: MESSAGE" to stderr and returns exit code 1.
int fail(std::string_view command, std::string_view message);
/// Prints an error that already carries its location or command to stderr; returns 1.
int fail_located(const Error& error);

}  // namespace kiln::cli
