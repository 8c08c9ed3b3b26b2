// AccessPolicy: who may do what on the data plane, by the caller's name (the common name of the
// TLS client certificate it showed; GuardedListener hands it over in X-Shoal-Principal). Read from
// a JSON file (--access-file):
//
//   {"principals": {"billing":    {"produce": false, "groups": ["billing", "audit-*"]},
//                   "orders-api": {"produce": true}}}
//
// "produce": may produce. "groups": the consumer groups the principal may read and commit for,
// each a name or a prefix ending in "*". A name not listed may do nothing but the probes. A value
// and pure functions; thread-safe once made.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "shoal/common/status.h"

namespace shoal::http {

class AccessPolicy {
 public:
  static Result<AccessPolicy> Parse(std::string_view json);
  static Result<AccessPolicy> Load(const std::string& path);

  // Ok, or PermissionDenied with what the caller lacks.
  Status MayProduce(const std::string& principal) const;
  Status MayUseGroup(const std::string& principal, const std::string& group) const;
  // The topic view: anyone listed.
  Status MayView(const std::string& principal) const;

 private:
  struct Grant {
    bool produce = false;
    std::vector<std::string> groups;  // names, or prefixes ending in '*'
  };
  const Grant* Find(const std::string& principal) const;
  std::map<std::string, Grant> principals_;
};

}  // namespace shoal::http
