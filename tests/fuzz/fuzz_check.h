#pragma once

// The fuzz targets' one assertion: abort (libFuzzer keeps the input) when `cond` fails. Not
// assert(): it must hold in every build mode.
#include <cstdlib>

#define FUZZ_CHECK(cond) \
  if (!(cond)) std::abort()
