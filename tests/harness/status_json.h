// `gpupool status --json` of a server, as tests read it (the NVML tests compare their answers with
// it).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

#include "child_process.h"
#include "harness_paths.h"

namespace gpupool::e2e {

inline nlohmann::json parseJson(const std::string& text, const std::string& what) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    ADD_FAILURE() << what << " printed invalid JSON (" << e.what() << "):\n" << text;
    return nlohmann::json::object();
  }
}

inline nlohmann::json statusOf(const std::string& endpoint) {
  ProgramResult result =
      runProgram(gpupoolCliPath(), {"status", "--json", "--endpoint", endpoint},
                 {{"GPU_POOL_ENDPOINT", std::nullopt}}, std::chrono::seconds(30));
  EXPECT_TRUE(result.passed()) << result.describe();
  return parseJson(result.out, "gpupool status");
}

}  // namespace gpupool::e2e
