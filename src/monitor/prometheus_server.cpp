#include "monitor/prometheus_server.hpp"

#include <charconv>
#include <stdexcept>

#include <httplib.h>

namespace gearshift::monitor {

PrometheusServer::PrometheusServer(const std::string& address, std::function<std::string()> body)
    : server_(std::make_unique<httplib::Server>()) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos) throw std::invalid_argument("--prometheus wants :PORT or HOST:PORT, got '" + address + "'");
  host_ = colon == 0 ? "0.0.0.0" : address.substr(0, colon);
  std::string port_text = address.substr(colon + 1);
  int port = -1;
  auto [p, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || p != port_text.data() + port_text.size() || port < 0 || port > 65535) {
    throw std::invalid_argument("--prometheus: bad port '" + port_text + "'");
  }
  server_->Get("/metrics", [body](const httplib::Request&, httplib::Response& res) {
    res.set_content(body(), "text/plain; version=0.0.4; charset=utf-8");
  });
  port_ = port == 0 ? server_->bind_to_any_port(host_) : (server_->bind_to_port(host_, port) ? port : -1);
  if (port_ < 0) throw std::runtime_error("--prometheus: cannot listen on " + address);
  thread_ = std::thread([this] { server_->listen_after_bind(); });
}

PrometheusServer::~PrometheusServer() {
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace gearshift::monitor
