#include "shoal/common/schedule.h"

#include <cctz/civil_time.h>
#include <cctz/time_zone.h>

#include <algorithm>
#include <bitset>
#include <cctype>
#include <sstream>

namespace shoal {

namespace {

// One cron expression as the sets of values each field matches.
struct Cron {
  std::bitset<60> minutes;
  std::bitset<24> hours;
  std::bitset<32> days;     // 1..31
  std::bitset<13> months;   // 1..12
  std::bitset<7> weekdays;  // 0 (Sunday) ..6
  bool days_any = false, weekdays_any = false;

  bool DayMatches(const cctz::civil_day& d) const {
    if (!months[static_cast<size_t>(d.month())]) return false;
    const bool dom = days[static_cast<size_t>(d.day())];
    // cctz: monday..sunday; cron: 0 = Sunday.
    const int wd = (static_cast<int>(cctz::get_weekday(d)) + 1) % 7;
    const bool dow = weekdays[static_cast<size_t>(wd)];
    // As cron: with both restricted, either matches; with one '*', the other decides.
    if (days_any && weekdays_any) return true;
    if (days_any) return dow;
    if (weekdays_any) return dom;
    return dom || dow;
  }
};

const char* const kMonthNames[] = {"jan", "feb", "mar", "apr", "may", "jun",
                                   "jul", "aug", "sep", "oct", "nov", "dec"};
const char* const kDayNames[] = {"sun", "mon", "tue", "wed", "thu", "fri", "sat"};

// A number or (for months and weekdays) a three-letter name.
bool ParseValue(const std::string& text, int field, int* out) {
  if (text.empty()) return false;
  if (std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isdigit(c); })) {
    if (text.size() > 4) return false;
    *out = std::stoi(text);
    return true;
  }
  std::string lower;
  for (unsigned char c : text) lower += static_cast<char>(std::tolower(c));
  if (field == 3) {
    for (int i = 0; i < 12; ++i) {
      if (lower == kMonthNames[i]) return *out = i + 1, true;
    }
  }
  if (field == 4) {
    for (int i = 0; i < 7; ++i) {
      if (lower == kDayNames[i]) return *out = i, true;
    }
  }
  return false;
}

// One field ("*", "*/15", "1-5", "mon-fri", "0,30", "10-50/10") into `set` within [lo, hi].
Status ParseField(const std::string& text, int field, int lo, int hi, std::vector<bool>* set,
                  bool* any) {
  static const char* const kNames[] = {"minute", "hour", "day of month", "month", "day of week"};
  const std::string what = std::string(kNames[field]) + " field \"" + text + "\"";
  *any = text == "*";
  std::stringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) {
    int step = 1;
    if (auto slash = item.find('/'); slash != std::string::npos) {
      int s = 0;
      if (!ParseValue(item.substr(slash + 1), 0, &s) || s < 1 || s > hi) {
        return Status::InvalidArgument(what + ": a step after / must be 1.." + std::to_string(hi));
      }
      step = s;
      item = item.substr(0, slash);
    }
    int a = lo, b = hi;
    if (item != "*") {
      const auto dash = item.find('-');
      if (!ParseValue(item.substr(0, dash), field, &a) ||
          (dash != std::string::npos && !ParseValue(item.substr(dash + 1), field, &b))) {
        return Status::InvalidArgument(what + ": expected *, a number, a range a-b or a list");
      }
      if (dash == std::string::npos) b = step > 1 ? hi : a;
    }
    if (a < lo || b > hi || a > b) {
      return Status::InvalidArgument(what + ": values must be within " + std::to_string(lo) + ".." +
                                     std::to_string(hi));
    }
    for (int v = a; v <= b; v += step) (*set)[static_cast<size_t>(v)] = true;
  }
  if (text.empty() || item.empty()) return Status::InvalidArgument(what + ": empty");
  return Status::Ok();
}

Result<Cron> ParseCron(const std::string& expr) {
  std::string e = expr;
  if (e == "@yearly" || e == "@annually") e = "0 0 1 1 *";
  if (e == "@monthly") e = "0 0 1 * *";
  if (e == "@weekly") e = "0 0 * * 0";
  if (e == "@daily" || e == "@midnight") e = "0 0 * * *";
  if (e == "@hourly") e = "0 * * * *";
  std::stringstream in(e);
  std::vector<std::string> fields;
  for (std::string f; in >> f;) fields.push_back(f);
  if (fields.size() != 5) {
    return Status::InvalidArgument(
        "expected five fields (minute hour day-of-month month "
        "day-of-week, e.g. \"55 11 * * *\"), got " +
        std::to_string(fields.size()));
  }
  static const int kLo[] = {0, 0, 1, 1, 0}, kHi[] = {59, 23, 31, 12, 7};
  Cron c;
  for (int f = 0; f < 5; ++f) {
    std::vector<bool> set(static_cast<size_t>(kHi[f]) + 1, false);
    bool any = false;
    SHOAL_RETURN_IF_ERROR(
        ParseField(fields[static_cast<size_t>(f)], f, kLo[f], kHi[f], &set, &any));
    for (size_t v = 0; v < set.size(); ++v) {
      if (!set[v]) continue;
      switch (f) {
        case 0:
          c.minutes[v] = true;
          break;
        case 1:
          c.hours[v] = true;
          break;
        case 2:
          c.days[v] = true;
          break;
        case 3:
          c.months[v] = true;
          break;
        case 4:
          c.weekdays[v % 7] = true;
          break;  // 7 is Sunday too
      }
    }
    if (f == 2) c.days_any = any;
    if (f == 4) c.weekdays_any = any;
  }
  return c;
}

// RFC 3339 with its offset, or (with `local_allowed`) without one, as a wall time in `tz`.
Result<WallTime> ParseRfc3339(const std::string& text, const cctz::time_zone& tz,
                              bool local_allowed) {
  cctz::time_point<cctz::seconds> tp;
  if (cctz::parse("%Y-%m-%dT%H:%M:%E*S%Ez", text, tz, &tp)) return WallTime(tp);
  if (local_allowed && cctz::parse("%Y-%m-%dT%H:%M:%E*S", text, tz, &tp)) return WallTime(tp);
  return Status::InvalidArgument("\"" + text + "\" is not an RFC 3339 time" +
                                 (local_allowed ? "" : " with an offset") +
                                 " (e.g. 2026-12-24T12:00:00Z)");
}

Result<WallTime> ParseStart(const std::string& text, const cctz::time_zone& tz) {
  return ParseRfc3339(text, tz, true);
}

bool LoadZone(const std::string& name, cctz::time_zone* tz) {
  if (name.empty() || name == "UTC") {
    *tz = cctz::utc_time_zone();
    return true;
  }
  // Only names of the tz database: no paths, and not the local zone of whoever runs us.
  if (name[0] == '/' || name.find("..") != std::string::npos || name == "localtime") return false;
  return cctz::load_time_zone(name, tz);
}

constexpr int kSearchDays = 5 * 366 + 1;

}  // namespace

Status ValidateSchedule(const ScheduleSpec& s, const std::string& path) {
  if (s.name.empty()) return Status::InvalidArgument(path + ".name: required");
  if (s.cron.empty() == s.start.empty()) {
    return Status::InvalidArgument(path +
                                   ": give exactly one of cron (\"55 11 * * *\") and start "
                                   "(\"2026-12-24T12:00:00Z\")");
  }
  cctz::time_zone tz;
  if (!LoadZone(s.time_zone, &tz)) {
    return Status::InvalidArgument(path + ".timeZone: \"" + s.time_zone +
                                   "\" is not a time zone of the tz database (e.g. Europe/Berlin)");
  }
  if (!s.cron.empty()) {
    auto c = ParseCron(s.cron);
    if (!c.ok()) return Status::InvalidArgument(path + ".cron: " + c.status().message());
  } else {
    auto t = ParseStart(s.start, tz);
    if (!t.ok()) return Status::InvalidArgument(path + ".start: " + t.status().message());
  }
  if (s.duration_seconds == 0) {
    return Status::InvalidArgument(path + ".durationSeconds: must be at least 1");
  }
  if (s.ready_seconds > 86400) {
    return Status::InvalidArgument(path + ".readySeconds: at most 86400 (a day)");
  }
  if (s.min_partitions == 0 && s.min_replicas == 0) {
    return Status::InvalidArgument(path + ": asks for nothing; set minPartitions or minReplicas");
  }
  return Status::Ok();
}

std::optional<ScheduleWindow> CurrentOrNextWindow(const ScheduleSpec& s, WallTime at) {
  cctz::time_zone tz;
  if (!LoadZone(s.time_zone, &tz)) return std::nullopt;
  const auto duration = std::chrono::seconds(s.duration_seconds);
  if (s.cron.empty()) {
    auto start = ParseStart(s.start, tz);
    if (!start.ok() || *start + duration <= at) return std::nullopt;
    return ScheduleWindow{*start, *start + duration};
  }
  auto cron = ParseCron(s.cron);
  if (!cron.ok()) return std::nullopt;
  // The first start after at - duration: one still in progress at `at`, or the next.
  const WallTime after = at - duration;
  const cctz::civil_minute from(
      cctz::convert(std::chrono::time_point_cast<cctz::seconds>(after), tz));
  cctz::civil_day day(from);
  for (int i = 0; i < kSearchDays; ++i, ++day) {
    if (!cron->DayMatches(day)) continue;
    for (int h = 0; h < 24; ++h) {
      if (!cron->hours[static_cast<size_t>(h)]) continue;
      for (int m = 0; m < 60; ++m) {
        if (!cron->minutes[static_cast<size_t>(m)]) continue;
        const cctz::civil_second cs(day.year(), day.month(), day.day(), h, m, 0);
        if (cctz::civil_minute(cs) < from) continue;
        const WallTime start(cctz::convert(cs, tz));
        if (start <= after) continue;
        return ScheduleWindow{start, start + duration};
      }
    }
  }
  return std::nullopt;
}

Result<WallTime> ParseWallTime(const std::string& text) {
  return ParseRfc3339(text, cctz::utc_time_zone(), false);
}

std::string FormatWallTime(WallTime t) {
  return cctz::format("%Y-%m-%dT%H:%M:%SZ", std::chrono::time_point_cast<cctz::seconds>(t),
                      cctz::utc_time_zone());
}

}  // namespace shoal
