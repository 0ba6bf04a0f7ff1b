#include "tools/conduit/batching.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <utility>

namespace conduit::cli {

std::istream* OpenInput(const std::string& file, std::ifstream* storage) {
  if (file.empty()) {
    // Not synchronized with C stdio, std::cin reads a buffer at a time instead of a getc per
    // character (about 50 ms a MiB). The CLI writes with stdio and reads only this stream.
    std::ios::sync_with_stdio(false);
    return &std::cin;
  }
  storage->open(file);
  return *storage ? storage : nullptr;
}

Progress::Progress(std::string noun)
    : noun_(std::move(noun)), start_(absl::Now()), next_print_(start_ + absl::Seconds(1)) {}

void Progress::Add(int64_t n) {
  sent_ += n;
  const absl::Time now = absl::Now();
  if (now < next_print_) return;
  std::fprintf(stderr, "\rsent %lld %s (%.0f/s)", static_cast<long long>(sent_), noun_.c_str(),
               sent_ / absl::ToDoubleSeconds(now - start_));
  printed_ = true;
  next_print_ = now + absl::Seconds(1);
}

double Progress::Finish() {
  if (printed_) std::fputc('\n', stderr);
  printed_ = false;
  return std::max(1e-6, absl::ToDoubleSeconds(absl::Now() - start_));
}

}  // namespace conduit::cli
