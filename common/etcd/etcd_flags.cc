#include "common/etcd/etcd_flags.h"

#include <grpcpp/security/credentials.h>

#include "absl/flags/flag.h"
#include "common/security/text_file.h"

ABSL_FLAG(std::vector<std::string>, etcd_endpoints, {},
          "Cluster mode: etcd host:port list (comma-separated; https://host:port with "
          "--etcd-tls-ca). Empty: a single node. A broker follows the cluster's metadata: local "
          "topics it does not know are deleted, so use a new data dir, not a single node's");
ABSL_FLAG(std::string, cluster_name, "default", "Cluster mode: keys live under /conduit/<name>/");
ABSL_FLAG(std::string, etcd_tls_ca, "", "Cluster mode: PEM CA of etcd's certificate (TLS to etcd)");
ABSL_FLAG(std::string, etcd_tls_cert, "",
          "Cluster mode: PEM client certificate for etcd's --client-cert-auth (with "
          "--etcd-tls-key)");
ABSL_FLAG(std::string, etcd_tls_key, "", "Cluster mode: PEM key of --etcd-tls-cert");

namespace conduit::etcd {

absl::StatusOr<EtcdFlags> EtcdFlagsFromCommandLine() {
  EtcdFlags flags;
  flags.endpoints = absl::GetFlag(FLAGS_etcd_endpoints);
  flags.cluster = absl::GetFlag(FLAGS_cluster_name);
  const std::string ca = absl::GetFlag(FLAGS_etcd_tls_ca);
  const std::string cert = absl::GetFlag(FLAGS_etcd_tls_cert);
  const std::string key = absl::GetFlag(FLAGS_etcd_tls_key);
  if (cert.empty() != key.empty()) {
    return absl::InvalidArgumentError("--etcd-tls-cert and --etcd-tls-key go together");
  }
  if (!cert.empty() && ca.empty()) {
    return absl::InvalidArgumentError("--etcd-tls-cert needs --etcd-tls-ca");
  }
  if (ca.empty()) return flags;
  grpc::SslCredentialsOptions ssl;
  auto ca_pem = security::ReadTextFile(ca, "--etcd-tls-ca");
  if (!ca_pem.ok()) return ca_pem.status();
  ssl.pem_root_certs = *std::move(ca_pem);
  if (!cert.empty()) {
    auto cert_pem = security::ReadTextFile(cert, "--etcd-tls-cert");
    if (!cert_pem.ok()) return cert_pem.status();
    auto key_pem = security::ReadTextFile(key, "--etcd-tls-key");
    if (!key_pem.ok()) return key_pem.status();
    ssl.pem_cert_chain = *std::move(cert_pem);
    ssl.pem_private_key = *std::move(key_pem);
  }
  flags.credentials = grpc::SslCredentials(ssl);
  return flags;
}

}  // namespace conduit::etcd
