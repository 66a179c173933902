// Errors as values: Result<T> holds a T or an Error whose message says what, where and why.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace kiln {

/// A failure: a human-readable message, already carrying its location when it has one,
/// and for typed errors (e.g. artifact loading) a numeric code from the module's enum.
struct Error {
  std::string message;
  int code = 0;
};

/// Either a value of type T or an Error. Never throws; check ok() before value().
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}
  Result(Error error) : state_(std::move(error)) {}

  /// True when a value is held.
  bool ok() const { return state_.index() == 0; }
  /// The held value; only valid when ok().
  T& value() & {
    assert(ok());
    return std::get<0>(state_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<0>(state_);
  }
  T&& value() && {
    assert(ok());
    return std::get<0>(std::move(state_));
  }
  /// The held error; only valid when !ok().
  const Error& error() const {
    assert(!ok());
    return std::get<1>(state_);
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Error> state_;
};

/// Success or an Error, for operations with no value.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)), ok_(false) {}
  static Status Ok() { return Status(); }
  bool ok() const { return ok_; }
  const Error& error() const {
    assert(!ok_);
    return error_;
  }

 private:
  Error error_;
  bool ok_ = true;
};

/// Builds an Error from a message.
inline Error make_error(std::string message) { return Error{std::move(message), 0}; }

}  // namespace kiln

#define KILN_CONCAT_INNER(a, b) a##b
#define KILN_CONCAT(a, b) KILN_CONCAT_INNER(a, b)

/// Returns the error of a Status or Result expression from the enclosing function.
#define KILN_RETURN_IF_ERROR(expr)                                      \
  do {                                                                  \
    auto&& kiln_status_ = (expr);                                       \
    if (!kiln_status_.ok()) return ::kiln::Error(kiln_status_.error()); \
  } while (0)

/// Evaluates a Result expression; on error returns it, else moves the value into lhs.
#define KILN_ASSIGN_OR_RETURN(lhs, expr) KILN_ASSIGN_OR_RETURN_IMPL(KILN_CONCAT(kiln_result_, __LINE__), lhs, expr)
#define KILN_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr)  \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return ::kiln::Error(tmp.error()); \
  lhs = std::move(tmp).value()
