#include "shoal/harness/workload.h"

#include <fcntl.h>
#include <simdjson.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <utility>

#include "shoal/client/shoal_client.h"
#include "shoal/common/hash.h"
#include "shoal/common/load_profile.h"
#include "shoal/common/partition_map.h"

namespace shoal::harness {

uint64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

double ProfileFactor(const LoadOptions& o, double t) {
  return LoadProfileFactor(o.profile, t, o.duration_s, o.surge_from, o.surge_until);
}

double ProfileFactor(const std::string& profile, double t, double d) {
  LoadOptions o;
  o.profile = profile;
  o.duration_s = d;
  return ProfileFactor(o, t);
}

std::vector<std::string> KeyNames(int keys, bool skew) {
  std::vector<std::string> out;
  out.reserve(static_cast<size_t>(std::max(keys, 0)));
  // Two hot ranges of 1/128 of the hash space each, away from the first map's boundaries.
  constexpr uint64_t kWidth = kHashSpace / 128;
  const uint64_t hot[2] = {kHashSpace / 8 + kWidth, kHashSpace * 5 / 8 + kWidth / 2};
  for (int i = 0; i < keys; ++i) {
    std::string name = "key-" + std::to_string(i);
    if (skew && i % 10 != 9) {
      for (uint64_t j = 0;; ++j) {  // 1 name in 64 hashes into a hot range
        std::string candidate = name + "-" + std::to_string(j);
        const uint64_t h = KeyHash(candidate);
        if ((h >= hot[0] && h < hot[0] + kWidth) || (h >= hot[1] && h < hot[1] + kWidth)) {
          name = std::move(candidate);
          break;
        }
      }
    }
    out.push_back(std::move(name));
  }
  return out;
}

// route_by_map: which pod owns each of the generator's keys, by a topic view's owned ranges. The
// keys fall into groups, one per pod and a last one for the keys of no known pod (a range whose
// owner the view does not list, or in no active partition now): a batch draws its keys from one
// group, which keeps them uniformly drawn.
struct LoadGenerator::KeyOwners {
  std::vector<size_t> group_of;             // key index -> its group
  std::vector<std::vector<uint32_t>> keys;  // per group, the indices of its keys (never empty)
  std::vector<std::string> urls;            // the pods' data URLs: groups 0..urls.size()-1

  static KeyOwners Of(const std::vector<client::OwnedRange>& ranges,
                      const std::vector<std::string>& key_names, const std::string& scheme) {
    KeyOwners k;
    k.group_of.assign(key_names.size(), 0);
    std::map<std::string_view, size_t> index;
    std::vector<uint32_t> unknown;
    for (uint32_t i = 0; i < key_names.size(); ++i) {
      const client::OwnedRange* r = client::RangeOf(ranges, key_names[i]);
      if (!r) {
        unknown.push_back(i);
        continue;
      }
      auto [it, fresh] = index.try_emplace(r->data_address, k.urls.size());
      if (fresh) {
        k.urls.push_back(scheme + r->data_address);
        k.keys.emplace_back();
      }
      k.group_of[i] = it->second;
      k.keys[it->second].push_back(i);
    }
    if (!unknown.empty()) {
      for (uint32_t i : unknown) k.group_of[i] = k.keys.size();
      k.keys.push_back(std::move(unknown));
    }
    return k;
  }
};

LoadGenerator::LoadGenerator(LoadOptions options)
    : opts_(std::move(options)),
      key_names_(KeyNames(opts_.keys, opts_.skew)),
      targets_(opts_.targets) {}
LoadGenerator::~LoadGenerator() { Stop(); }

void LoadGenerator::Start() {
  if (opts_.route_by_map) owners_thread_ = std::thread([this] { ReadOwners(); });
  for (int i = 0; i < opts_.producers; ++i) threads_.emplace_back([this, i] { Run(i); });
}

void LoadGenerator::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  owners_cv_.notify_all();
  for (auto& t : threads_) t.join();
  threads_.clear();
  if (owners_thread_.joinable()) owners_thread_.join();
}

void LoadGenerator::ReadOwners() {
  // A client per first target (SetTargets may change it), with the short timeout of a direct send.
  std::map<std::string, std::unique_ptr<client::ShoalClient>> views;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_.load()) {
    read_owners_now_ = false;
    const std::string target = targets_.empty() ? std::string() : targets_[0];
    lock.unlock();
    std::shared_ptr<const KeyOwners> next;
    if (!target.empty()) {
      auto& c = views[target];
      if (!c)
        c = std::make_unique<client::ShoalClient>(target, opts_.topic, kDirectTimeout, opts_.tls);
      auto view = c->TopicView();
      auto ranges = view.ok() ? client::OwnedRanges(*view)
                              : Result<std::vector<client::OwnedRange>>(view.status());
      if (ranges.ok()) {
        next = std::make_shared<const KeyOwners>(
            KeyOwners::Of(*ranges, key_names_, opts_.tls.enabled() ? "https://" : "http://"));
      }
    }
    lock.lock();
    if (next) owners_ = std::move(next);  // not readable now: the owners as they were
    owners_read_ = true;
    owners_cv_.notify_all();
    owners_cv_.wait_for(lock, opts_.route_refresh,
                        [&] { return stop_.load() || read_owners_now_; });
  }
}

std::shared_ptr<const LoadGenerator::KeyOwners> LoadGenerator::CurrentOwners() {
  std::unique_lock<std::mutex> lock(mu_);
  // The first batches wait for the first read (at most kDirectTimeout), so that they are routed.
  owners_cv_.wait(lock, [&] { return stop_.load() || owners_read_; });
  return owners_;
}

void LoadGenerator::ReadOwnersNow() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    read_owners_now_ = true;
  }
  owners_cv_.notify_all();
}

std::vector<AckedEvent> LoadGenerator::TakeAcked() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::move(acked_events_);
}

std::string LoadGenerator::last_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_error_;
}

void LoadGenerator::SetTargets(std::vector<std::string> targets) {
  if (targets.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (targets == targets_) return;
  targets_ = std::move(targets);
  targets_version_.fetch_add(1);
}

void LoadGenerator::Run(int index) {
  const std::string id = opts_.producer_prefix + "-" + std::to_string(index);
  std::mt19937_64 rng(opts_.seed * 1000003 + static_cast<uint64_t>(index));
  // One client per target URL, kept while the target list changes (SetTargets).
  std::map<std::string, std::unique_ptr<client::ShoalClient>> by_url;
  std::vector<client::ShoalClient*> clients;
  uint64_t version = ~uint64_t{0};
  auto refresh = [&] {
    const uint64_t now = targets_version_.load();
    if (now == version) return;
    std::vector<std::string> urls;
    {
      std::lock_guard<std::mutex> lock(mu_);
      urls = targets_;
    }
    version = now;
    clients.clear();
    for (const auto& t : urls) {
      auto& c = by_url[t];
      if (!c)
        c = std::make_unique<client::ShoalClient>(t, opts_.topic, std::chrono::seconds(10),
                                                  opts_.tls);
      clients.push_back(c.get());
    }
  };
  refresh();
  if (clients.empty()) {
    std::lock_guard<std::mutex> lock(mu_);
    last_error_ = "no targets to produce to";
    return;
  }
  // route_by_map: clients of the pods, and the pods left out until a time (one that did not answer
  // a direct send within kShunAfter: an address this generator cannot reach, or a paused pod).
  std::map<std::string, std::unique_ptr<client::ShoalClient>> owner_clients;
  std::map<std::string, std::chrono::steady_clock::time_point> shunned;
  auto direct_client = [&](const std::string& url) -> client::ShoalClient* {
    auto it = shunned.find(url);
    if (it != shunned.end()) {
      if (std::chrono::steady_clock::now() < it->second) return nullptr;
      shunned.erase(it);
    }
    auto& c = owner_clients[url];
    if (!c) c = std::make_unique<client::ShoalClient>(url, opts_.topic, kDirectTimeout, opts_.tls);
    return c.get();
  };
  std::map<std::string, uint64_t> counter;
  uint64_t seq = 0;
  size_t target = static_cast<size_t>(index) % clients.size();
  const auto start = std::chrono::steady_clock::now();
  auto next_send = start;
  if (opts_.rate > 0) {
    // Producers start staggered over one batch interval: in step, they would send in bursts that
    // make a steady rate look like alternating seconds of 1 and 2 bursts to anyone measuring it.
    const double per_producer = opts_.rate * ProfileFactor(opts_, 0) / opts_.producers;
    next_send += std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(opts_.batch / per_producer * index / opts_.producers));
    std::this_thread::sleep_until(next_send);  // this producer's place in the schedule
  }
  while (!stop_.load()) {
    const double t =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (opts_.duration_s > 0 && t >= opts_.duration_s) break;
    const std::shared_ptr<const KeyOwners> owners = opts_.route_by_map ? CurrentOwners() : nullptr;
    std::vector<client::OutgoingEvent> batch;
    std::vector<AckedEvent> meta;
    size_t group = 0;  // route_by_map: the group this batch's keys are drawn from
    for (int b = 0; b < opts_.batch; ++b) {
      size_t k = rng() % key_names_.size();
      if (owners && b == 0) group = owners->group_of[k];
      if (owners && b > 0) {
        const auto& keys = owners->keys[group];
        k = keys[rng() % keys.size()];
      }
      const std::string& key = key_names_[k];
      const uint64_t n = ++counter[key];
      batch.push_back(
          {key, "{\"p\":\"" + id + "\",\"k\":\"" + key + "\",\"n\":" + std::to_string(n) + "}", id,
           seq});
      meta.push_back({id, key, seq, n});
      ++seq;
    }
    refresh();
    if (target >= clients.size()) target = 0;
    if (opts_.spread) target = (target + 1) % clients.size();
    // Send until acknowledged, rotating over sidecars; the same (producer, seq) every time.
    auto backoff = std::chrono::milliseconds(5);
    bool acked = false;
    const auto sent = std::chrono::steady_clock::now();
    // Straight to the keys' pod first (route_by_map), through the targets after a failure there.
    const std::string* owner_url =
        owners && group < owners->urls.size() ? &owners->urls[group] : nullptr;
    client::ShoalClient* direct = owner_url ? direct_client(*owner_url) : nullptr;
    while (!stop_.load()) {
      std::vector<size_t> unknown;
      const auto attempt = std::chrono::steady_clock::now();
      auto r = (direct ? direct : clients[target])->Produce(batch, &unknown);
      if (r.ok()) {
        acked = true;
        if (direct) routed_.fetch_add(1);
        break;
      }
      if (r.status().code() == Status::Code::kSequenceUnknown && !unknown.empty()) {
        // The sidecar cannot tell whether these were stored (they are older than the producer
        // state it has): they are given up, unacknowledged, and the rest is sent again.
        std::vector<bool> drop(batch.size(), false);
        for (size_t i : unknown) {
          if (i < drop.size()) drop[i] = true;
        }
        std::vector<client::OutgoingEvent> kept_batch;
        std::vector<AckedEvent> kept_meta;
        for (size_t i = 0; i < batch.size(); ++i) {
          if (drop[i]) continue;
          kept_batch.push_back(std::move(batch[i]));
          kept_meta.push_back(meta[i]);
        }
        abandoned_.fetch_add(batch.size() - kept_batch.size());
        batch = std::move(kept_batch);
        meta = std::move(kept_meta);
        if (batch.empty()) break;
      }
      retries_.fetch_add(1);
      {
        std::lock_guard<std::mutex> lock(mu_);
        last_error_ = r.status().message();
      }
      if (direct) {
        // The pod did not take it: through the targets, and the owners read again at once.
        if (std::chrono::steady_clock::now() - attempt >= kShunAfter) {
          shunned[*owner_url] = std::chrono::steady_clock::now() + kShunFor;
        }
        direct = nullptr;
        ReadOwnersNow();
        continue;
      }
      target = (target + 1) % clients.size();
      std::this_thread::sleep_for(backoff);  // backoff before retrying a refused batch
      backoff = std::min(backoff * 2, std::chrono::milliseconds(200));
    }
    if (!acked && !batch.empty()) break;
    if (batch.empty()) continue;
    const uint64_t acked_at = MonotonicNs();
    for (auto& m : meta) m.acked_ns = acked_at;
    acked_.fetch_add(meta.size());
    {
      std::lock_guard<std::mutex> lock(mu_);
      acked_events_.insert(acked_events_.end(), meta.begin(), meta.end());
      // What the producer waited, retries included.
      latencies_ms_.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - sent)
              .count());
    }
    if (opts_.rate > 0) {
      const double factor = ProfileFactor(opts_, t);
      const double per_producer = opts_.rate * factor / opts_.producers;
      // Every producer sends on one grid of the current interval, each at its own phase (its
      // index over the producers), at the first point at least half an interval after its last
      // send. When the rate changes, each moves to its place on the new grid: advancing by
      // intervals alone would keep them as close together as they were at the old rate (a
      // surge's tenth of a second, then bursts of every producer at once after it), and a
      // steady rate would arrive as seconds of double load and seconds of none. A producer far
      // behind (a slow answer) skips the sends it missed instead of bursting to catch up.
      const double interval = opts_.batch / per_producer;
      const double phase = static_cast<double>(index) / opts_.producers;
      const double last = std::chrono::duration<double>(next_send - start).count() + 0.5 * interval;
      const double now_s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const double earliest = std::max(last, now_s - 1.0);
      const double k = std::ceil(earliest / interval - phase);
      next_send = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                              std::chrono::duration<double>((k + phase) * interval));
      std::this_thread::sleep_until(next_send);  // the offered rate's schedule
    }
  }
}

std::vector<double> LoadGenerator::TakeLatenciesMs() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(latencies_ms_, {});
}

GroupConsumer::GroupConsumer(ConsumerOptions options)
    : opts_(std::move(options)), rate_(opts_.rate) {}
GroupConsumer::~GroupConsumer() {
  Stop();
  if (out_fd_ >= 0) ::close(out_fd_);
}

Status GroupConsumer::Start() {
  if (!opts_.stream_to.empty()) SHOAL_RETURN_IF_ERROR(OpenStream(&resume_next_));
  thread_ = std::thread([this] { Run(); });
  return Status::Ok();
}

void GroupConsumer::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

std::vector<SeenEvent> GroupConsumer::TakeSeen() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::move(seen_);
}

Status GroupConsumer::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

namespace {

// Now as the sidecars' logs write it (2026-12-05T00:17:48.948234Z), to line messages up with them.
std::string UtcNow() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto us =
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() %
      1000000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<long>(us));
  return buf;
}

// The length of `path` up to and including its last '\n' (0 when it has none), and its size.
Status CompleteLinesLength(const std::string& path, uint64_t* complete, uint64_t* size) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return Status::IoError("cannot read " + path);
  const auto end = static_cast<uint64_t>(in.tellg());
  *size = end;
  *complete = 0;
  uint64_t pos = end;
  char buf[4096];
  while (pos > 0) {
    const uint64_t n = std::min<uint64_t>(pos, sizeof buf);
    pos -= n;
    in.seekg(static_cast<std::streamoff>(pos));
    if (!in.read(buf, static_cast<std::streamsize>(n))) return Status::IoError("reading " + path);
    for (uint64_t i = n; i > 0; --i) {
      if (buf[i - 1] == '\n') {
        *complete = pos + i;
        return Status::Ok();
      }
    }
  }
  return Status::Ok();
}

// What the sidecar's topic view says of the group's partitions there.
struct GroupPositions {
  // Per active partition the sidecar holds: where delivery to `group` restarts, that is its
  // commit, or the oldest retained offset for a group that never committed there.
  std::map<uint32_t, uint64_t> start;
  // Partitions the group reads there through hash ranges: sealed ones and those held elsewhere
  // (a successor's pod reads its range of its ancestors). Their offsets come in order per hash
  // point but with gaps (other ranges go to other pods), so no position is checked for them.
  std::set<uint32_t> ranged;
};

Result<GroupPositions> FetchGroupPositions(client::ShoalClient& client, const std::string& group) {
  auto body = client.TopicView();
  if (!body.ok()) return body.status();
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  simdjson::dom::array parts;
  if (parser.parse(simdjson::padded_string(*body)).get(doc) || doc["partitions"].get(parts)) {
    return Status::Internal("malformed topic view");
  }
  GroupPositions out;
  for (auto p : parts) {
    uint64_t id = 0, start = 0, committed = 0;
    std::string_view state;
    if (p["id"].get(id)) continue;
    const bool held = p["start_offset"].get(start) == simdjson::SUCCESS;
    if (!held || (p["state"].get(state) == simdjson::SUCCESS && state == "sealed")) {
      out.ranged.insert(static_cast<uint32_t>(id));
      continue;
    }
    simdjson::dom::object groups;
    if (p["groups"].get(groups) == simdjson::SUCCESS &&
        groups[group]["committed"].get(committed) == simdjson::SUCCESS) {
      start = std::max(start, committed);
    }
    out.start[static_cast<uint32_t>(id)] = start;
  }
  return out;
}

}  // namespace

void BurnCpu(int64_t us) {
  if (us <= 0) return;
  const auto end = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
  while (std::chrono::steady_clock::now() < end) {
    // Busy work on purpose: the consumer's CPU use is what CPU-based scaling measures.
  }
}

Status GroupConsumer::OpenStream(std::map<uint32_t, uint64_t>* next) {
  const std::string& path = opts_.stream_to;
  std::error_code ec;
  if (opts_.append && std::filesystem::exists(path, ec)) {
    // A consumer killed in the middle of a write leaves a torn last line. Its events were not
    // committed (the commit follows the complete write), so the sidecar hands them out again:
    // cut the torn line off rather than glue the next line to it.
    uint64_t complete = 0, size = 0;
    SHOAL_RETURN_IF_ERROR(CompleteLinesLength(path, &complete, &size));
    if (complete < size && ::truncate(path.c_str(), static_cast<off_t>(complete)) != 0) {
      return Status::IoError("cutting the torn last line of " + path + ": " + std::strerror(errno));
    }
    // What the file holds was recorded already: skip it if it is handed out again (it was
    // written but not committed when the previous consumer was killed).
    auto seen = ReadSeenFile(path);
    if (!seen.ok()) return seen.status().Annotate("appending to " + path);
    for (const auto& e : *seen) {
      auto& nx = (*next)[e.partition];
      nx = std::max(nx, e.offset + 1);
      resume_recorded_.insert({e.partition, e.offset});
    }
  }
  int flags = O_WRONLY | O_CREAT | O_CLOEXEC | O_APPEND;
  if (!opts_.append) flags |= O_TRUNC;
  out_fd_ = ::open(path.c_str(), flags, 0644);
  if (out_fd_ < 0) return Status::IoError("cannot write " + path + ": " + std::strerror(errno));
  return Status::Ok();
}

Status GroupConsumer::WriteLines(const std::vector<SeenEvent>& batch) {
  if (batch.empty()) return Status::Ok();
  std::string text;
  for (const auto& e : batch) {
    text += SeenLine(e);
    text += '\n';
  }
  struct stat st {};
  const bool sized = ::fstat(out_fd_, &st) == 0;
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(out_fd_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = n < 0 ? std::strerror(errno) : "no progress";
      // Leave no partial line behind: these events are not committed and come again.
      if (sized && ::ftruncate(out_fd_, st.st_size) != 0) {
        return Status::IoError("writing " + opts_.stream_to + ": " + why +
                               "; and cutting the partial batch failed");
      }
      return Status::IoError("writing " + opts_.stream_to + ": " + why);
    }
    done += static_cast<size_t>(n);
  }
  // Written to the kernel: a kill -9 of this process no longer loses the lines, so committing
  // the batch is safe (the lines precede the commit, see the class comment).
  return Status::Ok();
}

std::chrono::microseconds ServiceTime(const std::vector<std::string_view>& keys,
                                      int64_t us_per_event, int64_t us_per_batch, int concurrency) {
  const size_t lanes = static_cast<size_t>(std::max(1, concurrency));
  std::vector<int64_t> per_lane(lanes, 0);
  int64_t busiest = 0;
  for (std::string_view k : keys) {
    busiest = std::max(busiest, ++per_lane[std::hash<std::string_view>{}(k) % lanes]);
  }
  return std::chrono::microseconds(std::max<int64_t>(0, us_per_batch) +
                                   busiest * std::max<int64_t>(0, us_per_event));
}

void GroupConsumer::Run() {
  const bool streaming = out_fd_ >= 0;
  client::ShoalClient client(opts_.target, opts_.topic, std::chrono::seconds(10), opts_.tls);
  // Per partition: the offset after the last one recorded.
  std::map<uint32_t, uint64_t> next = std::move(resume_next_);
  // Events recorded of partitions read through ranges (their offsets have gaps, so `next` cannot
  // tell a redelivery from a first delivery): each is recorded once.
  std::set<std::pair<uint32_t, uint64_t>> recorded = std::move(resume_recorded_);
  // Partitions the sidecar hands out through ranges (sealed ones, and ancestors held elsewhere),
  // and every partition whose kind is known.
  std::set<uint32_t> ranged, classified;
  // Streaming: per partition, the offset the group stands at (the next one it must be handed);
  // and the partitions waiting for the redelivery of a gap (reported once each).
  std::map<uint32_t, uint64_t> position;
  std::set<uint32_t> waiting;
  std::vector<wire::CommitOffset> pending;
  // Per partition: the group's commit as this consumer last had it accepted.
  std::map<uint32_t, uint64_t> committed;
  // Not streaming: the indices in seen_ of what this consumer recorded and has not had a commit
  // of accepted yet; `mark_committed` stamps them (SeenEvent::committed_ns) once one is.
  std::vector<size_t> uncommitted;
  auto mark_committed = [&](const std::vector<wire::CommitOffset>& offsets) {
    if (streaming || uncommitted.empty()) return;
    const uint64_t now = MonotonicNs();
    std::lock_guard<std::mutex> lock(mu_);
    std::erase_if(uncommitted, [&](size_t i) {
      SeenEvent& e = seen_[i];
      for (const auto& c : offsets) {
        if (c.partition.value() == e.partition && e.offset < c.offset.value()) {
          e.committed_ns = now;
          return true;
        }
      }
      return false;
    });
  };
  auto throttle_from = std::chrono::steady_clock::now();   // with a rate: when the next may come
  auto view_at = std::chrono::steady_clock::time_point{};  // the topic view last fetched
  simdjson::dom::parser parser;
  auto backoff = std::chrono::milliseconds(5);
  auto wait_a_little = [&] {
    std::this_thread::sleep_for(backoff);  // the sidecar is down or restarting
    backoff = std::min(backoff * 2, std::chrono::milliseconds(200));
  };
  // Learns which partitions are read through ranges and where the group stands in the others.
  auto look = [&](bool force) -> std::optional<GroupPositions> {
    const auto now = std::chrono::steady_clock::now();
    if (!force && now - view_at < std::chrono::milliseconds(500)) return std::nullopt;
    view_at = now;
    auto positions = FetchGroupPositions(client, opts_.group);
    if (!positions.ok()) return std::nullopt;
    ranged.insert(positions->ranged.begin(), positions->ranged.end());
    classified.insert(positions->ranged.begin(), positions->ranged.end());
    return std::move(positions).value();
  };
  // A commit of `pending` was accepted, or refused for good (the batch is unknown where it was
  // read): what was recorded stays recorded; if it comes again it is recognised below.
  auto accepted = [&] {
    mark_committed(pending);
    for (const auto& c : pending) {
      auto& was = committed[c.partition.value()];
      was = std::max(was, c.offset.value());
    }
    pending.clear();
  };
  auto refused = [&](const Status& st) {
    std::string offsets;
    for (const auto& c : pending) {
      offsets += (offsets.empty() ? "" : ",") + std::to_string(c.partition.value()) + "@" +
                 std::to_string(c.offset.value());
    }
    std::fprintf(stderr, "consume: %s group %s via %s: a commit (%s) was refused: %s\n",
                 UtcNow().c_str(), opts_.group.c_str(), opts_.target.c_str(), offsets.c_str(),
                 st.ToString().c_str());
    pending.clear();
  };
  auto refused_for_good = [](const Status& st) {
    return st.code() == Status::Code::kNotFound || st.code() == Status::Code::kInvalidArgument;
  };
  if (opts_.binary) client.set_format(wire::Format::kBinary);
  while (!stop_.load()) {
    if (!pending.empty() && !opts_.carry_commits) {
      // Commit what was recorded before taking more: after a sidecar restart the group resumes
      // from its commits, and offsets already recorded are skipped below.
      Status st = client.Commit(opts_.group, pending);
      if (st.ok()) {
        accepted();
      } else if (refused_for_good(st)) {
        refused(st);
      } else {
        wait_a_little();
        continue;
      }
    }
    const uint64_t asked_ns = MonotonicNs();
    // Carrying: the consume commits `pending` first and answers the commit's refusal, if any
    // (nothing consumed then); a consume that fails otherwise is retried with the same commit.
    const bool carrying = opts_.carry_commits && !pending.empty();
    auto got = client.Consume(opts_.group, opts_.max, opts_.wait_ms,
                              carrying ? pending : std::vector<wire::CommitOffset>{});
    if (!got.ok()) {
      if (carrying && refused_for_good(got.status())) {
        refused(got.status());
        continue;
      }
      wait_a_little();
      continue;
    }
    if (carrying) accepted();
    backoff = std::chrono::milliseconds(5);
    if (joined_ns_.load() == 0) joined_ns_ = MonotonicNs();
    // Streaming (a pod's long-running consumer, restarted after a crash): commits are cumulative
    // and the sidecar's delivery cursor is in memory, so the events an earlier consumer of the
    // group took and never committed lie behind the cursor, and committing what follows them
    // would commit them unseen. The sidecar hands a group nothing after an uncommitted batch
    // (one batch out per group and partition, until --redelivery-ms hands it out again); this
    // consumer checks it as well: a partition's events are taken only when they continue where
    // the group stands (its commit, from the topic view, then what this consumer took); after a
    // gap nothing of the partition is recorded or committed until the redelivery. Partitions
    // read through ranges are not checked so (their offsets have gaps by design).
    std::set<uint32_t> gapped;
    {
      bool unknown = false;
      for (const auto& e : *got) unknown = unknown || !classified.count(e.partition);
      std::optional<GroupPositions> positions;
      if (unknown) positions = look(true);
      for (const auto& e : *got) {
        if (classified.count(e.partition)) continue;
        if (!positions) {
          gapped.insert(e.partition);  // how it is read here is unknown: not this time
          continue;
        }
        classified.insert(e.partition);
        if (ranged.count(e.partition) || !streaming) continue;
        auto it = positions->start.find(e.partition);
        if (it == positions->start.end()) {
          classified.erase(e.partition);
          gapped.insert(e.partition);  // where the group stands is unknown: not this time
          continue;
        }
        position[e.partition] = it->second;
      }
    }
    std::vector<SeenEvent> batch;
    std::map<uint32_t, uint64_t> batch_next;  // per ranged partition, past its last event here
    for (const auto& e : *got) {
      if (gapped.count(e.partition)) continue;
      auto& nx = next[e.partition];
      // Out of order for a whole partition: maybe it was sealed since and is read through
      // ranges now (its offsets then have gaps, and another range may start lower).
      if (!ranged.count(e.partition) &&
          (e.offset < nx || (streaming && e.offset > position[e.partition]))) {
        look(false);
      }
      if (streaming && !ranged.count(e.partition)) {
        uint64_t& pos = position[e.partition];
        if (e.offset > pos) {
          gapped.insert(e.partition);
          if (waiting.insert(e.partition).second) {
            std::fprintf(stderr,
                         "consume: partition %u: offsets %llu..%llu were taken by an earlier "
                         "consumer of group %s and not committed; waiting for their "
                         "redelivery\n",
                         e.partition, static_cast<unsigned long long>(pos),
                         static_cast<unsigned long long>(e.offset - 1), opts_.group.c_str());
          }
          continue;
        }
        waiting.erase(e.partition);
        pos = std::max(pos, e.offset + 1);
      }
      if (ranged.count(e.partition)) {
        auto& bn = batch_next[e.partition];
        bn = std::max(bn, e.offset + 1);
        // Recorded before (a redelivery of what was not committed): once only.
        if (!recorded.insert({e.partition, e.offset}).second) continue;
      } else if (e.offset < nx) {
        // Handed out again. Below what the group had committed, the broker gave out twice what
        // was consumed: recorded again, so the verifier counts it. Otherwise it is a redelivery
        // of what was recorded and not committed yet (a restarted sidecar): skipped.
        const auto c = committed.find(e.partition);
        if (c == committed.end() || e.offset >= c->second) continue;
      }
      nx = std::max(nx, e.offset + 1);
      BurnCpu(opts_.cpu_us_per_event);
      simdjson::dom::element v;
      std::string_view p, k;
      uint64_t n = 0;
      if (parser.parse(e.value).get(v) || v["p"].get(p) || v["k"].get(k) || v["n"].get(n) ||
          !e.seq) {
        continue;  // not a load generator's event
      }
      batch.push_back({std::string(p), std::string(k), *e.seq, n, MonotonicNs(), e.partition,
                       e.offset, /*committed_ns=*/0, asked_ns});
    }
    if ((opts_.service_us_per_event > 0 || opts_.service_us_per_batch > 0) && !got->empty()) {
      // The service time of the batch, waited in short sleeps so that Stop is not held up.
      std::vector<std::string_view> keys;
      keys.reserve(batch.size());
      for (const auto& e : batch) keys.push_back(e.key);
      const auto until = std::chrono::steady_clock::now() +
                         ServiceTime(keys, opts_.service_us_per_event, opts_.service_us_per_batch,
                                     opts_.concurrency);
      while (!stop_.load() && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
            until - std::chrono::steady_clock::now(), std::chrono::milliseconds(20)));
      }
    }
    if (streaming) {
      if (auto st = WriteLines(batch); !st.ok()) {
        // Nothing of this batch is committed; a restarted consumer gets it again.
        std::lock_guard<std::mutex> lock(mu_);
        status_ = st;
        committed_all_ = false;
        return;
      }
    }
    std::map<uint32_t, uint64_t> touched;
    for (const auto& e : *got) {
      if (gapped.count(e.partition)) continue;
      // Through ranges, a commit means "everything of the batch handed to us", up to its end.
      touched[e.partition] = ranged.count(e.partition) ? batch_next[e.partition]
                             : streaming               ? position[e.partition]
                                                       : next[e.partition];
    }
    for (auto [p, o] : touched) pending.push_back({PartitionId(p), Offset(o)});
    seen_count_.fetch_add(batch.size());
    if (!streaming) {
      std::lock_guard<std::mutex> lock(mu_);
      for (size_t i = 0; i < batch.size(); ++i) uncommitted.push_back(seen_.size() + i);
      seen_.insert(seen_.end(), batch.begin(), batch.end());
    }
    if (rate_.load() > 0 && !batch.empty()) {
      // A slow consumer: the batch's share of time at the rate, in short sleeps so that a new
      // rate (SetRate) or Stop takes effect at once.
      const auto now = std::chrono::steady_clock::now();
      throttle_from = std::max(throttle_from, now - std::chrono::seconds(1)) +
                      std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                          std::chrono::duration<double>(batch.size() / rate_.load()));
      while (!stop_.load() && rate_.load() > 0 &&
             std::chrono::steady_clock::now() < throttle_from) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the consumer's rate
      }
    }
  }
  if (!pending.empty()) {
    // Stopping: the last batch is recorded; commit it so that what was recorded is exactly what
    // the group committed. A sidecar that does not answer in time leaves it uncommitted:
    // handed out again later, a duplicate, never a loss (committed_all says so).
    const auto deadline = std::chrono::steady_clock::now() + opts_.stop_commit_timeout;
    bool ok = false;
    while (!(ok = client.Commit(opts_.group, pending).ok()) &&
           std::chrono::steady_clock::now() < deadline) {
      wait_a_little();
    }
    if (ok) mark_committed(pending);
    committed_all_ = ok;
  }
}

}  // namespace shoal::harness
