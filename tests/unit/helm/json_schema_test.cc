// The JSON Schema validator (tests/support/json_schema.h) that the chart test relies on: each
// keyword accepts what draft-07 accepts and refuses what it refuses, with the path in the error.
#include "support/json_schema.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

namespace shoal::testing {
namespace {

struct Case {
  const char* schema;  // JSON
  const char* doc;     // YAML
  const char* error;   // "" when valid, else a substring of one error
};

std::string Joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += "\n  " + s;
  return out;
}

TEST(JsonSchemaTest, KeywordsAcceptAndRefuse) {
  const Case kCases[] = {
      {R"({"type": "integer"})", "3", ""},
      {R"({"type": "integer"})", "3.0", ""},  // draft-06+: integral numbers are integers
      {R"({"type": "integer"})", "3.5", "must be of type integer"},
      {R"({"type": "integer"})", "\"3\"", "must be of type integer, got string"},
      {R"({"type": "number"})", "2.5e3", ""},
      {R"({"type": "string"})", "abc", ""},
      {R"({"type": "string"})", "\"true\"", ""},
      {R"({"type": "string"})", "true", "got boolean"},
      {R"({"type": "string"})", "yes", "got boolean"},  // YAML 1.1, as Helm reads values
      {R"({"type": "boolean"})", "false", ""},
      {R"({"type": ["string", "number"]})", "100m", ""},
      {R"({"type": ["string", "number"]})", "2", ""},
      {R"({"type": ["string", "number"]})", "[]", "must be of type string or number"},
      {R"({"type": "null"})", "~", ""},
      {R"({"enum": ["a", "b"]})", "b", ""},
      {R"({"enum": ["a", "b"]})", "c", "must be one of"},
      {R"({"enum": [1, 2]})", "2.0", ""},
      {R"({"const": {"a": [1]}})", "{a: [1]}", ""},
      {R"({"const": {"a": [1]}})", "{a: [2]}", "must be {a: [1]}"},
      {R"({"minimum": 1, "maximum": 3})", "3", ""},
      {R"({"minimum": 1})", "0", "must be >= 1"},
      {R"({"maximum": 3})", "4", "must be <= 3"},
      {R"({"exclusiveMinimum": 1})", "1", "must be > 1"},
      {R"({"exclusiveMaximum": 1})", "0.5", ""},
      {R"({"multipleOf": 5})", "12", "multiple of 5"},
      {R"({"minLength": 2, "maxLength": 3})", "\"äö\"", ""},  // code points, not bytes
      {R"({"maxLength": 3})", "abcd", "at most 3 characters"},
      {R"({"minLength": 1})", "\"\"", "at least 1 characters"},
      {R"({"pattern": "^[a-z]+$"})", "abc", ""},
      {R"({"pattern": "^[a-z]+$"})", "aBc", "must match"},
      {R"({"pattern": "b"})", "abc", ""},  // unanchored
      {R"({"items": {"type": "string"}})", "[a, b]", ""},
      {R"({"items": {"type": "string"}})", "[a, 1]", "[1]: must be of type string"},
      {R"({"minItems": 1})", "[]", "at least 1 items"},
      {R"({"maxItems": 1})", "[1, 2]", "at most 1 items"},
      {R"({"uniqueItems": true})", "[1, 2, 1.0]", "[2]: duplicates item 0"},
      {R"({"uniqueItems": true})", "[{a: 1}, {a: 2}]", ""},
      {R"({"properties": {"a": {"type": "integer"}}})", "{a: 1, b: x}", ""},
      {R"({"properties": {"a": {"type": "integer"}}})", "{a: x}", "a: must be of type integer"},
      {R"({"properties": {"a": {}}, "additionalProperties": false})", "{a: 1, b: 2}",
       "b: unknown key"},
      {R"({"additionalProperties": {"type": "string"}})", "{a: x, b: 1}",
       "b: must be of type string"},
      {R"({"required": ["a"]})", "{b: 1}", "a: is required"},
      {R"({"minProperties": 1})", "{}", "at least 1 keys"},
      {R"({"maxProperties": 1})", "{a: 1, b: 2}", "at most 1 keys"},
      {R"({"properties": {"a": {"properties": {"b": {"enum": [1]}}}}})", "{a: {b: 2}}",
       "a.b: must be one of"},
      {R"({"allOf": [{"minimum": 1}, {"maximum": 2}]})", "3", "must be <= 2"},
      {R"({"anyOf": [{"type": "string"}, {"type": "integer"}]})", "1", ""},
      {R"({"anyOf": [{"type": "string"}, {"type": "integer"}]})", "[]", "matches none of anyOf"},
      {R"({"oneOf": [{"minimum": 1}, {"minimum": 2}]})", "1", ""},
      {R"({"oneOf": [{"minimum": 1}, {"minimum": 2}]})", "3", "matches 2"},
      {R"({"not": {"type": "string"}})", "abc", "must not match"},
      {R"({"definitions": {"n": {"type": "integer"}}, "properties": {"a": {"$ref": "#/definitions/n"}}})",
       "{a: x}", "a: must be of type integer"},
      {R"({"properties": {"a": {"$ref": "#/definitions/missing"}}})", "{a: 1}",
       "unresolvable $ref"},
      {R"({"properties": {"a": false}})", "{a: 1}", "a: no value is allowed"},
  };
  for (const auto& c : kCases) {
    SCOPED_TRACE(std::string(c.schema) + " <- " + c.doc);
    const auto errors = ValidateJsonSchema(YAML::Load(c.schema), YAML::Load(c.doc));
    if (std::string(c.error).empty()) {
      EXPECT_TRUE(errors.empty()) << Joined(errors);
      continue;
    }
    bool found = false;
    for (const auto& e : errors) found |= e.find(c.error) != std::string::npos;
    EXPECT_TRUE(found) << "want \"" << c.error << "\", got:" << Joined(errors);
  }
}

TEST(JsonSchemaTest, ReportsKeywordsItDoesNotImplement) {
  const YAML::Node schema = YAML::Load(R"({
    "$schema": "http://json-schema.org/draft-07/schema#", "title": "t", "description": "d",
    "properties": {
      "a": {"type": "string", "format": "email", "default": "x"},
      "b": {"items": [{"type": "string"}]},
      "c": {"type": "object", "patternProperties": {"^x": {}}},
      "d": {"anyOf": [{"if": {}}]}
    }})");
  const auto unsupported = UnsupportedKeywords(schema);
  EXPECT_EQ(unsupported, (std::vector<std::string>{
                             "properties.a: format", "properties.b.items: the tuple form of items",
                             "properties.c: patternProperties", "properties.d.anyOf[0]: if"}))
      << Joined(unsupported);
  EXPECT_TRUE(UnsupportedKeywords(YAML::Load(R"({"type": "object", "properties": {
      "a": {"type": "array", "items": {"enum": [1]}, "uniqueItems": true}},
      "additionalProperties": {"type": "string", "pattern": "x"}})"))
                  .empty());
}

}  // namespace
}  // namespace shoal::testing
