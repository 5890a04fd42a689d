// The CUDA driver API (libcuda.so.1), loaded with dlopen on first use: load cubins,
// find their kernels, launch them on a stream. No CUDA headers: the handful of types
// and entry points are declared here, as opaque handles.
//
// Kernels run in the device's primary context, the one PyTorch's runtime uses, so
// pointers from torch's caching allocator are valid in them and torch's streams can
// carry them. Streams cross as integers (torch.cuda.current_stream().cuda_stream).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ember {

class CudaDriver {
 public:
  // The process-wide driver; nullptr with the reason in *why when libcuda cannot be
  // loaded or cuInit fails (no GPU, no driver).
  static const CudaDriver* get(std::string* why);

  struct Api;
  const Api& api() const { return *api_; }
  // Throws std::runtime_error naming `what` and the driver's message when rc != 0.
  void check(int rc, const char* what) const;

 private:
  CudaDriver() = default;
  std::shared_ptr<Api> api_;
};

// A cubin loaded into a device's primary context, and its kernels. Modules stay loaded
// for the life of the process (unloading at interpreter exit races the driver's own
// teardown); equal cubins are loaded once (the memory cache in cuda_compiled_graph).
class CudaModule {
 public:
  // Loads `cubin` on device `ordinal`; throws std::runtime_error with the driver's reason.
  static std::shared_ptr<CudaModule> load(const std::string& cubin, int ordinal);
  // The kernel's handle; throws if the module has no such kernel.
  void* function(const std::string& name) const;
  int ordinal() const { return ordinal_; }

  // A kernel's registers a thread and how many of its blocks of `block` threads an SM
  // holds at once (the driver's occupancy calculator); -1 where the driver cannot say.
  struct Resources {
    int registers = -1;
    int blocks_per_sm = -1;
  };
  Resources resources(void* fn, uint32_t block) const;
  // The device's SM count; -1 where the driver cannot say.
  int multiprocessors() const { return multiprocessors_; }

  // Launches `fn` (from function()) with `params` (pointers to each argument's value) on
  // `stream` (a CUstream as an integer; 0 is the legacy default stream). Asynchronous:
  // no host synchronization. Makes the module's context current first if it is not.
  void launch(void* fn, uint32_t grid, uint32_t block, void** params, uintptr_t stream) const;
  // Microseconds a launch of `fn` takes on `stream`, averaged over `launches` launches in a
  // row between two events; waits for them (max-autotune's timing, never on the hot path).
  double time_launches(void* fn, uint32_t grid, uint32_t block, void** params, uintptr_t stream, int launches) const;

 private:
  CudaModule() = default;
  const CudaDriver* driver_ = nullptr;
  void* context_ = nullptr;
  void* module_ = nullptr;
  int ordinal_ = 0;
  int multiprocessors_ = -1;
};

}  // namespace ember
