// Scheduled capacity: cron and one-off windows in a time zone, and the errors for bad ones.
#include "shoal/common/schedule.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace shoal {
namespace {

using ::testing::HasSubstr;

WallTime T(const std::string& rfc3339) {
  auto t = ParseWallTime(rfc3339);
  EXPECT_TRUE(t.ok()) << rfc3339;
  return t.ok() ? *t : WallTime{};
}

ScheduleSpec Cron(const std::string& expr, const std::string& zone = "UTC",
                  uint32_t duration = 3600) {
  ScheduleSpec s;
  s.name = "sale";
  s.cron = expr;
  s.time_zone = zone;
  s.duration_seconds = duration;
  s.min_partitions = 8;
  return s;
}

std::string Start(const ScheduleSpec& s, const std::string& at) {
  const auto w = CurrentOrNextWindow(s, T(at));
  return w ? FormatWallTime(w->start) : "none";
}

TEST(ScheduleTest, ACronWindowIsTheOneInProgressElseTheNext) {
  const ScheduleSpec daily = Cron("0 12 * * *");
  EXPECT_EQ(Start(daily, "2026-12-02T09:00:00Z"), "2026-12-02T12:00:00Z");  // later today
  EXPECT_EQ(Start(daily, "2026-12-02T12:30:00Z"), "2026-12-02T12:00:00Z");  // in progress
  EXPECT_EQ(Start(daily, "2026-12-02T13:00:00Z"), "2026-12-03T12:00:00Z");  // it ended: tomorrow
  const auto w = CurrentOrNextWindow(daily, T("2026-12-02T12:30:00Z"));
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(FormatWallTime(w->end), "2026-12-02T13:00:00Z");
}

TEST(ScheduleTest, FieldsListsRangesStepsAndNamesAsCronReadsThem) {
  // Fridays at 11:55 (2026-12-04 is a Friday).
  EXPECT_EQ(Start(Cron("55 11 * * fri"), "2026-12-01T00:00:00Z"), "2026-12-04T11:55:00Z");
  EXPECT_EQ(Start(Cron("55 11 * * 5"), "2026-12-01T00:00:00Z"), "2026-12-04T11:55:00Z");
  // Weekdays, every 15 minutes from 9:00 to 9:59, on the hour's quarters.
  EXPECT_EQ(Start(Cron("*/15 9 * * mon-fri", "UTC", 60), "2026-12-05T10:00:00Z"),
            "2026-12-07T09:00:00Z");  // Saturday 5th -> Monday 7th
  EXPECT_EQ(Start(Cron("0,30 9-17/4 * * *", "UTC", 60), "2026-12-02T09:31:00Z"),
            "2026-12-02T13:00:00Z");
  // Day of month and day of week both given: either matches (cron's rule). 2026-12-13 is a
  // Sunday, before the 15th.
  EXPECT_EQ(Start(Cron("0 0 15 * sun", "UTC", 60), "2026-12-10T00:00:00Z"), "2026-12-13T00:00:00Z");
  // Christmas Eve at noon, yearly; 7 is Sunday too; @daily.
  EXPECT_EQ(Start(Cron("0 12 24 dec *"), "2026-12-25T00:00:00Z"), "2027-12-24T12:00:00Z");
  EXPECT_EQ(Start(Cron("0 0 * * 7", "UTC", 60), "2026-12-10T00:00:00Z"), "2026-12-13T00:00:00Z");
  EXPECT_EQ(Start(Cron("@daily", "UTC", 60), "2026-12-10T00:00:30Z"), "2026-12-10T00:00:00Z");
  EXPECT_EQ(Start(Cron("@daily", "UTC", 60), "2026-12-10T00:01:00Z"), "2026-12-11T00:00:00Z");
  // February 30th never comes.
  EXPECT_EQ(Start(Cron("0 0 30 2 *"), "2026-12-10T00:00:00Z"), "none");
}

TEST(ScheduleTest, TheTimeZoneDecidesTheInstantAcrossDaylightSaving) {
  const ScheduleSpec noon = Cron("0 12 * * *", "Europe/Berlin");
  EXPECT_EQ(Start(noon, "2026-12-02T00:00:00Z"), "2026-12-02T11:00:00Z");  // CET, UTC+1
  EXPECT_EQ(Start(noon, "2026-07-02T00:00:00Z"), "2026-07-02T10:00:00Z");  // CEST, UTC+2
  const ScheduleSpec ny = Cron("30 9 * * *", "America/New_York");
  EXPECT_EQ(Start(ny, "2026-12-02T00:00:00Z"), "2026-12-02T14:30:00Z");
}

TEST(ScheduleTest, AOneOffStartIsItsOnlyWindow) {
  ScheduleSpec s = Cron("");
  s.cron.clear();
  s.start = "2026-12-24T12:00:00+01:00";
  EXPECT_TRUE(ValidateSchedule(s, "s").ok());
  EXPECT_EQ(Start(s, "2026-12-01T00:00:00Z"), "2026-12-24T11:00:00Z");
  EXPECT_EQ(Start(s, "2026-12-24T11:59:59Z"), "2026-12-24T11:00:00Z");  // in progress
  EXPECT_EQ(Start(s, "2026-12-24T12:00:00Z"), "none");                  // over
  // Without an offset: a wall time in the schedule's zone.
  s.start = "2026-12-24T12:00:00";
  s.time_zone = "Asia/Tokyo";
  EXPECT_EQ(Start(s, "2026-12-01T00:00:00Z"), "2026-12-24T03:00:00Z");
}

TEST(ScheduleTest, BadSchedulesAreRefusedNamingTheField) {
  struct Case {
    ScheduleSpec s;
    const char* says;
  };
  ScheduleSpec both = Cron("0 12 * * *");
  both.start = "2026-12-24T12:00:00Z";
  ScheduleSpec neither = Cron("");
  ScheduleSpec unnamed = Cron("0 12 * * *");
  unnamed.name.clear();
  ScheduleSpec nothing = Cron("0 12 * * *");
  nothing.min_partitions = 0;
  ScheduleSpec bad_start = Cron("");
  bad_start.start = "tomorrow at noon";
  const Case cases[] = {
      {both, "exactly one of cron"},
      {neither, "exactly one of cron"},
      {unnamed, "p.name: required"},
      {nothing, "asks for nothing"},
      {bad_start, "p.start: \"tomorrow at noon\" is not an RFC 3339 time"},
      {Cron("0 12 * *"), "p.cron: expected five fields"},
      {Cron("60 12 * * *"), "p.cron: minute field \"60\": values must be within 0..59"},
      {Cron("0 24 * * *"), "hour field \"24\""},
      {Cron("0 12 0 * *"), "day of month field \"0\""},
      {Cron("0 12 * 13 *"), "month field \"13\""},
      {Cron("0 12 * * 8"), "day of week field \"8\""},
      {Cron("0 12 * * funday"), "day of week field \"funday\""},
      {Cron("*/0 12 * * *"), "a step after / must be"},
      {Cron("5-1 12 * * *"), "values must be within"},
      {Cron("0 12 * * *", "Mars/Olympus"), "p.timeZone: \"Mars/Olympus\" is not a time zone"},
      {Cron("0 12 * * *", "/etc/passwd"), "is not a time zone"},
      {Cron("0 12 * * *", "UTC", 0), "p.durationSeconds: must be at least 1"},
  };
  for (const auto& c : cases) {
    const Status st = ValidateSchedule(c.s, "p");
    EXPECT_FALSE(st.ok()) << c.says;
    EXPECT_THAT(st.message(), HasSubstr(c.says));
  }
}

}  // namespace
}  // namespace shoal
