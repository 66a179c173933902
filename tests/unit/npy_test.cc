// .npy reading and writing for every element type, and refusal of what kiln cannot read.
#include <catch2/catch.hpp>

#include "ir/tensor.h"
#include "runtime/npy.h"

using namespace kiln;

namespace {

std::string header_file(const std::string& dict, const std::string& data) {
  std::string header = dict;
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY\x01";
  out += '\0';
  out += static_cast<char>(header.size());
  out += '\0';
  return out + header + data;
}

}  // namespace

TEST_CASE("every element type survives a write and read", "[npy]") {
  for (ir::DType d : ir::kAllDTypes) {
    INFO(ir::dtype_name(d));
    ir::Tensor t = ir::Tensor::from_doubles({d, {2, 3}}, {1, 0, 3, 1, 5, 0});
    runtime::NpyArray a{std::string(ir::dtype_name(d)), t.type.shape, ir::tensor_to_bytes(t)};
    std::string bytes = runtime::serialize_npy(a);
    CHECK(bytes.size() % 64 == a.data.size() % 64);  // data starts on a 64-byte boundary
    auto back = runtime::parse_npy(bytes, "t.npy");
    REQUIRE(back.ok());
    CHECK(back->dtype == a.dtype);
    CHECK(back->shape == a.shape);
    CHECK(back->data == a.data);
  }
}

TEST_CASE("the header is written as numpy writes it", "[npy]") {
  runtime::NpyArray a{"f32", {3}, std::vector<uint8_t>(12, 0)};
  std::string bytes = runtime::serialize_npy(a);
  CHECK(bytes.substr(10, 60).rfind("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", 0) == 0);
  runtime::NpyArray s{"i64", {}, std::vector<uint8_t>(8, 0)};
  CHECK(runtime::serialize_npy(s).find("'shape': (), }") != std::string::npos);
  runtime::NpyArray m{"bool", {2, 3}, std::vector<uint8_t>(6, 0)};
  CHECK(runtime::serialize_npy(m).find("{'descr': '|b1', 'fortran_order': False, 'shape': (2, 3), }") !=
        std::string::npos);
}

TEST_CASE("numpy-written headers parse, including version 2", "[npy]") {
  auto a = runtime::parse_npy(
      header_file("{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", std::string(8, '\1')), "a.npy");
  REQUIRE(a.ok());
  CHECK(a->dtype == "i32");
  CHECK(a->shape == std::vector<int64_t>{2});
  std::string v2 = "\x93NUMPY\x02";
  v2 += '\0';
  std::string dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 1), }\n";
  v2 += static_cast<char>(dict.size());
  v2 += std::string(3, '\0');
  auto b = runtime::parse_npy(v2 + dict + std::string(8, '\0'), "b.npy");
  REQUIRE(b.ok());
  CHECK(b->dtype == "f64");
  // A key given twice: the last, as numpy's dict reads it (the shapes were joined).
  auto c =
      runtime::parse_npy(header_file("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), 'shape': (2, 3), }",
                                     std::string(24, '\0')),
                         "c.npy");
  REQUIRE(c.ok());
  CHECK(c->shape == std::vector<int64_t>{2, 3});
}

TEST_CASE("unusable .npy files are refused with the reason", "[npy][errors]") {
  struct Case {
    std::string bytes;
    std::string message;
  };
  const Case cases[] = {
      {"hello", "x.npy: not a usable .npy file: it does not start with the .npy magic \\x93NUMPY"},
      {header_file("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", std::string(8, '\0')),
       "x.npy: not a usable .npy file: it is in Fortran order; save it in C order (np.ascontiguousarray)"},
      {header_file("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", std::string(8, '\0')),
       "x.npy: not a usable .npy file: dtype '>f4' is not supported (f32 '<f4', f64 '<f8', f16 '<f2', bf16 '|V2', i32 "
       "'<i4', i64 '<i8', bool '|b1', i8 '|i1', u8 '|u1')"},
      {header_file("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", std::string(8, '\0')),
       "x.npy: not a usable .npy file: it is truncated: it holds 8 data bytes, the header says 12"},
      {header_file("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", std::string(8, '\0')),
       "x.npy: not a usable .npy file: it has trailing bytes: 8 data bytes, where the header says 4"},
      {header_file("{'descr': '<f4', 'shape': (3,), 'fortran_order': False, 'extra': 1}", ""),
       "x.npy: not a usable .npy file: the header is not a dict with 'descr', 'fortran_order' and 'shape'"},
      {std::string("\x93NUMPY\x01\x00\xff\x00{", 11), "x.npy: not a usable .npy file: the header is truncated"},
      {std::string("\x93NUMPY\x09\x00\x00\x00", 10),
       "x.npy: not a usable .npy file: format version 9 is not supported (1, 2 or 3)"},
      {header_file("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999,99999999999), }", ""),
       "x.npy: not a usable .npy file: a dimension of the shape is more than 2^40"},
      {header_file("{'descr': '<f4', 'fortran_order': False, 'shape': (-2, 3), }", ""),
       "x.npy: not a usable .npy file: the shape has a negative dimension"},
      {header_file("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", ""),
       "x.npy: not a usable .npy file: the shape has more than 2^40 elements"},
      {header_file("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 0), }", ""),
       "x.npy: not a usable .npy file: the shape has dims that multiply past 2^40 (the zero dims aside)"},
      {header_file("{'descr': '<f4', 'shape': (2,), }", std::string(8, '\0')),
       "x.npy: not a usable .npy file: the header is not a dict with 'descr', 'fortran_order' and 'shape'"},
  };
  for (const Case& c : cases) {
    auto r = runtime::parse_npy(c.bytes, "x.npy");
    REQUIRE(!r.ok());
    CHECK(r.error().message == c.message);
  }
}
