// Flag parsing shared by every subcommand: strict integers, bounds, repeated flags.
#include <catch2/catch.hpp>

#include "base/parse_number.h"
#include "tools/kiln/flags.h"

using namespace kiln;

namespace {

Result<cli::Args> parse(std::vector<std::string> words) {
  static std::vector<std::string> storage;
  storage = std::move(words);
  static std::vector<char*> argv;
  argv.clear();
  for (std::string& w : storage) argv.push_back(w.data());
  constexpr cli::FlagSpec specs[] = {{"threads", true}, {"input", true, true}, {"quick"}};
  return cli::parse_args("kiln x", argv, specs);
}

}  // namespace

TEST_CASE("parse_integer takes decimal integers and nothing else", "[flags]") {
  CHECK(parse_integer("0") == 0);
  CHECK(parse_integer("42") == 42);
  CHECK(parse_integer("-7") == -7);
  CHECK(parse_integer("007") == 7);
  CHECK(parse_integer("9223372036854775807") == INT64_MAX);
  CHECK(parse_integer("-9223372036854775808") == INT64_MIN);
  for (const char* bad : {"", "-", "+1", " 1", "1 ", "1.0", "1e3", "0x10", "12abc", "abc", "9223372036854775808",
                          "-9223372036854775809", "99999999999999999999", "--1"})
    CHECK_FALSE(parse_integer(bad).has_value());
}

TEST_CASE("integer flags: strict, bounded, with the flag's name in the error", "[flags]") {
  auto args = parse({"--threads=4"});
  REQUIRE(args.ok());
  CHECK(*cli::integer_flag(*args, "threads", 0, 1, 1024) == 4);
  CHECK(*cli::integer_flag(*args, "absent", 9, 1, 1024) == 9);
  for (const char* bad :
       {"--threads=0", "--threads=-1", "--threads=1025", "--threads=abc", "--threads=", "--threads=1000000"}) {
    auto a = parse({bad});
    REQUIRE(a.ok());
    auto n = cli::integer_flag(*a, "threads", 0, 1, 1024);
    REQUIRE(!n.ok());
    CHECK(n.error().message ==
          "--threads must be an integer from 1 to 1024, got '" + std::string(bad).substr(10) + "'");
  }
}

TEST_CASE("parse_args: values, repeats, unknown flags", "[flags]") {
  auto args = parse({"m.kiln", "--input", "x=a.npy", "--input=y=b.npy", "--quick", "-"});
  REQUIRE(args.ok());
  CHECK(args->positional == std::vector<std::string>{"m.kiln", "-"});
  CHECK(args->all("input") == std::vector<std::string>{"x=a.npy", "y=b.npy"});
  CHECK(args->has("quick"));
  CHECK(parse({"--threads=1", "--threads=2"}).error().message == "kiln x: error: --threads is given more than once");
  CHECK(parse({"--threads"}).error().message == "kiln x: error: --threads needs a value; see 'kiln x --help'");
  CHECK(parse({"--quick=yes"}).error().message == "kiln x: error: --quick takes no value");
  CHECK(parse({"--fast"}).error().message == "kiln x: error: unknown flag '--fast'; see 'kiln x --help'");
  CHECK(parse({"-O3"}).error().message == "kiln x: error: unknown flag '-O3'; see 'kiln x --help'");
}
