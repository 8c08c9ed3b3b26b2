// Status and Result<T>: how errors cross module boundaries in Shoal (never as exceptions).
//
// A Status is a value: a code plus a human-readable message. Result<T> holds either a T or a
// non-OK Status. Both are cheap to move and safe to copy. Neither is thread-safe to mutate from
// two threads at once, like any value.
#pragma once

#include <cassert>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace shoal {

class Status {
 public:
  enum class Code {
    kOk = 0,
    kInvalidArgument,     // the caller sent something malformed; maps to 400
    kNotFound,            // unknown topic, partition, group; maps to 404
    kTooLarge,            // body, key or value over a limit; maps to 413
    kFailedPrecondition,  // state forbids it now (sealed partition, live group); maps to 409
    // Fencing (invariant 5): another map or change holds this epoch or this partition. Never
    // "already done": the coordinator that gets it stops and re-reads. Maps to 409.
    kConflict,
    // Fencing: the request's epoch is older than the one held; the message names the held one.
    kStaleEpoch,
    // Idempotence (invariant 6): the producer state cannot tell whether a (producer, seq) was
    // stored (it is older than what the state remembers); refused, never taken as a duplicate.
    kSequenceUnknown,
    kUnauthenticated,   // missing or wrong token; maps to 401
    kPermissionDenied,  // the caller is known and not allowed this; maps to 403
    kUnavailable,       // try again later (not ready, shutting down); maps to 503
    // The data volume is full, or produce would eat into the space kept for what lets a full
    // disk recover (commits, group registrations, seals, retirement); maps to 507.
    kNoSpace,
    // This pod was asked to take a map that gives it partitions it should hold from earlier maps
    // and holds nothing of (its volume was emptied or replaced): the coordinator must declare
    // them lost (PartitionMap::DeclareLost) rather than start them again empty. Maps to 409.
    kDataLost,
    kCorruption,  // on-disk data failed a check
    kIoError,     // the OS refused a read, write or fsync
    kInternal,    // a bug
  };

  Status() = default;
  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string msg) {
    return {Code::kInvalidArgument, std::move(msg)};
  }
  static Status NotFound(std::string msg) { return {Code::kNotFound, std::move(msg)}; }
  static Status TooLarge(std::string msg) { return {Code::kTooLarge, std::move(msg)}; }
  static Status FailedPrecondition(std::string msg) {
    return {Code::kFailedPrecondition, std::move(msg)};
  }
  static Status Conflict(std::string msg) { return {Code::kConflict, std::move(msg)}; }
  static Status StaleEpoch(std::string msg) { return {Code::kStaleEpoch, std::move(msg)}; }
  static Status SequenceUnknown(std::string msg) {
    return {Code::kSequenceUnknown, std::move(msg)};
  }
  static Status Unauthenticated(std::string msg) {
    return {Code::kUnauthenticated, std::move(msg)};
  }
  static Status PermissionDenied(std::string msg) {
    return {Code::kPermissionDenied, std::move(msg)};
  }
  static Status Unavailable(std::string msg) { return {Code::kUnavailable, std::move(msg)}; }
  static Status NoSpace(std::string msg) { return {Code::kNoSpace, std::move(msg)}; }
  static Status DataLost(std::string msg) { return {Code::kDataLost, std::move(msg)}; }
  static Status Corruption(std::string msg) { return {Code::kCorruption, std::move(msg)}; }
  static Status IoError(std::string msg) { return {Code::kIoError, std::move(msg)}; }
  static Status Internal(std::string msg) { return {Code::kInternal, std::move(msg)}; }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // A short machine-readable name of the code, e.g. "invalid_argument": the "error" field of
  // every error answer on the wire.
  std::string_view code_name() const;
  // The code of such a name; kInternal for a name no code has.
  static Code CodeFromName(std::string_view name);
  // A status of that code (for decoding answers).
  static Status FromCode(Code code, std::string msg) { return Status(code, std::move(msg)); }
  std::string ToString() const;

  // Prefixes the message with context, keeping the code: "reading segment 42: short read".
  Status Annotate(std::string_view context) const;

 private:
  Status(Code code, std::string msg) : code_(code), message_(std::move(msg)) {}
  Code code_ = Code::kOk;
  std::string message_;
};

template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT: implicit by design
    assert(!std::get<Status>(v_).ok());
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
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

}  // namespace shoal

// Returns early from the enclosing function when `expr` yields a non-OK Status.
#define SHOAL_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::shoal::Status shoal_status_ = (expr);        \
    if (!shoal_status_.ok()) return shoal_status_; \
  } while (0)
