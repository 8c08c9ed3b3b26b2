#include "http/admin_frontend.h"

#include <simdjson.h>

#include <algorithm>
#include <chrono>

#include "http/http_util.h"
#include "shoal/common/json.h"

namespace shoal::http {

using web::http::http_request;
using web::http::methods;

namespace {
// How long a seal, or a commit a peer's consumers make here, waits for a quorum of copies to
// hold it before it answers Unavailable (the caller retries): a fetch round or two.
constexpr int64_t kAdminQuorumWaitMs = 2000;

std::string Outcome(const Status& st) {
  switch (st.code()) {
    case Status::Code::kOk:
      return "ok";
    case Status::Code::kStaleEpoch:
      return "stale_epoch";
    case Status::Code::kConflict:
      return "conflict";
    case Status::Code::kFailedPrecondition:
      return "refused";
    case Status::Code::kDataLost:
      return "data_lost";
    default:
      return "error";
  }
}

// What a seal request asks: the partition, the change it is sealed for and, when a failover
// gave the partition a leader in that change's map, that leader.
struct SealRequest {
  PartitionId partition;
  broker::SealIntent intent;
  std::optional<broker::MapLeader> leader;
  std::optional<uint64_t> at;  // "sealed_end": sealed before at that end, elsewhere
};

// {"epoch":E,"partition":P,"digest":"...","successors":[{"id","owner","lo","hi"}], "lo":L,
// "hi":H, "leader":"pod","leader_epoch":N, "sealed_end":S}: the seal of one partition for the
// change whose target map has that epoch and digest (range, leader and leader epoch, and the end
// the change's seal of it was answered with before, optional).
Result<SealRequest> ParseSeal(const std::string& body) {
  const Status wrong = Status::InvalidArgument(
      "seal needs {\"epoch\": E, \"partition\": P, \"digest\": D, \"successors\": "
      "[{\"id\", \"owner\", \"lo\", \"hi\"}]}: the change it is for (docs/admin-api.md)");
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  uint64_t epoch = 0, partition = 0;
  std::string_view digest;
  simdjson::dom::array successors;
  if (parser.parse(body).get(doc) || doc["epoch"].get(epoch) || doc["partition"].get(partition) ||
      partition > kMaxPartitionId || doc["digest"].get(digest) || digest.empty() ||
      digest.size() > 64 || doc["successors"].get(successors) ||
      successors.size() > kMaxMapPartitions) {
    return wrong;
  }
  broker::SealIntent intent;
  intent.epoch = Epoch(epoch);
  intent.digest = std::string(digest);
  for (auto e : successors) {
    uint64_t id = 0;
    std::string_view owner;
    broker::SuccessorRef ref;
    if (e["id"].get(id) || id > kMaxPartitionId || e["owner"].get(owner) || owner.empty() ||
        owner.size() > kMaxNameBytes || e["lo"].get(ref.range.lo) || e["hi"].get(ref.range.hi) ||
        ref.range.lo >= ref.range.hi || ref.range.hi > kHashSpace) {
      return wrong;
    }
    ref.id = PartitionId(static_cast<uint32_t>(id));
    ref.owner = PodName(std::string(owner));
    intent.successors.push_back(std::move(ref));
  }
  HashRange range;
  if (doc["lo"].get(range.lo) == simdjson::SUCCESS && doc["hi"].get(range.hi) == simdjson::SUCCESS) {
    if (range.lo >= range.hi || range.hi > kHashSpace) return wrong;
    intent.range = range;
  }
  std::optional<broker::MapLeader> leader;
  std::string_view leader_pod;
  uint64_t leader_epoch = 0;
  if (doc["leader"].get(leader_pod) == simdjson::SUCCESS) {
    if (leader_pod.empty() || leader_pod.size() > kMaxNameBytes ||
        doc["leader_epoch"].get(leader_epoch)) {
      return wrong;
    }
    leader = broker::MapLeader{PodName(std::string(leader_pod)), Epoch(leader_epoch)};
  }
  std::optional<uint64_t> at;
  if (uint64_t sealed_end = 0; doc["sealed_end"].get(sealed_end) == simdjson::SUCCESS) {
    at = sealed_end;
  }
  return SealRequest{PartitionId(static_cast<uint32_t>(partition)), std::move(intent),
                     std::move(leader), at};
}

// The successor named by the query of GET .../producers?successor=S&owner=O&lo=L&hi=H, if any.
Result<std::optional<broker::SuccessorRef>> ParseSuccessorQuery(
    const std::map<std::string, std::string>& q) {
  auto s = q.find("successor");
  if (s == q.end()) return std::optional<broker::SuccessorRef>();
  auto o = q.find("owner"), lo = q.find("lo"), hi = q.find("hi");
  broker::SuccessorRef ref;
  char* end = nullptr;
  const unsigned long long id = std::strtoull(s->second.c_str(), &end, 10);
  bool ok = o != q.end() && lo != q.end() && hi != q.end() && end != s->second.c_str() && !*end &&
            id <= kMaxPartitionId && !o->second.empty() && o->second.size() <= kMaxNameBytes;
  if (ok) {
    ref.id = PartitionId(static_cast<uint32_t>(id));
    ref.owner = PodName(o->second);
    char* e1 = nullptr;
    char* e2 = nullptr;
    ref.range.lo = std::strtoull(lo->second.c_str(), &e1, 10);
    ref.range.hi = std::strtoull(hi->second.c_str(), &e2, 10);
    ok = e1 != lo->second.c_str() && !*e1 && e2 != hi->second.c_str() && !*e2 &&
         ref.range.lo < ref.range.hi && ref.range.hi <= kHashSpace;
  }
  if (!ok) {
    return Status::InvalidArgument(
        "a successor is named by successor=ID&owner=POD&lo=LO&hi=HI (docs/admin-api.md)");
  }
  return std::optional<broker::SuccessorRef>(ref);
}
}  // namespace

AdminFrontend::AdminFrontend(AdminFrontendOptions options, broker::Topic& topic,
                             broker::SidecarProbe& probe)
    : opts_(std::move(options)), topic_(topic), probe_(probe) {}

AdminFrontend::~AdminFrontend() { Close(); }

Status AdminFrontend::Open() {
  fetch_poller_ = std::thread([this] { FetchPollLoop(); });
  ListenerOptions lo;
  lo.host = opts_.host;
  lo.port = opts_.port;
  lo.limits = opts_.http;
  lo.limits.max_body_bytes = kMaxBodyBytes;
  lo.limits.body_timeout = std::chrono::seconds(30);
  lo.answers = opts_.answers;
  lo.tls = opts_.tls;
  // A request without the token (or, over TLS only, from a caller other than the topic's pods
  // and its operator) is refused before a byte of its body is read.
  lo.admit = [this](const http_request& req) {
    if (opts_.tls.mutual()) {
      auto it = req.headers().find(kPrincipalHeader);
      const std::string who = it == req.headers().end() ? "" : it->second;
      if (std::find(opts_.callers.begin(), opts_.callers.end(), who) == opts_.callers.end()) {
        return Status::PermissionDenied("\"" + who +
                                        "\" may not use the admin plane: it serves the topic's "
                                        "own pods and its operator");
      }
    }
    return Authorized(req) ? Status::Ok()
                           : Status::Unauthenticated(
                                 "the admin plane needs Authorization: Bearer <admin token>");
  };
  lo.on_refused = [this](int code, const std::string&) { probe_.Request("admin", code); };
  listener_ = std::make_unique<GuardedListener>(
      std::move(lo), [this](http_request req) { Handle(std::move(req)); });
  return listener_->Open();
}

void AdminFrontend::Close() {
  {
    std::lock_guard<std::mutex> lock(fetch_mu_);
    stopping_ = true;
  }
  fetch_cv_.notify_all();
  if (fetch_poller_.joinable()) fetch_poller_.join();
  if (!listener_) return;
  listener_->Close();
  listener_.reset();
}

void AdminFrontend::NotifyAppend() {
  {
    std::lock_guard<std::mutex> lock(fetch_mu_);
    if (parked_.empty()) return;
    appended_ = true;
  }
  fetch_cv_.notify_one();
}

void AdminFrontend::ReplyOk(const http_request& req, std::string body,
                            const char* content_type) {
  try {
    web::http::http_response resp(web::http::status_codes::OK);
    resp.set_body(std::move(body), content_type);
    req.reply(resp).then([](pplx::task<void> t) {
      try {
        t.get();
      } catch (...) {
      }
    });
  } catch (...) {
  }
  probe_.Request("admin", 200);
}

void AdminFrontend::ReplyFetch(const http_request& req, std::string body) {
  ReplyOk(req, std::move(body), "application/x-shoal-replica-batch");
}

void AdminFrontend::HandleFetch(const http_request& req, const std::string& text) {
  auto fetch = broker::ParseFetchRequest(text);
  if (!fetch.ok()) {
    probe_.Request("admin", ReplyError(req, fetch.status()));
    return;
  }
  std::string body = broker::StartFetchAnswer();
  if (topic_.ServeFetch(*fetch, &body) || fetch->wait_ms == 0) {
    ReplyFetch(req, std::move(body));
    return;
  }
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(fetch->wait_ms);
  {
    std::lock_guard<std::mutex> lock(fetch_mu_);
    if (!stopping_) {
      parked_.push_back({req, std::move(fetch).value(), deadline});
      return;
    }
  }
  ReplyFetch(req, std::move(body));
}

void AdminFrontend::FetchPollLoop() {
  std::unique_lock<std::mutex> lock(fetch_mu_);
  while (true) {
    auto wake = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
    for (const auto& p : parked_) wake = std::min(wake, p.deadline);
    fetch_cv_.wait_until(lock, wake, [&] { return stopping_ || appended_; });
    appended_ = false;
    std::list<ParkedFetch> due;
    due.splice(due.end(), parked_);
    const bool stopping = stopping_;
    lock.unlock();
    const auto now = std::chrono::steady_clock::now();
    std::list<ParkedFetch> again;
    for (auto& p : due) {
      std::string body = broker::StartFetchAnswer();
      if (topic_.ServeFetch(p.fetch, &body) || now >= p.deadline || stopping) {
        ReplyFetch(p.request, std::move(body));
      } else {
        again.push_back(std::move(p));
      }
    }
    lock.lock();
    parked_.splice(parked_.end(), again);
    if (stopping) return;
  }
}

bool AdminFrontend::Authorized(const http_request& req) const {
  auto it = req.headers().find("Authorization");
  if (it == req.headers().end()) return false;
  const std::string& got = it->second;
  const std::string want = "Bearer " + opts_.token;
  // Compare in time independent of where the first difference is.
  unsigned diff = got.size() ^ want.size();
  for (size_t i = 0; i < want.size(); ++i) {
    diff |= static_cast<unsigned char>(want[i]) ^
            static_cast<unsigned char>(i < got.size() ? got[i] : 0);
  }
  return diff == 0 && !opts_.token.empty();
}

void AdminFrontend::Handle(http_request req) {
  if (!Authorized(req)) {
    const int code = ReplyError(req, 401, "unauthenticated",
                                "the admin plane needs Authorization: Bearer <admin token>");
    probe_.Request("admin", code);
    probe_.Rejected("unauthenticated");
    return;
  }
  const auto path = PathSegments(req);
  const auto& m = req.method();
  // Captures by value: it also runs in body continuations, after Handle returned.
  auto answer = [this, req](const Result<std::string>& r,
                            const char* content_type = "application/json") {
    if (!r.ok()) {
      probe_.Request("admin", ReplyError(req, r.status()));
      probe_.Rejected(std::string(r.status().code_name()));
      return;
    }
    ReplyOk(req, *r, content_type);
  };
  auto with_body = [&](std::function<Result<std::string>(const std::string&)> fn,
                       const char* content_type = "application/json") {
    ReadBody(
        req, kMaxBodyBytes,
        [answer, fn, content_type](std::string body) { answer(fn(body), content_type); },
        [answer](const Status& st) { answer(st); });
  };
  if (path.size() < 3 || path[0] != "v1" || path[1] != "admin") {
    answer(Status::NotFound("no such admin endpoint; see docs/admin-api.md"));
    return;
  }
  if (path.size() == 3 && path[2] == "map") {
    if (m == methods::GET) return answer(topic_.map().ToJson());
    if (m == methods::POST) {
      return with_body([this](const std::string& body) -> Result<std::string> {
        auto next = PartitionMap::FromJson(body);
        if (!next.ok()) return next.status();
        auto outcome = topic_.InstallMap(*next);
        probe_.AdminChange("install", Outcome(outcome.status()));
        if (!outcome.ok()) return outcome.status();
        return "{\"epoch\":" + std::to_string(next->epoch().value()) + ",\"outcome\":\"" +
               (*outcome == broker::InstallOutcome::kInstalled ? "installed" : "already_held") +
               "\",\"digest\":\"" + next->Digest() + "\"}";
      });
    }
  } else if (path.size() == 3 && path[2] == "prepare") {
    if (m == methods::POST) {
      return with_body([this](const std::string& body) -> Result<std::string> {
        auto next = PartitionMap::FromJson(body);
        if (!next.ok()) return next.status();
        Status st = topic_.Prepare(*next);
        probe_.AdminChange("prepare", Outcome(st));
        SHOAL_RETURN_IF_ERROR(st);
        return "{\"prepared\":" + std::to_string(next->epoch().value()) + "}";
      });
    }
  } else if (path.size() == 3 && path[2] == "seal") {
    if (m == methods::POST) {
      return with_body([this](const std::string& body) -> Result<std::string> {
        auto seal = ParseSeal(body);
        if (!seal.ok()) return seal.status();
        auto end = topic_.Seal(seal->partition, seal->intent,
                               std::chrono::milliseconds(std::min<int64_t>(
                                   topic_.options().replication_timeout_ms, kAdminQuorumWaitMs)),
                               seal->leader, seal->at);
        probe_.AdminChange("seal", Outcome(end.status()));
        if (!end.ok()) return end.status();
        return "{\"partition\":" + std::to_string(seal->partition.value()) +
               ",\"end_offset\":" + std::to_string(*end) + "}";
      });
    }
  } else if (path.size() == 3 && path[2] == "partitions") {
    if (m == methods::GET) return answer(topic_.PartitionsJson());
  } else if (path.size() == 5 && path[2] == "partitions" &&
             (path[4] == "producers" || path[4] == "commits")) {
    char* end = nullptr;
    const unsigned long id = std::strtoul(path[3].c_str(), &end, 10);
    if (end == path[3].c_str() || *end || id > UINT32_MAX) {
      return answer(Status::InvalidArgument("partition id must be an integer"));
    }
    if (m == methods::GET) {
      const PartitionId pid(static_cast<uint32_t>(id));
      if (path[4] == "producers") {
        const auto q = Query(req);
        auto successor = ParseSuccessorQuery(q);
        if (!successor.ok()) return answer(successor.status());
        std::optional<uint64_t> end;
        if (auto e = q.find("end"); e != q.end()) {
          char* stop = nullptr;
          end = std::strtoull(e->second.c_str(), &stop, 10);
          if (stop == e->second.c_str() || *stop) {
            return answer(Status::InvalidArgument("end must be an offset"));
          }
        }
        return answer(topic_.ExportProducers(pid, successor->has_value() ? &**successor : nullptr,
                                             end),
                      "application/octet-stream");
      }
      const auto q = Query(req);
      const auto copy = q.find("copy");
      uint64_t leader_epoch = 0;
      if (const auto e = q.find("leader_epoch"); e != q.end()) {
        char* stop = nullptr;
        leader_epoch = std::strtoull(e->second.c_str(), &stop, 10);
        if (stop == e->second.c_str() || *stop) {
          return answer(Status::InvalidArgument("leader_epoch must be an epoch"));
        }
      }
      return answer(
          topic_.CommitsJson(pid, copy != q.end() && copy->second == "true", Epoch(leader_epoch)));
    }
  } else if (path.size() == 5 && path[2] == "partitions" && path[4] == "events") {
    char* end = nullptr;
    const unsigned long id = std::strtoul(path[3].c_str(), &end, 10);
    if (end == path[3].c_str() || *end || id > UINT32_MAX) {
      return answer(Status::InvalidArgument("partition id must be an integer"));
    }
    if (m == methods::GET) {
      const auto q = Query(req);
      const auto from = IntParam(q, "from", 0, 0, INT64_MAX);
      if (!from.ok()) return answer(from.status());
      const auto max = IntParam(q, "max", 100, 1, 1000);
      if (!max.ok()) return answer(max.status());
      std::optional<std::string> key;
      if (const auto k = q.find("key"); k != q.end()) key = k->second;
      return answer(topic_.BrowseJson(PartitionId(static_cast<uint32_t>(id)),
                                      static_cast<uint64_t>(*from), static_cast<size_t>(*max),
                                      key));
    }
  } else if (path.size() == 5 && path[2] == "partitions" &&
             (path[4] == "read" || path[4] == "commit")) {
    char* end = nullptr;
    const unsigned long id = std::strtoul(path[3].c_str(), &end, 10);
    if (end == path[3].c_str() || *end || id > UINT32_MAX) {
      return answer(Status::InvalidArgument("partition id must be an integer"));
    }
    if (m == methods::POST) {
      const PartitionId pid(static_cast<uint32_t>(id));
      if (path[4] == "read") {
        // Of a replicated partition, answered once a quorum of its copies holds the batch's
        // lease (so that a failover's new leader knows it), without holding a thread meanwhile.
        ReadBody(
            req, kMaxBodyBytes,
            [this, answer, pid](std::string body) {
              constexpr const char* kType = "application/x-shoal-range-batch";
              auto read = wire::ParseRangeReadRequest(body);
              if (!read.ok()) return answer(read.status());
              std::optional<broker::QuorumWait> wait;
              auto batch = topic_.ReadFor(pid, read->group, PodName(read->reader), read->ranges,
                                          read->max, read->max_bytes, &wait);
              if (!batch.ok()) return answer(batch.status());
              auto encoded = std::make_shared<std::string>(wire::EncodeRangeReadAnswer(
                  batch->batch.count, batch->batch.last, batch->batch.scanned_to,
                  batch->batch.consumed, batch->batch.ranges, batch->events));
              if (!wait) return answer(std::move(*encoded), kType);
              const auto deadline =
                  std::chrono::steady_clock::now() +
                  std::chrono::milliseconds(std::min<int64_t>(
                      topic_.options().replication_timeout_ms, kAdminQuorumWaitMs));
              wait->tracker->OnReached(wait->end, deadline, [answer, encoded, kType](Status st) {
                if (!st.ok()) return answer(st);
                answer(std::move(*encoded), kType);
              });
            },
            [answer](const Status& st) { answer(st); });
        return;
      }
      // Of a replicated partition, answered once a quorum of its copies holds the commit,
      // without holding a thread meanwhile (the followers' fetches that move the mark need one).
      ReadBody(
          req, kMaxBodyBytes,
          [this, answer, pid](std::string body) {
            auto commit = wire::ParseRangeCommitRequest(body);
            if (!commit.ok()) return answer(commit.status());
            std::optional<broker::QuorumWait> wait;
            auto after = topic_.CommitFor(pid, commit->group, PodName(commit->reader),
                                          Offset(commit->offset), &wait);
            if (!after.ok()) return answer(after.status());
            if (!wait) return answer(topic_.CommitsJson(pid));
            const auto deadline =
                std::chrono::steady_clock::now() +
                std::chrono::milliseconds(std::min<int64_t>(
                    topic_.options().replication_timeout_ms, kAdminQuorumWaitMs));
            wait->tracker->OnReached(wait->end, deadline, [this, answer, pid](Status st) {
              if (!st.ok()) return answer(st);
              answer(topic_.CommitsJson(pid));
            });
          },
          [answer](const Status& st) { answer(st); });
      return;
    }
  } else if (path.size() == 4 && path[2] == "replica" && path[3] == "fetch") {
    if (m == methods::POST) {
      ReadBody(
          req, 1 << 20, [this, req](std::string body) { HandleFetch(req, body); },
          [answer](const Status& st) { answer(st); });
      return;
    }
  } else if (path.size() == 4 && path[2] == "replica" && path[3] == "fence") {
    if (m == methods::POST) {
      return with_body([this](const std::string& body) -> Result<std::string> {
        auto fence = broker::ParseFenceRequest(body);
        if (!fence.ok()) return fence.status();
        std::string out = "{\"volume\":" + std::to_string(topic_.volume()) + ",\"fenced\":[";
        bool first = true;
        for (const auto& c : topic_.FenceCopies(fence->partitions, fence->leader_epoch)) {
          if (!first) out += ',';
          first = false;
          out += "{\"id\":" + std::to_string(c.id.value()) +
                 ",\"last_epoch\":" + std::to_string(c.last_epoch.value()) +
                 ",\"end\":" + std::to_string(c.end) +
                 (c.refetching ? ",\"refetching\":true" : "") +
                 (c.joining ? ",\"joining\":true" : "") + (c.absent ? ",\"absent\":true}" : "}");
        }
        out += "]}";
        probe_.AdminChange("fence", "ok");
        return out;
      });
    }
  } else if (path.size() == 3 && path[2] == "replica") {
    if (m == methods::GET) return answer(topic_.FollowedJson());
  } else if (path.size() == 3 && path[2] == "groups") {
    if (m == methods::GET) return answer(topic_.GroupsJson());
  } else if (path.size() == 4 && path[2] == "groups") {
    if (m == methods::DEL) {
      const auto query = web::uri::split_query(req.request_uri().query());
      const auto force_it = query.find("force");
      const bool force = force_it != query.end() && force_it->second == "true";
      auto had = topic_.DeleteGroup(path[3], force);
      probe_.AdminChange("delete_group", Outcome(had.status()));
      if (!had.ok()) return answer(had.status());
      std::string out = "{\"group\":";
      json::AppendString(out, path[3]);
      out += ",\"partitions\":[";
      for (size_t i = 0; i < had->size(); ++i) {
        if (i) out += ',';
        json::AppendUint(out, (*had)[i].value());
      }
      out += "]}";
      return answer(out);
    }
  } else {
    return answer(Status::NotFound("no such admin endpoint; see docs/admin-api.md"));
  }
  probe_.Request("admin", ReplyError(req, 405, "method_not_allowed",
                                     "method " + m + " is not allowed on this admin endpoint"));
}

}  // namespace shoal::http
