// kiln import: an ONNX model to kiln's text IR and a safetensors file of its weights.
#include <fmt/format.h>

#include "base/file.h"
#include "frontends/onnx/importer.h"
#include "ir/printer.h"
#include "runtime/format/safetensors.h"
#include "tools/kiln/cli.h"

namespace kiln::cli {
namespace {

constexpr std::string_view kImportHelp =
    R"(usage: kiln import MODEL.onnx -o MODEL.kir [--weights-out=W.safetensors] [--shape=NAME=D0,D1,...]

Imports an ONNX model into kiln's text IR: its initializers become params, whose values go
to the safetensors file (compile with 'kiln compile MODEL.kir --weights=W.safetensors', or
compile MODEL.onnx directly); shape arithmetic on constants is folded; symbolic dims need
--shape. Prints how the model's input and output names map to kiln's (every character
outside [A-Za-z0-9_.] becomes '_'). See docs/onnx.md for the ops kiln imports.

  -o, --output=FILE     the .kir file to write ('-' for stdout)
  --weights-out=FILE    the safetensors file of the params' values (needed when the
                        model has initializers)
)";

}  // namespace

int run_import(std::span<char* const> argv) {
  constexpr std::string_view cmd = "kiln import";
  std::vector<char*> args(argv.begin(), argv.end());
  for (char*& a : args)
    if (std::string_view(a) == "-o") a = const_cast<char*>("--output");
  constexpr FlagSpec specs[] = {{"output", true}, {"weights-out", true}, {"shape", true, true}};
  auto parsed = parse_args(cmd, args, specs);
  if (!parsed.ok()) return fail_located(parsed.error());
  if (parsed->help) {
    fmt::print("{}{}", kImportHelp, kShapeHelp);
    return 0;
  }
  if (parsed->positional.size() != 1) return fail(cmd, "expected one .onnx file; see 'kiln import --help'");
  if (!parsed->has("output")) return fail(cmd, "no output file; give one with -o MODEL.kir");
  auto shapes = shape_flags(*parsed);
  if (!shapes.ok()) return fail(cmd, shapes.error().message);
  auto imported = onnx_import::import_file(parsed->positional[0], import_options(*shapes));
  if (!imported.ok()) return fail(cmd, imported.error().message);
  if (!imported->weights.empty() && !parsed->has("weights-out"))
    return fail(cmd, fmt::format("the model has {} initializers; give --weights-out=W.safetensors for their values",
                                 imported->weights.size()));
  std::vector<format::SafetensorsTensor> tensors;
  for (const auto& [name, t] : imported->weights)
    tensors.push_back({name, std::string(format::kSafetensorsDtypes[static_cast<size_t>(t.type.dtype)]), t.type.shape,
                       ir::tensor_to_bytes(t)});
  if (parsed->has("weights-out")) {
    Status written = format::write_safetensors_file(parsed->get("weights-out"), tensors);
    if (!written.ok()) return fail(cmd, written.error().message);
  }
  const std::string text = ir::print(imported->graph);
  const std::string out = parsed->get("output");
  if (out == "-") {
    fmt::print("{}", text);
  } else {
    Status written = write_file(out, text);
    if (!written.ok()) return fail(cmd, written.error().message);
  }
  std::FILE* info = out == "-" ? stderr : stdout;
  fmt::print(info, "opset {}; {} params\n", imported->opset, imported->weights.size());
  for (const auto& m : imported->inputs) fmt::print(info, "input  {} -> %{}\n", m.onnx, m.kiln);
  for (const auto& m : imported->outputs) fmt::print(info, "output {} -> %{}\n", m.onnx, m.kiln);
  return 0;
}

}  // namespace kiln::cli
