#include "common/grpc/arena_allocator.h"

#include <google/protobuf/struct.pb.h>
#include <gtest/gtest.h>

#include <string>

namespace conduit::grpc_util {
namespace {

using google::protobuf::ListValue;
using google::protobuf::Struct;

// What the allocator is for: a call's request, everything parsed into it, and its response
// on one arena, so that a batch of submessages is freed at once with the call.
TEST(ArenaMessageAllocator, ACallsMessagesAndWhatIsParsedIntoThemShareOneArena) {
  ArenaMessageAllocator<ListValue, Struct> allocator;
  grpc::MessageHolder<ListValue, Struct>* holder = allocator.AllocateMessages();
  ASSERT_NE(holder->request()->GetArena(), nullptr);
  EXPECT_EQ(holder->request()->GetArena(), holder->response()->GetArena());

  ListValue sent;
  for (int i = 0; i < 100; ++i) sent.add_values()->set_string_value(std::string(100, 'v'));
  ASSERT_TRUE(holder->request()->ParseFromString(sent.SerializeAsString()));
  ASSERT_EQ(holder->request()->values_size(), 100);
  EXPECT_EQ(holder->request()->values(99).GetArena(), holder->request()->GetArena());
  EXPECT_EQ(holder->request()->values(99).string_value(), std::string(100, 'v'));

  (*holder->response()->mutable_fields())["n"].set_number_value(100);
  EXPECT_EQ(holder->response()->fields().at("n").GetArena(), holder->request()->GetArena());
  holder->Release();  // frees both (a leak or double free shows under the sanitizers)
}

// Each call gets its own arena: one call's release does not free another's messages.
TEST(ArenaMessageAllocator, EachCallHasItsOwnArena) {
  ArenaMessageAllocator<ListValue, Struct> allocator;
  auto* first = allocator.AllocateMessages();
  auto* second = allocator.AllocateMessages();
  EXPECT_NE(first->request()->GetArena(), second->request()->GetArena());
  second->request()->add_values()->set_string_value("kept");
  first->Release();
  EXPECT_EQ(second->request()->values(0).string_value(), "kept");
  second->Release();
}

}  // namespace
}  // namespace conduit::grpc_util
