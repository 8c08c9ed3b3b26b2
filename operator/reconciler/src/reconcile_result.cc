#include "shoal/reconciler/reconcile_result.h"

#include <array>
#include <cstddef>

namespace shoal::reconciler {

std::string_view ToString(RetryReason reason) {
  // In RetryReason's order; the size check catches a reason added without its name.
  static constexpr std::array<std::string_view, 9> kNames = {
      "finalizer", "secret",    "service",  "pod_disruption_budget", "statefulset", "status",
      "cleanup",   "not_owned", "exception"};
  static_assert(kNames.size() == static_cast<size_t>(RetryReason::kException) + 1);
  return kNames[static_cast<size_t>(reason)];
}

}  // namespace shoal::reconciler
