// tiletune-load-bench: GET /v1/best throughput and latency against a running daemon, with N
// concurrent keep-alive clients.
//
//   build/tiletune-load-bench --url http://127.0.0.1:8080 --token T --op matmul --sizes M=64,N=64,K=64
//
// It asks once with POST /v1/best for the workload and target keys, then every client repeats
// GET /v1/best?workload=..&target=.. for the given seconds. Meanwhile `--idle N` connections
// that got one keep-alive answer stay open and silent, `--half-open M` connections hold half a
// request line, and one more client times a new request on a new connection each time (what a
// compiler starting up sees). bench/load.sh starts a daemon with a tuning job running and runs
// this against it.
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

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
  int idle = 0, half_open = 0;
  app.add_option("--idle", idle, "keep-alive connections held open and silent meanwhile")->capture_default_str();
  app.add_option("--half-open", half_open, "connections holding half a request meanwhile")->capture_default_str();
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

  // The held connections (raw sockets: a client library would finish its requests).
  rlimit lim{};
  getrlimit(RLIMIT_NOFILE, &lim);
  lim.rlim_cur = lim.rlim_max;
  setrlimit(RLIMIT_NOFILE, &lim);
  // "http://HOST:PORT"
  std::string host = url.substr(url.find("://") + 3);
  int port = std::stoi(host.substr(host.rfind(':') + 1));
  host = host.substr(0, host.rfind(':'));
  auto connect_raw = [&] {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    inet_pton(AF_INET, host.c_str(), &addr.sin_addr);
    if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      std::perror("tiletune-load-bench: connect");
      std::exit(1);
    }
    return fd;
  };
  std::vector<int> held;
  for (int i = 0; i < idle + half_open; ++i) {
    int fd = connect_raw();
    std::string request = i < idle ? "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" : "GET /healthz HTTP/1.1\r\nHo";
    if (send(fd, request.data(), request.size(), 0) != static_cast<ssize_t>(request.size())) return 1;
    char buf[512];
    if (i < idle && recv(fd, buf, sizeof buf, 0) <= 0) {
      std::cerr << "tiletune-load-bench: idle connection " << i << " got no answer\n";
      return 1;
    }
    held.push_back(fd);
  }

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
  std::vector<double> fresh;  // a new connection per request
  int fresh_failed = 0;
  threads.emplace_back([&] {
    while (!go) std::this_thread::yield();
    while (!stop) {
      auto t0 = std::chrono::steady_clock::now();
      auto c = make_client();
      c->set_keep_alive(false);
      auto r = c->Get("/healthz");
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (!r || r->status != 200)
        ++fresh_failed;
      else
        fresh.push_back(s);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
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
  for (int fd : held) close(fd);
  auto pct = [](std::vector<double>& v, double p) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))] * 1e3;
  };
  std::printf("held meanwhile: %d idle keep-alive, %d half-open connections\n", idle, half_open);
  std::printf("GET /v1/best: %d clients, %.1f s: %zu ok, %d failed\n", clients, elapsed, all.size(), failed);
  std::printf("throughput %.0f requests/s   p50 %.3f ms   p99 %.3f ms   max %.3f ms\n", all.size() / elapsed,
              pct(all, 0.50), pct(all, 0.99), pct(all, 1.0));
  std::printf("GET /healthz on a new connection: %zu ok, %d failed   p50 %.3f ms   p99 %.3f ms   max %.3f ms\n",
              fresh.size(), fresh_failed, pct(fresh, 0.50), pct(fresh, 0.99), pct(fresh, 1.0));
  return failed == 0 && fresh_failed == 0 ? 0 : 1;
}
