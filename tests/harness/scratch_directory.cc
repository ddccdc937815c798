#include "scratch_directory.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "child_process.h"

namespace gpupool::e2e {

ScratchDirectory::ScratchDirectory() {
  const char* dir = std::getenv("TMPDIR");
  std::string pattern = std::string(dir && *dir ? dir : "/tmp") + "/gpupool-test-XXXXXX";
  if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed for " + pattern);
  path_ = pattern;
}

ScratchDirectory::~ScratchDirectory() {
  std::error_code ignored;  // a destructor cannot fail the test; leftovers are in $TMPDIR
  std::filesystem::remove_all(path_, ignored);
}

void ScratchDirectory::write(const std::string& name, const std::string& text) const {
  std::string temporary = file(name + ".new");
  std::ofstream(temporary) << text;
  std::filesystem::rename(temporary, file(name));
}

bool makeSelfSignedCertificate(const ScratchDirectory& directory, const std::string& name) {
  ProgramResult r =
      runProgram("/usr/bin/openssl",
                 {"req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                  "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
                  "-keyout", directory.file(name + ".key"), "-out", directory.file(name + ".pem")},
                 {}, std::chrono::seconds(60));
  if (!r.passed()) ADD_FAILURE() << "openssl failed: " << r.describe();
  return r.passed();
}

}  // namespace gpupool::e2e
