#include "http/data_frontend.h"

#include <charconv>
#include <future>
#include <memory>
#include <vector>

#include "http/http_util.h"
#include "shoal/common/json.h"
#include "shoal/common/logging.h"

namespace shoal::http {

using web::http::http_request;
using web::http::methods;

namespace {

// Waits up to `limit` for the answers to go out. Close closes the listener right after the poller
// ends, and closing it cuts off every answer still being written, so parked consumers answered at
// shutdown would get a truncated response. Bounded: a client that does not read cannot hold the
// shutdown.
void WaitUntilSent(const std::vector<pplx::task<void>>& answers, std::chrono::milliseconds limit) {
  if (answers.empty()) return;
  auto all_sent = std::make_shared<std::promise<void>>();
  auto done = all_sent->get_future();
  pplx::when_all(answers.begin(), answers.end()).then([all_sent](pplx::task<void> t) {
    try {
      t.get();
    } catch (...) {
    }
    all_sent->set_value();
  });
  done.wait_for(limit);
}

}  // namespace

DataFrontend::DataFrontend(DataFrontendOptions options, broker::Topic& topic,
                           broker::SidecarProbe& probe, const std::atomic<bool>& ready,
                           HttpPeerClient* peers)
    : opts_(std::move(options)),
      topic_(topic),
      probe_(probe),
      ready_(ready),
      peers_(peers),
      workers_(opts_.workers) {}

DataFrontend::~DataFrontend() { Close(); }

Status DataFrontend::Open() {
  ListenerOptions lo;
  lo.host = opts_.host;
  lo.port = opts_.port;
  lo.limits = opts_.http;
  lo.limits.max_body_bytes = opts_.max_body_bytes;
  lo.limits.body_timeout = std::chrono::milliseconds(opts_.body_timeout_ms);
  lo.answers = opts_.answers;
  lo.requests = opts_.requests;
  lo.on_refused = [this](int code, const std::string& error) {
    probe_.Request("other", code);
    probe_.Rejected(error);
  };
  ListenerOptions local = lo;
  local.host = opts_.local_host;
  local.port = static_cast<uint16_t>(std::max(opts_.local_port, 0));
  lo.tls = opts_.tls;
  auto handle = [this](http_request req) { Handle(std::move(req)); };
  listener_ = std::make_unique<GuardedListener>(std::move(lo), handle);
  if (opts_.local_port >= 0) {
    local_listener_ = std::make_unique<GuardedListener>(std::move(local), handle);
  }
  poller_ = std::thread([this] { PollLoop(); });
  SHOAL_RETURN_IF_ERROR(listener_->Open());
  return local_listener_ ? local_listener_->Open() : Status::Ok();
}

void DataFrontend::Close() {
  {
    std::lock_guard<std::mutex> lock(wait_mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  wait_cv_.notify_all();
  if (poller_.joinable()) poller_.join();
  {
    // Consumes served on the pool finish (and answer) before the listener closes; bounded.
    std::unique_lock<std::mutex> lock(wait_mu_);
    served_cv_.wait_for(lock, std::chrono::seconds(5), [this] { return serving_ == 0; });
    for (auto& w : waiters_) {
      Answer(w.request, "consume", 200, wire::EmptyConsumeAnswer(w.format), w.format);
    }
    waiters_.clear();
  }
  workers_.Stop();  // what was submitted runs and answers
  if (listener_) listener_->Close();
  if (local_listener_) local_listener_->Close();
}

void DataFrontend::NotifyData() {
  {
    std::lock_guard<std::mutex> lock(wait_mu_);
    if (waiters_.empty()) return;
    data_ = true;
  }
  wait_cv_.notify_one();
}

pplx::task<void> DataFrontend::Answer(const http_request& req, const std::string& endpoint,
                                      int code, std::string body, wire::Format format) {
  auto sent = format == wire::Format::kBinary
                  ? ReplyBody(req, code, std::move(body), std::string(wire::kBinaryType))
                  : ReplyJson(req, code, std::move(body));
  probe_.Request(endpoint, code);
  return sent;
}

void DataFrontend::Fail(const http_request& req, const std::string& endpoint, const Status& st) {
  const int code = ReplyError(req, st);
  probe_.Request(endpoint, code);
  probe_.Rejected(std::string(st.code_name()));
}

void DataFrontend::Handle(http_request req) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto path = PathSegments(req);
  const auto& m = req.method();
  auto wrong_method = [&](const std::string& endpoint, const std::string& allowed) {
    const int code = ReplyError(req, 405, "method_not_allowed",
                                "method " + m + " is not allowed here; use " + allowed);
    probe_.Request(endpoint, code);
    probe_.Rejected("method_not_allowed");
  };
  if (path.size() == 1 && (path[0] == "healthz" || path[0] == "readyz")) {
    const bool ok = path[0] == "healthz" || ready_.load();
    Answer(req, path[0], ok ? 200 : 503, ok ? "{\"status\":\"ok\"}" : "{\"status\":\"not ready\"}");
    return;
  }
  if (path.size() < 3 || path[0] != "v1" || path[1] != "topics" || path.size() > 4) {
    Fail(req, "other",
         Status::NotFound(
             "no such endpoint; see docs/data-plane.md: /v1/topics/{topic}[/events|/commits]"));
    return;
  }
  if (path[2] != topic_.name()) {
    Fail(req, "other",
         Status::NotFound("unknown topic \"" + path[2] + "\"; this sidecar serves \"" +
                          topic_.name() + "\""));
    return;
  }
  // The caller's name, when it came over TLS with a certificate (plain callers are local, or
  // on a port with no client CA). A peer may do anything; every other named caller is held to
  // its grant when there is an access policy.
  std::string principal;
  if (auto it = req.headers().find(kPrincipalHeader); it != req.headers().end()) {
    principal = it->second;
  }
  const bool peer = !principal.empty() && principal == opts_.peer_name;
  const std::string checked = opts_.access && !peer ? principal : std::string();
  // On a TLS-only port, only a peer's request is taken as forwarded (not sent on again, its
  // producer ids already bound).
  const bool forwarded = req.headers().has("X-Shoal-Forwarded") && (!opts_.tls.mutual() || peer);
  auto denied = [&](const std::string& endpoint, const Status& st) {
    if (st.ok()) return false;
    Fail(req, endpoint, st);
    return true;
  };
  if (path.size() == 3) {
    if (m != methods::GET) return wrong_method("topic", "GET");
    if (!checked.empty() && denied("topic", opts_.access->MayView(checked))) return;
    Answer(req, "topic", 200, topic_.ViewJson());
    return;
  }
  if (path[3] == "events") {
    if (m == methods::POST) {
      if (!checked.empty() && denied("produce", opts_.access->MayProduce(checked))) return;
      return HandleProduce(req, t0, checked, forwarded);
    }
    if (m == methods::GET) return HandleConsume(req, checked);
    return wrong_method("events", "POST (produce) or GET (consume)");
  }
  if (path[3] == "commits") {
    if (m != methods::POST) return wrong_method("commits", "POST");
    return HandleCommit(req, checked, forwarded);
  }
  Fail(req, "other", Status::NotFound("no such endpoint /" + path[3]));
}

void DataFrontend::HandleProduce(const http_request& req, std::chrono::steady_clock::time_point t0,
                                 const std::string& principal, bool forwarded) {
  if (!ready_.load()) {
    Fail(req, "produce", Status::Unavailable("the sidecar is shutting down"));
    return;
  }
  // A sequence_unknown answer names the events it could not decide.
  auto fail_unknown = [this](const http_request& r, const Status& st,
                             const std::vector<size_t>& unknown) {
    ReplyJson(r, 409, wire::SequenceUnknownBody(st.message(), unknown));
    probe_.Request("produce", 409);
    probe_.Rejected(std::string(st.code_name()));
  };
  // The body's format by its Content-Type, the answer's by Accept (docs/data-plane.md).
  const wire::Format in = FormatOfHeader(req, "Content-Type");
  const wire::Format answer_format = FormatOfHeader(req, "Accept");
  ReadBody(
      req, opts_.max_body_bytes,
      [this, req, t0, forwarded, fail_unknown, principal, in, answer_format](std::string body) {
        thread_local wire::ProduceRequestParser parser;
        auto results = std::make_shared<std::vector<wire::ProduceResult>>();
        std::vector<broker::ForwardPlan> plans;
        std::vector<size_t> unknown;
        std::vector<broker::QuorumWait> quorum;
        Status st = parser.Parse(in, body, opts_.limits);
        // A caller's producer ids are its own: "p" from "billing" is stored as "billing/p", so
        // that no caller can make another's events read as duplicates.
        std::vector<wire::ProduceEvent> bound;
        std::vector<std::string> names;
        const std::vector<wire::ProduceEvent>* events = &parser.events();
        if (st.ok() && !principal.empty()) {
          bound = parser.events();
          names.reserve(bound.size());  // the views below point into it
          for (auto& e : bound) {
            if (e.producer.empty()) continue;
            names.push_back(principal + "/" + std::string(e.producer));
            e.producer = names.back();
          }
          events = &bound;
        }
        if (st.ok()) {
          st = topic_.Produce(*events, results.get(), forwarded, &plans, &unknown, &quorum);
        }
        if (st.code() == Status::Code::kSequenceUnknown) return fail_unknown(req, st, unknown);
        if (!st.ok()) {
          Fail(req, "produce", st);
          return;
        }
        auto finish = [this, req, t0, results, fail_unknown, answer_format](
                          const Status& status, const std::vector<size_t>& unknown) {
          if (status.code() == Status::Code::kSequenceUnknown) {
            return fail_unknown(req, status, unknown);
          }
          if (!status.ok()) {
            Fail(req, "produce", status);
            return;
          }
          std::string out;
          if (answer_format == wire::Format::kBinary) {
            wire::EncodeBinaryProduceResults(*results, out);
          } else {
            wire::EncodeProduceResults(*results, out);
          }
          Answer(req, "produce", 200, std::move(out), answer_format);
          probe_.ObserveProduce(
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        };
        if (plans.empty() && quorum.empty()) return finish(Status::Ok(), {});
        if (!plans.empty() && !peers_) {
          return finish(Status::Unavailable("this sidecar cannot forward"), {});
        }
        // Events of other owners go on asynchronously, and events held here wait for a quorum
        // of their copies without holding a thread; the answer leaves when the last is back.
        struct Pending {
          std::mutex mu;
          size_t left;
          Status first_error;
          std::vector<size_t> unknown;  // request indices, for a sequence_unknown
        };
        auto pending = std::make_shared<Pending>();
        pending->left = plans.size() + quorum.size();
        // One part is done: records its outcome, and answers once every part is.
        auto part_done = [pending, finish](const Status& st, const std::vector<size_t>& unknown) {
          Status outcome;
          std::vector<size_t> all_unknown;
          {
            std::lock_guard<std::mutex> lock(pending->mu);
            if (!st.ok()) {
              for (size_t k : unknown) pending->unknown.push_back(k);
              if (pending->first_error.ok() || st.code() == Status::Code::kSequenceUnknown) {
                pending->first_error = st;
              }
            }
            if (--pending->left > 0) return;
            outcome = pending->first_error;
            all_unknown = pending->unknown;
          }
          finish(outcome, all_unknown);
        };
        const auto deadline = std::chrono::steady_clock::now() +
                              std::chrono::milliseconds(topic_.options().replication_timeout_ms);
        for (auto& w : quorum) {
          w.tracker->OnReached(w.end, deadline,
                               [part_done](Status st) { part_done(st, {}); });
        }
        for (auto& plan : plans) {
          peers_->ForwardAsync(
              plan.peer, topic_.name(), std::move(plan.body), plan.format,
              [results, part_done, idx = plan.indices](HttpPeerClient::ForwardAnswer a) {
                Status st = a.status;
                std::vector<size_t> unknown;
                if (!st.ok()) {
                  // An owner that no longer owns a key (its map is newer: the range is changing
                  // hands) or any refusal a retry can fix is a change in progress for the
                  // client: 503, as the data plane promises, never a 409 it would not retry.
                  if (st.code() == Status::Code::kFailedPrecondition) {
                    st = Status::Unavailable(st.message());
                  }
                  if (st.code() == Status::Code::kSequenceUnknown) {
                    for (size_t k : a.unknown) {
                      if (k < idx.size()) unknown.push_back(idx[k]);
                    }
                  }
                } else if (a.results.size() != idx.size()) {
                  st = Status::Internal("a forwarded answer has the wrong size");
                } else {
                  // Each forward writes its own indices; no two parts share one.
                  for (size_t k = 0; k < idx.size(); ++k) (*results)[idx[k]] = a.results[k];
                }
                part_done(st, unknown);
              });
        }
      },
      [this, req](const Status& st) { Fail(req, "produce", st); });
}

void DataFrontend::HandleConsume(const http_request& req, const std::string& principal) {
  const auto q = Query(req);
  auto g = q.find("group");
  const std::string group = g == q.end() ? "" : g->second;
  Status st = g == q.end() ? Status::InvalidArgument("query parameter group is required")
                           : wire::ValidateGroup(group);
  auto max = IntParam(q, "max", 100, 1, static_cast<int64_t>(opts_.max_consume_events));
  auto wait = IntParam(q, "wait_ms", 0, 0, opts_.max_wait_ms);
  if (st.ok() && !max.ok()) st = max.status();
  if (st.ok() && !wait.ok()) st = wait.status();
  if (st.ok() && !principal.empty()) st = opts_.access->MayUseGroup(principal, group);
  if (st.ok() && opts_.answers && opts_.answers->Spent()) {
    st = Status::Unavailable("answers not yet taken by their clients hold the answer budget (" +
                             std::to_string(opts_.answers->limit()) +
                             " bytes, --answer-budget-bytes); retry");
  }
  if (!st.ok()) {
    Fail(req, "consume", st);
    return;
  }
  // A consume may carry the commit of the group's previous batch (commit=P:O,...): committed
  // first, exactly as a POST of it would be, and the consume served only once it stands.
  std::vector<wire::CommitOffset> commit;
  if (auto c = q.find("commit"); c != q.end()) {
    auto parsed = wire::ParseCommitParam(c->second);
    if (!parsed.ok()) {
      Fail(req, "consume", parsed.status());
      return;
    }
    commit = std::move(parsed).value();
  }
  const wire::Format format = FormatOfHeader(req, "Accept");
  workers_.Submit([this, req, group, max = static_cast<size_t>(*max), wait = *wait, format,
                   commit = std::move(commit)] {
    if (commit.empty()) return ConsumeNow(req, group, max, wait, format);
    CommitThenConsume(req, group, commit, [this, req, group, max, wait, format] {
      ConsumeNow(req, group, max, wait, format);
    });
  });
}

void DataFrontend::WhenReached(std::vector<broker::QuorumWait>& quorum,
                               std::function<void(const Status&)> done) {
  struct Pending {
    std::mutex mu;
    size_t left;
    Status first_error;
  };
  auto pending = std::make_shared<Pending>();
  pending->left = quorum.size();
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(topic_.options().replication_timeout_ms);
  for (auto& w : quorum) {
    w.tracker->OnReached(w.end, deadline, [pending, done](Status reached) {
      Status outcome;
      {
        std::lock_guard<std::mutex> lock(pending->mu);
        if (!reached.ok() && pending->first_error.ok()) pending->first_error = reached;
        if (--pending->left > 0) return;
        outcome = pending->first_error;
      }
      done(outcome);
    });
  }
}

void DataFrontend::CommitThenConsume(const http_request& req, const std::string& group,
                                     const std::vector<wire::CommitOffset>& offsets,
                                     std::function<void()> consume) {
  std::vector<broker::QuorumWait> quorum;
  Status st = topic_.Commit({group, offsets}, &quorum, /*forwarded=*/false);
  if (!st.ok()) {
    Fail(req, "commit", st);  // counted as the commit's refusal, which it is
    return;
  }
  if (quorum.empty()) {
    probe_.Request("commit", 200);
    return consume();
  }
  // Replicated partitions: the consume goes on once a quorum of their copies holds the commit
  // (as a POST's answer waits), without holding a worker meanwhile.
  WhenReached(quorum, [this, req, consume](const Status& outcome) {
    if (!outcome.ok()) return Fail(req, "commit", outcome);
    probe_.Request("commit", 200);
    workers_.Submit(consume);
  });
}

void DataFrontend::ConsumeNow(const http_request& req, const std::string& group, size_t max,
                              int64_t wait_ms, wire::Format format) {
  NoteAsked(group);
  std::string out;
  std::vector<broker::QuorumWait> quorum;
  auto n = topic_.Consume(group, max, &out, &quorum, format);
  if (!n.ok()) {
    Fail(req, "consume", n.status());
    return;
  }
  if (*n > 0 || wait_ms == 0) {
    Hand(req, group, *n, std::move(out), std::move(quorum), format);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(wait_mu_);
    if (stopping_) {
      Answer(req, "consume", 200, wire::EmptyConsumeAnswer(format), format);
      return;
    }
    waiters_.push_back({req, group, max,
                        std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms),
                        format});
    data_ = true;  // check the new waiter once: data may have arrived since the read above
  }
  wait_cv_.notify_one();
}

void DataFrontend::PollLoop() {
  std::unique_lock<std::mutex> lock(wait_mu_);
  while (true) {
    auto next = std::chrono::steady_clock::time_point::max();
    for (const auto& w : waiters_) next = std::min(next, w.deadline);
    wait_cv_.wait_until(
        lock, next, [&] { return stopping_ || data_ || std::chrono::steady_clock::now() >= next; });
    const bool stopping = stopping_;
    data_ = false;
    std::list<Waiter> mine;
    mine.swap(waiters_);
    lock.unlock();
    const auto now = std::chrono::steady_clock::now();
    std::list<Waiter> keep;
    std::vector<pplx::task<void>> answered_while_stopping;
    for (auto& w : mine) {
      if (!stopping && now < w.deadline && !topic_.HasDataFor(w.group)) {
        keep.push_back(std::move(w));
        continue;
      }
      if (!stopping) {
        // Served on the pool: a consume may read an ancestor's range from its owner, and a
        // slow or paused owner must not hold up every other parked consumer.
        Serve(std::move(w));
        continue;
      }
      std::string out;
      auto n = topic_.Consume(w.group, w.max, &out, nullptr, w.format);
      if (!n.ok()) {
        Fail(w.request, "consume", n.status());
      } else if (*n > 0 || stopping || now >= w.deadline) {
        auto sent = Answer(w.request, "consume", 200, std::move(out), w.format);
        if (stopping) answered_while_stopping.push_back(std::move(sent));
      } else {
        keep.push_back(std::move(w));  // another request of the group took the events first
      }
    }
    lock.lock();
    waiters_.splice(waiters_.end(), keep);
    if (stopping) {
      for (auto& w : waiters_) {
        answered_while_stopping.push_back(
            Answer(w.request, "consume", 200, wire::EmptyConsumeAnswer(w.format), w.format));
      }
      waiters_.clear();
      lock.unlock();
      WaitUntilSent(answered_while_stopping, std::chrono::seconds(2));
      return;
    }
  }
}

void DataFrontend::Serve(Waiter w) {
  {
    std::lock_guard<std::mutex> lock(wait_mu_);
    ++serving_;
  }
  auto waiter = std::make_shared<Waiter>(std::move(w));
  workers_.Submit([this, waiter] {
    std::string out;
    std::vector<broker::QuorumWait> quorum;
    auto n = topic_.Consume(waiter->group, waiter->max, &out, &quorum, waiter->format);
    const auto now = std::chrono::steady_clock::now();
    std::unique_lock<std::mutex> lock(wait_mu_);
    if (!n.ok()) {
      lock.unlock();
      Fail(waiter->request, "consume", n.status());
    } else if (*n > 0 || stopping_ || now >= waiter->deadline) {
      lock.unlock();
      Hand(waiter->request, waiter->group, *n, std::move(out), std::move(quorum), waiter->format);
    } else {
      // Another request of the group took them first, or a peer had nothing yet: parked again,
      // and the poller looks at its deadline.
      waiters_.push_back(std::move(*waiter));
      data_ = true;
      lock.unlock();
      wait_cv_.notify_one();
    }
    lock.lock();
    if (--serving_ == 0) served_cv_.notify_all();
  });
}

void DataFrontend::Hand(const http_request& req, const std::string& group, size_t n,
                        std::string out, std::vector<broker::QuorumWait> quorum,
                        wire::Format format) {
  NoteHanded(group, n);
  if (quorum.empty()) {
    Answer(req, "consume", 200, std::move(out), format);
    return;
  }
  // The batches' leases are held by a quorum of their partitions' copies before the events go
  // out (Topic::Consume), without holding a thread; the answer leaves when the last is. Without
  // a quorum within replication_timeout_ms the events go out all the same: they are
  // acknowledged events, and a lease that only the leader holds costs at most a redelivery if
  // the leader fails before its copies take it (at-least-once), where a refusal would stop the
  // group while a quorum is missing.
  struct Pending {
    std::mutex mu;
    size_t left;
    std::string out;
  };
  auto pending = std::make_shared<Pending>();
  pending->left = quorum.size();
  pending->out = std::move(out);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(topic_.options().replication_timeout_ms);
  for (auto& w : quorum) {
    w.tracker->OnReached(w.end, deadline, [this, req, pending, format](Status) {
      {
        std::lock_guard<std::mutex> lock(pending->mu);
        if (--pending->left > 0) return;
      }
      Answer(req, "consume", 200, std::move(pending->out), format);
    });
  }
}

void DataFrontend::NoteAsked(const std::string& group) {
  std::lock_guard<std::mutex> lock(busy_mu_);
  auto it = handed_at_.find(group);
  if (it == handed_at_.end()) return;
  probe_.ConsumerBusy(
      group, std::chrono::duration<double>(std::chrono::steady_clock::now() - it->second).count());
  handed_at_.erase(it);
}

void DataFrontend::NoteHanded(const std::string& group, size_t n) {
  if (n == 0) return;
  std::lock_guard<std::mutex> lock(busy_mu_);
  // Several consumers of a group here: the first hand-out since the last request counts.
  handed_at_.try_emplace(group, std::chrono::steady_clock::now());
}

void DataFrontend::HandleCommit(const http_request& req, const std::string& principal,
                                bool forwarded) {
  ReadBody(
      req, opts_.max_body_bytes,
      [this, req, forwarded, principal](std::string body) {
        // On a worker: a commit of an ancestor read through ranges goes on to its owner, one of
        // a partition failed over to another pod to its leader.
        workers_.Submit([this, req, forwarded, principal, body = std::move(body)] {
          auto parsed = wire::ParseCommitRequest(body);
          std::vector<broker::QuorumWait> quorum;
          Status st = parsed.ok() && !principal.empty()
                          ? opts_.access->MayUseGroup(principal, parsed->group)
                          : Status::Ok();
          if (st.ok()) {
            st = parsed.ok() ? topic_.Commit(*parsed, &quorum, forwarded) : parsed.status();
          }
          if (!st.ok()) {
            Fail(req, "commit", st);
            return;
          }
          const std::string answer =
              "{\"committed\":" + std::to_string(parsed->offsets.size()) + "}";
          if (quorum.empty()) {
            Answer(req, "commit", 200, answer);
            return;
          }
          // Replicated partitions: answered once a quorum of their copies holds the commit,
          // without holding a thread meanwhile (as a produce's quorum waits).
          WhenReached(quorum, [this, req, answer](const Status& outcome) {
            if (!outcome.ok()) return Fail(req, "commit", outcome);
            Answer(req, "commit", 200, answer);
          });
        });
      },
      [this, req](const Status& st) { Fail(req, "commit", st); });
}

}  // namespace shoal::http
