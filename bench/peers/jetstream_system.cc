// NATS JetStream as a peer: a nats-server -js child with file storage in the run's directory,
// one stream BENCH with file storage over the subjects ev.<partition>.<key> (a partition is a
// subject prefix, and the key travels in the subject, NATS's own way of keying messages), and a
// durable pull consumer "bench" that acknowledges cumulatively (AckAll), as Shoal's commits do.
// A producer publishes a batch asynchronously and waits for all its acknowledgements
// (js_PublishAsyncComplete): one batch in flight, as for the others. Payloads and subjects are
// built once, before the clock starts.
//
// Durability: nats-server 2.9 (Debian 12) writes every message to its file store at once and
// fsyncs it on a fixed interval of two minutes that this version cannot change; that is less
// than Redis's everysec and Shoal's 100 ms, so JetStream, if anything, is favoured here.
#include <nats/nats.h>

#include <atomic>
#include <filesystem>
#include <optional>

#include "peer_system.h"
#include "server_process.h"
#include "shoal/harness/batch_driver.h"

namespace shoal::bench {

namespace {

constexpr char kStream[] = "BENCH";
constexpr char kConsumer[] = "bench";
constexpr int64_t kWaitMs = 30000;
// How long a fetch waits for messages. With short waits (100 ms) under load, libnats 3.4.1
// (Debian 12) corrupted its heap: a fetch's message list came back holding pointers that were
// never allocated (AddressSanitizer), apparently when a fetch timed out while its pull request
// was still open at the server and that request's messages arrived afterwards. With waits that do
// not expire while messages flow, it did not happen. A fetch returns as soon as the server has
// said that no more messages are there, so the long wait does not add latency.
constexpr int64_t kFetchWaitMs = 2000;

Status NatsError(const std::string& what, natsStatus s,
                 jsErrCode jerr = static_cast<jsErrCode>(0)) {
  std::string msg = "jetstream: " + what + ": " + natsStatus_GetText(s);
  if (jerr) msg += " (JetStream error " + std::to_string(static_cast<int>(jerr)) + ")";
  if (const char* last = nats_GetLastError(nullptr); last && *last) msg += ": " + std::string(last);
  return Status::Unavailable(msg);
}

// A connection and its JetStream context, destroyed with their owner.
class NatsSession {
 public:
  NatsSession() = default;
  ~NatsSession() {
    if (js_) jsCtx_Destroy(js_);
    if (nc_) natsConnection_Destroy(nc_);
  }
  NatsSession(const NatsSession&) = delete;
  NatsSession& operator=(const NatsSession&) = delete;

  Status Open(uint16_t port, jsOptions* options) {
    const std::string url = "nats://127.0.0.1:" + std::to_string(port);
    if (natsStatus s = natsConnection_ConnectTo(&nc_, url.c_str()); s != NATS_OK) {
      return NatsError("connect " + url, s);
    }
    if (natsStatus s = natsConnection_JetStream(&js_, nc_, options); s != NATS_OK) {
      return NatsError("JetStream context", s);
    }
    return Status::Ok();
  }
  jsCtx* js() const { return js_; }

 private:
  natsConnection* nc_ = nullptr;
  jsCtx* js_ = nullptr;
};

class JetStreamProducer final : public PeerProducer {
 public:
  static Result<std::unique_ptr<PeerProducer>> Open(uint16_t port,
                                                    const std::vector<BenchBatch>& batches) {
    std::unique_ptr<JetStreamProducer> p(new JetStreamProducer());
    size_t largest = 1;
    for (const auto& batch : batches) {
      Batch b;
      for (const auto& e : batch) {
        b.subjects.push_back("ev." + std::to_string(e.partition) + "." + e.key);
        b.payloads.push_back(e.value);
        b.stamps.push_back(harness::FindStamps(e.value));
      }
      largest = std::max(largest, batch.size());
      p->batches_.push_back(std::move(b));
    }
    jsOptions o;
    jsOptions_Init(&o);
    o.Wait = kWaitMs;
    o.PublishAsync.MaxPending = static_cast<int64_t>(largest);
    o.PublishAsync.ErrHandler = &JetStreamProducer::OnError;
    o.PublishAsync.ErrHandlerClosure = p.get();
    SHOAL_RETURN_IF_ERROR(p->session_.Open(port, &o));
    return std::unique_ptr<PeerProducer>(std::move(p));
  }

  Status Send(uint64_t i, uint64_t stamp_ns) override {
    Batch& b = batches_[i % batches_.size()];
    for (size_t e = 0; e < b.payloads.size(); ++e) {
      if (stamp_ns) harness::StampAt(b.payloads[e], b.stamps[e], stamp_ns);
      natsStatus s = js_PublishAsync(session_.js(), b.subjects[e].c_str(), b.payloads[e].data(),
                                     static_cast<int>(b.payloads[e].size()), nullptr);
      if (s != NATS_OK) return NatsError("publish", s);
    }
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MaxWait = kWaitMs;
    if (natsStatus s = js_PublishAsyncComplete(session_.js(), &po); s != NATS_OK) {
      return NatsError("waiting for the publish acknowledgements", s);
    }
    if (const uint64_t failed = errors_.exchange(0)) {
      return Status::Unavailable("jetstream: " + std::to_string(failed) +
                                 " publishes of the batch failed: " + first_error_);
    }
    return Status::Ok();
  }

 private:
  struct Batch {
    std::vector<std::string> subjects, payloads;
    std::vector<std::vector<size_t>> stamps;
  };

  JetStreamProducer() = default;

  // Called on the library's thread for each publish the server refused or did not answer.
  static void OnError(jsCtx*, jsPubAckErr* pae, void* closure) {
    auto* self = static_cast<JetStreamProducer*>(closure);
    if (self->errors_.fetch_add(1) == 0 && pae->ErrText) self->first_error_ = pae->ErrText;
  }

  NatsSession session_;
  std::vector<Batch> batches_;
  std::atomic<uint64_t> errors_{0};
  std::string first_error_;  // written by OnError before errors_ is read as non-zero
};

class JetStreamConsumer final : public PeerConsumer {
 public:
  static Result<std::unique_ptr<PeerConsumer>> Open(uint16_t port) {
    std::unique_ptr<JetStreamConsumer> c(new JetStreamConsumer());
    jsOptions o;
    jsOptions_Init(&o);
    o.Wait = kWaitMs;
    SHOAL_RETURN_IF_ERROR(c->session_.Open(port, &o));
    jsSubOptions so;
    jsSubOptions_Init(&so);
    so.Stream = kStream;
    so.Consumer = kConsumer;  // bind to the durable consumer the system created
    jsErrCode jerr = static_cast<jsErrCode>(0);
    if (natsStatus s =
            js_PullSubscribe(&c->sub_, c->session_.js(), "ev.>", kConsumer, nullptr, &so, &jerr);
        s != NATS_OK) {
      return NatsError("pull subscribe", s, jerr);
    }
    return std::unique_ptr<PeerConsumer>(std::move(c));
  }

  ~JetStreamConsumer() override {
    if (sub_) natsSubscription_Destroy(sub_);
  }

  // wait_ms is not used: every fetch waits up to kFetchWaitMs (see there).
  Result<size_t> Poll(size_t max, int /*wait_ms*/, std::vector<uint64_t>* stamps) override {
    natsMsgList list{nullptr, 0};
    jsErrCode jerr = static_cast<jsErrCode>(0);
    natsStatus s = natsSubscription_Fetch(&list, sub_, static_cast<int>(max), kFetchWaitMs, &jerr);
    if (s == NATS_TIMEOUT) return size_t{0};
    if (s != NATS_OK) return NatsError("fetch", s, jerr);
    for (int i = 0; i < list.Count; ++i) {
      const char* data = natsMsg_GetData(list.Msgs[i]);
      const int len = natsMsg_GetDataLength(list.Msgs[i]);
      stamps->push_back(harness::ReadStamp(std::string_view(data, static_cast<size_t>(len))));
    }
    Status st = Status::Ok();
    if (list.Count > 0) {
      // AckAll: acknowledging the last message acknowledges the batch.
      s = natsMsg_AckSync(list.Msgs[list.Count - 1], nullptr, &jerr);
      if (s != NATS_OK) st = NatsError("ack", s, jerr);
    }
    const auto n = static_cast<size_t>(list.Count);
    natsMsgList_Destroy(&list);
    if (!st.ok()) return st;
    return n;
  }

 private:
  JetStreamConsumer() = default;
  NatsSession session_;
  natsSubscription* sub_ = nullptr;
};

class JetStreamSystem final : public ServerPeerSystem {
 public:
  explicit JetStreamSystem(std::string server) : ServerPeerSystem(std::move(server)) {}

  std::string name() const override { return "jetstream"; }

  Status Start(const PeerConfig& config) override {
    std::error_code ec;
    std::filesystem::create_directories(config.dir + "/store", ec);
    if (ec) return Status::IoError("creating " + config.dir + ": " + ec.message());
    SHOAL_RETURN_IF_ERROR(StartServerProcess(
        [&](uint16_t port) {
          return std::vector<std::string>{
              binary_, "-a",  "127.0.0.1",          "-p", std::to_string(port),
              "-js",   "-sd", config.dir + "/store"};
        },
        config.dir + "/nats.log"));

    jsOptions o;
    jsOptions_Init(&o);
    o.Wait = kWaitMs;
    NatsSession admin;
    SHOAL_RETURN_IF_ERROR(admin.Open(port_, &o));
    jsStreamConfig sc;
    jsStreamConfig_Init(&sc);
    sc.Name = kStream;
    const char* subjects[] = {"ev.>"};
    sc.Subjects = subjects;
    sc.SubjectsLen = 1;
    sc.Storage = js_FileStorage;
    jsErrCode jerr = static_cast<jsErrCode>(0);
    if (natsStatus s = js_AddStream(nullptr, admin.js(), &sc, nullptr, &jerr); s != NATS_OK) {
      return NatsError("creating the stream", s, jerr);
    }
    jsConsumerConfig cc;
    jsConsumerConfig_Init(&cc);
    cc.Durable = kConsumer;
    cc.AckPolicy = js_AckAll;
    cc.DeliverPolicy = js_DeliverAll;
    // Unacknowledged messages the consumer may have out: enough for every consumer's fetch.
    cc.MaxAckPending = 1'000'000;
    if (natsStatus s = js_AddConsumer(nullptr, admin.js(), kStream, &cc, nullptr, &jerr);
        s != NATS_OK) {
      return NatsError("creating the consumer", s, jerr);
    }
    return Status::Ok();
  }

  Result<std::unique_ptr<PeerProducer>> NewProducer(
      const std::vector<BenchBatch>& batches) override {
    SHOAL_RETURN_IF_ERROR(Started());
    return JetStreamProducer::Open(port_, batches);
  }

  Result<std::unique_ptr<PeerConsumer>> NewConsumer(int) override {
    SHOAL_RETURN_IF_ERROR(Started());
    return JetStreamConsumer::Open(port_);
  }

  std::string Describe() const override {
    return "nats-server -js, file storage (the server's own fsync interval)";
  }
};

}  // namespace

std::unique_ptr<PeerSystem> NewJetStreamSystem(std::string server) {
  return std::make_unique<JetStreamSystem>(std::move(server));
}

}  // namespace shoal::bench
