#include "support/topic_view.h"

#include <simdjson.h>

namespace shoal::testing {

Result<TopicView> ParseTopicView(const std::string& body) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  simdjson::dom::array parts;
  TopicView view;
  if (parser.parse(simdjson::padded_string(body)).get(doc) || doc["epoch"].get(view.epoch) ||
      doc["partitions"].get(parts)) {
    return Status::Internal("malformed topic view: " + body);
  }
  for (auto p : parts) {
    uint64_t id = 0;
    std::string_view state, owner;
    if (p["id"].get(id) || p["state"].get(state) || p["owner"].get(owner)) {
      return Status::Internal("malformed partition in the topic view: " + body);
    }
    PartitionView pv;
    pv.state = std::string(state);
    pv.owner = std::string(owner);
    if (p["end_offset"].get(pv.end_offset) == simdjson::SUCCESS) {
      pv.held = true;
      simdjson::dom::object groups;
      if (p["accepting"].get(pv.accepting) || p["sealed_here"].get(pv.sealed_here) ||
          p["groups"].get(groups)) {
        return Status::Internal("malformed partition counters in the topic view: " + body);
      }
      for (auto g : groups) {
        uint64_t c = 0;
        if (g.value["committed"].get(c)) return Status::Internal("malformed group: " + body);
        pv.committed[std::string(g.key)] = c;
      }
    }
    view.partitions[static_cast<uint32_t>(id)] = pv;
  }
  return view;
}

}  // namespace shoal::testing
