#include "client/client.hpp"

#include <httplib.h>

#include <chrono>
#include <thread>

#include "support/error.hpp"

namespace tiletune::client {

using nlohmann::json;

namespace {

Job to_job(const json& j) {
  Job out;
  out.id = j.at("id").get<std::string>();
  out.state = j.at("state").get<std::string>();
  out.done = j.value("done", 0);
  out.total = j.value("total", 0);
  if (j.contains("best_ms") && j["best_ms"].is_number()) out.best_ms = j["best_ms"].get<double>();
  out.error = j.value("error", "");
  return out;
}

}  // namespace

struct Client::Impl {
  httplib::Client http;
  std::string token;
  std::mutex mu;  // httplib::Client is not safe for concurrent requests
  Impl(const std::string& url, std::string t) : http(url), token(std::move(t)) {}
};

Client::Client(const std::string& base_url, std::string token, double timeout_s)
    : impl_(std::make_unique<Impl>(base_url, std::move(token))) {
  if (!impl_->http.is_valid()) throw_error(ErrorKind::InvalidInput, "not a daemon URL: " + base_url);
  auto sec = static_cast<time_t>(timeout_s);
  auto usec = static_cast<time_t>((timeout_s - static_cast<double>(sec)) * 1e6);
  impl_->http.set_connection_timeout(sec, usec);
  impl_->http.set_read_timeout(sec, usec);
  impl_->http.set_keep_alive(true);
  impl_->http.set_tcp_nodelay(true);
  if (!impl_->token.empty()) impl_->http.set_bearer_token_auth(impl_->token.c_str());
}

Client::~Client() = default;

json Client::call(const std::string& method, const std::string& path, const json& body) {
  std::lock_guard lock(impl_->mu);
  httplib::Result res = method == "GET" ? impl_->http.Get(path.c_str())
                        : method == "DELETE"
                            ? impl_->http.Delete(path.c_str())
                            // a compiler's message in a result may not be UTF-8
                            : impl_->http.Post(path.c_str(), body.dump(-1, ' ', false, json::error_handler_t::replace),
                                               "application/json");
  if (!res) throw_error(ErrorKind::Io, "no answer from the daemon (" + httplib::to_string(res.error()) + ")");
  if (res->status == 204) return nullptr;  // nothing to say (a worker's lease when there is no work)
  json j = json::parse(res->body, nullptr, false);
  if (res->status >= 200 && res->status < 300) {
    if (j.is_discarded()) throw_error(ErrorKind::Internal, "the daemon answered " + path + " with malformed JSON");
    return j;
  }
  bool ours = !j.is_discarded() && j.is_object() && j.contains("error") && j["error"].is_object();
  std::string code = ours ? j["error"].value("code", "") : "";
  std::string message = ours ? j["error"].value("message", "") : res->body;
  ErrorKind kind = res->status == 400   ? ErrorKind::InvalidInput
                   : res->status == 401 ? ErrorKind::Unauthorized
                   : res->status == 403 ? ErrorKind::Forbidden
                   : res->status == 404 ? ErrorKind::NotFound
                   : res->status == 409 ? ErrorKind::Conflict
                   : res->status == 413 ? ErrorKind::TooLarge
                   : res->status == 503 ? ErrorKind::Unavailable
                                        : ErrorKind::Internal;
  throw_error(kind, "daemon: " + std::to_string(res->status) + " " + code + ": " + message);
}

namespace {

json request_body(const OpRequest& r, bool tuning) {
  json body = {{"op", r.op}, {"sizes", r.sizes}};
  auto put = [&](const char* key, const std::string& v) {
    if (!v.empty()) body[key] = v;
  };
  put("op_name", r.op_name);
  put("backend", r.backend);
  put("target", r.target);
  if (tuning) {
    if (r.trials > 0) body["trials"] = r.trials;
    if (r.seconds > 0) body["seconds"] = r.seconds;
    put("strategy", r.strategy);
  }
  return body;
}

}  // namespace

std::optional<Kernel> Client::best(const OpRequest& request) {
  json j;
  try {
    j = call("POST", "/v1/best", request_body(request, false));
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::NotFound) return std::nullopt;
    throw;
  }
  Kernel k;
  k.workload_key = j.at("workload_key");
  k.target_key = j.at("target_key");
  k.exact_target = j.at("exact_target");
  k.config = j.at("config");
  k.latency_s = j.at("latency_s");
  k.gflops = j.at("gflops");
  k.source = j.at("source");
  k.source_language = j.value("source_language", "");
  k.abi = j.value("abi", json::object());
  k.entry_point = k.abi.value("entry_point", "");
  k.threads_entry_point = k.abi.value("threads_entry_point", "");
  k.workspace_bytes = k.abi.value("workspace_bytes", std::int64_t(0));
  k.threads = k.abi.value("threads", 0);
  return k;
}

std::optional<Kernel> Client::best(const std::string& op, const std::string& sizes, const std::string& backend) {
  OpRequest r;
  r.op = op;
  r.sizes = sizes;
  r.backend = backend;
  return best(r);
}

Job Client::tune(const OpRequest& request) {
  return to_job(call("POST", "/v1/tune", request_body(request, true)).at("job"));
}

Job Client::tune(const std::string& op, const std::string& sizes, int trials, const std::string& strategy,
                 const std::string& backend) {
  OpRequest r;
  r.op = op;
  r.sizes = sizes;
  r.trials = trials;
  r.strategy = strategy;
  r.backend = backend;
  return tune(r);
}

Job Client::job(const std::string& id) { return to_job(call("GET", "/v1/jobs/" + id)); }

Job Client::wait(const std::string& id, double timeout_s, double poll_s) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    Job j = job(id);
    if (j.finished() || std::chrono::steady_clock::now() >= end) return j;
    std::this_thread::sleep_for(std::chrono::duration<double>(poll_s));
  }
}

Job Client::cancel(const std::string& id) { return to_job(call("DELETE", "/v1/jobs/" + id)); }

}  // namespace tiletune::client
