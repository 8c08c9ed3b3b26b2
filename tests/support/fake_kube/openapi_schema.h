// The structural-schema part of apiextensions-apiserver for custom resources: a CRD's
// openAPIV3Schema applied to an object as the real API server applies it on create, update, patch
// and /status writes, in this order:
//   1. nulls of non-nullable properties are dropped (then defaulted, when a default exists);
//   2. defaulting: a property absent from an object that exists gets its schema's `default`,
//      top-down, so defaults inside a defaulted value apply too;
//   3. pruning: fields not in `properties` (or `additionalProperties`) are dropped unless
//      x-kubernetes-preserve-unknown-fields is set; metadata, apiVersion and kind at the root are
//      the API server's and are kept;
//   4. validation (k8s.io/kube-openapi, as apiextensions-apiserver maps its errors onto
//      field.ErrorList): type, x-kubernetes-int-or-string, nullable, minimum/maximum and their
//      exclusive forms, minLength/maxLength, pattern (ECMAScript regex), format date-time, enum,
//      required, minItems/maxItems, minProperties/maxProperties, items, additionalProperties.
//
// NOT done: CEL rules (x-kubernetes-validations are not evaluated: no CEL here), validation
// ratcheting, x-kubernetes-list-type uniqueness, the logical combinators (allOf/anyOf/oneOf/not),
// multipleOf, string formats other than date-time. `format: int32/int64` is not a range check:
// the real server does not check it either (the CRD states explicit bounds instead).
//
// Errors keep the real server's text: field "spec.partitions.max", body "Invalid value: 70000:
// spec.partitions.max in body should be less than or equal to 65536". Properties are visited in
// key order (the real validator's order across properties is Go map order).
//
// Pure functions over web::json::value; thread-safe; no state.
#pragma once

#include <cpprest/json.h>
#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "shoal/common/status.h"
#include "support/fake_kube/fake_api_server.h"

namespace shoal::testing {

// One k8s.io/apimachinery field.Error.
struct FieldError {
  // The StatusCause type: FieldValueInvalid, FieldValueTypeInvalid, FieldValueRequired,
  // FieldValueNotSupported, FieldValueTooLong, FieldValueTooMany.
  std::string type;
  std::string field;  // "spec.partitions.max", "spec.consumer.template.spec.containers[0].name"
  std::string body;   // ErrorBody(): "Invalid value: 70000: spec.partitions.max in body ..."
  std::string ToString() const { return field + ": " + body; }  // Error()
};

// field.ErrorList.ToAggregate().Error(): one message as is; several (duplicates dropped) in
// brackets, joined by ", ".
std::string AggregateMessage(const std::vector<FieldError>& errors);

// YAML to JSON as sigs.k8s.io/yaml converts a manifest (YAML 1.1 plain scalars: quoted scalars
// are strings, plain ones null, bool, int, float or string).
web::json::value YamlToJson(const YAML::Node& node);

// Steps 1 and 2 above on `obj` (the whole object when `root`: metadata is left alone).
void ApplyDefaults(const web::json::value& schema, web::json::value& obj, bool root = true);
// Step 3: drops unknown fields; returns their paths, sorted ("spec.foo", "spec.items[0].bar").
std::vector<std::string> PruneUnknownFields(const web::json::value& schema, web::json::value& obj,
                                            bool root = true);
// Step 4: the errors, empty when `obj` is valid.
std::vector<FieldError> ValidateAgainstSchema(const web::json::value& schema,
                                              const web::json::value& obj, bool root = true);

// A CustomResourceDefinition (apiextensions.k8s.io/v1) as the server serves it: the resource
// type of its storage version (group, version, plural, kind, scope, status and scale
// subresources) and that version's openAPIV3Schema as JSON.
struct CrdResource {
  ResourceType type;
  web::json::value schema;
};
// From a CRD's YAML text; InvalidArgument when it is no CRD or has no storage version.
Result<CrdResource> ParseCrd(const std::string& yaml_text);

}  // namespace shoal::testing
