// The binary batch format of the data plane (docs/data-plane.md "Binary batches"): produce
// requests, their answers and consume answers as length-prefixed records, little-endian. Parsing
// never trusts a length it has not checked against the bytes that remain, and never allocates
// by a count it read.
#include <simdjson.h>

#include <cstring>

#include "shoal/common/json.h"
#include "shoal/common/wire.h"

namespace shoal::wire {

namespace {

template <typename T>
void Put(std::string& out, T v) {
  char b[sizeof v];
  std::memcpy(b, &v, sizeof v);
  out.append(b, sizeof v);
}

template <typename T>
T Get(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

std::string At(size_t i) { return "event " + std::to_string(i); }

// The 17 bytes every binary event carries, in a produce batch at its start and in a consume
// answer after partition, offset and timestamp: u8 flags, u16 key, u16 producer and u32 value
// lengths, u64 seq.
struct EventHeader {
  uint8_t flags;
  size_t key_len, producer_len, value_len;
  uint64_t seq;
  bool known_flags() const { return (flags & ~(kFlagSeq | kFlagJson)) == 0; }
};
EventHeader ReadEventHeader(const char* h) {
  return {static_cast<uint8_t>(h[0]), Get<uint16_t>(h + 1), Get<uint16_t>(h + 3),
          Get<uint32_t>(h + 5), Get<uint64_t>(h + 9)};
}
void PutEventHeader(std::string& out, uint8_t flags, size_t key_len, size_t producer_len,
                    size_t value_len, uint64_t seq) {
  out.push_back(static_cast<char>(flags));
  Put<uint16_t>(out, static_cast<uint16_t>(key_len));
  Put<uint16_t>(out, static_cast<uint16_t>(producer_len));
  Put<uint32_t>(out, static_cast<uint32_t>(value_len));
  Put<uint64_t>(out, seq);
}

bool StartsWith(std::string_view body, std::string_view magic) {
  return body.size() >= magic.size() && body.substr(0, magic.size()) == magic;
}

bool IsUtf8(std::string_view s) { return simdjson::validate_utf8(s.data(), s.size()); }

// One JSON value, nested at most as deep as a JSON produce lets a value be: the value sits three
// levels down in {"events":[{"value":V}]}, and every parse of it later (a forward as JSON, a
// consume answer a client decodes) has simdjson's default limit, so a deeper value accepted here
// would break each of them.
bool IsOneJsonValue(std::string_view text) {
  constexpr size_t kMaxValueDepth = simdjson::DEFAULT_MAX_DEPTH - 3;
  thread_local simdjson::dom::parser parser;
  thread_local bool limited = parser.allocate(1 << 16, kMaxValueDepth) == simdjson::SUCCESS;
  simdjson::dom::element doc;
  return limited && parser.parse(text.data(), text.size(), true).get(doc) == simdjson::SUCCESS;
}

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

}  // namespace

Format FormatOf(std::string_view header) {
  // A list ("a, b;q=0.5") names binary when any of its types is the binary one.
  while (!header.empty()) {
    const size_t comma = header.find(',');
    std::string_view type = header.substr(0, std::min(comma, header.find(';')));
    header = comma == std::string_view::npos ? std::string_view() : header.substr(comma + 1);
    while (!type.empty() && (type.back() == ' ' || type.back() == '\t')) type.remove_suffix(1);
    while (!type.empty() && (type.front() == ' ' || type.front() == '\t')) type.remove_prefix(1);
    if (type.size() != kBinaryType.size()) continue;
    bool same = true;
    for (size_t i = 0; i < type.size() && same; ++i) {
      const char c =
          type[i] >= 'A' && type[i] <= 'Z' ? static_cast<char>(type[i] - 'A' + 'a') : type[i];
      same = c == kBinaryType[i];
    }
    if (same) return Format::kBinary;
  }
  return Format::kJson;
}

Status ProduceRequestParser::ParseBinary(std::string_view body, const Limits& limits) {
  events_.clear();
  arena_.clear();
  if (!StartsWith(body, kProduceMagic) || body.size() < 8) {
    return Status::InvalidArgument(
        "a binary batch starts with \"SHP1\" and a u32 event count (docs/data-plane.md)");
  }
  const uint32_t count = Get<uint32_t>(body.data() + 4);
  if (count == 0) return Status::InvalidArgument("the batch is empty; send at least one event");
  if (count > limits.max_events) {
    return Status::TooLarge("a batch holds at most " + std::to_string(limits.max_events) +
                            " events");
  }
  size_t pos = 8;
  // Each event takes at least its header: a count the bytes cannot hold is refused before
  // anything is reserved for it.
  if ((body.size() - pos) / kBinaryProduceHeader < count) {
    return Status::InvalidArgument("the batch says " + std::to_string(count) +
                                   " events but its bytes cannot hold them");
  }
  events_.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    if (body.size() - pos < kBinaryProduceHeader) {
      return Status::InvalidArgument(At(i) + " is cut short");
    }
    const auto [flags, key_len, producer_len, value_len, seq] = ReadEventHeader(body.data() + pos);
    pos += kBinaryProduceHeader;
    if ((flags & ~(kFlagSeq | kFlagJson)) != 0) {
      return Status::InvalidArgument(At(i) + " has unknown flags " + std::to_string(flags));
    }
    if (key_len == 0) {
      return Status::InvalidArgument(At(i) + " has an empty key; every event needs a key");
    }
    if (key_len > limits.max_key_bytes) {
      return Status::TooLarge(At(i) + "'s key is " + std::to_string(key_len) +
                              " bytes; the limit is " + std::to_string(limits.max_key_bytes));
    }
    if (value_len > limits.max_value_bytes) {
      return Status::TooLarge(At(i) + "'s value is " + std::to_string(value_len) +
                              " bytes; the limit is " + std::to_string(limits.max_value_bytes));
    }
    if (producer_len > limits.max_producer_bytes) {
      return Status::InvalidArgument(At(i) + "'s producer must be 1.." +
                                     std::to_string(limits.max_producer_bytes) + " bytes");
    }
    if ((producer_len > 0) != ((flags & kFlagSeq) != 0)) {
      return Status::InvalidArgument(At(i) +
                                     (producer_len > 0 ? " has a producer without the seq flag"
                                                       : " has the seq flag without a producer") +
                                     "; idempotent events need both");
    }
    if (body.size() - pos < key_len + producer_len + value_len) {
      return Status::InvalidArgument(At(i) + " is cut short: its lengths pass the body's end");
    }
    ProduceEvent e;
    e.key = body.substr(pos, key_len);
    e.producer = body.substr(pos + key_len, producer_len);
    e.value = body.substr(pos + key_len + producer_len, value_len);
    pos += key_len + producer_len + value_len;
    // Keys and producer ids are text: JSON consumers read them as strings.
    if (!IsUtf8(e.key)) return Status::InvalidArgument(At(i) + "'s key is not UTF-8");
    if (!IsUtf8(e.producer)) return Status::InvalidArgument(At(i) + "'s producer is not UTF-8");
    if (flags & kFlagSeq) e.seq = seq;
    if (flags & kFlagJson) {
      if (!IsOneJsonValue(e.value)) {
        return Status::InvalidArgument(At(i) +
                                       " is flagged JSON but its value is not one JSON value");
      }
    } else {
      e.raw = true;
    }
    events_.push_back(e);
  }
  if (pos != body.size()) {
    return Status::InvalidArgument("the batch has " + std::to_string(body.size() - pos) +
                                   " bytes after its last event");
  }
  return Status::Ok();
}

std::string EncodeBinaryProduceRequest(const std::vector<const ProduceEvent*>& events) {
  size_t size = 8;
  for (const auto* e : events) {
    size += kBinaryProduceHeader + e->key.size() + e->producer.size() + e->value.size();
  }
  std::string out;
  out.reserve(size);
  out.append(kProduceMagic);
  Put<uint32_t>(out, static_cast<uint32_t>(events.size()));
  for (const auto* e : events) {
    PutEventHeader(out, static_cast<uint8_t>((e->seq ? kFlagSeq : 0) | (e->raw ? 0 : kFlagJson)),
                   e->key.size(), e->seq ? e->producer.size() : 0, e->value.size(),
                   e->seq.value_or(0));
    out.append(e->key);
    if (e->seq) out.append(e->producer);
    out.append(e->value);
  }
  return out;
}

void EncodeBinaryProduceResults(const std::vector<ProduceResult>& results, std::string& out) {
  out.reserve(out.size() + 8 + results.size() * 13);
  out.append(kResultsMagic);
  Put<uint32_t>(out, static_cast<uint32_t>(results.size()));
  for (const auto& r : results) {
    Put<uint32_t>(out, r.partition);
    Put<uint64_t>(out, r.offset);
    out.push_back(r.duplicate ? 1 : 0);
  }
}

Result<std::vector<ProduceResult>> ParseBinaryProduceResponse(std::string_view body) {
  if (!StartsWith(body, kResultsMagic) || body.size() < 8) {
    return Status::InvalidArgument("a binary produce answer starts with \"SHR1\" and a count");
  }
  const uint32_t count = Get<uint32_t>(body.data() + 4);
  if ((body.size() - 8) % 13 != 0 || (body.size() - 8) / 13 != count) {
    return Status::InvalidArgument("a binary produce answer's length disagrees with its count");
  }
  std::vector<ProduceResult> out(count);
  const char* p = body.data() + 8;
  for (auto& r : out) {
    r.partition = Get<uint32_t>(p);
    r.offset = Get<uint64_t>(p + 4);
    r.duplicate = p[12] != 0;
    p += 13;
  }
  return out;
}

void AppendBinaryEvent(std::string& out, std::string_view key, std::string_view value, bool raw,
                       uint32_t partition, uint64_t offset, std::string_view producer,
                       std::optional<uint64_t> seq, int64_t timestamp_ms) {
  const size_t start = out.size();
  out.resize(start + kBinaryEventHeader + key.size() + producer.size() + value.size());
  char* p = out.data() + start;
  auto put = [&p](auto v) {
    std::memcpy(p, &v, sizeof v);
    p += sizeof v;
  };
  put(partition);
  put(offset);
  put(timestamp_ms);
  put(static_cast<uint8_t>((seq ? kFlagSeq : 0) | (raw ? 0 : kFlagJson)));
  put(static_cast<uint16_t>(key.size()));
  put(static_cast<uint16_t>(producer.size()));
  put(static_cast<uint32_t>(value.size()));
  put(seq.value_or(0));
  std::memcpy(p, key.data(), key.size());
  p += key.size();
  std::memcpy(p, producer.data(), producer.size());
  p += producer.size();
  std::memcpy(p, value.data(), value.size());
}

Result<std::vector<ConsumedEvent>> ParseBinaryConsumeResponse(std::string_view body) {
  if (!StartsWith(body, kEventsMagic)) {
    return Status::InvalidArgument("a binary consume answer starts with \"SHC1\"");
  }
  std::vector<ConsumedEvent> out;
  size_t pos = kEventsMagic.size();
  while (pos < body.size()) {
    if (body.size() - pos < kBinaryEventHeader) {
      return Status::InvalidArgument("a binary consume answer's last event is cut short");
    }
    const char* h = body.data() + pos;
    ConsumedEvent e;
    e.partition = Get<uint32_t>(h);
    e.offset = Get<uint64_t>(h + 4);
    e.timestamp_ms = Get<int64_t>(h + 12);
    const EventHeader eh = ReadEventHeader(h + 20);
    const auto [flags, key_len, producer_len, value_len, seq] = eh;
    pos += kBinaryEventHeader;
    if (!eh.known_flags() || body.size() - pos < key_len + producer_len + value_len) {
      return Status::InvalidArgument("a binary consume answer holds a malformed event");
    }
    e.key.assign(body.data() + pos, key_len);
    e.producer.assign(body.data() + pos + key_len, producer_len);
    e.value.assign(body.data() + pos + key_len + producer_len, value_len);
    e.raw = (flags & kFlagJson) == 0;
    if (flags & kFlagSeq) e.seq = seq;
    pos += key_len + producer_len + value_len;
    out.push_back(std::move(e));
  }
  return out;
}

Result<std::vector<ConsumedEvent>> ParseAnyConsumeResponse(std::string_view body) {
  return StartsWith(body, kEventsMagic) ? ParseBinaryConsumeResponse(body)
                                        : ParseConsumeResponse(body);
}

Result<std::vector<ProduceResult>> ParseAnyProduceResponse(std::string_view body) {
  return StartsWith(body, kResultsMagic) ? ParseBinaryProduceResponse(body)
                                         : ParseProduceResponse(body);
}

void OpenConsumeAnswer(Format format, std::string& out) {
  out += format == Format::kBinary ? kEventsMagic : std::string_view("{\"events\":[");
}

void CloseConsumeAnswer(Format format, std::string& out) {
  if (format == Format::kJson) out += "]}";
}

std::string EmptyConsumeAnswer(Format format) {
  std::string out;
  OpenConsumeAnswer(format, out);
  CloseConsumeAnswer(format, out);
  return out;
}

Result<std::string> ConvertAnswerEvents(std::string_view events, Format from, Format to) {
  if (from == to) return std::string(events);
  std::string whole;
  OpenConsumeAnswer(from, whole);
  whole += events;
  CloseConsumeAnswer(from, whole);
  auto parsed = ParseAnyConsumeResponse(whole);
  if (!parsed.ok()) return parsed.status();
  std::string out;
  for (size_t i = 0; i < parsed->size(); ++i) {
    const auto& e = (*parsed)[i];
    AppendAnswerEvent(to, out, i > 0, e.key, e.value, e.raw, e.partition, e.offset, e.producer,
                      e.seq, e.timestamp_ms);
  }
  return out;
}

std::string Base64(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t v = (uint32_t{static_cast<uint8_t>(bytes[i])} << 16) |
                       (uint32_t{static_cast<uint8_t>(bytes[i + 1])} << 8) |
                       static_cast<uint8_t>(bytes[i + 2]);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  if (const size_t left = bytes.size() - i; left > 0) {
    uint32_t v = uint32_t{static_cast<uint8_t>(bytes[i])} << 16;
    if (left == 2) v |= uint32_t{static_cast<uint8_t>(bytes[i + 1])} << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += left == 2 ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::optional<std::string> FromBase64(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  auto digit = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    const int pad = last ? (text[i + 3] == '=') + (text[i + 2] == '=') : 0;
    if (pad == 1 && text[i + 2] == '=') return std::nullopt;  // "x=y=" is not padding
    uint32_t v = 0;
    for (size_t k = 0; k < 4; ++k) {
      const int d = k >= 4 - static_cast<size_t>(pad) ? 0 : digit(text[i + k]);
      if (d < 0) return std::nullopt;
      v = (v << 6) | static_cast<uint32_t>(d);
    }
    out += static_cast<char>((v >> 16) & 0xFF);
    if (pad < 2) out += static_cast<char>((v >> 8) & 0xFF);
    if (pad < 1) out += static_cast<char>(v & 0xFF);
  }
  return out;
}

}  // namespace shoal::wire
