#include "fake_kubelet.h"

#include <unistd.h>

namespace gpupool::device_plugin::test {

class FakeKubelet::RegistrationService final : public v1beta1::Registration::Service {
 public:
  explicit RegistrationService(FakeKubelet& kubelet) : kubelet_(kubelet) {}
  grpc::Status Register(grpc::ServerContext*, const v1beta1::RegisterRequest* request,
                        v1beta1::Empty*) override {
    std::lock_guard lock(kubelet_.mutex_);
    kubelet_.registrations_.push_back(*request);
    kubelet_.registered_.notify_all();
    return grpc::Status::OK;
  }

 private:
  FakeKubelet& kubelet_;
};

class FakeKubelet::PodResourcesService final : public v1::PodResourcesLister::Service {
 public:
  explicit PodResourcesService(FakeKubelet& kubelet) : kubelet_(kubelet) {}
  grpc::Status List(grpc::ServerContext*, const v1::ListPodResourcesRequest*,
                    v1::ListPodResourcesResponse* response) override {
    std::lock_guard lock(kubelet_.mutex_);
    *response = kubelet_.pods_;
    return grpc::Status::OK;
  }

 private:
  FakeKubelet& kubelet_;
};

FakeKubelet::FakeKubelet(std::string kubeletDir, std::string podResourcesSocket)
    : kubeletDir_(std::move(kubeletDir)),
      podResourcesSocket_(std::move(podResourcesSocket)),
      registration_(std::make_unique<RegistrationService>(*this)),
      podResources_(std::make_unique<PodResourcesService>(*this)) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix://" + podResourcesSocket_, grpc::InsecureServerCredentials());
  builder.RegisterService(podResources_.get());
  podResourcesServer_ = builder.BuildAndStart();
  startRegistration();
}

FakeKubelet::~FakeKubelet() {
  for (auto* server : {registrationServer_.get(), podResourcesServer_.get()}) {
    if (server) server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }
}

void FakeKubelet::startRegistration() {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix://" + kubeletDir_ + "/kubelet.sock",
                           grpc::InsecureServerCredentials());
  builder.RegisterService(registration_.get());
  registrationServer_ = builder.BuildAndStart();
}

void FakeKubelet::restart() {
  registrationServer_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  registrationServer_->Wait();
  registrationServer_.reset();
  for (const char* name : {"kubelet.sock", "gpupool-gpu.sock", "gpupool-gpu-memory.sock"}) {
    ::unlink((kubeletDir_ + "/" + name).c_str());
  }
  startRegistration();
}

std::vector<v1beta1::RegisterRequest> FakeKubelet::waitForRegistrations(
    size_t count, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  registered_.wait_for(lock, timeout, [&] { return registrations_.size() >= count; });
  return registrations_;
}

void FakeKubelet::assignDevices(const std::string& ns, const std::string& pod,
                                const std::string& resource, const std::vector<std::string>& ids) {
  std::lock_guard lock(mutex_);
  auto* p = pods_.add_pod_resources();
  p->set_name(pod);
  p->set_namespace_(ns);
  auto* container = p->add_containers();
  container->set_name("main");
  auto* devices = container->add_devices();
  devices->set_resource_name(resource);
  for (const auto& id : ids) devices->add_device_ids(id);
}

PluginClient::PluginClient(const std::string& socketPath)
    : channel_(grpc::CreateChannel("unix://" + socketPath, grpc::InsecureChannelCredentials())),
      stub_(v1beta1::DevicePlugin::NewStub(channel_)) {}

PluginClient::~PluginClient() {
  watchContext_.TryCancel();
  if (watcher_.joinable()) watcher_.join();
}

void PluginClient::watch() {
  watcher_ = std::thread([this] {
    v1beta1::Empty empty;
    auto reader = stub_->ListAndWatch(&watchContext_, empty);
    v1beta1::ListAndWatchResponse response;
    while (reader->Read(&response)) {
      std::lock_guard lock(mutex_);
      lists_.push_back(response);
      changed_.notify_all();
    }
    reader->Finish();
  });
}

v1beta1::ListAndWatchResponse PluginClient::waitForList(
    const std::function<bool(const v1beta1::ListAndWatchResponse&)>& ok,
    std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  changed_.wait_for(lock, timeout, [&] { return !lists_.empty() && ok(lists_.back()); });
  return lists_.empty() ? v1beta1::ListAndWatchResponse() : lists_.back();
}

size_t PluginClient::listsSeen() {
  std::lock_guard lock(mutex_);
  return lists_.size();
}

}  // namespace gpupool::device_plugin::test
