#include "shoal/common/logging.h"

#include <spdlog/sinks/stdout_sinks.h>

#include <mutex>

namespace shoal {

namespace {
std::mutex g_mu;
spdlog::level::level_enum g_level = spdlog::level::info;
}  // namespace

Status InitLogging(std::string_view level) {
  auto parsed = spdlog::level::from_str(std::string(level));
  if (parsed == spdlog::level::off && level != "off") {
    return Status::InvalidArgument("log level must be trace, debug, info, warn, error or off");
  }
  std::lock_guard<std::mutex> lock(g_mu);
  g_level = parsed;
  spdlog::set_pattern("ts=%Y-%m-%dT%H:%M:%S.%fZ level=%l component=%n %v",
                      spdlog::pattern_time_type::utc);
  spdlog::set_level(parsed);
  spdlog::apply_all([&](std::shared_ptr<spdlog::logger> l) { l->set_level(parsed); });
  return Status::Ok();
}

std::shared_ptr<spdlog::logger> Logger(std::string_view component) {
  std::lock_guard<std::mutex> lock(g_mu);
  std::string name(component);
  if (auto existing = spdlog::get(name)) return existing;
  auto logger =
      std::make_shared<spdlog::logger>(name, std::make_shared<spdlog::sinks::stderr_sink_mt>());
  logger->set_pattern("ts=%Y-%m-%dT%H:%M:%S.%fZ level=%l component=%n %v",
                      spdlog::pattern_time_type::utc);
  logger->set_level(g_level);
  logger->flush_on(spdlog::level::warn);
  spdlog::register_logger(logger);
  return logger;
}

}  // namespace shoal
