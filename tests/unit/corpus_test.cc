// Checks over files in the repository: every test .kir round-trips, and docs/ir.md
// documents every op of the op table.
#include <fmt/format.h>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "passes/pipeline.h"
#include "tests/unit/test_util.h"

using namespace kiln;

namespace {

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("every .kir file under tests/lit prints and parses back to the same text", "[corpus]") {
  int count = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator("tests/lit")) {
    if (entry.path().extension() != ".kir") continue;
    // A file of several cases (kiln opt --split-input-file) is checked part by part.
    for (const std::string& part : ir::split_input_parts(read(entry.path()))) {
      INFO(entry.path());
      auto g = ir::parse(part, entry.path().string());
      // Only files under errors/ may be malformed (on purpose); some of those make their
      // bad input in their RUN lines and are themselves valid.
      if (!g.ok() && entry.path().string().find("/errors/") != std::string::npos) continue;
      if (!g.ok()) FAIL(g.error().message);
      std::string printed = ir::print(*g);
      auto again = ir::parse(printed, "printed.kir");
      if (!again.ok()) FAIL(again.error().message);
      CHECK(ir::print(*again) == printed);
      ++count;
    }
  }
  CHECK(count >= 10);
}

TEST_CASE("every test model plans within 10% of its live lower bound", "[corpus][memory]") {
  auto models = kiln::testing::text_test_models();
  for (auto& [path, g] : models) {
    INFO(path);
    auto pipeline = passes::pipeline_from_text(kiln::passes::kDefaultPipeline);
    REQUIRE(pipeline.ok());
    auto r = pipeline->run(g);
    if (!r.ok()) FAIL(r.error().message);
    const ir::MemoryPlan& plan = *g.memory;
    INFO("arena " << plan.arena_bytes << ", live lower bound " << plan.live_lower_bound_bytes);
    CHECK(plan.arena_bytes <= 1.10 * plan.live_lower_bound_bytes);
  }
  CHECK(models.size() >= 20);
}

TEST_CASE("docs/ir.md lists every op with its kind and arity", "[corpus][docs]") {
  std::string doc = read("docs/ir.md");
  REQUIRE(!doc.empty());
  for (ir::Op op : ir::all_ops()) {
    std::string row = fmt::format("| `{}` | {} |", ir::op_name(op), ir::op_kind_name(ir::op_kind(op)));
    INFO("docs/ir.md needs a row starting: " << row);
    CHECK(doc.find(row) != std::string::npos);
  }
}
