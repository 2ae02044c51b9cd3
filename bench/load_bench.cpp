// tiletune-load-bench: GET /v1/best throughput and latency against a running daemon, with N
// concurrent keep-alive clients.
//
//   build/tiletune-load-bench --url http://127.0.0.1:8080 --token T --op matmul --sizes M=64,N=64,K=64
//
// It asks once with POST /v1/best for the workload and target keys, then every client repeats
// GET /v1/best?workload=..&target=.. for the given seconds. bench/load.sh starts a daemon with
// a tuning job running and runs this against it.
#include <httplib.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  CLI::App app{"tiletune-load-bench: GET /v1/best throughput and p50/p99 latency"};
  std::string url = "http://127.0.0.1:8080", token, op = "matmul", sizes = "M=64,N=64,K=64";
  int clients = 8;
  double seconds = 10;
  app.add_option("--url", url, "daemon")->capture_default_str();
  app.add_option("--token", token, "bearer token");
  app.add_option("--op", op, "op of the lookup")->capture_default_str();
  app.add_option("--sizes", sizes, "sizes of the lookup")->capture_default_str();
  app.add_option("--clients", clients, "concurrent connections")->capture_default_str();
  app.add_option("--seconds", seconds, "duration")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  auto make_client = [&] {
    auto c = std::make_unique<httplib::Client>(url);
    c->set_keep_alive(true);
    c->set_tcp_nodelay(true);
    c->set_read_timeout(10, 0);
    if (!token.empty()) c->set_bearer_token_auth(token.c_str());
    return c;
  };
  auto first = make_client()->Post("/v1/best", nlohmann::json{{"op", op}, {"sizes", sizes}}.dump(), "application/json");
  if (!first || first->status != 200) {
    std::cerr << "tiletune-load-bench: POST /v1/best failed: "
              << (first ? first->body : httplib::to_string(first.error())) << "\n";
    return 1;
  }
  auto answer = nlohmann::json::parse(first->body);
  std::string path = "/v1/best?workload=" + answer["workload_key"].get<std::string>() +
                     "&target=" + answer["target_key"].get<std::string>();

  std::atomic<bool> go{false}, stop{false};
  std::vector<std::vector<double>> latencies(clients);
  std::vector<int> failures(clients, 0);
  std::vector<std::thread> threads;
  for (int i = 0; i < clients; ++i)
    threads.emplace_back([&, i] {
      auto c = make_client();
      while (!go) std::this_thread::yield();
      while (!stop) {
        auto t0 = std::chrono::steady_clock::now();
        auto r = c->Get(path.c_str());
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (!r || r->status != 200)
          ++failures[i];
        else
          latencies[i].push_back(s);
      }
    });
  auto t0 = std::chrono::steady_clock::now();
  go = true;
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& t : threads) t.join();
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::vector<double> all;
  int failed = 0;
  for (int i = 0; i < clients; ++i) {
    all.insert(all.end(), latencies[i].begin(), latencies[i].end());
    failed += failures[i];
  }
  std::sort(all.begin(), all.end());
  auto pct = [&](double p) {
    return all.empty() ? 0.0 : all[std::min(all.size() - 1, static_cast<size_t>(p * all.size()))];
  };
  std::printf("GET /v1/best: %d clients, %.1f s: %zu ok, %d failed\n", clients, elapsed, all.size(), failed);
  std::printf("throughput %.0f requests/s   p50 %.3f ms   p99 %.3f ms   max %.3f ms\n", all.size() / elapsed,
              pct(0.50) * 1e3, pct(0.99) * 1e3, all.empty() ? 0.0 : all.back() * 1e3);
  return failed == 0 ? 0 : 1;
}
