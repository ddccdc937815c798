// A stand-in for the kubelet's side of the device plugin API: the Registration service on
// <dir>/kubelet.sock (recording every registration), a PodResourcesLister on its own socket
// answering with the pods the test sets, and clients of the plugin's per-resource sockets.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tools/device_plugin/proto/deviceplugin.grpc.pb.h"
#include "tools/device_plugin/proto/podresources.grpc.pb.h"

namespace gpupool::device_plugin::test {

class FakeKubelet {
 public:
  // Serves Registration on <kubeletDir>/kubelet.sock and PodResources on podResourcesSocket.
  FakeKubelet(std::string kubeletDir, std::string podResourcesSocket);
  ~FakeKubelet();

  // The kubelet restarting: kubelet.sock is removed and created anew (a new inode), and the
  // plugin's sockets are removed, as the kubelet does.
  void restart();

  // Waits until `count` registrations (of any resource) arrived; returns them all.
  std::vector<v1beta1::RegisterRequest> waitForRegistrations(size_t count,
                                                             std::chrono::milliseconds timeout);
  // The pods List answers with: pod `pod` in `ns`, holding `ids` of `resource`.
  void assignDevices(const std::string& ns, const std::string& pod, const std::string& resource,
                     const std::vector<std::string>& ids);

  const std::string& kubeletDir() const { return kubeletDir_; }

 private:
  class RegistrationService;
  class PodResourcesService;
  void startRegistration();

  std::string kubeletDir_;
  std::string podResourcesSocket_;
  std::mutex mutex_;
  std::condition_variable registered_;
  std::vector<v1beta1::RegisterRequest> registrations_;
  v1::ListPodResourcesResponse pods_;
  std::unique_ptr<RegistrationService> registration_;
  std::unique_ptr<PodResourcesService> podResources_;
  std::unique_ptr<grpc::Server> registrationServer_;
  std::unique_ptr<grpc::Server> podResourcesServer_;
};

// The kubelet's client of one resource's plugin socket, with ListAndWatch followed on a thread.
class PluginClient {
 public:
  explicit PluginClient(const std::string& socketPath);
  ~PluginClient();
  v1beta1::DevicePlugin::Stub& stub() { return *stub_; }

  // Starts following ListAndWatch.
  void watch();
  // Waits until the latest list satisfies `ok`; returns it (or the last one seen, on timeout).
  v1beta1::ListAndWatchResponse waitForList(
      const std::function<bool(const v1beta1::ListAndWatchResponse&)>& ok,
      std::chrono::milliseconds timeout);
  size_t listsSeen();

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1beta1::DevicePlugin::Stub> stub_;
  grpc::ClientContext watchContext_;
  std::thread watcher_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<v1beta1::ListAndWatchResponse> lists_;
};

}  // namespace gpupool::device_plugin::test
