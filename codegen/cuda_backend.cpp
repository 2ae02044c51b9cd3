// The CUDA backend: CUDA C from the work-group emitter, built by nvcc into a cubin for the
// device's compute capability, run and timed with events through the CUDA driver API. The
// driver is opened with dlopen, so tiletune runs (and builds for a given --device sm_XX) on
// machines without one; running there is a clear "no CUDA device" error.
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>

#include "codegen/backend.hpp"
#include "codegen/gpu_kernel.hpp"
#include "support/error.hpp"
#include "support/files.hpp"
#include "support/hash.hpp"
#include "support/subprocess.hpp"

namespace tiletune::codegen {

namespace {

constexpr const char* kCodegenVersion = "cuda-3";

// The few driver API entry points used, declared here so that building needs no CUDA headers.
using CUresult = int;
using CUdevice = int;
using CUcontext = void*;
using CUmodule = void*;
using CUfunction = void*;
using CUevent = void*;
using CUdeviceptr = unsigned long long;
constexpr int kAttrMaxThreadsPerBlock = 1, kAttrSharedPerBlock = 8, kAttrSmCount = 16, kAttrCcMajor = 75,
              kAttrCcMinor = 76;

struct Driver {
  void* handle = nullptr;
  CUresult (*cuInit)(unsigned) = nullptr;
  CUresult (*cuDeviceGetCount)(int*) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice*, int) = nullptr;
  CUresult (*cuDeviceGetName)(char*, int, CUdevice) = nullptr;
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice) = nullptr;
  CUresult (*cuCtxSetCurrent)(CUcontext) = nullptr;
  CUresult (*cuModuleLoadData)(CUmodule*, const void*) = nullptr;
  CUresult (*cuModuleUnload)(CUmodule) = nullptr;
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t) = nullptr;
  CUresult (*cuMemFree)(CUdeviceptr) = nullptr;
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void*, size_t) = nullptr;
  CUresult (*cuMemcpyDtoH)(void*, CUdeviceptr, size_t) = nullptr;
  CUresult (*cuMemsetD32)(CUdeviceptr, unsigned, size_t) = nullptr;
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*,
                             void**, void**) = nullptr;
  CUresult (*cuEventCreate)(CUevent*, unsigned) = nullptr;
  CUresult (*cuEventRecord)(CUevent, void*) = nullptr;
  CUresult (*cuEventSynchronize)(CUevent) = nullptr;
  CUresult (*cuEventElapsedTime)(float*, CUevent, CUevent) = nullptr;
  CUresult (*cuEventDestroy)(CUevent) = nullptr;
  CUresult (*cuGetErrorString)(CUresult, const char**) = nullptr;

  std::string error(CUresult r) const {
    const char* s = nullptr;
    if (cuGetErrorString) cuGetErrorString(r, &s);
    return s ? std::string(s) + " (" + std::to_string(r) + ")" : "CUDA error " + std::to_string(r);
  }
  void check(CUresult r, const std::string& what) const {
    if (r != 0) throw_error(ErrorKind::Internal, "CUDA: " + what + ": " + error(r));
  }
};

//! The CUDA driver with at least one device, loaded once per process.
const Driver& driver() {
  static Driver d;
  static std::string failure;
  static std::once_flag once;
  std::call_once(once, [] {
    d.handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!d.handle) {
      failure = std::string("cannot load the CUDA driver libcuda.so.1 (") + dlerror() + ")";
      return;
    }
    auto bind = [](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(d.handle, name));
      if (!fn && failure.empty()) failure = std::string("the CUDA driver lacks ") + name;
    };
    bind(d.cuInit, "cuInit");
    bind(d.cuDeviceGetCount, "cuDeviceGetCount");
    bind(d.cuDeviceGet, "cuDeviceGet");
    bind(d.cuDeviceGetName, "cuDeviceGetName");
    bind(d.cuDeviceGetAttribute, "cuDeviceGetAttribute");
    bind(d.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    bind(d.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
    bind(d.cuCtxSetCurrent, "cuCtxSetCurrent");
    bind(d.cuModuleLoadData, "cuModuleLoadData");
    bind(d.cuModuleUnload, "cuModuleUnload");
    bind(d.cuModuleGetFunction, "cuModuleGetFunction");
    bind(d.cuMemAlloc, "cuMemAlloc_v2");
    bind(d.cuMemFree, "cuMemFree_v2");
    bind(d.cuMemcpyHtoD, "cuMemcpyHtoD_v2");
    bind(d.cuMemcpyDtoH, "cuMemcpyDtoH_v2");
    bind(d.cuMemsetD32, "cuMemsetD32_v2");
    bind(d.cuLaunchKernel, "cuLaunchKernel");
    bind(d.cuEventCreate, "cuEventCreate");
    bind(d.cuEventRecord, "cuEventRecord");
    bind(d.cuEventSynchronize, "cuEventSynchronize");
    bind(d.cuEventElapsedTime, "cuEventElapsedTime");
    bind(d.cuEventDestroy, "cuEventDestroy_v2");
    bind(d.cuGetErrorString, "cuGetErrorString");
    if (!failure.empty()) return;
    int count = 0;
    CUresult r = d.cuInit(0);
    if (r == 0) r = d.cuDeviceGetCount(&count);
    if (r != 0)
      failure = "the CUDA driver finds no device: " + d.error(r);
    else if (count == 0)
      failure = "the CUDA driver reports 0 devices";
  });
  if (!failure.empty()) throw_error(ErrorKind::Unavailable, "no CUDA device: " + failure);
  return d;
}

struct DeviceInfo {
  CUdevice device = 0;
  std::string name;
  int major = 0, minor = 0, sms = 1, max_threads = 1024, shared = 48 * 1024;
};

DeviceInfo device_info(const std::string& want) {
  if (!want.empty() && want.find_first_not_of("0123456789") != std::string::npos)
    throw_error(ErrorKind::InvalidInput, "CUDA --device is a device index or an arch like sm_80, not '" + want + "'");
  const Driver& d = driver();
  int index = want.empty() ? 0 : std::atoi(want.c_str());
  int count = 0;
  d.cuDeviceGetCount(&count);
  if (index >= count)
    throw_error(ErrorKind::Unavailable,
                "no CUDA device " + std::to_string(index) + " (the driver reports " + std::to_string(count) + ")");
  DeviceInfo info;
  d.check(d.cuDeviceGet(&info.device, index), "device " + std::to_string(index));
  char name[256] = {};
  d.cuDeviceGetName(name, sizeof name, info.device);
  info.name = name;
  d.cuDeviceGetAttribute(&info.major, kAttrCcMajor, info.device);
  d.cuDeviceGetAttribute(&info.minor, kAttrCcMinor, info.device);
  d.cuDeviceGetAttribute(&info.sms, kAttrSmCount, info.device);
  d.cuDeviceGetAttribute(&info.max_threads, kAttrMaxThreadsPerBlock, info.device);
  d.cuDeviceGetAttribute(&info.shared, kAttrSharedPerBlock, info.device);
  return info;
}

class CudaKernel : public Kernel {
 public:
  CudaKernel(const std::string& device, const GpuArtifact& artifact, const KernelShape& shape)
      : d_(driver()), info_(device_info(device)), launches_(artifact.launches), sizes_(shape.tensor_floats) {
    try {
      open(artifact, shape);
    } catch (...) {
      release();  // the destructor does not run for a constructor that throws
      throw;
    }
  }
  ~CudaKernel() override { release(); }

  double run(float* const* tensors, float*, unsigned flags) override {
    d_.check(d_.cuCtxSetCurrent(context_), "making the context current");
    if (flags & kUpload) {
      for (size_t t = 0; t < sizes_.size(); ++t)
        if (sizes_[t] > 0) d_.check(d_.cuMemcpyHtoD(buffers_[t], tensors[t], sizes_[t] * 4), "copying a tensor in");
      // The workspace starts NaN, as on the CPU: a kernel that reads a temporary before
      // writing it fails the result check.
      d_.check(d_.cuMemsetD32(buffers_.back(), 0x7fc00000u, workspace_floats_), "filling the workspace");
    }
    std::vector<void*> args;
    for (auto& b : buffers_) args.push_back(&b);
    d_.check(d_.cuEventRecord(start_, nullptr), "recording an event");
    for (size_t i = 0; i < launches_.size(); ++i)
      d_.check(d_.cuLaunchKernel(functions_[i], static_cast<unsigned>(launches_[i].groups), 1, 1,
                                 static_cast<unsigned>(launches_[i].items), 1, 1, 0, nullptr, args.data(), nullptr),
               "launching " + launches_[i].kernel);
    d_.check(d_.cuEventRecord(end_, nullptr), "recording an event");
    d_.check(d_.cuEventSynchronize(end_), "running the kernels");
    float ms = 0;
    d_.check(d_.cuEventElapsedTime(&ms, start_, end_), "reading the events");
    if (flags & kDownload)
      for (size_t t = 0; t < sizes_.size(); ++t)
        if (sizes_[t] > 0) d_.check(d_.cuMemcpyDtoH(tensors[t], buffers_[t], sizes_[t] * 4), "copying a tensor out");
    return std::max(1e-9, ms * 1e-3);
  }

 private:
  const Driver& d_;
  DeviceInfo info_;
  std::vector<Launch> launches_;
  std::vector<std::int64_t> sizes_;
  size_t workspace_floats_ = 1;

  void open(const GpuArtifact& artifact, const KernelShape& shape) {
    d_.check(d_.cuDevicePrimaryCtxRetain(&context_, info_.device), "retaining the primary context");
    d_.check(d_.cuCtxSetCurrent(context_), "making the context current");
    d_.check(d_.cuModuleLoadData(&module_, artifact.binary.data()), "loading the cubin (built for another GPU?)");
    for (auto& l : launches_) {
      CUfunction f = nullptr;
      d_.check(d_.cuModuleGetFunction(&f, module_, l.kernel.c_str()), "finding " + l.kernel);
      functions_.push_back(f);
    }
    workspace_floats_ = static_cast<size_t>(std::max<std::int64_t>(shape.workspace_floats, 1));
    std::vector<std::int64_t> floats = sizes_;
    floats.push_back(shape.workspace_floats);  // the workspace is never copied
    for (auto f : floats) {
      CUdeviceptr p = 0;
      d_.check(d_.cuMemAlloc(&p, static_cast<size_t>(std::max<std::int64_t>(f, 1)) * 4),
               "allocating " + std::to_string(f) + " floats");
      buffers_.push_back(p);
    }
    d_.check(d_.cuEventCreate(&start_, 0), "creating an event");
    d_.check(d_.cuEventCreate(&end_, 0), "creating an event");
  }

  void release() {
    if (!context_) return;
    d_.cuCtxSetCurrent(context_);
    for (auto b : buffers_) d_.cuMemFree(b);
    if (start_) d_.cuEventDestroy(start_);
    if (end_) d_.cuEventDestroy(end_);
    if (module_) d_.cuModuleUnload(module_);
    d_.cuDevicePrimaryCtxRelease(info_.device);
    context_ = nullptr;
  }

  CUcontext context_ = nullptr;
  CUmodule module_ = nullptr;
  std::vector<CUfunction> functions_;
  std::vector<CUdeviceptr> buffers_;
  CUevent start_ = nullptr, end_ = nullptr;
};

class CudaBackend : public WorkGroupBackend {
 public:
  explicit CudaBackend(const BackendOptions& options) : WorkGroupBackend(options, "cuda", ".cu", GpuDialect::Cuda) {
    nvcc_ = !options.compiler.empty()                             ? options.compiler
            : std::filesystem::exists("/usr/local/cuda/bin/nvcc") ? "/usr/local/cuda/bin/nvcc"
                                                                  : "nvcc";
  }

  std::string build(const std::string& source_path, const std::string& artifact_path) const override {
    GpuArtifact artifact;
    artifact.launches = read_launches(read_text_file(source_path));
    std::string cubin = artifact_path + ".cubin";
    ProcessResult r = run_process({nvcc_, "-cubin", "-arch=" + arch(), "-O3", "-o", cubin, source_path}, 300);
    if (!r.ok()) return nvcc_ + " " + r.describe() + "\n" + r.output;
    std::error_code ignored;
    if (std::filesystem::exists(cubin, ignored)) artifact.binary = read_text_file(cubin);
    std::filesystem::remove(cubin, ignored);
    if (artifact.binary.empty()) return nvcc_ + " wrote no cubin";
    write_gpu_artifact(artifact_path, artifact);
    return "";
  }

  std::unique_ptr<Kernel> load(const std::string& artifact_path, const KernelShape& shape) const override {
    std::string device = options_.device.rfind("sm_", 0) == 0 ? "" : options_.device;
    return std::make_unique<CudaKernel>(device, read_gpu_artifact(artifact_path), shape);
  }

 private:
  std::string nvcc_;

  std::string arch() const {
    const auto& fp = target().fingerprint_json;
    return nlohmann::json::parse(fp).at("arch").get<std::string>();
  }

  //! The device's compute capability and limits; with --device sm_XX, a device of that
  //! capability that need not be present (build only).
  void describe(TargetInfo& target) const override {
    nlohmann::json device;
    std::string arch;
    ir::TargetTraits& t = target.traits;
    t.vector_lanes = 4;  // float4 loads and stores (split vectors: the math stays scalar)
    t.max_group_size = 1024;
    t.local_bytes = 48 * 1024;
    if (options_.device.rfind("sm_", 0) == 0) {
      arch = options_.device;
      device = {{"arch", arch}, {"present", false}};
    } else {
      DeviceInfo info = device_info(options_.device);
      arch = "sm_" + std::to_string(info.major) + std::to_string(info.minor);
      device = {{"name", info.name}, {"arch", arch}, {"sms", info.sms}};
      t.threads = info.sms;
      t.max_group_size = std::min(info.max_threads, 1024);
      t.local_bytes = info.shared;
    }
    ProcessResult version = probe_process({nvcc_, "--version"}, 60);  // not ok() where nvcc cannot run
    std::string nvcc_id = version.ok() ? version.output.substr(version.output.rfind("Build ") == std::string::npos
                                                                   ? 0
                                                                   : version.output.rfind("Build "))
                                       : nvcc_ + " (version unknown)";
    while (!nvcc_id.empty() && (nvcc_id.back() == '\n' || nvcc_id.back() == '\r')) nvcc_id.pop_back();
    nlohmann::json fp = {
        {"backend", "cuda"}, {"device", device}, {"arch", arch}, {"nvcc", nvcc_id}, {"codegen", kCodegenVersion}};
    target.fingerprint_json = fp.dump();
    target.key = hash_hex(target.fingerprint_json);
    target.family = device_family("cuda", device);
  }
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(const BackendOptions& options) {
  return std::make_unique<CudaBackend>(options);
}

}  // namespace tiletune::codegen
