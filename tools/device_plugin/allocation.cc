#include "tools/device_plugin/allocation.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <set>

#include "client/pool_token.h"
#include "tools/device_plugin/inventory_poller.h"

namespace gpupool::device_plugin {
namespace {

std::string allocationKey(const std::string& resource, std::vector<std::string> ids) {
  std::sort(ids.begin(), ids.end());
  std::string key = resource + "|";
  for (const auto& id : ids) key += id + ",";
  return key;
}

// A namespace name is a DNS label; anything else could name a path outside the token directory.
bool validNamespaceName(const std::string& ns) {
  if (ns.empty() || ns.size() > 63) return false;
  for (char c : ns) {
    if (!(std::islower(static_cast<unsigned char>(c)) ||
          std::isdigit(static_cast<unsigned char>(c)) || c == '-')) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::vector<std::string> preferredAllocation(const std::vector<AdvertisedDevice>& available,
                                             const std::vector<std::string>& mustInclude,
                                             size_t size) {
  std::vector<std::string> chosen = mustInclude;
  std::set<std::string> taken(mustInclude.begin(), mustInclude.end());
  // Group the free IDs by the unit they should be packed into: the device for memory shares, the
  // server for whole devices.
  std::map<std::string, std::vector<std::string>> freeByUnit;
  std::vector<std::string> unitOrder;
  std::map<std::string, size_t> chosenByUnit;
  auto unitOf = [](const AdvertisedDevice& d) {
    return d.id != d.uuid ? "device " + d.uuid : "server " + d.endpoint;
  };
  for (const AdvertisedDevice& d : available) {
    std::string unit = unitOf(d);
    if (taken.count(d.id)) {
      ++chosenByUnit[unit];
      continue;
    }
    if (!freeByUnit.count(unit)) unitOrder.push_back(unit);
    freeByUnit[unit].push_back(d.id);
  }
  while (chosen.size() < size && !freeByUnit.empty()) {
    size_t need = size - chosen.size();
    std::string best;
    auto better = [&](const std::string& a, const std::string& b) {
      // Units already holding chosen IDs first; then one that fits the rest with the least left
      // over; then the largest.
      size_t ca = chosenByUnit[a], cb = chosenByUnit[b];
      if (ca != cb) return ca > cb;
      size_t fa = freeByUnit[a].size(), fb = freeByUnit[b].size();
      bool fitsA = fa >= need, fitsB = fb >= need;
      if (fitsA != fitsB) return fitsA;
      return fitsA ? fa < fb : fa > fb;
    };
    for (const std::string& unit : unitOrder) {
      if (!freeByUnit.count(unit)) continue;
      if (best.empty() || better(unit, best)) best = unit;
    }
    auto& ids = freeByUnit[best];
    size_t take = std::min(need, ids.size());
    chosen.insert(chosen.end(), ids.begin(), ids.begin() + static_cast<long>(take));
    chosenByUnit[best] += take;
    freeByUnit.erase(best);
  }
  return chosen;
}

bool AllocationBook::allocate(const std::string& resource, const std::vector<std::string>& ids,
                              const std::vector<AdvertisedDevice>& known, ContainerGrant* grant,
                              std::string* error) {
  std::vector<std::string> endpoints, uuids;
  for (const std::string& id : ids) {
    auto it = std::find_if(known.begin(), known.end(),
                           [&](const AdvertisedDevice& d) { return d.id == id; });
    if (it == known.end()) {
      *error = "unknown device " + id + " of " + resource +
               " (not offered by any configured server now)";
      return false;
    }
    if (std::find(uuids.begin(), uuids.end(), it->uuid) == uuids.end()) {
      uuids.push_back(it->uuid);
    }
    if (std::find(endpoints.begin(), endpoints.end(), it->endpoint) == endpoints.end()) {
      endpoints.push_back(it->endpoint);
    }
  }
  // Servers in the configuration's order: the client numbers the devices of its servers in the
  // order GPU_POOL_ENDPOINT lists them.
  std::vector<std::string> ordered;
  for (const PoolServerConfig& s : config_.servers) {
    if (std::find(endpoints.begin(), endpoints.end(), s.endpoint) != endpoints.end()) {
      ordered.push_back(s.endpoint);
    }
  }
  auto join = [](const std::vector<std::string>& items) {
    std::string out;
    for (const auto& item : items) out += (out.empty() ? "" : ",") + item;
    return out;
  };

  std::string directory;
  {
    std::lock_guard lock(mutex_);
    std::string key = allocationKey(resource, ids);
    // A device granted again was released by the container that held it: its directory goes.
    for (auto it = directories_.begin(); it != directories_.end();) {
      bool overlaps = false;
      for (const auto& id : ids) {
        overlaps = overlaps || it->first.find("|" + id + ",") != std::string::npos ||
                   it->first.find("," + id + ",") != std::string::npos;
      }
      if (overlaps && it->first.rfind(resource + "|", 0) == 0) {
        std::error_code ignored;
        std::filesystem::remove_all(it->second, ignored);
        it = directories_.erase(it);
      } else {
        ++it;
      }
    }
    auto now = std::chrono::system_clock::now().time_since_epoch();
    std::string name = socketNameOf(resource);
    name = name.substr(0, name.size() - 5);  // without ".sock"
    directory = config_.allocationDir + "/" + name + "-" +
                std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(now).count()) +
                "-" + std::to_string(++sequence_);
    std::error_code ec;
    std::filesystem::create_directories(directory, ec);
    if (ec) {
      *error = "cannot create the allocation directory " + directory + ": " + ec.message() +
               " (allocation_dir must be a writable host directory)";
      return false;
    }
    // The parent keeps other host users out (they could otherwise read every pod's token); inside
    // the container only this directory is visible, and any of its users may read the token.
    ::chmod(config_.allocationDir.c_str(), 0700);
    ::chmod(directory.c_str(), 0755);
    directories_[key] = directory;
  }

  grant->envs["GPU_POOL_ENDPOINT"] = join(ordered);
  grant->envs["CUDA_VISIBLE_DEVICES"] = join(uuids);
  grant->envs["LD_LIBRARY_PATH"] = config_.containerLibraryDir;
  grant->envs["GPU_POOL_TOKEN_FILE"] = kContainerTokenFile;
  if (!config_.tlsCa.empty()) {
    std::error_code ec;
    const std::filesystem::path copy = std::filesystem::path(directory) / "ca.pem";
    std::filesystem::copy_file(config_.tlsCa, copy,
                               std::filesystem::copy_options::overwrite_existing, ec);
    if (ec) {
      *error = "cannot copy tls_ca " + config_.tlsCa + " into " + directory + ": " + ec.message() +
               " (tls_ca must name a readable PEM file on the host)";
      return false;
    }
    ::chmod(copy.c_str(), 0444);
    grant->envs["GPU_POOL_TLS_CA"] = kContainerTlsCaFile;
  }
  grant->mounts.push_back({config_.containerLibraryDir, config_.libraryDir, true});
  grant->mounts.push_back({kContainerRunDir, directory, true});
  return true;
}

bool AllocationBook::preStart(const std::string& resource, const std::vector<std::string>& ids,
                              const NamespaceLookup& lookup, std::string* ns, std::string* error) {
  std::string directory;
  {
    std::lock_guard lock(mutex_);
    auto it = directories_.find(allocationKey(resource, ids));
    if (it == directories_.end()) {
      *error =
          "no Allocate of these devices by this plugin process (was it restarted in "
          "between?); delete the pod so that the kubelet allocates again";
      return false;
    }
    directory = it->second;
  }
  *ns = lookup(resource, ids, error);
  if (ns->empty()) return false;
  if (!validNamespaceName(*ns)) {
    *error = "the kubelet names namespace \"" + *ns + "\", which is not a namespace name";
    return false;
  }
  std::string tokenPath = config_.tokenDir + "/" + *ns;
  std::string why;
  std::string token = client::tokenFromFile(tokenPath, &why);
  if (!why.empty()) why = tokenPath + " " + why;
  if (token.empty()) {
    *error = "no token for namespace " + *ns + " (" + why +
             "): add the namespace's tenant token to the Secret mounted at " + config_.tokenDir +
             " under the key \"" + *ns + "\", with the token of a [[tenant]] of the pool";
    return false;
  }
  std::string path = directory + "/token";
  std::string temporary = path + ".new";
  int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0444);
  bool written =
      fd >= 0 && ::write(fd, token.data(), token.size()) == static_cast<ssize_t>(token.size());
  if (fd >= 0) written = ::close(fd) == 0 && written;
  if (!written || ::rename(temporary.c_str(), path.c_str()) != 0) {
    ::unlink(temporary.c_str());
    *error = "cannot write " + path + ": " + std::strerror(errno);
    return false;
  }
  return true;
}

}  // namespace gpupool::device_plugin
