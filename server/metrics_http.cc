#include "server/metrics_http.h"

#include <capnp/message.h>
#include <sys/socket.h>

#include <atomic>
#include <boost/asio.hpp>
#include <sstream>

#include "server/pool_server.h"
#include "server/tenant_pool.h"

namespace gpupool::server {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;

// Label values are quoted; backslash, quote and newline are escaped as the format requires.
std::string label(std::string_view value) {
  std::string out = "\"";
  for (char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

class Family {
 public:
  Family(std::ostringstream& out, const char* name, const char* type, const char* help)
      : out_(out), name_(name) {
    out_ << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
  }
  template <typename T>
  void sample(const std::string& labels, T value) {
    out_ << name_ << (labels.empty() ? "" : "{" + labels + "}") << " " << value << "\n";
  }

 private:
  std::ostringstream& out_;
  const char* name_;
};

}  // namespace

std::string renderMetrics(wire::Response::StatusReply::Reader status) {
  std::ostringstream out;
  out.precision(17);
  Family(out, "gpupool_up", "gauge", "1 while gpupoold serves").sample("", 1);
  Family(out, "gpupool_uptime_seconds", "gauge", "Seconds since gpupoold started")
      .sample("", status.getUptimeSeconds());
  Family used(out, "gpupool_device_memory_used_bytes", "gauge", "Device memory allocated");
  for (auto d : status.getDevices())
    used.sample("device=\"" + std::to_string(d.getIndex()) + "\"", d.getMemoryUsed());
  Family total(out, "gpupool_device_memory_total_bytes", "gauge", "Device memory");
  for (auto d : status.getDevices())
    total.sample("device=\"" + std::to_string(d.getIndex()) + "\"", d.getMemoryTotal());
  Family sessions(out, "gpupool_device_sessions", "gauge", "Sessions with a context on the device");
  for (auto d : status.getDevices())
    sessions.sample("device=\"" + std::to_string(d.getIndex()) + "\"", d.getSessions());
  // Shared memory that idle shm sessions give back (docs/shm.md, "Idle sessions").
  uint64_t ringBytes = 0;
  for (auto session : status.getSessions()) {
    if (session.getTransport() == "shm") ringBytes += session.getShmRingBytesResident();
  }
  Family(out, "gpupool_shm_ring_bytes_resident", "gauge",
         "Bytes of shared-memory sessions' rings in memory")
      .sample("", ringBytes);
  Family util(out, "gpupool_device_utilization_ratio", "gauge",
              "Fraction of time the device ran kernels (pools only: no series where unmeasured)");
  for (auto d : status.getDevices()) {
    if (d.getUtilizationMeasured()) {
      util.sample("device=\"" + std::to_string(d.getIndex()) + "\"", d.getUtilization());
    }
  }
  Family held(out, "gpupool_tenant_memory_used_bytes", "gauge", "Device memory the tenant holds");
  for (auto t : status.getTenants())
    held.sample("tenant=" + label(t.getName().cStr()), t.getMemoryUsed());
  Family quota(out, "gpupool_tenant_memory_quota_bytes", "gauge",
               "The tenant's memory quota (0 = none)");
  for (auto t : status.getTenants())
    quota.sample("tenant=" + label(t.getName().cStr()), t.getMemoryQuota());
  Family live(out, "gpupool_tenant_sessions", "gauge", "The tenant's open sessions");
  for (auto t : status.getTenants())
    live.sample("tenant=" + label(t.getName().cStr()), t.getSessions());
  Family gpu(out, "gpupool_tenant_gpu_seconds_total", "counter", "Kernel execution time");
  for (auto t : status.getTenants())
    gpu.sample("tenant=" + label(t.getName().cStr()), t.getGpuSeconds());
  Family gib(out, "gpupool_tenant_memory_gib_seconds_total", "counter",
             "Device memory held over time");
  for (auto t : status.getTenants())
    gib.sample("tenant=" + label(t.getName().cStr()), t.getGibSeconds());
  Family queue(out, "gpupool_tenant_queue_seconds_total", "counter",
               "Time kernels waited for the device");
  for (auto t : status.getTenants())
    queue.sample("tenant=" + label(t.getName().cStr()), t.getQueueSeconds());
  Family in(out, "gpupool_tenant_received_bytes_total", "counter",
            "Bytes from the tenant's clients");
  for (auto t : status.getTenants())
    in.sample("tenant=" + label(t.getName().cStr()), t.getBytesIn());
  Family sent(out, "gpupool_tenant_sent_bytes_total", "counter", "Bytes to the tenant's clients");
  for (auto t : status.getTenants())
    sent.sample("tenant=" + label(t.getName().cStr()), t.getBytesOut());
  Family calls(out, "gpupool_tenant_calls_total", "counter", "Requests served");
  for (auto t : status.getTenants())
    calls.sample("tenant=" + label(t.getName().cStr()), t.getCalls());
  Family launches(out, "gpupool_tenant_launches_total", "counter", "Kernels run");
  for (auto t : status.getTenants())
    launches.sample("tenant=" + label(t.getName().cStr()), t.getLaunches());
  return out.str();
}

std::string renderMetrics(PoolServer& server) {
  capnp::MallocMessageBuilder message;
  auto status = message.initRoot<wire::Response::StatusReply>();
  server.fillStatus(status);
  std::ostringstream out;
  out << renderMetrics(status.asReader());
  // Connections before trust (docs/hardening.md, "Strangers").
  StrangerGate::Counters strangers = server.strangerCounters();
  Family(out, "gpupool_unauthenticated_connections", "gauge",
         "Connections that have not completed their handshake")
      .sample("", strangers.current);
  Family refused(out, "gpupool_connections_refused_total", "counter",
                 "Connections closed at accept by a limit on unauthenticated connections");
  refused.sample("reason=\"unauthenticated\"", strangers.refusedTotal);
  refused.sample("reason=\"unauthenticated_per_source\"", strangers.refusedPerSource);
  Family(out, "gpupool_handshake_deadline_closed_total", "counter",
         "Connections closed for not completing their handshake in time")
      .sample("", strangers.closedByDeadline);
  // A fatal device fault loses the driver's state of the whole process, so every device at once
  // (docs/architecture.md, "Fatal device faults").
  Family faulted(out, "gpupool_device_faulted", "gauge",
                 "1 once a fatal device fault lost the device's CUDA state in this gpupoold");
  for (size_t d = 0; d < server.deviceCount(); ++d)
    faulted.sample("device=\"" + std::to_string(d) + "\"", server.deviceFaulted() ? 1 : 0);
  // Failures are counted on the tenant's account, not metered, so they are not in the status reply.
  if (TenantPool* tenants = server.tenantPool()) {
    Family failed(out, "gpupool_tenant_failed_calls_total", "counter",
                  "Requests answered with an error (CUDA_ERROR_NOT_READY excluded)");
    for (const auto& account : tenants->tenants().accounts())
      failed.sample("tenant=" + label(account->name()), account->failedCalls());
  }
  return out.str();
}

struct MetricsHttpServer::State {
  asio::io_context io;
  tcp::acceptor acceptor{io};
  std::function<std::string()> render;
  std::string url;
  std::atomic<bool> stopping{false};
};

MetricsHttpServer::MetricsHttpServer(const std::string& hostPort,
                                     std::function<std::string()> render)
    : state_(std::make_unique<State>()) {
  state_->render = std::move(render);
  auto colon = hostPort.rfind(':');
  if (colon == std::string::npos) {
    throw std::runtime_error("--metrics-listen '" + hostPort + "': expected HOST:PORT");
  }
  std::string host = hostPort.substr(0, colon);
  if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  try {
    tcp::resolver resolver(state_->io);
    auto results = resolver.resolve(host, hostPort.substr(colon + 1));
    tcp::endpoint endpoint = *results.begin();
    state_->acceptor.open(endpoint.protocol());
    state_->acceptor.set_option(tcp::acceptor::reuse_address(true));
    state_->acceptor.bind(endpoint);
    state_->acceptor.listen();
    auto bound = state_->acceptor.local_endpoint();
    state_->url =
        "http://" + hostPort.substr(0, colon) + ":" + std::to_string(bound.port()) + "/metrics";
  } catch (const boost::system::system_error& e) {
    throw std::runtime_error("--metrics-listen " + hostPort + ": " + e.what());
  }
  thread_ = std::thread([s = state_.get()] {
    for (;;) {
      tcp::socket socket(s->io);
      boost::system::error_code ec;
      s->acceptor.accept(socket, ec);
      if (s->stopping) return;
      if (ec) continue;
      // One request per connection; a scrape is tiny, so a bounded read is enough.
      asio::streambuf request(16 * 1024);
      asio::read_until(socket, request, "\r\n\r\n", ec);
      if (ec) continue;
      std::istream lines(&request);
      std::string method, path;
      lines >> method >> path;
      std::string body, status = "200 OK", type = "text/plain; version=0.0.4; charset=utf-8";
      if (method != "GET") {
        status = "405 Method Not Allowed";
        body = "only GET\n";
      } else if (path != "/metrics") {
        status = "404 Not Found";
        body = "see /metrics\n";
      } else {
        body = s->render();
      }
      std::string response = "HTTP/1.1 " + status + "\r\nContent-Type: " + type +
                             "\r\nContent-Length: " + std::to_string(body.size()) +
                             "\r\nConnection: close\r\n\r\n" + body;
      asio::write(socket, asio::buffer(response), ec);
      socket.shutdown(tcp::socket::shutdown_both, ec);
    }
  });
}

MetricsHttpServer::~MetricsHttpServer() {
  state_->stopping = true;
  // Closing from another thread does not reliably wake a blocking accept on Linux; shutdown() of
  // the listening socket does.
  ::shutdown(state_->acceptor.native_handle(), SHUT_RDWR);
  if (thread_.joinable()) thread_.join();
}

std::string MetricsHttpServer::url() const { return state_->url; }

}  // namespace gpupool::server
