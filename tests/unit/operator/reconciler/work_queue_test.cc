// WorkQueue on a ManualClock: keys deduplicated, a key added while processing processed once
// more after Done, delays (AddAfter, AddRateLimited) measured on the injected clock only,
// backoff doubling to its max and Forget starting it over, Get woken by ShutDown.
// Nothing sleeps: a Get that should find nothing is asked with no wait (Get(0ms)), one that
// blocks runs on a thread the test joins, woken by the event under test.
#include "shoal/reconciler/work_queue.h"

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <thread>

#include "support/manual_clock.h"

namespace shoal::reconciler {
namespace {

using namespace std::chrono_literals;
using Key = std::optional<std::string>;

class WorkQueueTest : public ::testing::Test {
 protected:
  // What Get hands out now, without waiting.
  Key Now() { return queue_.Get(0ms); }

  shoal::testing::ManualClock clock_;
  WorkQueue queue_{clock_, 100ms, 1000ms};
};

TEST_F(WorkQueueTest, AKeyIsQueuedOnceInTheOrderItCame) {
  queue_.Add("ns/b");
  queue_.Add("ns/a");
  queue_.Add("ns/b");
  EXPECT_EQ(queue_.Len(), 2u);
  EXPECT_EQ(Now(), Key("ns/b"));
  EXPECT_EQ(Now(), Key("ns/a"));
  EXPECT_EQ(Now(), std::nullopt);
  EXPECT_EQ(queue_.Len(), 0u);
}

TEST_F(WorkQueueTest, AKeyAddedWhileProcessingIsProcessedOnceMoreAfterDone) {
  queue_.Add("ns/a");
  ASSERT_EQ(Now(), Key("ns/a"));
  queue_.Add("ns/a");
  queue_.Add("ns/a");
  EXPECT_EQ(Now(), std::nullopt) << "never handed to a second worker while processing";
  EXPECT_EQ(queue_.Len(), 0u);
  queue_.Done("ns/a");
  EXPECT_EQ(queue_.Len(), 1u);
  EXPECT_EQ(Now(), Key("ns/a"));
  queue_.Done("ns/a");
  EXPECT_EQ(Now(), std::nullopt) << "processed once more, not once per add";
}

TEST_F(WorkQueueTest, DoneWithoutAnAddMeanwhileQueuesNothing) {
  queue_.Add("ns/a");
  ASSERT_EQ(Now(), Key("ns/a"));
  queue_.Done("ns/a");
  EXPECT_EQ(queue_.Len(), 0u);
  EXPECT_EQ(Now(), std::nullopt);
}

TEST_F(WorkQueueTest, AddAfterWaitsOnTheInjectedClock) {
  queue_.AddAfter("ns/a", 5000ms);
  queue_.Add("ns/b");
  EXPECT_EQ(queue_.Len(), 2u);
  EXPECT_EQ(Now(), Key("ns/b")) << "a delayed key does not hold back the ones behind it";
  EXPECT_EQ(Now(), std::nullopt);
  clock_.AdvanceMs(4999);
  EXPECT_EQ(Now(), std::nullopt);
  // Added again while it waits: the delay stands (a failing topic is not hurried by events).
  queue_.Add("ns/a");
  EXPECT_EQ(Now(), std::nullopt);
  EXPECT_EQ(queue_.Len(), 1u);
  clock_.AdvanceMs(1);
  EXPECT_EQ(Now(), Key("ns/a"));
}

TEST_F(WorkQueueTest, ABlockedGetSeesTheClockMove) {
  queue_.AddAfter("ns/a", 60'000ms);
  Key got;
  std::thread getter([&] { got = queue_.Get(); });
  // The clock has no timers: a Get already blocked finds out within WorkQueue::kRecheck of real
  // time, one that starts after the move at once; either way it hands the key out.
  clock_.AdvanceMs(60'000);
  getter.join();
  EXPECT_EQ(got, Key("ns/a"));
}

TEST_F(WorkQueueTest, BackoffDoublesUpToItsMaxAndForgetStartsItOver) {
  for (const auto want : {100ms, 200ms, 400ms, 800ms, 1000ms, 1000ms}) {
    EXPECT_EQ(queue_.AddRateLimited("ns/a"), want);
    clock_.AdvanceMs(want.count() - 1);
    EXPECT_EQ(Now(), std::nullopt) << "before " << want.count() << " ms";
    clock_.AdvanceMs(1);
    ASSERT_EQ(Now(), Key("ns/a")) << "at " << want.count() << " ms";
    queue_.Done("ns/a");
  }
  // Failures are counted per key.
  EXPECT_EQ(queue_.AddRateLimited("ns/b"), 100ms);
  queue_.Forget("ns/a");
  EXPECT_EQ(queue_.AddRateLimited("ns/a"), 100ms);
}

TEST_F(WorkQueueTest, ARetryWhileProcessingDelaysTheAddThatCameMeanwhile) {
  queue_.Add("ns/a");
  ASSERT_EQ(Now(), Key("ns/a"));
  queue_.Add("ns/a");  // an informer event during the reconcile
  EXPECT_EQ(queue_.AddRateLimited("ns/a"), 100ms);
  queue_.Done("ns/a");
  EXPECT_EQ(queue_.Len(), 1u);
  EXPECT_EQ(Now(), std::nullopt);
  clock_.AdvanceMs(100);
  EXPECT_EQ(Now(), Key("ns/a"));
}

TEST_F(WorkQueueTest, ShutDownWakesABlockedGetAndDropsLaterAdds) {
  Key got = "unset";
  std::thread getter([&] { got = queue_.Get(); });
  queue_.ShutDown();
  getter.join();
  EXPECT_EQ(got, std::nullopt);
  EXPECT_TRUE(queue_.ShuttingDown());
  queue_.Add("ns/a");
  EXPECT_EQ(queue_.Len(), 0u);
  EXPECT_EQ(queue_.Get(), std::nullopt);
}

}  // namespace
}  // namespace shoal::reconciler
