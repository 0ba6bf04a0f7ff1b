#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/security/acl.h"

namespace conduit::security {

// The audit trail's record of one call: who, from where, what, which
// resources, allowed or denied, and how the call ended. Written by the audit interceptor
// (common/grpc/audit_interceptor.h) for every call whose authorise step checked an admin
// operation (IsAdminOperation) or refused the call; kept by services/security.

// One check the authorise step made.
struct AuditCheck {
  ResourceType resource_type = ResourceType::kCluster;
  std::string resource_name;
  Operation operation = Operation::kDescribe;
  bool allowed = false;
  std::string reason;  // the deciding rule, or why the call was refused

  friend bool operator==(const AuditCheck&, const AuditCheck&) = default;
};

struct AuditRecord {
  uint64_t id = 0;  // assigned by the trail, increasing
  absl::Time time;
  std::string principal;  // empty when the caller's token was refused
  std::string peer;       // gRPC's peer address
  std::string method;     // "/conduit.log.v1.LogService/DeleteTopic"
  std::vector<AuditCheck> checks;
  int status_code = 0;  // the gRPC status code the call ended with
  std::string status_message;
  std::vector<std::string> details;  // what the service added (its own audit record)
  bool denied = false;               // the authorise step refused the call

  friend bool operator==(const AuditRecord&, const AuditRecord&) = default;
};

// Where audit records go. Record must not block for long: it runs on the thread that answers
// the call.
class AuditSink {
 public:
  virtual ~AuditSink() = default;
  virtual void Record(AuditRecord record) = 0;
};

// A sink that forwards to another set later: servers install the audit step before the
// component that stores the trail is built. Records before then (or with none set) are dropped.
// Thread-safe.
class AuditRelay final : public AuditSink {
 public:
  void SetSink(std::shared_ptr<AuditSink> sink) {
    absl::MutexLock lock(&mu_);
    sink_ = std::move(sink);
  }
  void Record(AuditRecord record) override {
    std::shared_ptr<AuditSink> sink;
    {
      absl::MutexLock lock(&mu_);
      sink = sink_;
    }
    if (sink != nullptr) sink->Record(std::move(record));
  }

 private:
  absl::Mutex mu_;
  std::shared_ptr<AuditSink> sink_ ABSL_GUARDED_BY(mu_);
};

}  // namespace conduit::security
