#include "common/logging/logging.h"

namespace conduit::logging {

void Init(const std::string& level) {
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%L%$ [%t] %v");
  auto parsed = spdlog::level::from_str(level);
  spdlog::set_level(parsed == spdlog::level::off && level != "off" ? spdlog::level::info : parsed);
}

}  // namespace conduit::logging
