// Temporary files for one test: a fresh directory under $TMPDIR (or /tmp) that is removed with
// everything in it when the test is done, and a self-signed certificate for tls:// servers.
#pragma once

#include <string>

namespace gpupool::e2e {

class ScratchDirectory {
 public:
  ScratchDirectory();
  ~ScratchDirectory();
  ScratchDirectory(const ScratchDirectory&) = delete;
  ScratchDirectory& operator=(const ScratchDirectory&) = delete;

  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  // Writes `text` to `name` atomically (written aside and renamed), so a server reloading the
  // file never reads half of it.
  void write(const std::string& name, const std::string& text) const;

 private:
  std::string path_;
};

// Makes `name`.pem and `name`.key in `directory` with openssl: a certificate for 127.0.0.1 and
// localhost, valid for a day. Adds a gtest failure, with openssl's output, and returns false when
// openssl fails.
bool makeSelfSignedCertificate(const ScratchDirectory& directory, const std::string& name);

}  // namespace gpupool::e2e
