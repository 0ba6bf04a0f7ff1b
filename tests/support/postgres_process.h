#pragma once

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/support/child_process.h"

namespace conduit::testing {

// A PostgreSQL 15 server of its own in `<dir>/pg` (initdb + pg_ctl), reachable only through a
// unix socket in that directory (no TCP), user `conduit`, trust auth; output in <dir>/pg.log.
// initdb refuses to run as root: as root, the server runs as `nobody` (runuser) and the
// directories are made accessible to it. The destructor stops the server (pg_ctl -m fast,
// then SIGKILL of the postmaster if that failed). $CONDUIT_PG_BIN overrides the binaries'
// directory (default /usr/lib/postgresql/15/bin).
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
    const std::string options = absl::StrCat(
        "-k ", data_, " -p ", port_, " -c listen_addresses='' -c fsync=", fsync ? "on" : "off",
        " -c max_connections=50");
    started_ = Run({bin_ + "/pg_ctl", "-D", data_, "-l", log_, "-o", options, "-w", "-t", "60",
                    "start"}) == 0;
  }
  ~PostgresProcess() { Stop(); }
  PostgresProcess(const PostgresProcess&) = delete;
  PostgresProcess& operator=(const PostgresProcess&) = delete;

  // Where initdb and pg_ctl are; Installed() whether they are there (scripts/install-deps.sh).
  static std::string BinDir() {
    const char* bin = std::getenv("CONDUIT_PG_BIN");
    return bin ? bin : "/usr/lib/postgresql/15/bin";
  }
  static bool Installed() { return ::access((BinDir() + "/initdb").c_str(), X_OK) == 0; }

  bool running() const { return started_; }
  const std::string& log() const { return log_; }
  // A libpq conninfo for the server's database `postgres`.
  std::string conninfo(const std::string& application_name = "conduit-test") const {
    return absl::StrCat("host=", data_, " port=", port_, " dbname=postgres user=conduit",
                        " application_name=", application_name);
  }

  void Stop() {
    if (!started_) return;
    started_ = false;
    if (Run({bin_ + "/pg_ctl", "-D", data_, "-m", "fast", "-w", "-t", "30", "stop"}) == 0) return;
    std::ifstream pid_file(data_ + "/postmaster.pid");
    pid_t pid = 0;
    if (pid_file >> pid && pid > 0) ::kill(pid, SIGKILL);
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
  bool started_ = false;
};

}  // namespace conduit::testing
