// The server's request table: every request kind of the wire schema has exactly one handler, so a
// kind added to the schema without a handler fails here, not in a client's call; two families
// claiming one kind make the table's constructor throw.
#include "server/handlers/request_table.h"

#include <capnp/schema.h>
#include <gtest/gtest.h>

#include <set>
#include <string>

namespace gpupool::server {
namespace {

TEST(RequestTable, EveryRequestKindOfTheSchemaHasAHandler) {
  RequestTable table;
  auto fields = capnp::Schema::from<wire::Request>().getUnionFields();
  ASSERT_GT(fields.size(), 30u);
  std::set<std::string> missing;
  for (auto field : fields) {
    auto kind = static_cast<wire::Request::Which>(field.getProto().getDiscriminantValue());
    std::string name = field.getProto().getName().cStr();
    if (name.rfind("reserved", 0) == 0) continue;  // an ordinal held for a branch not merged yet
    if (!table.find(kind)) missing.insert(name);
  }
  EXPECT_TRUE(missing.empty()) << "request kinds without a handler: " << [&] {
    std::string names;
    for (const auto& name : missing) names += name + " ";
    return names;
  }();
}

TEST(RequestTable, KindsBeyondTheSchemaHaveNone) {
  RequestTable table;
  auto fields = capnp::Schema::from<wire::Request>().getUnionFields();
  EXPECT_EQ(table.find(static_cast<wire::Request::Which>(fields.size())), nullptr);
  EXPECT_EQ(table.find(static_cast<wire::Request::Which>(0xffff)), nullptr);
}

TEST(RequestTable, TheCallsThatWaitForTheDeviceWaitOnWaiters) {
  RequestTable table;
  auto fields = capnp::Schema::from<wire::Request>().getUnionFields();
  std::set<std::string> waits;
  for (auto field : fields) {
    auto kind = static_cast<wire::Request::Which>(field.getProto().getDiscriminantValue());
    const RequestHandlerRow* row = table.row(kind);
    if (row && row->waitFor) waits.insert(field.getProto().getName().cStr());
  }
  EXPECT_EQ(waits, (std::set<std::string>{"ctxSynchronize", "streamSynchronize", "eventSynchronize",
                                          "memcpyDtoH", "hostGateWait"}));
}

}  // namespace
}  // namespace gpupool::server
