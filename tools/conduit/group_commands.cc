// conduit group list|describe|reset-offsets|delete
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/grpc/proto_time.h"
#include "conduit/coordinator/v1/coordinator.grpc.pb.h"
#include "tools/conduit/cli.h"

namespace conduit::cli {
namespace {

namespace cpb = ::conduit::coordinator::v1;

std::string StateName(cpb::GroupState s) {
  std::string name = cpb::GroupState_Name(s);
  return name.substr(name.rfind('_') + 1);
}

std::string PartitionsText(const google::protobuf::RepeatedPtrField<cpb::TopicPartitions>& in) {
  std::vector<std::string> parts;
  for (const auto& t : in) {
    parts.push_back(absl::StrCat(t.topic(), ":", absl::StrJoin(t.partitions(), ",")));
  }
  return parts.empty() ? "-" : absl::StrJoin(parts, " ");
}

std::string Seconds(double s) {
  if (s < 120) return absl::StrFormat("%.1fs", s);
  if (s < 7200) return absl::StrFormat("%.1fm", s / 60);
  return absl::StrFormat("%.1fh", s / 3600);
}

struct ResetFlags {
  std::string group, topic, to_datetime, actor, reason;
  std::vector<int32_t> partitions;
  bool to_earliest = false, to_latest = false, execute = false;
  std::optional<int64_t> to_offset, shift_by;
};

int Reset(const Globals& g, const ResetFlags& f) {
  cpb::ResetOffsetsRequest req;
  req.set_group_id(f.group);
  req.set_topic(f.topic);
  for (int32_t p : f.partitions) req.add_partitions(p);
  int targets = 0;
  if (f.to_earliest) ++targets, req.set_to_earliest(true);
  if (f.to_latest) ++targets, req.set_to_latest(true);
  if (f.to_offset) ++targets, req.set_to_offset(*f.to_offset);
  if (f.shift_by) ++targets, req.set_shift_by(*f.shift_by);
  if (!f.to_datetime.empty()) {
    absl::Time t;
    if (!ParseTime(f.to_datetime, &t))
      return UsageError(absl::StrCat("bad --to-datetime ", f.to_datetime, ": give ", kTimeFormats));
    ++targets;
    grpc_util::SetTimestamp(t, req.mutable_to_timestamp());
  }
  if (targets != 1) {
    return UsageError(
        "give exactly one of --to-earliest, --to-latest, --to-datetime, --to-offset, --shift-by");
  }
  req.set_execute(f.execute);
  std::string actor = f.actor;
  if (actor.empty()) {
    const char* user = std::getenv("USER");
    actor = absl::StrCat(user ? user : "unknown", " (conduit cli)");
  }
  req.set_actor(actor);
  req.set_reason(f.reason);
  return Call<cpb::ResetOffsetsRequest, cpb::ResetOffsetsResponse>(
      g.Coordinator(), &cpb::GroupCoordinator::Stub::ResetOffsets, req,
      [&f](const cpb::ResetOffsetsResponse& resp) {
        Table t({"TOPIC", "PARTITION", "BEFORE", "AFTER", "OWNER"});
        for (const auto& p : resp.partitions()) {
          t.Add({f.topic, std::to_string(p.partition()),
                 p.had_offset() ? std::to_string(p.before()) : "-", std::to_string(p.after()),
                 p.owner_member_id().empty() ? "-" : p.owner_member_id()});
        }
        t.Print();
        if (resp.executed()) {
          std::printf("applied (audit entry %llu); owners resume from the new offsets\n",
                      static_cast<unsigned long long>(resp.audit_id()));
        } else {
          std::printf("dry run: nothing changed; add --execute to apply\n");
        }
      });
}

using Stub = cpb::GroupCoordinator::Stub;

// The group, its members and the lag of each partition, as tables.
void PrintGroupDescription(const cpb::DescribeGroupResponse& d) {
  std::printf(
      "group %s: %s, epoch %d, %d members, %lld rebalances; max lag %lld "
      "records, %s\n",
      d.group_id().c_str(), StateName(d.state()).c_str(), d.group_epoch(), d.members_size(),
      static_cast<long long>(d.rebalances()), static_cast<long long>(d.max_lag_records()),
      Seconds(d.max_lag_seconds()).c_str());
  if (!d.broker_error().empty()) {
    std::printf("(lag incomplete: %s)\n", d.broker_error().c_str());
  }
  Table members({"MEMBER", "INSTANCE", "CLIENT", "HOST", "EPOCH", "ASSIGNMENT"});
  for (const auto& m : d.members()) {
    members.Add({m.member_id(), m.instance_id().empty() ? "-" : m.instance_id(),
                 m.client_id().empty() ? "-" : m.client_id(), m.client_host(),
                 std::to_string(m.member_epoch()), PartitionsText(m.assignment())});
  }
  members.Print();
  std::puts("");
  Table lag({"TOPIC", "PARTITION", "COMMITTED", "HIGH-WATERMARK", "LAG", "LAG-TIME", "CATCH-UP",
             "OWNER"});
  for (const auto& p : d.partitions()) {
    lag.Add({p.topic(), std::to_string(p.partition()),
             p.has_committed_offset() ? std::to_string(p.committed_offset()) : "-",
             std::to_string(p.high_watermark()), std::to_string(p.lag_records()),
             Seconds(p.lag_seconds()),
             p.has_catch_up_seconds() ? Seconds(p.catch_up_seconds())
                                      : (p.lag_records() ? "never" : "-"),
             p.owner_member_id().empty() ? "-" : p.owner_member_id()});
  }
  lag.Print();
}

void AddGroupList(CLI::App* group, const Globals& g, Action* run) {
  Command(group, "list", "list groups", run, [&g] {
    return [&g] {
      return Call<cpb::ListGroupsRequest, cpb::ListGroupsResponse>(
          g.Coordinator(), &Stub::ListGroups, {}, [](const cpb::ListGroupsResponse& resp) {
            Table t({"GROUP", "STATE", "MEMBERS", "EPOCH"});
            for (const auto& l : resp.groups()) {
              t.Add({l.group_id(), StateName(l.state()), std::to_string(l.members()),
                     std::to_string(l.group_epoch())});
            }
            t.Print();
          });
    };
  });
}

void AddGroupDescribe(CLI::App* group, const Globals& g, Action* run) {
  auto name = std::make_shared<std::string>();
  auto* cmd =
      Command(group, "describe", "members, assignment, lag in records and time", run, [&g, name] {
        return [&g, name] {
          cpb::DescribeGroupRequest req;
          req.set_group_id(*name);
          return Call<cpb::DescribeGroupRequest, cpb::DescribeGroupResponse>(
              g.Coordinator(), &Stub::DescribeGroup, req, PrintGroupDescription);
        };
      });
  cmd->add_option("group", *name, "group id")->required();
}

void AddGroupResetOffsets(CLI::App* group, const Globals& g, Action* run) {
  auto f = std::make_shared<ResetFlags>();
  auto* cmd = group->add_subcommand(
      "reset-offsets", "move a group's committed offsets (a dry run unless --execute)");
  cmd->add_option("group", f->group, "group id")->required();
  cmd->add_option("--topic", f->topic, "topic")->required();
  cmd->add_option("--partitions", f->partitions, "only these partitions")->delimiter(',');
  cmd->add_flag("--to-earliest", f->to_earliest, "to the log start");
  cmd->add_flag("--to-latest", f->to_latest, "to the high watermark (skip the backlog)");
  cmd->add_option("--to-datetime", f->to_datetime, "to the first record appended at or after");
  cmd->add_option("--to-offset", f->to_offset, "to this offset");
  cmd->add_option("--shift-by", f->shift_by, "by N (negative: back), clamped to the log");
  cmd->add_flag("--execute", f->execute, "apply (default: show what would change)");
  cmd->add_option("--actor", f->actor, "who asks, for the audit (default: $USER)");
  cmd->add_option("--reason", f->reason, "why, for the audit");
  cmd->callback([&g, run, f] { *run = [&g, f] { return Reset(g, *f); }; });
}

void AddGroupDelete(CLI::App* group, const Globals& g, Action* run) {
  auto name = std::make_shared<std::string>();
  auto* cmd =
      Command(group, "delete", "delete a group without members, and its offsets", run, [&g, name] {
        return [&g, name] {
          cpb::DeleteGroupRequest req;
          req.set_group_id(*name);
          return Call<cpb::DeleteGroupRequest, cpb::DeleteGroupResponse>(
              g.Coordinator(), &Stub::DeleteGroup, req,
              [&](const auto&) { std::printf("deleted group %s\n", name->c_str()); });
        };
      });
  cmd->add_option("group", *name, "group id")->required();
}

}  // namespace

void AddGroupCommands(CLI::App& app, const Globals& g, Action* run) {
  CLI::App* group = app.add_subcommand("group", "consumer groups: list, describe, reset offsets");
  group->require_subcommand(1);
  AddGroupList(group, g, run);
  AddGroupDescribe(group, g, run);
  AddGroupResetOffsets(group, g, run);
  AddGroupDelete(group, g, run);
}

}  // namespace conduit::cli
