#include "bench/replication_nats.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/peers/nats_protocol.h"
#include "bench/peers/socket.h"

namespace conduit::bench {
namespace {

using peers::nats::Conn;
using peers::nats::Msg;

// `n` distinct free 127.0.0.1 ports: all sockets stay bound until all are known.
std::vector<int> FreePorts(int n) {
  std::vector<int> fds, ports;
  for (int i = 0; i < n; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      ports.push_back(0);
    } else {
      ports.push_back(ntohs(addr.sin_port));
    }
    fds.push_back(fd);
  }
  for (int fd : fds) {
    if (fd >= 0) ::close(fd);
  }
  return ports;
}

bool Accepts(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return ok;
}

// The string value of "key":"..." in a JSON text (no escapes in the values read here).
std::string JsonString(const std::string& json, const std::string& key) {
  const std::string needle = "\"" + key + "\":\"";
  const size_t at = json.find(needle);
  if (at == std::string::npos) return "";
  const size_t from = at + needle.size();
  return json.substr(from, json.find('"', from) - from);
}

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The stream's leader index when it has one and both followers report themselves current
// (caught up), else -1. Asked through each running server in turn.
int HealthyLeader(NatsCluster& cluster, const std::string& stream) {
  for (int i = 0; i < 3; ++i) {
    if (!cluster.running(i)) continue;
    Conn c;
    std::string err, info;
    if (!c.Open(cluster.port(i), "_INBOX." + stream + ".info", &err, 1000) ||
        !c.Request("$JS.API.STREAM.INFO." + stream, "", &info, &err)) {
      continue;
    }
    const size_t replicas = info.find("\"replicas\":[");
    if (replicas == std::string::npos) return -1;
    const std::string list = info.substr(replicas);
    const int leader = NatsCluster::IndexOf(JsonString(info, "leader"));
    if (leader < 0 || Count(list, "\"current\":true") != 2 || Count(list, "\"offline\":true") > 0) {
      return -1;
    }
    return leader;
  }
  return -1;
}

int64_t NowNs() { return absl::ToUnixNanos(absl::Now()); }

}  // namespace

NatsCluster::~NatsCluster() {
  for (int i = 0; i < 3; ++i) Kill(i);
}

int NatsCluster::IndexOf(const std::string& name) {
  if (name.size() != 2 || name[0] != 'n' || name[1] < '1' || name[1] > '3') return -1;
  return name[1] - '1';
}

bool NatsCluster::StartServer(int i) {
  const std::string store = absl::StrCat(dir_, "/n", i + 1);
  std::filesystem::create_directories(store);
  std::string routes;
  for (int j = 0; j < 3; ++j) {
    if (j == i) continue;
    absl::StrAppend(&routes, routes.empty() ? "" : ",", "nats://127.0.0.1:", route_ports_[j]);
  }
  std::vector<std::string> args = {"nats-server",
                                   "-n",
                                   absl::StrCat("n", i + 1),
                                   "-a",
                                   "127.0.0.1",
                                   "-p",
                                   std::to_string(client_ports_[i]),
                                   "-js",
                                   "-sd",
                                   store,
                                   "--cluster_name",
                                   "bench",
                                   "--cluster",
                                   absl::StrCat("nats://127.0.0.1:", route_ports_[i]),
                                   "--routes",
                                   routes};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string log_path = absl::StrCat(dir_, "/n", i + 1, ".log");
  const int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log < 0) return false;
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {  // the child: async-signal-safe calls only until exec
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    ::dup2(log, 1);
    ::dup2(log, 2);
    ::execvp(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(log);
  pids_[i] = pid;
  for (int k = 0; k < 200 && pid > 0; ++k) {
    if (Accepts(client_ports_[i])) return true;
    absl::SleepFor(absl::Milliseconds(25));  // waiting for a child process to bind
  }
  return false;
}

void NatsCluster::Kill(int i) {
  if (pids_[i] <= 0) return;
  ::kill(pids_[i], SIGKILL);
  int status = 0;
  ::waitpid(pids_[i], &status, 0);
  pids_[i] = -1;
}

std::string NatsCluster::Start() {
  std::vector<int> ports = FreePorts(6);
  client_ports_.assign(ports.begin(), ports.begin() + 3);
  route_ports_.assign(ports.begin() + 3, ports.end());
  for (int i = 0; i < 3; ++i) {
    if (!StartServer(i)) return absl::StrCat("nats-server n", i + 1, " did not start; see ", dir_);
  }
  // JetStream in a cluster answers stream creation only once its meta group has a leader and
  // knows enough peers for the replicas.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  std::string err;
  while (absl::Now() < deadline) {
    Conn c;
    std::string reply;
    const std::string name = peers::UniqueName("PROBE");
    if (c.Open(port(0), "_INBOX." + name, &err, 2000) &&
        c.Request("$JS.API.STREAM.CREATE." + name,
                  R"({"name":")" + name + R"(","subjects":["probe.)" + name +
                      R"("],"storage":"file","num_replicas":3})",
                  &reply, &err)) {
      c.Request("$JS.API.STREAM.DELETE." + name, "", &reply, &err);
      return "";
    }
    absl::SleepFor(absl::Milliseconds(250));  // the cluster forming
  }
  return "JetStream R3 not ready within 30 s: " + err;
}

FailoverFigures NatsFailover(NatsCluster& cluster, int kills, absl::Duration interval,
                             absl::Duration limit) {
  FailoverFigures out;
  auto fail = [&out](const std::string& what) {
    if (out.error.empty()) out.error = what;
  };
  const std::string stream = peers::UniqueName("FO");
  const std::string subject = "fo." + stream;
  {
    Conn admin;
    std::string err, reply;
    if (!admin.Open(cluster.port(0), "_INBOX." + stream + ".admin", &err) ||
        !admin.Request("$JS.API.STREAM.CREATE." + stream,
                       R"({"name":")" + stream + R"(","subjects":[")" + subject +
                           R"("],"storage":"file","num_replicas":3})",
                       &reply, &err)) {
      fail("stream create: " + err);
      return out;
    }
  }
  const std::string payload(100, 'x');
  constexpr size_t kRing = 1 << 18;  // publish times by sequence number; > limit / interval
  for (int k = 0; k < kills; ++k) {
    int leader = -1;
    const absl::Time healthy_by = absl::Now() + absl::Seconds(60);
    while ((leader = HealthyLeader(cluster, stream)) < 0 && absl::Now() < healthy_by) {
      absl::SleepFor(absl::Milliseconds(100));  // replicas catching up
    }
    if (leader < 0) {
      fail("the stream did not get back to 3 current replicas within 60 s");
      break;
    }
    const int via = (leader + 1) % 3;  // a server that survives the kill
    Conn sender, reader;
    std::string err;
    const std::string inbox = "_INBOX." + stream + ".r" + std::to_string(k);
    if (!sender.Open(cluster.port(via), inbox + "s", &err) ||
        !reader.Open(cluster.port(via), inbox, &err, 100)) {
      fail("connect: " + err);
      break;
    }
    std::vector<std::atomic<int64_t>> sent_at(kRing);
    std::atomic<int64_t> killed_at{INT64_MAX}, acked_at{0};
    std::atomic<bool> stop{false};
    std::string send_error;
    std::thread send([&] {
      std::string e;
      int64_t next = NowNs();
      for (uint64_t n = 0; !stop.load(); ++n) {
        sent_at[n % kRing].store(NowNs());
        sender.Append(subject, inbox + "." + std::to_string(n), payload);
        if (!sender.Flush(&e)) return (void)(send_error = "publish: " + e);
        next += absl::ToInt64Nanoseconds(interval);
        absl::SleepFor(absl::Nanoseconds(next - NowNs()));  // the publish rate
      }
    });
    std::thread read([&] {
      std::string e;
      Msg m;
      const std::string prefix = inbox + ".";
      while (!stop.load()) {
        if (!reader.Read(&m, &e)) continue;  // a 100 ms read timeout: look at `stop` again
        if (!m.subject.starts_with(prefix) || m.status() != 0 ||
            m.payload.find("\"error\"") != std::string_view::npos) {
          continue;  // 503 no responders while the stream has no leader, or an API error
        }
        const uint64_t n = peers::nats::ParseU64(m.subject.substr(prefix.size()));
        if (sent_at[n % kRing].load() >= killed_at.load()) {
          acked_at.store(NowNs());
          stop.store(true);
        }
      }
    });
    absl::SleepFor(absl::Milliseconds(500));  // steady publishing before the kill
    killed_at.store(NowNs());
    cluster.Kill(leader);
    ++out.kills;
    const absl::Time give_up = absl::Now() + limit;
    while (!stop.load() && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(1));
    stop.store(true);
    send.join();
    read.join();
    if (!send_error.empty()) fail(send_error);
    if (acked_at.load() > 0) {
      const int64_t ns = acked_at.load() - killed_at.load();
      out.seconds_ns.Record(static_cast<uint64_t>(ns));
      ++out.measured;
      std::fprintf(stderr, "  nats kill %d: leader n%d, first PubAck after %.3f s\n", k + 1,
                   leader + 1, ns / 1e9);
    } else {
      std::fprintf(stderr, "  nats kill %d: leader n%d, no PubAck within %.0f s\n", k + 1,
                   leader + 1, absl::ToDoubleSeconds(limit));
    }
    if (!cluster.StartServer(leader)) {
      fail("restart of a killed nats-server failed");
      break;
    }
  }
  return out;
}

}  // namespace conduit::bench
