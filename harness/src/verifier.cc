#include "shoal/harness/verifier.h"

#include <fcntl.h>
#include <simdjson.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "shoal/common/json.h"

namespace shoal::harness {

namespace {
struct IdHash {
  size_t operator()(const std::pair<std::string, uint64_t>& k) const {
    return std::hash<std::string>{}(k.first) ^ (k.second * 0x9E3779B97F4A7C15ull);
  }
};
}  // namespace

VerifyReport Verify(const std::vector<AckedEvent>& acked, std::vector<SeenEvent> seen,
                    uint64_t joined_ns, uint64_t origin_ns) {
  // Seconds from origin_ns, for the examples.
  const auto at = [origin_ns](uint64_t ns) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f s",
                  ns >= origin_ns ? static_cast<double>(ns - origin_ns) / 1e9 : 0.0);
    return std::string(buf);
  };
  VerifyReport r;
  r.acked = acked.size();
  r.seen = seen.size();
  std::sort(seen.begin(), seen.end(),
            [](const SeenEvent& a, const SeenEvent& b) { return a.observed_ns < b.observed_ns; });
  std::unordered_set<std::pair<std::string, uint64_t>, IdHash> acked_ids;
  for (const auto& a : acked) acked_ids.insert({a.producer, a.seq});
  std::unordered_map<std::pair<std::string, uint64_t>, int, IdHash> times_seen;
  // Per event: the earliest time a commit of one of its sightings so far was accepted (0: none).
  std::unordered_map<std::pair<std::string, uint64_t>, uint64_t, IdHash> committed_at;
  // Per event: its first sighting.
  struct Sighting {
    uint32_t partition = 0;
    uint64_t offset = 0;
    uint64_t observed_ns = 0;
  };
  std::unordered_map<std::pair<std::string, uint64_t>, Sighting, IdHash> first_at;
  std::map<std::pair<std::string, std::string>, uint64_t> last_n;
  // The smallest n seen per (producer, key): a late group's unseen events before it were retired
  // before the group joined.
  std::map<std::pair<std::string, std::string>, uint64_t> first_n;
  for (const auto& e : seen) {
    const auto id = std::make_pair(e.producer, e.seq);
    uint64_t& committed = committed_at[id];
    // Handed out before the commit was accepted (the consume was sent before): a redelivery,
    // however late its answer came.
    const bool before_any_commit =
        committed == 0 || committed > (e.asked_ns ? e.asked_ns : e.observed_ns);
    if (e.committed_ns && (committed == 0 || e.committed_ns < committed))
      committed = e.committed_ns;
    if (++times_seen[id] > 1) {
      ++r.duplicated;
      if (before_any_commit) ++r.redelivered_uncommitted;
      if (r.examples.size() < 10) {
        const Sighting& first = first_at[id];
        std::string times;
        if (origin_ns) {
          times = "; first seen at " + at(first.observed_ns) +
                  (committed ? ", a commit covering it accepted at " + at(committed) : "") +
                  ", seen again at " + at(e.observed_ns);
        }
        r.examples.push_back(std::string(before_any_commit ? "redelivered" : "duplicated") +
                             ": producer " + e.producer + " seq " + std::to_string(e.seq) +
                             " (partition " + std::to_string(e.partition) + " offset " +
                             std::to_string(e.offset) + "; first seen at partition " +
                             std::to_string(first.partition) + " offset " +
                             std::to_string(first.offset) + times + ")");
      }
      continue;
    }
    first_at[id] = {e.partition, e.offset, e.observed_ns};
    if (!acked_ids.count(id)) ++r.unacked_seen;
    auto [first, fresh] = first_n.try_emplace({e.producer, e.key}, e.n);
    if (!fresh) first->second = std::min(first->second, e.n);
    auto& last = last_n[{e.producer, e.key}];
    if (e.n <= last) {
      ++r.reordered;
      if (r.examples.size() < 10) {
        r.examples.push_back("reordered: producer " + e.producer + " key " + e.key +
                             " saw n=" + std::to_string(e.n) + " after n=" + std::to_string(last) +
                             " (partition " + std::to_string(e.partition) + " offset " +
                             std::to_string(e.offset) + ")");
      }
    } else {
      last = e.n;
    }
  }
  for (const auto& a : acked) {
    if (!times_seen.count({a.producer, a.seq})) {
      if (joined_ns > 0 && a.acked_ns < joined_ns) {
        auto it = first_n.find({a.producer, a.key});
        if (it == first_n.end() || a.n < it->second) {
          ++r.before_join;  // gone before the group existed: never its to see
          continue;
        }
      }
      ++r.lost;
      if (r.examples.size() < 10) {
        r.examples.push_back("lost: producer " + a.producer + " seq " + std::to_string(a.seq) +
                             " key " + a.key + " n=" + std::to_string(a.n));
      }
    }
  }
  return r;
}

std::string VerifyReport::ToJson() const {
  std::string out = "{\"acked\":" + std::to_string(acked) + ",\"seen\":" + std::to_string(seen) +
                    ",\"lost\":" + std::to_string(lost) +
                    ",\"reordered\":" + std::to_string(reordered) +
                    ",\"duplicated\":" + std::to_string(duplicated) +
                    ",\"redelivered_uncommitted\":" + std::to_string(redelivered_uncommitted) +
                    ",\"unacked_seen\":" + std::to_string(unacked_seen) +
                    ",\"before_join\":" + std::to_string(before_join) + ",\"examples\":[";
  for (size_t i = 0; i < examples.size(); ++i) {
    if (i) out += ',';
    json::AppendString(out, examples[i]);
  }
  return out + "]}";
}

std::string VerifyReport::ToText() const {
  std::string out = "acked " + std::to_string(acked) + ", seen " + std::to_string(seen) +
                    ": lost " + std::to_string(lost) + ", reordered " + std::to_string(reordered) +
                    ", duplicated " + std::to_string(duplicated) + " (appended but unacked " +
                    std::to_string(unacked_seen) + ")";
  if (before_join)
    out += ", acked before the group joined and never its " + std::to_string(before_join);
  for (const auto& e : examples) out += "\n  " + e;
  return out;
}

std::string AckedLine(const AckedEvent& e) {
  std::string out = "{\"p\":";
  json::AppendString(out, e.producer);
  out += ",\"k\":";
  json::AppendString(out, e.key);
  out += ",\"s\":" + std::to_string(e.seq) + ",\"n\":" + std::to_string(e.n) + "}";
  return out;
}

std::string SeenLine(const SeenEvent& e) {
  std::string out = "{\"p\":";
  json::AppendString(out, e.producer);
  out += ",\"k\":";
  json::AppendString(out, e.key);
  out += ",\"s\":" + std::to_string(e.seq) + ",\"n\":" + std::to_string(e.n) +
         ",\"t\":" + std::to_string(e.observed_ns) + ",\"part\":" + std::to_string(e.partition) +
         ",\"off\":" + std::to_string(e.offset) + "}";
  return out;
}

namespace {
template <typename T, typename Fn>
Result<std::vector<T>> ReadLines(const std::string& path, Fn parse) {
  std::ifstream in(path);
  if (!in) return Status::NotFound("cannot open " + path);
  std::vector<T> out;
  simdjson::dom::parser parser;
  std::string line;
  size_t no = 0;
  while (std::getline(in, line)) {
    ++no;
    if (line.empty()) continue;
    simdjson::dom::element doc;
    T e;
    if (parser.parse(line).get(doc) || !parse(doc, e)) {
      // A final line with no newline is a writer killed in the middle of it (a consumer's
      // kill -9); it was not committed, so its events come again. Skip it.
      if (in.eof()) break;
      return Status::InvalidArgument(path + ":" + std::to_string(no) + ": not an event line");
    }
    out.push_back(std::move(e));
  }
  return out;
}
}  // namespace

Result<std::vector<AckedEvent>> ReadAckedFile(const std::string& path) {
  return ReadLines<AckedEvent>(path, [](simdjson::dom::element d, AckedEvent& e) {
    std::string_view p, k;
    if (d["p"].get(p) || d["k"].get(k) || d["s"].get(e.seq) || d["n"].get(e.n)) return false;
    e.producer = std::string(p);
    e.key = std::string(k);
    return true;
  });
}

Result<std::vector<SeenEvent>> ReadSeenFile(const std::string& path) {
  return ReadLines<SeenEvent>(path, [](simdjson::dom::element d, SeenEvent& e) {
    std::string_view p, k;
    uint64_t part = 0;
    if (d["p"].get(p) || d["k"].get(k) || d["s"].get(e.seq) || d["n"].get(e.n) ||
        d["t"].get(e.observed_ns) || d["part"].get(part) || d["off"].get(e.offset)) {
      return false;
    }
    e.producer = std::string(p);
    e.key = std::string(k);
    e.partition = static_cast<uint32_t>(part);
    return true;
  });
}

Result<std::vector<SeenEvent>> ReadSeenDir(const std::string& dir) {
  std::vector<SeenEvent> seen;
  std::error_code ec;
  for (const auto& f : std::filesystem::directory_iterator(dir, ec)) {
    auto part = ReadSeenFile(f.path().string());
    if (!part.ok()) return part.status();
    seen.insert(seen.end(), part->begin(), part->end());
  }
  return seen;
}

uint64_t CountSeenLines(const std::string& dir) {
  uint64_t lines = 0;
  std::error_code ec;
  for (const auto& f : std::filesystem::directory_iterator(dir, ec)) {
    const int fd = ::open(f.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    char buf[1 << 16];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) {
      for (ssize_t i = 0; i < n; ++i) lines += buf[i] == '\n' ? 1 : 0;
    }
    ::close(fd);
  }
  return lines;
}

}  // namespace shoal::harness
