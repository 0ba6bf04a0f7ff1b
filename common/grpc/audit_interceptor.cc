#include "common/grpc/audit_interceptor.h"

#include <grpcpp/support/interceptor.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/grpc/rpc_type.h"

namespace conduit::grpc_util {
namespace {

using grpc::experimental::InterceptionHookPoints;

// Reserved trailing-metadata keys ("-bin": any bytes); removed before the status is sent.
constexpr char kCheckKey[] = "conduit-audit-check-bin";
constexpr char kDetailKey[] = "conduit-audit-detail-bin";

// A check note: principal, resource type, name, operation, allowed, reason; each field
// C-escaped, joined by tabs (an escaped field holds no tab).
std::string EncodeCheck(absl::string_view principal, const security::AuditCheck& check) {
  const std::string fields[] = {
      std::string(principal),    absl::StrCat(static_cast<int>(check.resource_type)),
      check.resource_name,       absl::StrCat(static_cast<int>(check.operation)),
      check.allowed ? "1" : "0", check.reason};
  return absl::StrJoin(fields, "\t", [](std::string* out, const std::string& field) {
    out->append(absl::CEscape(field));
  });
}

// Decodes a check note into `record` (its principal too); false when it is not one.
bool DecodeCheck(absl::string_view note, security::AuditRecord* record) {
  std::vector<std::string> fields = absl::StrSplit(note, '\t');
  if (fields.size() != 6) return false;
  for (std::string& field : fields) {
    std::string raw;
    if (!absl::CUnescape(field, &raw)) return false;
    field = std::move(raw);
  }
  int type = 0, operation = 0;
  if (!absl::SimpleAtoi(fields[1], &type) || !absl::SimpleAtoi(fields[3], &operation)) return false;
  security::AuditCheck check;
  check.resource_type = static_cast<security::ResourceType>(type);
  check.resource_name = std::move(fields[2]);
  check.operation = static_cast<security::Operation>(operation);
  check.allowed = fields[4] == "1";
  check.reason = std::move(fields[5]);
  if (record->checks.empty()) record->principal = fields[0];
  if (!check.allowed) record->denied = true;
  record->checks.push_back(std::move(check));
  return true;
}

class AuditInterceptor : public grpc::experimental::Interceptor {
 public:
  AuditInterceptor(grpc::experimental::ServerRpcInfo* info, security::AuditSink* sink,
                   const time::Clock* clock)
      : info_(info), sink_(sink), clock_(clock) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      Take(methods);
    }
    methods->Proceed();
  }

 private:
  // Removes the notes from the trailing metadata and records them with the call's outcome.
  void Take(grpc::experimental::InterceptorBatchMethods* methods) {
    std::multimap<std::string, std::string>* trailing = methods->GetSendTrailingMetadata();
    if (trailing == nullptr) return;
    security::AuditRecord record;
    bool noted = false;
    for (auto it = trailing->begin(); it != trailing->end();) {
      if (it->first == kCheckKey) {
        DecodeCheck(it->second, &record);
      } else if (it->first == kDetailKey) {
        record.details.push_back(it->second);
      } else {
        ++it;
        continue;
      }
      noted = true;
      it = trailing->erase(it);
    }
    if (!noted) return;
    const grpc::Status status = methods->GetSendStatus();
    record.time = clock_->Now();
    record.method = info_->method();
    if (info_->server_context() != nullptr) record.peer = info_->server_context()->peer();
    record.status_code = static_cast<int>(status.error_code());
    record.status_message = status.error_message();
    sink_->Record(std::move(record));
  }

  grpc::experimental::ServerRpcInfo* const info_;
  security::AuditSink* const sink_;
  const time::Clock* const clock_;
};

class AuditInterceptorFactoryImpl : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  AuditInterceptorFactoryImpl(std::shared_ptr<security::AuditSink> sink, const time::Clock* clock,
                              bool intercept_client_streams)
      : sink_(std::move(sink)),
        clock_(clock),
        intercept_client_streams_(intercept_client_streams) {}

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    if (!intercept_client_streams_ && ReadsAStream(info->type())) return nullptr;
    return new AuditInterceptor(info, sink_.get(), clock_);
  }

 private:
  const std::shared_ptr<security::AuditSink> sink_;
  const time::Clock* const clock_;
  const bool intercept_client_streams_;
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> AuditInterceptorFactory(
    std::shared_ptr<security::AuditSink> sink, const time::Clock* clock,
    bool intercept_client_streams) {
  return std::make_unique<AuditInterceptorFactoryImpl>(std::move(sink), clock,
                                                       intercept_client_streams);
}

void NoteAuditCheck(grpc::ServerContextBase& ctx, absl::string_view principal,
                    const security::AuditCheck& check) {
  ctx.AddTrailingMetadata(kCheckKey, EncodeCheck(principal, check));
}

void NoteAuditDetail(grpc::ServerContextBase& ctx, absl::string_view detail) {
  ctx.AddTrailingMetadata(kDetailKey, std::string(detail));
}

}  // namespace conduit::grpc_util
