// EventRecorder against the fake API server, on a ManualClock: isomorphic Events within the
// series window grow one Event's series (count, lastObservedTime, latest note); a different
// reason is an Event of its own; past the window, or once the Event is gone, a new Event starts.
#include "shoal/reconciler/event_recorder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "shoal/kubeapi/kube_client.h"
#include "support/fake_kube/fake_api_client.h"
#include "support/manual_clock.h"

namespace shoal::reconciler {
namespace {

using kubeapi::At;
using kubeapi::Json;
using web::json::value;

class EventRecorderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto api = shoal::testing::StartFakeApiWithClient();
    ASSERT_TRUE(api.ok()) << api.status().ToString();
    api_ = std::move(api).value();
    client_ = api_.client.get();
    server_ = api_.server.get();
    recorder_ = std::make_unique<EventRecorder>(
        *client_, clock_,
        EventRecorderOptions{.controller = "shoal.dev/operator",
                             .instance = "operator-a",
                             .regarding_api_version = "shoal.dev/v1alpha1",
                             .regarding_kind = "PartitionedTopic"});
  }

  // The Events of the default namespace, oldest first.
  std::vector<Json> Events() {
    auto list = client_->List(kubeapi::Events(), "default");
    EXPECT_TRUE(list.ok()) << list.error().ToString();
    std::vector<Json> out;
    if (!list.ok()) return out;
    for (const auto& e : list.value().at("items").as_array()) out.push_back(e);
    std::sort(out.begin(), out.end(), [](const Json& a, const Json& b) {
      return At(a, "eventTime").as_string() < At(b, "eventTime").as_string();
    });
    return out;
  }

  void Scaled(const std::string& note) {
    recorder_->Event(topic_, "Normal", "Scaled", "Scale", note);
  }

  const Json topic_ =
      value::parse(R"({"metadata":{"name":"orders","namespace":"default","uid":"uid-orders"}})");
  shoal::testing::ManualClock clock_;
  shoal::testing::FakeApiWithClient api_;
  shoal::testing::FakeApiServer* server_ = nullptr;
  kubeapi::KubeClient* client_ = nullptr;
  std::unique_ptr<EventRecorder> recorder_;
};

TEST_F(EventRecorderTest, TheFirstEventSaysWhatAndAboutWhat) {
  Scaled("partitions 8, pods 3");
  const auto events = Events();
  ASSERT_EQ(events.size(), 1u);
  const Json& e = events[0];
  EXPECT_EQ(At(e, "reason").as_string(), "Scaled");
  EXPECT_EQ(At(e, "action").as_string(), "Scale");
  EXPECT_EQ(At(e, "type").as_string(), "Normal");
  EXPECT_EQ(At(e, "note").as_string(), "partitions 8, pods 3");
  EXPECT_EQ(At(e, "reportingController").as_string(), "shoal.dev/operator");
  EXPECT_EQ(At(e, "reportingInstance").as_string(), "operator-a");
  EXPECT_EQ(At(e, "eventTime").as_string(), kubeapi::FormatTime(clock_.NowMs(), 6));
  EXPECT_EQ(At(e, "regarding.kind").as_string(), "PartitionedTopic");
  EXPECT_EQ(At(e, "regarding.apiVersion").as_string(), "shoal.dev/v1alpha1");
  EXPECT_EQ(At(e, "regarding.uid").as_string(), "uid-orders");
  EXPECT_FALSE(At(e, "series").is_object()) << "a series starts with the second";
}

TEST_F(EventRecorderTest, IsomorphicEventsWithinTheWindowGrowOneSeries) {
  Scaled("first");
  clock_.AdvanceMs(60'000);
  Scaled("second");
  clock_.AdvanceMs(60'000);
  Scaled("third");
  const auto events = Events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(At(events[0], "series.count").as_integer(), 3);
  EXPECT_EQ(At(events[0], "series.lastObservedTime").as_string(),
            kubeapi::FormatTime(clock_.NowMs(), 6));
  EXPECT_EQ(At(events[0], "note").as_string(), "third");
  EXPECT_EQ(server_->CountRequests("POST", "/apis/events.k8s.io/v1/namespaces/default/events"), 1);
}

TEST_F(EventRecorderTest, ADifferentReasonIsAnEventOfItsOwn) {
  Scaled("scaled");
  clock_.AdvanceMs(1);
  recorder_->Event(topic_, "Warning", "ReplicasReverted", "Scale", "set back");
  Scaled("scaled again");
  const auto events = Events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(At(events[0], "reason").as_string(), "Scaled");
  EXPECT_EQ(At(events[0], "series.count").as_integer(), 2);
  EXPECT_EQ(At(events[1], "reason").as_string(), "ReplicasReverted");
  EXPECT_FALSE(At(events[1], "series").is_object());
}

TEST_F(EventRecorderTest, PastTheWindowANewEventStarts) {
  Scaled("before");
  clock_.AdvanceMs(EventRecorder::kSeriesWindow.count());
  Scaled("at the window's end: same series");
  clock_.AdvanceMs(EventRecorder::kSeriesWindow.count() + 1);
  Scaled("after");
  const auto events = Events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(At(events[0], "series.count").as_integer(), 2);
  EXPECT_EQ(At(events[1], "note").as_string(), "after");
  EXPECT_FALSE(At(events[1], "series").is_object());
}

TEST_F(EventRecorderTest, AnEventGoneStartsANewSeries) {
  Scaled("first");
  const std::string name = kubeapi::Name(Events().at(0));
  ASSERT_TRUE(client_->Delete(kubeapi::Events(), "default", name).ok());
  Scaled("second");
  const auto events = Events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_NE(kubeapi::Name(events[0]), name);
  EXPECT_EQ(At(events[0], "note").as_string(), "second");
  EXPECT_FALSE(At(events[0], "series").is_object());
}

}  // namespace
}  // namespace shoal::reconciler
