#include "compiler/model.h"

#include <fmt/format.h>
#include <cmath>

#include "ir/builder.h"
#include "ir/verifier.h"

namespace kiln {
namespace {

// splitmix64: small, fast and identical everywhere, so seeded weights are reproducible.
struct Rng {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  double normal() {  // Box-Muller
    double u1 = 1.0 - uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  }
};

uint64_t hash_name(uint64_t seed, const std::string& name) {
  uint64_t h = 0xcbf29ce484222325ull ^ seed;  // FNV-1a
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

std::vector<double> initial_data(const Init& init, const ir::Shape& shape, uint64_t seed) {
  int64_t n = ir::num_elements(shape);
  double fan_out = shape.empty() ? 1.0 : static_cast<double>(shape.back());
  double fan_in = shape.size() < 2 ? fan_out : static_cast<double>(n) / std::max(fan_out, 1.0);
  if (init.out_in) std::swap(fan_in, fan_out);
  Rng rng{seed};
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) {
    switch (init.kind) {
      case Init::Kind::Zeros: x = 0; break;
      case Init::Kind::Constant: x = init.a; break;
      case Init::Kind::Normal: x = init.a + init.b * rng.normal(); break;
      case Init::Kind::Uniform: x = init.a + (init.b - init.a) * rng.uniform(); break;
      case Init::Kind::XavierUniform: x = (2 * rng.uniform() - 1) * std::sqrt(6.0 / (fan_in + fan_out)); break;
      case Init::Kind::XavierNormal: x = rng.normal() * std::sqrt(2.0 / (fan_in + fan_out)); break;
      case Init::Kind::KaimingUniform: x = (2 * rng.uniform() - 1) * std::sqrt(6.0 / fan_in); break;
      case Init::Kind::KaimingNormal: x = rng.normal() * std::sqrt(2.0 / fan_in); break;
    }
  }
  return v;
}

const ir::TensorType kInvalidType{ir::DType::F32, {}};

}  // namespace

namespace detail {

// What a Model holds, on the heap: Tensors point here, so a move of the Model keeps them valid.
struct ModelState {
  Model* owner = nullptr;
  ir::Graph graph;
  uint64_t seed = 0;
  std::optional<Error> error;
  std::map<std::string, ir::Tensor> initial_values;
  std::map<std::string, ir::ValueId> updates;
};

}  // namespace detail

Tensor::Tensor(Model* model, ir::ValueId id) : model_(model ? model->state_.get() : nullptr), id_(id) {}
Model* Tensor::model() const { return model_ ? model_->owner : nullptr; }
ir::TensorType Tensor::type() const { return valid() ? model_->graph.type(id_) : kInvalidType; }

Model::Model(std::string name, uint64_t seed) : state_(std::make_unique<detail::ModelState>()) {
  state_->owner = this;
  state_->seed = seed;
  state_->graph.name = std::move(name);
}

Model::Model(Model&& other) noexcept : state_(std::move(other.state_)) {
  if (state_) state_->owner = this;
}

Model& Model::operator=(Model&& other) noexcept {
  state_ = std::move(other.state_);
  if (state_) state_->owner = this;
  return *this;
}

Model::~Model() = default;

const std::map<std::string, ir::Tensor>& Model::initial_values() const { return state_->initial_values; }
const std::optional<Error>& Model::error() const { return state_->error; }
const ir::Graph& Model::graph() const { return state_->graph; }

void Model::fail(std::string message) {
  if (!state_->error) state_->error = make_error(fmt::format("model @{}: {}", state_->graph.name, message));
}

Tensor Model::add_arg(const std::string& name, ir::Shape shape, ir::DType dtype, ir::ArgKind kind,
                      std::optional<Init> init) {
  if (state_->graph.find_arg(name)) {
    fail(fmt::format("argument %{} is declared twice", name));
    return {};
  }
  ir::TensorType type{dtype, std::move(shape)};
  if (init)
    state_->initial_values[name] =
        ir::Tensor::from_doubles(type, initial_data(*init, type.shape, hash_name(state_->seed, name)));
  return Tensor(this, ir::GraphBuilder(state_->graph).arg(name, std::move(type), kind));
}

Tensor Model::input(const std::string& name, ir::Shape shape, ir::DType dtype) {
  return add_arg(name, std::move(shape), dtype, ir::ArgKind::Input, std::nullopt);
}

Tensor Model::param(const std::string& name, ir::Shape shape, Init init, ir::DType dtype) {
  return add_arg(name, std::move(shape), dtype, ir::ArgKind::Param, init);
}

Tensor Model::state(const std::string& name, ir::Shape shape, Init init, ir::DType dtype) {
  return add_arg(name, std::move(shape), dtype, ir::ArgKind::State, init);
}

Tensor Model::named(Tensor value, const std::string& name) {
  if (!value.valid()) return value;
  for (const ir::Value& v : state_->graph.values)
    if (v.name == name) {
      if (&v == &state_->graph.values[value.id()]) return value;
      fail(fmt::format("the name %{} is already taken", name));
      return value;
    }
  state_->graph.values[value.id()].name = name;
  return value;
}

void Model::output(Tensor value, const std::string& name) {
  if (!value.valid()) {
    fail("output of an invalid value (an earlier op failed)");
    return;
  }
  if (!name.empty()) named(value, name);
  state_->graph.results.push_back(value.id());
}

void Model::update(Tensor state, Tensor value) {
  if (!state.valid() || !value.valid()) {
    fail("update of or to an invalid value (an earlier op failed)");
    return;
  }
  const ir::Graph& g = state_->graph;
  const std::string& name = g.value_name(state.id());
  const ir::Arg* arg = g.find_arg(name);
  if (!arg || arg->value != state.id() || arg->kind != ir::ArgKind::State)
    return fail(fmt::format("update: %{} is not a state argument", name));
  if (g.type(value.id()) != g.type(state.id()))
    return fail(fmt::format("update: the new value of state %{} must be {}, got {}", name,
                            g.type(state.id()).to_string(), g.type(value.id()).to_string()));
  if (!state_->updates.emplace(name, value.id()).second)
    return fail(fmt::format("update: state %{} is updated twice", name));
}

const std::map<std::string, ir::ValueId>& Model::state_updates() const { return state_->updates; }

Tensor Model::apply(ir::Op op, const std::vector<Tensor>& operands, ir::Attrs attrs) {
  std::vector<ir::ValueId> ids;
  for (const Tensor& t : operands) {
    if (!t.valid()) return {};  // an earlier error is already recorded
    if (t.model() != this) {
      fail(fmt::format("{}: operand belongs to another model", ir::op_name(op)));
      return {};
    }
    ids.push_back(t.id());
  }
  return record(ir::GraphBuilder(state_->graph).add(op, std::move(ids), std::move(attrs)));
}

Tensor Model::record(Result<ir::ValueId> added) {
  if (!added.ok()) {
    fail(added.error().message);
    return {};
  }
  return Tensor(this, *added);
}

Tensor Model::scalar(double value, ir::DType dtype) { return constant({value}, {}, dtype); }

Tensor Model::constant(const std::vector<double>& values, ir::Shape shape, ir::DType dtype) {
  if (static_cast<int64_t>(values.size()) != ir::num_elements(shape)) {
    fail(fmt::format("constant: {} values for shape {}", values.size(), ir::shape_string(shape)));
    return {};
  }
  ir::Literal lit;
  lit.shape = std::move(shape);
  lit.floats = values;
  lit.integral = !ir::is_float(dtype);
  for (double v : values) {
    bool whole = std::isfinite(v) && std::nearbyint(v) == v && std::fabs(v) < 9.2e18;
    lit.integral = lit.integral && whole;
    lit.ints.push_back(whole ? static_cast<int64_t>(v) : 0);
  }
  ir::Attrs attrs;
  attrs.set("value", std::move(lit));
  return record(ir::GraphBuilder(state_->graph).add(ir::Op::Constant, {}, std::move(attrs), dtype));
}

Tensor Model::iota(ir::Shape shape, int64_t axis, ir::DType dtype) {
  ir::Attrs attrs;
  attrs.set("shape", std::move(shape));
  attrs.set("axis", axis);
  return record(ir::GraphBuilder(state_->graph).add(ir::Op::Iota, {}, std::move(attrs), dtype));
}

Result<ir::Graph> Model::build_function(
    const std::string& name, const std::vector<ir::TensorType>& args,
    const std::function<std::vector<Tensor>(Model&, const std::vector<Tensor>&)>& body) {
  Model fn(name, state_->seed);
  fn.state_->graph.functions = state_->graph.functions;  // a body may call functions defined before it
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < args.size(); ++i)
    inputs.push_back(fn.input(fmt::format("in{}", i), args[i].shape, args[i].dtype));
  for (Tensor out : body(fn, inputs)) fn.output(out);
  KILN_ASSIGN_OR_RETURN(ir::Graph graph, fn.build());
  // Functions the body defined join this model's; a function holds none of its own.
  for (size_t i = state_->graph.functions.size(); i < graph.functions.size(); ++i)
    state_->graph.functions.push_back(graph.functions[i]);
  graph.functions.clear();
  return graph;
}

Tensor Model::function(const std::string& name, const std::vector<Tensor>& inputs, const FunctionBody& body,
                       const BackwardBody& backward) {
  std::vector<ir::TensorType> types;
  for (const Tensor& t : inputs) {
    if (!t.valid()) return {};
    types.push_back(t.type());
  }
  std::string backward_name = name + ".backward";
  if (!state_->graph.find_function(name)) {
    auto forward = build_function(
        name, types, [&](Model& fn, const std::vector<Tensor>& in) { return std::vector<Tensor>{body(fn, in)}; });
    if (!forward.ok()) {
      fail(fmt::format("function @{}: {}", name, forward.error().message));
      return {};
    }
    ir::TensorType result = forward->type(forward->results[0]);
    state_->graph.functions.push_back(std::move(forward).value());
    if (backward) {
      std::vector<ir::TensorType> backward_args = types;
      backward_args.push_back(result);
      auto grads = build_function(backward_name, backward_args, [&](Model& fn, const std::vector<Tensor>& in) {
        return backward(fn, std::vector<Tensor>(in.begin(), in.end() - 1), in.back());
      });
      if (!grads.ok()) {
        fail(fmt::format("function @{}: {}", backward_name, grads.error().message));
        return {};
      }
      state_->graph.functions.push_back(std::move(grads).value());
    }
  }
  ir::Attrs attrs;
  attrs.set("callee", name);
  if (state_->graph.find_function(backward_name)) attrs.set("backward", backward_name);
  return apply(ir::Op::Call, inputs, std::move(attrs));
}

Result<ir::Graph> Model::build() const {
  if (state_->error) return *state_->error;
  if (state_->graph.results.empty())
    return make_error(fmt::format("model @{}: no outputs; call output() first", state_->graph.name));
  KILN_RETURN_IF_ERROR(ir::verify(state_->graph));
  return state_->graph;
}

}  // namespace kiln
