#pragma once

// Real conduit-broker processes for the cluster benchmarks (cluster_bench, replication_bench):
// an etcd (EtcdProcess) and N brokers in cluster mode on free 127.0.0.1 ports, each with its own
// data dir under one temp dir; or one broker without etcd (a single node). A broker can be
// SIGKILLed and started again on its data dir (it comes back on a new port). Everything is
// killed when the object goes. Not thread-safe: drive it from one thread.

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/testing/etcd_process.h"
#include "common/testing/temp_dir.h"
#include "tests/support/log_client.h"
#include "tests/support/server_process.h"

namespace conduit::bench {

// A binary of this build: $CONDUIT_BIN_DIR (default build/bin) + name.
inline std::string Bin(const std::string& name) {
  const char* dir = std::getenv("CONDUIT_BIN_DIR");
  return std::string(dir ? dir : "build/bin") + "/" + name;
}

// user + system CPU of a process so far, from /proc.
inline absl::Duration ProcessCpu(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  std::getline(in, line);
  if (line.empty()) return absl::ZeroDuration();
  std::istringstream fields(line.substr(line.rfind(')') + 2));
  std::string skip;
  for (int i = 0; i < 11; ++i) fields >> skip;  // state .. cmajflt
  long utime = 0, stime = 0;
  fields >> utime >> stime;
  return absl::Seconds(static_cast<double>(utime + stime) / sysconf(_SC_CLK_TCK));
}

class BrokerCluster {
 public:
  using LogClient = testing::LogClient;

  // Starts `n` brokers (ids 1..n) with `extra_args` each; with `cluster` false, one broker and
  // no etcd. True once every broker serves and (in a cluster) broker 1 lists all n.
  bool Start(int n, bool cluster, std::vector<std::string> extra_args = {}) {
    cluster_ = cluster;
    extra_args_ = std::move(extra_args);
    if (cluster) {
      etcd_ = std::make_unique<testing::EtcdProcess>(dir_.path());
      if (!etcd_->Start().ok()) return false;
    }
    brokers_.resize(n);
    for (int id = 1; id <= n; ++id) {
      if (!StartBroker(id)) return false;
    }
    if (!cluster) return true;
    for (int i = 0; i < 200; ++i) {
      if (Metadata(1).brokers_size() == n) return true;
      absl::SleepFor(absl::Milliseconds(50));  // brokers registering their leases
    }
    return false;
  }

  // Starts broker `id` (1-based) on its data dir, again after a Kill. Whether it serves.
  bool StartBroker(int id) {
    const std::string work = dir_.Sub(absl::StrCat("b", id));
    std::filesystem::create_directories(work);
    std::vector<std::string> args;
    if (cluster_) {
      args = {"--etcd-endpoints", etcd_->endpoint(), "--broker-id", std::to_string(id)};
    }
    args.insert(args.end(), extra_args_.begin(), extra_args_.end());
    auto& b = brokers_.at(id - 1);
    b = std::make_unique<testing::ServerProcess>(Bin("conduit-broker"), work + "/data", work, args);
    return b->running();
  }

  // SIGKILL and reap broker `id`.
  void Kill(int id) { brokers_.at(id - 1)->Kill(SIGKILL); }

  int size() const { return static_cast<int>(brokers_.size()); }
  bool running(int id) const { return brokers_.at(id - 1)->pid() > 0; }
  testing::ServerProcess& broker(int id) { return *brokers_.at(id - 1); }
  const std::string& address(int id) const { return brokers_.at(id - 1)->address(); }

  // The address of broker `id` as a port number (the peers' clients take 127.0.0.1:port).
  int port(int id) const {
    const std::string& a = address(id);
    return std::atoi(a.substr(a.rfind(':') + 1).c_str());
  }

  // GetMetadata from broker `via` (an empty answer when it fails).
  conduit::log::v1::GetMetadataResponse Metadata(int via) {
    LogClient c(address(via));
    grpc::ClientContext ctx;
    LogClient::SetDeadline(&ctx, absl::Seconds(5));
    conduit::log::v1::GetMetadataResponse m;
    (void)c.stub()->GetMetadata(&ctx, {}, &m);
    return m;
  }

  // CreateTopic through broker 1; whether it was created.
  bool CreateTopic(const conduit::log::v1::CreateTopicRequest& request) {
    LogClient admin(address(1));
    conduit::log::v1::CreateTopicResponse created;
    grpc::ClientContext ctx;
    LogClient::SetDeadline(&ctx, absl::Seconds(20));
    return admin.stub()->CreateTopic(&ctx, request, &created).ok();
  }

  // user + system CPU of every running broker so far.
  absl::Duration BrokersCpu() const {
    absl::Duration d;
    for (const auto& b : brokers_) {
      if (b && b->pid() > 0) d += ProcessCpu(b->pid());
    }
    return d;
  }

 private:
  testing::TempDir dir_;
  bool cluster_ = false;
  std::vector<std::string> extra_args_;
  std::unique_ptr<testing::EtcdProcess> etcd_;
  std::vector<std::unique_ptr<testing::ServerProcess>> brokers_;  // broker id - 1
};

}  // namespace conduit::bench
