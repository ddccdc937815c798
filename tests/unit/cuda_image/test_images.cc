#include "test_images.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <sstream>

namespace gpupool::image::testing {

std::vector<uint8_t> readImage(const std::string& name) {
  const std::string path = std::string(CUDA_IMAGE_TEST_DIR) + "/" + name;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ADD_FAILURE() << "cannot open test image " << path;
    return {};
  }
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

std::string readImageText(const std::string& name) {
  const auto bytes = readImage(name);
  return std::string(bytes.begin(), bytes.end());
}

std::vector<std::string> normalizePtx(const std::string& ptx) {
  std::vector<std::string> lines;
  std::istringstream in(ptx);
  std::string line;
  while (std::getline(in, line)) {
    if (const auto comment = line.find("//"); comment != std::string::npos) line.resize(comment);
    std::istringstream words(line);
    std::string word;
    std::string collapsed;
    while (words >> word) collapsed += (collapsed.empty() ? "" : " ") + word;
    if (!collapsed.empty()) lines.push_back(collapsed);
  }
  return lines;
}

Fatbin parseOrFail(const std::vector<uint8_t>& bytes) {
  auto fatbin = Fatbin::parse(bytes);
  EXPECT_TRUE(fatbin) << fatbin.status().message;
  return fatbin ? *fatbin : Fatbin{};
}

}  // namespace gpupool::image::testing
