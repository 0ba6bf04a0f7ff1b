// conduit bridge create|list|describe|pause|resume|delete
#include <cstdio>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "conduit/queue/v1/bridge.grpc.pb.h"
#include "tools/conduit/cli.h"

namespace conduit::cli {
namespace {

namespace bpb = ::conduit::queue::v1;
using Stub = bpb::Bridges::Stub;

const char* StateText(bpb::BridgeState s) {
  switch (s) {
    case bpb::BRIDGE_STATE_RUNNING:
      return "running";
    case bpb::BRIDGE_STATE_PAUSED:
      return "paused";
    case bpb::BRIDGE_STATE_BACKING_OFF:
      return "backing-off";
    case bpb::BRIDGE_STATE_FAILING:
      return "failing";
    default:
      return "unknown";
  }
}

std::string FilterText(const bpb::BridgeSpec& s) {
  std::string out;
  if (!s.filter().key_prefix().empty()) absl::StrAppend(&out, "key^=", s.filter().key_prefix());
  if (!s.filter().header().empty()) {
    absl::StrAppend(&out, out.empty() ? "" : " ", s.filter().header(), "=",
                    s.filter().header_value());
  }
  return out.empty() ? "-" : out;
}

void AddCreate(CLI::App* bridge, const Globals& g, Action* run) {
  auto req = std::make_shared<bpb::CreateBridgeRequest>();
  auto header = std::make_shared<std::string>();
  auto* cmd =
      Command(bridge, "create", "turn each record of a topic into a job of a queue", run,
              [&g, req, header] {
                return [&g, req, header] {
                  if (!header->empty()) {
                    const size_t eq = header->find('=');
                    if (eq == std::string::npos) return UsageError("--header takes NAME=VALUE");
                    req->mutable_spec()->mutable_filter()->set_header(header->substr(0, eq));
                    req->mutable_spec()->mutable_filter()->set_header_value(header->substr(eq + 1));
                  }
                  return Call<bpb::CreateBridgeRequest, bpb::CreateBridgeResponse>(
                      g.Queue(), &Stub::CreateBridge, *req,
                      [](const bpb::CreateBridgeResponse& resp) {
                        const auto& s = resp.bridge().spec();
                        std::printf("created bridge %s: topic %s (group %s) -> queue %s\n",
                                    s.name().c_str(), s.topic().c_str(), s.group().c_str(),
                                    s.queue().c_str());
                      });
                };
              });
  bpb::BridgeSpec* spec = req->mutable_spec();
  cmd->add_option_function<std::string>(
         "name", [spec](const std::string& v) { spec->set_name(v); }, "bridge name")
      ->required();
  cmd->add_option_function<std::string>(
         "--topic", [spec](const std::string& v) { spec->set_topic(v); }, "topic to read")
      ->required();
  cmd->add_option_function<std::string>(
         "--queue", [spec](const std::string& v) { spec->set_queue(v); }, "queue to fill")
      ->required();
  cmd->add_option_function<std::string>(
      "--group", [spec](const std::string& v) { spec->set_group(v); },
      "consumer group (default bridge.<name>)");
  cmd->add_option_function<std::string>(
      "--key-prefix", [spec](const std::string& v) { spec->mutable_filter()->set_key_prefix(v); },
      "only records whose key starts with this");
  cmd->add_option("--header", *header, "only records with this header value, NAME=VALUE");
  cmd->add_option_function<std::string>(
      "--tenant-header", [spec](const std::string& v) { spec->set_tenant_header(v); },
      "the job's tenant comes from this header");
  cmd->add_option_function<std::string>(
      "--priority-header", [spec](const std::string& v) { spec->set_priority_header(v); },
      "the job's priority comes from this header (an int32)");
}

void AddList(CLI::App* bridge, const Globals& g, Action* run) {
  Command(bridge, "list", "list bridges", run, [&g] {
    return [&g] {
      return Call<bpb::ListBridgesRequest, bpb::ListBridgesResponse>(
          g.Queue(), &Stub::ListBridges, {}, [](const bpb::ListBridgesResponse& resp) {
            Table t({"BRIDGE", "TOPIC", "GROUP", "QUEUE", "FILTER", "STATE", "BRIDGED"});
            for (const auto& b : resp.bridges()) {
              const auto& s = b.spec();
              t.Add({s.name(), s.topic(), s.group(), s.queue(), FilterText(s), StateText(b.state()),
                     std::to_string(b.records_bridged())});
            }
            t.Print();
          });
    };
  });
}

void AddDescribe(CLI::App* bridge, const Globals& g, Action* run) {
  auto req = std::make_shared<bpb::DescribeBridgeRequest>();
  auto* cmd = Command(bridge, "describe", "state, counts, lag and the last error", run, [&g, req] {
    return [&g, req] {
      return Call<bpb::DescribeBridgeRequest, bpb::DescribeBridgeResponse>(
          g.Queue(), &Stub::DescribeBridge, *req, [](const bpb::DescribeBridgeResponse& resp) {
            const auto& b = resp.bridge();
            const auto& s = b.spec();
            std::printf("bridge %s: topic %s (group %s) -> queue %s, filter %s\n", s.name().c_str(),
                        s.topic().c_str(), s.group().c_str(), s.queue().c_str(),
                        FilterText(s).c_str());
            std::printf("state %s, %lld bridged, %lld filtered\n", StateText(b.state()),
                        static_cast<long long>(b.records_bridged()),
                        static_cast<long long>(b.records_filtered()));
            if (b.lag_error().empty()) {
              std::printf("lag %lld records, %.1f s\n", static_cast<long long>(b.lag_records()),
                          b.lag_seconds());
            } else {
              std::printf("lag unknown: %s\n", b.lag_error().c_str());
            }
            if (!b.last_error().empty()) std::printf("last error: %s\n", b.last_error().c_str());
          });
    };
  });
  cmd->add_option_function<std::string>(
         "name", [req](const std::string& v) { req->set_name(v); }, "bridge name")
      ->required();
}

// pause, resume and delete: one name, an empty answer.
template <typename Req, typename Resp>
void AddByName(CLI::App* bridge, const Globals& g, Action* run, const char* name, const char* help,
               grpc::Status (Stub::*method)(grpc::ClientContext*, const Req&, Resp*),
               const char* done) {
  auto req = std::make_shared<Req>();
  CLI::App* cmd = Command(bridge, name, help, run, [&g, req, method, done] {
    return [&g, req, method, done] {
      return Call<Req, Resp>(g.Queue(), method, *req, [&](const Resp&) {
        std::printf("%s bridge %s\n", done, req->name().c_str());
      });
    };
  });
  cmd->add_option_function<std::string>(
         "name", [req](const std::string& v) { req->set_name(v); }, "bridge name")
      ->required();
}

}  // namespace

void AddBridgeCommands(CLI::App& app, const Globals& g, Action* run) {
  CLI::App* bridge = app.add_subcommand("bridge", "bridges from topics to queues");
  bridge->require_subcommand(1);
  AddCreate(bridge, g, run);
  AddList(bridge, g, run);
  AddDescribe(bridge, g, run);
  AddByName<bpb::PauseBridgeRequest, bpb::PauseBridgeResponse>(
      bridge, g, run, "pause", "stop reading (durable)", &Stub::PauseBridge, "paused");
  AddByName<bpb::ResumeBridgeRequest, bpb::ResumeBridgeResponse>(
      bridge, g, run, "resume", "read again from the committed offsets", &Stub::ResumeBridge,
      "resumed");
  AddByName<bpb::DeleteBridgeRequest, bpb::DeleteBridgeResponse>(
      bridge, g, run, "delete", "stop and forget the bridge", &Stub::DeleteBridge, "deleted");
}

}  // namespace conduit::cli
