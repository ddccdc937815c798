#include "server/backends/cuda/cuda_driver.h"

#include <dlfcn.h>

namespace gpupool::server {

std::shared_ptr<CudaDriver> CudaDriver::load(const std::string& path, std::string* error) {
  // RTLD_LOCAL: the driver's symbols must not satisfy lookups of anything else in the server.
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* reason = dlerror();
    *error = "cannot load CUDA driver '" + path + "': " + (reason ? reason : "unknown error");
    return nullptr;
  }
  std::shared_ptr<CudaDriver> driver(new CudaDriver);
  driver->library_ = library;
  driver->getErrorName_ =
      reinterpret_cast<PFN_cuGetErrorName_v6000>(dlsym(library, "cuGetErrorName"));
  driver->getErrorString_ =
      reinterpret_cast<PFN_cuGetErrorString_v6000>(dlsym(library, "cuGetErrorString"));

  auto init = reinterpret_cast<PFN_cuInit_v2000>(dlsym(library, "cuInit"));
  if (init == nullptr) {
    *error = "cannot load CUDA driver '" + path + "': it has no cuInit";
    return nullptr;
  }
  if (CUresult result = init(0); result != CUDA_SUCCESS) {
    *error = "cuInit failed: " + driver->describe(result);
    return nullptr;
  }
  auto getVersion =
      reinterpret_cast<PFN_cuDriverGetVersion_v2020>(dlsym(library, "cuDriverGetVersion"));
  if (getVersion == nullptr || getVersion(&driver->version_) != CUDA_SUCCESS) {
    *error = "cannot load CUDA driver '" + path + "': cuDriverGetVersion failed";
    return nullptr;
  }
  driver->getProcAddress_ =
      reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(library, "cuGetProcAddress_v2"));
  driver->resolveAll();
  return driver;
}

// The library stays loaded: after cuInit a driver runs threads of its own (ours: timers and
// heartbeats), and unloading the code under them crashes the server, e.g. on the way out after a
// configuration error. The CUDA runtime never unloads the driver either.
CudaDriver::~CudaDriver() = default;

std::string CudaDriver::describe(CUresult result) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (getErrorName_ == nullptr || getErrorName_(result, &name) != CUDA_SUCCESS || !name) {
    return "CUDA error " + std::to_string(static_cast<int>(result));
  }
  std::string out = name;
  if (getErrorString_ != nullptr && getErrorString_(result, &text) == CUDA_SUCCESS && text) {
    out += std::string(" (") + text + ")";
  }
  return out;
}

std::string CudaDriver::errorName(CUresult result) const {
  const char* name = nullptr;
  if (getErrorName_ == nullptr || getErrorName_(result, &name) != CUDA_SUCCESS || !name) {
    name = fatalErrorName(result);
  }
  return name ? name : "CUDA error " + std::to_string(static_cast<int>(result));
}

namespace {
// The caller of this thread's driver calls (setCaller): a label, not a registry.
thread_local std::shared_ptr<const std::string> tCaller;
}  // namespace

void CudaDriver::setCaller(const std::shared_ptr<const std::string>& caller) {
  if (tCaller != caller) tCaller = caller;
}

std::shared_ptr<const std::string> CudaDriver::caller() { return tCaller; }

void CudaDriver::noteFatal(CUresult result, const char* call) const {
  fault_.record(result, errorName(result), call, describe(result), tCaller);
}

void* CudaDriver::resolve(const char* name, int abiVersion, const char* exportedName) const {
  // A driver older than the ABI would hand back an older ABI of the same name under
  // cuGetProcAddress, with a different signature; such an entry point is simply absent.
  if (version_ < abiVersion) return nullptr;
  if (getProcAddress_ != nullptr) {
    void* fn = nullptr;
    CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (getProcAddress_(name, &fn, abiVersion, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &found) ==
            CUDA_SUCCESS &&
        found == CU_GET_PROC_ADDRESS_SUCCESS && fn != nullptr) {
      return fn;
    }
  }
  return dlsym(library_, exportedName);
}

void CudaDriver::resolveAll() {
  resolve(deviceGetCount, 2000, "cuDeviceGetCount");
  resolve(deviceGet, 2000, "cuDeviceGet");
  resolve(deviceGetName, 2000, "cuDeviceGetName");
  resolve(deviceGetUuid, 11040, "cuDeviceGetUuid_v2");
  resolve(deviceGetAttribute, 2000, "cuDeviceGetAttribute");
  resolve(deviceTotalMem, 3020, "cuDeviceTotalMem_v2");

  resolve(ctxCreateV4, 12050, "cuCtxCreate_v4");
  resolve(ctxCreateV2, 3020, "cuCtxCreate_v2");
  resolve(ctxDestroy, 4000, "cuCtxDestroy_v2");
  resolve(ctxSetCurrent, 4000, "cuCtxSetCurrent");
  resolve(ctxSynchronize, 2000, "cuCtxSynchronize");
  resolve(ctxSetLimit, 3010, "cuCtxSetLimit");
  resolve(ctxGetLimit, 3010, "cuCtxGetLimit");
  resolve(deviceGetDevResource, 12040, "cuDeviceGetDevResource");
  resolve(devSmResourceSplitByCount, 12040, "cuDevSmResourceSplitByCount");
  resolve(devResourceGenerateDesc, 12040, "cuDevResourceGenerateDesc");
  resolve(greenCtxCreate, 12040, "cuGreenCtxCreate");
  resolve(greenCtxDestroy, 12040, "cuGreenCtxDestroy");
  resolve(ctxFromGreenCtx, 12040, "cuCtxFromGreenCtx");

  resolve(memAlloc, 3020, "cuMemAlloc_v2");
  resolve(memFree, 3020, "cuMemFree_v2");
  resolve(memGetInfo, 3020, "cuMemGetInfo_v2");
  resolve(memHostAlloc, 2020, "cuMemHostAlloc");
  resolve(memFreeHost, 2000, "cuMemFreeHost");
  resolve(memPoolCreate, 11020, "cuMemPoolCreate");
  resolve(memPoolDestroy, 11020, "cuMemPoolDestroy");
  resolve(memAllocFromPoolAsync, 11020, "cuMemAllocFromPoolAsync");
  resolve(memFreeAsync, 11020, "cuMemFreeAsync");
  resolve(memPoolTrimTo, 11020, "cuMemPoolTrimTo");
  resolve(memPoolSetAttribute, 11020, "cuMemPoolSetAttribute");
  resolve(memPoolGetAttribute, 11020, "cuMemPoolGetAttribute");

  resolve(memCreate, 10020, "cuMemCreate");
  resolve(memRelease, 10020, "cuMemRelease");
  resolve(memRetainAllocationHandle, 11000, "cuMemRetainAllocationHandle");
  resolve(memExportToShareableHandle, 10020, "cuMemExportToShareableHandle");
  resolve(memImportFromShareableHandle, 10020, "cuMemImportFromShareableHandle");
  resolve(memAddressReserve, 10020, "cuMemAddressReserve");
  resolve(memAddressFree, 10020, "cuMemAddressFree");
  resolve(memMap, 10020, "cuMemMap");
  resolve(memUnmap, 10020, "cuMemUnmap");
  resolve(memSetAccess, 10020, "cuMemSetAccess");
  resolve(memGetAccess, 10020, "cuMemGetAccess");

  resolve(memcpyHtoD, 3020, "cuMemcpyHtoD_v2");
  resolve(memcpyHtoDAsync, 3020, "cuMemcpyHtoDAsync_v2");
  resolve(memcpyDtoH, 3020, "cuMemcpyDtoH_v2");
  resolve(memcpyDtoHAsync, 3020, "cuMemcpyDtoHAsync_v2");
  resolve(memcpyDtoD, 3020, "cuMemcpyDtoD_v2");
  resolve(memcpyDtoDAsync, 3020, "cuMemcpyDtoDAsync_v2");
  resolve(memcpy2D, 3020, "cuMemcpy2D_v2");
  resolve(memcpy2DAsync, 3020, "cuMemcpy2DAsync_v2");
  resolve(memcpy3DAsync, 3020, "cuMemcpy3DAsync_v2");
  resolve(array3DCreate, 3020, "cuArray3DCreate_v2");
  resolve(arrayDestroy, 2000, "cuArrayDestroy");
  resolve(mipmappedArrayCreate, 5000, "cuMipmappedArrayCreate");
  resolve(mipmappedArrayGetLevel, 5000, "cuMipmappedArrayGetLevel");
  resolve(mipmappedArrayDestroy, 5000, "cuMipmappedArrayDestroy");
  resolve(tensorMapEncodeTiled, 12000, "cuTensorMapEncodeTiled");
  resolve(tensorMapEncodeIm2col, 12000, "cuTensorMapEncodeIm2col");
  resolve(tensorMapEncodeIm2colWide, 12080, "cuTensorMapEncodeIm2colWide");
  resolve(tensorMapReplaceAddress, 12000, "cuTensorMapReplaceAddress");
  resolve(texObjectCreate, 5000, "cuTexObjectCreate");
  resolve(texObjectDestroy, 5000, "cuTexObjectDestroy");
  resolve(surfObjectCreate, 5000, "cuSurfObjectCreate");
  resolve(surfObjectDestroy, 5000, "cuSurfObjectDestroy");
  resolve(moduleGetTexRef, 2000, "cuModuleGetTexRef");
  resolve(moduleGetSurfRef, 3000, "cuModuleGetSurfRef");
  resolve(texRefSetArray, 2000, "cuTexRefSetArray");
  resolve(texRefSetMipmappedArray, 5000, "cuTexRefSetMipmappedArray");
  resolve(texRefSetMipmapFilterMode, 5000, "cuTexRefSetMipmapFilterMode");
  resolve(texRefSetMipmapLevelBias, 5000, "cuTexRefSetMipmapLevelBias");
  resolve(texRefSetMipmapLevelClamp, 5000, "cuTexRefSetMipmapLevelClamp");
  resolve(texRefSetMaxAnisotropy, 5000, "cuTexRefSetMaxAnisotropy");
  resolve(texRefSetAddress, 3020, "cuTexRefSetAddress_v2");
  resolve(texRefSetAddress2D, 4010, "cuTexRefSetAddress2D_v3");
  resolve(texRefSetFormat, 2000, "cuTexRefSetFormat");
  resolve(texRefSetAddressMode, 2000, "cuTexRefSetAddressMode");
  resolve(texRefSetFilterMode, 2000, "cuTexRefSetFilterMode");
  resolve(texRefSetFlags, 2000, "cuTexRefSetFlags");
  resolve(texRefSetBorderColor, 8000, "cuTexRefSetBorderColor");
  resolve(surfRefSetArray, 3000, "cuSurfRefSetArray");

  resolve(memsetD8, 3020, "cuMemsetD8_v2");
  resolve(memsetD16, 3020, "cuMemsetD16_v2");
  resolve(memsetD32, 3020, "cuMemsetD32_v2");
  resolve(memsetD2D8, 3020, "cuMemsetD2D8_v2");
  resolve(memsetD2D16, 3020, "cuMemsetD2D16_v2");
  resolve(memsetD2D32, 3020, "cuMemsetD2D32_v2");
  resolve(memsetD8Async, 3020, "cuMemsetD8Async");
  resolve(memsetD16Async, 3020, "cuMemsetD16Async");
  resolve(memsetD32Async, 3020, "cuMemsetD32Async");
  resolve(memsetD2D8Async, 3020, "cuMemsetD2D8Async");
  resolve(memsetD2D16Async, 3020, "cuMemsetD2D16Async");
  resolve(memsetD2D32Async, 3020, "cuMemsetD2D32Async");

  resolve(moduleLoadData, 2000, "cuModuleLoadData");
  resolve(moduleUnload, 2000, "cuModuleUnload");
  resolve(moduleGetFunction, 2000, "cuModuleGetFunction");
  resolve(moduleGetGlobal, 3020, "cuModuleGetGlobal_v2");
  resolve(pointerGetAttribute, 4000, "cuPointerGetAttribute");
  resolve(memGetAddressRange, 3020, "cuMemGetAddressRange_v2");
  resolve(moduleGetFunctionCount, 12040, "cuModuleGetFunctionCount");
  resolve(moduleEnumerateFunctions, 12040, "cuModuleEnumerateFunctions");
  resolve(funcGetName, 12030, "cuFuncGetName");
  resolve(linkCreate, 6050, "cuLinkCreate_v2");
  resolve(linkAddData, 6050, "cuLinkAddData_v2");
  resolve(linkComplete, 5050, "cuLinkComplete");
  resolve(linkDestroy, 5050, "cuLinkDestroy");
  resolve(funcGetParamInfo, 12040, "cuFuncGetParamInfo");
  resolve(funcGetAttribute, 2020, "cuFuncGetAttribute");
  resolve(funcSetAttribute, 9000, "cuFuncSetAttribute");
  resolve(launchKernel, 4000, "cuLaunchKernel");
  resolve(launchCooperativeKernel, 9000, "cuLaunchCooperativeKernel");
  resolve(occupancyMaxActiveBlocks, 7000, "cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags");
  resolve(launchKernelEx, 11060, "cuLaunchKernelEx");
  resolve(occupancyMaxActiveClusters, 11070, "cuOccupancyMaxActiveClusters");
  resolve(occupancyMaxPotentialClusterSize, 11070, "cuOccupancyMaxPotentialClusterSize");

  resolve(streamCreate, 5050, "cuStreamCreateWithPriority");
  resolve(streamDestroy, 4000, "cuStreamDestroy_v2");
  resolve(streamSynchronize, 2000, "cuStreamSynchronize");
  resolve(streamQuery, 2000, "cuStreamQuery");
  resolve(streamWaitEvent, 3020, "cuStreamWaitEvent");
  resolve(launchHostFunc, 10000, "cuLaunchHostFunc");
  resolve(streamBatchMemOp, 11070, "cuStreamBatchMemOp_v2");

  resolve(graphCreate, 10000, "cuGraphCreate");
  resolve(graphDestroy, 10000, "cuGraphDestroy");
  resolve(graphAddEmptyNode, 10000, "cuGraphAddEmptyNode");
  resolve(graphAddKernelNode, 12000, "cuGraphAddKernelNode_v2");
  resolve(graphKernelNodeSetAttribute, 11000, "cuGraphKernelNodeSetAttribute");
  resolve(graphAddMemsetNode, 10000, "cuGraphAddMemsetNode");
  resolve(graphAddMemcpyNode, 10000, "cuGraphAddMemcpyNode");
  resolve(graphAddEventRecordNode, 11010, "cuGraphAddEventRecordNode");
  resolve(graphAddEventWaitNode, 11010, "cuGraphAddEventWaitNode");
  resolve(graphAddBatchMemOpNode, 11070, "cuGraphAddBatchMemOpNode");
  resolve(graphAddNode, 12020, "cuGraphAddNode");
  resolve(graphConditionalHandleCreate, 12030, "cuGraphConditionalHandleCreate");
  resolve(graphDestroyNode, 10000, "cuGraphDestroyNode");
  resolve(graphInstantiateWithFlags, 11040, "cuGraphInstantiateWithFlags");
  resolve(graphExecDestroy, 10000, "cuGraphExecDestroy");
  resolve(graphLaunch, 10000, "cuGraphLaunch");

  resolve(eventCreate, 2000, "cuEventCreate");
  resolve(eventDestroy, 4000, "cuEventDestroy_v2");
  resolve(eventRecord, 2000, "cuEventRecord");
  resolve(eventSynchronize, 2000, "cuEventSynchronize");
  resolve(eventQuery, 2000, "cuEventQuery");
  resolve(eventElapsedTime, 12080, "cuEventElapsedTime_v2");
  // Drivers before 12.8 only have the 2000 ABI, whose signature is the same.
  if (eventElapsedTime.fn == nullptr) resolve(eventElapsedTime, 2000, "cuEventElapsedTime");
}

}  // namespace gpupool::server
