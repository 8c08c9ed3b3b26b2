#include "shoal/client/shoal_client.h"

// clang-format off
#include <utility>  // std::exchange, before boost::asio (awaitable.hpp needs it)
// clang-format on

#include <cpprest/http_client.h>
#include <simdjson.h>

#include <algorithm>
#include <map>

#include "shoal/common/hash.h"
#include "shoal/common/json.h"
#include "shoal/common/tls_cpprest.h"

namespace shoal::client {

namespace {
std::string Encode(const std::vector<OutgoingEvent>& events, wire::Format format) {
  std::vector<wire::ProduceEvent> views(events.size());
  std::vector<const wire::ProduceEvent*> ptrs(events.size());
  for (size_t i = 0; i < events.size(); ++i) {
    const auto& e = events[i];
    views[i] = {e.key, e.value_json, e.producer, e.seq, e.raw};
    ptrs[i] = &views[i];
  }
  return format == wire::Format::kBinary ? wire::EncodeBinaryProduceRequest(ptrs)
                                         : wire::EncodeProduceRequest(ptrs);
}
}  // namespace

Result<std::vector<OwnedRange>> OwnedRanges(std::string_view topic_view) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  simdjson::dom::array parts;
  if (parser.parse(topic_view.data(), topic_view.size()).get(doc) || doc["partitions"].get(parts)) {
    return Status::InvalidArgument("not a topic view: no \"partitions\" array");
  }
  std::map<std::string_view, std::string_view> data_of;  // pod -> data address
  simdjson::dom::object peers;
  if (doc["peers"].get(peers) == simdjson::SUCCESS) {
    for (auto field : peers) {
      std::string_view data;
      if (field.value["data"].get(data) == simdjson::SUCCESS) data_of[field.key] = data;
    }
  }
  std::vector<OwnedRange> out;
  for (auto p : parts) {
    std::string_view state, owner;
    OwnedRange r;
    if (p["state"].get(state) || state != "active" || p["owner"].get(owner) || p["lo"].get(r.lo) ||
        p["hi"].get(r.hi) || r.lo >= r.hi) {
      continue;
    }
    auto it = data_of.find(owner);
    if (it == data_of.end()) continue;
    r.data_address = std::string(it->second);
    out.push_back(std::move(r));
  }
  std::sort(out.begin(), out.end(),
            [](const OwnedRange& a, const OwnedRange& b) { return a.lo < b.lo; });
  return out;
}

const OwnedRange* RangeOf(const std::vector<OwnedRange>& ranges, std::string_view key) {
  return RangeHolding(ranges, KeyHash(key));
}

std::string EncodeProduceBody(const std::vector<OutgoingEvent>& events) {
  return Encode(events, wire::Format::kJson);
}

std::string EncodeBinaryProduceBody(const std::vector<OutgoingEvent>& events) {
  return Encode(events, wire::Format::kBinary);
}

ShoalClient::ShoalClient(const std::string& base_url, std::string topic,
                         std::chrono::milliseconds timeout, TlsClientFiles tls)
    : topic_(std::move(topic)), tls_(std::move(tls)) {
  web::http::client::http_client_config config;
  config.set_timeout(timeout);
  UseTls(config, tls_);
  http_ = std::make_unique<web::http::client::http_client>(base_url, config);
}

ShoalClient::~ShoalClient() = default;

Result<std::string> ShoalClient::Call(const std::string& method, const std::string& path,
                                      const std::string& body, std::string* error_body,
                                      bool binary_body) {
  try {
    web::http::http_request req(method);
    req.set_request_uri(path);
    NameTheServer(req, tls_);
    if (!body.empty()) {
      req.set_body(body, binary_body ? std::string(wire::kBinaryType) : "application/json");
    }
    if (format_ == wire::Format::kBinary) {
      req.headers().add("Accept", std::string(wire::kBinaryType));
    }
    auto resp = http_->request(req).get();
    auto bytes = resp.extract_vector().get();
    std::string text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    const int code = resp.status_code();
    if (code == 200) return text;
    if (error_body) *error_body = text;
    return wire::ErrorFromAnswer(code, text, method + " " + path);
  } catch (const std::exception& e) {
    return Status::Unavailable(method + " " + path + ": " + e.what());
  }
}

Result<std::vector<wire::ProduceResult>> ShoalClient::Produce(
    const std::vector<OutgoingEvent>& events, std::vector<size_t>* unknown) {
  std::string error;
  const bool binary =
      format_ == wire::Format::kBinary ||
      std::any_of(events.begin(), events.end(), [](const auto& e) { return e.raw; });
  if (binary) {
    // What a binary batch's length fields can hold (the sidecar's own limits are lower).
    for (size_t i = 0; i < events.size(); ++i) {
      const auto& e = events[i];
      if (e.key.size() > UINT16_MAX || e.producer.size() > UINT16_MAX ||
          e.value_json.size() > UINT32_MAX) {
        return Status::InvalidArgument("event " + std::to_string(i) +
                                       ": a key or producer id over 65,535 bytes, or a value "
                                       "over 4 GiB, cannot go in a binary batch");
      }
    }
  }
  auto body =
      Call("POST", "/v1/topics/" + topic_ + "/events",
           binary ? EncodeBinaryProduceBody(events) : EncodeProduceBody(events), &error, binary);
  if (!body.ok()) {
    if (unknown && body.status().code() == Status::Code::kSequenceUnknown) {
      *unknown = wire::ParseUnknownIndices(error);
    }
    return body.status();
  }
  auto results = wire::ParseAnyProduceResponse(*body);
  if (results.ok() && results->size() != events.size()) {
    return Status::Internal("produce answered " + std::to_string(results->size()) +
                            " results for " + std::to_string(events.size()) + " events");
  }
  return results;
}

Result<std::vector<wire::ConsumedEvent>> ShoalClient::Consume(
    const std::string& group, size_t max, int64_t wait_ms,
    const std::vector<wire::CommitOffset>& commit) {
  std::string path = "/v1/topics/" + topic_ +
                     "/events?group=" + web::uri::encode_data_string(group) +
                     "&max=" + std::to_string(max) + "&wait_ms=" + std::to_string(wait_ms);
  if (!commit.empty()) path += "&commit=" + wire::EncodeCommitParam(commit);
  auto body = Call("GET", path, "");
  if (!body.ok()) return body.status();
  return wire::ParseAnyConsumeResponse(*body);
}

Status ShoalClient::Commit(const std::string& group,
                           const std::vector<wire::CommitOffset>& offsets) {
  std::string body = "{\"group\":";
  json::AppendString(body, group);
  body += ",\"offsets\":[";
  for (size_t i = 0; i < offsets.size(); ++i) {
    if (i) body += ',';
    body += "{\"partition\":" + std::to_string(offsets[i].partition.value()) +
            ",\"offset\":" + std::to_string(offsets[i].offset.value()) + "}";
  }
  body += "]}";
  auto r = Call("POST", "/v1/topics/" + topic_ + "/commits", body);
  return r.ok() ? Status::Ok() : r.status();
}

Result<std::string> ShoalClient::TopicView() { return Call("GET", "/v1/topics/" + topic_, ""); }

}  // namespace shoal::client
