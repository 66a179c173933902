#include "ir/attributes.h"

#include <cassert>

namespace kiln::ir {

Literal Literal::scalar(double value) {
  Literal l;
  l.floats = {value};
  l.ints = {static_cast<int64_t>(value)};
  l.integral = false;
  return l;
}

Literal Literal::scalar_int(int64_t value) {
  Literal l;
  l.floats = {static_cast<double>(value)};
  l.ints = {value};
  return l;
}

AttrKind attr_value_kind(const AttrValue& value) { return static_cast<AttrKind>(value.index()); }

void Attrs::set(std::string name, AttrValue value) {
  for (auto& [n, v] : entries_) {
    if (n == name) {
      v = std::move(value);
      return;
    }
  }
  entries_.emplace_back(std::move(name), std::move(value));
}

const AttrValue* Attrs::find(std::string_view name) const {
  for (const auto& [n, v] : entries_)
    if (n == name) return &v;
  return nullptr;
}

int64_t Attrs::get_int(std::string_view name, int64_t fallback) const {
  const AttrValue* v = find(name);
  return v ? std::get<int64_t>(*v) : fallback;
}

const std::vector<int64_t>& Attrs::get_ints(std::string_view name) const {
  static const std::vector<int64_t> kEmpty;
  const AttrValue* v = find(name);
  return v ? std::get<std::vector<int64_t>>(*v) : kEmpty;
}

double Attrs::get_float(std::string_view name, double fallback) const {
  const AttrValue* v = find(name);
  return v ? std::get<double>(*v) : fallback;
}

bool Attrs::get_bool(std::string_view name, bool fallback) const {
  const AttrValue* v = find(name);
  return v ? std::get<bool>(*v) : fallback;
}

std::string Attrs::get_string(std::string_view name, std::string fallback) const {
  const AttrValue* v = find(name);
  return v ? std::get<std::string>(*v) : fallback;
}

DType Attrs::get_dtype(std::string_view name) const {
  const AttrValue* v = find(name);
  assert(v);
  return std::get<DType>(*v);
}

const Literal& Attrs::get_literal(std::string_view name) const {
  const AttrValue* v = find(name);
  assert(v);
  return std::get<Literal>(*v);
}

}  // namespace kiln::ir
