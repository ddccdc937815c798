// The SM partition rules of cuDevSmResourceSplitByCount (client/sm_partition.h): the minimum and
// alignment by compute capability, groups rounded up to both, and the errors.
#include "client/sm_partition.h"

#include <gtest/gtest.h>

namespace gpupool::client {
namespace {

TEST(SmPartitionTest, RulesByComputeCapability) {
  EXPECT_EQ(smPartitionRules(6, 0).minSize, 2u);
  EXPECT_EQ(smPartitionRules(7, 0).alignment, 2u);
  EXPECT_EQ(smPartitionRules(8, 0).minSize, 4u);
  EXPECT_EQ(smPartitionRules(8, 0).alignment, 2u);
  EXPECT_EQ(smPartitionRules(9, 0).minSize, 8u);
  EXPECT_EQ(smPartitionRules(10, 0).alignment, 8u);
  EXPECT_EQ(smPartitionRules(9, CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING).minSize, 2u);
}

TEST(SmPartitionTest, GroupsRoundUpToMinimumAndAlignment) {
  SmSplitPlan plan = planSmSplit(132, 9, 0, 0);  // no minimum asked: the partition minimum
  EXPECT_EQ(plan.result, CUDA_SUCCESS);
  EXPECT_EQ(plan.groupSize, 8u);
  EXPECT_EQ(plan.groups, 16u);  // 4 SMs remain
  plan = planSmSplit(132, 9, 0, 9);
  EXPECT_EQ(plan.groupSize, 16u);
  EXPECT_EQ(plan.groups, 8u);
  plan = planSmSplit(108, 8, 0, 5);
  EXPECT_EQ(plan.groupSize, 6u);
  EXPECT_EQ(plan.groups, 18u);
  plan = planSmSplit(132, 9, CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING, 3);
  EXPECT_EQ(plan.groupSize, 4u);
  EXPECT_EQ(plan.groups, 33u);
}

TEST(SmPartitionTest, Errors) {
  // More than the input (as the driver answers on an H200).
  EXPECT_EQ(planSmSplit(16, 9, 0, 17).result, CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION);
  // 6 of 6 SMs rounds up to 8 on 9.0: not even one group fits.
  EXPECT_EQ(planSmSplit(6, 9, 0, 6).result, CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION);
}

}  // namespace
}  // namespace gpupool::client
