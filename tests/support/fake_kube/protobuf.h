// Request bodies in Kubernetes' protobuf encoding (Content-Type
// application/vnd.kubernetes.protobuf), which client-go's typed clients send for built-in kinds
// (Helm's release storage writes its Secrets so): the envelope ("k8s\0" then a runtime.Unknown
// with typeMeta and raw) and the kinds the test cluster takes this way, decoded into the JSON
// the server stores. Field numbers from k8s.io/api core/v1 generated.proto and
// k8s.io/apimachinery meta/v1 generated.proto. Pure functions; values.
#pragma once

#include <cpprest/json.h>

#include <string>

#include "shoal/common/status.h"

namespace shoal::testing {

inline constexpr char kProtobufContentType[] = "application/vnd.kubernetes.protobuf";

// The object a protobuf body holds, as JSON (apiVersion, kind, metadata and the kind's fields).
// Kinds: v1 Secret, ConfigMap and Namespace, authentication.k8s.io/v1 TokenRequest, and
// DeleteOptions (a DELETE's body); other kinds are FailedPrecondition (the server answers 415).
// Malformed bytes are InvalidArgument.
Result<web::json::value> DecodeProtobufObject(const std::string& body);

}  // namespace shoal::testing
