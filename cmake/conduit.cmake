# The one helper pair for targets (in the spirit of absl_cc_library / rp_test).
#
# conduit_cc_library(NAME n SRCS ... DEPS ...)   static library; header-only when SRCS is empty
# conduit_cc_test(NAME n SRCS ... DEPS ... [LABELS ...])  gtest binary registered with CTest
# conduit_proto_library(NAME n PROTOS ... [ROOT dir]) C++ messages + gRPC stubs (ROOT: proto/)
# conduit_server_binary(target)                   a server: allocates with jemalloc
# conduit_pch(NAME n HEADERS ... DEPS ...)          a precompiled header to reuse (below)

# Precompiled headers: what the tests and the CLI parse in every source (the standard library,
# gRPC, protobuf, Abseil; GoogleTest, CLI11), parsed once. Only external headers, so a PCH never
# waits for protoc and no change of ours rebuilds it. Measured in a cold `make run`: the CLI's
# sources took 143 s of compile time without, 98 s with one. The libraries take none: the same
# header for all of them changed `make run`'s compile time by 2 % (977 s, 960 s), within noise,
# and loading it slowed the small ones.
set(CONDUIT_PCH_HEADERS
  <algorithm> <atomic> <cstdint> <functional> <map> <memory> <optional> <set> <string> <thread>
  <utility> <vector>
  <grpcpp/grpcpp.h> <google/protobuf/message.h>
  <absl/container/flat_hash_map.h> <absl/status/status.h> <absl/status/statusor.h>
  <absl/strings/str_cat.h> <absl/synchronization/mutex.h> <absl/time/clock.h> <absl/time/time.h>)
set(CONDUIT_PCH_DEPS gRPC::grpc++ protobuf::libprotobuf absl::status absl::statusor
  absl::strings absl::time absl::synchronization absl::flat_hash_map)

# conduit_pch(NAME n HEADERS ... DEPS ... [COPTS ...]): a target whose header others reuse with
# target_precompile_headers(t REUSE_FROM n).
function(conduit_pch)
  cmake_parse_arguments(A "" "NAME" "HEADERS;DEPS;COPTS" ${ARGN})
  add_library(${A_NAME} STATIC ${PROJECT_SOURCE_DIR}/cmake/pch.cc)
  target_compile_options(${A_NAME} PRIVATE ${A_COPTS})
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    # Without a timestamp in the header, ccache can reuse the compiles that include it.
    target_compile_options(${A_NAME} PRIVATE "SHELL:-Xclang -fno-pch-timestamp")
  endif()
  target_link_libraries(${A_NAME} PUBLIC ${A_DEPS})
  target_precompile_headers(${A_NAME} PRIVATE ${A_HEADERS})
endfunction()

function(conduit_cc_library)
  cmake_parse_arguments(A "" "NAME" "SRCS;DEPS" ${ARGN})
  if(A_SRCS)
    add_library(${A_NAME} STATIC ${A_SRCS})
    target_include_directories(${A_NAME} PUBLIC ${PROJECT_SOURCE_DIR})
    target_link_libraries(${A_NAME} PUBLIC ${A_DEPS})
  else()
    add_library(${A_NAME} INTERFACE)
    target_include_directories(${A_NAME} INTERFACE ${PROJECT_SOURCE_DIR})
    target_link_libraries(${A_NAME} INTERFACE ${A_DEPS})
  endif()
endfunction()

# Test sources: -O0, with their own precompiled header. The code under test lives in the
# libraries, built with the build type's optimisation; a test's own code (assertions, fixtures,
# fakes) runs the same unoptimised, and half of a cold build's compile time was test sources.
# Measured on one gRPC-heavy test source with clang 14: -O2 21 s, -O0 14 s.
set(CONDUIT_TEST_COPTS -O0)
conduit_pch(NAME conduit_test_pch
  HEADERS ${CONDUIT_PCH_HEADERS} <gmock/gmock.h> <gtest/gtest.h>
  DEPS ${CONDUIT_PCH_DEPS} GTest::gmock GTest::gtest COPTS ${CONDUIT_TEST_COPTS})

function(conduit_cc_test)
  cmake_parse_arguments(A "" "NAME;TIMEOUT" "SRCS;DEPS;LABELS" ${ARGN})
  add_executable(${A_NAME} ${A_SRCS})
  target_include_directories(${A_NAME} PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(${A_NAME} PRIVATE ${A_DEPS} GTest::gmock GTest::gtest_main)
  target_compile_options(${A_NAME} PRIVATE ${CONDUIT_TEST_COPTS})
  target_precompile_headers(${A_NAME} REUSE_FROM conduit_test_pch)
  add_test(NAME ${A_NAME} COMMAND ${A_NAME})
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 300)
  endif()
  set_tests_properties(${A_NAME} PROPERTIES TIMEOUT ${A_TIMEOUT} LABELS "${A_LABELS}"
    ENVIRONMENT "CONDUIT_BIN_DIR=${PROJECT_BINARY_DIR}/bin;CONDUIT_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
endfunction()

function(conduit_proto_library)
  cmake_parse_arguments(A "" "NAME;ROOT" "PROTOS;DEPS" ${ARGN})
  if(NOT A_ROOT)
    set(A_ROOT ${PROJECT_SOURCE_DIR}/proto)
  endif()
  set(srcs)
  foreach(proto ${A_PROTOS})
    get_filename_component(dir ${proto} DIRECTORY)
    get_filename_component(stem ${proto} NAME_WE)
    set(out ${PROJECT_BINARY_DIR}/gen/${dir}/${stem})
    list(APPEND srcs ${out}.pb.cc ${out}.grpc.pb.cc)
    add_custom_command(
      OUTPUT ${out}.pb.cc ${out}.pb.h ${out}.grpc.pb.cc ${out}.grpc.pb.h
      COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/gen
      COMMAND protobuf::protoc
        -I${A_ROOT}
        --cpp_out=${PROJECT_BINARY_DIR}/gen
        --grpc_out=${PROJECT_BINARY_DIR}/gen
        --plugin=protoc-gen-grpc=$<TARGET_FILE:gRPC::grpc_cpp_plugin>
        ${A_ROOT}/${proto}
      DEPENDS ${A_ROOT}/${proto}
      COMMENT "protoc ${proto}")
  endforeach()
  add_library(${A_NAME} STATIC ${srcs})
  target_include_directories(${A_NAME} PUBLIC ${PROJECT_BINARY_DIR}/gen)
  target_link_libraries(${A_NAME} PUBLIC gRPC::grpc++ protobuf::libprotobuf ${A_DEPS})
endfunction()

# Servers allocate with jemalloc (libjemalloc-dev), the allocator RocksDB recommends. Measured in
# docs/PERFORMANCE-NOTES.md: glibc malloc (with malloc_consolidate) took ~18 % of the server's
# CPU under load, and jemalloc raised throughput 12-24 %. Without the library (a build
# without scripts/install-deps.sh) servers keep glibc's allocator.
find_library(JEMALLOC_LIBRARY NAMES jemalloc)
function(conduit_server_binary target)
  if(JEMALLOC_LIBRARY)
    target_link_libraries(${target} PRIVATE ${JEMALLOC_LIBRARY})
  endif()
endfunction()
