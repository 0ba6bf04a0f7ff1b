#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/etcd/etcd_client.h"

namespace conduit::etcd {

// The etcd a server uses in cluster mode, from its flags: --etcd-endpoints (empty: a single
// node), --cluster-name (keys under /conduit/<name>/), and TLS to etcd: --etcd-tls-ca (etcd's
// CA; TLS on), --etcd-tls-cert/--etcd-tls-key (a client certificate, for etcd's
// --client-cert-auth). Shared by every component that keeps state in etcd (the log broker's
// cluster metadata, the security service's ACLs).
struct EtcdFlags {
  std::vector<std::string> endpoints;
  std::string cluster;
  std::shared_ptr<grpc::ChannelCredentials> credentials;  // null: plaintext

  bool enabled() const { return !endpoints.empty(); }
};

// The flags, TLS files read: INVALID_ARGUMENT for a key without a certificate (or the reverse)
// or a certificate without --etcd-tls-ca; the read error of a missing file.
absl::StatusOr<EtcdFlags> EtcdFlagsFromCommandLine();

}  // namespace conduit::etcd
