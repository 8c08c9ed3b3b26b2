// Server-side printing: the meta.k8s.io/v1 Table a real API server answers to a get or list when
// the client asks for it in its Accept header (`application/json;as=Table;v=v1;g=meta.k8s.io`,
// what `kubectl get` sends), so that `kubectl get ptopic` prints the CRD's printer columns. As
// apiextensions-apiserver's tableconvertor does (k8s.io/apiextensions-apiserver
// pkg/registry/customresource/tableconvertor): a Name column, then each
// additionalPrinterColumn evaluated by its JSONPath (integer and number as numbers, date as a
// human age like "5m", missing as an empty cell), each row carrying the object's metadata
// (includeObject=Metadata, the default) or the whole object (includeObject=Object). Types
// without printer columns get Name and Age, as the server's default table does.
// Pure functions; values.
#pragma once

#include <cpprest/json.h>

#include <cstdint>
#include <string>
#include <vector>

namespace shoal::testing {

// One additionalPrinterColumn of a CRD version.
struct PrinterColumn {
  std::string name;
  std::string type;  // integer, number, string, boolean, date
  std::string format;
  std::string description;
  int priority = 0;
  std::string json_path;  // ".status.conditions[?(@.type==\"Ready\")].status"
};

// Whether an Accept header asks for a Table.
bool WantsTable(const std::string& accept);

// The Table of `objects` (a get answers one, a list its items); `list_metadata` is the list's
// metadata (resourceVersion, continue) or null. `include_object` is the request's
// includeObject ("", "None", "Metadata", "Object"). `now_ms`: for the ages.
web::json::value ToTable(const std::vector<web::json::value>& objects,
                         const std::vector<PrinterColumn>& columns,
                         const web::json::value& list_metadata, const std::string& include_object,
                         int64_t now_ms);

// The value at a printer column's JSONPath in `obj` (the subset CRDs use: .a.b, [N], and
// [?(@.key=="value")] filters), or null when absent.
web::json::value EvalJsonPath(const web::json::value& obj, const std::string& path);

}  // namespace shoal::testing
