#include "shoal/client/producer.h"

#include <openssl/rand.h>

#include <algorithm>

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

bool Retryable(const Status& st) {
  return st.code() == Status::Code::kUnavailable || st.code() == Status::Code::kNoSpace;
}

}  // namespace

Producer::Producer(const std::string& base_url, std::string topic, ProducerOptions options)
    : opts_([&] {
        options.batch_events = std::max<size_t>(1, options.batch_events);
        options.max_buffered = std::max(options.max_buffered, options.batch_events);
        return options;
      }()),
      id_(opts_.producer_id.empty() ? RandomId() : opts_.producer_id),
      client_(base_url, std::move(topic), opts_.timeout, opts_.tls) {
  thread_ = std::thread([this] { Run(); });
}

Producer::~Producer() {
  Flush();
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::shared_future<Result<wire::ProduceResult>> Producer::Send(std::string key,
                                                               std::string value_json) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return pending_.size() < opts_.max_buffered || closed_; });
  Pending p;
  p.event = {std::move(key), std::move(value_json), id_, std::nullopt};
  auto future = p.done.get_future().share();
  if (closed_) {
    p.done.set_value(Status::Unavailable("the producer is closed"));
    return future;
  }
  if (pending_.empty()) oldest_ = std::chrono::steady_clock::now();
  pending_.push_back(std::move(p));
  cv_.notify_all();
  return future;
}

void Producer::Flush() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return pending_.empty() && in_flight_ == 0; });
}

uint64_t Producer::requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_;
}

uint64_t Producer::retries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return retries_;
}

void Producer::Run() {
  while (true) {
    std::vector<Pending> batch;
    {
      std::unique_lock<std::mutex> lock(mu_);
      while (true) {
        if (closed_ && pending_.empty()) return;
        if (pending_.size() >= opts_.batch_events || closed_) break;
        if (pending_.empty()) {
          cv_.wait(lock);
          continue;
        }
        const auto due = oldest_ + opts_.linger;
        if (std::chrono::steady_clock::now() >= due) break;
        cv_.wait_until(lock, due);
      }
      const size_t n = std::min(pending_.size(), opts_.batch_events);
      batch.reserve(n);
      for (size_t i = 0; i < n; ++i) {
        batch.push_back(std::move(pending_.front()));
        pending_.pop_front();
        batch.back().event.seq = next_seq_++;  // numbered in the order they were sent
      }
      if (!pending_.empty()) oldest_ = std::chrono::steady_clock::now();
      in_flight_ = batch.size();
      cv_.notify_all();  // room for blocked senders
    }
    SendBatch(batch);
    {
      std::lock_guard<std::mutex> lock(mu_);
      in_flight_ = 0;
    }
    cv_.notify_all();
  }
}

void Producer::SendBatch(std::vector<Pending>& batch) {
  const auto deadline = std::chrono::steady_clock::now() + opts_.retry_for;
  auto backoff = std::chrono::milliseconds(20);
  std::vector<OutgoingEvent> events;
  events.reserve(batch.size());
  for (const auto& p : batch) events.push_back(p.event);
  while (true) {
    std::vector<size_t> unknown;
    auto answer = client_.Produce(events, &unknown);
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++requests_;
    }
    if (answer.ok()) {
      if (answer->size() != batch.size()) {
        const Status st = Status::Unavailable(std::to_string(answer->size()) + " results for " +
                                              std::to_string(batch.size()) + " events");
        for (auto& p : batch) p.done.set_value(st);
        return;
      }
      for (size_t i = 0; i < batch.size(); ++i) batch[i].done.set_value((*answer)[i]);
      return;
    }
    const Status st = answer.status();
    if (st.code() == Status::Code::kSequenceUnknown && !unknown.empty()) {
      // Not decided by the sidecar: sent again under new numbers.
      std::lock_guard<std::mutex> lock(mu_);
      for (size_t i : unknown) {
        if (i < events.size()) events[i].seq = next_seq_++;
      }
      ++retries_;
      continue;
    }
    if (!Retryable(st) || std::chrono::steady_clock::now() + backoff >= deadline) {
      for (auto& p : batch) p.done.set_value(st);
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++retries_;
    }
    std::this_thread::sleep_for(backoff);  // backing off a retryable refusal
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
  }
}

}  // namespace shoal::client
