#include "tools/device_plugin/plugin_config.h"

#include <toml++/toml.h>

#include <fstream>
#include <sstream>

#include "transport/endpoint.h"

namespace gpupool::device_plugin {
namespace {

[[noreturn]] void failAt(const std::string& path, const toml::node* node, const std::string& key,
                         const std::string& problem) {
  std::ostringstream out;
  out << path;
  if (node && node->source().begin.line) out << ":" << node->source().begin.line;
  out << ": " << key << ": " << problem;
  throw PluginConfigError(out.str());
}

void checkPluginKeys(const std::string& path, const toml::table& table, const std::string& where,
                     std::initializer_list<std::string_view> known) {
  for (auto&& [key, value] : table) {
    bool ok = false;
    for (auto k : known) ok = ok || key.str() == k;
    if (!ok) failAt(path, &value, where + std::string(key.str()), "unknown key");
  }
}

void readString(const std::string& path, const toml::table& t, const std::string& where,
                std::string_view key, std::string* out) {
  const toml::node* n = t.get(key);
  if (!n) return;
  if (!n->is_string()) failAt(path, n, where + std::string(key), "expected a string");
  *out = n->as_string()->get();
  if (out->empty()) failAt(path, n, where + std::string(key), "must not be empty");
}

void readPath(const std::string& path, const toml::table& t, std::string_view key,
              std::string* out) {
  readString(path, t, "", key, out);
  if (!out->empty() && out->front() != '/') {
    failAt(path, t.get(key), std::string(key), "expected an absolute path, not \"" + *out + "\"");
  }
  while (out->size() > 1 && out->back() == '/') out->pop_back();
}

}  // namespace

const char* migStrategyName(MigStrategy strategy) {
  switch (strategy) {
    case MigStrategy::kNone:
      return "none";
    case MigStrategy::kSingle:
      return "single";
    case MigStrategy::kMixed:
      return "mixed";
  }
  return "none";
}

PluginConfig parsePluginConfig(std::string_view text, const std::string& path) {
  toml::table root;
  try {
    root = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    throw PluginConfigError(path + ":" + std::to_string(e.source().begin.line) + ": " +
                            std::string(e.description()));
  }
  PluginConfig config;
  config.path = path;
  checkPluginKeys(path, root, "",
                  {"kubelet_dir", "pod_resources_socket", "mig_strategy", "library_dir",
                   "container_library_dir", "token_dir", "allocation_dir", "poll_seconds",
                   "memory_shares", "tls_ca", "server"});
  readPath(path, root, "kubelet_dir", &config.kubeletDir);
  readPath(path, root, "pod_resources_socket", &config.podResourcesSocket);
  readPath(path, root, "library_dir", &config.libraryDir);
  readPath(path, root, "container_library_dir", &config.containerLibraryDir);
  readPath(path, root, "token_dir", &config.tokenDir);
  readPath(path, root, "allocation_dir", &config.allocationDir);
  readPath(path, root, "tls_ca", &config.tlsCa);
  std::string strategy;
  readString(path, root, "", "mig_strategy", &strategy);
  if (strategy == "single") {
    config.migStrategy = MigStrategy::kSingle;
  } else if (strategy == "mixed") {
    config.migStrategy = MigStrategy::kMixed;
  } else if (!strategy.empty() && strategy != "none") {
    failAt(path, root.get("mig_strategy"), "mig_strategy",
           "expected \"none\", \"single\" or \"mixed\", not \"" + strategy + "\"");
  }
  if (const toml::node* n = root.get("poll_seconds")) {
    if (!n->is_integer() || n->as_integer()->get() < 1 || n->as_integer()->get() > 3600) {
      failAt(path, n, "poll_seconds", "expected a whole number of seconds from 1 to 3600");
    }
    config.pollSeconds = static_cast<int>(n->as_integer()->get());
  }
  if (const toml::node* n = root.get("memory_shares")) {
    if (!n->is_boolean()) failAt(path, n, "memory_shares", "expected true or false");
    config.memoryShares = n->as_boolean()->get();
  }
  const toml::node* servers = root.get("server");
  if (!servers || !servers->is_array_of_tables() || servers->as_array()->empty()) {
    failAt(path, servers, "server",
           "expected at least one [[server]] table with endpoint = \"tcp://HOST:PORT\"");
  }
  size_t i = 0;
  for (const toml::node& entry : *servers->as_array()) {
    std::string where = "server[" + std::to_string(i++) + "].";
    const toml::table& t = *entry.as_table();
    checkPluginKeys(path, t, where, {"endpoint", "token_file"});
    PoolServerConfig server;
    readString(path, t, where, "endpoint", &server.endpoint);
    if (server.endpoint.empty()) failAt(path, &entry, where + "endpoint", "missing");
    std::string error;
    auto endpoint = transport::parseEndpoint(server.endpoint, &error);
    if (!endpoint) failAt(path, t.get("endpoint"), where + "endpoint", error);
    if (endpoint->scheme != "tcp" && endpoint->scheme != "tls") {
      failAt(path, t.get("endpoint"), where + "endpoint",
             "expected tcp:// or tls:// (what a container on another host can reach), not " +
                 server.endpoint);
    }
    readString(path, t, where, "token_file", &server.tokenFile);
    config.servers.push_back(std::move(server));
  }
  return config;
}

PluginConfig loadPluginConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw PluginConfigError(path + ": cannot read the configuration file");
  std::stringstream text;
  text << in.rdbuf();
  return parsePluginConfig(text.str(), path);
}

}  // namespace gpupool::device_plugin
