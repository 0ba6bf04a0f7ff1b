#pragma once

#include <signal.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/testing/spawn.h"

namespace conduit::testing {

// A Conduit server child process (conduit-broker, conduit-queue, ...) on 127.0.0.1:0 with a
// --port-file; output goes to <work>/server.log. The destructor SIGKILLs it if still running, and
// it gets SIGKILL when the thread that started it ends (SpawnTiedChild).
class ServerProcess {
 public:
  ServerProcess(const std::string& binary, const std::string& data_dir, const std::string& work,
                std::vector<std::string> extra_args = {}) {
    const std::string port_file = work + "/port";
    std::remove(port_file.c_str());
    std::vector<std::string> args = {binary,           "--data-dir",  data_dir,
                                     "--listen",       "127.0.0.1:0", "--metrics-listen",
                                     "",               "--port-file", port_file,
                                     "--log-level",    "warn"};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    const std::string log = work + "/server.log";
    int error = 0;
    pid_ = SpawnTiedChild(std::move(args), log, &error);
    if (pid_ < 0) {
      std::fprintf(stderr, "cannot start %s: %s\n", binary.c_str(), std::strerror(error));
      return;
    }
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (absl::Now() < deadline) {
      std::ifstream in(port_file);
      int port = 0;
      if (in >> port && port > 0) {
        address_ = absl::StrCat("127.0.0.1:", port);
        return;
      }
      int status;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        // Said here, as the log may be empty (killed by a signal before it wrote anything).
        std::fprintf(stderr, "%s exited before serving: %s %d (log: %s)\n", binary.c_str(),
                     WIFSIGNALED(status) ? "signal" : "exit status",
                     WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status), log.c_str());
        pid_ = -1;
        return;
      }
      absl::SleepFor(absl::Milliseconds(20));  // waiting for a child process to bind
    }
  }
  ~ServerProcess() { Kill(SIGKILL); }

  bool running() const { return pid_ > 0 && !address_.empty(); }
  pid_t pid() const { return pid_; }
  const std::string& address() const { return address_; }

  // Sends `signal` (SIGSTOP, SIGCONT). For SIGSTOP it returns once every thread has stopped:
  // kill() wakes one thread to start the group stop, and the others run on until it reaches
  // them, long enough on a busy machine for a request sent "to a paused broker" to be served.
  void Signal(int signal) {
    if (pid_ <= 0) return;
    ::kill(pid_, signal);
    if (signal != SIGSTOP) return;
    int status = 0;
    if (waitpid(pid_, &status, WUNTRACED) == pid_ && !WIFSTOPPED(status)) pid_ = -1;  // exited
  }
  // Whether the process has exited (reaps it then); for a child expected to stop by itself.
  bool Exited(int* status = nullptr) {
    if (pid_ <= 0) return true;
    int st = 0;
    if (waitpid(pid_, &st, WNOHANG) != pid_) return false;
    pid_ = -1;
    if (status != nullptr) *status = st;
    return true;
  }

  // Sends `signal` and reaps the process; returns its wait status.
  int Kill(int signal) {
    if (pid_ <= 0) return 0;
    ::kill(pid_, signal);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

 private:
  pid_t pid_ = -1;
  std::string address_;
};

}  // namespace conduit::testing
