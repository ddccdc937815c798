// The real CUDA driver, dlopened, with the entry points the cuda backend uses.
//
// Each entry point is resolved through the driver's cuGetProcAddress_v2 with the CUDA version of
// the ABI its PFN_ typedef names (so e.g. cuCtxSynchronize resolves to the 2000 ABI without a
// context argument, not the 13000 one), asking for legacy default-stream semantics. When that
// fails, the exported versioned name is looked up with dlsym. An entry point the driver lacks
// stays null, and calling it yields CUDA_ERROR_NOT_SUPPORTED with a message instead of a crash.
//
// The driver may be ours (tests chain `gpupoold --backend cuda --driver build/lib/libcuda.so.1`
// to an emu server), so nothing here assumes an NVIDIA implementation.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include <memory>
#include <string>

#include "server/backend.h"
#include "server/backends/cuda/cuda_fault.h"

namespace gpupool::server {

template <typename Fn>
struct DriverEntryPoint {
  const char* name;  // the base name, for messages
  Fn fn = nullptr;
  // Releases something (a destroy, free, unload or unmap) or makes a context current: still
  // called after a fatal fault, so that sessions' teardown gives back what the driver can.
  bool release = false;
};

class CudaDriver {
 public:
  // Loads the driver at `path` (a file name is searched as dlopen does) and calls cuInit(0). On
  // failure returns null and sets *error, e.g. "cannot load CUDA driver 'libcuda.so.1': ..." or
  // "cuInit failed: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)".
  static std::shared_ptr<CudaDriver> load(const std::string& path, std::string* error);

  ~CudaDriver();
  CudaDriver(const CudaDriver&) = delete;
  CudaDriver& operator=(const CudaDriver&) = delete;

  // Calls an entry point; a failure becomes a Status naming the call and the error. A fatal error
  // (isFatalDriverError) marks the driver faulted (fault()); after that every call but the
  // releases is refused, without reaching the driver, with the fault's code and a message naming
  // it.
  template <typename Fn, typename... Args>
  Status call(const DriverEntryPoint<Fn>& entry, Args... args) const {
    if (entry.fn == nullptr) {
      return Status::error(CUDA_ERROR_NOT_SUPPORTED,
                           std::string("the CUDA driver does not provide ") + entry.name);
    }
    if (fault_.faulted() && !entry.release) return fault_.refusal(entry.name, caller());
    CUresult result = entry.fn(args...);
    if (result == CUDA_SUCCESS) return Status::success();
    if (isFatalDriverError(result)) noteFatal(result, entry.name);
    return Status::error(result, std::string(entry.name) + " failed: " + describe(result));
  }

  // The fatal fault this process's driver state was lost to, if any (cuda_fault.h).
  CudaFaultState& fault() const { return fault_; }
  // Who this thread's driver calls are made for ("session 3 (tenant alice)"), for the fault's log
  // line: a context sets it before each of its calls (CudaContext::makeCurrent).
  static void setCaller(const std::shared_ptr<const std::string>& caller);
  static std::shared_ptr<const std::string> caller();

  // "CUDA_ERROR_X (the driver's description)", or the number when the driver cannot name it.
  std::string describe(CUresult result) const;
  // "CUDA_ERROR_X", or the number when the driver cannot name it.
  std::string errorName(CUresult result) const;

  // What cuDriverGetVersion reported at load.
  int version() const { return version_; }

  // Entry points (null when the driver lacks them).
  DriverEntryPoint<PFN_cuDeviceGetCount_v2000> deviceGetCount{"cuDeviceGetCount"};
  DriverEntryPoint<PFN_cuDeviceGet_v2000> deviceGet{"cuDeviceGet"};
  DriverEntryPoint<PFN_cuDeviceGetName_v2000> deviceGetName{"cuDeviceGetName"};
  DriverEntryPoint<PFN_cuDeviceGetUuid_v11040> deviceGetUuid{"cuDeviceGetUuid"};
  DriverEntryPoint<PFN_cuDeviceGetAttribute_v2000> deviceGetAttribute{"cuDeviceGetAttribute"};
  DriverEntryPoint<PFN_cuDeviceTotalMem_v3020> deviceTotalMem{"cuDeviceTotalMem"};

  DriverEntryPoint<PFN_cuCtxCreate_v12050> ctxCreateV4{"cuCtxCreate"};
  DriverEntryPoint<PFN_cuCtxCreate_v3020> ctxCreateV2{"cuCtxCreate"};  // drivers before 12.5
  DriverEntryPoint<PFN_cuCtxDestroy_v4000> ctxDestroy{"cuCtxDestroy", nullptr, true};
  DriverEntryPoint<PFN_cuCtxSetCurrent_v4000> ctxSetCurrent{"cuCtxSetCurrent", nullptr, true};
  DriverEntryPoint<PFN_cuCtxSynchronize_v2000> ctxSynchronize{"cuCtxSynchronize"};
  DriverEntryPoint<PFN_cuCtxSetLimit_v3010> ctxSetLimit{"cuCtxSetLimit"};
  DriverEntryPoint<PFN_cuCtxGetLimit_v3010> ctxGetLimit{"cuCtxGetLimit"};
  // Green contexts (CudaContext::createGreen).
  DriverEntryPoint<PFN_cuDeviceGetDevResource_v12040> deviceGetDevResource{
      "cuDeviceGetDevResource"};
  DriverEntryPoint<PFN_cuDevSmResourceSplitByCount_v12040> devSmResourceSplitByCount{
      "cuDevSmResourceSplitByCount"};
  DriverEntryPoint<PFN_cuDevResourceGenerateDesc_v12040> devResourceGenerateDesc{
      "cuDevResourceGenerateDesc"};
  DriverEntryPoint<PFN_cuGreenCtxCreate_v12040> greenCtxCreate{"cuGreenCtxCreate"};
  DriverEntryPoint<PFN_cuGreenCtxDestroy_v12040> greenCtxDestroy{"cuGreenCtxDestroy", nullptr,
                                                                 true};
  DriverEntryPoint<PFN_cuCtxFromGreenCtx_v12040> ctxFromGreenCtx{"cuCtxFromGreenCtx"};

  DriverEntryPoint<PFN_cuMemAlloc_v3020> memAlloc{"cuMemAlloc"};
  DriverEntryPoint<PFN_cuMemFree_v3020> memFree{"cuMemFree", nullptr, true};
  DriverEntryPoint<PFN_cuMemGetInfo_v3020> memGetInfo{"cuMemGetInfo"};
  DriverEntryPoint<PFN_cuMemHostAlloc_v2020> memHostAlloc{"cuMemHostAlloc"};
  DriverEntryPoint<PFN_cuMemFreeHost_v2000> memFreeHost{"cuMemFreeHost", nullptr, true};

  DriverEntryPoint<PFN_cuMemPoolCreate_v11020> memPoolCreate{"cuMemPoolCreate"};
  DriverEntryPoint<PFN_cuMemPoolDestroy_v11020> memPoolDestroy{"cuMemPoolDestroy", nullptr, true};
  DriverEntryPoint<PFN_cuMemAllocFromPoolAsync_v11020> memAllocFromPoolAsync{
      "cuMemAllocFromPoolAsync"};
  DriverEntryPoint<PFN_cuMemFreeAsync_v11020> memFreeAsync{"cuMemFreeAsync", nullptr, true};
  DriverEntryPoint<PFN_cuMemPoolTrimTo_v11020> memPoolTrimTo{"cuMemPoolTrimTo"};
  DriverEntryPoint<PFN_cuMemPoolSetAttribute_v11020> memPoolSetAttribute{"cuMemPoolSetAttribute"};
  DriverEntryPoint<PFN_cuMemPoolGetAttribute_v11020> memPoolGetAttribute{"cuMemPoolGetAttribute"};

  DriverEntryPoint<PFN_cuMemCreate_v10020> memCreate{"cuMemCreate"};
  DriverEntryPoint<PFN_cuMemRelease_v10020> memRelease{"cuMemRelease", nullptr, true};
  DriverEntryPoint<PFN_cuMemRetainAllocationHandle_v11000> memRetainAllocationHandle{
      "cuMemRetainAllocationHandle"};
  DriverEntryPoint<PFN_cuMemExportToShareableHandle_v10020> memExportToShareableHandle{
      "cuMemExportToShareableHandle"};
  DriverEntryPoint<PFN_cuMemImportFromShareableHandle_v10020> memImportFromShareableHandle{
      "cuMemImportFromShareableHandle"};
  DriverEntryPoint<PFN_cuMemAddressReserve_v10020> memAddressReserve{"cuMemAddressReserve"};
  DriverEntryPoint<PFN_cuMemAddressFree_v10020> memAddressFree{"cuMemAddressFree", nullptr, true};
  DriverEntryPoint<PFN_cuMemMap_v10020> memMap{"cuMemMap"};
  DriverEntryPoint<PFN_cuMemUnmap_v10020> memUnmap{"cuMemUnmap", nullptr, true};
  DriverEntryPoint<PFN_cuMemSetAccess_v10020> memSetAccess{"cuMemSetAccess"};
  DriverEntryPoint<PFN_cuMemGetAccess_v10020> memGetAccess{"cuMemGetAccess"};

  DriverEntryPoint<PFN_cuMemcpyHtoD_v3020> memcpyHtoD{"cuMemcpyHtoD"};
  DriverEntryPoint<PFN_cuMemcpyHtoDAsync_v3020> memcpyHtoDAsync{"cuMemcpyHtoDAsync"};
  DriverEntryPoint<PFN_cuMemcpyDtoH_v3020> memcpyDtoH{"cuMemcpyDtoH"};
  DriverEntryPoint<PFN_cuMemcpyDtoHAsync_v3020> memcpyDtoHAsync{"cuMemcpyDtoHAsync"};
  DriverEntryPoint<PFN_cuMemcpyDtoD_v3020> memcpyDtoD{"cuMemcpyDtoD"};
  DriverEntryPoint<PFN_cuMemcpyDtoDAsync_v3020> memcpyDtoDAsync{"cuMemcpyDtoDAsync"};
  DriverEntryPoint<PFN_cuMemcpy2D_v3020> memcpy2D{"cuMemcpy2D"};
  DriverEntryPoint<PFN_cuMemcpy2DAsync_v3020> memcpy2DAsync{"cuMemcpy2DAsync"};
  DriverEntryPoint<PFN_cuMemcpy3DAsync_v3020> memcpy3DAsync{"cuMemcpy3DAsync"};
  DriverEntryPoint<PFN_cuArray3DCreate_v3020> array3DCreate{"cuArray3DCreate"};
  DriverEntryPoint<PFN_cuArrayDestroy_v2000> arrayDestroy{"cuArrayDestroy", nullptr, true};
  DriverEntryPoint<PFN_cuMipmappedArrayCreate_v5000> mipmappedArrayCreate{"cuMipmappedArrayCreate"};
  DriverEntryPoint<PFN_cuMipmappedArrayGetLevel_v5000> mipmappedArrayGetLevel{
      "cuMipmappedArrayGetLevel"};
  DriverEntryPoint<PFN_cuMipmappedArrayDestroy_v5000> mipmappedArrayDestroy{
      "cuMipmappedArrayDestroy", nullptr, true};
  DriverEntryPoint<PFN_cuTensorMapEncodeTiled_v12000> tensorMapEncodeTiled{
      "cuTensorMapEncodeTiled"};
  DriverEntryPoint<PFN_cuTensorMapEncodeIm2col_v12000> tensorMapEncodeIm2col{
      "cuTensorMapEncodeIm2col"};
  DriverEntryPoint<PFN_cuTensorMapEncodeIm2colWide_v12080> tensorMapEncodeIm2colWide{
      "cuTensorMapEncodeIm2colWide"};
  DriverEntryPoint<PFN_cuTensorMapReplaceAddress_v12000> tensorMapReplaceAddress{
      "cuTensorMapReplaceAddress"};
  DriverEntryPoint<PFN_cuTexObjectCreate_v5000> texObjectCreate{"cuTexObjectCreate"};
  DriverEntryPoint<PFN_cuTexObjectDestroy_v5000> texObjectDestroy{"cuTexObjectDestroy", nullptr,
                                                                  true};
  DriverEntryPoint<PFN_cuSurfObjectCreate_v5000> surfObjectCreate{"cuSurfObjectCreate"};
  DriverEntryPoint<PFN_cuSurfObjectDestroy_v5000> surfObjectDestroy{"cuSurfObjectDestroy", nullptr,
                                                                    true};
  DriverEntryPoint<PFN_cuModuleGetTexRef_v2000> moduleGetTexRef{"cuModuleGetTexRef"};
  DriverEntryPoint<PFN_cuModuleGetSurfRef_v3000> moduleGetSurfRef{"cuModuleGetSurfRef"};
  DriverEntryPoint<PFN_cuTexRefSetArray_v2000> texRefSetArray{"cuTexRefSetArray"};
  DriverEntryPoint<PFN_cuTexRefSetMipmappedArray_v5000> texRefSetMipmappedArray{
      "cuTexRefSetMipmappedArray"};
  DriverEntryPoint<PFN_cuTexRefSetMipmapFilterMode_v5000> texRefSetMipmapFilterMode{
      "cuTexRefSetMipmapFilterMode"};
  DriverEntryPoint<PFN_cuTexRefSetMipmapLevelBias_v5000> texRefSetMipmapLevelBias{
      "cuTexRefSetMipmapLevelBias"};
  DriverEntryPoint<PFN_cuTexRefSetMipmapLevelClamp_v5000> texRefSetMipmapLevelClamp{
      "cuTexRefSetMipmapLevelClamp"};
  DriverEntryPoint<PFN_cuTexRefSetMaxAnisotropy_v5000> texRefSetMaxAnisotropy{
      "cuTexRefSetMaxAnisotropy"};
  DriverEntryPoint<PFN_cuTexRefSetAddress_v3020> texRefSetAddress{"cuTexRefSetAddress"};
  DriverEntryPoint<PFN_cuTexRefSetAddress2D_v4010> texRefSetAddress2D{"cuTexRefSetAddress2D"};
  DriverEntryPoint<PFN_cuTexRefSetFormat_v2000> texRefSetFormat{"cuTexRefSetFormat"};
  DriverEntryPoint<PFN_cuTexRefSetAddressMode_v2000> texRefSetAddressMode{"cuTexRefSetAddressMode"};
  DriverEntryPoint<PFN_cuTexRefSetFilterMode_v2000> texRefSetFilterMode{"cuTexRefSetFilterMode"};
  DriverEntryPoint<PFN_cuTexRefSetFlags_v2000> texRefSetFlags{"cuTexRefSetFlags"};
  DriverEntryPoint<PFN_cuTexRefSetBorderColor_v8000> texRefSetBorderColor{"cuTexRefSetBorderColor"};
  DriverEntryPoint<PFN_cuSurfRefSetArray_v3000> surfRefSetArray{"cuSurfRefSetArray"};

  DriverEntryPoint<PFN_cuMemsetD8_v3020> memsetD8{"cuMemsetD8"};
  DriverEntryPoint<PFN_cuMemsetD16_v3020> memsetD16{"cuMemsetD16"};
  DriverEntryPoint<PFN_cuMemsetD32_v3020> memsetD32{"cuMemsetD32"};
  DriverEntryPoint<PFN_cuMemsetD2D8_v3020> memsetD2D8{"cuMemsetD2D8"};
  DriverEntryPoint<PFN_cuMemsetD2D16_v3020> memsetD2D16{"cuMemsetD2D16"};
  DriverEntryPoint<PFN_cuMemsetD2D32_v3020> memsetD2D32{"cuMemsetD2D32"};
  DriverEntryPoint<PFN_cuMemsetD8Async_v3020> memsetD8Async{"cuMemsetD8Async"};
  DriverEntryPoint<PFN_cuMemsetD16Async_v3020> memsetD16Async{"cuMemsetD16Async"};
  DriverEntryPoint<PFN_cuMemsetD32Async_v3020> memsetD32Async{"cuMemsetD32Async"};
  DriverEntryPoint<PFN_cuMemsetD2D8Async_v3020> memsetD2D8Async{"cuMemsetD2D8Async"};
  DriverEntryPoint<PFN_cuMemsetD2D16Async_v3020> memsetD2D16Async{"cuMemsetD2D16Async"};
  DriverEntryPoint<PFN_cuMemsetD2D32Async_v3020> memsetD2D32Async{"cuMemsetD2D32Async"};

  DriverEntryPoint<PFN_cuModuleLoadData_v2000> moduleLoadData{"cuModuleLoadData"};
  DriverEntryPoint<PFN_cuModuleUnload_v2000> moduleUnload{"cuModuleUnload", nullptr, true};
  DriverEntryPoint<PFN_cuModuleGetFunction_v2000> moduleGetFunction{"cuModuleGetFunction"};
  DriverEntryPoint<PFN_cuModuleGetGlobal_v3020> moduleGetGlobal{"cuModuleGetGlobal"};
  // Whether a global is a __managed__ variable, and the managed memory that holds it.
  DriverEntryPoint<PFN_cuPointerGetAttribute_v4000> pointerGetAttribute{"cuPointerGetAttribute"};
  DriverEntryPoint<PFN_cuMemGetAddressRange_v3020> memGetAddressRange{"cuMemGetAddressRange"};
  DriverEntryPoint<PFN_cuModuleGetFunctionCount_v12040> moduleGetFunctionCount{
      "cuModuleGetFunctionCount"};
  DriverEntryPoint<PFN_cuModuleEnumerateFunctions_v12040> moduleEnumerateFunctions{
      "cuModuleEnumerateFunctions"};
  DriverEntryPoint<PFN_cuFuncGetName_v12030> funcGetName{"cuFuncGetName"};
  DriverEntryPoint<PFN_cuLinkCreate_v6050> linkCreate{"cuLinkCreate"};
  DriverEntryPoint<PFN_cuLinkAddData_v6050> linkAddData{"cuLinkAddData"};
  DriverEntryPoint<PFN_cuLinkComplete_v5050> linkComplete{"cuLinkComplete"};
  DriverEntryPoint<PFN_cuLinkDestroy_v5050> linkDestroy{"cuLinkDestroy", nullptr, true};
  DriverEntryPoint<PFN_cuFuncGetParamInfo_v12040> funcGetParamInfo{"cuFuncGetParamInfo"};
  DriverEntryPoint<PFN_cuFuncGetAttribute_v2020> funcGetAttribute{"cuFuncGetAttribute"};
  DriverEntryPoint<PFN_cuFuncSetAttribute_v9000> funcSetAttribute{"cuFuncSetAttribute"};
  DriverEntryPoint<PFN_cuLaunchKernel_v4000> launchKernel{"cuLaunchKernel"};
  DriverEntryPoint<PFN_cuLaunchCooperativeKernel_v9000> launchCooperativeKernel{
      "cuLaunchCooperativeKernel"};
  DriverEntryPoint<PFN_cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags_v7000>
      occupancyMaxActiveBlocks{"cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags"};
  DriverEntryPoint<PFN_cuLaunchKernelEx_v11060> launchKernelEx{"cuLaunchKernelEx"};
  DriverEntryPoint<PFN_cuOccupancyMaxActiveClusters_v11070> occupancyMaxActiveClusters{
      "cuOccupancyMaxActiveClusters"};
  DriverEntryPoint<PFN_cuOccupancyMaxPotentialClusterSize_v11070> occupancyMaxPotentialClusterSize{
      "cuOccupancyMaxPotentialClusterSize"};

  DriverEntryPoint<PFN_cuStreamCreateWithPriority_v5050> streamCreate{"cuStreamCreateWithPriority"};
  DriverEntryPoint<PFN_cuStreamDestroy_v4000> streamDestroy{"cuStreamDestroy", nullptr, true};
  DriverEntryPoint<PFN_cuStreamSynchronize_v2000> streamSynchronize{"cuStreamSynchronize"};
  DriverEntryPoint<PFN_cuStreamQuery_v2000> streamQuery{"cuStreamQuery"};
  DriverEntryPoint<PFN_cuStreamWaitEvent_v3020> streamWaitEvent{"cuStreamWaitEvent"};
  DriverEntryPoint<PFN_cuLaunchHostFunc_v10000> launchHostFunc{"cuLaunchHostFunc"};
  DriverEntryPoint<PFN_cuStreamBatchMemOp_v11070> streamBatchMemOp{"cuStreamBatchMemOp"};

  // Executable graphs (cuda_graphs.cc).
  DriverEntryPoint<PFN_cuGraphCreate_v10000> graphCreate{"cuGraphCreate"};
  DriverEntryPoint<PFN_cuGraphDestroy_v10000> graphDestroy{"cuGraphDestroy", nullptr, true};
  DriverEntryPoint<PFN_cuGraphAddEmptyNode_v10000> graphAddEmptyNode{"cuGraphAddEmptyNode"};
  DriverEntryPoint<PFN_cuGraphAddKernelNode_v12000> graphAddKernelNode{"cuGraphAddKernelNode"};
  DriverEntryPoint<PFN_cuGraphKernelNodeSetAttribute_v11000> graphKernelNodeSetAttribute{
      "cuGraphKernelNodeSetAttribute"};
  DriverEntryPoint<PFN_cuGraphAddMemsetNode_v10000> graphAddMemsetNode{"cuGraphAddMemsetNode"};
  DriverEntryPoint<PFN_cuGraphAddMemcpyNode_v10000> graphAddMemcpyNode{"cuGraphAddMemcpyNode"};
  DriverEntryPoint<PFN_cuGraphAddEventRecordNode_v11010> graphAddEventRecordNode{
      "cuGraphAddEventRecordNode"};
  DriverEntryPoint<PFN_cuGraphAddEventWaitNode_v11010> graphAddEventWaitNode{
      "cuGraphAddEventWaitNode"};
  DriverEntryPoint<PFN_cuGraphAddBatchMemOpNode_v11070> graphAddBatchMemOpNode{
      "cuGraphAddBatchMemOpNode"};
  // Conditional nodes (CUDA 12.3 on): cuGraphAddNode makes them, their handles live in a graph.
  DriverEntryPoint<PFN_cuGraphAddNode_v12020> graphAddNode{"cuGraphAddNode"};
  DriverEntryPoint<PFN_cuGraphConditionalHandleCreate_v12030> graphConditionalHandleCreate{
      "cuGraphConditionalHandleCreate"};
  DriverEntryPoint<PFN_cuGraphDestroyNode_v10000> graphDestroyNode{"cuGraphDestroyNode"};
  DriverEntryPoint<PFN_cuGraphInstantiateWithFlags_v11040> graphInstantiateWithFlags{
      "cuGraphInstantiateWithFlags"};
  DriverEntryPoint<PFN_cuGraphExecDestroy_v10000> graphExecDestroy{"cuGraphExecDestroy", nullptr,
                                                                   true};
  DriverEntryPoint<PFN_cuGraphLaunch_v10000> graphLaunch{"cuGraphLaunch"};

  DriverEntryPoint<PFN_cuEventCreate_v2000> eventCreate{"cuEventCreate"};
  DriverEntryPoint<PFN_cuEventDestroy_v4000> eventDestroy{"cuEventDestroy", nullptr, true};
  DriverEntryPoint<PFN_cuEventRecord_v2000> eventRecord{"cuEventRecord"};
  DriverEntryPoint<PFN_cuEventSynchronize_v2000> eventSynchronize{"cuEventSynchronize"};
  DriverEntryPoint<PFN_cuEventQuery_v2000> eventQuery{"cuEventQuery"};
  DriverEntryPoint<PFN_cuEventElapsedTime_v12080> eventElapsedTime{"cuEventElapsedTime"};

 private:
  CudaDriver() = default;
  void resolveAll();
  void* resolve(const char* name, int abiVersion, const char* exportedName) const;
  template <typename Fn>
  void resolve(DriverEntryPoint<Fn>& entry, int abiVersion, const char* exportedName) {
    entry.fn = reinterpret_cast<Fn>(resolve(entry.name, abiVersion, exportedName));
  }

  void noteFatal(CUresult result, const char* call) const;

  mutable CudaFaultState fault_;
  void* library_ = nullptr;
  int version_ = 0;
  PFN_cuGetProcAddress_v12000 getProcAddress_ = nullptr;
  PFN_cuGetErrorName_v6000 getErrorName_ = nullptr;
  PFN_cuGetErrorString_v6000 getErrorString_ = nullptr;
};

}  // namespace gpupool::server
