#include "server/pool_config.h"

#include <toml++/toml.h>

#include <cctype>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "server/device_uuid.h"

namespace gpupool::server {
namespace {

// Builds "FILE:LINE: KEY: problem" for the node at fault.
class Reporter {
 public:
  explicit Reporter(std::string path) : path_(std::move(path)) {}
  [[noreturn]] void fail(const toml::node* node, const std::string& key,
                         const std::string& problem) const {
    std::ostringstream out;
    out << path_;
    if (node && node->source().begin.line) out << ":" << node->source().begin.line;
    out << ": " << key << ": " << problem;
    throw PoolConfigError(out.str());
  }

 private:
  std::string path_;
};

// Every key of `table` must be one of `known`, so a misspelt key is an error, not a silent default.
void checkKeys(const Reporter& report, const toml::table& table, const std::string& where,
               std::initializer_list<std::string_view> known) {
  for (auto&& [key, value] : table) {
    bool ok = false;
    for (auto k : known) ok = ok || key.str() == k;
    if (!ok) report.fail(&value, where + std::string(key.str()), "unknown key");
  }
}

std::string stringAt(const Reporter& report, const toml::table& t, const std::string& where,
                     std::string_view key) {
  const toml::node* n = t.get(key);
  if (!n) return {};
  if (!n->is_string()) report.fail(n, where + std::string(key), "expected a string");
  return n->as_string()->get();
}

uint64_t sizeAt(const Reporter& report, const toml::table& t, const std::string& where,
                std::string_view key) {
  const toml::node* n = t.get(key);
  if (!n) return 0;
  if (n->is_integer() && n->as_integer()->get() > 0) return n->as_integer()->get();
  if (n->is_string()) {
    if (auto size = parseByteSize(n->as_string()->get()); size && *size > 0) return *size;
  }
  report.fail(n, where + std::string(key),
              "expected a size such as \"256MiB\", \"1GiB\" or a positive byte count");
}

TenantConfig readTenant(const Reporter& report, const toml::table& t, const std::string& where,
                        const std::string& configDir) {
  checkKeys(report, t, where,
            {"name", "token", "token_file", "memory_quota", "priority", "weight", "devices",
             "max_sessions"});
  TenantConfig tenant;
  tenant.name = stringAt(report, t, where, "name");
  if (tenant.name.empty()) report.fail(&t, where + "name", "every tenant needs a name");
  tenant.token = stringAt(report, t, where, "token");
  std::string tokenFile = stringAt(report, t, where, "token_file");
  if (!tokenFile.empty()) {
    if (!tenant.token.empty())
      report.fail(t.get("token_file"), where + "token_file", "give token or token_file, not both");
    if (tokenFile[0] != '/') tokenFile = configDir + tokenFile;
    std::ifstream in(tokenFile);
    if (!in) report.fail(t.get("token_file"), where + "token_file", "cannot read " + tokenFile);
    std::getline(in, tenant.token);
    while (!tenant.token.empty() && std::isspace(static_cast<unsigned char>(tenant.token.back()))) {
      tenant.token.pop_back();
    }
  }
  if (tenant.token.empty())
    report.fail(&t, where + "token", "tenant '" + tenant.name + "' needs a token or token_file");
  tenant.memoryQuota = sizeAt(report, t, where, "memory_quota");
  if (const toml::node* n = t.get("priority")) {
    std::string p = n->is_string() ? n->as_string()->get() : "";
    if (p == "high")
      tenant.priority = PriorityClass::kHigh;
    else if (p == "normal")
      tenant.priority = PriorityClass::kNormal;
    else if (p == "low")
      tenant.priority = PriorityClass::kLow;
    else
      report.fail(n, where + "priority", "expected \"high\", \"normal\" or \"low\"");
  }
  if (const toml::node* n = t.get("weight")) {
    double w = n->is_integer()          ? static_cast<double>(n->as_integer()->get())
               : n->is_floating_point() ? n->as_floating_point()->get()
                                        : -1;
    if (!(w > 0) || !std::isfinite(w))
      report.fail(n, where + "weight", "expected a positive number");
    tenant.weight = w;
  }
  if (const toml::node* n = t.get("max_sessions")) {
    if (!n->is_integer() || n->as_integer()->get() < 0 || n->as_integer()->get() > 1'000'000)
      report.fail(n, where + "max_sessions", "expected a session count (0 = no limit)");
    else
      tenant.maxSessions = static_cast<uint32_t>(n->as_integer()->get());
  }
  if (const toml::node* n = t.get("devices")) {
    if (!n->is_array()) report.fail(n, where + "devices", "expected a list of device indices");
    for (auto&& d : *n->as_array()) {
      if (!d.is_integer() || d.as_integer()->get() < 0) {
        report.fail(&d, where + "devices", "expected a list of device indices");
      }
      tenant.devices.push_back(static_cast<int>(d.as_integer()->get()));
    }
  }
  return tenant;
}

DeviceConfig readDevice(const Reporter& report, const toml::table& t, const std::string& where) {
  checkKeys(report, t, where, {"backend", "memory", "index", "uuid"});
  DeviceConfig device;
  device.line = static_cast<int>(t.source().begin.line);
  if (t.get("backend")) device.backend = stringAt(report, t, where, "backend");
  if (device.backend != "emu" && device.backend != "cuda") {
    report.fail(t.get("backend"), where + "backend", "expected \"emu\" or \"cuda\"");
  }
  device.memoryBytes = sizeAt(report, t, where, "memory");
  if (device.backend == "emu" && device.memoryBytes == 0) device.memoryBytes = 4ull << 30;
  if (device.backend == "cuda" && t.get("memory")) {
    report.fail(t.get("memory"), where + "memory", "only emu devices take a memory size");
  }
  if (const toml::node* n = t.get("index")) {
    if (!n->is_integer() || n->as_integer()->get() < 0)
      report.fail(n, where + "index", "expected a device ordinal");
    device.index = static_cast<int>(n->as_integer()->get());
    device.indexLine = static_cast<int>(n->source().begin.line);
  }
  device.uuid = stringAt(report, t, where, "uuid");
  if (!device.uuid.empty()) {
    device.uuidLine = static_cast<int>(t.get("uuid")->source().begin.line);
    if (deviceUuidDigits(device.uuid).empty()) {
      report.fail(t.get("uuid"), where + "uuid",
                  "expected \"GPU-…\" or \"MIG-…\" and 32 hex digits, as nvidia-smi -L or "
                  "gpupoold --list-devices print them");
    }
    if (device.index) {
      report.fail(t.get("uuid"), where + "uuid", "give index or uuid, not both");
    }
  }
  if (device.backend == "emu" && (device.index || !device.uuid.empty())) {
    report.fail(&t, where + "backend",
                "index and uuid select cuda devices; emu devices take memory");
  }
  return device;
}

template <typename Read>
void readArrayOfTables(const Reporter& report, const toml::table& root, std::string_view key,
                       Read read) {
  const toml::node* n = root.get(key);
  if (!n) return;
  if (!n->is_array_of_tables())
    report.fail(n, std::string(key), "expected [[" + std::string(key) + "]] tables");
  size_t i = 0;
  for (auto&& item : *n->as_array()) {
    read(*item.as_table(), std::string(key) + "[" + std::to_string(i++) + "].");
  }
}

}  // namespace

const char* priorityName(PriorityClass priority) {
  switch (priority) {
    case PriorityClass::kHigh:
      return "high";
    case PriorityClass::kNormal:
      return "normal";
    case PriorityClass::kLow:
      return "low";
  }
  return "normal";
}

std::optional<uint64_t> parseByteSize(std::string_view text) {
  uint64_t value = 0;
  size_t pos = 0;
  while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) {
    if (value > (UINT64_MAX - 9) / 10) return std::nullopt;
    value = value * 10 + static_cast<uint64_t>(text[pos++] - '0');
  }
  if (pos == 0) return std::nullopt;
  std::string_view unit = text.substr(pos);
  int shift = 0;
  if (unit.empty() || unit == "B")
    shift = 0;
  else if (unit == "KiB" || unit == "K")
    shift = 10;
  else if (unit == "MiB" || unit == "M")
    shift = 20;
  else if (unit == "GiB" || unit == "G")
    shift = 30;
  else if (unit == "TiB" || unit == "T")
    shift = 40;
  else
    return std::nullopt;
  if (shift && value > (UINT64_MAX >> shift)) return std::nullopt;
  return value << shift;
}

PoolConfig parsePoolConfig(std::string_view text, const std::string& path) {
  Reporter report(path);
  toml::table root;
  try {
    root = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    throw PoolConfigError(path + ":" + std::to_string(e.source().begin.line) + ": " +
                          std::string(e.description()));
  }
  std::string configDir;
  if (auto slash = path.rfind('/'); slash != std::string::npos)
    configDir = path.substr(0, slash + 1);

  PoolConfig config;
  config.path = path;
  checkKeys(report, root, "",
            {"device", "tenant", "overcommit", "scheduler", "metering", "limits"});
  readArrayOfTables(report, root, "device", [&](const toml::table& t, const std::string& where) {
    config.devices.push_back(readDevice(report, t, where));
  });
  readArrayOfTables(report, root, "tenant", [&](const toml::table& t, const std::string& where) {
    config.tenants.push_back(readTenant(report, t, where, configDir));
  });
  if (const toml::node* n = root.get("overcommit")) {
    double f = n->is_integer()          ? static_cast<double>(n->as_integer()->get())
               : n->is_floating_point() ? n->as_floating_point()->get()
                                        : 0;
    if (!(f >= 1) || !std::isfinite(f)) report.fail(n, "overcommit", "expected a number >= 1");
    config.overcommit = f;
  }
  if (const toml::node* n = root.get("scheduler")) {
    if (!n->is_table()) report.fail(n, "scheduler", "expected a [scheduler] table");
    const toml::table& s = *n->as_table();
    checkKeys(report, s, "scheduler.", {"starvation_ms"});
    if (const toml::node* b = s.get("starvation_ms")) {
      if (!b->is_integer() || b->as_integer()->get() <= 0)
        report.fail(b, "scheduler.starvation_ms", "expected a positive number of milliseconds");
      config.starvationBound = std::chrono::milliseconds(b->as_integer()->get());
    }
  }
  if (const toml::node* n = root.get("metering")) {
    if (!n->is_table()) report.fail(n, "metering", "expected a [metering] table");
    const toml::table& m = *n->as_table();
    checkKeys(report, m, "metering.", {"database", "flush_ms"});
    config.meteringDatabase = stringAt(report, m, "metering.", "database");
    if (const toml::node* f = m.get("flush_ms")) {
      if (!f->is_integer() || f->as_integer()->get() <= 0)
        report.fail(f, "metering.flush_ms", "expected a positive number of milliseconds");
      config.meteringFlush = std::chrono::milliseconds(f->as_integer()->get());
    }
  }
  if (const toml::node* n = root.get("limits")) {
    if (!n->is_table()) report.fail(n, "limits", "expected a [limits] table");
    const toml::table& l = *n->as_table();
    checkKeys(report, l, "limits.",
              {"handshake_deadline_ms", "max_unauthenticated", "max_unauthenticated_per_source"});
    // A count in [least, 2^31): what the key's value must be, or the report names the key.
    auto count = [&](const char* key, int64_t least, const char* expected) {
      std::optional<unsigned> value;
      if (const toml::node* v = l.get(key)) {
        if (!v->is_integer() || v->as_integer()->get() < least ||
            v->as_integer()->get() > INT32_MAX)
          report.fail(v, std::string("limits.") + key, expected);
        value = static_cast<unsigned>(v->as_integer()->get());
      }
      return value;
    };
    ConnectionLimits& limits = config.connectionLimits;
    limits.handshakeDeadlineMs =
        count("handshake_deadline_ms", 1, "expected a positive number of milliseconds");
    limits.maxUnauthenticated =
        count("max_unauthenticated", 0, "expected a connection count (0 = no limit)");
    limits.maxUnauthenticatedPerSource =
        count("max_unauthenticated_per_source", 0, "expected a connection count (0 = no limit)");
  }
  if (config.meteringDatabase.empty())
    config.meteringDatabase = path + ".usage.db";
  else if (config.meteringDatabase[0] != '/')
    config.meteringDatabase = configDir + config.meteringDatabase;

  if (config.devices.empty())
    report.fail(&root, "device", "the pool needs at least one [[device]]");
  bool emu = config.devices.front().backend == "emu";
  for (size_t i = 0; i < config.devices.size(); ++i) {
    const auto& d = config.devices[i];
    std::string where = "device[" + std::to_string(i) + "].";
    if ((d.backend == "emu") != emu) {
      report.fail(root.get("device"), where + "backend",
                  "one pool serves one backend kind; mix emu and cuda on separate servers");
    }
    if (emu && d.memoryBytes != config.devices.front().memoryBytes) {
      report.fail(root.get("device"), where + "memory",
                  "emu devices of one server share one memory size");
    }
  }

  std::set<std::string> names, tokens;
  uint64_t capacity = 0;
  for (const auto& d : config.devices) capacity += d.memoryBytes;
  for (size_t i = 0; i < config.tenants.size(); ++i) {
    const auto& t = config.tenants[i];
    std::string where = "tenant[" + std::to_string(i) + "].";
    const toml::node* node = root.get("tenant")->as_array()->get(i);
    if (!names.insert(t.name).second)
      report.fail(node, where + "name", "tenant '" + t.name + "' is defined twice");
    if (!tokens.insert(t.token).second)
      report.fail(node, where + "token", "tenant '" + t.name + "' reuses another tenant's token");
    for (int d : t.devices) {
      if (d >= static_cast<int>(config.devices.size())) {
        report.fail(node, where + "devices",
                    "no device " + std::to_string(d) + " (the pool has " +
                        std::to_string(config.devices.size()) + ")");
      }
    }
  }
  // Only known capacities (emu) can be checked here; cuda capacities are checked at start.
  if (emu) {
    if (std::string problem = quotaProblem(config, capacity); !problem.empty()) {
      report.fail(root.get("tenant"), "tenant.memory_quota", problem);
    }
  }
  return config;
}

std::string quotaProblem(const PoolConfig& config, uint64_t capacity) {
  long double quotas = 0;
  for (const auto& t : config.tenants) quotas += t.memoryQuota;
  if (quotas <= static_cast<long double>(capacity) * config.overcommit) return {};
  return "quotas add up to " + std::to_string(static_cast<uint64_t>(quotas)) +
         " bytes, more than the pool's " + std::to_string(capacity) + " bytes times overcommit " +
         std::to_string(config.overcommit) + "; raise overcommit or lower the quotas";
}

std::string deviceConfigProblem(const PoolConfig& config, size_t device, const std::string& key,
                                const std::string& problem) {
  int line = 0;
  if (device < config.devices.size()) {
    const DeviceConfig& d = config.devices[device];
    line = key == "index" && d.indexLine ? d.indexLine
           : key == "uuid" && d.uuidLine ? d.uuidLine
                                         : d.line;
  }
  std::string out = config.path;
  if (line) out += ":" + std::to_string(line);
  return out + ": device[" + std::to_string(device) + "]." + key + ": " + problem;
}

PoolConfig loadPoolConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw PoolConfigError(path + ": cannot read the configuration file");
  std::ostringstream text;
  text << in.rdbuf();
  return parsePoolConfig(text.str(), path);
}

}  // namespace gpupool::server
