// Runs hand-written PTX instruction snippets as a one-block kernel against host memory.
#pragma once

#include <string>
#include <vector>

#include "host_device_memory.h"

namespace gpupool::ptx::testing {

struct SnippetResult {
  CUresult loadCode = CUDA_SUCCESS;
  std::string loadMessage;
  LaunchResult launch;
  std::vector<uint64_t> out;  // the 64 u64 output slots
  std::vector<uint64_t> in;   // the 64 input slots after the launch (kernels may write them too)
};

// Wraps `body` in `.entry snippet(.param .u64 out, .param .u64 in)`. The body sees %out and %in
// (u64 generic pointers to 64 u64 slots each; `in` is filled from `input`), %tid (u32 thread
// index), and the registers declared in `decls`; `moduleScope` goes before the entry (e.g.
// `.shared` variables).
SnippetResult runSnippet(const std::string& decls, const std::string& body,
                         std::vector<uint64_t> input = {}, uint32_t threads = 1,
                         const std::string& target = "sm_90", const std::string& moduleScope = "");

// runSnippet for a snippet that must load and run: either failing is a test failure that names
// the reason.
SnippetResult runPassingSnippet(const std::string& decls, const std::string& body,
                                std::vector<uint64_t> input = {}, uint32_t threads = 1,
                                const std::string& moduleScope = "");

// Loads `text`; on failure adds a test failure naming the loader's reason and returns null.
std::unique_ptr<Module> loadOrFail(std::string_view text);

// Whole-module helpers for parser/validator tests.
std::string snippetModule(const std::string& decls, const std::string& body,
                          const std::string& target = "sm_90", const std::string& moduleScope = "");

}  // namespace gpupool::ptx::testing
