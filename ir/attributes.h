// Op attributes: a small ordered map from names to typed values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "ir/ops.h"
#include "ir/types.h"

namespace kiln::ir {

/// A dense literal (the value of a constant): a shape and its elements in C order.
/// Each element is held both as a double and as an exact integer, so integer constants
/// beyond 2^53 stay exact; `integral` says every element was written as an integer.
struct Literal {
  Shape shape;
  std::vector<double> floats;
  std::vector<int64_t> ints;
  bool integral = true;

  /// A rank-0 literal.
  static Literal scalar(double value);
  static Literal scalar_int(int64_t value);
  friend bool operator==(const Literal&, const Literal&) = default;
};

/// One attribute value; the alternative matches AttrKind's order.
using AttrValue = std::variant<int64_t, std::vector<int64_t>, double, bool, std::string, DType, Literal>;

/// The AttrKind an AttrValue holds.
AttrKind attr_value_kind(const AttrValue& value);

/// Attributes in the order they were set (printing keeps that order).
class Attrs {
 public:
  /// Sets or replaces an attribute.
  void set(std::string name, AttrValue value);
  /// The value, or nullptr when absent.
  const AttrValue* find(std::string_view name) const;
  bool has(std::string_view name) const { return find(name) != nullptr; }

  // Typed getters; the verifier has checked kinds, so a wrong kind is a bug.
  int64_t get_int(std::string_view name, int64_t fallback = 0) const;
  const std::vector<int64_t>& get_ints(std::string_view name) const;
  double get_float(std::string_view name, double fallback = 0) const;
  bool get_bool(std::string_view name, bool fallback = false) const;
  std::string get_string(std::string_view name, std::string fallback = "") const;
  DType get_dtype(std::string_view name) const;
  const Literal& get_literal(std::string_view name) const;

  const std::vector<std::pair<std::string, AttrValue>>& entries() const { return entries_; }
  bool empty() const { return entries_.empty(); }
  friend bool operator==(const Attrs&, const Attrs&) = default;

 private:
  std::vector<std::pair<std::string, AttrValue>> entries_;
};

}  // namespace kiln::ir
