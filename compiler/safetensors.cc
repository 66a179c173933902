#include "compiler/safetensors.h"

#include <fmt/format.h>
#include <optional>

namespace kiln {
namespace {

std::optional<ir::DType> dtype_of(const std::string& s) {
  if (s == "F32") return ir::DType::F32;
  if (s == "F64") return ir::DType::F64;
  if (s == "F16") return ir::DType::F16;
  if (s == "BF16") return ir::DType::BF16;
  if (s == "I32") return ir::DType::I32;
  if (s == "I64") return ir::DType::I64;
  if (s == "BOOL") return ir::DType::Bool;
  if (s == "I8") return ir::DType::I8;
  if (s == "U8") return ir::DType::U8;
  return std::nullopt;
}

}  // namespace

Result<std::map<std::string, ir::Tensor>> tensors_from_safetensors(
    const std::vector<format::SafetensorsTensor>& tensors, std::string_view source) {
  std::map<std::string, ir::Tensor> out;
  for (const format::SafetensorsTensor& t : tensors) {
    auto dtype = dtype_of(t.dtype);
    if (!dtype)
      return make_error(fmt::format(
          "{}: tensor \"{}\" has dtype {}, which kiln does not read (F32, F64, F16, BF16, I32, I64, BOOL, I8, U8)",
          source, t.name, t.dtype));
    out[t.name] = ir::tensor_from_bytes({*dtype, t.shape}, t.data.data());
  }
  return out;
}

Result<std::map<std::string, ir::Tensor>> parse_safetensors(std::string_view bytes, std::string_view source) {
  KILN_ASSIGN_OR_RETURN(std::vector<format::SafetensorsTensor> tensors, format::parse_safetensors(bytes, source));
  return tensors_from_safetensors(tensors, source);
}

Result<std::map<std::string, ir::Tensor>> read_safetensors(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::vector<format::SafetensorsTensor> tensors, format::read_safetensors_file(path));
  return tensors_from_safetensors(tensors, path);
}

}  // namespace kiln
