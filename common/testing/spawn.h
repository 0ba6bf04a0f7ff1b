#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

extern char** environ;

namespace conduit::testing {

// Starts `argv` (argv[0] a path) as a child process, stdout and stderr appended to `log`. Returns
// its pid, or -1 with `*error` (an errno) when it could not be started (no such binary, the log
// cannot be opened, ...).
//
// The child gets SIGKILL when the thread that started it ends (PR_SET_PDEATHSIG), so a test that
// crashes, aborts or is killed at its timeout leaves no server running; the owners' destructors
// stop them otherwise. Start children from the thread that outlives them (a fixture's SetUp, the
// test body), not from a helper thread that ends first.
inline pid_t SpawnTiedChild(std::vector<std::string> argv, const std::string& log,
                            int* error = nullptr) {
  int ignored = 0;
  if (error == nullptr) error = &ignored;
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (out < 0) {
    *error = errno;
    return -1;
  }
  // exec's failure reaches the parent through a pipe that a successful exec closes.
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) {
    *error = errno;
    ::close(out);
    return -1;
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {  // the child: async-signal-safe calls only until exec
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the starting thread died before prctl
    ::dup2(out, 1);
    ::dup2(out, 2);
    ::execve(args[0], args.data(), environ);
    const int failed = errno;
    (void)!::write(report[1], &failed, sizeof failed);
    ::_exit(127);
  }
  const int fork_error = errno;
  ::close(out);
  ::close(report[1]);
  if (pid < 0) {
    ::close(report[0]);
    *error = fork_error;
    return -1;
  }
  int exec_error = 0;
  ssize_t n;
  do {
    n = ::read(report[0], &exec_error, sizeof exec_error);
  } while (n < 0 && errno == EINTR);
  ::close(report[0]);
  if (n == sizeof exec_error) {
    ::waitpid(pid, nullptr, 0);
    *error = exec_error;
    return -1;
  }
  return pid;
}

// Whether process `pid` has ended within `timeout`: gone, or a zombie its new parent (init, or a
// subreaper) has not reaped yet. For tests that check a child died with its parent.
inline bool ProcessEndedWithin(pid_t pid, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
    std::string line;
    if (!std::getline(stat, line)) return true;
    const size_t name_end = line.rfind(')');
    if (name_end != std::string::npos && line.compare(name_end, 3, ") Z") == 0) return true;
    absl::SleepFor(absl::Milliseconds(10));  // waiting for the kernel to end the process
  }
  return false;
}

// For tests that a child ends with its parent: forks a "test process" that runs `start` (it
// starts a child and returns its pid, or -1) and is then SIGKILLed, as ctest kills a test at its
// timeout, so no destructor runs. Returns what `start` returned, once that process is gone (-1
// if it ended otherwise). Call it while the calling process has no other threads (the test
// binary's first test, say): the forked copy goes on running code.
inline pid_t PidLeftByAKilledProcess(const std::function<pid_t()>& start) {
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) return -1;
  const pid_t test = ::fork();
  if (test == 0) {
    ::close(report[0]);
    const pid_t child = start();
    (void)!::write(report[1], &child, sizeof child);
    ::kill(::getpid(), SIGKILL);
    ::_exit(1);
  }
  ::close(report[1]);
  pid_t child = -1;
  if (test < 0 || ::read(report[0], &child, sizeof child) != sizeof child) child = -1;
  ::close(report[0]);
  int status = 0;
  if (test > 0) ::waitpid(test, &status, 0);
  return test > 0 && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL ? child : -1;
}

}  // namespace conduit::testing
