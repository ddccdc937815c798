// Usage records in SQLite: batches are summed per tenant and device, filtered by time, and still
// there after the database is closed and opened again (a server restart).
#include "server/metering_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

namespace gpupool::server {
namespace {

std::string temporaryPath() {
  char pattern[] = "/tmp/gpupool-usage-XXXXXX";
  int fd = ::mkstemp(pattern);
  ::close(fd);
  ::unlink(pattern);
  return pattern;
}

TEST(MeteringStoreTest, SumsBatchesPerTenantAndDeviceAndSurvivesReopening) {
  std::string path = temporaryPath();
  std::string error;
  {
    auto store = MeteringStore::open(path, false, &error);
    ASSERT_TRUE(store) << error;
    UsageByKey first, second;
    first[{"alice", 0}].gpuSeconds = 1.5;
    first[{"alice", 0}].launches = 3;
    first[{"bob", 1}].bytesIn = 100;
    second[{"alice", 0}].gpuSeconds = 0.5;
    second[{"alice", 0}].calls = 7;
    ASSERT_TRUE(store->append(1000.0, first, &error)) << error;
    ASSERT_TRUE(store->append(2000.0, second, &error)) << error;
  }
  auto store = MeteringStore::open(path, true, &error);
  ASSERT_TRUE(store) << error;
  UsageByKey all = store->report(0, &error);
  EXPECT_EQ(error, "");
  ASSERT_EQ(all.size(), 2u);
  EXPECT_DOUBLE_EQ((all[{"alice", 0}].gpuSeconds), 2.0);
  EXPECT_EQ((all[{"alice", 0}].launches), 3u);
  EXPECT_EQ((all[{"alice", 0}].calls), 7u);
  EXPECT_EQ((all[{"bob", 1}].bytesIn), 100u);
  UsageByKey recent = store->report(1500.0, &error);
  ASSERT_EQ(recent.size(), 1u);
  EXPECT_DOUBLE_EQ((recent[{"alice", 0}].gpuSeconds), 0.5);
  ::unlink(path.c_str());
  ::unlink((path + "-wal").c_str());
  ::unlink((path + "-shm").c_str());
}

TEST(MeteringStoreTest, LedgerHandsOutEachAmountOnce) {
  UsageLedger ledger;
  ledger.addKernel("a", 0, 0.25, 0.1);
  ledger.addCall("a", 0, 10, 20);
  UsageByKey batch = ledger.takePending();
  EXPECT_EQ((batch[{"a", 0}].launches), 1u);
  EXPECT_EQ((batch[{"a", 0}].bytesOut), 20u);
  EXPECT_TRUE(ledger.takePending().empty());
  ledger.restorePending(batch);
  EXPECT_EQ((ledger.takePending()[{"a", 0}].calls), 1u);
  EXPECT_DOUBLE_EQ((ledger.totals()[{"a", 0}].gpuSeconds), 0.25);
}

TEST(MeteringStoreTest, OpeningAnUnwritablePathFailsWithTheReason) {
  std::string error;
  EXPECT_FALSE(MeteringStore::open("/nonexistent-dir/usage.db", false, &error));
  EXPECT_NE(error.find("/nonexistent-dir/usage.db"), std::string::npos) << error;
}

}  // namespace
}  // namespace gpupool::server
