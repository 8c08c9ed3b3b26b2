#include "cmd/scrape.h"

#include "shoal/common/raw_http.h"

namespace shoal::cli {

std::vector<control::PromSample> Scrape(const std::string& host, uint16_t port) {
  RawHttpConnection conn(host, port);
  std::string body;
  auto code = conn.Request("GET", "/metrics", "", &body);
  if (!code.ok() || *code != 200) return {};
  auto samples = control::ParsePromText(body);
  return samples.ok() ? std::move(samples).value() : std::vector<control::PromSample>{};
}

std::map<std::string, double> SumBy(const std::vector<control::PromSample>& samples,
                                    const std::string& name, const std::string& label,
                                    const std::map<std::string, std::string>& where) {
  std::map<std::string, double> out;
  for (const auto& s : samples) {
    if (s.name != name) continue;
    bool match = true;
    for (const auto& [k, v] : where) {
      const std::string* have = s.Label(k);
      match = match && have && *have == v;
    }
    const std::string* key = s.Label(label);
    if (match && key) out[*key] += s.value;
  }
  return out;
}

}  // namespace shoal::cli
