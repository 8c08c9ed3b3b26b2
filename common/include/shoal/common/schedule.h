// Scheduled capacity (spec.scaling.schedules): windows in which a topic holds at least some
// partitions and consumer pods, as KEDA's cron scaler gives Kafka users. A window starts at a
// cron time (five fields: minute hour day-of-month month day-of-week, in the schedule's time
// zone, as Kubernetes CronJobs read them) or at one RFC 3339 time, and lasts durationSeconds. The
// policy prepares ahead of it: the capacity is in place readySeconds before the start (plus the
// time changes and pods take, which the loop learns).
// Values and pure functions; time zones come from the system's tz database (tzdata), read once
// per name and cached.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "shoal/common/status.h"

namespace shoal {

using WallTime = std::chrono::system_clock::time_point;

struct ScheduleSpec {
  std::string name;
  std::string cron;   // five fields; exactly one of cron and start
  std::string start;  // RFC 3339 ("2026-12-24T12:00:00Z", "2026-12-24T12:00:00+01:00", or
                      // without an offset: a wall time in time_zone)
  std::string time_zone = "UTC";  // an IANA name ("Europe/Berlin")
  uint32_t duration_seconds = 0;
  uint32_t ready_seconds = 300;  // capacity in place this long before the start
  uint32_t min_partitions = 0;
  uint32_t min_replicas = 0;
};

// InvalidArgument naming `path` and the field, for a schedule that cannot be read: no name, both
// or neither of cron and start, a cron field out of range, an unknown time zone, a zero
// duration, nothing asked (no minimum).
Status ValidateSchedule(const ScheduleSpec& s, const std::string& path);

struct ScheduleWindow {
  WallTime start, end;  // [start, end)
};

// The window of `s` in progress at `at`, else the next one to start; nullopt when there is none
// (a one-off start that has passed, or no cron match within five years). `s` must be valid.
std::optional<ScheduleWindow> CurrentOrNextWindow(const ScheduleSpec& s, WallTime at);

// RFC 3339 in UTC with seconds ("2026-12-24T11:00:00Z").
std::string FormatWallTime(WallTime t);
// An RFC 3339 time with its offset ("2026-12-24T12:00:00Z", "...+01:00"); InvalidArgument else.
Result<WallTime> ParseWallTime(const std::string& text);

}  // namespace shoal
