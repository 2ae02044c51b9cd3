// db/retry.hpp — riding out a database server that is down or restarting.
#pragma once
#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "support/error.hpp"

namespace tiletune::db {

//! Runs `f`; while it fails with Error(Unavailable) (a PostgreSQL server stopped or restarting),
//! waits (0.25 s, doubling up to 5 s) and runs it again, for up to `patience_s` seconds in all;
//! then the error escapes. `on_wait` hears the first failure of each outage. `f` must be safe
//! to run again: every Store call is.
template <class F>
auto retry_unavailable(double patience_s, F&& f, const std::function<void(const std::string&)>& on_wait = {})
    -> decltype(f()) {
  const auto start = std::chrono::steady_clock::now();
  double wait_s = 0.25;
  for (bool told = false;; told = true) {
    try {
      return f();
    } catch (const Error& e) {
      double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (e.kind() != ErrorKind::Unavailable || waited + wait_s > patience_s) throw;
      if (!told && on_wait) on_wait(e.what());
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(wait_s));
    wait_s = std::min(wait_s * 2, 5.0);
  }
}

}  // namespace tiletune::db
