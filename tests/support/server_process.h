#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/support/child_process.h"

namespace conduit::testing {

// A Conduit server child process (conduit-broker, conduit-queue, ...) on 127.0.0.1:0 with a
// --port-file; output goes to <work>/server.log. The destructor SIGKILLs it if still running, and
// it gets SIGKILL when the thread that started it ends (ChildProcess, SpawnTiedChild).
class ServerProcess {
 public:
  ServerProcess(const std::string& binary, const std::string& data_dir, const std::string& work,
                std::vector<std::string> extra_args = {})
      : child_(Args(binary, data_dir, work, std::move(extra_args)), work + "/server.log") {
    if (!child_.started()) {
      std::fprintf(stderr, "cannot start %s: %s\n", binary.c_str(),
                   std::strerror(child_.spawn_error()));
      return;
    }
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (absl::Now() < deadline) {
      std::ifstream in(PortFile(work));
      int port = 0;
      if (in >> port && port > 0) {
        address_ = absl::StrCat("127.0.0.1:", port);
        return;
      }
      int status = 0;
      if (child_.Exited(&status)) {
        // Said here, as the log may be empty (killed by a signal before it wrote anything).
        std::fprintf(stderr, "%s exited before serving: %s %d (log: %s/server.log)\n",
                     binary.c_str(), WIFSIGNALED(status) ? "signal" : "exit status",
                     WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status), work.c_str());
        return;
      }
      absl::SleepFor(absl::Milliseconds(20));  // waiting for a child process to bind
    }
  }

  bool running() const { return child_.pid() > 0 && !address_.empty(); }
  pid_t pid() const { return child_.pid(); }
  const std::string& address() const { return address_; }

  // See ChildProcess: Signal (SIGSTOP returns once the process has stopped), Exited (reaps a
  // child expected to stop by itself), Kill (sends and reaps; the wait status).
  void Signal(int signal) { child_.Signal(signal); }
  bool Exited(int* status = nullptr) { return child_.Exited(status); }
  int Kill(int signal) { return child_.Kill(signal); }

 private:
  static std::string PortFile(const std::string& work) { return work + "/port"; }
  // The command line; removes a port file left by an earlier run in `work`.
  static std::vector<std::string> Args(const std::string& binary, const std::string& data_dir,
                                       const std::string& work,
                                       std::vector<std::string> extra_args) {
    std::remove(PortFile(work).c_str());
    std::vector<std::string> args = {binary,         "--data-dir",       data_dir, "--listen",
                                     "127.0.0.1:0",  "--metrics-listen", "",       "--port-file",
                                     PortFile(work), "--log-level",      "warn"};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    return args;
  }

  ChildProcess child_;
  std::string address_;
};

}  // namespace conduit::testing
