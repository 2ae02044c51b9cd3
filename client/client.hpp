// client/client.hpp: what a compiler links to ask a tiletune daemon for kernels.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "support/error.hpp"  // tiletune::Error, what every call throws

namespace tiletune::client {

//! The best kernel the daemon knows for an op at sizes on a target.
struct Kernel {
  std::string workload_key, target_key;
  bool exact_target = true;  //!< false: measured on the same device with another toolchain
  nlohmann::json config;
  double latency_s = 0, gflops = 0;
  std::string source, source_language;
  //! How to call it (entry_point, arguments in order, workspace_bytes, threads): README, "Kernel ABI".
  nlohmann::json abi;
  std::string entry_point;           //!< the symbol to call: ENTRY(tensors, workspace)
  std::string threads_entry_point;   //!< ENTRY_threads(tensors, workspace, threads); "" if none
  std::int64_t workspace_bytes = 0;  //!< the workspace buffer the caller passes must hold this many
  int threads = 0;                   //!< what entry_point runs with (the measured count)
};

//! An op at sizes, as POST /v1/best and /v1/tune take it (schemas/api.schema.json); empty and
//! zero fields are left to the daemon.
struct OpRequest {
  std::string op;        //!< a library op name or op text
  std::string sizes;     //!< "M=512,N=512,K=512"
  std::string op_name;   //!< the op of a text that holds several
  std::string backend;   //!< "cpu", "opencl", "cuda", a plug-in's (default: cpu)
  std::string target;    //!< a remote worker's target key (GET /v1/targets) instead of a backend
  int trials = 0;        //!< tune: measurements wanted, counting those already stored
  double seconds = 0;    //!< tune: time budget in seconds
  std::string strategy;  //!< tune: random | evolutionary | xgb | nn
};

struct Job {
  std::string id, state;  //!< queued | running | done | failed | cancelled
  std::int64_t done = 0, total = 0;
  std::optional<double> best_ms;
  std::string error;
  bool finished() const { return state == "done" || state == "failed" || state == "cancelled"; }
};

//! A connection to a daemon ("http://host:port"). Errors are tiletune::Error with the kind the
//! daemon reported (InvalidInput for 400, NotFound, Unauthorized, ...); Io if unreachable.
class Client {
 public:
  explicit Client(const std::string& base_url, std::string token = "", double timeout_s = 30);
  ~Client();

  //! The best kernel of an op at sizes; nullopt if nothing is measured yet.
  std::optional<Kernel> best(const OpRequest& request);
  std::optional<Kernel> best(const std::string& op, const std::string& sizes, const std::string& backend = "cpu");
  //! Starts (or joins an identical) tuning job.
  Job tune(const OpRequest& request);
  Job tune(const std::string& op, const std::string& sizes, int trials, const std::string& strategy = "",
           const std::string& backend = "cpu");
  Job job(const std::string& id);
  //! Polls until the job finishes or timeout_s passes (then returns it as it is).
  Job wait(const std::string& id, double timeout_s, double poll_s = 0.2);
  Job cancel(const std::string& id);
  //! Any route: the JSON body of a 2xx answer (null for 204), else the error as tiletune::Error.
  nlohmann::json call(const std::string& method, const std::string& path, const nlohmann::json& body = nullptr);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tiletune::client
