# gpupool wire protocol.
#
# Every frame on a connection is: a header (on TCP and TLS the FrameHeader of
# transport/framed_connection.h), one Cap'n Proto message (a Request from the client, a Response
# from the server), then `bulkBytes` raw bytes. Bulk bytes carry memory contents and module images;
# they are never embedded in the message so receivers can land them directly in their final place.
#
# Versioning: `protocolVersion` below is bumped on any incompatible change. Fields are only ever added
# (Cap'n Proto keeps old readers working); a peer with a different version is refused at Hello
# with a message that names both versions.

@0xd4a6f1c3b2e59a17;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("gpupool::wire");

const protocolVersion :UInt32 = 2;
# The oldest client version a server still serves. Version 1 clients keep one call in flight, so
# they never see replies out of order; they ignore Response.callId.
const oldestProtocolVersion :UInt32 = 1;

struct DeviceInfo {
  name @0 :Text;
  uuid @1 :Data;                  # 16 bytes, CUuuid
  pciDomain @2 :Int32;
  pciBus @3 :Int32;
  pciDevice @4 :Int32;
  totalMemory @5 :UInt64;
  attributes @6 :List(Int32);     # index = CUdevice_attribute value; missing → 0
  backendKind @7 :Text;           # "emu" or "cuda"
}

struct Hello {
  protocolVersion @0 :UInt32;
  clientCudaVersion @1 :Int32;    # the CUDA version the client library was built for (e.g. 13000)
  reservedFeatures @2 :UInt64;   # sent as 0 and not read: the version alone says what a peer speaks
  authToken @3 :Text;
  clientName @4 :Text;            # program name and pid, for status/logs
  purpose @5 :Purpose;
  enum Purpose {
    driver @0;                    # a libcuda session
    status @1;                    # a short-lived monitoring connection
    bench @2;
  }
}

struct Welcome {
  protocolVersion @0 :UInt32;
  serverVersion @1 :Text;
  backendKind @2 :Text;
  driverVersion @3 :Int32;        # what cuDriverGetVersion reports
  reservedFeatures @4 :UInt64;   # sent as 0 and not read, as in Hello
  devices @5 :List(DeviceInfo);
  sessionId @6 :UInt64;
  deviceAddressBase @7 :UInt64;   # device pointers live in [base, base+size): clients keep it free
  deviceAddressSize @8 :UInt64;
  # rdma://HOST:PORT where this server also accepts RDMA sessions; empty when it does not. A client
  # that reached it over TCP and has usable verbs reconnects there (unless GPU_POOL_TRANSPORT=tcp).
  rdmaEndpoint @9 :Text;
  # shm:///PATH where this server also accepts shared-memory sessions; empty when it does not. A
  # client that reached it over TCP or TLS moves there when it can connect to PATH and finds the
  # same server behind it (serverInstance), unless GPU_POOL_TRANSPORT=tcp.
  shmEndpoint @10 :Text;
  serverInstance @11 :UInt64;     # random per gpupoold process: tells two servers apart
  # On an shm session: the client may pass pinned host memory as memory files (HostFileOp), and
  # copies may name them (hostFile in MemcpyHtoD/MemcpyDtoH) instead of carrying their bytes.
  sharesHostFiles @12 :Bool;
  # And its backend maps such files into device addresses (HostFileOp mapDevice), so a client on an
  # shm session can serve CU_MEMHOSTALLOC_DEVICEMAP.
  mapsHostFiles @13 :Bool;
}

struct Dim3 {
  x @0 :UInt32;
  y @1 :UInt32;
  z @2 :UInt32;
}

struct ParamLayout {
  offset @0 :UInt32;
  size @1 :UInt32;
}

struct FunctionInfo {
  handle @0 :UInt64;
  params @1 :List(ParamLayout);
  attributes @2 :List(Int32);     # index = CUfunction_attribute value
}

# A 2D copy or set, device side only. Host rows travel packed (pitch = width) as bulk bytes.
struct Pitched {
  address @0 :UInt64;
  pitch @1 :UInt64;
}

struct SessionStatus {
  sessionId @0 :UInt64;
  clientName @1 :Text;
  memoryUsed @2 :UInt64;
  transport @3 :Text;
  contexts @4 :UInt32;
  tenant @5 :Text;                # empty when the server runs without a configuration
  rdma @6 :RdmaCounters;          # RDMA sessions only (hasRdma)
  devices @7 :List(UInt32);       # the server's device ordinals the session has contexts on
  # shm sessions only: the bytes of both rings in memory now; an idle session gives the rest back.
  shmRingBytesResident @8 :UInt64;
}

# How an RDMA session's bulk bytes moved so far, as the server's connection counts them
# (transport::RdmaStats): the proof, per session, of which paths the copies took.
struct RdmaCounters {
  receivedZeroCopy @0 :UInt64;       # RDMA READ by the server straight from the client's memory
  receivedWritten @1 :UInt64;        # RDMA WRITTEN by the client into memory the server offered
  receivedInline @2 :UInt64;         # copied out of SEND buffers (small parts)
  sentByWrite @3 :UInt64;            # RDMA WRITTEN by the server into the client's pinned memory
  sentZeroCopy @4 :UInt64;           # announced for the client to RDMA READ
  sentInline @5 :UInt64;             # copied into SEND buffers (small parts)
  registrations @6 :UInt64;          # ibv_reg_mr of server memory
  registrationCacheHits @7 :UInt64;  # server memory found registered already
  deregistrations @8 :UInt64;
  sends @9 :UInt64;                  # SEND work requests
  creditWaits @10 :UInt64;           # sends that waited for the client's receive credits
}

struct DeviceStatus {
  index @0 :UInt32;
  name @1 :Text;
  memoryUsed @2 :UInt64;
  memoryTotal @3 :UInt64;
  sessions @4 :UInt32;
  utilization @5 :Float64;        # busy fraction (0..1) over the last metering interval; pools only
  parent @6 :Text;                # MIG: the parent GPU's UUID; empty otherwise
  profile @7 :Text;               # MIG: the instance profile, e.g. "1g.10gb"
  uuid @8 :Text;                  # "GPU-…", or "MIG-…" for a MIG instance
  sensors @9 :DeviceSensors;      # from the server's NVML (cuda backend); all unread on the emu
  mig @10 :MigPlacement;          # MIG instances (parent set) only
  utilizationMeasured @11 :Bool;  # whether utilization was measured (a pool, --config); else 0
}

# Where a MIG instance sits on its GPU, as the server's NVML lists it: what a client's NVML needs
# to list the GPU at the top and reach the instance under it, as NVIDIA's does.
struct MigPlacement {
  parentName @0 :Text;
  parentMemoryTotal @1 :UInt64;    # the whole GPU's memory, bytes
  index @2 :UInt32;                # under the GPU (nvmlDeviceGetMigDeviceHandleByIndex)
  maxDevices @3 :UInt32;           # nvmlDeviceGetMaxMigDeviceCount of the GPU
  gpuInstanceId @4 :Int64 = -1;    # -1: the server's NVML did not say
  computeInstanceId @5 :Int64 = -1;
  modeChangePending @6 :Bool;      # the GPU leaves MIG mode at its next reset
}

# What the server's NVML reads of a GPU (of the parent GPU, for a MIG instance), each at most a
# second old. A figure NVML did not answer stays at its default: -1, or empty text.
struct DeviceSensors {
  temperatureC @0 :Int64 = -1;
  powerUsageMw @1 :Int64 = -1;
  powerLimitMw @2 :Int64 = -1;         # the enforced limit
  graphicsClockMhz @3 :Int64 = -1;     # current clocks
  smClockMhz @4 :Int64 = -1;
  memoryClockMhz @5 :Int64 = -1;
  videoClockMhz @6 :Int64 = -1;
  performanceState @7 :Int64 = -1;     # 0 (P0) .. 15
  fanSpeedPercent @8 :Int64 = -1;
  gpuUtilization @9 :Int64 = -1;       # percent, NVML's sampling
  memoryUtilization @10 :Int64 = -1;
  eccCorrectedVolatile @11 :Int64 = -1;
  eccUncorrectedVolatile @12 :Int64 = -1;
  eccCorrectedAggregate @13 :Int64 = -1;
  eccUncorrectedAggregate @14 :Int64 = -1;
  bar1Total @15 :Int64 = -1;           # bytes
  bar1Used @16 :Int64 = -1;
  serial @17 :Text;                    # the board serial
  powerManagementLimitMw @18 :Int64 = -1;  # the configured limit (the enforced one may be lower)
}

# A tenant of a configured pool: its usage against its quota, usage totals since metering began.
struct TenantStatus {
  name @0 :Text;
  memoryUsed @1 :UInt64;
  memoryQuota @2 :UInt64;         # 0 = no quota
  priority @3 :Text;              # "high", "normal" or "low"
  weight @4 :Float64;
  sessions @5 :UInt32;
  gpuSeconds @6 :Float64;
  gibSeconds @7 :Float64;
  queueSeconds @8 :Float64;
  bytesIn @9 :UInt64;
  bytesOut @10 :UInt64;
  calls @11 :UInt64;
  launches @12 :UInt64;
}

struct Request {
  # Stream handles: 0 is the context's default (legacy) stream.
  union {
    hello @0 :Hello;
    ping @1 :Void;                 # echoes back; bulk is echoed too (the raw-wire baseline)
    status @2 :Void;

    ctxCreate @3 :CtxCreate;
    ctxDestroy @4 :UInt64;         # context
    ctxSynchronize @5 :UInt64;     # context

    memAlloc @6 :MemAlloc;
    memFree @7 :MemFree;
    memGetInfo @8 :UInt64;         # context

    memcpyHtoD @9 :MemcpyHtoD;     # bulk = the bytes
    memcpyDtoH @10 :MemcpyDtoH;    # response bulk = the bytes
    memcpyDtoD @11 :MemcpyDtoD;
    memcpy2D @12 :Memcpy2D;
    memset @13 :Memset;

    moduleLoad @14 :ModuleLoad;    # bulk = the image, when `hasImage`
    moduleUnload @15 :ModuleRef;
    moduleGetFunction @16 :ModuleSymbol;
    moduleGetGlobal @17 :ModuleSymbol;

    launchKernel @18 :LaunchKernel;
    funcSetAttribute @19 :FuncSetAttribute;
    occupancy @20 :Occupancy;

    streamCreate @21 :StreamCreate;
    streamDestroy @22 :StreamRef;
    streamSynchronize @23 :StreamRef;
    streamQuery @24 :StreamRef;
    streamWaitEvent @25 :StreamWaitEvent;

    eventCreate @26 :EventCreate;
    eventDestroy @27 :EventRef;
    eventRecord @28 :EventRecord;
    eventSynchronize @29 :EventRef;
    eventQuery @30 :EventRef;
    eventElapsedTime @31 :EventElapsedTime;

    memGetAddressRange @32 :MemFree;

    sink @34 :Void;                # bench: the bulk is read and dropped (raw-wire throughput)
    source @35 :UInt64;            # bench: the reply carries this many bulk bytes

    # Stream-ordered allocation and memory pools (pool 0: the context's device's default pool).
    memAllocAsync @37 :MemAllocAsync;  # answered with memAlloc: the address exists from the answer on
    memFreeAsync @38 :MemFreeAsync;    # posted: the block goes back to its pool when the stream gets there
    memPoolCreate @39 :UInt64;         # context; answered with handle
    memPoolDestroy @40 :MemPoolRef;
    memPoolTrimTo @41 :MemPoolTrimTo;
    memPoolAttribute @42 :MemPoolAttribute;  # answered with value

    # CUDA graphs: an executable graph is uploaded once (answered with handle) and then launched
    # by one posted message, whatever its size; served by server/handlers/graph_handlers.cc.
    graphCreate @43 :GraphCreate;
    graphLaunch @44 :GraphLaunch;      # posted
    graphDestroy @45 :GraphRef;        # posted

    # Host functions (cuLaunchHostFunc, cuStreamAddCallback): the stream stops at a gate until the
    # client, told the gate was reached, has run the function and releases it.
    hostGateOpen @46 :HostGate;     # posted: the gate takes its place in the stream's order
    hostGateWait @47 :HostGate;     # answered once the stream reaches the gate (NOT_READY: ask again)
    hostGateRelease @48 :HostGate;  # the stream goes on past the gate

    # Stream memory operations (cuStreamWaitValue*, cuStreamWriteValue*, cuStreamBatchMemOp): the
    # operations, in order, take their place in the stream; served by
    # server/handlers/memop_handlers.cc.
    streamMemOps @49 :StreamMemOps;  # posted

    # NVML (client/nvml, libnvidia-ml.so.1): a device's memory as cuMemGetInfo shows it to this
    # session's tenant (its quota caps total and free), without a context; answered with memInfo
    # by server/handlers/nvml_handlers.cc. The value is the server's device ordinal.
    nvmlMemoryInfo @50 :UInt32;

    # Virtual memory management (cuMemCreate, cuMemAddressReserve, cuMemMap, cuMemSetAccess, ...);
    # served by server/handlers/vmm_handlers.cc.
    vmmHandle @51 :VmmHandle;    # create and retain answered with handle; export, import below
    vmmAddress @52 :VmmAddress;  # reserve answered with handle (the address)
    vmmMap @53 :VmmMap;          # getAccess answered with value (1: read-write, 0: none)

    # Managed memory (cuMemAllocManaged): device memory with a host mirror on the client, coherent
    # at synchronization points; served by server/handlers/managed_memory_handlers.cc.
    managedMemory @54 :ManagedMemory;

    # Linking (cuLinkComplete) and module introspection (cuModuleEnumerateFunctions); served by
    # server/handlers/link_handlers.cc.
    moduleLink @55 :ModuleLink;

    # CUDA arrays (cuArray*, cuMipmappedArray*) and the 3D copies that reach them or pitched
    # memory (cuMemcpy3D, cuMemcpy2D with an array end, cuMemcpyAtoH, ...); served by
    # server/handlers/array_handlers.cc.
    arrayOp @56 :ArrayOp;        # create and level answered with handle
    memcpy3D @57 :Memcpy3D;      # a host end travels packed as bulk (request or response)

    # CUDA IPC memory handles (cuIpcGetMemHandle, cuIpcOpenMemHandle, cuIpcCloseMemHandle): an
    # allocation one session exports, another session of the same tenant opens; served by
    # server/handlers/ipc_handlers.cc. get is answered with global {address: the token's bytes 0-7,
    # bytes: its bytes 8-15, both little-endian}; open with global {address, bytes}: where the
    # opening context reaches the allocation, and its size.
    ipcMem @58 :IpcMem;

    # Texture and surface objects (cuTexObjectCreate, cuSurfObjectCreate, ...); served by
    # server/handlers/texture_handlers.cc. Create is answered with handle: the value kernels get.
    textureOp @59 :TextureOp;

    # cuCtxSetLimit and cuCtxGetLimit: a limit of the context (stack size, printf FIFO, malloc
    # heap, ...), applied by the device's driver; answered with value: what the context holds
    # afterwards (a driver rounds some values). Served by server/handlers/context_handlers.cc.
    ctxLimit @60 :CtxLimit;
    # Pinned host memory shared with the server over an shm session (share: the memory file
    # arrives on the session's socket, SCM_RIGHTS, before this request; release: forget it).
    # Served by server/handlers/host_file_handlers.cc.
    hostFile @61 :HostFileOp;
    # cuGraphConditionalHandleCreate: a conditional handle of the context, answered with handle
    # (the value kernels pass to cudaGraphSetConditional).
    graphConditionalHandle @62 :GraphConditionalHandle;
    # NVML's per-process accounting of a device (server/handlers/nvml_handlers.cc): the asking
    # tenant's driver sessions on it, running and ended; answered with accounting.
    nvmlAccounting @63 :UInt32;
  }

  # Fire-and-forget: the server sends no Response. A failure is kept and reported, once, by the next
  # Response the session sends (Response.deferredResult), the way CUDA reports asynchronous errors at
  # the next synchronizing call.
  noReply @33 :Bool;

  # Names the call, so replies may come back in any order (a session serves other calls while one
  # waits for the device); the Response carries it back. 0 in noReply requests.
  callId @36 :UInt64;

  struct CtxCreate {
    device @0 :Int32;
    flags @1 :UInt32;
    smCount @2 :UInt32;           # nonzero: a green context on that many of the device's SMs
  }
  struct MemAlloc {
    context @0 :UInt64;
    bytes @1 :UInt64;
    pitchWidth @2 :UInt64;        # nonzero: a pitched allocation (cuMemAllocPitch); bytes = height
    elementSize @3 :UInt32;
  }
  struct MemFree {
    context @0 :UInt64;
    address @1 :UInt64;
  }
  struct MemAllocAsync {
    context @0 :UInt64;
    pool @1 :UInt64;
    bytes @2 :UInt64;
    stream @3 :UInt64;
  }
  struct MemFreeAsync {
    context @0 :UInt64;
    address @1 :UInt64;
    stream @2 :UInt64;
  }
  struct MemPoolRef {
    context @0 :UInt64;
    pool @1 :UInt64;
  }
  struct MemPoolTrimTo {
    context @0 :UInt64;
    pool @1 :UInt64;
    minBytesToKeep @2 :UInt64;
  }
  struct HostGate {
    context @0 :UInt64;
    stream @1 :UInt64;              # hostGateOpen only
    gate @2 :UInt64;                # minted by the client, unique in its session
  }
  struct CtxLimit {
    context @0 :UInt64;
    limit @1 :UInt32;             # CUlimit
    set @2 :Bool;                 # false: read it
    value @3 :UInt64;             # the value to set
  }
  struct MemPoolAttribute {
    context @0 :UInt64;
    pool @1 :UInt64;
    attribute @2 :Int32;          # CUmemPool_attribute
    set @3 :Bool;                 # false: read it
    value @4 :UInt64;             # the value to set (int attributes as 0/1)
  }
  struct MemcpyHtoD {
    context @0 :UInt64;
    dst @1 :UInt64;
    bytes @2 :UInt64;
    stream @3 :UInt64;
    async @4 :Bool;
    hostFile @5 :UInt64;          # not 0: the bytes lie in this shared host file at hostOffset (no bulk)
    hostOffset @6 :UInt64;
  }
  struct MemcpyDtoH {
    context @0 :UInt64;
    src @1 :UInt64;
    bytes @2 :UInt64;
    stream @3 :UInt64;
    hostFile @4 :UInt64;          # not 0: written into this shared host file at hostOffset (no bulk)
    hostOffset @5 :UInt64;
  }
  enum HostFileOpKind {
    share @0;
    release @1;                   # also unmaps it from device addresses
    mapDevice @2;                 # into context's device addresses; answered with handle = address
  }
  struct HostFileOp {
    op @0 :HostFileOpKind;
    id @1 :UInt64;                # the client's name for the file, unique in its session
    bytes @2 :UInt64;             # share: the file's size (page-granular, fully allocated)
    context @3 :UInt64;           # mapDevice
  }
  struct MemcpyDtoD {
    context @0 :UInt64;
    dst @1 :UInt64;
    src @2 :UInt64;
    bytes @3 :UInt64;
    stream @4 :UInt64;
    async @5 :Bool;
  }
  struct Memcpy2D {
    context @0 :UInt64;
    # Which ends are device memory; a host end travels packed as bulk (request for H→D, response for D→H).
    srcIsDevice @1 :Bool;
    dstIsDevice @2 :Bool;
    src @3 :Pitched;
    dst @4 :Pitched;
    widthBytes @5 :UInt64;
    height @6 :UInt64;
    stream @7 :UInt64;
    async @8 :Bool;
  }
  enum ArrayOpKind {
    create @0;                    # a plain array (levels = 0) or a mipmapped one (levels >= 1)
    destroy @1;                   # either kind
    level @2;                     # the array of one level of a mipmapped array
  }
  struct ArrayOp {
    context @0 :UInt64;
    op @1 :ArrayOpKind;
    width @2 :UInt64;             # create: the CUDA_ARRAY3D_DESCRIPTOR
    height @3 :UInt64;
    depth @4 :UInt64;
    format @5 :UInt32;            # CUarray_format
    channels @6 :UInt32;
    flags @7 :UInt32;             # CUDA_ARRAY3D_* flags
    levels @8 :UInt32;
    array @9 :UInt64;             # destroy, level: the server's handle
    level @10 :UInt32;
  }
  enum TextureOpKind {
    create @0;
    destroy @1;
    findReference @2;   # module's texture or surface reference `name` (surface says which)
    bindReference @3;   # binds it to the resource and sampler given as for create
    checkBound @4;      # whether every reference function `handle` uses is bound (before a launch)
    encodeTensorMap @5;           # cuTensorMapEncode*: answered with bulk = the 128-byte CUtensorMap
    replaceTensorMapAddress @6;   # bulk = the map, handle = the new address; answered with the map
  }
  struct TextureOp {
    context @0 :UInt64;
    op @1 :TextureOpKind;
    surface @2 :Bool;             # a surface object (else a texture object)
    resourceType @3 :UInt32;      # CUresourcetype
    handle @4 :UInt64;            # create: the array handle or device address; destroy: the object
    format @5 :UInt32;            # linear and pitch2D: CUarray_format, channels and extent
    channels @6 :UInt32;
    width @7 :UInt64;
    height @8 :UInt64;
    pitchBytes @9 :UInt64;
    sizeBytes @10 :UInt64;
    addressMode @11 :List(UInt32);  # the sampler (CUDA_TEXTURE_DESC): 3 address modes
    filterMode @12 :UInt32;
    flags @13 :UInt32;              # CU_TRSF_*
    borderColor @14 :List(Float32); # 4 channels
    module @15 :UInt64;             # findReference, bindReference: the module and reference name
    name @16 :Text;
    # encodeTensorMap: handle = the global address, format = the CUtensorMapDataType, and:
    tensorMode @17 :UInt32;             # 0 tiled, 1 im2col, 2 im2col wide
    globalDims @18 :List(UInt64);       # one per dimension (the rank)
    globalStrides @19 :List(UInt64);    # rank - 1
    boxDims @20 :List(UInt32);          # tiled: rank
    elementStrides @21 :List(UInt32);   # rank
    interleave @22 :UInt32;
    swizzle @23 :UInt32;
    l2Promotion @24 :UInt32;
    oobFill @25 :UInt32;
    pixelBoxLower @26 :List(Int32);     # im2col: rank - 2 corners; im2col wide: one width
    pixelBoxUpper @27 :List(Int32);
    channelsPerPixel @28 :UInt32;
    pixelsPerColumn @29 :UInt32;
    wideMode @30 :UInt32;               # im2col wide: CUtensorMapIm2ColWideMode
    # The sampler's levels of detail (CUDA_TEXTURE_DESC), for a mipmapped array resource.
    mipmapFilterMode @31 :UInt32;       # CUfilter_mode between levels
    mipmapLevelBias @32 :Float32;
    minMipmapLevelClamp @33 :Float32;
    maxMipmapLevelClamp @34 :Float32;
    maxAnisotropy @35 :UInt32;
  }
  struct CopyEnd {
    kind @0 :UInt8;               # 0 host (packed bulk), 1 device memory, 2 array
    handle @1 :UInt64;            # device address or array handle
    xBytes @2 :UInt64;            # offset of the region: bytes in a row, rows, slices
    y @3 :UInt64;
    z @4 :UInt64;
    pitch @5 :UInt64;             # device memory: bytes per row and rows per slice
    height @6 :UInt64;
  }
  struct Memcpy3D {
    context @0 :UInt64;
    src @1 :CopyEnd;
    dst @2 :CopyEnd;
    widthBytes @3 :UInt64;
    height @4 :UInt64;
    depth @5 :UInt64;
    stream @6 :UInt64;
    async @7 :Bool;
  }
  struct Memset {
    context @0 :UInt64;
    dst @1 :UInt64;
    value @2 :UInt32;
    elementSize @3 :UInt32;       # 1, 2 or 4
    width @4 :UInt64;             # elements per row
    height @5 :UInt64;            # 1 for a 1D set
    pitch @6 :UInt64;             # bytes between rows
    stream @7 :UInt64;
    async @8 :Bool;
  }
  struct ModuleLoad {
    context @0 :UInt64;
    hash @1 :Data;                # SHA-256 of the image bytes: the server's cache key
    imageBytes @2 :UInt64;
    hasImage @3 :Bool;            # false: "use your cached copy"; the server answers needImage if it has none
  }
  struct ModuleRef {
    context @0 :UInt64;
    module @1 :UInt64;
  }
  struct ModuleSymbol {
    context @0 :UInt64;
    module @1 :UInt64;
    name @2 :Text;
  }
  struct LaunchKernel {
    context @0 :UInt64;
    function @1 :UInt64;
    grid @2 :Dim3;
    block @3 :Dim3;
    sharedBytes @4 :UInt32;
    stream @5 :UInt64;
    params @6 :Data;              # the packed parameter block, laid out as FunctionInfo.params says
    cooperative @7 :Bool;         # cuLaunchCooperativeKernel: all blocks resident, grid-wide sync
    cluster @8 :Dim3;             # thread-block cluster (cuLaunchKernelEx); unset or 1x1x1: none
  }
  struct FuncSetAttribute {
    context @0 :UInt64;
    function @1 :UInt64;
    attribute @2 :Int32;
    value @3 :Int32;
  }
  struct Occupancy {
    context @0 :UInt64;
    function @1 :UInt64;
    blockSize @2 :Int32;
    dynamicSharedBytes @3 :UInt64;
    flags @4 :UInt32;
    # Which question: blocks per multiprocessor (blockSize, dynamicSharedBytes, flags), or, for a
    # launch of grid, block and cluster (dynamicSharedBytes as its shared memory), the most
    # clusters active at once or the largest cluster size.
    query @5 :OccupancyQuery;
    grid @6 :Dim3;
    block @7 :Dim3;
    cluster @8 :Dim3;
  }
  enum OccupancyQuery {
    blocksPerMultiprocessor @0;   # cuOccupancyMaxActiveBlocksPerMultiprocessor(WithFlags)
    activeClusters @1;            # cuOccupancyMaxActiveClusters
    potentialClusterSize @2;      # cuOccupancyMaxPotentialClusterSize
  }
  struct StreamCreate {
    context @0 :UInt64;
    flags @1 :UInt32;
    priority @2 :Int32;
  }
  struct StreamRef {
    context @0 :UInt64;
    stream @1 :UInt64;
  }
  struct StreamWaitEvent {
    context @0 :UInt64;
    stream @1 :UInt64;
    event @2 :UInt64;
  }
  struct EventCreate {
    context @0 :UInt64;
    flags @1 :UInt32;
  }
  struct EventRef {
    context @0 :UInt64;
    event @1 :UInt64;
  }
  struct EventRecord {
    context @0 :UInt64;
    event @1 :UInt64;
    stream @2 :UInt64;
  }
  struct EventElapsedTime {
    context @0 :UInt64;
    start @1 :UInt64;
    end @2 :UInt64;
  }
  # An executable graph's nodes, each after the nodes it depends on (a topological order), child
  # graphs already inlined. `dependencies` index earlier nodes of the list.
  struct GraphCreate {
    context @0 :UInt64;
    nodes @1 :List(GraphNode);
  }
  struct GraphNode {
    dependencies @0 :List(UInt32);
    union {
      empty @1 :Void;
      kernel @2 :GraphKernel;
      memset @3 :GraphMemset;
      copy @4 :GraphCopy;
      eventRecord @5 :UInt64;     # event
      eventWait @6 :UInt64;       # event
      memOps @7 :List(StreamMemOp);  # a batch memory operation node, run as cuStreamBatchMemOp
      conditional @8 :GraphConditional;
    }
  }
  # A conditional node: `type` is CUgraphConditionalNodeType (0 if, 1 while, 2 switch); each body
  # is a graph of its own in the same form as GraphCreate.nodes (dependencies index its own list).
  struct GraphConditional {
    handle @0 :UInt64;
    type @1 :UInt32;
    bodies @2 :List(GraphBody);
  }
  struct GraphBody {
    nodes @0 :List(GraphNode);
  }
  struct GraphConditionalHandle {
    context @0 :UInt64;
    defaultValue @1 :UInt32;
    assignDefault @2 :Bool;       # CU_GRAPH_COND_ASSIGN_DEFAULT: the default at each launch's start
  }
  struct GraphKernel {
    function @0 :UInt64;
    grid @1 :Dim3;
    block @2 :Dim3;
    sharedBytes @3 :UInt32;
    params @4 :Data;
    cooperative @5 :Bool;         # CU_LAUNCH_ATTRIBUTE_COOPERATIVE set on the node
    cluster @6 :Dim3;             # CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION; unset or 1x1x1: none
  }
  struct GraphMemset {
    dst @0 :UInt64;
    value @1 :UInt32;
    elementSize @2 :UInt32;
    width @3 :UInt64;
    height @4 :UInt64;
    pitch @5 :UInt64;
  }
  # A device-to-device copy of `depth` slices of `height` rows of `widthBytes`.
  struct GraphCopy {
    src @0 :UInt64;
    srcPitch @1 :UInt64;
    srcSlice @2 :UInt64;         # bytes between slices
    dst @3 :UInt64;
    dstPitch @4 :UInt64;
    dstSlice @5 :UInt64;
    widthBytes @6 :UInt64;
    height @7 :UInt64;
    depth @8 :UInt64;
  }
  struct GraphLaunch {
    context @0 :UInt64;
    graph @1 :UInt64;
    stream @2 :UInt64;
  }
  struct GraphRef {
    context @0 :UInt64;
    graph @1 :UInt64;
  }
  enum VmmHandleOp {
    create @0;     # a physical allocation of `bytes`
    retain @1;     # the allocation mapped at `address`, one more reference
    release @2;    # one reference less to `handle`
    # cuMemExportToShareableHandle (POSIX file descriptor): `handle` published under a random token
    # for the sessions of the caller's tenant, answered with global {address: the token's bytes
    # 0-7, bytes: 8-15}.
    export @3;
    # cuMemImportFromShareableHandle: the allocation `token` names, one more reference to the same
    # physical memory in this context, answered with global {address: the new handle, bytes: its
    # size}.
    import @4;
  }
  struct VmmHandle {
    context @0 :UInt64;
    op @1 :VmmHandleOp;
    bytes @2 :UInt64;
    address @3 :UInt64;
    handle @4 :UInt64;
    shareable @5 :Bool;  # create: exportable as a POSIX file descriptor (requestedHandleTypes)
    token @6 :Data;      # import: the 16-byte token export answered
  }
  struct VmmAddress {
    context @0 :UInt64;
    free @1 :Bool;                # else reserve
    address @2 :UInt64;           # the range to free, or the reservation's hint (0: none)
    bytes @3 :UInt64;
    alignment @4 :UInt64;
  }
  enum VmmMapOp {
    map @0;
    unmap @1;
    setAccess @2;
    getAccess @3;
  }
  struct VmmMap {
    context @0 :UInt64;
    op @1 :VmmMapOp;
    address @2 :UInt64;
    bytes @3 :UInt64;
    handle @4 :UInt64;            # map
    offset @5 :UInt64;            # map: where in the allocation
    readWrite @6 :Bool;           # setAccess: read-write, else no access
  }
  # `link`: bulk = the inputs' bytes, one after another. Answered with value = the link's CUresult
  # and bulk = {u64 infoLogBytes, u64 errorLogBytes, u64 imageBytes} then the info log, the error
  # log and the linked image (empty unless the link succeeded); the reply's own result is an error
  # only when the request itself was wrong. `functionNames`: the kernels of a loaded module (the
  # value is its handle), answered with bulk = their names, each NUL-terminated.
  struct ModuleLink {
    context @0 :UInt64;
    union {
      link @1 :LinkJob;
      functionNames @2 :UInt64;
      addInput @3 :LinkJob;  # cuLinkAddData: one input compiled on its own, answered as `link` is
    }
  }
  struct LinkJob {
    inputs @0 :List(LinkInput);
    options @1 :List(LinkOption);  # the scalar CUjit_options; log buffers stay with the client
  }
  struct LinkInput {
    type @0 :UInt32;   # CUjitInputType
    name @1 :Text;     # as given to cuLinkAddData / the file's path, for the logs
    bytes @2 :UInt64;  # its share of the bulk
  }
  struct LinkOption {
    option @0 :UInt32;  # CUjit_option
    value @1 :UInt64;   # the option value (an unsigned int, a float's bits or an enum)
  }
  enum ManagedMemoryOp {
    alloc @0;   # `bytes` (whole pages), zeroed; answered with memAlloc
    free @1;    # the allocation at `address`
    write @2;   # the client's written pages: `runs` (address, bytes pairs), their bytes the bulk
    fetch @3;   # the pages the device changed since the client last saw them: answered with value
                # (the number of runs), the bulk the runs' (address, bytes) pairs then their bytes
    adoptGlobal @4;  # the __managed__ variable `name` of `module` becomes a managed region: answered
                     # as fetch, with one run, the whole pages of managed memory that hold it
  }
  struct ManagedMemory {
    context @0 :UInt64;
    op @1 :ManagedMemoryOp;
    address @2 :UInt64;
    bytes @3 :UInt64;
    runs @4 :List(UInt64);
    module @5 :UInt64;  # adoptGlobal
    name @6 :Text;      # adoptGlobal
  }
  enum IpcMemOp {
    get @0;
    open @1;
    close @2;
    getEvent @3;                  # cuIpcGetEventHandle: answered like get (the token in global)
    openEvent @4;                 # cuIpcOpenEventHandle: answered with handle (the event)
  }
  struct IpcMem {
    context @0 :UInt64;
    op @1 :IpcMemOp;
    address @2 :UInt64;           # get: the allocation's base; close: the opened address
    token @3 :Data;               # open, openEvent: the 16-byte token of the handle
    flags @4 :UInt32;             # open: CUipcMem_flags
    event @5 :UInt64;             # getEvent: the event
  }
  struct StreamMemOps {
    context @0 :UInt64;
    stream @1 :UInt64;
    ops @2 :List(StreamMemOp);
  }
  # One operation, as CUstreamBatchMemOpParams has it: `kind` is the CUstreamBatchMemOpType (waits
  # and writes of 32 or 64 bits, or a barrier), `flags` the operation's CUstreamWaitValue_flags,
  # CUstreamWriteValue_flags or CUstreamMemoryBarrier_flags.
  struct StreamMemOp {
    kind @0 :UInt32;
    address @1 :UInt64;
    value @2 :UInt64;
    flags @3 :UInt32;
  }
}

struct Response {
  result @0 :UInt32;               # CUresult
  message @1 :Text;                # human-readable detail for errors (logged by the client)
  deviceOutput @2 :Text;           # device printf output produced since the last reply, in order
  union {
    none @3 :Void;
    welcome @4 :Welcome;
    handle @5 :UInt64;             # ctxCreate, streamCreate, eventCreate, moduleLoad
    memAlloc @6 :MemAllocReply;
    memInfo @7 :MemInfo;
    function @8 :FunctionInfo;
    global @9 :Global;
    value @10 :Int64;              # occupancy, memPoolAttribute (UInt64 values bit-cast)
    elapsedMs @11 :Float32;
    needImage @12 :Void;           # moduleLoad: send the image
    status @13 :StatusReply;
    addressRange @14 :Global;
    accounting @18 :Accounting;
  }

  # The first failure of a noReply request since the last Response, if any.
  deferredResult @15 :UInt32;
  deferredMessage @16 :Text;

  # The Request.callId this answers.
  callId @17 :UInt64;

  struct MemAllocReply {
    address @0 :UInt64;
    pitch @1 :UInt64;
  }
  struct MemInfo {
    free @0 :UInt64;
    total @1 :UInt64;
  }
  struct Global {
    address @0 :UInt64;
    bytes @1 :UInt64;
    managed @2 :Bool;  # a __managed__ variable (moduleGetGlobal): the client mirrors it
  }
  # NVML accounting of one device (nvmlDeviceGetAccountingStats): a record per driver session that
  # had a context on it, the ended ones kept up to bufferSize.
  struct Accounting {
    bufferSize @0 :UInt32;
    records @1 :List(AccountingRecord);
  }
  struct AccountingRecord {
    sessionId @0 :UInt64;
    clientName @1 :Text;        # "<program> (pid N)": the pid NVML reports
    startTimeUs @2 :UInt64;     # the session's first context on the device (server's clock, µs since the epoch)
    endTimeUs @3 :UInt64;       # when the session ended; 0 while it runs
    kernelSeconds @4 :Float64;  # kernel time on the device; negative when not measured
    peakMemory @5 :UInt64;      # the most device memory its contexts held
  }
  struct StatusReply {
    serverVersion @0 :Text;
    backendKind @1 :Text;
    listen @2 :Text;
    devices @3 :List(DeviceStatus);
    sessions @4 :List(SessionStatus);
    uptimeSeconds @5 :Float64;
    tenants @6 :List(TenantStatus);  # empty when the server runs without a configuration
    nvidiaDriverVersion @7 :Text;    # the server's NVIDIA driver (its NVML); empty without one
  }
}
