#include "tools/device_plugin/resource_server.h"

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <iostream>

#include "tools/device_plugin/pod_resources_client.h"
#include "tools/device_plugin/proto/deviceplugin.grpc.pb.h"

namespace gpupool::device_plugin {
namespace {

constexpr const char* kApiVersion = "v1beta1";

std::string joinIds(const google::protobuf::RepeatedPtrField<std::string>& ids) {
  std::string out;
  for (const auto& id : ids) out += (out.empty() ? "" : ",") + id;
  return out;
}

}  // namespace

class DevicePluginService final : public v1beta1::DevicePlugin::Service {
 public:
  DevicePluginService(std::string resource, const PluginConfig& config, Inventory& inventory,
                      AllocationBook& allocations)
      : resource_(std::move(resource)),
        config_(config),
        inventory_(inventory),
        allocations_(allocations) {}

  void stopStreams() {
    stopping_ = true;
    inventory_.wake();
  }
  void resumeStreams() { stopping_ = false; }

  grpc::Status GetDevicePluginOptions(grpc::ServerContext*, const v1beta1::Empty*,
                                      v1beta1::DevicePluginOptions* options) override {
    options->set_pre_start_required(true);
    options->set_get_preferred_allocation_available(true);
    return grpc::Status::OK;
  }

  grpc::Status ListAndWatch(grpc::ServerContext* context, const v1beta1::Empty*,
                            grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) override {
    std::vector<AdvertisedDevice> sent;
    bool first = true;
    uint64_t generation = inventory_.generation();
    while (!stopping_ && !context->IsCancelled()) {
      std::vector<AdvertisedDevice> devices = inventory_.devicesOf(resource_);
      if (first || devices != sent) {
        v1beta1::ListAndWatchResponse response;
        size_t healthy = 0;
        for (const AdvertisedDevice& d : devices) {
          auto* device = response.add_devices();
          device->set_id(d.id);
          device->set_health(d.healthy ? "Healthy" : "Unhealthy");
          healthy += d.healthy;
        }
        if (!writer->Write(response)) break;
        std::cerr << "gpupool-device-plugin: " << resource_ << ": listed " << devices.size()
                  << " device(s), " << healthy << " Healthy, " << devices.size() - healthy
                  << " Unhealthy\n";
        sent = std::move(devices);
        first = false;
      }
      generation = inventory_.waitForChange(generation, std::chrono::milliseconds(500));
    }
    return grpc::Status::OK;
  }

  grpc::Status GetPreferredAllocation(grpc::ServerContext*,
                                      const v1beta1::PreferredAllocationRequest* request,
                                      v1beta1::PreferredAllocationResponse* response) override {
    std::vector<AdvertisedDevice> known = inventory_.devicesOf(resource_);
    for (const auto& container : request->container_requests()) {
      std::vector<AdvertisedDevice> available;
      for (const auto& id : container.available_deviceids()) {
        for (const auto& d : known) {
          if (d.id == id) available.push_back(d);
        }
      }
      std::vector<std::string> must(container.must_include_deviceids().begin(),
                                    container.must_include_deviceids().end());
      auto* answer = response->add_container_responses();
      for (const std::string& id :
           preferredAllocation(available, must, static_cast<size_t>(container.allocation_size()))) {
        answer->add_deviceids(id);
      }
    }
    return grpc::Status::OK;
  }

  grpc::Status Allocate(grpc::ServerContext*, const v1beta1::AllocateRequest* request,
                        v1beta1::AllocateResponse* response) override {
    std::vector<AdvertisedDevice> known = inventory_.devicesOf(resource_);
    for (const auto& container : request->container_requests()) {
      std::vector<std::string> ids(container.devices_ids().begin(), container.devices_ids().end());
      ContainerGrant grant;
      std::string error;
      if (!allocations_.allocate(resource_, ids, known, &grant, &error)) {
        std::cerr << "gpupool-device-plugin: " << resource_ << ": Allocate "
                  << joinIds(container.devices_ids()) << " refused: " << error << "\n";
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, error);
      }
      auto* answer = response->add_container_responses();
      for (const auto& [name, value] : grant.envs) (*answer->mutable_envs())[name] = value;
      for (const GrantMount& m : grant.mounts) {
        auto* mount = answer->add_mounts();
        mount->set_container_path(m.containerPath);
        mount->set_host_path(m.hostPath);
        mount->set_read_only(m.readOnly);
      }
      std::cerr << "gpupool-device-plugin: " << resource_ << ": allocated "
                << joinIds(container.devices_ids())
                << ": GPU_POOL_ENDPOINT=" << grant.envs["GPU_POOL_ENDPOINT"]
                << " CUDA_VISIBLE_DEVICES=" << grant.envs["CUDA_VISIBLE_DEVICES"]
                << ", token directory " << grant.mounts.back().hostPath << "\n";
    }
    return grpc::Status::OK;
  }

  grpc::Status PreStartContainer(grpc::ServerContext*,
                                 const v1beta1::PreStartContainerRequest* request,
                                 v1beta1::PreStartContainerResponse*) override {
    std::vector<std::string> ids(request->devices_ids().begin(), request->devices_ids().end());
    std::string ns, error;
    const std::string& socket = config_.podResourcesSocket;
    NamespaceLookup lookup = [&socket](const std::string& resource,
                                       const std::vector<std::string>& devices, std::string* why) {
      return namespaceHoldingDevices(socket, resource, devices, why);
    };
    if (!allocations_.preStart(resource_, ids, lookup, &ns, &error)) {
      std::cerr << "gpupool-device-plugin: " << resource_ << ": PreStartContainer "
                << joinIds(request->devices_ids()) << " failed: " << error << "\n";
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "gpupool: " + error);
    }
    std::cerr << "gpupool-device-plugin: " << resource_ << ": " << joinIds(request->devices_ids())
              << " go to namespace " << ns << ": its token is in place\n";
    return grpc::Status::OK;
  }

 private:
  std::string resource_;
  const PluginConfig& config_;
  Inventory& inventory_;
  AllocationBook& allocations_;
  std::atomic<bool> stopping_{false};
};

ResourceServer::ResourceServer(std::string resource, const PluginConfig& config,
                               Inventory& inventory, AllocationBook& allocations)
    : resource_(std::move(resource)),
      config_(config),
      service_(std::make_unique<DevicePluginService>(resource_, config, inventory, allocations)) {}

ResourceServer::~ResourceServer() { stop(); }

std::string ResourceServer::socketPath() const {
  return config_.kubeletDir + "/" + socketNameOf(resource_);
}

bool ResourceServer::socketPresent() const {
  struct stat st {};
  return ::stat(socketPath().c_str(), &st) == 0 && st.st_ino == socketInode_;
}

bool ResourceServer::start(std::string* error) {
  stop();
  service_->resumeStreams();
  std::string path = socketPath();
  ::unlink(path.c_str());
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix://" + path, grpc::InsecureServerCredentials());
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  struct stat st {};
  if (!server_ || ::stat(path.c_str(), &st) != 0) {
    *error = "cannot serve on " + path +
             " (is kubelet_dir the kubelet's device-plugins directory, "
             "mounted writable?)";
    server_.reset();
    return false;
  }
  socketInode_ = st.st_ino;

  auto channel = grpc::CreateChannel("unix://" + config_.kubeletDir + "/kubelet.sock",
                                     grpc::InsecureChannelCredentials());
  auto stub = v1beta1::Registration::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1beta1::RegisterRequest request;
  request.set_version(kApiVersion);
  request.set_endpoint(socketNameOf(resource_));
  request.set_resource_name(resource_);
  request.mutable_options()->set_pre_start_required(true);
  request.mutable_options()->set_get_preferred_allocation_available(true);
  v1beta1::Empty reply;
  grpc::Status status = stub->Register(&context, request, &reply);
  if (!status.ok()) {
    *error = "the kubelet at " + config_.kubeletDir + "/kubelet.sock refused the registration of " +
             resource_ + ": " + status.error_message() + "; retrying every second";
    stop();
    return false;
  }
  std::cerr << "gpupool-device-plugin: registered " << resource_ << " with the kubelet, serving on "
            << path << "\n";
  return true;
}

void ResourceServer::stop() {
  if (!server_) return;
  service_->stopStreams();
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  server_->Wait();
  server_.reset();
  if (socketPresent()) ::unlink(socketPath().c_str());
  socketInode_ = 0;
}

}  // namespace gpupool::device_plugin
