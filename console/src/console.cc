#include "shoal/console/console.h"

#include <simdjson.h>

#include <algorithm>
#include <set>
#include <utility>

#include "shoal/common/hash.h"
#include "shoal/common/json.h"
#include "shoal/control/admin_partitions.h"

namespace shoal::console {

namespace {

constexpr size_t kMaxBrowse = 1000;
constexpr size_t kKeyEventsMax = 200;
constexpr int kKeyCallsPerPartition = 40;  // 40 x 50,000 events scanned per partition at most
constexpr size_t kKeyAnswerBytes = 4 << 20;  // a key's events answered at most
constexpr auto kKeySearchTime = std::chrono::seconds(10);
// Browses at once: each holds a thread of the port's pool while it reads from sidecars (the
// operator's pool also carries its Kubernetes calls); more are answered 503.
constexpr int kBrowsesAtOnce = 2;

// The events of a browse answer ({"...","events":[...]}): the text inside the brackets.
std::string_view EventsOf(std::string_view answer) {
  const auto open = answer.find("\"events\":[");
  if (open == std::string_view::npos || answer.size() < 2) return {};
  const size_t from = open + 10;
  const size_t to = answer.rfind(']');
  return to == std::string_view::npos || to < from ? std::string_view{}
                                                   : answer.substr(from, to - from);
}

// The head of a browse answer: where to go on, the end, and how many events it holds.
struct BrowseHead {
  uint64_t next = 0;
  uint64_t end = 0;
  size_t count = 0;
};
Result<BrowseHead> HeadOf(const std::string& answer) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  simdjson::dom::array events;
  BrowseHead h;
  if (parser.parse(simdjson::padded_string(answer)).get(doc) || doc["next"].get(h.next) ||
      doc["end_offset"].get(h.end) || doc["events"].get(events)) {
    return Status::Unavailable("a sidecar answered a browse with something else");
  }
  h.count = events.size();
  return h;
}

Result<uint64_t> ParseNumber(const std::map<std::string, std::string>& q, const char* name,
                             uint64_t fallback, uint64_t max) {
  const auto it = q.find(name);
  if (it == q.end() || it->second.empty()) return fallback;
  uint64_t v = 0;
  for (char c : it->second) {
    if (c < '0' || c > '9' || v > (UINT64_MAX - 9) / 10) {
      return Status::InvalidArgument(std::string(name) + " must be a whole number");
    }
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v > max) {
    return Status::InvalidArgument(std::string(name) + " must be at most " + std::to_string(max));
  }
  return v;
}

std::string UrlEncode(std::string_view s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

// A decision that changed nothing (kinds [] or ["hold"]).
bool IsHold(const simdjson::dom::array& kinds) {
  for (auto k : kinds) {
    std::string_view kind;
    if (!k.get(kind) && kind != "hold") return false;
  }
  return true;
}

}  // namespace

Console::Console(ConsoleOptions options, client::AdminPlane& admin, Clock& clock)
    : opts_(std::move(options)), admin_(admin), clock_(clock) {}

Console::~Console() { Stop(); }

void Console::Start() {
  if (thread_.joinable()) return;
  stop_.store(false);
  thread_ = std::thread([this] {
    while (!stop_.load()) {
      const auto next = std::chrono::steady_clock::now() + opts_.sample_every;
      Sample();
      while (!stop_.load() && std::chrono::steady_clock::now() < next) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the sampling period
      }
    }
  });
}

void Console::Stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

std::string Console::AdminOf(const PartitionMap& map, const std::string& pod) const {
  const PeerAddress* p = map.Peer(PodName(pod));
  if (p) return p->admin;
  if (!map.peers().empty()) return "";  // a pod the map does not name: nobody to ask
  std::lock_guard<std::mutex> lock(mu_);
  return map_from_;  // a sidecar on its own: the map names no peers
}

void Console::Sample() {
  // The newest map among the sidecars the last map named, else the seeds.
  std::vector<std::string> where;
  std::string map_from_copy;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [pod, peer] : map_.peers()) where.push_back(peer.admin);
    map_from_copy = map_from_;
  }
  std::optional<PartitionMap> newest;
  std::string newest_json;
  std::string newest_from;
  std::set<std::string> tried;
  auto read_maps = [&](const std::vector<std::string>& addresses) {
    for (const auto& a : addresses) {
      if (stop_.load() || !tried.insert(a).second) continue;
      auto body = admin_.Get(a, "/v1/admin/map", true);
      if (!body.ok()) continue;
      auto m = PartitionMap::FromJson(*body);
      if (!m.ok() || m->epoch().value() == 0) continue;
      if (!opts_.topic.empty() && m->topic() != opts_.topic) continue;
      if (!newest || m->epoch() > newest->epoch()) {
        newest = std::move(*m);
        newest_json = std::move(*body);
        newest_from = a;
      }
    }
  };
  read_maps(where);
  if (!newest && opts_.seeds) read_maps(opts_.seeds());
  if (!newest && !map_from_copy.empty()) read_maps({map_from_copy});
  {
    // Only a newer map (or the same epoch) is taken: a lagging sidecar's older one would show
    // the newer map's partitions as retired.
    std::lock_guard<std::mutex> lock(mu_);
    if (newest && newest->epoch() < map_.epoch()) newest.reset();
  }
  const std::string status = opts_.status ? opts_.status() : "null";
  const int64_t now = clock_.NowMs();

  // Each pod's partitions; arrival from the `appended` counters, lag per group.
  std::map<std::string, std::string> pods;
  std::map<std::pair<std::string, uint32_t>, Counted> appended;
  double arrival = 0;  // events/s, summed over the partitions
  std::map<std::string, uint64_t> lag;
  if (newest) {
    // The pods the map names; a sidecar started on its own names none: the one that answered.
    std::map<std::string, std::string> to_read;
    for (const auto& [pod, peer] : newest->peers()) to_read[pod] = peer.admin;
    if (to_read.empty()) {
      for (const auto& p : newest->partitions()) to_read[p.owner.value()] = newest_from;
    }
    for (const auto& [pod, address] : to_read) {
      if (stop_.load()) return;
      std::string entry = "{\"admin\":";
      json::AppendString(entry, address);
      auto body = admin_.Get(address, "/v1/admin/partitions", true);
      auto report = body.ok() ? control::ParseAdminPartitions(*body)
                              : Result<control::AdminPartitionsReport>(body.status());
      if (!report.ok()) {
        entry += ",\"error\":";
        json::AppendString(entry, report.status().message());
        entry += '}';
        pods[pod] = std::move(entry);
        // Its counters stay as last read, with when: when it answers again, what it appended
        // meanwhile is a rate over all that time, not one sample's arrival.
        std::lock_guard<std::mutex> lock(mu_);
        for (const auto& [k, n] : appended_) {
          if (k.first == pod) appended[k] = n;
        }
        continue;
      }
      entry += ",\"partitions\":";
      entry += *body;
      entry += '}';
      pods[pod] = std::move(entry);
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& p : report->partitions) {
        const auto k = std::make_pair(pod, p.id.value());
        appended[k] = {p.appended, now};
        // Appends since this partition was read last, over the time since; a partition new since
        // the last sample (a change made it) or on a sidecar that restarted: all its appends,
        // over the time since the last sample. Nothing on the first sample.
        if (auto was = appended_.find(k); was != appended_.end() && p.appended >= was->second.n) {
          if (now > was->second.at_ms) {
            arrival += (p.appended - was->second.n) * 1000.0 / (now - was->second.at_ms);
          }
        } else if (!appended_.empty() && now > last_sample_ms_) {
          arrival += p.appended * 1000.0 / (now - last_sample_ms_);
        }
        // A group's lag: what it has not committed of what is retained (the partition's own
        // owner answers for it; a sealed parent's remaining events count until its groups are
        // through it).
        for (const auto& g : report->groups) {
          const auto c = p.commits.find(g);
          const uint64_t at = std::max(c == p.commits.end() ? 0 : c->second, p.start_offset);
          lag[g] += p.end_offset > at ? p.end_offset - at : 0;
        }
      }
    }
  }

  std::lock_guard<std::mutex> lock(mu_);
  if (newest) {
    std::string s = "{\"at_ms\":";
    json::AppendInt(s, now);
    s += ",\"arrival\":";
    json::AppendDouble(s, arrival);
    s += ",\"partitions\":";
    json::AppendUint(s, newest->active_count());
    s += ",\"pods\":";
    json::AppendUint(s, newest->peers().size());
    s += ",\"lag\":{";
    bool first = true;
    for (const auto& [g, n] : lag) {
      if (!first) s += ',';
      first = false;
      json::AppendString(s, g);
      s += ':';
      json::AppendUint(s, n);
    }
    s += "}}";
    history_.push_back(std::move(s));
    while (history_.size() > opts_.history) history_.pop_front();
    for (const auto& p : newest->partitions()) {
      std::string o = "{\"id\":";
      json::AppendUint(o, p.id.value());
      o += ",\"lo\":";
      json::AppendUint(o, p.range.lo);
      o += ",\"hi\":";
      json::AppendUint(o, p.range.hi);
      o += ",\"owner\":";
      json::AppendString(o, p.owner.value());
      o += ",\"parents\":[";
      for (size_t i = 0; i < p.parents.size(); ++i) {
        if (i) o += ',';
        json::AppendUint(o, p.parents[i].value());
      }
      o += "],\"end_offset\":";
      json::AppendUint(o, p.end_offset);
      o += '}';
      seen_[p.id.value()] = std::move(o);
    }
    while (seen_.size() > kRemembered) seen_.erase(seen_.begin());
    map_ = std::move(*newest);
    map_from_ = std::move(newest_from);
    map_json_ = std::move(newest_json);
    pods_json_ = std::move(pods);
    appended_ = std::move(appended);
    last_sample_ms_ = now;
  }
  status_json_ = status.empty() ? "null" : status;
  // A new decision of the control loop, kept with its reason.
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  simdjson::dom::object d;
  simdjson::dom::array kinds;
  int64_t at = 0;
  if (status_json_ != "null" && !parser.parse(simdjson::padded_string(status_json_)).get(doc) &&
      !doc["last_decision"].get(d) && !d["at_ms"].get(at) && at > last_decision_at_ &&
      !d["kinds"].get(kinds) && !IsHold(kinds)) {
    last_decision_at_ = at;
    decisions_.push_back(simdjson::minify(d));
    while (decisions_.size() > opts_.decisions) decisions_.pop_front();
  }
}

std::string Console::StateJson() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string o = "{\"topic\":";
  json::AppendString(o, map_.epoch().value() ? map_.topic() : opts_.topic);
  o += ",\"at_ms\":";
  json::AppendInt(o, last_sample_ms_);
  o += ",\"epoch\":";
  json::AppendUint(o, map_.epoch().value());
  o += ",\"map\":";
  o += map_json_.empty() ? "null" : map_json_;
  o += ",\"pods\":{";
  bool first = true;
  for (const auto& [pod, entry] : pods_json_) {
    if (!first) o += ',';
    first = false;
    json::AppendString(o, pod);
    o += ':';
    o += entry;
  }
  o += "},\"retired\":[";
  first = true;
  for (const auto& [id, p] : seen_) {
    if (map_.Find(PartitionId(id))) continue;
    if (!first) o += ',';
    first = false;
    o += p;
  }
  o += "],\"status\":";
  o += status_json_;
  o += ",\"history\":[";
  first = true;
  for (const auto& s : history_) {
    if (!first) o += ',';
    first = false;
    o += s;
  }
  o += "],\"decisions\":[";
  first = true;
  for (const auto& s : decisions_) {
    if (!first) o += ',';
    first = false;
    o += s;
  }
  o += "]}";
  return o;
}

Result<std::string> Console::EventsJson(const std::map<std::string, std::string>& query) const {
  if (browsing_.fetch_add(1) >= kBrowsesAtOnce) {
    browsing_.fetch_sub(1);
    return Status::Unavailable("the console is browsing for " + std::to_string(kBrowsesAtOnce) +
                               " requests already; retry");
  }
  struct Done {
    std::atomic<int>& n;
    ~Done() { n.fetch_sub(1); }
  } done{browsing_};
  PartitionMap map;
  {
    std::lock_guard<std::mutex> lock(mu_);
    map = map_;
  }
  if (map.epoch().value() == 0) return Status::Unavailable("no partition map read yet");
  auto max = ParseNumber(query, "max", 100, kMaxBrowse);
  if (!max.ok()) return max.status();
  if (*max == 0) return Status::InvalidArgument("max must be at least 1");
  if (const auto k = query.find("key"); k != query.end()) {
    if (k->second.empty() || k->second.size() > 4096) {
      return Status::InvalidArgument("key must be 1 to 4,096 bytes");
    }
    // Every partition whose range holds the key's hash point: the lineage of that point, each
    // parent before its successors (ids grow with each change).
    const uint32_t h = KeyHash(k->second);
    std::vector<const PartitionInfo*> line;
    for (const auto& p : map.partitions()) {
      if (p.range.lo <= h && h < p.range.hi) line.push_back(&p);
    }
    std::sort(line.begin(), line.end(),
              [](const PartitionInfo* a, const PartitionInfo* b) { return a->id < b->id; });
    const size_t want = std::min<uint64_t>(*max, kKeyEventsMax);
    const auto deadline = std::chrono::steady_clock::now() + kKeySearchTime;
    std::string events;
    size_t found = 0;
    bool truncated = false;
    std::string parts;
    for (const PartitionInfo* p : line) {
      const std::string admin = AdminOf(map, p->owner.value());
      uint64_t from = 0;
      uint64_t end = 0;
      std::string error;
      for (int call = 0; call < kKeyCallsPerPartition && found < want; ++call) {
        if (events.size() >= kKeyAnswerBytes || std::chrono::steady_clock::now() >= deadline) {
          truncated = true;
          break;
        }
        auto answer =
            admin_.Get(admin,
                       "/v1/admin/partitions/" + std::to_string(p->id.value()) +
                           "/events?key=" + UrlEncode(k->second) + "&from=" + std::to_string(from) +
                           "&max=" + std::to_string(want - found),
                       true);
        if (!answer.ok()) {
          error = answer.status().message();
          break;
        }
        auto head = HeadOf(*answer);
        if (!head.ok()) {
          error = head.status().message();
          break;
        }
        const std::string_view ev = EventsOf(*answer);
        if (head->count > 0) {
          if (!events.empty()) events += ',';
          events += ev;
          found += head->count;
        }
        from = head->next;
        end = head->end;
        if (from >= end) break;
      }
      if (!parts.empty()) parts += ',';
      parts += "{\"id\":";
      json::AppendUint(parts, p->id.value());
      parts += ",\"state\":";
      json::AppendString(parts, p->state == PartitionState::kActive ? "active" : "sealed");
      parts += ",\"owner\":";
      json::AppendString(parts, p->owner.value());
      parts += ",\"scanned_to\":";
      json::AppendUint(parts, from);
      parts += ",\"end_offset\":";
      json::AppendUint(parts, end);
      if (!error.empty()) {
        parts += ",\"error\":";
        json::AppendString(parts, error);
      }
      parts += '}';
    }
    std::string o = "{\"key\":";
    json::AppendString(o, k->second);
    o += ",\"hash\":";
    json::AppendUint(o, h);
    o += ",\"truncated\":";
    o += truncated ? "true" : "false";
    o += ",\"partitions\":[" + parts + "],\"events\":[" + events + "]}";
    return o;
  }
  auto id = ParseNumber(query, "partition", UINT64_MAX, UINT32_MAX);
  if (!id.ok()) return id.status();
  if (*id == UINT64_MAX) return Status::InvalidArgument("name a partition or a key");
  auto from = ParseNumber(query, "from", 0, UINT64_MAX - 1);
  if (!from.ok()) return from.status();
  const PartitionInfo* p = map.Find(PartitionId(static_cast<uint32_t>(*id)));
  if (!p) {
    return Status::NotFound("partition " + std::to_string(*id) + " is not in the map of epoch " +
                            std::to_string(map.epoch().value()));
  }
  auto answer = admin_.Get(AdminOf(map, p->owner.value()),
                           "/v1/admin/partitions/" + std::to_string(*id) + "/events?from=" +
                               std::to_string(*from) + "&max=" + std::to_string(*max),
                           true);
  if (!answer.ok()) return answer.status();
  if (answer->size() < 2 || answer->front() != '{') {
    return Status::Unavailable("partition " + std::to_string(*id) + "'s owner answered no object");
  }
  // The owner's answer, with where it came from.
  std::string o = "{\"owner\":";
  json::AppendString(o, p->owner.value());
  o += ",\"state\":";
  json::AppendString(o, p->state == PartitionState::kActive ? "active" : "sealed");
  o += ",";
  o += std::string_view(*answer).substr(1);
  return o;
}

}  // namespace shoal::console
