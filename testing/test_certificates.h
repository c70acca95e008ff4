// Test certificates made with the openssl CLI: a self-signed CA and
// certificates it signs, EC keys (P-256) written as unencrypted PKCS#8, the
// form MariaDB, librdkafka and Kafka's PEM keystore all read.
#pragma once

#include <string>

#include "base/status.h"
#include "testing/test_cluster.h"

namespace cellar::testing {

// <name>.pem (self-signed, CN=<name>, two days) and <name>-key.pem in `dir`.
// Internal naming openssl's output when it fails.
Status MakeTestCa(const TempDir& dir, const std::string& name);

// <name>.pem and <name>-key.pem in `dir`, signed by <ca>.pem / <ca>-key.pem
// there, with subjectAltName `san` (e.g. "IP:127.0.0.1", "DNS:client").
// Internal naming openssl's output when it fails.
Status MakeTestCertificate(const TempDir& dir, const std::string& name, const std::string& ca,
                           const std::string& san);

}  // namespace cellar::testing
