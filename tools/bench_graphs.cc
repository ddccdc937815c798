#include "tools/bench_graphs.h"

#include <cstdio>
#include <string>

namespace gpupool::tools {
namespace {

// Timed runs per point, after untimed warm-up runs (the first launch of an exec uploads it).
size_t graphIterations(bool quick) { return quick ? 50 : 500; }
constexpr size_t kGraphWarmup = 5;

// A graph of `nodes` empty-kernel nodes, each depending on the one before.
CUgraph chainOfEmptyKernels(const BenchDriver& d, CUfunction kernel, size_t nodes) {
  CUgraph graph = nullptr;
  check(d, d.cuGraphCreate(&graph, 0), "cuGraphCreate");
  CUDA_KERNEL_NODE_PARAMS params{};
  params.func = kernel;
  params.gridDimX = params.gridDimY = params.gridDimZ = 1;
  params.blockDimX = params.blockDimY = params.blockDimZ = 1;
  CUgraphNode previous = nullptr;
  for (size_t i = 0; i < nodes; ++i) {
    CUgraphNode node = nullptr;
    check(d,
          d.cuGraphAddKernelNode(&node, graph, previous ? &previous : nullptr, previous ? 1 : 0,
                                 &params),
          "cuGraphAddKernelNode");
    previous = node;
  }
  return graph;
}

}  // namespace

json measureGraphs(const BenchDriver& d, const BenchContext& c, bool quick) {
  CUstream stream = nullptr;
  check(d, d.cuStreamCreate(&stream, 0), "cuStreamCreate");
  json out = json::array();
  for (size_t nodes : kGraphNodeCounts) {
    progress("graph of " + std::to_string(nodes) + " kernels against separate launches");
    CUgraph graph = chainOfEmptyKernels(d, c.emptyKernel, nodes);
    CUgraphExec exec = nullptr;
    check(d, d.cuGraphInstantiateWithFlags(&exec, graph, 0), "cuGraphInstantiateWithFlags");
    Stats graphLaunch = measure(kGraphWarmup, graphIterations(quick), [&] {
      check(d, d.cuGraphLaunch(exec, stream), "cuGraphLaunch");
      check(d, d.cuStreamSynchronize(stream), "cuStreamSynchronize");
    });
    Stats separate = measure(kGraphWarmup, graphIterations(quick), [&] {
      for (size_t i = 0; i < nodes; ++i) launchEmptyKernel(d, c.emptyKernel, stream);
      check(d, d.cuStreamSynchronize(stream), "cuStreamSynchronize");
    });
    check(d, d.cuGraphExecDestroy(exec), "cuGraphExecDestroy");
    check(d, d.cuGraphDestroy(graph), "cuGraphDestroy");
    out.push_back({{"nodes", nodes},
                   {"graph_launch_us", graphLaunch.median * 1e6},
                   {"separate_launches_us", separate.median * 1e6}});
  }
  check(d, d.cuStreamDestroy(stream), "cuStreamDestroy");
  return out;
}

void printGraphs(const json& graphs) {
  std::printf("\n  %-34s %12s %14s %10s\n", "graphs, launch + sync (us, median)", "graph",
              "one by one", "ratio");
  for (const json& point : graphs) {
    const double graph = point["graph_launch_us"].get<double>();
    const double separate = point["separate_launches_us"].get<double>();
    const std::string name = std::to_string(point["nodes"].get<size_t>()) + " empty-kernel nodes";
    std::printf("  %-34s %12.1f %14.1f %10.2f\n", name.c_str(), graph, separate, separate / graph);
  }
}

}  // namespace gpupool::tools
