#pragma once

#include <signal.h>
#include <sys/wait.h>

#include <string>
#include <vector>

#include "common/testing/spawn.h"

namespace conduit::testing {

// Runs `argv` to completion with stdout and stderr appended to `log`; its wait status, or -1
// when it could not be started.
inline int RunCommand(std::vector<std::string> argv, const std::string& log) {
  const pid_t pid = SpawnTiedChild(std::move(argv), log);
  if (pid < 0) return -1;
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

// A child process (not a server with a port file: see ServerProcess for those), output
// appended to `log`. The destructor SIGKILLs it if still running, and it gets SIGKILL when the
// thread that started it ends (SpawnTiedChild).
class ChildProcess {
 public:
  ChildProcess(std::vector<std::string> argv, const std::string& log)
      : pid_(SpawnTiedChild(std::move(argv), log, &spawn_error_)) {}
  ~ChildProcess() { Kill(SIGKILL); }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  bool started() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  int spawn_error() const { return spawn_error_; }  // the errno when it could not be started

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

  // Whether the process has exited (reaps it then).
  bool Exited(int* status = nullptr) {
    if (pid_ <= 0) return true;
    int st = 0;
    if (waitpid(pid_, &st, WNOHANG) != pid_) return false;
    pid_ = -1;
    if (status != nullptr) *status = st;
    return true;
  }

  // Sends `signal` and reaps the process; its wait status.
  int Kill(int signal) {
    if (pid_ <= 0) return 0;
    ::kill(pid_, signal);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

 private:
  int spawn_error_ = 0;
  pid_t pid_ = -1;
};

}  // namespace conduit::testing
