#include "shoal/common/status.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace shoal {
namespace {

TEST(StatusTest, DefaultIsOk) {
  Status st;
  EXPECT_TRUE(st.ok());
  EXPECT_EQ(st.code(), Status::Code::kOk);
  EXPECT_EQ(st.code_name(), "ok");
  EXPECT_EQ(st.ToString(), "ok");
  EXPECT_TRUE(Status::Ok().ok());
}

// The code names are part of the HTTP error body ({"error": code_name}), so they are pinned.
TEST(StatusTest, EachFactoryHasItsCodeAndName) {
  struct Case {
    Status status;
    Status::Code code;
    const char* name;
  };
  const Case cases[] = {
      {Status::InvalidArgument("m"), Status::Code::kInvalidArgument, "invalid_argument"},
      {Status::NotFound("m"), Status::Code::kNotFound, "not_found"},
      {Status::TooLarge("m"), Status::Code::kTooLarge, "too_large"},
      {Status::FailedPrecondition("m"), Status::Code::kFailedPrecondition, "failed_precondition"},
      {Status::Unauthenticated("m"), Status::Code::kUnauthenticated, "unauthenticated"},
      {Status::Unavailable("m"), Status::Code::kUnavailable, "unavailable"},
      {Status::Corruption("m"), Status::Code::kCorruption, "corruption"},
      {Status::IoError("m"), Status::Code::kIoError, "io_error"},
      {Status::Internal("m"), Status::Code::kInternal, "internal"},
  };
  for (const auto& c : cases) {
    EXPECT_FALSE(c.status.ok()) << c.name;
    EXPECT_EQ(c.status.code(), c.code) << c.name;
    EXPECT_EQ(c.status.code_name(), c.name);
    EXPECT_EQ(c.status.message(), "m");
    EXPECT_EQ(c.status.ToString(), std::string(c.name) + ": m");
  }
}

TEST(StatusTest, AnnotateKeepsTheCodeAndPrefixesTheMessage) {
  Status st = Status::IoError("short read").Annotate("reading segment 42");
  EXPECT_EQ(st.code(), Status::Code::kIoError);
  EXPECT_EQ(st.message(), "reading segment 42: short read");
  EXPECT_EQ(st.Annotate("opening log").message(), "opening log: reading segment 42: short read");
  // Annotating success must not turn it into an error.
  EXPECT_TRUE(Status::Ok().Annotate("context").ok());
  EXPECT_EQ(Status::Ok().Annotate("context").message(), "");
}

TEST(ResultTest, HoldsAValueOrAnError) {
  Result<std::string> good(std::string("v"));
  ASSERT_TRUE(good.ok());
  EXPECT_TRUE(good.status().ok());
  EXPECT_EQ(*good, "v");
  EXPECT_EQ(good->size(), 1u);
  good.value() += "w";
  EXPECT_EQ(good.value(), "vw");

  Result<std::string> bad(Status::NotFound("no topic orders"));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Status::Code::kNotFound);
  EXPECT_EQ(bad.status().message(), "no topic orders");
}

TEST(ResultTest, MovesOutMoveOnlyValues) {
  Result<std::unique_ptr<int>> r(std::make_unique<int>(7));
  ASSERT_TRUE(r.ok());
  std::unique_ptr<int> p = std::move(r).value();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(*p, 7);
}

Status Step(bool fail, std::vector<int>& trace, int id) {
  trace.push_back(id);
  return fail ? Status::Unavailable("step " + std::to_string(id)) : Status::Ok();
}

Status TwoSteps(bool fail_first, std::vector<int>& trace) {
  SHOAL_RETURN_IF_ERROR(Step(fail_first, trace, 1));
  SHOAL_RETURN_IF_ERROR(Step(false, trace, 2));
  return Status::Ok();
}

TEST(ReturnIfErrorTest, ReturnsEarlyOnlyOnError) {
  std::vector<int> trace;
  EXPECT_TRUE(TwoSteps(false, trace).ok());
  EXPECT_EQ(trace, (std::vector<int>{1, 2}));

  trace.clear();
  Status st = TwoSteps(true, trace);
  EXPECT_EQ(st.code(), Status::Code::kUnavailable);
  EXPECT_EQ(st.message(), "step 1");
  EXPECT_EQ(trace, (std::vector<int>{1}));
}

}  // namespace
}  // namespace shoal
