#include "shoal/client/producer.h"

#include <openssl/rand.h>

#include <algorithm>
#include <functional>
#include <map>

#include "shoal/common/hash.h"

namespace shoal::client {

namespace {

std::string RandomId() {
  unsigned char bytes[6];
  std::string id = "cpp-";
  if (RAND_bytes(bytes, sizeof bytes) != 1) {
    id += std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
    return id;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  for (unsigned char b : bytes) {
    id += kHex[b >> 4];
    id += kHex[b & 15];
  }
  return id;
}

}  // namespace

Producer::Producer(const std::string& base_url, std::string topic, ProducerOptions options)
    : opts_([&] {
        // The sidecar's window of sequence numbers per producer id and partition.
        constexpr size_t kSequenceWindow = 256;
        options.batch_events = std::clamp<size_t>(options.batch_events, 1, kSequenceWindow);
        options.max_buffered = std::max(options.max_buffered, options.batch_events);
        // Numbering in Send order, for a resend after a restart to be stored once, takes one
        // batch in flight.
        options.max_in_flight =
            options.producer_id.empty() ? std::clamp<size_t>(options.max_in_flight, 1, 64) : 1;
        return options;
      }()),
      id_(opts_.producer_id.empty() ? RandomId() : opts_.producer_id),
      base_url_(base_url),
      topic_(topic),
      client_(base_url, std::move(topic), opts_.timeout, opts_.tls),
      slots_(opts_.max_in_flight) {
  client_.set_format(opts_.format);
  for (size_t i = 0; i < slots_.size(); ++i) {
    slots_[i].id = slots_.size() == 1 ? id_ : id_ + "." + std::to_string(i);
  }
  for (size_t i = 0; i < slots_.size(); ++i) slots_[i].thread = std::thread([this, i] { Run(i); });
  if (opts_.route_by_map) route_thread_ = std::thread([this] { RouteLoop(); });
}

Producer::~Producer() {
  Flush();
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
  }
  work_.notify_all();
  room_.notify_all();
  for (auto& slot : slots_) slot.thread.join();
  {
    std::lock_guard<std::mutex> lock(route_mu_);
    route_stop_ = true;
  }
  route_cv_.notify_all();
  if (route_thread_.joinable()) route_thread_.join();
}

std::string Producer::SlotId(size_t slot) const { return slots_.at(slot).id; }

std::shared_future<Result<wire::ProduceResult>> Producer::Send(std::string key,
                                                               std::string value_json) {
  Pending p;
  p.event = {std::move(key), std::move(value_json), "", std::nullopt};
  auto future = p.done.emplace().get_future().share();
  Queue(std::move(p));
  return future;
}

void Producer::Send(std::string key, std::string value_json, Callback done) {
  Pending p;
  p.event = {std::move(key), std::move(value_json), "", std::nullopt};
  p.callback = std::move(done);
  Queue(std::move(p));
}

void Producer::Queue(Pending p) {
  // The key's hash, as the sidecars route by: which batches in flight hold the key, and its pod.
  if (slots_.size() > 1 || opts_.route_by_map) p.key_hash = KeyHash(p.event.key);
  std::unique_lock<std::mutex> lock(mu_);
  if (pending_.size() >= opts_.max_buffered && !closed_) {
    ++waiting_;
    room_.wait(lock, [&] { return pending_.size() < opts_.max_buffered || closed_; });
    --waiting_;
  }
  if (closed_) {
    lock.unlock();
    p.Finish(Status::Unavailable("the producer is closed"));
    return;
  }
  if (pending_.empty()) oldest_ = std::chrono::steady_clock::now();
  // Takeable while every waiting event a take looked at is not: within a take's reach, of a key
  // not in flight.
  const bool unstalls =
      stalled_ && pending_.size() < TakeWindow() && keys_out_.count(p.key_hash) == 0;
  pending_.push_back(std::move(p));
  if (unstalls) stalled_ = false;
  // Idle senders wait without a deadline for a first event and until the linger's end for a
  // full batch: only those, and an event that ends a stall, wake one.
  if (pending_.size() == 1 || pending_.size() % opts_.batch_events == 0 || unstalls) {
    work_.notify_one();
  }
}

void Producer::Flush() {
  std::unique_lock<std::mutex> lock(mu_);
  ++waiting_;
  room_.wait(lock, [&] { return pending_.empty() && in_flight_ == 0; });
  --waiting_;
}

uint64_t Producer::requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_;
}

uint64_t Producer::retries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return retries_;
}

size_t Producer::peak_in_flight() const {
  std::lock_guard<std::mutex> lock(mu_);
  return peak_in_flight_;
}

uint64_t Producer::passed_over() const {
  std::lock_guard<std::mutex> lock(mu_);
  return passed_over_;
}

std::vector<Producer::Pending> Producer::TakeBatch() {
  const size_t window = std::min(pending_.size(), TakeWindow());
  const bool track = slots_.size() > 1;
  // Routed: the batch holds the first takeable event's owner's events only; the others stay.
  const std::shared_ptr<const Routes> routes = opts_.route_by_map ? CurrentRoutes() : nullptr;
  bool owner_chosen = false;
  ShoalClient* owner = nullptr;
  std::vector<Pending> batch, passed;
  batch.reserve(std::min(window, opts_.batch_events));
  for (size_t i = 0; i < window && batch.size() < opts_.batch_events; ++i) {
    Pending& p = pending_.front();
    if (routes) p.owner = routes->OwnerOf(p.key_hash);
    if (track && keys_out_.count(p.key_hash) > 0) {
      ++passed_over_;
      passed.push_back(std::move(p));
    } else if (owner_chosen && p.owner != owner) {
      // Another pod's: for another batch. Numbering in Send order (a stable producer id) keeps
      // a batch to the events up to the first of another pod.
      if (!opts_.producer_id.empty()) break;
      passed.push_back(std::move(p));
    } else {
      owner = p.owner;
      owner_chosen = true;
      batch.push_back(std::move(p));
    }
    pending_.pop_front();
  }
  for (auto it = passed.rbegin(); it != passed.rend(); ++it) pending_.push_front(std::move(*it));
  if (track) {
    for (const auto& p : batch) keys_out_.insert(p.key_hash);
  }
  return batch;
}

void Producer::Run(size_t index) {
  Slot& slot = slots_[index];
  while (true) {
    std::vector<Pending> batch;
    {
      std::unique_lock<std::mutex> lock(mu_);
      while (true) {
        if (closed_ && pending_.empty()) return;
        if (pending_.empty() || stalled_) {
          work_.wait(lock);
          continue;
        }
        const auto due = oldest_ + opts_.linger;
        if (pending_.size() < opts_.batch_events && !closed_ &&
            std::chrono::steady_clock::now() < due) {
          work_.wait_until(lock, due);
          continue;
        }
        batch = TakeBatch();
        if (!batch.empty()) break;
        stalled_ = true;  // until a batch comes back or an event comes
      }
      for (auto& p : batch) {
        p.event.producer = slot.id;
        p.event.seq = slot.next_seq++;  // numbered in the order they were sent
      }
      if (!pending_.empty()) {
        oldest_ = std::chrono::steady_clock::now();
        work_.notify_one();  // another sender for what is left
      }
      peak_in_flight_ = std::max(peak_in_flight_, ++in_flight_);
      if (waiting_ > 0) room_.notify_all();  // room for blocked senders
    }
    std::vector<uint64_t> keys;
    if (slots_.size() > 1) {
      keys.reserve(batch.size());
      for (const auto& p : batch) keys.push_back(p.key_hash);
    }
    SendBatch(slot, batch);
    std::lock_guard<std::mutex> lock(mu_);
    for (uint64_t k : keys) keys_out_.erase(k);
    if (stalled_) {
      stalled_ = false;
      work_.notify_one();
    }
    --in_flight_;
    if (waiting_ > 0) room_.notify_all();
  }
}

Result<std::vector<wire::ProduceResult>> Producer::SendEvents(
    ShoalClient& client, std::vector<OutgoingEvent>& events, Slot& slot,
    std::chrono::steady_clock::time_point deadline) {
  auto backoff = std::chrono::milliseconds(20);
  while (true) {
    std::vector<size_t> unknown;
    auto answer = client.Produce(events, &unknown);
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++requests_;
    }
    if (answer.ok()) {
      if (answer->size() != events.size()) {
        return Status::Unavailable(std::to_string(answer->size()) + " results for " +
                                   std::to_string(events.size()) + " events");
      }
      return answer;
    }
    const Status st = answer.status();
    if (st.code() == Status::Code::kSequenceUnknown && !unknown.empty() &&
        std::chrono::steady_clock::now() < deadline) {
      // Not decided by the sidecar: sent again under new numbers.
      std::lock_guard<std::mutex> lock(mu_);
      for (size_t i : unknown) {
        if (i < events.size()) events[i].seq = slot.next_seq++;
      }
      ++retries_;
      continue;
    }
    if (!Retryable(st) || std::chrono::steady_clock::now() + backoff >= deadline) return st;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++retries_;
    }
    std::this_thread::sleep_for(backoff);  // backing off a retryable refusal
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
  }
}

void Producer::SendBatch(Slot& slot, std::vector<Pending>& batch) {
  std::vector<OutgoingEvent> events;
  events.reserve(batch.size());
  for (auto& p : batch) events.push_back(std::move(p.event));  // the results find them by index
  Result<std::vector<wire::ProduceResult>> answer = Status::Unavailable("not sent");
  ShoalClient* owner = batch.empty() ? nullptr : batch.front().owner;
  if (owner) {
    // Straight to the owner, once (no retry: with the deadline now). Unless the events
    // themselves were refused, the batch is then sent the way it goes without routing, with
    // the whole retry budget: a pod that is gone or unreachable from here, that no longer owns
    // the range and answers 503 for a change in progress, or that cannot decide a sequence
    // number. (A pod that no longer owns the range otherwise forwards the batch.) The routes
    // are read again; a pod that did not answer within the direct timeout is left out of them
    // for a while, so that not every batch waits for it.
    const auto sent_at = std::chrono::steady_clock::now();
    answer = SendEvents(*owner, events, slot, sent_at);
    if (answer.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      routed_ += events.size();
    } else if (const auto code = answer.status().code();
               code != Status::Code::kInvalidArgument && code != Status::Code::kTooLarge) {
      const bool hung = std::chrono::steady_clock::now() - sent_at >= kDirectTimeout * 9 / 10;
      Reroute(hung ? owner : nullptr);
      answer =
          SendEvents(client_, events, slot, std::chrono::steady_clock::now() + opts_.retry_for);
    }
  } else {
    answer = SendEvents(client_, events, slot, std::chrono::steady_clock::now() + opts_.retry_for);
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    batch[i].Finish(answer.ok() ? Result<wire::ProduceResult>((*answer)[i]) : answer.status());
  }
}

std::shared_ptr<const Producer::Routes> Producer::CurrentRoutes() const {
  std::lock_guard<std::mutex> lock(route_mu_);
  return routes_;
}

size_t Producer::routed_ranges() const {
  auto routes = CurrentRoutes();
  return routes ? routes->entries.size() : 0;
}

void Producer::Reroute(ShoalClient* shun) {
  {
    std::lock_guard<std::mutex> lock(route_mu_);
    read_now_ = true;
    if (!shun) {
      route_cv_.notify_all();
      return;
    }
    ShoalClient* owner = shun;
    shunned_[owner] = std::chrono::steady_clock::now() + kShunFor;
    if (routes_) {
      // Its ranges go through base_url from now on, until it answers again after kShunFor.
      auto next = std::make_shared<Routes>(*routes_);
      std::erase_if(next->entries, [&](const RouteEntry& r) { return r.owner == owner; });
      routes_ = std::move(next);
    }
  }
  route_cv_.notify_all();
}

void Producer::RouteLoop() {
  std::unique_lock<std::mutex> lock(route_mu_);
  while (!route_stop_) {
    read_now_ = false;
    lock.unlock();
    auto next = ReadRoutes();
    lock.lock();
    if (next) {
      const auto now = std::chrono::steady_clock::now();
      std::erase_if(shunned_, [&](const auto& s) { return s.second <= now; });
      std::erase_if(next->entries, [&](const RouteEntry& r) { return shunned_.count(r.owner); });
      routes_ = std::move(next);
    }
    route_cv_.wait_for(lock, opts_.route_refresh, [&] { return route_stop_ || read_now_; });
  }
}

std::shared_ptr<Producer::Routes> Producer::ReadRoutes() {
  auto view = client_.TopicView();
  if (!view.ok()) return nullptr;  // not readable now: the routes as they were
  auto ranges = OwnedRanges(*view);
  if (!ranges.ok()) return nullptr;
  auto next = std::make_shared<Routes>();
  for (const auto& r : *ranges) next->entries.push_back({r.lo, r.hi, OwnerClient(r.data_address)});
  return next;
}

ShoalClient* Producer::OwnerClient(const std::string& data_address) {
  std::lock_guard<std::mutex> lock(route_mu_);
  auto& c = owners_[data_address];
  if (!c) {
    // A pod's address may be unreachable from here (a pod IP outside the cluster): a short
    // timeout, then the batch goes through base_url and the pod is left out for a while.
    const bool tls = base_url_.rfind("https://", 0) == 0;
    c = std::make_unique<ShoalClient>((tls ? "https://" : "http://") + data_address, topic_,
                                      std::min(opts_.timeout, kDirectTimeout), opts_.tls);
    c->set_format(opts_.format);
  }
  return c.get();
}

ShoalClient* Producer::Routes::OwnerOf(uint64_t key_hash) const {
  const RouteEntry* r = RangeHolding(entries, key_hash);
  return r ? r->owner : nullptr;
}

uint64_t Producer::routed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return routed_;
}

}  // namespace shoal::client
