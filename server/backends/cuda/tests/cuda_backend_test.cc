// The cuda backend against fake_cuda_driver.cc (host memory standing in for a GPU): device
// snapshot, address checks before the driver, context switching, handle ownership and teardown.
#include "server/backends/cuda/cuda_backend.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

namespace gpupool::server {
namespace {

// The fake's counters, read through the same (already loaded) library.
int fakeCounter(const char* name) {
  void* library = dlopen(GPUPOOL_FAKE_CUDA_DRIVER, RTLD_NOW | RTLD_NOLOAD);
  if (library == nullptr) return -1;
  auto counter = reinterpret_cast<int (*)()>(dlsym(library, name));
  int value = counter ? counter() : -1;
  dlclose(library);
  return value;
}

int fakeAllocationDevice(uint64_t address) {
  void* library = dlopen(GPUPOOL_FAKE_CUDA_DRIVER, RTLD_NOW | RTLD_NOLOAD);
  if (library == nullptr) return -2;
  auto lookup = reinterpret_cast<int (*)(uint64_t)>(dlsym(library, "fakeAllocationDevice"));
  int device = lookup ? lookup(address) : -2;
  dlclose(library);
  return device;
}

std::vector<uint8_t> fakeModuleImage() {
  const char text[] = "fake-module";
  return std::vector<uint8_t>(text, text + sizeof text);  // with its NUL, as PTX would be
}

// A scheduler that admits every kernel at once and counts them.
class CountingGate final : public LaunchGate {
 public:
  void enter() override { ++entered; }
  void leave(double) override { ++left; }
  std::atomic<int> entered = 0, left = 0;
};

class CudaBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    backend = makeCudaBackend(GPUPOOL_FAKE_CUDA_DRIVER, -1, &error);
    ASSERT_NE(backend, nullptr) << error;
    ASSERT_TRUE(backend->createContext(0, 0, &context).ok());
  }

  std::unique_ptr<Backend> backend;
  std::unique_ptr<BackendContext> context;
};

TEST(CudaBackendLoad, MissingDriverIsAClearError) {
  std::string error;
  EXPECT_EQ(makeCudaBackend("/nonexistent/libcuda.so.1", -1, &error), nullptr);
  EXPECT_NE(error.find("cannot load CUDA driver '/nonexistent/libcuda.so.1'"), std::string::npos)
      << error;
}

TEST(CudaBackendLoad, SnapshotsDevices) {
  std::string error;
  auto backend = makeCudaBackend(GPUPOOL_FAKE_CUDA_DRIVER, -1, &error);
  ASSERT_NE(backend, nullptr) << error;
  EXPECT_EQ(backend->kind(), "cuda");
  EXPECT_EQ(backend->driverVersion(), 12080);
  ASSERT_EQ(backend->devices().size(), 2u);
  const DeviceDescription& second = backend->devices()[1];
  EXPECT_EQ(second.name, "Fake Device 1");
  EXPECT_EQ(second.uuid[0], 1);
  EXPECT_EQ(second.uuid[15], 16);
  EXPECT_EQ(second.totalMemory, (1ull << 30) + 1);
  ASSERT_EQ(second.attributes.size(), size_t{CU_DEVICE_ATTRIBUTE_MAX});
  EXPECT_EQ(second.attributes[CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK], 11);
  EXPECT_EQ(second.attributes[51], 0);  // refused by the driver
  EXPECT_EQ(second.pciBus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID * 10 + 1);
  EXPECT_EQ(second.pciDomain, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID * 10 + 1);

  auto limited = makeCudaBackend(GPUPOOL_FAKE_CUDA_DRIVER, 1, &error);
  ASSERT_NE(limited, nullptr) << error;
  EXPECT_EQ(limited->devices().size(), 1u);
  std::unique_ptr<BackendContext> context;
  EXPECT_EQ(limited->createContext(1, 0, &context).code, CUDA_ERROR_INVALID_DEVICE);
}

TEST_F(CudaBackendTest, CopiesRoundTripAndAreAccounted) {
  uint64_t address = 0;
  ASSERT_TRUE(context->memAlloc(64, &address).ok());
  EXPECT_EQ(context->memoryUsed(), 64u);
  EXPECT_EQ(backend->deviceMemoryUsed(0), 64u);
  EXPECT_EQ(backend->deviceMemoryUsed(1), 0u);

  std::vector<uint8_t> in(64), out(64);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>(i * 3);
  ASSERT_TRUE(context->copyHostToDevice(address, in.data(), 64, 0, false).ok());
  ASSERT_TRUE(context->copyDeviceToDevice(address + 32, address, 16, 0, false).ok());
  ASSERT_TRUE(context->copyDeviceToHost(out.data(), address, 64, 0).ok());
  EXPECT_TRUE(std::equal(in.begin(), in.begin() + 32, out.begin()));
  EXPECT_TRUE(std::equal(in.begin(), in.begin() + 16, out.begin() + 32));

  uint64_t base = 0, bytes = 0;
  ASSERT_TRUE(context->memGetAddressRange(address + 10, &base, &bytes).ok());
  EXPECT_EQ(base, address);
  EXPECT_EQ(bytes, 64u);

  ASSERT_TRUE(context->memFree(address).ok());
  EXPECT_EQ(context->memoryUsed(), 0u);
  EXPECT_EQ(backend->deviceMemoryUsed(0), 0u);
}

TEST_F(CudaBackendTest, AddressesOutsideTheContextNeverReachTheDriver) {
  uint64_t address = 0;
  ASSERT_TRUE(context->memAlloc(64, &address).ok());
  uint8_t buffer[128] = {};
  // The fake answers foreign addresses with INVALID_CONTEXT; INVALID_VALUE proves the backend
  // refused before calling it.
  EXPECT_EQ(context->copyHostToDevice(address + 1, buffer, 64, 0, false).code,
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(context->copyDeviceToHost(buffer, address - 1, 1, 0).code, CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(context->copyDeviceToDevice(address, 0x1000, 8, 0, false).code,
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(context->memset(address, 0, 4, 17, 1, 0, 0, false).code, CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(context->memFree(address + 8).code, CUDA_ERROR_INVALID_VALUE);

  uint64_t base = 0, bytes = 0;
  EXPECT_EQ(context->memGetAddressRange(address + 64, &base, &bytes).code, CUDA_ERROR_NOT_FOUND);

  std::unique_ptr<BackendContext> other;
  ASSERT_TRUE(backend->createContext(1, 0, &other).ok());
  EXPECT_EQ(other->copyDeviceToHost(buffer, address, 8, 0).code, CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(other->memFree(address).code, CUDA_ERROR_INVALID_VALUE);
}

TEST_F(CudaBackendTest, EachCallRunsInItsOwnContext) {
  std::unique_ptr<BackendContext> other;
  ASSERT_TRUE(backend->createContext(1, 0, &other).ok());
  uint64_t mine = 0, theirs = 0;
  ASSERT_TRUE(context->memAlloc(4, &mine).ok());
  ASSERT_TRUE(other->memAlloc(4, &theirs).ok());
  EXPECT_EQ(fakeAllocationDevice(mine), 0);
  EXPECT_EQ(fakeAllocationDevice(theirs), 1);
  uint32_t a = 1, b = 2, out = 0;
  // The fake only lets a context touch its own allocations, so alternating works only when each
  // call makes its context current first.
  ASSERT_TRUE(context->copyHostToDevice(mine, &a, 4, 0, false).ok());
  ASSERT_TRUE(other->copyHostToDevice(theirs, &b, 4, 0, false).ok());
  ASSERT_TRUE(context->copyDeviceToHost(&out, mine, 4, 0).ok());
  EXPECT_EQ(out, 1u);
  ASSERT_TRUE(other->copyDeviceToHost(&out, theirs, 4, 0).ok());
  EXPECT_EQ(out, 2u);
}

TEST_F(CudaBackendTest, StreamsAreContextHandles) {
  uint64_t stream = 0, address = 0;
  ASSERT_TRUE(context->streamCreate(0, 0, &stream).ok());
  EXPECT_NE(stream, 0u);
  ASSERT_TRUE(context->memAlloc(8, &address).ok());
  uint64_t value = 0x1122334455667788, out = 0;
  ASSERT_TRUE(context->copyHostToDevice(address, &value, 8, stream, true).ok());
  ASSERT_TRUE(context->copyDeviceToHost(&out, address, 8, 0).ok());
  EXPECT_EQ(out, value);
  EXPECT_EQ(context->copyHostToDevice(address, &value, 8, stream + 1000, true).code,
            CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(context->streamSynchronize(stream + 1000).code, CUDA_ERROR_INVALID_HANDLE);
  ASSERT_TRUE(context->streamSynchronize(stream).ok());
  ASSERT_TRUE(context->streamDestroy(stream).ok());
  EXPECT_EQ(context->streamDestroy(stream).code, CUDA_ERROR_INVALID_HANDLE);
}

// Waits may come from waiter threads (server/backend.h), where no context is current yet: the
// fake driver refuses cuCtxSynchronize without one.
TEST_F(CudaBackendTest, WaitsFromAnotherThreadRunInTheContext) {
  uint64_t stream = 0;
  ASSERT_TRUE(context->streamCreate(0, 0, &stream).ok());
  Status contextWait, streamWait, legacyWait, unknownEvent;
  std::thread waiter([&] {
    contextWait = context->synchronize();
    streamWait = context->streamSynchronize(stream);
    legacyWait = context->streamSynchronize(0);
    unknownEvent = context->eventSynchronize(12345);
  });
  waiter.join();
  EXPECT_TRUE(contextWait.ok()) << contextWait.message;
  EXPECT_TRUE(streamWait.ok()) << streamWait.message;
  EXPECT_TRUE(legacyWait.ok()) << legacyWait.message;
  EXPECT_EQ(unknownEvent.code, CUDA_ERROR_INVALID_HANDLE);
  EXPECT_TRUE(context->streamDestroy(stream).ok());
}

TEST_F(CudaBackendTest, MissingEntryPointsAreNotSupported) {
  uint64_t event = 0;
  Status status = context->eventCreate(0, &event);
  EXPECT_EQ(status.code, CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_NE(status.message.find("cuEventCreate"), std::string::npos) << status.message;
}

TEST_F(CudaBackendTest, MemsetAndCopy2DStayInsidePitchedRows) {
  uint64_t address = 0;
  ASSERT_TRUE(context->memAlloc(4 * 16, &address).ok());  // 4 rows, pitch 16
  ASSERT_TRUE(context->memset(address, 0, 4, 16, 1, 0, 0, false).ok());
  ASSERT_TRUE(context->memset(address, 0xab, 1, 3, 4, 16, 0, false).ok());
  // The last row would end 1 byte past the allocation.
  EXPECT_EQ(context->memset(address + 1, 0xab, 1, 16, 4, 16, 0, false).code,
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(context->memset(address, 0, 3, 1, 1, 0, 0, false).code, CUDA_ERROR_INVALID_VALUE);

  std::vector<uint8_t> rows(4 * 3);
  Copy2D copy;
  copy.srcIsDevice = true;
  copy.srcDevice = address;
  copy.srcPitch = 16;
  copy.dstIsDevice = false;
  copy.dstHost = rows.data();
  copy.dstPitch = 3;
  copy.widthBytes = 3;
  copy.height = 4;
  ASSERT_TRUE(context->copy2D(copy, 0, false).ok());
  EXPECT_EQ(rows, std::vector<uint8_t>(12, 0xab));
  copy.srcPitch = 21;  // rows now reach past the allocation
  EXPECT_EQ(context->copy2D(copy, 0, false).code, CUDA_ERROR_INVALID_VALUE);
}

// The parameter block of the fake's `store(int* out, int value, long long)`: stores value at out.
std::vector<uint8_t> storeParams(uint64_t out, int32_t value) {
  std::vector<uint8_t> params(24, 0);
  std::memcpy(params.data(), &out, 8);
  std::memcpy(params.data() + 8, &value, 4);
  return params;
}

TEST_F(CudaBackendTest, ModulesFunctionsAndGlobals) {
  uint8_t wrapper[16] = {0xB1, 0x43, 0x62, 0x46};
  uint64_t module = 0;
  EXPECT_EQ(context->moduleLoad(wrapper, &module).code, CUDA_ERROR_INVALID_IMAGE);
  auto image = fakeModuleImage();
  ASSERT_TRUE(context->moduleLoad(image, &module).ok());

  FunctionDescription function;
  ASSERT_TRUE(context->moduleGetFunction(module, "store", &function).ok());
  ASSERT_EQ(function.params.size(), 3u);
  EXPECT_EQ(function.params[1].offset, 8u);
  EXPECT_EQ(function.params[1].size, 4u);
  EXPECT_EQ(function.params[2].offset, 16u);
  ASSERT_EQ(function.attributes.size(), size_t{CU_FUNC_ATTRIBUTE_MAX});
  EXPECT_EQ(function.attributes[0], 100);
  EXPECT_EQ(function.attributes[4], 104);
  EXPECT_EQ(function.attributes[5], 0);  // refused by the driver
  FunctionDescription again;
  ASSERT_TRUE(context->moduleGetFunction(module, "store", &again).ok());
  EXPECT_EQ(again.handle, function.handle);
  EXPECT_EQ(context->moduleGetFunction(module, "missing", &again).code, CUDA_ERROR_NOT_FOUND);

  uint64_t out = 0;
  ASSERT_TRUE(context->memAlloc(4, &out).ok());
  int32_t value = 4242;
  std::vector<uint8_t> params = storeParams(out, value);
  ASSERT_TRUE(context->launch(function.handle, LaunchShape{}, 0, params).ok());
  int32_t result = 0;
  ASSERT_TRUE(context->copyDeviceToHost(&result, out, 4, 0).ok());
  EXPECT_EQ(result, 4242);
  EXPECT_EQ(
      context
          ->launch(function.handle, LaunchShape{}, 0, std::span<const uint8_t>(params.data(), 20))
          .code,
      CUDA_ERROR_INVALID_VALUE);

  uint64_t global = 0, globalBytes = 0;
  ASSERT_TRUE(context->moduleGetGlobal(module, "counter", &global, &globalBytes).ok());
  EXPECT_EQ(globalBytes, 64u);
  ASSERT_TRUE(context->copyHostToDevice(global + 60, &value, 4, 0, false).ok());
  EXPECT_EQ(context->memFree(global).code, CUDA_ERROR_INVALID_VALUE);

  ASSERT_TRUE(context->moduleUnload(module).ok());
  EXPECT_EQ(context->copyHostToDevice(global, &value, 4, 0, false).code, CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(context->launch(function.handle, LaunchShape{}, 0, params).code,
            CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(context->moduleUnload(module).code, CUDA_ERROR_INVALID_HANDLE);
}

// A module's __managed__ variables, for which NVIDIA's driver names no allocation
// (cuMemGetAddressRange fails): each is its own pages, joined with those of the module's variables
// it shares a page with; the range is the context's memory until the module goes.
TEST_F(CudaBackendTest, ManagedVariablesSharingAPageAreOneRange) {
  uint64_t module = 0;
  auto image = fakeModuleImage();
  ASSERT_TRUE(context->moduleLoad(image, &module).ok());
  uint64_t values = 0, valuesBytes = 0, base = 0, bytes = 0;
  ASSERT_TRUE(context->moduleGetGlobal(module, "values", &values, &valuesBytes).ok());
  EXPECT_EQ(valuesBytes, 5000u);
  ASSERT_TRUE(context->moduleManagedRange(module, values, &base, &bytes).ok());
  EXPECT_EQ(base, values);
  EXPECT_EQ(bytes, 8192u);

  uint64_t count = 0, countBytes = 0;
  ASSERT_TRUE(context->moduleGetGlobal(module, "count", &count, &countBytes).ok());
  ASSERT_TRUE(context->moduleManagedRange(module, count, &base, &bytes).ok());
  EXPECT_EQ(base, values);
  EXPECT_EQ(bytes, 8192u);
  ASSERT_TRUE(context->moduleManagedRange(module, values, &base, &bytes).ok());
  EXPECT_EQ(bytes, 8192u);

  uint64_t other = 0, otherBytes = 0;
  ASSERT_TRUE(context->moduleGetGlobal(module, "other", &other, &otherBytes).ok());
  ASSERT_TRUE(context->moduleManagedRange(module, other, &base, &bytes).ok());
  EXPECT_EQ(base, values + 8192);
  EXPECT_EQ(bytes, 4096u);

  // The joined pages are one range for copies; an ordinary global is no managed memory.
  std::vector<uint8_t> page(8192, 7);
  EXPECT_TRUE(context->copyHostToDevice(values, page.data(), page.size(), 0, false).ok());
  uint64_t counter = 0, counterBytes = 0;
  ASSERT_TRUE(context->moduleGetGlobal(module, "counter", &counter, &counterBytes).ok());
  ASSERT_TRUE(context->moduleManagedRange(module, counter, &base, &bytes).ok());
  EXPECT_EQ(bytes, 0u);

  ASSERT_TRUE(context->moduleUnload(module).ok());
  EXPECT_EQ(context->copyHostToDevice(values, page.data(), page.size(), 0, false).code,
            CUDA_ERROR_INVALID_VALUE);
}

// A launch in clusters is cuLaunchKernelEx with the cluster's shape (a cooperative one with both
// attributes); the driver's refusal of a grid that does not divide comes back; the occupancy
// questions are the driver's answers.
TEST_F(CudaBackendTest, ClusterLaunchesAndTheirOccupancyGoToTheDriver) {
  uint64_t module = 0;
  auto image = fakeModuleImage();
  ASSERT_TRUE(context->moduleLoad(image, &module).ok());
  FunctionDescription function;
  ASSERT_TRUE(context->moduleGetFunction(module, "store", &function).ok());
  uint64_t out = 0;
  ASSERT_TRUE(context->memAlloc(4, &out).ok());
  std::vector<uint8_t> params = storeParams(out, 77);

  LaunchShape shape;
  shape.grid = {4, 2, 1};
  shape.cluster = {2, 2, 1};
  ASSERT_TRUE(context->launch(function.handle, shape, 0, params).ok());
  EXPECT_EQ(fakeCounter("fakeLastLaunchCluster"), 4);
  EXPECT_EQ(fakeCounter("fakeLastLaunchCooperative"), 0);
  int32_t result = 0;
  ASSERT_TRUE(context->copyDeviceToHost(&result, out, 4, 0).ok());
  EXPECT_EQ(result, 77);
  shape.cooperative = true;
  ASSERT_TRUE(context->launch(function.handle, shape, 0, params).ok());
  EXPECT_EQ(fakeCounter("fakeLastLaunchCooperative"), 1);
  shape.grid = {3, 2, 1};
  EXPECT_EQ(context->launch(function.handle, shape, 0, params).code,
            CUDA_ERROR_INVALID_CLUSTER_SIZE);

  int answer = 0;
  shape.cooperative = false;
  ASSERT_TRUE(context->occupancyClusters(function.handle, shape, false, &answer).ok());
  EXPECT_EQ(answer, 4);  // 16 blocks in clusters of 4
  ASSERT_TRUE(context->occupancyClusters(function.handle, shape, true, &answer).ok());
  EXPECT_EQ(answer, 8);
  shape.cluster = {1, 1, 1};  // no cluster given: the driver needs the kernel's own
  EXPECT_EQ(context->occupancyClusters(function.handle, shape, false, &answer).code,
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(context->occupancyClusters(999, shape, false, &answer).code, CUDA_ERROR_INVALID_HANDLE);
}

// A memset node setting the 16 words at `buffer` to 7.
GraphNodeDescription fillSixteenWords(uint64_t buffer) {
  GraphNodeDescription node;
  node.kind = GraphNodeDescription::Kind::kMemset;
  node.dst = buffer;
  node.value = 7;
  node.elementSize = 4;
  node.width = 16;
  return node;
}

// Nodes 0 memset, 1 kernel (after 0), 2 copy of two slices (after 1), 3 empty (after 0 and 2).
std::vector<GraphNodeDescription> fourNodeGraph(uint64_t function, uint64_t buffer) {
  using Kind = GraphNodeDescription::Kind;
  std::vector<GraphNodeDescription> nodes(4);
  nodes[0] = fillSixteenWords(buffer);
  nodes[1].kind = Kind::kKernel;
  nodes[1].dependencies = {0};
  nodes[1].function = function;
  nodes[1].shape.cooperative = true;
  nodes[1].params.assign(24, 0);
  int32_t value = 4242;
  std::memcpy(nodes[1].params.data(), &buffer, 8);
  std::memcpy(nodes[1].params.data() + 8, &value, 4);
  nodes[2].kind = Kind::kCopy;
  nodes[2].dependencies = {1};
  nodes[2].src = buffer;
  nodes[2].dst = buffer + 32;
  nodes[2].width = 4;
  nodes[2].depth = 2;
  nodes[2].srcSlice = nodes[2].dstSlice = 4;
  nodes[3].dependencies = {0, 2};
  return nodes;
}

TEST_F(CudaBackendTest, GraphsAreBuiltAsOneDriverGraph) {
  auto image = fakeModuleImage();
  uint64_t module = 0, buffer = 0;
  ASSERT_TRUE(context->moduleLoad(image, &module).ok());
  FunctionDescription function;
  ASSERT_TRUE(context->moduleGetFunction(module, "store", &function).ok());
  ASSERT_TRUE(context->memAlloc(64, &buffer).ok());
  auto nodes = fourNodeGraph(function.handle, buffer);

  int edgesBefore = fakeCounter("fakeGraphEdges");
  int launchesBefore = fakeCounter("fakeGraphLaunches");
  std::unique_ptr<BackendGraph> graph;
  ASSERT_TRUE(context->graphBuild(nodes, &graph).ok());
  ASSERT_NE(graph, nullptr);
  EXPECT_EQ(fakeCounter("fakeLiveGraphs"), 2);  // the graph and its executable graph
  // 0->1, 1->each of the copy's two slice nodes, and both slices and 0 -> 3.
  EXPECT_EQ(fakeCounter("fakeGraphEdges") - edgesBefore, 6);
  ASSERT_TRUE(graph->launch(0).ok());
  EXPECT_EQ(fakeCounter("fakeGraphLaunches") - launchesBefore, 1);
  int32_t words[16] = {};
  ASSERT_TRUE(context->copyDeviceToHost(words, buffer, 64, 0).ok());
  EXPECT_EQ(words[0], 4242);
  EXPECT_EQ(words[1], 7);
  EXPECT_EQ(words[8], 4242);  // slice 0 of the copy
  EXPECT_EQ(words[9], 7);     // slice 1
  EXPECT_EQ(words[15], 7);
  EXPECT_EQ(graph->launch(12345).code, CUDA_ERROR_INVALID_HANDLE);  // no such stream
  graph.reset();
  EXPECT_EQ(fakeCounter("fakeLiveGraphs"), 0);

  // A graph naming a kernel whose module is gone never reaches the driver's launch.
  ASSERT_TRUE(context->graphBuild(nodes, &graph).ok());
  ASSERT_NE(graph, nullptr);
  ASSERT_TRUE(context->moduleUnload(module).ok());
  launchesBefore = fakeCounter("fakeGraphLaunches");
  EXPECT_EQ(graph->launch(0).code, CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(fakeCounter("fakeGraphLaunches"), launchesBefore);
  graph.reset();
  EXPECT_EQ(context->graphBuild(nodes, &graph).code, CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(graph, nullptr);
  EXPECT_EQ(fakeCounter("fakeLiveGraphs"), 0);  // the half-built graph was destroyed
}

TEST_F(CudaBackendTest, GraphsWithMemoryOperationsAreBuiltUnlessAWaitMeetsTheScheduler) {
  using Kind = GraphNodeDescription::Kind;
  uint64_t buffer = 0;
  ASSERT_TRUE(context->memAlloc(64, &buffer).ok());
  // 0: memset of 16 words to 7; 1 (after 0): a 32-bit write of word 2, a barrier and a 64-bit
  // write of words 4 and 5.
  std::vector<GraphNodeDescription> nodes(2);
  nodes[0] = fillSixteenWords(buffer);
  nodes[1].kind = Kind::kMemOps;
  nodes[1].dependencies = {0};
  nodes[1].memOps = {{CU_STREAM_MEM_OP_WRITE_VALUE_32, buffer + 8, 0x1234, 0},
                     {CU_STREAM_MEM_OP_BARRIER, 0, 0, CU_STREAM_MEMORY_BARRIER_TYPE_SYS},
                     {CU_STREAM_MEM_OP_WRITE_VALUE_64, buffer + 16, 0x1122334455667788ull, 0}};
  int launchesBefore = fakeCounter("fakeGraphLaunches");
  std::unique_ptr<BackendGraph> graph;
  ASSERT_TRUE(context->graphBuild(nodes, &graph).ok());
  ASSERT_NE(graph, nullptr);
  ASSERT_TRUE(graph->launch(0).ok());
  EXPECT_EQ(fakeCounter("fakeGraphLaunches") - launchesBefore, 1);
  uint32_t words[16] = {};
  ASSERT_TRUE(context->copyDeviceToHost(words, buffer, 64, 0).ok());
  EXPECT_EQ(words[0], 7u);
  EXPECT_EQ(words[2], 0x1234u);
  EXPECT_EQ(words[4], 0x55667788u);
  EXPECT_EQ(words[5], 0x11223344u);
  EXPECT_EQ(words[6], 7u);

  // Memory a write names that was freed since stops the launch before the driver.
  graph.reset();
  uint64_t other = 0;
  ASSERT_TRUE(context->memAlloc(64, &other).ok());
  nodes[1].memOps[0].address = other;
  ASSERT_TRUE(context->graphBuild(nodes, &graph).ok());
  ASSERT_NE(graph, nullptr);
  ASSERT_TRUE(context->memFree(other).ok());
  launchesBefore = fakeCounter("fakeGraphLaunches");
  EXPECT_EQ(graph->launch(0).code, CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(fakeCounter("fakeGraphLaunches"), launchesBefore);
  graph.reset();
  EXPECT_EQ(fakeCounter("fakeLiveGraphs"), 0);

  // A wait (met by the memset before it): built, and the driver's launch meets it.
  nodes[1].memOps = {{CU_STREAM_MEM_OP_WAIT_VALUE_32, buffer, 7, CU_STREAM_WAIT_VALUE_GEQ}};
  ASSERT_TRUE(context->graphBuild(nodes, &graph).ok());
  ASSERT_NE(graph, nullptr);
  int waitsBefore = fakeCounter("fakeGraphWaitsMet");
  ASSERT_TRUE(graph->launch(0).ok());
  EXPECT_EQ(fakeCounter("fakeGraphWaitsMet") - waitsBefore, 1);
  graph.reset();

  // Under the pool's scheduler the same graph is replayed by the handler: nothing built.
  context->setLaunchGate(std::make_shared<CountingGate>());
  ASSERT_TRUE(context->graphBuild(nodes, &graph).ok());
  EXPECT_EQ(graph, nullptr);
  EXPECT_EQ(fakeCounter("fakeLiveGraphs"), 0);
}

TEST_F(CudaBackendTest, DestroyingTheContextReleasesEverything) {
  uint64_t address = 0, stream = 0, module = 0;
  ASSERT_TRUE(context->memAlloc(1024, &address).ok());
  ASSERT_TRUE(context->streamCreate(0, 0, &stream).ok());
  auto image = fakeModuleImage();
  ASSERT_TRUE(context->moduleLoad(image, &module).ok());
  EXPECT_EQ(fakeCounter("fakeLiveContexts"), 1);
  EXPECT_EQ(fakeCounter("fakeLiveAllocations"), 1);
  EXPECT_EQ(backend->deviceMemoryUsed(0), 1024u);

  context.reset();
  EXPECT_EQ(fakeCounter("fakeLiveContexts"), 0);
  EXPECT_EQ(fakeCounter("fakeLiveAllocations"), 0);
  EXPECT_EQ(fakeCounter("fakeLiveStreams"), 0);
  EXPECT_EQ(fakeCounter("fakeLiveModules"), 0);
  EXPECT_EQ(backend->deviceMemoryUsed(0), 0u);
}

// A fatal driver error (here the fake's device assert) loses the driver's state for the whole
// process on NVIDIA's driver: the backend marks itself faulted, tells the server once, and refuses
// every later call but the releases, in every context and in new ones, with the fault's code and a
// message naming it, without reaching the driver.
TEST_F(CudaBackendTest, AFatalFaultIsContainedToRefusalsInEveryContext) {
  std::vector<DeviceFault> seen;
  backend->setDeviceFaultPolicy("gpupoold is restarting",
                                [&](const DeviceFault& fault) { seen.push_back(fault); });
  context->setOwner("session 7 (tenant alice)");
  std::unique_ptr<BackendContext> other;
  ASSERT_TRUE(backend->createContext(0, 0, &other).ok());
  other->setOwner("session 8 (tenant bob)");
  uint64_t otherMemory = 0;
  ASSERT_TRUE(other->memAlloc(64, &otherMemory).ok());

  auto image = fakeModuleImage();
  uint64_t module = 0;
  ASSERT_TRUE(context->moduleLoad(image, &module).ok());
  FunctionDescription function;
  ASSERT_TRUE(context->moduleGetFunction(module, "store", &function).ok());
  uint64_t out = 0;
  ASSERT_TRUE(context->memAlloc(4, &out).ok());
  EXPECT_FALSE(backend->deviceFaulted());

  // The session that hits the fault gets the driver's error, as without containment.
  Status hit = context->launch(function.handle, LaunchShape{}, 0, storeParams(out, 0xA55E27));
  EXPECT_EQ(hit.code, CUDA_ERROR_ASSERT);
  EXPECT_NE(hit.message.find("cuLaunchKernel failed"), std::string::npos) << hit.message;
  EXPECT_TRUE(backend->deviceFaulted());
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].code, CUDA_ERROR_ASSERT);
  EXPECT_EQ(seen[0].errorName, "CUDA_ERROR_ASSERT");
  EXPECT_NE(seen[0].description.find("cuLaunchKernel"), std::string::npos);
  EXPECT_NE(seen[0].description.find("session 7 (tenant alice)"), std::string::npos)
      << seen[0].description;

  // Its later calls, another session's and a new context are refused with the same code.
  int32_t value = 1;
  Status own = context->copyHostToDevice(out, &value, 4, 0, false);
  EXPECT_EQ(own.code, CUDA_ERROR_ASSERT);
  EXPECT_NE(own.message.find("in this session"), std::string::npos) << own.message;
  Status foreign = other->copyHostToDevice(otherMemory, &value, 4, 0, false);
  EXPECT_EQ(foreign.code, CUDA_ERROR_ASSERT);
  EXPECT_NE(foreign.message.find("the GPU's CUDA state in this gpupoold was lost to a fatal fault "
                                 "(CUDA_ERROR_ASSERT at cuLaunchKernel) in another session; "
                                 "gpupoold is restarting"),
            std::string::npos)
      << foreign.message;
  uint64_t more = 0;
  EXPECT_EQ(other->memAlloc(64, &more).code, CUDA_ERROR_ASSERT);
  std::unique_ptr<BackendContext> late;
  Status created = backend->createContext(0, 0, &late);
  EXPECT_EQ(created.code, CUDA_ERROR_ASSERT);
  EXPECT_NE(created.message.find("lost to a fatal fault"), std::string::npos) << created.message;
  EXPECT_EQ(late, nullptr);

  // A second fatal error is not a second fault; releases still reach the driver.
  EXPECT_EQ(seen.size(), 1u);
  EXPECT_TRUE(other->memFree(otherMemory).ok());
  other.reset();
  context.reset();
  EXPECT_EQ(fakeCounter("fakeLiveContexts"), 0);
  EXPECT_EQ(fakeCounter("fakeLiveAllocations"), 0);
  EXPECT_EQ(backend->deviceMemoryUsed(0), 0u);
}

}  // namespace
}  // namespace gpupool::server
