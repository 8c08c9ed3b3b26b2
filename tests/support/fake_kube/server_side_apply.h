// Server-side apply (KEP-555) as the fake API server does it: a PATCH with Content-Type
// application/apply-patch+yaml and ?fieldManager=M sets the fields of the applied configuration,
// records them as M's in metadata.managedFields (operation Apply, fieldsType FieldsV1), removes
// the fields M applied before and no longer applies (when nobody else owns them), and refuses
// with 409 Conflict to change a field another manager owns to another value unless ?force=true,
// which takes it over. Updates (PUT, merge and JSON patches) record the fields they change as
// their manager's (operation Update). Kubernetes: "Server-Side Apply",
// https://kubernetes.io/docs/reference/using-api/server-side-apply/.
//
// Simplified against structured-merge-diff: every list is atomic (one field, replaced whole; the
// real server merges lists of built-in kinds by their keys, e.g. containers by name), and
// values are compared as JSON. Pure functions; values.
#pragma once

#include <cpprest/json.h>

#include <set>
#include <string>
#include <vector>

#include "shoal/common/status.h"

namespace shoal::testing {

// A field: its keys from the object's root ({"spec", "replicas"}).
using FieldPath = std::vector<std::string>;
using FieldSet = std::set<FieldPath>;

// The leaf fields of an object as apply owns them: scalars, lists (atomic) and empty objects;
// not apiVersion, kind, the system metadata (name, namespace, uid, resourceVersion, generation,
// creationTimestamp, deletion*, managedFields) nor, when `status_subresource`, status.
FieldSet OwnedFields(const web::json::value& obj, bool status_subresource);

// FieldsV1 ({"f:spec":{"f:replicas":{}}}) and back.
web::json::value ToFieldsV1(const FieldSet& fields);
FieldSet FromFieldsV1(const web::json::value& fields_v1);

struct ApplyRequest {
  std::string manager;
  std::string api_version;
  bool force = false;
  bool status_subresource = false;
  std::string now;  // RFC 3339, for the managedFields entry
};

// Sets metadata.managedFields to `managed` (an array of entries), or removes it when empty.
void SetManagedFields(web::json::value& obj, const web::json::value& managed);

// `live` with `applied` applied (null `live`: the object is created from `applied`), with its
// managedFields updated; Conflict naming each field and its owner, as the real server words it
// ("Apply failed with 1 conflict: conflict with \"kubectl\" using apps/v1: .spec.replicas").
Result<web::json::value> Apply(const web::json::value* live, const web::json::value& applied,
                               const ApplyRequest& request);

// `after`'s managedFields once `manager` updated `before` (null: created) into `after`: the
// fields whose values changed or appeared become the manager's (operation Update), and leave
// every other manager's set; fields that went are dropped from every set.
web::json::value RecordUpdate(const web::json::value* before, const web::json::value& after,
                              const std::string& manager, const std::string& api_version,
                              bool status_subresource, const std::string& now);

}  // namespace shoal::testing
