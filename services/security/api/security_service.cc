#include "services/security/api/security_service.h"

#include "absl/strings/str_cat.h"
#include "common/grpc/reply.h"
#include "common/grpc/status.h"
#include "services/security/api/convert.h"

namespace conduit::security_service::api {
namespace {

spb::AclSource ToProto(AclSource source) {
  return source == AclSource::kFile ? spb::ACL_SOURCE_FILE : spb::ACL_SOURCE_STORED;
}

}  // namespace

grpc::ServerUnaryReactor* SecurityService::CreateAcls(grpc::CallbackServerContext* ctx,
                                                      const spb::CreateAclsRequest* request,
                                                      spb::CreateAclsResponse* response) {
  if (auto s = guard_.CheckCluster(*ctx, security::Operation::kAlter); !s.ok())
    return grpc_util::FinishNow(ctx, s);
  std::vector<security::AclEntry> entries;
  for (int i = 0; i < request->entries_size(); ++i) {
    auto entry = FromProto(request->entries(i), absl::StrCat("entries[", i, "]"));
    if (!entry.ok()) return grpc_util::FinishNow(ctx, entry.status());
    entries.push_back(*std::move(entry));
  }
  for (const security::AclEntry& e : entries) {
    guard_.AuditDetail(*ctx, absl::StrCat("create acl '", security::FormatAclEntry(e), "'"));
  }
  auto created = acls_->Create(std::move(entries));
  if (created.ok()) response->set_created(static_cast<uint32_t>(*created));
  return grpc_util::FinishNow(ctx, created.status());
}

grpc::ServerUnaryReactor* SecurityService::DeleteAcls(grpc::CallbackServerContext* ctx,
                                                      const spb::DeleteAclsRequest* request,
                                                      spb::DeleteAclsResponse* response) {
  if (auto s = guard_.CheckCluster(*ctx, security::Operation::kAlter); !s.ok())
    return grpc_util::FinishNow(ctx, s);
  std::vector<AclFilter> filters;
  for (int i = 0; i < request->filters_size(); ++i) {
    auto filter = FromProto(request->filters(i), absl::StrCat("filters[", i, "]"));
    if (!filter.ok()) return grpc_util::FinishNow(ctx, filter.status());
    filters.push_back(*std::move(filter));
  }
  auto deleted = acls_->Delete(filters);
  if (!deleted.ok()) return grpc_util::FinishNow(ctx, deleted.status());
  for (const security::AclEntry& e : *deleted) {
    guard_.AuditDetail(*ctx, absl::StrCat("delete acl '", security::FormatAclEntry(e), "'"));
    ToProto(e, response->add_deleted());
  }
  return grpc_util::FinishNow(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* SecurityService::ListAcls(grpc::CallbackServerContext* ctx,
                                                    const spb::ListAclsRequest* request,
                                                    spb::ListAclsResponse* response) {
  if (auto s = guard_.CheckCluster(*ctx, security::Operation::kDescribe); !s.ok())
    return grpc_util::FinishNow(ctx, s);
  auto filter = FromProto(request->filter(), "filter");
  if (!filter.ok()) return grpc_util::FinishNow(ctx, filter.status());
  for (const ListedAcl& acl : acls_->List(*filter)) {
    spb::ListedAcl* out = response->add_acls();
    ToProto(acl.entry, out->mutable_entry());
    out->set_source(ToProto(acl.source));
    out->set_text(security::FormatAclEntry(acl.entry));
  }
  return grpc_util::FinishNow(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* SecurityService::ListAudit(grpc::CallbackServerContext* ctx,
                                                     const spb::ListAuditRequest* request,
                                                     spb::ListAuditResponse* response) {
  if (auto s = guard_.CheckCluster(*ctx, security::Operation::kDescribe); !s.ok())
    return grpc_util::FinishNow(ctx, s);
  auto query = FromProto(*request);
  if (!query.ok()) return grpc_util::FinishNow(ctx, query.status());
  auto page = audit_->List(*query);
  if (!page.ok()) return grpc_util::FinishNow(ctx, page.status());
  for (const security::AuditRecord& r : page->records) ToProto(r, response->add_entries());
  response->set_next_after_id(page->next_after_id);
  return grpc_util::FinishNow(ctx, absl::OkStatus());
}

}  // namespace conduit::security_service::api
