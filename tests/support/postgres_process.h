#pragma once

#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/support/child_process.h"

namespace conduit::testing {

// A PostgreSQL 15 server of its own in `<dir>/pg` (initdb, then the postmaster in the
// foreground as this process's child), reachable only through a unix socket in that directory
// (no TCP), user `conduit`, trust auth; output in <dir>/pg.log. initdb refuses to run as root:
// as root, the server runs as `nobody` (runuser for initdb; setpriv, which execs, for the
// postmaster) and the directories are made accessible to it. The postmaster gets SIGKILL when
// the thread that started it ends (SpawnTiedChild, through setpriv --pdeathsig as root), so a
// crashed or timed-out test leaves no server running; the destructor stops it (SIGINT, a fast
// shutdown, then SIGKILL after 30 s). $CONDUIT_PG_BIN overrides the binaries' directory
// (default /usr/lib/postgresql/15/bin).
class PostgresProcess {
 public:
  // `fsync`: false for tests (the server is never the one that crashes), true for benchmarks.
  explicit PostgresProcess(const std::string& dir, bool fsync = false)
      : data_(dir + "/pg"), log_(dir + "/pg.log"), port_(20000 + getpid() % 20000) {
    bin_ = BinDir();
    if (geteuid() == 0) {
      const passwd* pw = getpwnam("nobody");
      if (pw == nullptr) return;
      uid_ = pw->pw_uid;
      gid_ = pw->pw_gid;
      ::chmod(dir.c_str(), 0711);  // TempDir is 0700: let the server's user through
    }
    ::mkdir(data_.c_str(), 0700);
    if (uid_ >= 0 && ::chown(data_.c_str(), uid_, gid_) != 0) return;
    std::ofstream(log_).flush();
    if (uid_ >= 0 && ::chown(log_.c_str(), uid_, gid_) != 0) return;
    if (Run({bin_ + "/initdb", "-D", data_, "-U", "conduit", "--auth=trust", "--no-sync",
             "--no-instructions"}) != 0) {
      return;
    }
    std::vector<std::string> postmaster = {bin_ + "/postgres",
                                           "-D",
                                           data_,
                                           "-k",
                                           data_,
                                           "-p",
                                           std::to_string(port_),
                                           "-c",
                                           "listen_addresses=",
                                           "-c",
                                           fsync ? "fsync=on" : "fsync=off",
                                           "-c",
                                           "max_connections=50"};
    if (uid_ >= 0) {  // setpriv changes user and then execs: the postmaster stays our child
      postmaster.insert(postmaster.begin(),
                        {"/usr/bin/setpriv", absl::StrCat("--reuid=", uid_),
                         absl::StrCat("--regid=", gid_), "--clear-groups", "--pdeathsig=KILL"});
    }
    server_ = std::make_unique<ChildProcess>(std::move(postmaster), log_);
    if (!server_->started()) return;
    // Ready once it accepts connections (pg_isready: 0), within a minute.
    for (int i = 0; i < 1200 && !server_->Exited(); ++i) {
      if (RunCommand({bin_ + "/pg_isready", "-q", "-h", data_, "-p", std::to_string(port_)},
                     log_) == 0) {
        started_ = true;
        return;
      }
      absl::SleepFor(absl::Milliseconds(50));  // waiting for a child process to start
    }
    server_.reset();
  }
  ~PostgresProcess() { Stop(); }
  PostgresProcess(const PostgresProcess&) = delete;
  PostgresProcess& operator=(const PostgresProcess&) = delete;

  // Where initdb and postgres are; Installed() whether they are there (scripts/install-deps.sh).
  static std::string BinDir() {
    const char* bin = std::getenv("CONDUIT_PG_BIN");
    return bin ? bin : "/usr/lib/postgresql/15/bin";
  }
  static bool Installed() { return ::access((BinDir() + "/initdb").c_str(), X_OK) == 0; }

  bool running() const { return started_; }
  pid_t pid() const { return server_ ? server_->pid() : -1; }  // the postmaster's
  const std::string& log() const { return log_; }
  // A libpq conninfo for the server's database `postgres`.
  std::string conninfo(const std::string& application_name = "conduit-test") const {
    return absl::StrCat("host=", data_, " port=", port_, " dbname=postgres user=conduit",
                        " application_name=", application_name);
  }

  // A fast shutdown (SIGINT: open connections are closed), SIGKILL if it is not over in 30 s.
  void Stop() {
    started_ = false;
    if (!server_) return;
    if (server_->pid() > 0) ::kill(server_->pid(), SIGINT);
    for (int i = 0; i < 600 && !server_->Exited(); ++i) {
      absl::SleepFor(absl::Milliseconds(50));  // waiting for a child process to exit
    }
    server_.reset();  // SIGKILL if still running
  }

 private:
  // Runs a PostgreSQL program, as `nobody` when we are root.
  int Run(std::vector<std::string> argv) {
    if (uid_ >= 0) argv.insert(argv.begin(), {"/usr/sbin/runuser", "-u", "nobody", "--"});
    return RunCommand(std::move(argv), log_);
  }

  std::string bin_;
  const std::string data_;
  const std::string log_;
  const int port_;  // names the socket (.s.PGSQL.<port> in data_); no TCP listener
  int uid_ = -1, gid_ = -1;
  std::unique_ptr<ChildProcess> server_;  // the postmaster
  bool started_ = false;
};

}  // namespace conduit::testing
