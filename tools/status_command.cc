#include "tools/status_command.h"

#include <iostream>
#include <nlohmann/json.hpp>

#include "tools/status_query.h"

namespace gpupool::tools {
namespace {

// The figures the server's NVML read (cuda backend); none on the emu, and then no "sensors" key.
nlohmann::json sensorsJson(wire::DeviceSensors::Reader s) {
  nlohmann::json out = nlohmann::json::object();
  auto put = [&](const char* name, int64_t value) {
    if (value >= 0) out[name] = value;
  };
  put("temperature_c", s.getTemperatureC());
  put("power_usage_mw", s.getPowerUsageMw());
  put("power_limit_mw", s.getPowerLimitMw());
  put("power_management_limit_mw", s.getPowerManagementLimitMw());
  put("graphics_clock_mhz", s.getGraphicsClockMhz());
  put("sm_clock_mhz", s.getSmClockMhz());
  put("memory_clock_mhz", s.getMemoryClockMhz());
  put("video_clock_mhz", s.getVideoClockMhz());
  put("performance_state", s.getPerformanceState());
  put("fan_speed_percent", s.getFanSpeedPercent());
  put("gpu_utilization_percent", s.getGpuUtilization());
  put("memory_utilization_percent", s.getMemoryUtilization());
  put("ecc_corrected_volatile", s.getEccCorrectedVolatile());
  put("ecc_uncorrected_volatile", s.getEccUncorrectedVolatile());
  put("ecc_corrected_aggregate", s.getEccCorrectedAggregate());
  put("ecc_uncorrected_aggregate", s.getEccUncorrectedAggregate());
  put("bar1_total", s.getBar1Total());
  put("bar1_used", s.getBar1Used());
  if (s.getSerial().size()) out["serial"] = s.getSerial().cStr();
  return out;
}

void printJson(wire::Response::StatusReply::Reader status) {
  nlohmann::json out;
  out["server_version"] = status.getServerVersion().cStr();
  out["backend"] = status.getBackendKind().cStr();
  if (status.getNvidiaDriverVersion().size()) {
    out["nvidia_driver_version"] = status.getNvidiaDriverVersion().cStr();
  }
  out["devices"] = nlohmann::json::array();
  for (auto device : status.getDevices()) {
    out["devices"].push_back({{"index", device.getIndex()},
                              {"name", device.getName().cStr()},
                              {"memory_used", device.getMemoryUsed()},
                              {"memory_total", device.getMemoryTotal()},
                              {"sessions", device.getSessions()},
                              {"utilization", device.getUtilization()},
                              {"utilization_measured", device.getUtilizationMeasured()}});
    if (device.getUuid().size()) out["devices"].back()["uuid"] = device.getUuid().cStr();
    if (device.getParent().size()) {
      out["devices"].back()["parent"] = device.getParent().cStr();
      out["devices"].back()["profile"] = device.getProfile().cStr();
      if (device.hasMig()) {
        auto mig = device.getMig();
        nlohmann::json placement = {{"parent_name", mig.getParentName().cStr()},
                                    {"parent_memory_total", mig.getParentMemoryTotal()},
                                    {"index", mig.getIndex()},
                                    {"max_devices", mig.getMaxDevices()},
                                    {"mode_change_pending", mig.getModeChangePending()}};
        if (mig.getGpuInstanceId() >= 0) placement["gpu_instance_id"] = mig.getGpuInstanceId();
        if (mig.getComputeInstanceId() >= 0) {
          placement["compute_instance_id"] = mig.getComputeInstanceId();
        }
        out["devices"].back()["mig"] = std::move(placement);
      }
    }
    if (nlohmann::json sensors = sensorsJson(device.getSensors()); !sensors.empty()) {
      out["devices"].back()["sensors"] = std::move(sensors);
    }
  }
  out["sessions"] = nlohmann::json::array();
  for (auto session : status.getSessions()) {
    out["sessions"].push_back({{"id", session.getSessionId()},
                               {"client", session.getClientName().cStr()},
                               {"memory_used", session.getMemoryUsed()},
                               {"transport", session.getTransport().cStr()}});
    if (session.getTenant().size()) out["sessions"].back()["tenant"] = session.getTenant().cStr();
    if (session.getTransport() == "shm") {
      out["sessions"].back()["shm"] = {{"ring_bytes_resident", session.getShmRingBytesResident()}};
    }
    if (session.hasRdma()) {
      auto r = session.getRdma();
      out["sessions"].back()["rdma"] = {{"received_zero_copy", r.getReceivedZeroCopy()},
                                        {"received_written", r.getReceivedWritten()},
                                        {"received_inline", r.getReceivedInline()},
                                        {"sent_by_write", r.getSentByWrite()},
                                        {"sent_zero_copy", r.getSentZeroCopy()},
                                        {"sent_inline", r.getSentInline()},
                                        {"registrations", r.getRegistrations()},
                                        {"registration_cache_hits", r.getRegistrationCacheHits()},
                                        {"deregistrations", r.getDeregistrations()},
                                        {"sends", r.getSends()},
                                        {"credit_waits", r.getCreditWaits()}};
    }
  }
  out["tenants"] = nlohmann::json::array();
  for (auto t : status.getTenants()) {
    out["tenants"].push_back({{"name", t.getName().cStr()},
                              {"memory_used", t.getMemoryUsed()},
                              {"memory_quota", t.getMemoryQuota()},
                              {"priority", t.getPriority().cStr()},
                              {"weight", t.getWeight()},
                              {"sessions", t.getSessions()},
                              {"gpu_seconds", t.getGpuSeconds()},
                              {"gib_seconds", t.getGibSeconds()},
                              {"queue_seconds", t.getQueueSeconds()},
                              {"bytes_in", t.getBytesIn()},
                              {"bytes_out", t.getBytesOut()},
                              {"calls", t.getCalls()},
                              {"launches", t.getLaunches()}});
  }
  std::cout << out.dump(2) << "\n";
}

void printText(wire::Response::StatusReply::Reader status) {
  std::cout << "server   gpupoold " << status.getServerVersion().cStr() << ", backend "
            << status.getBackendKind().cStr() << ", listening on " << status.getListen().cStr()
            << ", up " << static_cast<uint64_t>(status.getUptimeSeconds()) << " s\n";
  std::cout << "devices  " << status.getDevices().size() << "\n";
  for (auto device : status.getDevices()) {
    std::cout << "  [" << device.getIndex() << "] " << device.getName().cStr() << "  memory "
              << humanBytes(device.getMemoryUsed()) << " / " << humanBytes(device.getMemoryTotal())
              << "  sessions " << device.getSessions();
    if (device.getParent().size()) {
      std::cout << "  MIG " << device.getProfile().cStr() << " on " << device.getParent().cStr();
    }
    if (device.getUtilizationMeasured()) {
      std::cout << "  busy " << static_cast<int>(device.getUtilization() * 100) << "%";
    } else {
      std::cout << "  busy n/a";  // measured by pools (--config) only
    }
    auto sensors = device.getSensors();
    if (sensors.getTemperatureC() >= 0) std::cout << "  " << sensors.getTemperatureC() << " C";
    if (sensors.getPowerUsageMw() >= 0)
      std::cout << "  " << sensors.getPowerUsageMw() / 1000 << " W";
    std::cout << "\n";
  }
  if (status.getTenants().size()) std::cout << "tenants  " << status.getTenants().size() << "\n";
  for (auto t : status.getTenants()) {
    std::cout << "  " << t.getName().cStr() << "  memory " << humanBytes(t.getMemoryUsed()) << " / "
              << (t.getMemoryQuota() ? humanBytes(t.getMemoryQuota()) : std::string("unlimited"))
              << "  " << t.getPriority().cStr() << " x" << t.getWeight() << "  sessions "
              << t.getSessions() << "  gpu " << t.getGpuSeconds() << " s\n";
  }
  std::cout << "sessions " << status.getSessions().size() << "\n";
  for (auto session : status.getSessions()) {
    std::cout << "  #" << session.getSessionId() << " " << session.getClientName().cStr()
              << "  memory " << humanBytes(session.getMemoryUsed()) << "  "
              << session.getTransport().cStr();
    if (session.getTransport() == "shm") {
      std::cout << "  rings " << humanBytes(session.getShmRingBytesResident()) << " in memory";
    }
    if (session.hasRdma()) {
      // Bytes in and out without a copy on the server, and how often it had to register memory.
      auto r = session.getRdma();
      std::cout << "  in " << humanBytes(r.getReceivedZeroCopy() + r.getReceivedWritten())
                << " zero-copy, out " << humanBytes(r.getSentByWrite() + r.getSentZeroCopy())
                << " zero-copy, " << r.getRegistrations() << " registrations ("
                << r.getRegistrationCacheHits() << " cache hits)";
    }
    std::cout << "\n";
  }
}

}  // namespace

int statusCommand(const StatusOptions& options) {
  StatusFailure failure;
  auto endpoint = statusEndpoint(options.endpoint, &failure);
  std::unique_ptr<ServerStatus> status;
  if (endpoint) status = fetchStatus(*endpoint, "gpupool status", &failure);
  if (!status) {
    std::cerr << failure.message << "\n";
    return failure.exitCode;
  }
  if (options.json) {
    printJson(status->reader());
  } else {
    printText(status->reader());
  }
  return 0;
}

}  // namespace gpupool::tools
