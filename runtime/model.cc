#include "runtime/model.h"

#include <algorithm>
#include <iterator>

#include "base/allocation.h"
#include "base/version.h"
#include "runtime/cpu/matmul.h"
#include "runtime/cuda/driver.h"
#include "runtime/executor.h"
#include "runtime/format/artifact.h"

namespace kiln::runtime {

std::string_view runtime_version() { return kVersion; }

std::string artifact_format_versions() {
  return std::to_string(format::kFormatMajor) + ".0 to " + std::to_string(format::kFormatMajor) + "." +
         std::to_string(format::kFormatMinor);
}

std::string cpu_matmul_library() { return cpu::matmul_library(); }

Result<std::string> cuda_driver_version() {
  KILN_ASSIGN_OR_RETURN(const cuda::Driver* cu, cuda::driver());
  int version = 0;
  if (CUresult r = cu->driver_get_version(&version); r != CUDA_SUCCESS)
    return make_error("cuDriverGetVersion: " + cu->describe(r));
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

// What a Model holds: the artifact's bytes (every section is read in place), its verified
// view, the signature, and the executor of its target.
class ModelImpl {
 public:
  std::vector<uint8_t> bytes;
  format::ArtifactView view;
  Signature signature;
  std::vector<TensorInfo> inputs, outputs, state;
  std::vector<std::string> output_states;  // per output: the state it updates, or empty
  std::vector<StepInfo> steps;
  std::unique_ptr<Executor> executor;
};

namespace {

// The signature of a verified artifact, and its input, output and state types.
Status read_signature(ModelImpl& m) {
  const format::Artifact& a = m.view.metadata();
  Signature& sig = m.signature;
  for (const format::Value* v : *a.values()) {
    sig.values.push_back(
        {v->name() ? v->name()->str() : "", static_cast<ElementType>(v->dtype()),
         v->shape() ? std::vector<int64_t>(v->shape()->begin(), v->shape()->end()) : std::vector<int64_t>()});
    sig.value_bytes.push_back(sig.values.back().bytes());
  }
  sig.weights.assign(sig.values.size(), nullptr);
  for (const format::Argument* arg : *a.args()) {
    const uint32_t v = arg->value();
    const uint8_t* weights =
        arg->weight() >= 0 ? m.view.section(*a.weights()->Get(static_cast<uint32_t>(arg->weight()))).data() : nullptr;
    if (arg->kind() == format::ArgKind::Input) {
      m.inputs.push_back(sig.values[v]);
      sig.input_values.push_back(v);
    } else if (arg->kind() == format::ArgKind::Param) {
      sig.weights[v] = weights;
    } else {
      m.state.push_back(sig.values[v]);
      sig.state_values.push_back(v);
      sig.state_initial.push_back(weights);
    }
  }
  // The state each value updates: in place (a buffer at home in the state), or copied
  // there after the last step.
  std::map<uint32_t, uint32_t> updated_state;
  for (const format::Buffer* b : *a.buffers())
    if (b->home() == format::Home::State && b->state() >= 0)
      updated_state[b->value()] = static_cast<uint32_t>(b->state());
  if (a.state_copies())
    for (const format::StateCopy* c : *a.state_copies()) updated_state[c->value()] = c->state();
  for (uint32_t v : *a.results()) {
    m.outputs.push_back(sig.values[v]);
    sig.output_values.push_back(v);
    auto updated = updated_state.find(v);
    m.output_states.push_back(updated == updated_state.end() ? std::string() : sig.values[updated->second].name);
  }
  return Status::Ok();
}

// The steps of a verified artifact with their traffic, then the copies a run makes after
// them: an output the kernels could not write into the caller's buffer (one that is not
// in the arena, or a value returned twice) and the state updates not done in place. The
// outputs that update a state (`output_states`) are left out: a run copies them out only
// when asked.
std::vector<StepInfo> read_steps(const format::Artifact& a, const Signature& sig,
                                 const std::vector<std::string>& output_states) {
  constexpr const char* kKinds[] = {"loop", "reduction", "library", "scatter"};
  static_assert(std::size(kKinds) == static_cast<size_t>(format::StepKind::MAX) + 1, "a step kind without a name");
  std::vector<StepInfo> steps;
  for (const format::Step* s : *a.steps()) {
    StepInfo info;
    info.name = s->name() ? s->name()->str() : "step " + std::to_string(steps.size());
    info.kind = kKinds[static_cast<int>(s->kind())];
    if (s->ops())
      for (const auto* op : *s->ops()) info.ops.push_back(op->str());
    for (uint32_t v : *s->inputs()) {
      info.inputs.push_back(sig.values[v].name);
      info.bytes += sig.value_bytes[v];
    }
    for (uint32_t v : *s->outputs()) {
      info.outputs.push_back(sig.values[v].name);
      info.bytes += sig.value_bytes[v];
    }
    info.flops = s->flops();
    steps.push_back(std::move(info));
  }
  StepInfo copies{"copies", "copy", {}, {}, {}, 0, 0, ""};
  std::vector<char> written_in_place(sig.values.size(), 0);
  for (size_t i = 0; i < sig.output_values.size(); ++i) {
    if (!output_states[i].empty()) continue;
    const uint32_t v = sig.output_values[i];
    bool in_arena = false;
    for (const format::Buffer* b : *a.buffers())
      if (b->value() == v) in_arena = b->home() == format::Home::Arena;
    if (in_arena && !written_in_place[v]) {
      written_in_place[v] = 1;
      continue;
    }
    copies.inputs.push_back(sig.values[v].name);
    copies.bytes += 2 * sig.value_bytes[v];
  }
  if (a.state_copies())
    for (const format::StateCopy* c : *a.state_copies()) {
      copies.inputs.push_back(sig.values[c->value()].name);
      copies.outputs.push_back(sig.values[c->state()].name);
      copies.bytes += 2 * sig.value_bytes[c->value()];
    }
  steps.push_back(std::move(copies));
  return steps;
}

}  // namespace

Model::Model(std::unique_ptr<ModelImpl> impl) : impl_(std::move(impl)) {}
Model::~Model() = default;

Result<std::shared_ptr<Model>> Model::load_file(const std::string& path, const Options& options) {
  auto bytes = format::read_artifact_file(path);
  if (!bytes.ok())
    return make_error((bytes.error().code ? path + ": " : std::string("runtime: ")) + bytes.error().message);
  auto model = load_bytes(std::move(*bytes), options);
  if (!model.ok()) return make_error(path + ": " + model.error().message);
  return model;
}

Result<std::shared_ptr<Model>> Model::load_bytes(std::vector<uint8_t> bytes, const Options& options) {
  if (options.threads < 0 || options.threads > kMaxThreads)
    return make_error("runtime: threads must be from 1 to " + std::to_string(kMaxThreads) +
                      ", or 0 for one per hardware thread; got " + std::to_string(options.threads));
  auto impl = std::make_unique<ModelImpl>();
  impl->bytes = std::move(bytes);
  KILN_ASSIGN_OR_RETURN(impl->view, format::read_artifact(impl->bytes));
  const std::string_view target = impl->view.metadata().target()->string_view();
  const TargetRuntime* runtime = nullptr;
  std::string targets;
  for (const TargetRuntime& t : target_runtimes()) {
    if (t.runs(target)) runtime = &t;
    targets += (targets.empty() ? "" : " and ") + std::string(t.name);
  }
  if (!runtime)
    return Error{"artifact: wrong target: compiled for " + std::string(target) + ", but this runtime runs " + targets,
                 static_cast<int>(format::ArtifactErrorKind::WrongTarget)};
  KILN_RETURN_IF_ERROR(read_signature(*impl));
  impl->steps = read_steps(impl->view.metadata(), impl->signature, impl->output_states);
  KILN_ASSIGN_OR_RETURN(impl->executor, runtime->load(impl->view, impl->signature, options));
  for (size_t s = 0; s + 1 < impl->steps.size(); ++s)
    impl->steps[s].implementation = impl->executor->step_implementation(s);
  return std::shared_ptr<Model>(new Model(std::move(impl)));
}

const std::vector<TensorInfo>& Model::inputs() const { return impl_->inputs; }
const std::vector<TensorInfo>& Model::outputs() const { return impl_->outputs; }
const std::vector<TensorInfo>& Model::state() const { return impl_->state; }
const std::vector<std::string>& Model::output_states() const { return impl_->output_states; }
const std::vector<StepInfo>& Model::steps() const { return impl_->steps; }

namespace {

bool names(const std::vector<TensorInfo>& infos, const std::string& name) {
  return std::any_of(infos.begin(), infos.end(), [&](const TensorInfo& info) { return info.name == name; });
}

// An error for the first name in `given` that is not one of the model's plain inputs.
template <class Buffer>
Status no_unknown_inputs(const std::vector<TensorInfo>& inputs, const std::vector<TensorInfo>& state,
                         const std::map<std::string, Buffer>& given) {
  for (const auto& [name, buffer] : given) {
    if (names(inputs, name)) continue;
    if (names(state, name))
      return make_error("run: the model has no input %" + name + "; %" + name +
                        " is state, which the model keeps: set it with write_state (kiln run: --state-in)");
    return make_error("run: the model has no input %" + name);
  }
  return Status::Ok();
}

// The data of each input in order, each checked for its type, shape and size.
Result<std::vector<const uint8_t*>> input_data(const std::vector<TensorInfo>& inputs,
                                               const std::vector<TensorInfo>& state,
                                               const std::map<std::string, HostTensor>& given) {
  std::vector<const uint8_t*> data;
  for (const TensorInfo& want : inputs) {
    auto it = given.find(want.name);
    if (it == given.end()) return make_error("run: missing input %" + want.name + ": " + want.type_string());
    const HostTensor& t = it->second;
    if (t.info.type != want.type || t.info.shape != want.shape)
      return make_error("run: input %" + want.name + " must be " + want.type_string() + ", got " +
                        t.info.type_string());
    if (static_cast<int64_t>(t.data.size()) != want.bytes())
      return make_error("run: input %" + want.name + " holds " + std::to_string(t.data.size()) + " bytes, not " +
                        std::to_string(want.bytes()));
    data.push_back(t.data.data());
  }
  KILN_RETURN_IF_ERROR(no_unknown_inputs(inputs, state, given));
  return data;
}

}  // namespace

Result<std::vector<HostTensor>> Model::run(const std::map<std::string, HostTensor>& inputs) const {
  KILN_ASSIGN_OR_RETURN(std::vector<const uint8_t*> in, input_data(impl_->inputs, impl_->state, inputs));
  std::vector<HostTensor> results;
  std::vector<uint8_t*> buffers;
  for (const TensorInfo& info : impl_->outputs) {
    results.push_back({info, {}});
    KILN_RETURN_IF_ERROR(
        resize_or_error(results.back().data, static_cast<uint64_t>(info.bytes()), "output %" + info.name));
  }
  for (HostTensor& t : results) buffers.push_back(t.data.data());
  KILN_RETURN_IF_ERROR(run_into(in, buffers));
  return results;
}

Result<std::vector<uint8_t*>> Model::output_buffers(const std::map<std::string, std::span<uint8_t>>& outputs) const {
  std::vector<uint8_t*> buffers;
  for (size_t i = 0; i < impl_->outputs.size(); ++i) {
    const TensorInfo& info = impl_->outputs[i];
    auto it = outputs.find(info.name);
    if (it == outputs.end() && !impl_->output_states[i].empty()) {  // the state holds it: nothing to copy
      buffers.push_back(nullptr);
      continue;
    }
    if (it == outputs.end()) return make_error("run: no buffer for output %" + info.name + ": " + info.type_string());
    if (static_cast<int64_t>(it->second.size()) != info.bytes())
      return make_error("run: the buffer for output %" + info.name + " has " + std::to_string(it->second.size()) +
                        " bytes, not " + std::to_string(info.bytes()));
    buffers.push_back(it->second.data());
  }
  for (const auto& [name, buffer] : outputs)
    if (std::none_of(impl_->outputs.begin(), impl_->outputs.end(),
                     [&](const TensorInfo& info) { return info.name == name; }))
      return make_error("run: the model has no output %" + name);
  return buffers;
}

Status Model::run(const std::map<std::string, HostTensor>& inputs,
                  const std::map<std::string, std::span<uint8_t>>& outputs) const {
  KILN_ASSIGN_OR_RETURN(std::vector<const uint8_t*> in, input_data(impl_->inputs, impl_->state, inputs));
  KILN_ASSIGN_OR_RETURN(std::vector<uint8_t*> out, output_buffers(outputs));
  return run_into(in, out);
}

namespace {

// The caller's buffer of each input in order, each checked for its size.
Result<std::vector<const uint8_t*>> input_spans(const std::vector<TensorInfo>& inputs,
                                                const std::vector<TensorInfo>& state,
                                                const std::map<std::string, std::span<const uint8_t>>& given) {
  std::vector<const uint8_t*> in;
  for (const TensorInfo& want : inputs) {
    auto it = given.find(want.name);
    if (it == given.end()) return make_error("run: missing input %" + want.name + ": " + want.type_string());
    if (static_cast<int64_t>(it->second.size()) != want.bytes())
      return make_error("run: the buffer for input %" + want.name + " has " + std::to_string(it->second.size()) +
                        " bytes, not " + std::to_string(want.bytes()) + " (" + want.type_string() + ")");
    in.push_back(it->second.data());
  }
  KILN_RETURN_IF_ERROR(no_unknown_inputs(inputs, state, given));
  return in;
}

// The device pointer of each of `infos` in order, from the caller's map.
Result<std::vector<uint64_t>> device_pointers(const std::vector<TensorInfo>& infos,
                                              const std::map<std::string, uint64_t>& given, const char* what) {
  std::vector<uint64_t> ptrs;
  for (const TensorInfo& info : infos) {
    auto it = given.find(info.name);
    if (it == given.end())
      return make_error(std::string("run: no device pointer for ") + what + " %" + info.name + ": " +
                        info.type_string());
    ptrs.push_back(it->second);
  }
  for (const auto& [name, ptr] : given)
    if (std::none_of(infos.begin(), infos.end(), [&](const TensorInfo& i) { return i.name == name; }))
      return make_error(std::string("run: the model has no ") + what + " %" + name);
  return ptrs;
}

}  // namespace

Status Model::run(const std::map<std::string, std::span<const uint8_t>>& inputs,
                  const std::map<std::string, std::span<uint8_t>>& outputs) const {
  KILN_ASSIGN_OR_RETURN(std::vector<const uint8_t*> in, input_spans(impl_->inputs, impl_->state, inputs));
  KILN_ASSIGN_OR_RETURN(std::vector<uint8_t*> out, output_buffers(outputs));
  return run_into(in, out);
}

Result<RunProfile> Model::profile(const std::map<std::string, std::span<const uint8_t>>& inputs,
                                  const std::map<std::string, std::span<uint8_t>>& outputs) const {
  KILN_ASSIGN_OR_RETURN(std::vector<const uint8_t*> in, input_spans(impl_->inputs, impl_->state, inputs));
  KILN_ASSIGN_OR_RETURN(std::vector<uint8_t*> out, output_buffers(outputs));
  RunProfile profile;
  KILN_RETURN_IF_ERROR(impl_->executor->run_host(in, out, &profile));
  return profile;
}

Status Model::run_into(const std::vector<const uint8_t*>& inputs, const std::vector<uint8_t*>& outputs) const {
  return impl_->executor->run_host(inputs, outputs, nullptr);
}

Status Model::run_device(const std::map<std::string, uint64_t>& inputs,
                         const std::map<std::string, uint64_t>& outputs) const {
  KILN_ASSIGN_OR_RETURN(std::vector<uint64_t> in, device_pointers(impl_->inputs, inputs, "input"));
  KILN_ASSIGN_OR_RETURN(std::vector<uint64_t> out, device_pointers(impl_->outputs, outputs, "output"));
  return impl_->executor->run_device(in, out, nullptr);
}

Result<RunProfile> Model::profile_device(const std::map<std::string, uint64_t>& inputs,
                                         const std::map<std::string, uint64_t>& outputs) const {
  KILN_ASSIGN_OR_RETURN(std::vector<uint64_t> in, device_pointers(impl_->inputs, inputs, "input"));
  KILN_ASSIGN_OR_RETURN(std::vector<uint64_t> out, device_pointers(impl_->outputs, outputs, "output"));
  RunProfile profile;
  KILN_RETURN_IF_ERROR(impl_->executor->run_device(in, out, &profile));
  return profile;
}

int64_t Model::batch() const { return impl_->view.metadata().batch(); }
std::string Model::target() const { return impl_->view.metadata().target()->str(); }
std::string Model::code() const { return impl_->executor->code(); }
std::string Model::schedule() const { return impl_->executor->schedule(); }

namespace {

// The position of state tensor `name`, or an error.
Result<size_t> state_index(const std::vector<TensorInfo>& state, const std::string& name) {
  for (size_t i = 0; i < state.size(); ++i)
    if (state[i].name == name) return i;
  return make_error("runtime: the model has no state %" + name);
}

}  // namespace

Result<HostTensor> Model::read_state(const std::string& name) const {
  KILN_ASSIGN_OR_RETURN(size_t i, state_index(impl_->state, name));
  HostTensor t{impl_->state[i], {}};
  KILN_RETURN_IF_ERROR(resize_or_error(t.data, static_cast<uint64_t>(t.info.bytes()), "state %" + name));
  KILN_RETURN_IF_ERROR(impl_->executor->read_state(i, t.data.data()));
  return t;
}

Status Model::write_state(const std::string& name, const HostTensor& value) {
  KILN_ASSIGN_OR_RETURN(size_t i, state_index(impl_->state, name));
  const TensorInfo& want = impl_->state[i];
  if (value.info.type != want.type || value.info.shape != want.shape ||
      static_cast<int64_t>(value.data.size()) != want.bytes())
    return make_error("runtime: state %" + name + " is " + want.type_string() + ", got " + value.info.type_string());
  return impl_->executor->write_state(i, value.data.data());
}

}  // namespace kiln::runtime
