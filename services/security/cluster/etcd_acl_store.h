#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/etcd/etcd_client.h"
#include "common/etcd/etcd_flags.h"
#include "services/security/domain/security_store.h"

namespace conduit::security_service {

// The stored ACL entries of a cluster, in etcd, so that every broker decides by the same
// entries: one key per entry, /conduit/<cluster>/acls/<the entry in the ACL file format>, value
// empty. A change is one Txn of at most kMaxOpsPerTxn puts and deletes (etcd's --max-txn-ops
// default); a larger change is several Txns, each atomic. Thread-safe.
class EtcdAclStore final : public AclStore {
 public:
  static constexpr size_t kMaxOpsPerTxn = 128;

  static absl::StatusOr<std::unique_ptr<EtcdAclStore>> Connect(const etcd::EtcdFlags& flags);
  ~EtcdAclStore() override;

  absl::StatusOr<std::vector<security::AclEntry>> LoadAcls() override;
  absl::Status WriteAcls(const std::vector<security::AclEntry>& add,
                         const std::vector<security::AclEntry>& remove) override;

  // Follows the entries from now on: `changed` runs (on gRPC's threads: keep it short, hand the
  // reload off) after every change under the prefix, this server's or another's, and when the
  // watch broke (etcd unreachable, compacted), since changes may have been missed then.
  absl::Status Follow(std::function<void()> changed);
  // Restarts a broken watch; call periodically (never from `changed`).
  void Poll();
  // Ends the watch and waits until `changed` no longer runs. Also done by the destructor.
  void Stop();

 private:
  // Bound on each of Poll's calls to etcd: Stop waits for a Poll in progress, and an etcd that
  // went away must not hold up a server's exit for a whole request timeout.
  static constexpr absl::Duration kPollTimeout = absl::Seconds(1);

  EtcdAclStore(std::unique_ptr<etcd::Client> client, std::unique_ptr<etcd::Client> poll_client,
               std::string prefix)
      : client_(std::move(client)),
        poll_client_(std::move(poll_client)),
        prefix_(std::move(prefix)) {}
  // Watches from the current revision + 1 through `client`, replacing the previous watch.
  absl::Status Watch(etcd::Client& client) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::unique_ptr<etcd::Client> client_;
  const std::unique_ptr<etcd::Client> poll_client_;  // requests bounded by kPollTimeout
  const std::string prefix_;
  absl::Mutex mu_;
  std::function<void()> changed_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<etcd::WatchHandle> watch_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> broken_{false};
};

}  // namespace conduit::security_service
