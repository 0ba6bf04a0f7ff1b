#pragma once

// The labels of conduit_build_info, set by the build (common/CMakeLists.txt) on the one source
// that includes this header.
namespace conduit::metrics {

inline constexpr char kBuildVersion[] = CONDUIT_BUILD_VERSION;
inline constexpr char kBuildCommit[] = CONDUIT_BUILD_COMMIT;
inline constexpr char kBuildCompiler[] = CONDUIT_BUILD_COMPILER;
inline constexpr char kBuildType[] = CONDUIT_BUILD_TYPE;

}  // namespace conduit::metrics
