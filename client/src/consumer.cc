#include "shoal/client/consumer.h"

#include <algorithm>
#include <thread>

namespace shoal::client {

namespace {

void AddOffsets(const std::vector<wire::ConsumedEvent>& events,
                std::map<uint32_t, uint64_t>& offsets) {
  for (const auto& e : events) {
    auto& next = offsets[e.partition];
    next = std::max(next, e.offset + 1);
  }
}

void Merge(const std::map<uint32_t, uint64_t>& from, std::map<uint32_t, uint64_t>& into) {
  for (const auto& [p, o] : from) {
    auto& next = into[p];
    next = std::max(next, o);
  }
}

}  // namespace

Consumer::Consumer(const std::string& base_url, std::string topic, std::string group,
                   ConsumerOptions options)
    : opts_([&] {
        options.max_events = std::clamp<size_t>(options.max_events, 1, 10000);
        options.wait_ms = std::clamp<int64_t>(options.wait_ms, 0, 60000);
        options.timeout =
            std::max(options.timeout, std::chrono::milliseconds(options.wait_ms + 5000));
        return options;
      }()),
      group_(std::move(group)),
      client_(base_url, std::move(topic), opts_.timeout, opts_.tls) {
  client_.set_format(opts_.format);
}

Consumer::~Consumer() {
  std::unique_lock<std::mutex> lock(mu_);
  stopped_ = stop_ = true;
  cv_.notify_all();
  cv_.wait(lock, [&] { return !running_; });
}

std::vector<wire::CommitOffset> Consumer::ToCommit(const Offsets& offsets) {
  std::vector<wire::CommitOffset> out;
  out.reserve(offsets.size());
  for (const auto& [p, o] : offsets) out.push_back({PartitionId(p), Offset(o)});
  return out;
}

uint64_t Consumer::fetches() const {
  std::lock_guard<std::mutex> lock(mu_);
  return fetches_;
}

uint64_t Consumer::commit_posts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return commit_posts_;
}

uint64_t Consumer::carried() const {
  std::lock_guard<std::mutex> lock(mu_);
  return carried_;
}

void Consumer::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = stop_ = true;
  }
  cv_.notify_all();
}

Status Consumer::CommitNow(const Offsets& offsets) {
  const auto deadline = std::chrono::steady_clock::now() + opts_.retry_for;
  auto backoff = std::chrono::milliseconds(50);
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++commit_posts_;
    }
    Status st = client_.Commit(group_, ToCommit(offsets));
    if (st.ok() || !Retryable(st) || std::chrono::steady_clock::now() + backoff >= deadline) {
      return st;
    }
    std::this_thread::sleep_for(backoff);  // backing off a retryable refusal
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
  }
}

// The fetcher: a fetch whenever nothing fetched waits for the handler (with prefetch) or the
// handler asks for one (without), carrying what was handled since the last.
void Consumer::FetchLoop() {
  using Clock = std::chrono::steady_clock;
  Clock::time_point failing_since{};  // the first of the failures in a row; epoch: none
  auto backoff = std::chrono::milliseconds(50);
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || (!ready_ && (opts_.prefetch || wanted_)); });
    if (stop_) break;
    Offsets carry = std::move(to_commit_);
    to_commit_.clear();
    fetching_ = true;
    ++fetches_;
    if (!carry.empty()) ++carried_;
    lock.unlock();
    auto got = client_.Consume(group_, opts_.max_events, opts_.wait_ms, ToCommit(carry));
    lock.lock();
    fetching_ = false;
    if (!got.ok()) {
      Merge(carry, to_commit_);  // not committed: carried again, or committed at the end
      const auto now = Clock::now();
      if (failing_since == Clock::time_point{}) failing_since = now;
      if (!Retryable(got.status()) || now - failing_since > opts_.retry_for) {
        fetch_error_ = got.status();
        stop_ = true;
        break;
      }
      fetching_ = true;  // backing off: commits handled meanwhile do not wait for it
      cv_.wait_for(lock, backoff, [&] { return stop_; });  // backing off, unless stopped
      fetching_ = false;
      backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
      continue;
    }
    failing_since = Clock::time_point{};
    backoff = std::chrono::milliseconds(50);
    if (!got->empty()) {
      ready_ = std::move(got).value();
      wanted_ = false;
    } else if (opts_.wait_ms < 10) {
      // A fetch that does not wait answers at once: pace the empty ones.
      cv_.wait_for(lock, std::chrono::milliseconds(10), [&] { return stop_; });
    }
    cv_.notify_all();
  }
  fetcher_done_ = true;
  cv_.notify_all();
}

Status Consumer::Run(const Handler& handler) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (running_) return Status::FailedPrecondition("this consumer's Run is already running");
    if (stopped_) return Status::Ok();
    running_ = true;
    stop_ = false;
    fetcher_done_ = false;
    fetch_error_ = Status::Ok();
    ready_.reset();
    wanted_ = false;
  }
  std::thread fetcher([this] { FetchLoop(); });
  Status result;
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    wanted_ = true;
    cv_.notify_all();
    // After a stop, what the fetcher brings in still goes to the handler: it is out to this
    // group, and left alone it would hold its partitions until redelivery.
    cv_.wait(lock, [&] { return ready_.has_value() || fetcher_done_; });
    if (!ready_) break;
    std::vector<wire::ConsumedEvent> batch = std::move(*ready_);
    ready_.reset();
    cv_.notify_all();  // room: with prefetch the next fetch goes out now
    lock.unlock();
    Status st;
    try {
      st = handler(batch);
    } catch (const std::exception& e) {
      st = Status::Internal(std::string("the handler threw: ") + e.what());
    } catch (...) {
      st = Status::Internal("the handler threw");
    }
    lock.lock();
    if (!st.ok()) {
      result = st;  // not committed: handed out again
      stop_ = true;
      cv_.notify_all();
      break;
    }
    AddOffsets(batch, to_commit_);
    if (fetching_) {
      // A fetch is out (a long poll, perhaps): this batch's partitions wait for its commit.
      Offsets now = std::move(to_commit_);
      to_commit_.clear();
      lock.unlock();
      Status committed = CommitNow(now);
      lock.lock();
      if (!committed.ok()) {
        Merge(now, to_commit_);
        result = committed;
        stop_ = true;
        cv_.notify_all();
        break;
      }
    }
  }
  lock.unlock();
  fetcher.join();
  lock.lock();
  if (result.ok()) result = fetch_error_;
  // A batch the fetcher brought in after a handler's error is not handled: handed out again.
  ready_.reset();
  Offsets left = std::move(to_commit_);
  to_commit_.clear();
  lock.unlock();
  if (!left.empty()) {
    Status committed = CommitNow(left);
    if (result.ok()) result = committed;
  }
  lock.lock();
  running_ = false;
  cv_.notify_all();
  return result;
}

}  // namespace shoal::client
