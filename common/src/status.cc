#include "shoal/common/status.h"

namespace shoal {

std::string_view Status::code_name() const {
  switch (code_) {
    case Code::kOk:
      return "ok";
    case Code::kInvalidArgument:
      return "invalid_argument";
    case Code::kNotFound:
      return "not_found";
    case Code::kTooLarge:
      return "too_large";
    case Code::kFailedPrecondition:
      return "failed_precondition";
    case Code::kUnauthenticated:
      return "unauthenticated";
    case Code::kUnavailable:
      return "unavailable";
    case Code::kCorruption:
      return "corruption";
    case Code::kIoError:
      return "io_error";
    case Code::kInternal:
      return "internal";
  }
  return "unknown";
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  std::string s(code_name());
  s += ": ";
  s += message_;
  return s;
}

Status Status::Annotate(std::string_view context) const {
  if (ok()) return *this;
  std::string msg(context);
  msg += ": ";
  msg += message_;
  return Status(code_, std::move(msg));
}

}  // namespace shoal
