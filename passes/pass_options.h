// Pipelines as text, with each pass's own options, as MLIR writes them:
//   decompose,autodiff{wrt=x,w},fusion{fuse=false},memory-plan
// Options inside braces are separated by spaces; a list value is comma-separated.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace kiln::passes {

/// One pass of a pipeline's text: its name and its options as written.
struct PassSpec {
  std::string name;
  std::map<std::string, std::string> options;
};

/// The passes of a pipeline's text, in order. Errors say where the text is malformed.
Result<std::vector<PassSpec>> parse_pipeline_text(std::string_view text);

/// Gives `key` the value `value` in every pass named `pass` that does not set it (how the
/// CLI's --wrt and --no-fusion reach autodiff and fusion).
void set_option_default(std::vector<PassSpec>& specs, std::string_view pass, const std::string& key,
                        const std::string& value);

/// A pass's options, read by the pass's factory: each read names the option it takes,
/// and done() rejects any option the pass did not read.
class PassOptionReader {
 public:
  explicit PassOptionReader(const PassSpec& spec) : spec_(spec) {}
  /// A true/false option.
  Result<bool> flag(std::string_view key, bool default_value);
  /// A comma-separated list (empty when not given).
  std::vector<std::string> list(std::string_view key);
  /// One of `allowed`; `fallback` when not given (empty: the option is required).
  Result<std::string> choice(std::string_view key, const std::vector<std::string>& allowed,
                             std::string_view fallback = "");
  /// An error naming the first option the pass does not take, and the ones it does.
  Status done() const;

 private:
  const PassSpec& spec_;
  std::set<std::string, std::less<>> known_;
};

}  // namespace kiln::passes
