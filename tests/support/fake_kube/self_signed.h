// A self-signed TLS certificate for the test cluster's secure port: a P-256 key and an X.509 v3
// certificate (CN shoal-test-cluster, subjectAltName IP:127.0.0.1 and DNS:localhost, valid for a
// day, usable as its own CA) written as PEM files, made with OpenSSL's API. Free function.
#pragma once

#include <string>

#include "shoal/common/status.h"

namespace shoal::testing {

// Writes the certificate to `cert_file` and its key to `key_file` (mode 0600).
Status WriteSelfSignedCertificate(const std::string& cert_file, const std::string& key_file);

}  // namespace shoal::testing
