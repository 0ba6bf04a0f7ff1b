#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/testing/spawn.h"

namespace conduit::testing {

// A real etcd member (/usr/bin/etcd, or $CONDUIT_ETCD_BIN) as a child process, for tests: on its
// own a single-member etcd; as a member of an EtcdProcessCluster (below), one of several.
// Client and peer listen on free 127.0.0.1 ports chosen at the first Start and kept for later
// ones, so a restart on the same data dir (<dir>/etcd-data) is the same member at the same
// endpoint. Output goes to <dir>/etcd.log (appended across restarts). Test-speed raft timing
// (heartbeat 50 ms, election 500 ms) makes etcd's minimum lease TTL 1 s.
//
// The child gets SIGKILL when the thread that started it ends (SpawnTiedChild), so no etcd
// outlives a crashed or timed-out test; the destructor kills and reaps it otherwise. Start it
// from the test's own thread (a fixture's SetUp). Not thread-safe.
class EtcdProcess {
 public:
  explicit EtcdProcess(std::string dir) : dir_(std::move(dir)) {}
  ~EtcdProcess() { Kill(); }
  EtcdProcess(const EtcdProcess&) = delete;
  EtcdProcess& operator=(const EtcdProcess&) = delete;

  // Starts etcd and waits (up to 20 s) until it reports itself healthy (it has a leader and
  // serves requests). A first start that fails because etcd exits early (another process took a
  // port between choosing and binding) is tried again on new ports with a fresh data dir.
  absl::Status Start() {
    if (pid_ > 0) return absl::FailedPreconditionError("etcd is already running");
    if (::access(Binary().c_str(), X_OK) != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("no etcd at ", Binary(), " (package etcd-server)"));
    }
    const bool fresh = client_port_ == 0;
    absl::Status status;
    for (int attempt = 0; attempt < (fresh ? 5 : 1); ++attempt) {
      if (fresh) {
        std::error_code ignored;
        std::filesystem::remove_all(data_dir(), ignored);
        if (!ChooseFreePorts()) return absl::InternalError("no free 127.0.0.1 ports");
      }
      if (!Spawn()) return absl::InternalError(absl::StrCat("cannot start ", Binary()));
      status = AwaitHealthy(absl::Now() + absl::Seconds(20));
      if (status.ok() || pid_ > 0) break;  // healthy, or running but not healthy: no retry
    }
    if (!status.ok()) Kill();
    return status;
  }

  // SIGTERM (after SIGCONT, in case it is paused), then waits up to `timeout` for it to exit,
  // then SIGKILL. Returns whether it exited by itself.
  bool Stop(absl::Duration timeout = absl::Seconds(10)) {
    if (pid_ <= 0) return true;
    ::kill(pid_, SIGTERM);
    ::kill(pid_, SIGCONT);
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      if (Reaped(WNOHANG)) return true;
      absl::SleepFor(absl::Milliseconds(10));  // waiting for a child process to exit
    }
    Kill();
    return false;
  }

  // SIGKILL and reap: a crash. The data dir keeps what etcd fsynced (all it acknowledged).
  void Kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    Reaped(0);
  }

  // SIGSTOP (returns once the process is stopped) and SIGCONT: etcd hangs, connections stay.
  void Pause() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGSTOP);
    int status = 0;
    ::waitpid(pid_, &status, WUNTRACED);
  }
  void Resume() {
    if (pid_ > 0) ::kill(pid_, SIGCONT);
  }

  // Serves clients over TLS (before the first Start): `cert`/`key` its certificate, and with a
  // non-empty `client_ca` it requires client certificates signed by that CA
  // (--client-cert-auth). Health and metrics then come from a plaintext metrics port.
  void UseTls(std::string cert, std::string key, std::string client_ca = "") {
    tls_cert_ = std::move(cert);
    tls_key_ = std::move(key);
    tls_client_ca_ = std::move(client_ca);
  }

  bool running() const { return pid_ > 0; }
  // "127.0.0.1:<client port>", the form etcd::Client::Connect takes. Stable across restarts.
  std::string endpoint() const { return absl::StrCat("127.0.0.1:", client_port_); }
  std::string data_dir() const { return dir_ + "/etcd-data"; }
  std::string log_path() const { return dir_ + "/etcd.log"; }
  const std::string& name() const { return name_; }

  // Whether this member is running and says it is its cluster's raft leader (its /metrics
  // gauge etcd_server_is_leader). A member that lost quorum stops saying so within an election
  // timeout (etcd's check-quorum).
  bool IsLeader() const {
    return running() && absl::StrContains(HttpGet("/metrics"), "\netcd_server_is_leader 1");
  }

 private:
  friend class EtcdProcessCluster;

  // A member of an EtcdProcessCluster: its name, and the cluster it starts in (set before the
  // first Start, with the ports).
  EtcdProcess(std::string dir, std::string name, int client_port, int peer_port,
              std::string initial_cluster, std::string token)
      : dir_(std::move(dir)),
        name_(std::move(name)),
        initial_cluster_(std::move(initial_cluster)),
        token_(std::move(token)),
        client_port_(client_port),
        peer_port_(peer_port) {}

  static std::string Binary() {
    const char* bin = std::getenv("CONDUIT_ETCD_BIN");
    return bin != nullptr ? bin : "/usr/bin/etcd";
  }

  // `n` distinct free 127.0.0.1 ports (empty if that fails): every socket stays bound until all
  // are known.
  static std::vector<int> FreePorts(int n) {
    std::vector<int> fds(n, -1);
    std::vector<int> ports;
    for (int i = 0; i < n; ++i) {
      fds[i] = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      socklen_t len = sizeof(addr);
      if (fds[i] < 0 || ::bind(fds[i], reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
          ::getsockname(fds[i], reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
        break;
      }
      ports.push_back(ntohs(addr.sin_port));
    }
    for (int fd : fds) {
      if (fd >= 0) ::close(fd);
    }
    if (static_cast<int>(ports.size()) != n) ports.clear();
    return ports;
  }

  bool ChooseFreePorts() {
    const std::vector<int> ports = FreePorts(3);
    if (ports.empty()) return false;
    client_port_ = ports[0];
    peer_port_ = ports[1];
    if (!tls_cert_.empty()) metrics_port_ = ports[2];
    return true;
  }

  std::string peer_url() const { return absl::StrCat("http://127.0.0.1:", peer_port_); }

  // Starts the process (without waiting for it to serve). The --initial-cluster* flags matter
  // only for a fresh data dir: a restarted member reads its cluster from its data dir.
  bool Spawn() {
    const std::string client =
        absl::StrCat(tls_cert_.empty() ? "http" : "https", "://127.0.0.1:", client_port_);
    const std::string peer = peer_url();
    std::vector<std::string> args = {
        Binary(),
        "--name=" + name_,
        "--data-dir=" + data_dir(),
        "--listen-client-urls=" + client,
        "--advertise-client-urls=" + client,
        "--listen-peer-urls=" + peer,
        "--initial-advertise-peer-urls=" + peer,
        "--initial-cluster=" +
            (initial_cluster_.empty() ? absl::StrCat(name_, "=", peer) : initial_cluster_),
        "--heartbeat-interval=50",
        "--election-timeout=500"};
    if (!tls_cert_.empty()) {
      args.push_back("--cert-file=" + tls_cert_);
      args.push_back("--key-file=" + tls_key_);
      args.push_back(absl::StrCat("--listen-metrics-urls=http://127.0.0.1:", metrics_port_));
      if (!tls_client_ca_.empty()) {
        args.push_back("--trusted-ca-file=" + tls_client_ca_);
        args.push_back("--client-cert-auth");
      }
    }
    if (!token_.empty()) {
      args.push_back("--initial-cluster-state=new");
      args.push_back("--initial-cluster-token=" + token_);
    }
    pid_ = SpawnTiedChild(std::move(args), log_path());
    return pid_ > 0;
  }

  // Reaps the child (waitpid with `options`); true once it is gone.
  bool Reaped(int options) {
    int status = 0;
    const pid_t got = ::waitpid(pid_, &status, options);
    if (got == pid_ || (got < 0 && errno == ECHILD)) {
      pid_ = -1;
      return true;
    }
    return false;
  }

  absl::Status AwaitHealthy(absl::Time deadline) {
    while (absl::Now() < deadline) {
      if (Reaped(WNOHANG)) {
        return absl::UnavailableError(absl::StrCat("etcd exited while starting; see ", log_path()));
      }
      if (absl::StrContains(HttpGet("/health"), "\"health\":\"true\"")) return absl::OkStatus();
      absl::SleepFor(absl::Milliseconds(20));  // polling a starting child process
    }
    return absl::DeadlineExceededError(
        absl::StrCat("etcd not healthy within 20 s on ", endpoint(), "; see ", log_path()));
  }

  // The body (with headers) of an HTTP/1.0 GET on the client port (the metrics port with TLS);
  // "" on any failure.
  std::string HttpGet(const std::string& path) const {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return "";
    timeval timeout{0, 500 * 1000};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(metrics_port_ != 0 ? metrics_port_ : client_port_));
    std::string response;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
      const std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
      if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(request.size())) {
        char buffer[1024];
        ssize_t n;
        while ((n = ::recv(fd, buffer, sizeof(buffer), 0)) > 0) response.append(buffer, n);
      }
    }
    ::close(fd);
    return response;
  }

  const std::string dir_;
  const std::string name_ = "default";
  const std::string initial_cluster_;  // "": this member alone
  const std::string token_;            // "": etcd's default
  int client_port_ = 0;
  int peer_port_ = 0;
  int metrics_port_ = 0;  // with TLS only
  std::string tls_cert_, tls_key_, tls_client_ca_;
  pid_t pid_ = -1;
};

// A real etcd cluster of `size` members (EtcdProcess each, named m0, m1, ...) on 127.0.0.1, for
// tests of etcd faults: kill a member (EtcdProcess::Kill, a SIGKILL), find the raft leader,
// restart members on their data dirs. Member i lives in <dir>/m<i> (data dir, etcd.log); ports
// are chosen once, at construction, and kept. Same lifetime rules and thread safety as
// EtcdProcess: every member is killed when the cluster object goes or the starting thread ends.
class EtcdProcessCluster {
 public:
  explicit EtcdProcessCluster(std::string dir, int size = 3) {
    const std::vector<int> ports = EtcdProcess::FreePorts(2 * size);
    std::vector<std::string> peers;
    for (int i = 0; i < size; ++i) {
      peers.push_back(
          absl::StrCat("m", i, "=http://127.0.0.1:", ports.empty() ? 0 : ports[2 * i + 1]));
    }
    const std::string initial_cluster = absl::StrJoin(peers, ",");
    const std::string token =
        absl::StrCat("conduit-test-", ::getpid(), "-", ports.empty() ? 0 : ports[0]);
    for (int i = 0; i < size; ++i) {
      const std::string member_dir = absl::StrCat(dir, "/m", i);
      std::error_code ignored;
      std::filesystem::create_directories(member_dir, ignored);
      members_.emplace_back(
          new EtcdProcess(member_dir, absl::StrCat("m", i), ports.empty() ? 0 : ports[2 * i],
                          ports.empty() ? 0 : ports[2 * i + 1], initial_cluster, token));
    }
  }
  EtcdProcessCluster(const EtcdProcessCluster&) = delete;
  EtcdProcessCluster& operator=(const EtcdProcessCluster&) = delete;

  // Starts every member that is not running (all of them at first), then waits (up to 20 s)
  // until each reports itself healthy, which needs a quorum of members up. FAILED_PRECONDITION
  // without an etcd binary, INTERNAL when the ports could not be chosen, UNAVAILABLE when a
  // member exited (a port taken between choosing and binding: the test is to be run again; see
  // the member's etcd.log), DEADLINE_EXCEEDED when one did not become healthy.
  absl::Status Start() {
    std::vector<int> all;
    for (int i = 0; i < size(); ++i) {
      if (!members_[i]->running()) all.push_back(i);
    }
    return StartMembers(all);
  }

  // Starts the members `ids` (not running; on their data dirs when they ran before) together, so
  // that members which need each other for a quorum come up, and waits until all are healthy.
  // Errors as Start.
  absl::Status StartMembers(const std::vector<int>& ids) {
    if (::access(EtcdProcess::Binary().c_str(), X_OK) != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("no etcd at ", EtcdProcess::Binary(), " (package etcd-server)"));
    }
    for (int i : ids) {
      EtcdProcess& m = member(i);
      if (m.client_port_ == 0) return absl::InternalError("no free 127.0.0.1 ports");
      if (m.running()) return absl::FailedPreconditionError(absl::StrCat(m.name(), " is running"));
      if (!m.Spawn()) return absl::InternalError(absl::StrCat("cannot start ", m.name()));
    }
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    for (int i : ids) {
      if (absl::Status s = member(i).AwaitHealthy(deadline); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  int size() const { return static_cast<int>(members_.size()); }
  EtcdProcess& member(int i) { return *members_.at(i); }

  // The index of the member that says it is the raft leader, or -1 (none running says so).
  int Leader() const {
    for (int i = 0; i < size(); ++i) {
      if (members_[i]->IsLeader()) return i;
    }
    return -1;
  }
  // Polls Leader() every 20 ms until a member leads, up to `timeout`; -1 if none did.
  int AwaitLeader(absl::Duration timeout = absl::Seconds(10)) const {
    const absl::Time deadline = absl::Now() + timeout;
    for (;;) {
      if (int leader = Leader(); leader >= 0) return leader;
      if (absl::Now() > deadline) return -1;
      absl::SleepFor(absl::Milliseconds(20));  // polling child processes' elections
    }
  }

  // Every member's client endpoint, and them joined with ',' (the --etcd-endpoints form).
  std::vector<std::string> endpoints() const {
    std::vector<std::string> out;
    for (const auto& m : members_) out.push_back(m->endpoint());
    return out;
  }
  std::string endpoints_flag() const { return absl::StrJoin(endpoints(), ","); }

 private:
  std::vector<std::unique_ptr<EtcdProcess>> members_;
};

}  // namespace conduit::testing
