#include "runtime/cpu/layout_plan.h"

#include <optional>

#include "runtime/cpu/dnnl.h"
#include "runtime/cpu/dnnl_conv.h"

namespace kiln::runtime::cpu {
namespace {

// The layouts a value might lie in, each the same bytes in the same order (16 channels in
// blocks of 16 are channels-last too); empty where it stays plain.
using Layouts = std::vector<dnnl_memory_desc_t>;

// oneDNN's layouts of an f32, bf16 or f16 activation [N, C, D1..Dk] as a loop step's
// kernel in `layout` reads and writes it: channels-last (nhwc and its 1-D and 3-D forms)
// for 0, nChw8c and nChw16c for blocks of 8 and 16; with the others that lay out the same
// bytes in the same order (16 channels in blocks of 16 are channels-last too).
Layouts layout_descs(const DnnlApi& api, const format::Value& value, int layout) {
  Layouts layouts;
  const format::DType t = value.dtype();
  if (!value.shape() || !(t == format::DType::F32 || t == format::DType::BF16 || t == format::DType::F16))
    return layouts;
  const dnnl_data_type_t type = t == format::DType::F32 ? dnnl_f32 : t == format::DType::BF16 ? dnnl_bf16 : dnnl_f16;
  const size_t rank = value.shape()->size();
  if (rank < 3 || rank > 5) return layouts;
  std::vector<dnnl_dim_t> dims(value.shape()->begin(), value.shape()->end());
  auto add = [&](dnnl_format_tag_t tag) {
    dnnl_memory_desc_t md;
    if (api.memory_desc_init_by_tag(&md, static_cast<int>(rank), dims.data(), type, tag) == dnnl_success)
      layouts.push_back(md);
  };
  const dnnl_format_tag_t by_8[] = {dnnl_aBc8b, dnnl_aBcd8b, dnnl_aBcde8b},
                          by_16[] = {dnnl_aBc16b, dnnl_aBcd16b, dnnl_aBcde16b},
                          last[] = {dnnl_acb, dnnl_acdb, dnnl_acdeb};
  if (layout == 0 || layout == dims[1]) add(last[rank - 3]);
  if (layout == 8 || (layout == 0 && dims[1] == 8)) add(by_8[rank - 3]);
  if (layout == 16 || (layout == 0 && dims[1] == 16)) add(by_16[rank - 3]);
  return layouts;
}

}  // namespace

std::vector<StepLayout> plan_layouts(const format::Artifact& a, const std::vector<char>& pinned) {
  const uint32_t steps = a.steps()->size();
  std::vector<StepLayout> layouts(steps);
  const DnnlApi* api = dnnl_api();
  if (!api) return layouts;
  auto value = [&](uint32_t v) -> const format::Value& { return *a.values()->Get(v); };
  auto same = [&](const dnnl_memory_desc_t& x, const dnnl_memory_desc_t& y) { return api->memory_desc_equal(&x, &y); };
  // A step's activations are its values of the largest rank among them; it reads and
  // writes others (a per-channel scale, a pool's [N, C] result) as they are.
  auto rank_of = [&](uint32_t v) -> size_t { return value(v).shape() ? value(v).shape()->size() : 0; };
  auto activation_rank = [&](const format::Step& step) {
    size_t rank = 0;
    for (const auto* values : {step.inputs(), step.outputs()})
      for (uint32_t v : *values) rank = std::max(rank, rank_of(v));
    return rank;
  };
  auto any_same = [&](const Layouts& xs, const Layouts& ys) {
    for (const dnnl_memory_desc_t& x : xs)
      for (const dnnl_memory_desc_t& y : ys)
        if (same(x, y)) return true;
    return false;
  };
  // Per value, the layouts its writer could leave it in; per forward convolution step on
  // oneDNN, its primitive's layouts.
  std::vector<Layouts> layout(pinned.size());
  std::vector<std::optional<ConvNativeLayouts>> conv(steps);
  for (uint32_t s = 0; s < steps; ++s) {
    const format::Step& step = *a.steps()->Get(s);
    if (step.kind() == format::StepKind::Library && step.conv()) {
      conv[s] = conv_native_layouts(*step.conv(), conv_types(step, *a.values()));
      const uint32_t y = step.outputs()->Get(0);
      if (conv[s] && conv[s]->y_fits && !pinned[y]) layout[y] = {conv[s]->y};
      continue;
    }
    if (!step.channel_layouts()) continue;
    // The first layout every activation input already lies in, if any.
    const size_t rank = activation_rank(step);
    auto activation = [&](uint32_t v) { return rank_of(v) == rank; };
    for (int32_t block : *step.channel_layouts()) {
      bool laid = true;
      for (uint32_t v : *step.inputs())
        if (activation(v)) laid = laid && any_same(layout[v], layout_descs(*api, value(v), block));
      for (uint32_t v : *step.outputs())
        if (activation(v)) laid = laid && !pinned[v] && !layout_descs(*api, value(v), block).empty();
      if (!laid) continue;
      layouts[s].channel_layout = block;
      for (uint32_t v : *step.outputs())
        if (activation(v)) layout[v] = layout_descs(*api, value(v), block);
      break;
    }
  }
  // A value stays native when every reader takes it in its writer's layout. Where a step
  // in a layout cannot have all of its activations so, it runs its plain kernel, and none
  // of them stays native on its account: repeat until nothing changes.
  std::vector<char> native(pinned.size(), 0);
  for (size_t v = 0; v < pinned.size(); ++v) native[v] = !layout[v].empty();
  for (bool changed = true; changed;) {
    changed = false;
    auto drop = [&](uint32_t v) {
      changed = changed || native[v];
      native[v] = 0;
    };
    for (uint32_t s = 0; s < steps; ++s) {
      const format::Step& step = *a.steps()->Get(s);
      if (layouts[s].channel_layout != StepLayout::kPlain) {
        const size_t rank = activation_rank(step);
        bool all = true;
        for (const auto* values : {step.inputs(), step.outputs()})
          for (uint32_t v : *values) {
            if (rank_of(v) == rank) all = all && native[v];
            else drop(v);  // read as it is
          }
        if (all) continue;
        layouts[s].channel_layout = StepLayout::kPlain;
        changed = true;
        for (const auto* values : {step.inputs(), step.outputs()})
          for (uint32_t v : *values) drop(v);
        continue;
      }
      const uint32_t inputs = step.inputs()->size();
      for (uint32_t i = 0; i < inputs; ++i) {
        const uint32_t v = step.inputs()->Get(i);
        if (!native[v]) continue;
        // Read as x, or as the added tensor.
        const bool as_x = conv[s] && i == 0 && any_same(layout[v], {conv[s]->x});
        const bool as_added =
            conv[s] && static_cast<int>(i) == conv_added_input(*step.conv()) && any_same(layout[v], {conv[s]->y});
        if (!as_x && !as_added) drop(v);
      }
    }
  }
  for (uint32_t s = 0; s < steps; ++s) {
    if (!conv[s]) continue;
    const format::Step& step = *a.steps()->Get(s);
    StepLayout& l = layouts[s];
    l.x_native = native[step.inputs()->Get(0)];
    l.y_native = native[step.outputs()->Get(0)];
    const int added = conv_added_input(*step.conv());
    l.added_native = added >= 0 && native[step.inputs()->Get(static_cast<uint32_t>(added))];
    // A result reordered to plain: from the channel-blocked layout where the primitive for
    // it reads x as the other does.
    if (l.y_native || l.added_native) continue;
    const std::optional<ConvNativeLayouts> blocked =
        conv_native_layouts(*step.conv(), conv_types(step, *a.values()), true);
    l.y_blocked = blocked && !same(blocked->y, conv[s]->y) && (!l.x_native || same(blocked->x, conv[s]->x));
  }
  return layouts;
}

}  // namespace kiln::runtime::cpu
