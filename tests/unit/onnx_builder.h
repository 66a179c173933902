// Builds ONNX models in tests with ONNX's protobuf classes: graph inputs and outputs,
// nodes, and the bytes the importer reads.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::testing {

// A tensor value named `name` of `dims` (then `symbolic` dims) and `elem_type`.
inline onnx::ValueInfoProto* add_value(google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* list,
                                       const std::string& name, std::vector<int64_t> dims,
                                       std::vector<std::string> symbolic = {},
                                       int32_t elem_type = onnx::TensorProto::FLOAT) {
  onnx::ValueInfoProto* v = list->Add();
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(elem_type);
  for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
  for (const std::string& s : symbolic) t->mutable_shape()->add_dim()->set_dim_param(s);
  return v;
}

// A node of `op` from `in` to `out`, named `name` (else OP_0).
inline onnx::NodeProto* add_node(onnx::GraphProto* g, const std::string& op, std::vector<std::string> in,
                                 std::vector<std::string> out, const std::string& name = "") {
  onnx::NodeProto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(name.empty() ? op + "_0" : name);
  for (const auto& i : in) n->add_input(i);
  for (const auto& o : out) n->add_output(o);
  return n;
}

inline void add_int_attribute(onnx::NodeProto* n, const std::string& name, int64_t value) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name), a->set_type(onnx::AttributeProto::INT), a->set_i(value);
}

inline std::vector<uint8_t> bytes_of(const onnx::ModelProto& m) {
  std::string s = m.SerializeAsString();
  return std::vector<uint8_t>(s.begin(), s.end());
}

}  // namespace kiln::testing
