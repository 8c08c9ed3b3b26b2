// ErrnoError: what an OS refusal turns into.
#include "shoal/common/files.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>

namespace shoal {
namespace {

using ::testing::HasSubstr;

TEST(ErrnoErrorTest, OutOfDescriptorsOrMemoryIsUnavailableAndNamesTheLimit) {
  errno = EMFILE;
  Status st = ErrnoError("opening /d/p/7/log");
  EXPECT_EQ(st.code(), Status::Code::kUnavailable);
  EXPECT_THAT(st.message(), HasSubstr("opening /d/p/7/log: Too many open files"));
  EXPECT_THAT(st.message(), HasSubstr("files: RLIMIT_NOFILE"));
  errno = ENFILE;
  EXPECT_EQ(ErrnoError("opening x").code(), Status::Code::kUnavailable);
  errno = ENOMEM;
  st = ErrnoError("mapping x");
  EXPECT_EQ(st.code(), Status::Code::kUnavailable);
  EXPECT_THAT(st.message(), HasSubstr("Cannot allocate memory"));
  // Anything else is the disk's: IoError.
  errno = EIO;
  st = ErrnoError("fsync of x");
  EXPECT_EQ(st.code(), Status::Code::kIoError);
  EXPECT_THAT(st.message(), HasSubstr("fsync of x: Input/output error"));
}

}  // namespace
}  // namespace shoal
