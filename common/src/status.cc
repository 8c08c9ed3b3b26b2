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
    case Code::kConflict:
      return "conflict";
    case Code::kStaleEpoch:
      return "stale_epoch";
    case Code::kSequenceUnknown:
      return "sequence_unknown";
    case Code::kUnauthenticated:
      return "unauthenticated";
    case Code::kUnavailable:
      return "unavailable";
    case Code::kNoSpace:
      return "no_space";
    case Code::kDataLost:
      return "data_lost";
    case Code::kCorruption:
      return "corruption";
    case Code::kPermissionDenied:
      return "permission_denied";
    case Code::kIoError:
      return "io_error";
    case Code::kInternal:
      return "internal";
  }
  return "unknown";
}

Status::Code Status::CodeFromName(std::string_view name) {
  for (Code c :
       {Code::kOk, Code::kInvalidArgument, Code::kNotFound, Code::kTooLarge,
        Code::kFailedPrecondition, Code::kConflict, Code::kStaleEpoch, Code::kSequenceUnknown,
        Code::kUnauthenticated, Code::kUnavailable, Code::kNoSpace, Code::kDataLost,
        Code::kCorruption, Code::kIoError, Code::kInternal, Code::kPermissionDenied}) {
    if (Status(c, "").code_name() == name) return c;
  }
  return Code::kInternal;
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
