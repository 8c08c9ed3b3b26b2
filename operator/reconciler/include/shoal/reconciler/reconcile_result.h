// ReconcileResult: what reconciling one key asks of the work queue, and why when it asks for a
// retry (RetryReason, the cause). Values.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <utility>

namespace shoal::reconciler {

// The step of a reconcile that failed and asked for a retry. It is the `reason` label of
// shoal_operator_reconciles_total{result="error"}: a few fixed values, whatever the errors say.
enum class RetryReason {
  kFinalizer,            // adding or removing shoal.dev/cleanup
  kSecret,               // the admin token's Secret
  kService,              // the headless Service
  kPodDisruptionBudget,  // the PodDisruptionBudget
  kStatefulSet,          // creating or updating the StatefulSet
  kStatus,               // writing the topic's status
  kCleanup,              // deleting the owned objects of a deleted topic
  kNotOwned,             // an object of the topic's name that is not the topic's is in the way
  kException,            // the reconcile threw (the last: ToString counts on it)
};
// "finalizer", "secret", "service", "pod_disruption_budget", "statefulset", "status",
// "cleanup", "not_owned", "exception".
std::string_view ToString(RetryReason reason);

// What reconciling one key asks of the work queue: nothing more until something changes
// (done), another try with exponential backoff (retry: something failed, and what), or another
// look after a set time without counting a failure (requeue after: waiting for a cache to catch
// up). controller-runtime returns (Result, error) together for the same reason: the worker that
// retries is the one that logs and counts why.
struct ReconcileResult {
  enum class Kind { kDone, kRetry, kRequeueAfter };
  Kind kind = Kind::kDone;
  std::chrono::milliseconds after{0};  // kRequeueAfter only
  // kRetry only: the step that failed (the metric's label) and what went wrong, for the log
  // ("writing status: 409 Conflict: ...").
  RetryReason reason = RetryReason::kException;
  std::string cause;

  static ReconcileResult Done() { return {}; }
  static ReconcileResult Retry(RetryReason reason, std::string cause) {
    ReconcileResult r;
    r.kind = Kind::kRetry;
    r.reason = reason;
    r.cause = std::move(cause);
    return r;
  }
  static ReconcileResult RequeueAfter(std::chrono::milliseconds after) {
    ReconcileResult r;
    r.kind = Kind::kRequeueAfter;
    r.after = after;
    return r;
  }
};

}  // namespace shoal::reconciler
