// The C ABI's server functions (capi/omni_edge.h): HttpServer behind an opaque handle. Built
// into every library that links the server; without Boost.Beast, start says "unsupported".
#include <memory>
#include <string>

#include "capi/capi_internal.h"
#ifdef OMNI_EDGE_WITH_SERVER
#include "server/http_server.h"
#endif

struct OeServer {
#ifdef OMNI_EDGE_WITH_SERVER
  std::unique_ptr<omni_edge::server::HttpServer> server;
#endif
};

void oe_server_config_default(OeServerConfig* config) {
  if (config == nullptr) return;
  *config = OeServerConfig{};
#ifdef OMNI_EDGE_WITH_SERVER
  const omni_edge::server::ServeOptions defaults;
  config->port = defaults.port;
  config->max_sessions = defaults.max_sessions;
  config->max_connections = defaults.max_connections;
  config->max_body_bytes = int64_t(defaults.max_body_bytes);
#endif
}

OeError* oe_server_start(const OeServerConfig* config, OeServer** out_server) {
  return omni_edge::capi::Guard([&]() -> omni_edge::Status {
    if (config == nullptr || out_server == nullptr || config->plan_path == nullptr) {
      return omni_edge::Status::Error("invalid_argument", "config, config->plan_path and out_server are required");
    }
    *out_server = nullptr;
#ifdef OMNI_EDGE_WITH_SERVER
    if (config->port < 0 || config->port > 65535 || config->max_sessions < 1 || config->max_connections < 1 ||
        config->threads < 0 || config->max_body_bytes < 1) {
      return omni_edge::Status::Error("invalid_argument", "port 0-65535, max_sessions, max_connections and "
                                                          "max_body_bytes >= 1, threads >= 0");
    }
    omni_edge::server::ServeOptions o;
    o.plan = config->plan_path;
    if (config->host != nullptr) o.host = config->host;
    o.port = config->port;
    if (config->api_key != nullptr) o.api_key = config->api_key;
    if (config->model != nullptr) o.model = config->model;
    o.max_sessions = config->max_sessions;
    o.max_connections = config->max_connections;
    o.threads = config->threads;
    o.allow_unqualified = config->allow_unqualified != 0;
    o.max_body_bytes = size_t(config->max_body_bytes);
    if (config->memory_pools != nullptr) o.memory_pools = config->memory_pools;
    auto started = omni_edge::server::HttpServer::Start(o);
    if (!started.ok()) return started.status();
    auto handle = std::make_unique<OeServer>();
    handle->server = std::move(started).value();
    *out_server = handle.release();
    return omni_edge::Status::Ok();
#else
    return omni_edge::Status::Error("unsupported", "this library was built without the server (Boost.Beast's headers "
                                                   "were not found when it was built)");
#endif
  });
}

const char* oe_server_url(const OeServer* server) {
#ifdef OMNI_EDGE_WITH_SERVER
  if (server != nullptr && server->server) return server->server->url().c_str();
#endif
  (void)server;
  return "";
}

void oe_server_stop(OeServer* server) {
  std::unique_ptr<OeServer> owned(server);
#ifdef OMNI_EDGE_WITH_SERVER
  if (owned && owned->server) owned->server->Stop();
#endif
}
