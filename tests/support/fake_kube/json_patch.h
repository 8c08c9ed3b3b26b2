// The two patch formats the Kubernetes API server applies to custom resources, over cpprestsdk's
// web::json::value (a mutable DOM fits a generic object store better than simdjson's read-only
// one): JSON merge patch (RFC 7386) and JSON patch (RFC 6902, with RFC 6901 pointers).
//
// Pure functions of their arguments; thread-safe.
#pragma once

// clang-format off
#include <utility>  // std::exchange, before boost::asio (awaitable.hpp needs it)
// clang-format on
#include <cpprest/json.h>

#include "shoal/common/status.h"

namespace shoal::testing {

// RFC 7386: objects merge key by key, null deletes a key, anything else (arrays included)
// replaces the target. A non-object patch replaces the whole document.
web::json::value ApplyMergePatch(const web::json::value& target, const web::json::value& patch);

// RFC 6902: applies the operations (add, remove, replace, move, copy, test) in order; all or
// nothing. A malformed patch (not an array of operations) is InvalidArgument; an operation that
// cannot apply (missing path, failed test) is FailedPrecondition.
Result<web::json::value> ApplyJsonPatch(const web::json::value& target,
                                        const web::json::value& patch);

// Deep equality in which numbers compare by value (1 equals 1.0, a signed 1 an unsigned 1) and
// object keys by set, as Kubernetes compares objects to decide whether a write changed anything.
bool JsonEqual(const web::json::value& a, const web::json::value& b);

}  // namespace shoal::testing
