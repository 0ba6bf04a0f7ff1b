#pragma once

#include <vector>

namespace conduit::flags {

// Parses absl flags, accepting both --data-dir and --data_dir spellings (absl flag names use
// underscores; the documented command lines use dashes). Exits on unknown flags.
// Returns the positional arguments.
std::vector<char*> Parse(int argc, char** argv);

}  // namespace conduit::flags
