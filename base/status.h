// Status and Result<T>: errors as values across every Cellar module boundary.
//
// A Status is either OK or carries a code and a human-readable message that
// names what was wrong (the address, the field, the shard). Result<T> holds a
// T on success or a non-OK Status. Both are cheap to move and [[nodiscard]]:
// ignoring an error is a compile warning.
//
// Thread safety: values; no shared state.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace cellar {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    // the caller sent something malformed; retrying will not help
  kNotFound,           // no such cell / datastore / column / index
  kConflict,           // address exists with a different body
  kAlreadyExists,      // reserved for create-only operations
  kUnavailable,        // a shard, broker or host cannot be reached; retry later
  kAborted,            // the operation was rolled back because of another failure
  kDeadlineExceeded,   // timed out waiting
  kResourceExhausted,  // a size or rate limit was exceeded
  kFailedPrecondition,
  kInternal,  // a bug or an unexpected reply from a dependency
};

// "InvalidArgument", "NotFound", ... (stable; used in JSON error bodies).
std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "Conflict: trips/…/BASE/3 exists with a different body"
  std::string ToString() const;

  // Makes an intentionally ignored Status explicit.
  void IgnoreError() const {}

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status Conflict(std::string m) { return {StatusCode::kConflict, std::move(m)}; }
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status Aborted(std::string m) { return {StatusCode::kAborted, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status ResourceExhausted(std::string m) {
  return {StatusCode::kResourceExhausted, std::move(m)};
}
inline Status DeadlineExceeded(std::string m) {
  return {StatusCode::kDeadlineExceeded, std::move(m)};
}
inline Status FailedPrecondition(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}

namespace internal {
// Prints "<what>: <status>" to stderr and aborts (Result::value() on an error).
[[noreturn]] void DieOnBadResultAccess(const Status& status);
}  // namespace internal

// Result<T>: a T, or a non-OK Status.
// Built from an OK Status (a bug: there is no value), it holds Internal
// instead, as Abseil's StatusOr does, so the error cannot pass as success in
// any build type.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status)                      // NOLINT
      : v_(status.ok()
               ? Status(StatusCode::kInternal, "Result built from an OK status, without a value")
               : std::move(status)) {}

  bool ok() const { return std::holds_alternative<T>(v_); }
  // OK when a value is held.
  Status status() const { return ok() ? Status() : std::get<Status>(v_); }

  // The value. On an error, prints the status and aborts (in every build type).
  T& value() & {
    Check();
    return std::get<T>(v_);
  }
  const T& value() const& {
    Check();
    return std::get<T>(v_);
  }
  // Of a temporary (or a moved) Result: the value itself, moved out, not a
  // reference into the Result. So `for (auto& x : Call().value())` iterates a
  // value that lives through the loop (a reference would dangle once the
  // temporary Result is destroyed, before the loop's body runs).
  T value() && {
    Check();
    return std::get<T>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  void Check() const {
    if (!ok()) internal::DieOnBadResultAccess(std::get<Status>(v_));
  }
  std::variant<T, Status> v_;
};

}  // namespace cellar

// Returns early from the enclosing function when `expr` is not OK.
#define CELLAR_RETURN_IF_ERROR(expr)         \
  do {                                       \
    ::cellar::Status _cellar_st = (expr);    \
    if (!_cellar_st.ok()) return _cellar_st; \
  } while (0)

#define CELLAR_CONCAT_INNER(a, b) a##b
#define CELLAR_CONCAT(a, b) CELLAR_CONCAT_INNER(a, b)
// Declares `lhs` from a Result, returning its Status from the enclosing function on error.
#define CELLAR_ASSIGN_OR_RETURN(lhs, expr) \
  CELLAR_ASSIGN_OR_RETURN_IMPL(CELLAR_CONCAT(_cellar_res_, __LINE__), lhs, expr)
#define CELLAR_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()
