#pragma once

#include <sys/types.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

namespace conduit::testing {

// A process's resident memory as Linux reports it in /proc/<pid>/status: now (VmRSS) and the
// peak since the process started (VmHWM).
struct ProcessMemory {
  int64_t rss_kib = 0;
  int64_t hwm_kib = 0;

  double rss_mib() const { return rss_kib / 1024.0; }
  double hwm_mib() const { return hwm_kib / 1024.0; }
};

// Reads the resident memory of `pid`; zeros when the process is gone or /proc does not say.
inline ProcessMemory ReadProcessMemory(pid_t pid) {
  ProcessMemory memory;
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    // The lines read "VmRSS:\t  123456 kB"; strtoll skips the blanks and stops at " kB".
    if (line.rfind("VmRSS:", 0) == 0) memory.rss_kib = std::strtoll(line.c_str() + 6, nullptr, 10);
    if (line.rfind("VmHWM:", 0) == 0) memory.hwm_kib = std::strtoll(line.c_str() + 6, nullptr, 10);
  }
  return memory;
}

}  // namespace conduit::testing
