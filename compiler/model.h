// The model-definition API: write a model in C++, get a verified graph IR.
//
//   kiln::Model m("mlp");
//   auto x = m.input("x", {64, 784});
//   auto w = m.param("w", {784, 10}, kiln::Init::xavier_uniform());
//   m.output(kiln::relu(kiln::matmul(x, w) + 1.0), "y");
//   kiln::Result<kiln::ir::Graph> graph = m.build();
//
// Shape errors do not throw: the first one is kept and build() returns it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "ir/graph.h"
#include "ir/tensor.h"

namespace kiln {

class Model;
namespace detail {
struct ModelState;
}

/// A value of a model under construction: a handle into its Model, which stays valid
/// when the Model is moved.
class Tensor {
 public:
  Tensor() = default;
  Tensor(Model* model, ir::ValueId id);

  /// False for the handle an erroneous op returns.
  bool valid() const { return model_ != nullptr && id_ != ir::kNoValue; }
  /// The Model this value belongs to (where it lives now, after any move).
  Model* model() const;
  ir::ValueId id() const { return id_; }
  /// The type; f32[] for an invalid handle. A copy: a reference into the graph would
  /// dangle once the graph grows (`broadcast(m.param(..), y.shape(), ..)` adds a value
  /// while y's shape is an argument).
  ir::TensorType type() const;
  ir::Shape shape() const { return type().shape; }
  ir::DType dtype() const { return type().dtype; }
  int64_t rank() const { return type().rank(); }

 private:
  detail::ModelState* model_ = nullptr;
  ir::ValueId id_ = ir::kNoValue;
};

/// How a param or state tensor starts. Fan-in and fan-out of a shape [..., in, out]
/// are prod(shape[:-1]) and shape[-1] (kiln weights are [in, out]); of a shape [out, in]
/// marked `out_in` (PyTorch's layout), shape[-1] and prod(shape[:-1]).
struct Init {
  enum class Kind { Zeros, Constant, Normal, Uniform, XavierUniform, XavierNormal, KaimingUniform, KaimingNormal };
  Kind kind = Kind::Zeros;
  double a = 0, b = 0;
  bool out_in = false;

  static Init zeros() { return {Kind::Zeros}; }
  static Init ones() { return {Kind::Constant, 1.0}; }
  static Init constant(double value) { return {Kind::Constant, value}; }
  /// Normal with this mean and standard deviation.
  static Init normal(double mean = 0, double stddev = 1) { return {Kind::Normal, mean, stddev}; }
  /// Uniform on [low, high).
  static Init uniform(double low = 0, double high = 1) { return {Kind::Uniform, low, high}; }
  /// Glorot: U(-l, l) with l = sqrt(6 / (fan_in + fan_out)).
  static Init xavier_uniform() { return {Kind::XavierUniform}; }
  /// Glorot: N(0, 2 / (fan_in + fan_out)).
  static Init xavier_normal() { return {Kind::XavierNormal}; }
  /// He: U(-l, l) with l = sqrt(6 / fan_in), for ReLU networks.
  static Init kaiming_uniform() { return {Kind::KaimingUniform}; }
  /// He: N(0, 2 / fan_in).
  static Init kaiming_normal() { return {Kind::KaimingNormal}; }
};

/// The body of a custom function: builds its result from its inputs in `fn`.
using FunctionBody = std::function<Tensor(Model& fn, const std::vector<Tensor>& inputs)>;
/// The backward of a custom function: given its inputs and the gradient of the loss with
/// respect to its result, returns the gradient for each floating-point input, in order.
using BackwardBody = std::function<std::vector<Tensor>(Model& fn, const std::vector<Tensor>& inputs, Tensor grad)>;

/// A model under construction: arguments, ops and outputs, recorded into a graph. It can
/// be moved (returned from a function that builds it, kept in a container); the Tensors
/// made so far follow it. A moved-from Model may only be destroyed or assigned to.
class Model {
 public:
  /// `seed` makes every initialiser deterministic; each tensor's draw depends only on
  /// the seed and its name, not on declaration order.
  explicit Model(std::string name = "main", uint64_t seed = 0);
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;
  Model(Model&& other) noexcept;
  Model& operator=(Model&& other) noexcept;
  ~Model();

  /// A plain input, fed at every run.
  Tensor input(const std::string& name, ir::Shape shape, ir::DType dtype = ir::DType::F32);
  /// A weight with an initial value; baked into inference artifacts.
  Tensor param(const std::string& name, ir::Shape shape, Init init = Init::zeros(), ir::DType dtype = ir::DType::F32);
  /// Persistent mutable state with an initial value (weights and moments of a training step).
  Tensor state(const std::string& name, ir::Shape shape, Init init = Init::zeros(), ir::DType dtype = ir::DType::F32);
  /// Marks a value as a graph result, naming it `name` when given.
  void output(Tensor value, const std::string& name = "");
  /// Declares the new value a training step gives a state tensor that is not trained
  /// (a batch norm's running statistics): build_train_step returns it as %NAME.next.
  void update(Tensor state, Tensor value);
  /// The declared updates: state name to new value.
  const std::map<std::string, ir::ValueId>& state_updates() const;
  /// Names a value in the IR (shown as %name).
  Tensor named(Tensor value, const std::string& name);

  /// Applies an op (no implicit broadcasting); records an error and returns an invalid
  /// handle when the operands do not fit.
  Tensor apply(ir::Op op, const std::vector<Tensor>& operands, ir::Attrs attrs = {});
  /// A rank-0 constant.
  Tensor scalar(double value, ir::DType dtype = ir::DType::F32);
  /// A dense constant of the given shape (values in C order).
  Tensor constant(const std::vector<double>& values, ir::Shape shape, ir::DType dtype = ir::DType::F32);
  /// Counts 0..n-1 along `axis`.
  Tensor iota(ir::Shape shape, int64_t axis, ir::DType dtype = ir::DType::I64);

  /// Applies a named function defined by `body`, kept whole in the IR as a `func` and a
  /// `call`. With `backward`, autodiff uses it instead of differentiating the body (a
  /// custom autograd function); without, it differentiates the body. The first use of a
  /// name defines the function; later uses with the same input types reuse it.
  Tensor function(const std::string& name, const std::vector<Tensor>& inputs, const FunctionBody& body,
                  const BackwardBody& backward = {});

  /// The verified graph, or the first error met while building.
  Result<ir::Graph> build() const;
  /// Initial values of every param and state tensor, by name.
  const std::map<std::string, ir::Tensor>& initial_values() const;
  /// The first error met, if any.
  const std::optional<Error>& error() const;
  const ir::Graph& graph() const;

 private:
  Tensor add_arg(const std::string& name, ir::Shape shape, ir::DType dtype, ir::ArgKind kind, std::optional<Init> init);
  void fail(std::string message);
  // Builds a function graph from a body run on a fresh Model with these argument types.
  Result<ir::Graph> build_function(const std::string& name, const std::vector<ir::TensorType>& args,
                                   const std::function<std::vector<Tensor>(Model&, const std::vector<Tensor>&)>& body);
  // The new value's handle, or an invalid one after recording the error.
  Tensor record(Result<ir::ValueId> added);

  friend class Tensor;
  std::unique_ptr<detail::ModelState> state_;
};

/// The shape two shapes broadcast to under numpy rules, or nullopt.
std::optional<ir::Shape> broadcast_shapes(const ir::Shape& a, const ir::Shape& b);
/// x broadcast numpy-style to `shape` (an explicit broadcast op in the IR).
Tensor broadcast_to(Tensor x, const ir::Shape& shape);
/// The fully explicit broadcast: operand dim i goes to result dim dims[i].
Tensor broadcast(Tensor x, const ir::Shape& shape, const std::vector<int64_t>& dims);

// Elementwise ops. Each unary op of ir/ops.def has a function named as its Api column
// says (exp, relu, logical_not, ...), declared from the table. Binary ops broadcast
// numpy-style; a double operand becomes a scalar constant of the tensor's element type.
#define KILN_API_Unary(Enum, fn) Tensor fn(Tensor x);
#define KILN_API_Custom
#define KILN_OP(Enum, name, arity, kind, attrs, operands, math, gradient, api) KILN_API_##api
#include "ir/ops.def"
#undef KILN_OP
#undef KILN_API_Custom
#undef KILN_API_Unary
Tensor add(Tensor a, Tensor b);
Tensor sub(Tensor a, Tensor b);
Tensor mul(Tensor a, Tensor b);
Tensor div(Tensor a, Tensor b);
Tensor pow(Tensor a, Tensor b);
Tensor maximum(Tensor a, Tensor b);
Tensor minimum(Tensor a, Tensor b);
Tensor eq(Tensor a, Tensor b);
Tensor ne(Tensor a, Tensor b);
Tensor lt(Tensor a, Tensor b);
Tensor le(Tensor a, Tensor b);
Tensor gt(Tensor a, Tensor b);
Tensor ge(Tensor a, Tensor b);
Tensor logical_and(Tensor a, Tensor b);
Tensor logical_or(Tensor a, Tensor b);
/// cond ? a : b elementwise, all three broadcast together.
Tensor select(Tensor cond, Tensor a, Tensor b);
Tensor cast(Tensor x, ir::DType to);

Tensor operator+(Tensor a, Tensor b);
Tensor operator-(Tensor a, Tensor b);
Tensor operator*(Tensor a, Tensor b);
Tensor operator/(Tensor a, Tensor b);
Tensor operator-(Tensor x);
Tensor operator+(Tensor a, double b);
Tensor operator-(Tensor a, double b);
Tensor operator*(Tensor a, double b);
Tensor operator/(Tensor a, double b);
Tensor operator+(double a, Tensor b);
Tensor operator-(double a, Tensor b);
Tensor operator*(double a, Tensor b);
Tensor operator/(double a, Tensor b);

// Reductions; negative axes count from the end.
Tensor reduce_sum(Tensor x, std::vector<int64_t> axes, bool keepdims = false);
Tensor reduce_max(Tensor x, std::vector<int64_t> axes, bool keepdims = false);
Tensor reduce_min(Tensor x, std::vector<int64_t> axes, bool keepdims = false);
/// reduce_sum divided by the number of reduced elements.
Tensor mean(Tensor x, std::vector<int64_t> axes, bool keepdims = false);
/// Index of the first maximum along `axis`, as i64.
Tensor argmax(Tensor x, int64_t axis);

// Movement.
Tensor reshape(Tensor x, ir::Shape shape);
Tensor transpose(Tensor x, std::vector<int64_t> perm);
Tensor slice(Tensor x, std::vector<int64_t> starts, std::vector<int64_t> ends, std::vector<int64_t> strides = {});
Tensor concat(const std::vector<Tensor>& parts, int64_t axis);
/// numpy take: table's `axis` indexed by integer `indices`.
Tensor gather(Tensor table, Tensor indices, int64_t axis = 0);
/// The inverse of gather: base with `updates` added at `indices` along `axis` (repeated
/// indices accumulate, like numpy's add.at).
Tensor scatter_add(Tensor base, Tensor indices, Tensor updates, int64_t axis = 0);
/// Batched matrix product; batch dims broadcast numpy-style.
Tensor matmul(Tensor a, Tensor b);

// Composite ops, kept whole in the IR until the decompose pass.
Tensor softmax(Tensor x, int64_t axis = -1);
Tensor log_softmax(Tensor x, int64_t axis = -1);
/// Normalizes over dims axis..rank-1; scale and bias have those dims' shape.
Tensor layer_norm(Tensor x, Tensor scale, Tensor bias, int64_t axis = -1, double eps = 1e-5);
/// The erf form, or the tanh approximation when `tanh_approximation`.
Tensor gelu(Tensor x, bool tanh_approximation = false);
Tensor silu(Tensor x);
/// x @ w + b with w: [in, out], b: [out].
Tensor linear(Tensor x, Tensor w, Tensor b);
/// Scaled dot-product attention, softmax(q kᵀ · scale) v over the last two dims (q:
/// [..., T, D], k: [..., S, D], v: [..., S, E]; the leading dims are batch dims): `scale`
/// 0 means 1/sqrt(D); `causal` keeps key j for query i only when j <= i; a `mask`
/// (bool [..., T, S] or [T, S]) keeps the scores where it is true. The attention op, whose
/// decomposition is that matmul-softmax-matmul.
Tensor attention(Tensor q, Tensor k, Tensor v, double scale = 0, bool causal = false);
Tensor attention(Tensor q, Tensor k, Tensor v, Tensor mask, double scale = 0, bool causal = false);

// Convolutional ops over x: [N, C, D1..Dk] (k = 1 to 3 spatial dims), as ONNX defines
// them. An empty list leaves the op's default: strides and dilations 1, pads 0; pads list
// all begin pads, then all end pads.
struct ConvOptions {
  std::vector<int64_t> strides, pads, dilations;
  int64_t groups = 1;
};
/// w: [O, C/groups, K1..Kk]; bias is a separate broadcast add.
Tensor conv(Tensor x, Tensor w, const ConvOptions& options = {});
struct PoolOptions {
  std::vector<int64_t> strides, pads, dilations;  ///< dilations: max_pool only
  bool ceil_mode = false;
  bool count_include_pad = false;  ///< avg_pool only
};
Tensor max_pool(Tensor x, std::vector<int64_t> window, const PoolOptions& options = {});
Tensor avg_pool(Tensor x, std::vector<int64_t> window, const PoolOptions& options = {});
/// Constant padding of every dim (negative pads crop).
Tensor pad(Tensor x, std::vector<int64_t> pads, double value = 0);
/// Inference batch normalization over axis 1: scale (x - mean) / sqrt(var + epsilon) + bias.
Tensor batch_norm(Tensor x, Tensor scale, Tensor bias, Tensor mean, Tensor var, double epsilon = 1e-5);
/// Mean of squared differences.
Tensor mse_loss(Tensor prediction, Tensor target);
/// Mean over rows of -log_softmax(logits)[n, labels[n]]; labels are i32 or i64.
Tensor cross_entropy(Tensor logits, Tensor labels);

}  // namespace kiln
