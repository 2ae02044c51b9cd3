// libFuzzer harness: REST request bodies through the service, as the routes call it (a daemon
// whose jobs do not start, on a database in a temporary folder). The first byte picks the
// route; the rest is its body. Every outcome is an answer or a tiletune::Error whose kind maps
// to a 4xx; a 5xx kind, another exception or a crash is a bug.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "server/http_status.hpp"
#include "server/service.hpp"
#include "support/error.hpp"

namespace {

tiletune::server::Service& service() {
  static std::unique_ptr<tiletune::server::Service> s = [] {
    std::string dir = std::filesystem::temp_directory_path() / ("tiletune-fuzz-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir);
    tiletune::server::ServiceOptions o;
    o.db_path = dir + "/fuzz.db";
    return std::make_unique<tiletune::server::Service>(o);  // not started: jobs stay queued
  }();
  return *s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const int route = data[0] % 6;
  std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  auto& s = service();
  try {
    if (route == 5) {
      // POST /v1/models: the bytes are the model; the query is fixed.
      s.submit_model(body, {{"inputs", "x=1,3,8,8"}, {"trials", 2}});
      return 0;
    }
    nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
    if (j.is_discarded()) return 0;  // the route's parse_body: a 400
    switch (route) {
      case 0:
        s.submit(j);
        break;
      case 1:
        s.best_for(j);
        break;
      case 2:
        s.import_records(j);
        break;
      case 3:
        s.register_worker(j);
        break;
      case 4:
        s.complete_lease("fuzz-lease", j);
        break;
    }
  } catch (const tiletune::Error& e) {
    if (tiletune::server::http_status_for(e.kind()) >= 500) __builtin_trap();
  }
  return 0;
}
