#pragma once

#include <vector>

namespace conduit::flags {

// Parses absl flags, accepting both --data-dir and --data_dir spellings (absl flag names use
// underscores; the documented command lines use dashes). Exits on unknown flags.
// `usage` (when given) is what --help prints first; --help then lists every Conduit flag the
// binary has, grouped by the source file that defines it (--helpfull adds Abseil's own).
// Returns the positional arguments.
std::vector<char*> Parse(int argc, char** argv, const char* usage = nullptr);

}  // namespace conduit::flags
