#include "shoal/common/wire.h"

#include "shoal/common/json.h"

namespace shoal::wire {

namespace {

std::string At(size_t i) { return "events[" + std::to_string(i) + "]"; }

Status ParseError(std::string_view what, simdjson::error_code err) {
  return Status::InvalidArgument(std::string(what) + ": " + simdjson::error_message(err));
}

}  // namespace

Status ProduceRequestParser::Parse(std::string_view body, const Limits& limits) {
  events_.clear();
  arena_.clear();
  simdjson::dom::element doc;
  if (auto err = parser_.parse(body.data(), body.size(), true).get(doc); err) {
    return ParseError("body is not valid JSON", err);
  }
  simdjson::dom::object root;
  if (doc.get(root)) return Status::InvalidArgument("body must be a JSON object with \"events\"");
  simdjson::dom::array events;
  bool has_events = false;
  for (auto field : root) {
    if (field.key == "events") {
      if (field.value.get(events)) return Status::InvalidArgument("\"events\" must be an array");
      has_events = true;
    } else {
      return Status::InvalidArgument("unknown field \"" + std::string(field.key) +
                                     "\" in body; expected {\"events\": [...]}");
    }
  }
  if (!has_events || events.size() == 0) {
    return Status::InvalidArgument("\"events\" is missing or empty; send at least one event");
  }
  if (events.size() > limits.max_events) {
    return Status::TooLarge("a batch holds at most " + std::to_string(limits.max_events) +
                            " events");
  }
  // Values are minified into one arena first and viewed afterwards, so the arena never moves
  // while views into it exist.
  struct Span {
    size_t pos, len;
  };
  std::vector<Span> spans;
  spans.reserve(events.size());
  events_.reserve(events.size());
  size_t i = 0;
  for (auto el : events) {
    simdjson::dom::object ev;
    if (el.get(ev)) return Status::InvalidArgument(At(i) + " must be an object");
    ProduceEvent out;
    bool has_key = false, has_value = false;
    Span span{arena_.size(), 0};
    for (auto field : ev) {
      if (field.key == "key") {
        if (field.value.get(out.key)) {
          return Status::InvalidArgument(At(i) + ".key must be a string");
        }
        has_key = true;
      } else if (field.key == "value") {
        builder_.clear();
        builder_.append(field.value);
        std::string_view text = builder_.str();
        if (text.size() > limits.max_value_bytes) {
          return Status::TooLarge(At(i) + ".value is " + std::to_string(text.size()) +
                                  " bytes; the limit is " + std::to_string(limits.max_value_bytes));
        }
        span = {arena_.size(), text.size()};
        arena_.append(text);
        has_value = true;
      } else if (field.key == "producer") {
        if (field.value.get(out.producer)) {
          return Status::InvalidArgument(At(i) + ".producer must be a string");
        }
        if (out.producer.empty() || out.producer.size() > limits.max_producer_bytes) {
          return Status::InvalidArgument(At(i) + ".producer must be 1.." +
                                         std::to_string(limits.max_producer_bytes) + " bytes");
        }
      } else if (field.key == "seq") {
        uint64_t seq = 0;
        if (field.value.get(seq)) {
          return Status::InvalidArgument(At(i) + ".seq must be a non-negative integer");
        }
        out.seq = seq;
      } else {
        return Status::InvalidArgument(At(i) + " has unknown field \"" + std::string(field.key) +
                                       "\"; fields are key, value, producer, seq");
      }
    }
    if (!has_key || out.key.empty()) {
      return Status::InvalidArgument(At(i) + ".key is missing or empty; every event needs a key");
    }
    if (out.key.size() > limits.max_key_bytes) {
      return Status::TooLarge(At(i) + ".key is " + std::to_string(out.key.size()) +
                              " bytes; the limit is " + std::to_string(limits.max_key_bytes));
    }
    if (out.producer.empty() != !out.seq.has_value()) {
      return Status::InvalidArgument(At(i) + " has " + (out.seq ? "seq" : "producer") +
                                     " without " + (out.seq ? "producer" : "seq") +
                                     "; idempotent events need both");
    }
    if (!has_value) {
      span = {arena_.size(), 4};
      arena_.append("null");
    }
    spans.push_back(span);
    events_.push_back(out);
    ++i;
  }
  for (size_t j = 0; j < events_.size(); ++j) {
    events_[j].value = std::string_view(arena_).substr(spans[j].pos, spans[j].len);
  }
  return Status::Ok();
}

Status ValidateGroup(std::string_view group) {
  if (group.empty() || group.size() > 200) {
    return Status::InvalidArgument("group must be 1..200 characters");
  }
  for (char c : group) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-' || c == ':';
    if (!ok) return Status::InvalidArgument("group may hold only letters, digits and . _ - :");
  }
  return Status::Ok();
}

Result<CommitRequest> ParseCommitRequest(std::string_view body) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (auto err = parser.parse(body.data(), body.size(), true).get(doc); err) {
    return ParseError("body is not valid JSON", err);
  }
  simdjson::dom::object root;
  if (doc.get(root)) return Status::InvalidArgument("body must be a JSON object");
  CommitRequest req;
  bool has_group = false, has_offsets = false;
  for (auto field : root) {
    if (field.key == "group") {
      std::string_view g;
      if (field.value.get(g)) return Status::InvalidArgument("\"group\" must be a string");
      req.group = std::string(g);
      has_group = true;
    } else if (field.key == "offsets") {
      simdjson::dom::array arr;
      if (field.value.get(arr)) return Status::InvalidArgument("\"offsets\" must be an array");
      size_t i = 0;
      for (auto el : arr) {
        uint64_t p = 0, o = 0;
        if (el["partition"].get(p) || el["offset"].get(o) || p > UINT32_MAX) {
          return Status::InvalidArgument("offsets[" + std::to_string(i) +
                                         "] needs integer \"partition\" and \"offset\"");
        }
        req.offsets.push_back({PartitionId(static_cast<uint32_t>(p)), Offset(o)});
        ++i;
      }
      has_offsets = true;
    } else {
      return Status::InvalidArgument("unknown field \"" + std::string(field.key) +
                                     "\"; expected group and offsets");
    }
  }
  if (!has_group) return Status::InvalidArgument("\"group\" is missing");
  SHOAL_RETURN_IF_ERROR(ValidateGroup(req.group));
  if (!has_offsets || req.offsets.empty()) {
    return Status::InvalidArgument("\"offsets\" is missing or empty");
  }
  return req;
}

Result<std::vector<CommitOffset>> ParseCommitParam(std::string_view text) {
  const auto bad = [] {
    return Status::InvalidArgument(
        "commit must be partition:offset pairs separated by commas, e.g. commit=3:121,4:7");
  };
  std::vector<CommitOffset> out;
  if (text.empty()) return bad();
  while (!text.empty()) {
    if (out.size() == kMaxCommitParamOffsets) {
      return Status::InvalidArgument("commit holds at most " +
                                     std::to_string(kMaxCommitParamOffsets) + " offsets");
    }
    const size_t comma = text.find(',');
    const std::string_view pair = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    if (comma != std::string_view::npos && text.empty()) return bad();  // a trailing comma
    const size_t colon = pair.find(':');
    if (colon == std::string_view::npos) return bad();
    uint64_t p = 0, o = 0;
    for (auto [part, value] :
         {std::pair{pair.substr(0, colon), &p}, std::pair{pair.substr(colon + 1), &o}}) {
      if (part.empty() || part.size() > 20) return bad();
      for (char c : part) {
        if (c < '0' || c > '9') return bad();
        const uint64_t d = static_cast<uint64_t>(c - '0');
        if (*value > (UINT64_MAX - d) / 10) return bad();
        *value = *value * 10 + d;
      }
    }
    if (p > UINT32_MAX) return bad();
    out.push_back({PartitionId(static_cast<uint32_t>(p)), Offset(o)});
  }
  return out;
}

std::string EncodeCommitParam(const std::vector<CommitOffset>& offsets) {
  std::string out;
  for (size_t i = 0; i < offsets.size(); ++i) {
    if (i) out += ',';
    json::AppendUint(out, offsets[i].partition.value());
    out += ':';
    json::AppendUint(out, offsets[i].offset.value());
  }
  return out;
}

namespace {
Status ValidateReader(std::string_view reader) {
  if (reader.empty() || reader.size() > kMaxNameBytes) {
    return Status::InvalidArgument("\"reader\" must name a pod (1.." +
                                   std::to_string(kMaxNameBytes) + " bytes)");
  }
  return Status::Ok();
}

Status ParseRanges(simdjson::dom::element el, std::vector<HashRange>* out) {
  simdjson::dom::array arr;
  if (el.get(arr) || arr.size() > kMaxRangeReadRanges) {
    return Status::InvalidArgument("\"ranges\" must be an array of at most " +
                                   std::to_string(kMaxRangeReadRanges) + " [lo, hi] pairs");
  }
  for (auto r : arr) {
    simdjson::dom::array pair;
    HashRange h;
    if (r.get(pair) || pair.size() != 2 || pair.at(0).get(h.lo) || pair.at(1).get(h.hi) ||
        h.lo >= h.hi || h.hi > kHashSpace) {
      return Status::InvalidArgument("each range must be [lo, hi] with lo < hi <= 2^32");
    }
    out->push_back(h);
  }
  return Status::Ok();
}

void AppendRangeList(std::string& out, const std::vector<HashRange>& ranges) {
  out += '[';
  for (size_t i = 0; i < ranges.size(); ++i) {
    if (i) out += ',';
    out += '[';
    json::AppendUint(out, ranges[i].lo);
    out += ',';
    json::AppendUint(out, ranges[i].hi);
    out += ']';
  }
  out += ']';
}
}  // namespace

Result<RangeReadRequest> ParseRangeReadRequest(std::string_view body) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (auto err = parser.parse(body.data(), body.size(), true).get(doc); err) {
    return ParseError("body is not valid JSON", err);
  }
  RangeReadRequest req;
  std::string_view group, reader;
  simdjson::dom::element ranges;
  uint64_t max = 0, max_bytes = 0;
  if (doc["group"].get(group) || doc["reader"].get(reader) || doc["ranges"].get(ranges) ||
      doc["max"].get(max) || doc["max_bytes"].get(max_bytes)) {
    return Status::InvalidArgument(
        "a range read is {\"group\",\"reader\",\"ranges\":[[lo,hi],...],\"max\","
        "\"max_bytes\"} (docs/admin-api.md)");
  }
  req.group = std::string(group);
  req.reader = std::string(reader);
  SHOAL_RETURN_IF_ERROR(ValidateGroup(req.group));
  SHOAL_RETURN_IF_ERROR(ValidateReader(req.reader));
  SHOAL_RETURN_IF_ERROR(ParseRanges(ranges, &req.ranges));
  if (max < 1 || max > 10000 || max_bytes < 1 || max_bytes > (64u << 20)) {
    return Status::InvalidArgument("max must be in [1, 10000] and max_bytes in [1, 64 MiB]");
  }
  req.max = static_cast<size_t>(max);
  req.max_bytes = static_cast<size_t>(max_bytes);
  return req;
}

std::string EncodeRangeReadRequest(const RangeReadRequest& r) {
  std::string out = "{\"group\":";
  json::AppendString(out, r.group);
  out += ",\"reader\":";
  json::AppendString(out, r.reader);
  out += ",\"ranges\":";
  AppendRangeList(out, r.ranges);
  out += ",\"max\":";
  json::AppendUint(out, r.max);
  out += ",\"max_bytes\":";
  json::AppendUint(out, r.max_bytes);
  out += '}';
  return out;
}

std::string EncodeRangeReadAnswer(size_t count, uint64_t last, uint64_t scanned_to,
                                  bool consumed, const std::vector<HashRange>& ranges,
                                  std::string_view events) {
  std::string out = "{\"count\":";
  json::AppendUint(out, count);
  out += ",\"last\":";
  json::AppendUint(out, last);
  out += ",\"scanned_to\":";
  json::AppendUint(out, scanned_to);
  out += ",\"consumed\":";
  out += consumed ? "true" : "false";
  out += ",\"ranges\":";
  AppendRangeList(out, ranges);
  out += "}\n";
  out += events;
  return out;
}

Result<RangeReadAnswer> ParseRangeReadAnswer(std::string_view body) {
  const size_t nl = body.find('\n');
  if (nl == std::string_view::npos) return Status::InvalidArgument("a range read answer has no header line");
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (auto err = parser.parse(body.data(), nl, true).get(doc); err) {
    return ParseError("the range read answer's header is not valid JSON", err);
  }
  RangeReadAnswer a;
  uint64_t count = 0;
  simdjson::dom::element ranges;
  if (doc["count"].get(count) || doc["last"].get(a.last) || doc["scanned_to"].get(a.scanned_to) ||
      doc["consumed"].get(a.consumed) || doc["ranges"].get(ranges)) {
    return Status::InvalidArgument("malformed range read answer header");
  }
  a.count = static_cast<size_t>(count);
  SHOAL_RETURN_IF_ERROR(ParseRanges(ranges, &a.ranges));

  a.events = std::string(body.substr(nl + 1));
  if ((a.count == 0) != a.events.empty()) {
    return Status::InvalidArgument("a range read answer's count disagrees with its events");
  }
  return a;
}

Result<RangeCommitRequest> ParseRangeCommitRequest(std::string_view body) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (auto err = parser.parse(body.data(), body.size(), true).get(doc); err) {
    return ParseError("body is not valid JSON", err);
  }
  RangeCommitRequest req;
  std::string_view group, reader;
  if (doc["group"].get(group) || doc["reader"].get(reader) || doc["offset"].get(req.offset)) {
    return Status::InvalidArgument(
        "a range commit is {\"group\",\"reader\",\"offset\"} (docs/admin-api.md)");
  }
  req.group = std::string(group);
  req.reader = std::string(reader);
  SHOAL_RETURN_IF_ERROR(ValidateGroup(req.group));
  SHOAL_RETURN_IF_ERROR(ValidateReader(req.reader));
  return req;
}

std::string EncodeCommitRequest(const CommitRequest& r) {
  std::string out = "{\"group\":";
  json::AppendString(out, r.group);
  out += ",\"offsets\":[";
  for (size_t i = 0; i < r.offsets.size(); ++i) {
    if (i) out += ',';
    out += "{\"partition\":";
    json::AppendUint(out, r.offsets[i].partition.value());
    out += ",\"offset\":";
    json::AppendUint(out, r.offsets[i].offset.value());
    out += '}';
  }
  out += "]}";
  return out;
}

std::string EncodeRangeCommitRequest(const RangeCommitRequest& r) {
  std::string out = "{\"group\":";
  json::AppendString(out, r.group);
  out += ",\"reader\":";
  json::AppendString(out, r.reader);
  out += ",\"offset\":";
  json::AppendUint(out, r.offset);
  out += '}';
  return out;
}

std::string EncodeProduceRequest(const std::vector<const ProduceEvent*>& events) {
  std::string out = "{\"events\":[";
  for (size_t i = 0; i < events.size(); ++i) {
    const ProduceEvent& e = *events[i];
    out += i ? ",{\"key\":" : "{\"key\":";
    json::AppendString(out, e.key);
    out += ",\"value\":";
    out += e.value;
    if (e.seq) {
      out += ",\"producer\":";
      json::AppendString(out, e.producer);
      out += ",\"seq\":";
      json::AppendUint(out, *e.seq);
    }
    out += '}';
  }
  out += "]}";
  return out;
}

void EncodeProduceResults(const std::vector<ProduceResult>& results, std::string& out) {
  out.reserve(out.size() + 16 + results.size() * 52);
  out += "{\"results\":[";
  for (size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    out += i ? ",{\"partition\":" : "{\"partition\":";
    json::AppendUint(out, r.partition);
    out += ",\"offset\":";
    json::AppendUint(out, r.offset);
    out += r.duplicate ? ",\"duplicate\":true}" : ",\"duplicate\":false}";
  }
  out += "]}";
}

void AppendConsumedEvent(std::string& out, std::string_view key, std::string_view value, bool raw,
                         uint32_t partition, uint64_t offset, std::string_view producer,
                         std::optional<uint64_t> seq, int64_t timestamp_ms) {
  out += "{\"key\":";
  json::AppendString(out, key);
  if (raw) {
    out += ",\"value_b64\":\"";
    out += Base64(value);
    out += '"';
  } else {
    out += ",\"value\":";
    out += value;
  }
  out += ",\"partition\":";
  json::AppendUint(out, partition);
  out += ",\"offset\":";
  json::AppendUint(out, offset);
  if (!producer.empty()) {
    out += ",\"producer\":";
    json::AppendString(out, producer);
  }
  if (seq) {
    out += ",\"seq\":";
    json::AppendUint(out, *seq);
  }
  out += ",\"timestamp_ms\":";
  json::AppendInt(out, timestamp_ms);
  out += '}';
}

Result<std::vector<ProduceResult>> ParseProduceResponse(std::string_view body) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  simdjson::dom::array arr;
  if (parser.parse(body.data(), body.size(), true).get(doc) || doc["results"].get(arr)) {
    return Status::InvalidArgument("produce answer has no \"results\" array");
  }
  std::vector<ProduceResult> out;
  out.reserve(arr.size());
  for (auto el : arr) {
    ProduceResult r;
    uint64_t p = 0;
    if (el["partition"].get(p) || el["offset"].get(r.offset) || el["duplicate"].get(r.duplicate)) {
      return Status::InvalidArgument("produce result needs partition, offset, duplicate");
    }
    r.partition = static_cast<uint32_t>(p);
    out.push_back(r);
  }
  return out;
}

Result<std::vector<ConsumedEvent>> ParseConsumeResponse(std::string_view body) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  simdjson::dom::array arr;
  if (parser.parse(body.data(), body.size(), true).get(doc) || doc["events"].get(arr)) {
    return Status::InvalidArgument("consume answer has no \"events\" array");
  }
  std::vector<ConsumedEvent> out;
  out.reserve(arr.size());
  for (auto el : arr) {
    ConsumedEvent e;
    std::string_view key, b64;
    uint64_t p = 0;
    simdjson::dom::element value;
    const bool has_value = el["value"].get(value) == simdjson::SUCCESS;
    const bool has_b64 = el["value_b64"].get(b64) == simdjson::SUCCESS;
    if (el["key"].get(key) || has_value == has_b64 || el["partition"].get(p) ||
        el["offset"].get(e.offset)) {
      return Status::InvalidArgument(
          "consumed event needs key, value or value_b64, partition, offset");
    }
    e.key = std::string(key);
    if (has_b64) {
      auto bytes = FromBase64(b64);
      if (!bytes) return Status::InvalidArgument("consumed event's value_b64 is not base64");
      e.value = std::move(*bytes);
      e.raw = true;
    } else {
      e.value = simdjson::minify(value);
    }
    e.partition = static_cast<uint32_t>(p);
    std::string_view producer;
    if (el["producer"].get(producer) == simdjson::SUCCESS) e.producer = std::string(producer);
    uint64_t seq = 0;
    if (el["seq"].get(seq) == simdjson::SUCCESS) e.seq = seq;
    int64_t ts = 0;
    if (el["timestamp_ms"].get(ts) == simdjson::SUCCESS) e.timestamp_ms = ts;
    out.push_back(std::move(e));
  }
  return out;
}

Status ErrorFromAnswer(int http_code, std::string_view body, std::string_view context) {
  std::string reason(body.substr(0, 500));
  Status::Code code = Status::Code::kInternal;
  bool named = false;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (!parser.parse(body.data(), body.size(), true).get(doc)) {
    std::string_view error, why;
    if (!doc["reason"].get(why)) reason = std::string(why);
    if (!doc["error"].get(error)) {
      code = Status::CodeFromName(error);
      named = code != Status::Code::kInternal || error == "internal";
    }
  }
  if (!named || code == Status::Code::kOk) {
    if (http_code == 400) {
      code = Status::Code::kInvalidArgument;
    } else if (http_code == 401) {
      code = Status::Code::kUnauthenticated;
    } else if (http_code == 404) {
      code = Status::Code::kNotFound;
    } else if (http_code == 409) {
      code = Status::Code::kFailedPrecondition;
    } else if (http_code == 413) {
      code = Status::Code::kTooLarge;
    } else if (http_code == 507) {
      code = Status::Code::kNoSpace;
    } else if (http_code >= 500) {
      code = Status::Code::kUnavailable;
    } else {
      code = Status::Code::kInvalidArgument;
    }
  }
  std::string msg(context);
  msg += " answered " + std::to_string(http_code) + ": " + reason;
  return Status::FromCode(code, std::move(msg));
}

std::vector<size_t> ParseUnknownIndices(std::string_view body) {
  std::vector<size_t> out;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  simdjson::dom::array arr;
  if (parser.parse(body.data(), body.size(), true).get(doc) || doc["unknown"].get(arr)) return out;
  for (auto el : arr) {
    uint64_t i = 0;
    if (!el.get(i)) out.push_back(static_cast<size_t>(i));
  }
  return out;
}

std::string SequenceUnknownBody(std::string_view reason, const std::vector<size_t>& indices) {
  std::string out = "{\"error\":\"sequence_unknown\",\"reason\":";
  json::AppendString(out, reason);
  out += ",\"unknown\":[";
  for (size_t i = 0; i < indices.size(); ++i) {
    if (i) out += ',';
    json::AppendUint(out, indices[i]);
  }
  out += "]}";
  return out;
}

}  // namespace shoal::wire
