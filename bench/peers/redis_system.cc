// Redis Streams as a peer: a redis-server child (appendonly yes, appendfsync everysec, no RDB
// snapshots), one stream per partition (bench:<p>) with the consumer group "bench". A producer
// pipelines one XADD per event (MAXLEN none, auto ids) and reads the batch's replies; its
// batches are RESP-encoded once, before the clock starts, as Shoal's bodies are. A consumer reads
// with XREADGROUP ... > and acknowledges what it read with XACK.
#include <hiredis.h>
#include <sys/time.h>

#include <cstdio>
#include <filesystem>
#include <optional>

#include "peer_system.h"
#include "server_process.h"
#include "shoal/harness/batch_driver.h"

namespace shoal::bench {

namespace {

constexpr char kGroup[] = "bench";

std::string StreamName(uint32_t partition) { return "bench:" + std::to_string(partition); }

// A hiredis connection; freed with its owner.
struct RedisConnection {
  redisContext* ctx = nullptr;
  RedisConnection() = default;
  ~RedisConnection() {
    if (ctx) redisFree(ctx);
  }
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  Status Connect(uint16_t port) {
    ctx = redisConnectWithTimeout("127.0.0.1", port, timeval{10, 0});
    if (!ctx) return Status::Unavailable("redis: cannot allocate a connection");
    if (ctx->err) return Status::Unavailable(std::string("redis: connect: ") + ctx->errstr);
    return Status::Ok();
  }
  Status Error(const char* what) const {
    return Status::Unavailable(std::string("redis: ") + what + ": " +
                               (ctx && ctx->err ? ctx->errstr : "connection error"));
  }
};

// One reply, freed with its owner.
struct Reply {
  redisReply* r = nullptr;
  ~Reply() {
    if (r) freeReplyObject(r);
  }
};

Status ReplyError(const redisReply* r, const char* what) {
  return Status::Unavailable(std::string("redis: ") + what + ": " + std::string(r->str, r->len));
}

// A command, RESP-encoded.
std::string Format(const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const auto& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  char* cmd = nullptr;
  const int n =
      redisFormatCommandArgv(&cmd, static_cast<int>(argv.size()), argv.data(), lens.data());
  std::string out = n > 0 ? std::string(cmd, static_cast<size_t>(n)) : std::string();
  redisFreeCommand(cmd);
  return out;
}

// Sends `count` commands already RESP-encoded in `cmds` and checks their replies.
Status Pipeline(RedisConnection& c, const std::string& cmds, size_t count, const char* what) {
  if (redisAppendFormattedCommand(c.ctx, cmds.data(), cmds.size()) != REDIS_OK) {
    return c.Error(what);
  }
  Status first = Status::Ok();
  for (size_t i = 0; i < count; ++i) {
    Reply reply;
    if (redisGetReply(c.ctx, reinterpret_cast<void**>(&reply.r)) != REDIS_OK) return c.Error(what);
    if (reply.r->type == REDIS_REPLY_ERROR && first.ok()) first = ReplyError(reply.r, what);
  }
  return first;
}

class RedisProducer final : public PeerProducer {
 public:
  static Result<std::unique_ptr<PeerProducer>> Open(uint16_t port,
                                                    const std::vector<BenchBatch>& batches) {
    std::unique_ptr<RedisProducer> p(new RedisProducer());
    SHOAL_RETURN_IF_ERROR(p->conn_.Connect(port));
    for (const auto& batch : batches) {
      std::string cmds;
      for (const auto& e : batch) {
        cmds += Format({"XADD", StreamName(e.partition), "*", "k", e.key, "v", e.value});
      }
      p->stamps_.push_back(harness::FindStamps(cmds));
      p->cmds_.push_back(std::move(cmds));
      p->sizes_.push_back(batch.size());
    }
    return std::unique_ptr<PeerProducer>(std::move(p));
  }

  Status Send(uint64_t i, uint64_t stamp_ns) override {
    const size_t b = i % cmds_.size();
    if (stamp_ns) harness::StampAt(cmds_[b], stamps_[b], stamp_ns);
    return Pipeline(conn_, cmds_[b], sizes_[b], "XADD");
  }

 private:
  RedisProducer() = default;
  RedisConnection conn_;
  std::vector<std::string> cmds_;
  std::vector<std::vector<size_t>> stamps_;
  std::vector<size_t> sizes_;
};

class RedisConsumer final : public PeerConsumer {
 public:
  static Result<std::unique_ptr<PeerConsumer>> Open(uint16_t port, std::vector<uint32_t> streams,
                                                    int index) {
    std::unique_ptr<RedisConsumer> c(new RedisConsumer());
    SHOAL_RETURN_IF_ERROR(c->conn_.Connect(port));
    c->name_ = "c" + std::to_string(index);
    for (uint32_t p : streams) c->streams_.push_back(StreamName(p));
    return std::unique_ptr<PeerConsumer>(std::move(c));
  }

  Result<size_t> Poll(size_t max, int wait_ms, std::vector<uint64_t>* stamps) override {
    std::vector<std::string> args = {"XREADGROUP", "GROUP", kGroup,
                                     name_,        "COUNT", std::to_string(max)};
    if (wait_ms > 0) args.insert(args.end(), {"BLOCK", std::to_string(wait_ms)});
    args.push_back("STREAMS");
    args.insert(args.end(), streams_.begin(), streams_.end());
    args.insert(args.end(), streams_.size(), ">");
    const std::string cmd = Format(args);
    if (redisAppendFormattedCommand(conn_.ctx, cmd.data(), cmd.size()) != REDIS_OK) {
      return conn_.Error("XREADGROUP");
    }
    Reply reply;
    if (redisGetReply(conn_.ctx, reinterpret_cast<void**>(&reply.r)) != REDIS_OK) {
      return conn_.Error("XREADGROUP");
    }
    if (reply.r->type == REDIS_REPLY_NIL) return size_t{0};
    if (reply.r->type == REDIS_REPLY_ERROR) return ReplyError(reply.r, "XREADGROUP");
    // [[stream, [[id, [field, value, ...]], ...]], ...]
    size_t read = 0;
    std::string acks;
    size_t ack_count = 0;
    for (size_t s = 0; s < reply.r->elements; ++s) {
      const redisReply* stream = reply.r->element[s];
      if (stream->type != REDIS_REPLY_ARRAY || stream->elements != 2) continue;
      const redisReply* entries = stream->element[1];
      if (entries->type != REDIS_REPLY_ARRAY || entries->elements == 0) continue;
      std::vector<std::string> xack = {
          "XACK", std::string(stream->element[0]->str, stream->element[0]->len), kGroup};
      for (size_t e = 0; e < entries->elements; ++e) {
        const redisReply* entry = entries->element[e];
        if (entry->type != REDIS_REPLY_ARRAY || entry->elements != 2) continue;
        xack.emplace_back(entry->element[0]->str, entry->element[0]->len);
        const redisReply* fields = entry->element[1];
        uint64_t stamp = 0;
        for (size_t f = 0; f + 1 < fields->elements; f += 2) {
          if (std::string_view(fields->element[f]->str, fields->element[f]->len) == "v") {
            stamp = harness::ReadStamp(
                std::string_view(fields->element[f + 1]->str, fields->element[f + 1]->len));
          }
        }
        stamps->push_back(stamp);
        ++read;
      }
      acks += Format(xack);
      ++ack_count;
    }
    if (ack_count) SHOAL_RETURN_IF_ERROR(Pipeline(conn_, acks, ack_count, "XACK"));
    return read;
  }

 private:
  RedisConsumer() = default;
  RedisConnection conn_;
  std::string name_;
  std::vector<std::string> streams_;
};

class RedisSystem final : public ServerPeerSystem {
 public:
  explicit RedisSystem(std::string server) : ServerPeerSystem(std::move(server)) {}

  std::string name() const override { return "redis"; }

  Status Start(const PeerConfig& config) override {
    config_ = config;
    std::error_code ec;
    std::filesystem::create_directories(config.dir, ec);
    if (ec) return Status::IoError("creating " + config.dir + ": " + ec.message());
    SHOAL_RETURN_IF_ERROR(StartServerProcess(
        [&](uint16_t port) {
          // Durability comparable to Shoal's --fsync interval: every write goes to the
          // append-only file at once and is fsynced every second; no RDB snapshots.
          return std::vector<std::string>{
              binary_,     "--port",        std::to_string(port), "--bind",
              "127.0.0.1", "--dir",         config.dir,           "--appendonly",
              "yes",       "--appendfsync", "everysec",           "--save",
              ""};
        },
        config.dir + "/redis.log"));
    RedisConnection admin;
    SHOAL_RETURN_IF_ERROR(admin.Connect(port_));
    std::string cmds;
    for (uint32_t p = 0; p < config.partitions; ++p) {
      cmds += Format({"XGROUP", "CREATE", StreamName(p), kGroup, "$", "MKSTREAM"});
    }
    SHOAL_RETURN_IF_ERROR(Pipeline(admin, cmds, config.partitions, "XGROUP CREATE"));
    Reply info;
    info.r = static_cast<redisReply*>(redisCommand(admin.ctx, "INFO server"));
    if (info.r && info.r->type == REDIS_REPLY_STRING) {
      const std::string text(info.r->str, info.r->len);
      const size_t at = text.find("redis_version:");
      if (at != std::string::npos) {
        version_ = text.substr(at + 14, text.find_first_of("\r\n", at) - at - 14);
      }
    }
    return Status::Ok();
  }

  Result<std::unique_ptr<PeerProducer>> NewProducer(
      const std::vector<BenchBatch>& batches) override {
    SHOAL_RETURN_IF_ERROR(Started());
    return RedisProducer::Open(port_, batches);
  }

  Result<std::unique_ptr<PeerConsumer>> NewConsumer(int index) override {
    SHOAL_RETURN_IF_ERROR(Started());
    std::vector<uint32_t> streams;
    const auto consumers = static_cast<uint32_t>(std::max(1, config_.consumers));
    for (uint32_t p = 0; p < config_.partitions; ++p) {
      if (consumers > config_.partitions || p % consumers == static_cast<uint32_t>(index)) {
        streams.push_back(p);
      }
    }
    return RedisConsumer::Open(port_, std::move(streams), index);
  }

  std::string Describe() const override {
    return "redis-server " + version_ + ", appendonly yes, appendfsync everysec, no RDB";
  }

 private:
  PeerConfig config_;
  std::string version_;
};

}  // namespace

std::unique_ptr<PeerSystem> NewRedisSystem(std::string server) {
  return std::make_unique<RedisSystem>(std::move(server));
}

}  // namespace shoal::bench
