// The SM partition rules of cuDevSmResourceSplitByCount, by compute capability, as cuda.h states
// them: 6.x and 7.x partitions of at least 2 SMs in steps of 2, 8.x at least 4 in steps of 2, 9.0+
// at least 8 in steps of 8. CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING treats each SM
// independently of its processing cluster, which lowers both to 2.
#pragma once

#include <cuda.h>

namespace gpupool::client {

struct SmPartitionRules {
  unsigned minSize;    // CUdevSmResource::minSmPartitionSize
  unsigned alignment;  // CUdevSmResource::smCoscheduledAlignment
};

inline SmPartitionRules smPartitionRules(int computeMajor, unsigned useFlags) {
  if (useFlags & CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING) return {2, 2};
  if (computeMajor >= 9) return {8, 8};
  if (computeMajor == 8) return {4, 2};
  return {2, 2};
}

// How a resource of `inputSms` SMs splits for cuDevSmResourceSplitByCount(minCount): groups of
// `groupSize` SMs (minCount raised to the minimum and rounded up to the alignment), as many as fit.
struct SmSplitPlan {
  CUresult result = CUDA_SUCCESS;
  unsigned groupSize = 0;
  unsigned groups = 0;  // at most; the caller may ask for fewer
};

inline SmSplitPlan planSmSplit(unsigned inputSms, int computeMajor, unsigned useFlags,
                               unsigned minCount) {
  SmSplitPlan plan;
  SmPartitionRules rules = smPartitionRules(computeMajor, useFlags);
  unsigned size = minCount < rules.minSize ? rules.minSize : minCount;
  size = (size + rules.alignment - 1) / rules.alignment * rules.alignment;
  // More SMs than the input has is a configuration no group fits, like one that rounds up past
  // it (observed on driver 580.159.04, H200: CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION).
  if (minCount > inputSms || size > inputSms) {
    plan.result = CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;  // not even one group fits
    return plan;
  }
  plan.groupSize = size;
  plan.groups = inputSms / size;
  return plan;
}

}  // namespace gpupool::client
