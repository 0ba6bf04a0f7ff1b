#include "common/flags/flags.h"

#include <string>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"

namespace conduit::flags {

namespace {

// The path of a flag's file from the repository root ("common/grpc/server_main.cc"), without
// the directory it was built in.
std::string FromRoot(absl::string_view path) {
  for (absl::string_view top : {"common/", "services/", "tools/", "bench/"}) {
    if (size_t at = path.find(top); at != absl::string_view::npos) {
      return std::string(path.substr(at));
    }
  }
  return std::string(path);
}

}  // namespace

std::vector<char*> Parse(int argc, char** argv, const char* usage) {
  if (usage != nullptr) {
    absl::SetProgramUsageMessage(usage);
    absl::FlagsUsageConfig config;
    config.contains_help_flags = [](absl::string_view path) {
      return !absl::StrContains(path, "absl/");
    };
    config.normalize_filename = FromRoot;
    absl::SetFlagsUsageConfig(config);
  }
  // Rewrite "--some-flag[=v]" to "--some_flag[=v]" in place; the name part only.
  static std::vector<std::string> storage;
  storage.assign(argv, argv + argc);
  std::vector<char*> args;
  for (std::string& arg : storage) {
    if (arg.rfind("--", 0) == 0) {
      size_t end = arg.find('=');
      if (end == std::string::npos) end = arg.size();
      for (size_t i = 2; i < end; ++i) {
        if (arg[i] == '-') arg[i] = '_';
      }
    }
    args.push_back(arg.data());
  }
  return absl::ParseCommandLine(static_cast<int>(args.size()), args.data());
}

}  // namespace conduit::flags
