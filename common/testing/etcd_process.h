#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace conduit::testing {

// A real single-member etcd (/usr/bin/etcd, or $CONDUIT_ETCD_BIN) as a child process, for tests.
// Client and peer listen on free 127.0.0.1 ports chosen at the first Start and kept for later
// ones, so a restart on the same data dir (<dir>/etcd-data) is the same member at the same
// endpoint. Output goes to <dir>/etcd.log (appended across restarts). Test-speed raft timing
// (heartbeat 50 ms, election 500 ms) makes etcd's minimum lease TTL 1 s.
//
// The child gets SIGKILL when the thread that started it ends (PR_SET_PDEATHSIG), so no etcd
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

  bool running() const { return pid_ > 0; }
  // "127.0.0.1:<client port>", the form etcd::Client::Connect takes. Stable across restarts.
  std::string endpoint() const { return absl::StrCat("127.0.0.1:", client_port_); }
  std::string data_dir() const { return dir_ + "/etcd-data"; }
  std::string log_path() const { return dir_ + "/etcd.log"; }

 private:
  static std::string Binary() {
    const char* bin = std::getenv("CONDUIT_ETCD_BIN");
    return bin != nullptr ? bin : "/usr/bin/etcd";
  }

  // Two distinct free ports: both sockets stay bound until both are known.
  bool ChooseFreePorts() {
    int fds[2] = {-1, -1};
    int ports[2] = {0, 0};
    for (int i = 0; i < 2; ++i) {
      fds[i] = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      socklen_t len = sizeof(addr);
      if (fds[i] < 0 || ::bind(fds[i], reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
          ::getsockname(fds[i], reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
        break;
      }
      ports[i] = ntohs(addr.sin_port);
    }
    for (int fd : fds) {
      if (fd >= 0) ::close(fd);
    }
    client_port_ = ports[0];
    peer_port_ = ports[1];
    return client_port_ > 0 && peer_port_ > 0;
  }

  bool Spawn() {
    const std::string client = absl::StrCat("http://127.0.0.1:", client_port_);
    const std::string peer = absl::StrCat("http://127.0.0.1:", peer_port_);
    std::vector<std::string> args = {Binary(),
                                     "--name=default",
                                     "--data-dir=" + data_dir(),
                                     "--listen-client-urls=" + client,
                                     "--advertise-client-urls=" + client,
                                     "--listen-peer-urls=" + peer,
                                     "--initial-advertise-peer-urls=" + peer,
                                     "--initial-cluster=default=" + peer,
                                     "--heartbeat-interval=50",
                                     "--election-timeout=500"};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int log = ::open(log_path().c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log < 0) return false;
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid == 0) {  // the child: async-signal-safe calls only until exec
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);  // the test died before prctl
      ::dup2(log, 1);
      ::dup2(log, 2);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(log);
    pid_ = pid;
    return pid > 0;
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

  // The body (with headers) of an HTTP/1.0 GET on the client port; "" on any failure.
  std::string HttpGet(const std::string& path) const {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return "";
    timeval timeout{0, 500 * 1000};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(client_port_));
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
  int client_port_ = 0;
  int peer_port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace conduit::testing
