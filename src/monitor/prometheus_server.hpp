// A Prometheus scrape endpoint (GET /metrics) on its own thread, served by cpp-httplib (Debian
// libcpp-httplib-dev). The handler only formats the sampler's latest samples: it never calls NVML.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

namespace httplib {
class Server;
}

namespace gearshift::monitor {

class PrometheusServer {
 public:
  // address: ":PORT" (all interfaces, like dcgm-exporter) or "HOST:PORT"; port 0 picks a free one.
  // Throws std::invalid_argument for a malformed address and std::runtime_error when it cannot listen.
  PrometheusServer(const std::string& address, std::function<std::string()> body);
  ~PrometheusServer();
  PrometheusServer(const PrometheusServer&) = delete;
  PrometheusServer& operator=(const PrometheusServer&) = delete;
  int port() const { return port_; }
  const std::string& host() const { return host_; }

 private:
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::string host_;
  int port_ = 0;
};

}  // namespace gearshift::monitor
