#include "common/logging/logging.h"

#include <google/protobuf/stubs/logging.h>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

namespace conduit::logging {
namespace {

// libprotobuf logs one ERROR line per message it refuses to parse (e.g. invalid UTF-8 in a
// string field): a client could fill the log at its request rate. Its lines go through spdlog,
// at most one per source line per interval, with the count of the ones left out.
class ProtobufLogLimiter {
 public:
  static constexpr absl::Duration kInterval = absl::Seconds(10);

  void Log(google::protobuf::LogLevel level, const char* file, int line,
           const std::string& message) {
    int64_t suppressed = 0;
    {
      const absl::Time now = absl::Now();
      absl::MutexLock lock(&mu_);
      Site& site = sites_[std::make_pair(file, line)];
      if (now - site.last < kInterval) {
        ++site.suppressed;
        return;
      }
      site.last = now;
      suppressed = site.suppressed;
      site.suppressed = 0;
    }
    const spdlog::level::level_enum spd =
        level >= google::protobuf::LOGLEVEL_ERROR     ? spdlog::level::err
        : level == google::protobuf::LOGLEVEL_WARNING ? spdlog::level::warn
                                                      : spdlog::level::info;
    if (suppressed > 0) {
      spdlog::log(spd, "libprotobuf {}:{}: {} ({} more like it in the last {}s)", file, line,
                  message, suppressed, absl::ToInt64Seconds(kInterval));
    } else {
      spdlog::log(spd, "libprotobuf {}:{}: {}", file, line, message);
    }
  }

 private:
  struct Site {
    absl::Time last = absl::InfinitePast();
    int64_t suppressed = 0;
  };
  absl::Mutex mu_;
  absl::flat_hash_map<std::pair<const char*, int>, Site> sites_ ABSL_GUARDED_BY(mu_);
};

void ProtobufLog(google::protobuf::LogLevel level, const char* file, int line,
                 const std::string& message) {
  static ProtobufLogLimiter* limiter = new ProtobufLogLimiter();
  limiter->Log(level, file, line, message);
}

}  // namespace

void Init(const std::string& level) {
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%L%$ [%t] %v");
  auto parsed = spdlog::level::from_str(level);
  spdlog::set_level(parsed == spdlog::level::off && level != "off" ? spdlog::level::info : parsed);
  google::protobuf::SetLogHandler(&ProtobufLog);
}

}  // namespace conduit::logging
