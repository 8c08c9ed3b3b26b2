// Label selectors as list and watch take them in `?labelSelector=` (k8s.io/apimachinery
// pkg/labels): equality (`a=b`, `a==b`, `a!=b`), existence (`a`, `!a`) and set-based
// (`a in (x,y)`, `a notin (x)`) requirements, comma-separated, all of which must hold.
//
// A LabelSelector is a value: parse once, match from any thread.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "shoal/common/status.h"

namespace shoal::testing {

class LabelSelector {
 public:
  // An empty selector matches everything.
  LabelSelector() = default;
  static Result<LabelSelector> Parse(const std::string& text);

  bool Matches(const std::map<std::string, std::string>& labels) const;
  bool empty() const { return requirements_.empty(); }

 private:
  enum class Op { kEquals, kNotEquals, kExists, kNotExists, kIn, kNotIn };
  struct Requirement {
    std::string key;
    Op op;
    std::vector<std::string> values;
  };
  std::vector<Requirement> requirements_;
};

}  // namespace shoal::testing
