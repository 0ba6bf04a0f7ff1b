#include "common/flags/flags.h"

#include <string>

#include "absl/flags/parse.h"

namespace conduit::flags {

std::vector<char*> Parse(int argc, char** argv) {
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
