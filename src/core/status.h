// Status and Expected<T>: error values for untrusted boundaries (files, CLI, HTTP).
#pragma once

#include <string>
#include <utility>
#include <variant>

#include <fmt/format.h>

namespace lockstep {

// A failure carries one human-readable message that names the file/field/value at fault.
class Status {
 public:
  Status() = default;
  static Status Ok() { return Status(); }
  static Status Error(std::string message) { return Status(std::move(message), true); }
  template <typename... Args>
  static Status Errorf(fmt::format_string<Args...> f, Args&&... args) {
    return Error(fmt::format(f, std::forward<Args>(args)...));
  }

  bool ok() const { return !failed_; }
  const std::string& message() const { return message_; }
  explicit operator bool() const { return ok(); }

  // Prefixes context ("reading model.gguf: ...") while the error travels up.
  Status WithContext(const std::string& context) const {
    if (ok()) return *this;
    return Error(context + ": " + message_);
  }

 private:
  Status(std::string message, bool failed) : message_(std::move(message)), failed_(failed) {}
  std::string message_;
  bool failed_ = false;
};

// Either a value or a failed Status.
template <typename T>
class Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Expected(Status status) : v_(std::move(status)) {}  // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

namespace detail {
inline const Status& StatusOf(const Status& s) { return s; }
template <typename T>
const Status& StatusOf(const Expected<T>& e) {
  return e.status();
}
}  // namespace detail

}  // namespace lockstep

// Propagates a failed Status (or an Expected's status) to the caller.
#define LS_RETURN_IF_ERROR(expr)                                         \
  do {                                                                   \
    const auto& ls_result_ = (expr);                                     \
    if (!ls_result_.ok()) return ::lockstep::detail::StatusOf(ls_result_); \
  } while (0)

// Assigns the value of an Expected<T> expression or returns its error.
#define LS_CONCAT_INNER(a, b) a##b
#define LS_CONCAT(a, b) LS_CONCAT_INNER(a, b)
#define LS_ASSIGN_OR_RETURN(lhs, expr) LS_ASSIGN_OR_RETURN_IMPL(LS_CONCAT(ls_tmp_, __COUNTER__), lhs, expr)
#define LS_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()
