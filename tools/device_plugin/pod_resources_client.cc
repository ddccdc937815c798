#include "tools/device_plugin/pod_resources_client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>

#include "tools/device_plugin/proto/podresources.grpc.pb.h"

namespace gpupool::device_plugin {

std::string namespaceHoldingDevices(const std::string& socketPath, const std::string& resource,
                                    const std::vector<std::string>& ids, std::string* error) {
  auto channel = grpc::CreateChannel("unix://" + socketPath, grpc::InsecureChannelCredentials());
  auto stub = v1::PodResourcesLister::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::ListPodResourcesRequest request;
  v1::ListPodResourcesResponse response;
  grpc::Status status = stub->List(&context, request, &response);
  if (!status.ok()) {
    *error = "cannot ask the kubelet's PodResources API at " + socketPath + ": " +
             status.error_message() +
             " (mount the kubelet's pod-resources directory and set pod_resources_socket)";
    return {};
  }
  for (const v1::PodResources& pod : response.pod_resources()) {
    for (const v1::ContainerResources& container : pod.containers()) {
      for (const v1::ContainerDevices& devices : container.devices()) {
        if (devices.resource_name() != resource) continue;
        bool all = !ids.empty();
        for (const std::string& id : ids) {
          all = all && std::find(devices.device_ids().begin(), devices.device_ids().end(), id) !=
                           devices.device_ids().end();
        }
        if (all) return pod.namespace_();
      }
    }
  }
  *error = "the kubelet's PodResources API names no pod holding these " + resource +
           " devices; the container cannot be given a tenant token";
  return {};
}

}  // namespace gpupool::device_plugin
