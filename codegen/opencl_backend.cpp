// The OpenCL backend: OpenCL C from the work-group emitter, built and run through the OpenCL
// runtime (ocl-icd; on this machine PoCL runs it on the CPU), timed with profiling events.
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "codegen/backend.hpp"
#include "codegen/gpu_kernel.hpp"
#include "support/error.hpp"
#include "support/files.hpp"
#include "support/hash.hpp"

namespace tiletune::codegen {

namespace {

//! Bumped whenever the emitted code changes meaning or speed.
constexpr const char* kCodegenVersion = "opencl-3";
//! No fast-relaxed math: softmax's max starts at -INFINITY and results are checked.
constexpr const char* kBuildOptions = "-cl-mad-enable -cl-no-signed-zeros";

void check(cl_int status, const std::string& what) {
  if (status != CL_SUCCESS)
    throw_error(ErrorKind::Internal, "OpenCL: " + what + " failed with status " + std::to_string(status));
}

std::string device_string(cl_device_id d, cl_device_info what) {
  size_t n = 0;
  clGetDeviceInfo(d, what, 0, nullptr, &n);
  std::string s(n, '\0');
  clGetDeviceInfo(d, what, n, s.data(), nullptr);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

template <typename T>
T device_value(cl_device_id d, cl_device_info what) {
  T v{};
  clGetDeviceInfo(d, what, sizeof v, &v, nullptr);
  return v;
}

std::string platform_string(cl_platform_id p, cl_platform_info what) {
  size_t n = 0;
  clGetPlatformInfo(p, what, 0, nullptr, &n);
  std::string s(n, '\0');
  clGetPlatformInfo(p, what, n, s.data(), nullptr);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

//! An OpenCL context on one device: the first GPU, else the first device; or the first
//! whose name contains `want`.
struct Device {
  cl_platform_id platform = nullptr;
  cl_device_id device = nullptr;
  cl_context context = nullptr;

  explicit Device(const std::string& want) {
    cl_uint count = 0;
    cl_int status = clGetPlatformIDs(0, nullptr, &count);
    if (status != CL_SUCCESS || count == 0)
      throw_error(ErrorKind::Unavailable, "no OpenCL platform (status " + std::to_string(status) +
                                              "): install an OpenCL driver, e.g. Debian's pocl-opencl-icd for CPUs");
    std::vector<cl_platform_id> platforms(count);
    clGetPlatformIDs(count, platforms.data(), nullptr);
    std::string seen;
    for (cl_device_type type : {cl_device_type(CL_DEVICE_TYPE_GPU), cl_device_type(CL_DEVICE_TYPE_ALL)}) {
      for (auto p : platforms) {
        cl_uint n = 0;
        if (clGetDeviceIDs(p, type, 0, nullptr, &n) != CL_SUCCESS || n == 0) continue;
        std::vector<cl_device_id> devices(n);
        clGetDeviceIDs(p, type, n, devices.data(), nullptr);
        for (auto d : devices) {
          std::string name = device_string(d, CL_DEVICE_NAME);
          seen += (seen.empty() ? "" : ", ") + name;
          if (!want.empty() && name.find(want) == std::string::npos) continue;
          platform = p;
          device = d;
          break;
        }
        if (device) break;
      }
      if (device) break;
    }
    if (!device)
      throw_error(ErrorKind::Unavailable, "no OpenCL device " +
                                              (want.empty() ? std::string() : "named like '" + want + "' ") +
                                              "(devices: " + (seen.empty() ? "none" : seen) + ")");
    context = clCreateContext(nullptr, 1, &device, nullptr, nullptr, &status);
    check(status, "clCreateContext");
  }
  ~Device() {
    if (context) clReleaseContext(context);
  }
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
};

std::string build_log(cl_program program, cl_device_id device) {
  size_t n = 0;
  clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
  std::string log(n, '\0');
  clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr);
  return log;
}

class ClKernel : public Kernel {
 public:
  ClKernel(const std::string& device_name, const GpuArtifact& artifact, const KernelShape& shape)
      : device_(device_name), launches_(artifact.launches) {
    try {
      open(artifact, shape);
    } catch (...) {
      release();  // the destructor does not run for a constructor that throws
      throw;
    }
  }
  ~ClKernel() override { release(); }

  double run(float* const* tensors, float*, unsigned flags) override {
    if (flags & kUpload) {
      for (size_t t = 0; t < sizes_.size(); ++t)
        if (sizes_[t] > 0)
          check(clEnqueueWriteBuffer(queue_, buffers_[t], CL_TRUE, 0, sizes_[t] * 4, tensors[t], 0, nullptr, nullptr),
                "clEnqueueWriteBuffer");
      // The workspace starts NaN, as on the CPU: a kernel that reads a temporary before
      // writing it fails the result check.
      const float nan = NAN;
      check(clEnqueueFillBuffer(queue_, buffers_.back(), &nan, sizeof nan, 0, workspace_bytes_, 0, nullptr, nullptr),
            "clEnqueueFillBuffer");
      check(clFinish(queue_), "filling the workspace");
    }
    struct Events {
      std::vector<cl_event> list;
      ~Events() {
        for (auto e : list) clReleaseEvent(e);
      }
    } events;
    for (size_t i = 0; i < launches_.size(); ++i) {
      size_t local = static_cast<size_t>(launches_[i].items);
      size_t global = static_cast<size_t>(launches_[i].groups) * local;
      cl_event e = nullptr;
      check(clEnqueueNDRangeKernel(queue_, kernels_[i], 1, nullptr, &global, &local, 0, nullptr, &e),
            "launching " + launches_[i].kernel);
      events.list.push_back(e);
    }
    check(clFinish(queue_), "running the kernels");
    cl_ulong start = 0, end = 0;
    check(clGetEventProfilingInfo(events.list.front(), CL_PROFILING_COMMAND_START, sizeof start, &start, nullptr),
          "reading the start time");
    check(clGetEventProfilingInfo(events.list.back(), CL_PROFILING_COMMAND_END, sizeof end, &end, nullptr),
          "reading the end time");
    if (flags & kDownload)
      for (size_t t = 0; t < sizes_.size(); ++t)
        if (sizes_[t] > 0)
          check(clEnqueueReadBuffer(queue_, buffers_[t], CL_TRUE, 0, sizes_[t] * 4, tensors[t], 0, nullptr, nullptr),
                "clEnqueueReadBuffer");
    // A positive time even for kernels below the timer's resolution.
    return std::max(1e-9, static_cast<double>(end - start) * 1e-9);
  }

 private:
  Device device_;
  std::vector<Launch> launches_;
  cl_command_queue queue_ = nullptr;
  cl_program program_ = nullptr;
  std::vector<cl_kernel> kernels_;
  std::vector<cl_mem> buffers_;
  std::vector<std::int64_t> sizes_;
  size_t workspace_bytes_ = 4;

  void open(const GpuArtifact& artifact, const KernelShape& shape) {
    cl_int status = CL_SUCCESS;
    queue_ = clCreateCommandQueue(device_.context, device_.device, CL_QUEUE_PROFILING_ENABLE, &status);
    check(status, "clCreateCommandQueue");
    const unsigned char* bin = reinterpret_cast<const unsigned char*>(artifact.binary.data());
    size_t size = artifact.binary.size();
    cl_int bin_status = CL_SUCCESS;
    program_ = clCreateProgramWithBinary(device_.context, 1, &device_.device, &size, &bin, &bin_status, &status);
    if (status != CL_SUCCESS || bin_status != CL_SUCCESS)
      throw_error(ErrorKind::Io, "OpenCL rejects the kernel binary (status " + std::to_string(status) +
                                     "): built for another device or driver?");
    if (clBuildProgram(program_, 1, &device_.device, kBuildOptions, nullptr, nullptr) != CL_SUCCESS)
      throw_error(ErrorKind::Io, "OpenCL cannot load the kernel binary: " + build_log(program_, device_.device));
    for (auto f : shape.tensor_floats) buffers_.push_back(make_buffer(f));
    buffers_.push_back(make_buffer(shape.workspace_floats));
    workspace_bytes_ = static_cast<size_t>(std::max<std::int64_t>(shape.workspace_floats, 1)) * 4;
    sizes_ = shape.tensor_floats;
    for (auto& l : launches_) {
      cl_kernel k = clCreateKernel(program_, l.kernel.c_str(), &status);
      check(status, "clCreateKernel " + l.kernel);
      kernels_.push_back(k);
      for (cl_uint a = 0; a < buffers_.size(); ++a)
        check(clSetKernelArg(k, a, sizeof(cl_mem), &buffers_[a]), "clSetKernelArg");
    }
  }

  void release() {
    for (auto k : kernels_) clReleaseKernel(k);
    for (auto b : buffers_) clReleaseMemObject(b);
    if (program_) clReleaseProgram(program_);
    if (queue_) clReleaseCommandQueue(queue_);
    kernels_.clear();
    buffers_.clear();
    program_ = nullptr;
    queue_ = nullptr;
  }

  cl_mem make_buffer(std::int64_t floats) {
    cl_int status = CL_SUCCESS;
    cl_mem m = clCreateBuffer(device_.context, CL_MEM_READ_WRITE,
                              static_cast<size_t>(std::max<std::int64_t>(floats, 1)) * 4, nullptr, &status);
    check(status, "clCreateBuffer of " + std::to_string(floats) + " floats");
    return m;
  }
};

class OpenClBackend : public WorkGroupBackend {
 public:
  explicit OpenClBackend(const BackendOptions& options)
      : WorkGroupBackend(options, "opencl", ".cl", GpuDialect::OpenCL) {}

  std::string build(const std::string& source_path, const std::string& artifact_path) const override {
    target();
    std::string source = read_text_file(source_path);
    GpuArtifact artifact;
    artifact.launches = read_launches(source);
    const char* src = source.c_str();
    cl_int status = CL_SUCCESS;
    cl_program program = clCreateProgramWithSource(device_->context, 1, &src, nullptr, &status);
    if (status != CL_SUCCESS) return "clCreateProgramWithSource failed with status " + std::to_string(status);
    if (clBuildProgram(program, 1, &device_->device, kBuildOptions, nullptr, nullptr) != CL_SUCCESS) {
      std::string log = build_log(program, device_->device);
      clReleaseProgram(program);
      return "OpenCL build failed:\n" + log;
    }
    // A kernel may allow smaller work-groups than the device (registers, local memory).
    for (auto& l : artifact.launches) {
      cl_kernel k = clCreateKernel(program, l.kernel.c_str(), &status);
      size_t limit = 0;
      if (status == CL_SUCCESS)
        status = clGetKernelWorkGroupInfo(k, device_->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof limit, &limit, nullptr);
      if (k) clReleaseKernel(k);
      if (status != CL_SUCCESS || static_cast<std::int64_t>(limit) < l.items) {
        clReleaseProgram(program);
        return status != CL_SUCCESS
                   ? "OpenCL: no kernel " + l.kernel + " in the program (status " + std::to_string(status) + ")"
                   : "kernel " + l.kernel + " allows work-groups of " + std::to_string(limit) +
                         " items on this device; the config needs " + std::to_string(l.items);
      }
    }
    size_t size = 0;
    clGetProgramInfo(program, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, nullptr);
    artifact.binary.resize(size);
    unsigned char* data = reinterpret_cast<unsigned char*>(artifact.binary.data());
    status = clGetProgramInfo(program, CL_PROGRAM_BINARIES, sizeof data, &data, nullptr);
    clReleaseProgram(program);
    if (status != CL_SUCCESS || size == 0) return "the OpenCL driver returned no program binary";
    write_gpu_artifact(artifact_path, artifact);
    return "";
  }

  std::unique_ptr<Kernel> load(const std::string& artifact_path, const KernelShape& shape) const override {
    return std::make_unique<ClKernel>(options_.device, read_gpu_artifact(artifact_path), shape);
  }

 private:
  mutable std::unique_ptr<Device> device_;  //!< the context builds use, made by describe()

  void describe(TargetInfo& target) const override {
    device_ = std::make_unique<Device>(options_.device);
    cl_device_id d = device_->device;
    auto units = device_value<cl_uint>(d, CL_DEVICE_MAX_COMPUTE_UNITS);
    auto group = device_value<size_t>(d, CL_DEVICE_MAX_WORK_GROUP_SIZE);
    auto local = device_value<cl_ulong>(d, CL_DEVICE_LOCAL_MEM_SIZE);
    auto cache = device_value<cl_ulong>(d, CL_DEVICE_GLOBAL_MEM_CACHE_SIZE);
    nlohmann::json device = {{"platform", platform_string(device_->platform, CL_PLATFORM_NAME)},
                             {"name", device_string(d, CL_DEVICE_NAME)},
                             {"vendor", device_string(d, CL_DEVICE_VENDOR)},
                             {"compute_units", units},
                             {"max_work_group_size", group},
                             {"local_mem_bytes", local}};
    nlohmann::json fp = {{"backend", "opencl"},
                         {"device", device},
                         {"driver", device_string(d, CL_DRIVER_VERSION)},
                         {"platform_version", platform_string(device_->platform, CL_PLATFORM_VERSION)},
                         {"build_options", kBuildOptions},
                         {"codegen", kCodegenVersion}};
    target.fingerprint_json = fp.dump();
    target.key = hash_hex(target.fingerprint_json);
    target.family = device_family("opencl", device);
    target.traits.threads = static_cast<int>(std::max<cl_uint>(units, 1));
    // Vector types of the device's preferred width (vloadN/vstoreN along the innermost axis).
    auto width = device_value<cl_uint>(d, CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT);
    target.traits.vector_lanes = width >= 16 ? 16 : width >= 8 ? 8 : width >= 4 ? 4 : width >= 2 ? 2 : 1;
    target.traits.vector_registers = 32;
    target.traits.max_group_size = static_cast<int>(std::min<size_t>(group, 1024));
    target.traits.local_bytes = static_cast<std::int64_t>(local);
    if (cache > 0) target.traits.l2_bytes = static_cast<std::int64_t>(cache);
  }
};

}  // namespace

std::unique_ptr<Backend> make_opencl_backend(const BackendOptions& options) {
  return std::make_unique<OpenClBackend>(options);
}

}  // namespace tiletune::codegen
