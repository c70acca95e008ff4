// MySQL TLS by config alone (config/cluster_config.h MysqlTlsConfig, the
// adapter cells/mysql_client.cc), against a private MariaDB that requires
// secure transport. The test makes its certificates with the openssl CLI in
// a temp dir: a CA and a server certificate for IP 127.0.0.1 signed by it, a
// client certificate for a user that must present one (REQUIRE X509), and a
// second, unrelated CA.
#include <memory>
#include <string>
#include <vector>

#include "cells/cell_store.h"
#include "cells/mysql_client.h"
#include "config/cluster_config.h"
#include "gtest/gtest.h"
#include "testing/child_process.h"
#include "testing/private_mariadb.h"
#include "testing/test_certificates.h"
#include "testing/test_cluster.h"
#include "testing/wait_for.h"

namespace cellar {
namespace {

constexpr const char* kHost = "tlsdb";

class TlsEnv : public ::testing::Environment {
 public:
  void SetUp() override {
    dir = std::make_unique<testing::TempDir>("tls");
    for (const Status& made :
         {testing::MakeTestCa(*dir, "ca"), testing::MakeTestCa(*dir, "other-ca"),
          testing::MakeTestCertificate(*dir, "server", "ca", "IP:127.0.0.1"),
          testing::MakeTestCertificate(*dir, "client", "ca", "DNS:cellar-client")})
      ASSERT_TRUE(made.ok()) << made.ToString();
    testing::PrivateMariaDbOptions o;
    o.ssl_ca = dir->File("ca.pem");
    o.ssl_cert = dir->File("server.pem");
    o.ssl_key = dir->File("server-key.pem");
    o.require_secure_transport = true;
    try {
      db = testing::PrivateMariaDb::Start("tls", o);
    } catch (const std::exception& e) {
      FAIL() << "cannot start MariaDB: " << e.what();
    }
    ASSERT_TRUE(db->Execute(
        "CREATE USER 'x509'@'127.0.0.1' REQUIRE X509; GRANT ALL ON *.* TO 'x509'@'127.0.0.1'"));
  }
  void TearDown() override {
    db.reset();
    dir.reset();
  }

  std::unique_ptr<testing::TempDir> dir;
  std::unique_ptr<testing::PrivateMariaDb> db;
};

TlsEnv* const env = static_cast<TlsEnv*>(::testing::AddGlobalTestEnvironment(new TlsEnv));

// A cluster config file in the temp dir (so that relative TLS paths resolve
// against it) with `mysql_extra` lines under mysql: and `host_extra` inside
// the host's flow map.
Result<ClusterConfig> Config(const std::string& mysql_extra, const std::string& host_extra = "",
                             const std::string& user = "root") {
  const std::string yaml = "shards: 4\nmysql:\n  user: " + user + "\n" + mysql_extra +
                           "  hosts:\n    - { name: " + kHost +
                           ", address: 127.0.0.1, port: " + std::to_string(env->db->port()) +
                           ", shards: \"0-3\"" + host_extra +
                           " }\ndatastores:\n  - name: trips\n    columns: { BASE: {} }\n";
  static int n = 0;
  const std::string path = env->dir->File("cellar-" + std::to_string(++n) + ".yaml");
  FILE* f = fopen(path.c_str(), "w");
  if (f == nullptr) return Internal("cannot write " + path);
  fputs(yaml.c_str(), f);
  fclose(f);
  return LoadClusterConfig(path);
}

Result<std::unique_ptr<MysqlConnection>> Connect(const ClusterConfig& cfg) {
  return MysqlConnection::Connect(EndpointFor(cfg, cfg.mysql.hosts[0]));
}

TEST(CellsTls, StoreWritesAndReadsOverVerifiedTls) {
  // Relative file names resolve against the config file's directory.
  auto cfg = Config("  tls: { ca: ca.pem, mode: verify_ca }\n");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  EXPECT_EQ(MysqlTlsMode::kVerifyCa, cfg->mysql.hosts[0].tls.mode);
  EXPECT_EQ(env->dir->File("ca.pem"), cfg->mysql.hosts[0].tls.ca);

  auto store = CellStore::Open(*cfg);
  ASSERT_TRUE(store->Init().ok());  // what `cellar init` runs
  const Uuid row = Uuid::Random();
  auto put = store->Put("trips", CellWrite{row, "BASE", 1, nlohmann::json{{"over", "tls"}}});
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  auto got = store->Get("trips", row, "BASE", 1);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ("tls", got->body["over"]);

  auto conn = Connect(*cfg);
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();
  auto cipher = (*conn)->TlsCipher();
  ASSERT_TRUE(cipher.ok()) << cipher.status().ToString();
  EXPECT_NE("", *cipher);
}

TEST(CellsTls, PlainConnectionIsRefusedByTheServer) {
  auto cfg = Config("");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  EXPECT_FALSE(cfg->mysql.hosts[0].tls.enabled());
  auto conn = Connect(*cfg);
  ASSERT_FALSE(conn.ok());
  EXPECT_EQ(StatusCode::kUnavailable, conn.status().code());
  EXPECT_NE(std::string::npos, conn.status().message().find(kHost)) << conn.status().ToString();
  EXPECT_NE(std::string::npos,
            conn.status().message().find("requires TLS (require_secure_transport)"))
      << conn.status().ToString();
  auto store = CellStore::Open(*cfg);
  EXPECT_EQ(StatusCode::kUnavailable, store->Init().code());
}

TEST(CellsTls, WrongCaFailsNamingHostAndTls) {
  // A per-host block overrides mysql.tls.
  auto cfg = Config("  tls: { ca: ca.pem, mode: verify_ca }\n",
                    ", tls: { ca: other-ca.pem, mode: verify_ca }");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  auto conn = Connect(*cfg);
  ASSERT_FALSE(conn.ok());
  EXPECT_EQ(StatusCode::kUnavailable, conn.status().code());
  const std::string msg = conn.status().message();
  EXPECT_NE(std::string::npos, msg.find(kHost)) << msg;
  EXPECT_NE(std::string::npos, msg.find("TLS")) << msg;
  EXPECT_NE(std::string::npos, msg.find("other-ca.pem")) << msg;
  auto store = CellStore::Open(*cfg);
  auto put = store->Put("trips", CellWrite{Uuid::Random(), "BASE", 1, nlohmann::json{{"a", 1}}});
  EXPECT_EQ(StatusCode::kUnavailable, put.status().code()) << put.status().ToString();
}

TEST(CellsTls, RequiredEncryptsWithoutCheckingTheCertificate) {
  auto cfg = Config("  tls: { mode: required }\n");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  auto conn = Connect(*cfg);
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();
  auto cipher = (*conn)->TlsCipher();
  ASSERT_TRUE(cipher.ok());
  EXPECT_NE("", *cipher);
}

TEST(CellsTls, VerifyIdentityChecksTheAddress) {
  // The default mode of a tls block. The server certificate names IP 127.0.0.1.
  auto cfg = Config("  tls: { ca: ca.pem }\n");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  EXPECT_EQ(MysqlTlsMode::kVerifyIdentity, cfg->mysql.hosts[0].tls.mode);
  auto conn = Connect(*cfg);
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();
  // 127.1 reaches the same server, but the certificate does not name it.
  cfg->mysql.hosts[0].address = "127.1";
  auto other = Connect(*cfg);
  ASSERT_FALSE(other.ok());
  EXPECT_NE(std::string::npos, other.status().message().find("TLS")) << other.status().ToString();
  cfg->mysql.hosts[0].tls.mode = MysqlTlsMode::kVerifyCa;
  EXPECT_TRUE(Connect(*cfg).ok());
}

TEST(CellsTls, ClientCertificateIsPresented) {
  auto cfg = Config("  tls: { ca: ca.pem, cert: client.pem, key: client-key.pem }\n", "", "x509");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  auto conn = Connect(*cfg);
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();
  // Without the certificate the server refuses that user.
  auto bare = Config("  tls: { ca: ca.pem }\n", "", "x509");
  ASSERT_TRUE(bare.ok());
  EXPECT_FALSE(Connect(*bare).ok());
}

TEST(CellsTls, ConfigErrorsNameTheKeyAndFile) {
  auto missing = Config("  tls: { ca: no-such-ca.pem, mode: verify_ca }\n");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(std::string::npos, missing.status().message().find("mysql.tls.ca"))
      << missing.status().ToString();
  EXPECT_NE(std::string::npos, missing.status().message().find("no-such-ca.pem"));
  auto host = Config("", ", tls: { ca: ca.pem, cert: gone.pem, key: client-key.pem }");
  ASSERT_FALSE(host.ok());
  EXPECT_NE(std::string::npos, host.status().message().find("mysql.hosts[0].tls.cert"))
      << host.status().ToString();
  EXPECT_NE(std::string::npos, host.status().message().find("gone.pem"));
  auto mode = Config("  tls: { ca: ca.pem, mode: paranoid }\n");
  ASSERT_FALSE(mode.ok());
  EXPECT_NE(std::string::npos, mode.status().message().find("mysql.tls.mode"));
  auto no_ca = Config("  tls: { mode: verify_ca }\n");
  ASSERT_FALSE(no_ca.ok());
  EXPECT_NE(std::string::npos, no_ca.status().message().find("mysql.tls.ca"));
  auto half = Config("  tls: { ca: ca.pem, cert: client.pem }\n");
  ASSERT_FALSE(half.ok());
  EXPECT_NE(std::string::npos, half.status().message().find("mysql.tls.key"));
}

}  // namespace
}  // namespace cellar
