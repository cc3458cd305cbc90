// Status and Result<T>: how every fallible call in the controller reports failure.
// No exceptions inside the controller; `reason` is a stable machine code shared with the
// Python reference (e.g. "epoch_mismatch"), `message` says what was wrong for a person.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace omni_edge {

class Status {
 public:
  Status() = default;
  static Status Ok() { return Status(); }
  static Status Error(std::string reason, std::string message) {
    Status s;
    s.reason_ = reason.empty() ? "error" : std::move(reason);
    s.message_ = std::move(message);
    return s;
  }

  bool ok() const { return reason_.empty(); }
  const std::string& reason() const { return reason_; }
  const std::string& message() const { return message_; }
  std::string ToString() const { return ok() ? "ok" : reason_ + ": " + message_; }

 private:
  std::string reason_;
  std::string message_;
};

template <typename T>
class Result {
 public:
  Result(T value) : data_(std::move(value)) {}  // NOLINT: implicit by design, like absl::StatusOr
  Result(Status status) : data_(std::move(status)) {  // NOLINT
    assert(!std::get<Status>(data_).ok() && "a Result cannot hold an ok Status");
  }

  bool ok() const { return std::holds_alternative<T>(data_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(data_);
  }
  T& value() & { return std::get<T>(data_); }
  const T& value() const& { return std::get<T>(data_); }
  T&& value() && { return std::get<T>(std::move(data_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> data_;
};

}  // namespace omni_edge

#define OE_CONCAT_INNER(a, b) a##b
#define OE_CONCAT(a, b) OE_CONCAT_INNER(a, b)

#define OE_RETURN_IF_ERROR(expr)                   \
  do {                                             \
    ::omni_edge::Status oe_status_ = (expr);       \
    if (!oe_status_.ok()) return oe_status_;       \
  } while (0)

#define OE_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()

#define OE_ASSIGN_OR_RETURN(lhs, expr) OE_ASSIGN_OR_RETURN_IMPL(OE_CONCAT(oe_result_, __LINE__), lhs, expr)
