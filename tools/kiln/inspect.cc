// kiln inspect: what an artifact holds, after verifying it.
#include <fmt/format.h>

#include "runtime/format/artifact.h"
#include "runtime/format/target.h"
#include "runtime/model.h"
#include "tools/kiln/cli.h"

namespace kiln::cli {
namespace {

constexpr std::string_view kInspectHelp = R"(usage: kiln inspect M.kiln [--no-ir]

Verifies the artifact M.kiln and prints what it holds: format and compiler versions,
flags, target, signature, the memory plan, the steps, the code and weight sections with
their sizes and checksums, and the text IR it was compiled from.

  --no-ir      leave out the embedded IR
  -h, --help   this help
)";

// The format's element types are the runtime's, in the same order.
std::string_view dtype_text(format::DType d) {
  return runtime::element_type_name(static_cast<runtime::ElementType>(d));
}

// The imported model's name of a value, where it has one (format 1.7).
std::string source_text(const format::Artifact& a, uint32_t v) {
  const format::Value* value = a.values()->Get(v);
  return value->source_name() ? fmt::format(", imported as '{}'", value->source_name()->str()) : "";
}

std::string value_text(const format::Artifact& a, uint32_t v) {
  const format::Value* value = a.values()->Get(v);
  std::string shape;
  if (value->shape())
    for (int64_t d : *value->shape()) shape += (shape.empty() ? "" : ",") + std::to_string(d);
  return fmt::format("%{}: {}[{}]", value->name() ? value->name()->str() : std::to_string(v),
                     dtype_text(value->dtype()), shape);
}

std::string refs(const format::Artifact& a, const flatbuffers::Vector<uint32_t>* values) {
  std::string out;
  if (values)
    for (uint32_t v : *values)
      out += (out.empty() ? "%" : ", %") + (a.values()->Get(v)->name() ? a.values()->Get(v)->name()->str() : "?");
  return out;
}

std::string section_text(const format::Section& s) {
  return fmt::format("{} bytes at {}, xxh64 {:016x}", s.size(), s.offset(), s.xxh64());
}

// A library call's post-ops: "post-ops: Bias input 2, GeluErf".
void print_post_ops(const flatbuffers::Vector<flatbuffers::Offset<format::PostOp>>* post_ops) {
  if (!post_ops || post_ops->size() == 0) return;
  std::vector<std::string> post;
  for (const format::PostOp* p : *post_ops) {
    std::string what = format::EnumNamePostOpKind(p->kind());
    if (p->kind() == format::PostOpKind::Clip) what += fmt::format(" [{}, {}]", p->lo(), p->hi());
    if (p->input() >= 0) what += fmt::format(" input {}", p->input());
    post.push_back(what);
  }
  fmt::print("        post-ops: {}\n", fmt::join(post, ", "));
}

}  // namespace

int run_inspect(std::span<char* const> argv) {
  constexpr std::string_view cmd = "kiln inspect";
  constexpr FlagSpec specs[] = {{"no-ir"}};
  auto args = parse_args(cmd, argv, specs);
  if (!args.ok()) return fail_located(args.error());
  if (args->help) {
    fmt::print("{}", kInspectHelp);
    return 0;
  }
  if (args->positional.size() != 1) return fail(cmd, "expected one artifact file; see 'kiln inspect --help'");
  const std::string& path = args->positional[0];
  auto bytes = format::read_artifact_file(path);
  if (!bytes.ok())
    return fail(cmd, bytes.error().code ? fmt::format("{}: {}", path, bytes.error().message) : bytes.error().message);
  auto view = format::read_artifact(*bytes);
  if (!view.ok()) return fail(cmd, fmt::format("{}: {}", path, view.error().message));
  const format::Artifact& a = view->metadata();
  fmt::print("artifact: {} ({} bytes)\n", path, view->file_bytes());
  fmt::print("format: {}.{}\n", view->format_major(), view->format_minor());
  fmt::print("compiler: {}\n", a.compiler_version() ? a.compiler_version()->str() : "?");
  std::string flags;
  if (a.flags())
    for (const auto* f : *a.flags()) flags += (flags.empty() ? "" : " ") + f->str();
  fmt::print("flags: {}\n", flags.empty() ? "(none)" : flags);
  fmt::print("target: {}\n", a.target()->str());
  if (a.allow_tf32()) fmt::print("f32 matmuls: TF32 tensor cores allowed (--allow-tf32)\n");
  if (a.batch() > 0) fmt::print("batch: {} independent rows lead every input and output (--batch)\n", a.batch());
  const char* kinds[] = {"input", "param", "state"};
  fmt::print("arguments:\n");
  if (a.args())
    for (const format::Argument* arg : *a.args()) {
      std::string extra = arg->kind() == format::ArgKind::Param
                              ? " weights " + section_text(*a.weights()->Get(arg->weight()))
                          : arg->kind() == format::ArgKind::State && arg->weight() >= 0
                              ? " initial value " + section_text(*a.weights()->Get(arg->weight()))
                              : "";
      fmt::print("  {} {}{}{}\n", kinds[static_cast<int>(arg->kind())], value_text(a, arg->value()), extra,
                 source_text(a, arg->value()));
    }
  fmt::print("results:\n");
  if (a.results())
    for (uint32_t v : *a.results()) fmt::print("  {}{}\n", value_text(a, v), source_text(a, v));
  fmt::print("arena: {} bytes, alignment {}\n", a.arena_bytes(), a.alignment());
  const char* homes[] = {"arena", "input", "param", "state"};
  if (a.buffers())
    for (const format::Buffer* b : *a.buffers()) {
      if (b->home() == format::Home::Input || b->home() == format::Home::Param) continue;
      auto name = [&](int v) { return a.values()->Get(static_cast<uint32_t>(v))->name()->str(); };
      std::string where = b->home() == format::Home::Arena
                              ? fmt::format("[{}, {})", b->offset(), b->offset() + b->bytes())
                          : b->state() >= 0 ? fmt::format("state %{}", name(b->state()))
                                            : std::string(homes[static_cast<int>(b->home())]);
      std::string reuse = b->in_place_of() >= 0 ? fmt::format(", in place of %{}", name(b->in_place_of())) : "";
      fmt::print("  %{}: {} steps {}..{}{}\n", name(static_cast<int>(b->value())), where, b->first_step(),
                 b->last_step(), reuse);
    }
  const char* step_kinds[] = {"loop", "reduction", "library", "scatter"};
  fmt::print("steps: {}\n", a.steps() ? a.steps()->size() : 0);
  if (a.steps())
    for (uint32_t s = 0; s < a.steps()->size(); ++s) {
      const format::Step* step = a.steps()->Get(s);
      std::string launch =
          step->block_threads() > 0
              ? fmt::format(" <<<{} blocks, {} threads{}>>>", step->grid_blocks(), step->block_threads(),
                            step->shared_bytes() > 0 ? fmt::format(", {} bytes shared", step->shared_bytes()) : "")
              : "";
      fmt::print("  {:3} {} {} [{}] ({}) -> ({}){}\n", s, step_kinds[static_cast<int>(step->kind())],
                 step->name() ? step->name()->str() : "?", step->symbol()->str(), refs(a, step->inputs()),
                 refs(a, step->outputs()), launch);
      if (step->kind() == format::StepKind::Library && step->matmul()) {
        const format::Matmul& mm = *step->matmul();
        std::string batch;
        if (mm.batch())
          for (const format::BatchDim* d : *mm.batch())
            batch += fmt::format(" [{} x strides a {}, b {}, c {}]", d->count(), d->a_stride(), d->b_stride(),
                                 d->c_stride());
        std::string views;  // format 1.11: operands read in place, by leading dims and offsets
        if (mm.lda()) views += fmt::format(" lda={}", mm.lda());
        if (mm.ldb()) views += fmt::format(" ldb={}", mm.ldb());
        if (mm.a_offset()) views += fmt::format(" a_offset={}", mm.a_offset());
        if (mm.b_offset()) views += fmt::format(" b_offset={}", mm.b_offset());
        fmt::print("        gemm m={} n={} k={}{}{}{}, batch{}\n", mm.m(), mm.n(), mm.k(),
                   mm.trans_a() ? " trans_a" : "", mm.trans_b() ? " trans_b" : "", views,
                   batch.empty() ? " none" : batch);
        print_post_ops(mm.post_ops());
      }
      if (step->kind() == format::StepKind::Library && step->attention()) {
        const format::Attention& at = *step->attention();
        auto list = [](const flatbuffers::Vector<int64_t>* v) { return fmt::format("[{}]", fmt::join(*v, ",")); };
        fmt::print(
            "        attention: batch {} T={} S={} D={} Dv={}; q at {} strides {}, k at {} strides {}, v at {} "
            "strides {}\n",
            list(at.batch()), at.queries(), at.keys(), at.head_dim(), at.value_dim(), at.q_offset(),
            list(at.q_strides()), at.k_offset(), list(at.k_strides()), at.v_offset(), list(at.v_strides()));
        if (at.out_strides()) fmt::print("        attention: out strides {}\n", list(at.out_strides()));
        if (at.gradient() && at.d_out_strides() && at.gradient_outputs() && at.gradient_offsets() &&
            at.gradient_strides() && at.gradient_outputs()->size() == 3 && at.gradient_offsets()->size() == 3) {
          fmt::print("        attention: backward (P computed again); dO at {} strides {}\n", at.d_out_offset(),
                     list(at.d_out_strides()));
          const size_t rank = at.gradient_strides()->size() / 3;
          const char* names[3] = {"dq", "d(kT)", "dv"};
          for (uint32_t i = 0; i < 3; ++i)
            fmt::print("        attention: {} into output {} at {} strides [{}]\n", names[i],
                       at.gradient_outputs()->Get(i), at.gradient_offsets()->Get(i),
                       fmt::join(at.gradient_strides()->begin() + i * rank,
                                 at.gradient_strides()->begin() + (i + 1) * rank, ","));
        }
        if (at.precision() != format::DType::F32)
          fmt::print("        attention: in {} (scores and probabilities rounded to it, f32 between)\n",
                     dtype_text(at.precision()));
        if (at.transforms())
          for (const format::ScoreTransform* t : *at.transforms()) {
            const std::string operand =
                t->input() >= 0 ? fmt::format(" input {} at {} strides {}", t->input(), t->offset(), list(t->strides()))
                                : "";
            const std::string value =
                t->kind() == format::ScoreTransformKind::Add ? "" : fmt::format(" {}", t->value());
            fmt::print("        scores: {}{}{}\n", format::EnumNameScoreTransformKind(t->kind()), value, operand);
          }
      }
      if (step->kind() == format::StepKind::Library && step->conv()) {
        const format::Conv& c = *step->conv();
        auto list = [](const flatbuffers::Vector<int64_t>* v) { return fmt::format("[{}]", fmt::join(*v, ",")); };
        fmt::print("        oneDNN convolution {}: x {} w {} y {}, strides {} dilations {} pads {} {} groups {}\n",
                   format::EnumNameConvKind(c.kind()), list(c.x()), list(c.w()), list(c.y()), list(c.strides()),
                   list(c.dilations()), list(c.pads_lo()), list(c.pads_hi()), c.groups());
        const format::DType in = a.values()->Get(step->inputs()->Get(0))->dtype(),
                            out = a.values()->Get(step->outputs()->Get(0))->dtype();
        if (in != format::DType::F32)
          fmt::print("        convolution: {} operands, {} result (f32 sums, rounded once after the post-ops)\n",
                     dtype_text(in), dtype_text(out));
        print_post_ops(c.post_ops());
      }
      if (step->partial_symbol() && step->partial_symbol()->size() > 0) {
        const std::string partial_launch =
            step->partial_block_threads() > 0
                ? fmt::format(
                      " <<<{} blocks, {} threads{}>>>", step->partial_grid_blocks(), step->partial_block_threads(),
                      step->partial_shared_bytes() > 0 ? fmt::format(", {} bytes shared", step->partial_shared_bytes())
                                                       : "")
                : "";
        // An attention backward's first kernel (1.19) writes its query rows' values.
        if (step->attention() && step->attention()->gradient())
          fmt::print(
              "        first: [{}]{}, each query row's maximum, 1/sum and sum of P*dP into {} bytes of scratch at "
              "{}\n",
              step->partial_symbol()->str(), partial_launch, step->scratch_bytes(), step->scratch_offset());
        else
          fmt::print("        split: {} parts first [{}]{}, {} bytes of scratch at {}\n", step->partial_items(),
                     step->partial_symbol()->str(), partial_launch, step->scratch_bytes(), step->scratch_offset());
      }
      // Format 1.10: the same kernel over activations kept in oneDNN's layouts.
      if (step->channel_layouts() && step->channel_layouts()->size() > 0) {
        std::vector<std::string> kernels;
        for (int32_t b : *step->channel_layouts())
          kernels.push_back(format::channel_layout_kernel_symbol(step->symbol()->str(), b));
        fmt::print("        in oneDNN's layouts too: [{}]\n", fmt::join(kernels, ", "));
      }
      // Format 1.3 records what each step computes; `kiln bench --profile` names steps alike.
      if (step->ops() && step->ops()->size() > 0) {
        std::string ops;
        for (const auto* op : *step->ops()) ops += (ops.empty() ? "" : ", ") + op->str();
        fmt::print("        computes {} ({} flops)\n", ops, step->flops());
      }
    }
  fmt::print("code:\n");
  if (a.code())
    for (const format::CodeObject* c : *a.code()) {
      std::string cpu;
      if (c->cpu()) {
        std::string needs;
        if (c->cpu_features())
          for (const auto* f : *c->cpu_features()) needs += (needs.empty() ? "" : " ") + f->str();
        cpu = fmt::format(" for --cpu={} (needs: {})", c->cpu()->str(), needs.empty() ? "x86-64 only" : needs);
      }
      fmt::print("  {} {}{}: {}\n", c->kind() ? c->kind()->str() : "?", c->arch() ? c->arch()->str() : "?", cpu,
                 section_text(*c->section()));
    }
  fmt::print("ir: {}\n", section_text(*a.ir()));
  if (!args->has("no-ir")) {
    auto ir = view->section(*a.ir());
    fmt::print("--- the IR it was compiled from ---\n{}", std::string(ir.begin(), ir.end()));
  }
  return 0;
}

}  // namespace kiln::cli
