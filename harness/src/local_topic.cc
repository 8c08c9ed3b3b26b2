#include "shoal/harness/local_topic.h"

#include "shoal/common/clock.h"
#include "shoal/harness/verifier.h"

namespace shoal::harness {

control::LocalPlatformOptions LocalPlatformOptionsFor(const TopicSpec& spec, std::string state_dir,
                                                      std::string consumer_binary) {
  control::LocalPlatformOptions po;
  po.topic = spec.name;
  po.state_dir = std::move(state_dir);
  po.consumer_binary = std::move(consumer_binary);
  po.fsync = spec.fsync;
  po.sidecar_args.push_back("--retention-ms=" + std::to_string(spec.retention.ms));
  if (spec.retention.bytes) {
    po.sidecar_args.push_back("--retention-bytes=" + std::to_string(spec.retention.bytes));
  }
  if (auto reserve = QuantityBytes(spec.storage.reserve);
      !spec.storage.reserve.empty() && reserve.ok()) {
    po.sidecar_args.push_back("--disk-reserve-bytes=" + std::to_string(*reserve));
  }
  if (spec.replication.factor > 1) po.sidecar_args.push_back("--acks=" + spec.replication.acks);
  return po;
}

Result<std::unique_ptr<LocalTopic>> LocalTopic::Start(Options o) {
  std::unique_ptr<LocalTopic> t(new LocalTopic());
  auto platform = control::LocalPlatform::Open(o.platform);
  if (!platform.ok()) return platform.status();
  t->platform_ = std::move(platform).value();
  auto& clock = SystemClock::Instance();
  t->observer_ = std::make_unique<control::MetricsObserver>(clock, t->platform_->AdminToken());
  t->admin_ = std::make_unique<client::AdminClient>(t->platform_->AdminToken());
  t->loop_ = std::make_unique<control::ControlLoop>(o.spec, *t->platform_, *t->observer_,
                                                    *t->admin_, clock, o.loop);
  if (Status st = t->loop_->Start(); !st.ok()) {
    (void)t->Stop();
    return st;
  }
  t->loop_thread_ = std::thread([p = t.get()] { p->loop_->Run(p->stop_loop_); });
  // The topic exists once the loop installed its first map.
  const auto deadline = std::chrono::steady_clock::now() + o.ready_timeout;
  while (t->loop_->map().epoch().value() == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      (void)t->Stop();
      return Status::Unavailable("the topic's first pods did not become ready in " +
                                 std::to_string(o.ready_timeout.count()) + " s; see " +
                                 o.platform.state_dir + "/pods/*/sidecar.log");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // polling the loop's state
  }
  return t;
}

LocalTopic::~LocalTopic() { (void)Stop(); }

Status LocalTopic::Stop() {
  if (stopped_) return Status::Ok();
  stopped_ = true;
  stop_loop_.store(true);
  if (loop_thread_.joinable()) loop_thread_.join();
  return platform_ ? platform_->Shutdown() : Status::Ok();
}

std::string LocalTopic::data_url() const {
  return "http://" + platform_->PodIp(0) + ":" + std::to_string(platform_->options().data_port);
}

uint64_t LocalTopic::SeenEvents() const {
  return harness::CountSeenLines(platform_->options().state_dir + "/seen");
}

}  // namespace shoal::harness
