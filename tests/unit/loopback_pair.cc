#include "loopback_pair.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <future>
#include <numeric>
#include <stdexcept>

#include "transport/transport_factory.h"

namespace gpupool::transport {
namespace {

// A self-signed certificate for 127.0.0.1 (its only name: an IP subjectAltName) with its key, made
// in-process (no openssl binary), in a directory removed afterwards. The client trusts it through
// GPU_POOL_TLS_CA, so connections run with verification on, host check included.
class SelfSignedCertificate {
 public:
  SelfSignedCertificate() {
    std::string pattern = (std::filesystem::temp_directory_path() / "duplex-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    directory_ = pattern;
    std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
        EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"), EVP_PKEY_free);
    std::unique_ptr<X509, decltype(&X509_free)> cert(X509_new(), X509_free);
    if (!key || !cert) throw std::runtime_error("cannot make a key or certificate");
    X509_set_version(cert.get(), 2);
    ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), 1);
    X509_gmtime_adj(X509_getm_notBefore(cert.get()), -60);
    X509_gmtime_adj(X509_getm_notAfter(cert.get()), 24 * 3600);
    X509_set_pubkey(cert.get(), key.get());
    X509_NAME* name = X509_get_subject_name(cert.get());
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>("gpupool test"), -1, -1, 0);
    X509_set_issuer_name(cert.get(), name);
    X509V3_CTX context;
    X509V3_set_ctx_nodb(&context);
    X509V3_set_ctx(&context, cert.get(), cert.get(), nullptr, nullptr, 0);
    X509_EXTENSION* altName =
        X509V3_EXT_conf_nid(nullptr, &context, NID_subject_alt_name, "IP:127.0.0.1");
    if (!altName || !X509_add_ext(cert.get(), altName, -1))
      throw std::runtime_error("cannot add subjectAltName");
    X509_EXTENSION_free(altName);
    if (!X509_sign(cert.get(), key.get(), EVP_sha256())) throw std::runtime_error("cannot sign");
    writePem(certificateFile(), [&](FILE* f) { return PEM_write_X509(f, cert.get()); });
    writePem(keyFile(), [&](FILE* f) {
      return PEM_write_PrivateKey(f, key.get(), nullptr, nullptr, 0, nullptr, nullptr);
    });
  }
  ~SelfSignedCertificate() {
    std::error_code ignored;
    std::filesystem::remove_all(directory_, ignored);
  }
  std::string certificateFile() const { return (directory_ / "cert.pem").string(); }
  std::string keyFile() const { return (directory_ / "key.pem").string(); }

 private:
  template <class Write>
  static void writePem(const std::string& path, Write write) {
    std::unique_ptr<FILE, decltype(&std::fclose)> f(std::fopen(path.c_str(), "w"), std::fclose);
    if (!f || !write(f.get())) throw std::runtime_error("cannot write " + path);
  }

  std::filesystem::path directory_;
};

// Unix socket paths for shm:// listeners, in one directory removed at exit.
class SocketDirectory {
 public:
  SocketDirectory() {
    std::string pattern = (std::filesystem::temp_directory_path() / "shm-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    directory_ = pattern;
  }
  ~SocketDirectory() {
    std::error_code ignored;
    std::filesystem::remove_all(directory_, ignored);
  }
  std::string next() { return (directory_ / ("s" + std::to_string(++count_))).string(); }

 private:
  std::filesystem::path directory_;
  std::atomic<int> count_{0};
};

}  // namespace

std::string freeShmSocketPath() {
  static SocketDirectory directory;
  return directory.next();
}

std::unique_ptr<Listener> listenOnLoopback(const std::string& scheme) {
  if (scheme == "shm") {
    Endpoint endpoint;
    endpoint.scheme = "shm";
    endpoint.host = freeShmSocketPath();
    return listenEndpoint(endpoint);
  }
  static const SelfSignedCertificate certificate;
  ::setenv("GPU_POOL_TLS_CA", certificate.certificateFile().c_str(), 1);
  ::unsetenv("GPU_POOL_TLS_VERIFY");
  return listenEndpoint(Endpoint{scheme, "127.0.0.1", 0},
                        {certificate.certificateFile(), certificate.keyFile()});
}

ConnectedPair connectedPair(const std::string& scheme) {
  ConnectedPair pair;
  pair.listener = listenOnLoopback(scheme);
  std::string error;
  Endpoint endpoint = parseEndpoint(pair.listener->url(), &error).value();
  auto connecting = std::async(std::launch::async, [&] {
    auto client = connectEndpoint(endpoint, 5000);
    client->sendFrame({}, {});
    return client;
  });
  pair.server = pair.listener->accept();
  // A broken test must fail, not hang the suite.
  pair.server->setReceiveTimeoutMs(20000);
  EXPECT_EQ(pair.server->receiveFrame().message.size(), 0u);
  pair.client = connecting.get();
  pair.client->setReceiveTimeoutMs(20000);
  return pair;
}

void waitForFrame(Connection& connection) {
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!connection.frameArrived()) {
    ASSERT_LT(std::chrono::steady_clock::now(), until) << "no frame within 20 s";
    pollfd p{connection.readinessDescriptor(), POLLIN, 0};
    ::poll(&p, 1, 100);
  }
}

std::vector<uint64_t> words(size_t n, uint64_t seed) {
  std::vector<uint64_t> w(n);
  std::iota(w.begin(), w.end(), seed);
  return w;
}

std::vector<uint64_t> asWords(std::span<const std::byte> bytes) {
  std::vector<uint64_t> w(bytes.size() / 8);
  std::memcpy(w.data(), bytes.data(), w.size() * 8);
  return w;
}

}  // namespace gpupool::transport
