// Informer: keeps a local copy of one collection (a kind in one namespace or in all, with an
// optional label selector) by list + watch, the way client-go's reflector does: list, then
// watch from the list's resourceVersion with bookmarks; when the stream ends it watches again
// from the last RV seen; when the server answers 410 Expired (history compacted) or the watch
// fails, it lists again and reports the difference to its cache (objects that vanished while it
// was not watching come out as DELETED), so no change is missed.
//
// Handlers run on the informer's thread, in order, after the cache was updated. Thread-safe:
// Get/List/synced from any thread. Owned by the operator; the client outlives it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "shoal/kubeapi/kube_client.h"

namespace shoal::kubeapi {

struct InformerOptions {
  std::string ns = "";  // "" for every namespace
  std::string label_selector = "";
  // Watch requests ask the server to end the stream after this long (client-go: 5-10 min).
  std::chrono::seconds watch_timeout{300};
  // Backoff after a failed list or watch request (doubles up to backoff_max).
  std::chrono::milliseconds backoff{200};
  std::chrono::milliseconds backoff_max{10'000};
};

class Informer {
 public:
  // type: ADDED, MODIFIED or DELETED (DELETED carries the last state known).
  using Handler = std::function<void(const std::string& type, const Json& object)>;

  Informer(KubeClient& client, ResourceKind kind, InformerOptions options, Handler handler);

  // Lists and watches until `stop` becomes true.
  void Run(const std::atomic<bool>& stop);

  // True once the first list was delivered.
  bool synced() const;
  // Waits until synced; false at the deadline.
  bool WaitForSync(std::chrono::milliseconds timeout) const;
  std::optional<Json> Get(const std::string& ns, const std::string& name) const;
  std::vector<Json> List() const;
  // How many times it listed (1 after the first list; more after 410s and failures).
  uint64_t lists() const { return lists_.load(); }
  // The last resourceVersion seen (list, event or bookmark).
  std::string resource_version() const;

 private:
  // Lists and replaces the cache, emitting ADDED/MODIFIED/DELETED for the differences.
  ApiError Relist();
  void Apply(const std::string& type, const Json& object);

  KubeClient& client_;
  const ResourceKind kind_;
  const InformerOptions opts_;
  Handler handler_;

  mutable std::mutex mu_;
  mutable std::condition_variable synced_cv_;
  std::map<std::string, Json> cache_;  // "ns/name" -> object
  std::string rv_;
  bool synced_ = false;
  std::atomic<uint64_t> lists_{0};
};

}  // namespace shoal::kubeapi
