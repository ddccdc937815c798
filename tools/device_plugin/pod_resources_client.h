// Asks the kubelet's PodResources API (List) which pod holds given devices: the kubelet does not
// say in Allocate or PreStartContainer which pod a device is for, but records it before
// PreStartContainer is called.
#pragma once

#include <string>
#include <vector>

namespace gpupool::device_plugin {

// The namespace of the pod one of whose containers holds every ID of `ids` of `resource`, asked of
// the PodResources socket at `socketPath`. Empty and *error (what to do next) when the kubelet
// cannot be asked or no pod holds them.
std::string namespaceHoldingDevices(const std::string& socketPath, const std::string& resource,
                                    const std::vector<std::string>& ids, std::string* error);

}  // namespace gpupool::device_plugin
