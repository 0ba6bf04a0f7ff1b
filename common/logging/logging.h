#pragma once

#include <string>

#include <spdlog/spdlog.h>

namespace conduit::logging {

// Configures the default spdlog logger for a server process: one line per event with time,
// level and thread, at `level` ("trace".."critical"; unknown names mean "info"). libprotobuf's
// own log lines go through it too, rate-limited per source line.
void Init(const std::string& level);

}  // namespace conduit::logging
