// conduit acl add|rm|ls, conduit audit
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/grpc/proto_time.h"
#include "common/security/acl.h"
#include "common/security/acl_file.h"
#include "conduit/security/v1/security.grpc.pb.h"
#include "tools/conduit/cli.h"

namespace conduit::cli {
namespace {

namespace spb = ::conduit::security::v1;
using Stub = spb::Security::Stub;

// The proto enums are the security library's shifted by one (0: unspecified).
template <typename T>
int ProtoEnum(T value) {
  return static_cast<int>(value) + 1;
}

spb::AclEntry ToProto(const security::AclEntry& e) {
  spb::AclEntry out;
  out.set_principal(e.principal);
  out.set_resource_type(static_cast<spb::ResourceType>(ProtoEnum(e.resource_type)));
  out.set_pattern_type(static_cast<spb::PatternType>(ProtoEnum(e.pattern_type)));
  out.set_resource_name(e.resource_name);
  out.set_operation(static_cast<spb::Operation>(ProtoEnum(e.operation)));
  out.set_permission(static_cast<spb::Permission>(ProtoEnum(e.permission)));
  return out;
}

// "allow User:bob topic prefixed orders. Write" (the ACL file's format).
std::string RuleText(const spb::AclEntry& e) {
  security::AclEntry entry;
  entry.principal = e.principal();
  entry.resource_type = static_cast<security::ResourceType>(e.resource_type() - 1);
  entry.pattern_type = static_cast<security::PatternType>(e.pattern_type() - 1);
  entry.resource_name = e.resource_name();
  entry.operation = static_cast<security::Operation>(e.operation() - 1);
  entry.permission = static_cast<security::Permission>(e.permission() - 1);
  return security::FormatAclEntry(entry);
}

// The filter flags of `acl rm` and `acl ls`, as words of the file format.
struct FilterFlags {
  std::string principal, type, pattern, name, operation, permission;

  void Add(CLI::App* cmd) {
    cmd->add_option("--principal", principal, "only entries of this principal (User:bob, *)");
    cmd->add_option("--type", type, "only this resource type: topic, group, queue, cluster");
    cmd->add_option("--pattern", pattern, "only this pattern: literal, prefixed, any");
    cmd->add_option("--name", name, "only entries with exactly this resource name or prefix");
    cmd->add_option("--operation", operation, "only this operation (Read, Write, ...)");
    cmd->add_option("--permission", permission, "only allow or deny entries");
  }
  bool empty() const {
    return principal.empty() && type.empty() && pattern.empty() && name.empty() &&
           operation.empty() && permission.empty();
  }
  // The filter, or a usage error message in `error`.
  spb::AclFilter Build(std::string* error) const {
    spb::AclFilter f;
    f.set_principal(principal);
    f.set_resource_name(name);
    auto parse = [error](const std::string& text, const char* flag, auto parse_fn, auto set) {
      if (text.empty()) return;
      auto v = parse_fn(text);
      if (!v) {
        *error = absl::StrCat(flag, ": unknown value '", text, "'");
        return;
      }
      set(ProtoEnum(*v));
    };
    parse(type, "--type", security::ParseResourceType,
          [&](int v) { f.set_resource_type(static_cast<spb::ResourceType>(v)); });
    parse(pattern, "--pattern", security::ParsePatternType,
          [&](int v) { f.set_pattern_type(static_cast<spb::PatternType>(v)); });
    parse(operation, "--operation", security::ParseOperation,
          [&](int v) { f.set_operation(static_cast<spb::Operation>(v)); });
    parse(permission, "--permission", security::ParsePermission,
          [&](int v) { f.set_permission(static_cast<spb::Permission>(v)); });
    return f;
  }
};

void AddAclAdd(CLI::App* acl, const Globals& g, Action* run) {
  auto words = std::make_shared<std::vector<std::string>>();
  auto* cmd = Command(
      acl, "add", "store ACL entries: allow|deny PRINCIPAL TYPE PATTERN NAME OP[,OP...]", run,
      [&g, words] {
        return [&g, words] {
          auto entries = security::ParseAclFile(absl::StrJoin(*words, " "));
          if (!entries.ok()) return UsageError(std::string(entries.status().message()));
          if (entries->empty())
            return UsageError(
                "give a rule, e.g. allow User:bob topic "
                "prefixed orders. Write,Read");
          spb::CreateAclsRequest req;
          for (const security::AclEntry& e : *entries) *req.add_entries() = ToProto(e);
          return Call<spb::CreateAclsRequest, spb::CreateAclsResponse>(
              g, &Stub::CreateAcls, req, [n = entries->size()](const spb::CreateAclsResponse& r) {
                std::printf("stored %u new ACL entries (%zu given)\n", r.created(), n);
              });
        };
      });
  cmd->add_option("rule", *words, "the rule, as a line of the ACL file")->required();
}

void AddAclRm(CLI::App* acl, const Globals& g, Action* run) {
  auto flags = std::make_shared<FilterFlags>();
  auto all = std::make_shared<bool>(false);
  auto* cmd = Command(acl, "rm", "delete the stored ACL entries matching the filter", run,
                      [&g, flags, all] {
                        return [&g, flags, all] {
                          if (flags->empty() && !*all) {
                            return UsageError("give a filter flag, or --all for every entry");
                          }
                          std::string error;
                          spb::DeleteAclsRequest req;
                          *req.add_filters() = flags->Build(&error);
                          if (!error.empty()) return UsageError(error);
                          return Call<spb::DeleteAclsRequest, spb::DeleteAclsResponse>(
                              g, &Stub::DeleteAcls, req, [](const spb::DeleteAclsResponse& r) {
                                for (const auto& e : r.deleted()) {
                                  std::printf("deleted %s\n", RuleText(e).c_str());
                                }
                                std::printf("%d entries deleted\n", r.deleted_size());
                              });
                        };
                      });
  flags->Add(cmd);
  cmd->add_flag("--all", *all, "every stored entry");
}

void AddAclLs(CLI::App* acl, const Globals& g, Action* run) {
  auto flags = std::make_shared<FilterFlags>();
  auto* cmd = Command(
      acl, "ls", "list ACL entries (the bootstrap file's and the stored)", run, [&g, flags] {
        return [&g, flags] {
          std::string error;
          spb::ListAclsRequest req;
          *req.mutable_filter() = flags->Build(&error);
          if (!error.empty()) return UsageError(error);
          return Call<spb::ListAclsRequest, spb::ListAclsResponse>(
              g, &Stub::ListAcls, req, [](const spb::ListAclsResponse& r) {
                Table t({"SOURCE", "RULE"});
                for (const auto& a : r.acls()) {
                  t.Add({a.source() == spb::ACL_SOURCE_FILE ? "file" : "stored", a.text()});
                }
                t.Print();
              });
        };
      });
  flags->Add(cmd);
}

std::string ChecksText(const spb::AuditEntry& e) {
  std::vector<std::string> parts;
  for (const auto& c : e.checks()) {
    parts.push_back(absl::StrCat(
        security::OperationName(static_cast<security::Operation>(c.operation() - 1)), " ",
        security::ResourceTypeName(static_cast<security::ResourceType>(c.resource_type() - 1)), " ",
        c.resource_name(), c.allowed() ? "" : " DENIED"));
  }
  return parts.empty() ? "-" : absl::StrJoin(parts, "; ");
}

void AddAudit(CLI::App& app, const Globals& g, Action* run) {
  auto req = std::make_shared<spb::ListAuditRequest>();
  auto since = std::make_shared<std::string>();
  auto limit = std::make_shared<uint32_t>(100);
  auto* cmd = Command(
      &app, "audit",
      "the audit trail: admin calls and refused calls (who, from where, what, outcome)", run,
      [&g, req, since, limit] {
        return [&g, req, since, limit]() -> int {
          if (!since->empty()) {
            absl::Time t;
            if (!ParseTime(*since, &t))
              return UsageError(absl::StrCat("--since takes ", kTimeFormats));
            grpc_util::SetTimestamp(t, req->mutable_since());
          }
          Stub stub(g.Channel());
          spb::ListAuditResponse all;
          // Pages until --limit entries or the end of the trail.
          while (static_cast<uint32_t>(all.entries_size()) < *limit) {
            req->set_limit(std::min<uint32_t>(1000, *limit - all.entries_size()));
            spb::ListAuditResponse page;
            if (auto s = stub.ListAudit(g.Context().get(), *req, &page); !s.ok()) return Fail(s);
            all.mutable_entries()->MergeFrom(page.entries());
            if (page.next_after_id() == 0) break;
            req->set_after_id(page.next_after_id());
          }
          if (g.json()) {
            PrintJson(all);
            return kExitOk;
          }
          Table t({"ID", "TIME", "PRINCIPAL", "PEER", "METHOD", "CHECKS", "STATUS", "DETAILS"});
          for (const auto& e : all.entries()) {
            const std::string method = e.method().substr(e.method().rfind('/') + 1);
            t.Add({std::to_string(e.id()), TimeText(grpc_util::FromTimestamp(e.time())),
                   e.principal().empty() ? "(bad token)" : e.principal(), e.peer(), method,
                   ChecksText(e),
                   e.status_code() == 0
                       ? "OK"
                       : absl::StrCat(e.status_code(), ": ", e.status_message().substr(0, 60)),
                   e.details().empty() ? "-" : absl::StrJoin(e.details(), "; ")});
          }
          t.Print();
          return kExitOk;
        };
      });
  cmd->add_option_function<std::string>(
      "--principal", [req](const std::string& v) { req->set_principal(v); },
      "only this principal's calls");
  cmd->add_option_function<std::string>(
      "--resource", [req](const std::string& v) { req->set_resource_name(v); },
      "only calls that checked a resource of this name");
  cmd->add_flag_function(
      "--denied", [req](int64_t n) { req->set_denied_only(n > 0); }, "only refused calls");
  cmd->add_option("--since", *since, "only entries from this time (RFC 3339 or Unix seconds)");
  cmd->add_option_function<uint64_t>(
      "--after", [req](uint64_t v) { req->set_after_id(v); }, "only entries after this id");
  cmd->add_option("--limit", *limit, "at most this many entries (default 100)");
}

}  // namespace

void AddSecurityCommands(CLI::App& app, const Globals& g, Action* run) {
  CLI::App* acl = app.add_subcommand("acl", "ACL entries: add, rm, ls");
  acl->require_subcommand(1);
  AddAclAdd(acl, g, run);
  AddAclRm(acl, g, run);
  AddAclLs(acl, g, run);
  AddAudit(app, g, run);
}

}  // namespace conduit::cli
