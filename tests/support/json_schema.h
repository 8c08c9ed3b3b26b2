// A JSON Schema (draft-07) validator for the subset the Helm chart's values.schema.json uses, so
// that a test can check values files the way `helm install` and `helm lint` would, without Helm.
//
// Documents and schemas are YAML::Nodes (JSON text parses as YAML). Scalars are typed as Helm
// sees values.yaml after YAML -> JSON (YAML 1.1 plain scalars, as sigs.k8s.io/yaml reads them):
// a quoted scalar is a string; a plain one is null, a boolean (true, yes, on, ...), an integer,
// a number or a string.
//
// Keywords implemented: type (a name or a list), enum, const, properties, required,
// additionalProperties (a boolean or a schema), minProperties, maxProperties, items (one schema),
// minItems, maxItems, uniqueItems, minimum, maximum, exclusiveMinimum, exclusiveMaximum (numbers,
// as in draft-06 and later), multipleOf, minLength, maxLength (in code points), pattern
// (ECMAScript, unanchored), allOf, anyOf, oneOf, not, and $ref to "#" or "#/definitions/NAME".
// Annotations ($schema, $id, $comment, title, description, default, examples, definitions) are
// ignored. Any other keyword is reported by UnsupportedKeywords: a schema that uses one would get
// a verdict that silently ignored it, so tests refuse such a schema first.
//
// Stateless functions; thread-safe.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

namespace shoal::testing {

// Keywords in `schema` (walked through every subschema) that ValidateJsonSchema does not
// implement, as "path: keyword". Empty when the validator's verdicts are complete.
std::vector<std::string> UnsupportedKeywords(const YAML::Node& schema);

// Every way `doc` breaks `schema`, as "path: what" (path "(root)", "operator.replicas",
// "imagePullSecrets[0].name"). Empty when it validates.
std::vector<std::string> ValidateJsonSchema(const YAML::Node& schema, const YAML::Node& doc);

}  // namespace shoal::testing
