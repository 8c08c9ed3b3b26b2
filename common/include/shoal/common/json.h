// Small JSON helpers shared by every encoder in Shoal: appending escaped strings and numbers to a
// std::string without intermediate allocations. Parsing goes through simdjson (see wire.h).
// Free functions; thread-safe as long as each thread writes its own string.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace shoal::json {

// Appends `s` as a JSON string literal (with quotes), escaping what RFC 8259 requires.
void AppendString(std::string& out, std::string_view s);
void AppendUint(std::string& out, uint64_t v);
void AppendInt(std::string& out, int64_t v);
void AppendDouble(std::string& out, double v);

// Builds {"error": code, "reason": reason}: the body of every 4xx/5xx answer in Shoal.
std::string ErrorBody(std::string_view error, std::string_view reason);

}  // namespace shoal::json
