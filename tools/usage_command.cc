#include "tools/usage_command.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "server/metering_store.h"

namespace gpupool::tools {
namespace {

nlohmann::json toJson(const server::UsageTotals& u) {
  return {{"gpu_seconds", u.gpuSeconds},     {"gib_seconds", u.gibSeconds},
          {"queue_seconds", u.queueSeconds}, {"bytes_in", u.bytesIn},
          {"bytes_out", u.bytesOut},         {"calls", u.calls},
          {"launches", u.launches}};
}

}  // namespace

std::optional<double> parseSince(const std::string& text, double now) {
  if (text.empty()) return std::nullopt;
  // An age: a number and a unit.
  char unit = text.back();
  double scale = unit == 's' ? 1 : unit == 'm' ? 60 : unit == 'h' ? 3600 : unit == 'd' ? 86400 : 0;
  if (scale != 0) {
    try {
      size_t used = 0;
      double amount = std::stod(text.substr(0, text.size() - 1), &used);
      if (used == text.size() - 1 && amount >= 0) return now - amount * scale;
    } catch (...) {
    }
  }
  // A UTC date, optionally with a time.
  std::tm tm{};
  for (const char* format : {"%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d"}) {
    tm = {};
    const char* end = strptime(text.c_str(), format, &tm);
    if (end && *end == '\0') return static_cast<double>(timegm(&tm));
  }
  return std::nullopt;
}

int usageCommand(const UsageOptions& options) {
  double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  double since = 0;
  if (options.since) {
    auto parsed = parseSince(*options.since, now);
    if (!parsed) {
      std::cerr << "gpupool: --since '" << *options.since
                << "': expected a date (2024-05-01, 2024-05-01T08:00:00, UTC) or an age (90m, 12h, "
                   "7d)\n";
      return 2;
    }
    since = *parsed;
  }
  std::string error;
  auto store = server::MeteringStore::open(options.database, true, &error);
  if (!store) {
    std::cerr << "gpupool: cannot read usage: " << error << "\n";
    return 2;
  }
  server::UsageByKey rows = store->report(since, &error);
  if (!error.empty()) {
    std::cerr << "gpupool: cannot read usage from " << options.database << ": " << error << "\n";
    return 2;
  }
  std::map<std::string, server::UsageTotals> perTenant;
  for (const auto& [key, u] : rows) perTenant[key.first].add(u);

  if (options.json) {
    nlohmann::json out;
    out["since"] = since;
    out["usage"] = nlohmann::json::array();
    for (const auto& [key, u] : rows) {
      auto row = toJson(u);
      row["tenant"] = key.first;
      row["device"] = key.second;
      out["usage"].push_back(row);
    }
    out["tenants"] = nlohmann::json::array();
    for (const auto& [tenant, u] : perTenant) {
      auto row = toJson(u);
      row["tenant"] = tenant;
      out["tenants"].push_back(row);
    }
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::printf("%-16s %6s %12s %12s %12s %14s %14s %10s %10s\n", "TENANT", "DEVICE", "GPU-s",
              "GiB-s", "QUEUE-s", "BYTES-IN", "BYTES-OUT", "CALLS", "LAUNCHES");
  auto line = [](const std::string& tenant, const std::string& device,
                 const server::UsageTotals& u) {
    std::printf(
        "%-16s %6s %12.3f %12.3f %12.3f %14llu %14llu %10llu %10llu\n", tenant.c_str(),
        device.c_str(), u.gpuSeconds, u.gibSeconds, u.queueSeconds,
        static_cast<unsigned long long>(u.bytesIn), static_cast<unsigned long long>(u.bytesOut),
        static_cast<unsigned long long>(u.calls), static_cast<unsigned long long>(u.launches));
  };
  for (const auto& [key, u] : rows) {
    line(key.first, key.second < 0 ? "-" : std::to_string(key.second), u);
  }
  for (const auto& [tenant, u] : perTenant) line(tenant, "all", u);
  return 0;
}

}  // namespace gpupool::tools
