#include "services/security/cluster/etcd_acl_store.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/etcd/txn.h"
#include "common/security/acl_file.h"

namespace conduit::security_service {

absl::StatusOr<std::unique_ptr<EtcdAclStore>> EtcdAclStore::Connect(const etcd::EtcdFlags& flags) {
  etcd::ClientOptions options;
  options.credentials = flags.credentials;
  auto client = etcd::Client::Connect(flags.endpoints, options);
  if (!client.ok()) return client.status();
  options.request_timeout = std::min(options.request_timeout, kPollTimeout);
  auto poll_client = etcd::Client::Connect(flags.endpoints, options);
  if (!poll_client.ok()) return poll_client.status();
  return std::unique_ptr<EtcdAclStore>(new EtcdAclStore(*std::move(client), *std::move(poll_client),
                                                       absl::StrCat("/conduit/", flags.cluster,
                                                                    "/acls/")));
}

EtcdAclStore::~EtcdAclStore() { Stop(); }

void EtcdAclStore::Stop() {
  std::unique_ptr<etcd::WatchHandle> watch;
  {
    absl::MutexLock lock(&mu_);
    watch = std::move(watch_);
    changed_ = nullptr;  // a Poll after this starts nothing that calls it
  }
  watch.reset();  // waits until no handler runs
}

absl::StatusOr<std::vector<security::AclEntry>> EtcdAclStore::LoadAcls() {
  auto range = client_->GetPrefix(prefix_);
  if (!range.ok()) return range.status();
  std::string text;
  for (const etcd::KeyValue& kv : range->kvs) {
    absl::StrAppend(&text, absl::string_view(kv.key).substr(prefix_.size()), "\n");
  }
  auto entries = security::ParseAclFile(text);
  if (!entries.ok()) {
    return absl::DataLossError(absl::StrCat("ACLs in etcd: ", entries.status().message()));
  }
  return entries;
}

absl::Status EtcdAclStore::WriteAcls(const std::vector<security::AclEntry>& add,
                                     const std::vector<security::AclEntry>& remove) {
  std::vector<etcd::Op> ops;
  for (const security::AclEntry& e : add) {
    ops.push_back(etcd::Op::Put(prefix_ + security::FormatAclEntry(e), ""));
  }
  for (const security::AclEntry& e : remove) {
    ops.push_back(etcd::Op::Delete(prefix_ + security::FormatAclEntry(e)));
  }
  for (size_t i = 0; i < ops.size(); i += kMaxOpsPerTxn) {
    etcd::Txn txn;
    for (size_t j = i; j < std::min(ops.size(), i + kMaxOpsPerTxn); ++j) txn.Then(ops[j]);
    if (auto result = client_->Commit(txn); !result.ok()) return result.status();
  }
  return absl::OkStatus();
}

absl::Status EtcdAclStore::Follow(std::function<void()> changed) {
  absl::MutexLock lock(&mu_);
  changed_ = std::move(changed);
  return Watch(*client_);
}

void EtcdAclStore::Poll() {
  if (!broken_.load()) return;
  {
    absl::MutexLock lock(&mu_);
    if (!changed_) return;  // not following (stopped)
  }
  std::unique_ptr<etcd::WatchHandle> old;
  std::function<void()> changed;
  {
    absl::MutexLock lock(&mu_);
    old = std::move(watch_);
    changed = changed_;
  }
  old.reset();  // outside mu_: its handlers take no lock, but Cancel waits for them
  absl::MutexLock lock(&mu_);
  if (!Watch(*poll_client_).ok()) return;  // still broken: the next Poll tries again
  if (changed) changed();     // changes may have been missed while it was broken
}

absl::Status EtcdAclStore::Watch(etcd::Client& client) {
  auto now = client.GetPrefix(prefix_);
  if (!now.ok()) {
    broken_ = true;
    return now.status();
  }
  etcd::WatchHandlers handlers;
  std::function<void()> changed = changed_;
  handlers.on_events = [changed](std::vector<etcd::WatchEvent>, int64_t) {
    if (changed) changed();
  };
  std::atomic<bool>* broken = &broken_;
  handlers.on_compacted = [broken](int64_t) { *broken = true; };
  handlers.on_ended = [broken](absl::Status) { *broken = true; };
  auto watch = client.WatchPrefix(prefix_, now->revision + 1, std::move(handlers));
  if (!watch.ok()) {
    broken_ = true;
    return watch.status();
  }
  watch_ = *std::move(watch);
  broken_ = false;
  return absl::OkStatus();
}

}  // namespace conduit::security_service
