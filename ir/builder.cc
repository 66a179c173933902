#include "ir/builder.h"

#include <cassert>

#include "ir/shape_inference.h"

namespace kiln::ir {

ValueId GraphBuilder::arg(std::string name, TensorType type, ArgKind kind) {
  ValueId v = graph_.add_value(std::move(type), std::move(name));
  graph_.args.push_back(Arg{v, kind, {}});
  return v;
}

Result<ValueId> GraphBuilder::add(Op op, std::vector<ValueId> operands, Attrs attrs,
                                  std::optional<DType> source_dtype) {
  KILN_RETURN_IF_ERROR(check_attrs(op, attrs));
  std::vector<TensorType> types;
  types.reserve(operands.size());
  for (ValueId v : operands) types.push_back(graph_.type(v));
  KILN_ASSIGN_OR_RETURN(TensorType type, op == Op::Call ? infer_call(graph_.functions, types, attrs)
                                                        : infer_type(op, types, attrs, source_dtype));
  ValueId result = graph_.add_value(std::move(type));
  graph_.nodes.push_back(Node{op, std::move(operands), std::move(attrs), result, {}});
  return result;
}

ValueId GraphBuilder::emit(Op op, std::vector<ValueId> operands, Attrs attrs) {
  auto r = add(op, std::move(operands), std::move(attrs));
  assert(r.ok() && "GraphBuilder::emit: operands do not fit the op");
  return *r;
}

ValueId GraphBuilder::scalar(double value, DType dtype) {
  Attrs attrs;
  attrs.set("value", is_float(dtype) ? Literal::scalar(round_to_dtype(dtype, value))
                                     : Literal::scalar_int(static_cast<int64_t>(value)));
  auto r = add(Op::Constant, {}, std::move(attrs), dtype);
  assert(r.ok());
  return *r;
}

ValueId GraphBuilder::reduce(Op op, ValueId x, std::vector<int64_t> axes, bool keepdims) {
  Attrs attrs;
  attrs.set("axes", std::move(axes));
  attrs.set("keepdims", keepdims);
  return emit(op, {x}, std::move(attrs));
}

ValueId GraphBuilder::broadcast(ValueId x, Shape shape, std::vector<int64_t> dims) {
  Attrs attrs;
  attrs.set("shape", std::move(shape));
  attrs.set("dims", std::move(dims));
  return emit(Op::Broadcast, {x}, std::move(attrs));
}

}  // namespace kiln::ir
