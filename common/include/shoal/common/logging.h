// Structured logging for every Shoal binary: spdlog loggers, one per component, writing logfmt
// lines (ts=... level=... component=... msg="..." key=value) to stderr.
//
// InitLogging is called once by main before any thread starts; Logger() is thread-safe after that.
#pragma once

#include <spdlog/spdlog.h>

#include <memory>
#include <string_view>

#include "shoal/common/status.h"

namespace shoal {

// level: trace, debug, info, warn, error, off. Returns InvalidArgument for anything else.
Status InitLogging(std::string_view level);

// The logger of one component ("storage", "http", ...), created on first use.
std::shared_ptr<spdlog::logger> Logger(std::string_view component);

}  // namespace shoal
