#include "ptx_snippet.h"

#include <gtest/gtest.h>

namespace gpupool::ptx::testing {

SnippetResult runPassingSnippet(const std::string& decls, const std::string& body,
                                std::vector<uint64_t> input, uint32_t threads,
                                const std::string& moduleScope) {
  SnippetResult r = runSnippet(decls, body, std::move(input), threads, "sm_90", moduleScope);
  EXPECT_EQ(r.loadCode, CUDA_SUCCESS) << r.loadMessage;
  EXPECT_EQ(r.launch.status.code, CUDA_SUCCESS) << r.launch.status.message;
  return r;
}

std::unique_ptr<Module> loadOrFail(std::string_view text) {
  auto loaded = Module::load(text);
  if (!loaded) {
    ADD_FAILURE() << "PTX did not load: " << loaded.status().message;
    return nullptr;
  }
  return std::move(*loaded);
}

std::string snippetModule(const std::string& decls, const std::string& body,
                          const std::string& target, const std::string& moduleScope) {
  return ".version 9.0\n.target " + target + "\n.address_size 64\n" + moduleScope +
         (moduleScope.empty() ? "" : "\n") +
         ".visible .entry snippet(.param .u64 out, .param .u64 in)\n{\n"
         "  .reg .b64 %out, %in;\n  .reg .b32 %tid;\n" +
         decls +
         "\n  ld.param.u64 %out, [out];\n  ld.param.u64 %in, [in];\n  mov.u32 %tid, %tid.x;\n" +
         body + "\n  ret;\n}\n";
}

SnippetResult runSnippet(const std::string& decls, const std::string& body,
                         std::vector<uint64_t> input, uint32_t threads, const std::string& target,
                         const std::string& moduleScope) {
  SnippetResult r;
  auto loaded = Module::load(snippetModule(decls, body, target, moduleScope));
  r.loadCode = loaded.status().code;
  r.loadMessage = loaded.status().message;
  if (!loaded) return r;
  std::unique_ptr<Module> module = std::move(*loaded);
  HostDeviceMemory memory;
  memory.bindModuleGlobals(*module);
  input.resize(64, 0);
  uint64_t in = memory.upload(input), out = memory.allocate(64 * 8);
  const KernelInfo& k = module->kernels().at(0);
  ParamBlock params(k);
  params.set(0, out).set(1, in);
  LaunchConfig config;
  config.block[0] = threads;
  LaunchServices services;
  services.workerThreads = 1;
  services.stepBudget = 1'000'000;
  r.launch = launch(*module, k, config, params.data(), memory, services);
  r.out = memory.download<uint64_t>(out, 64);
  r.in = memory.download<uint64_t>(in, 64);
  return r;
}

}  // namespace gpupool::ptx::testing
