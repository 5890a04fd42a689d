#include "runtime/cuda_driver.h"

#include <dlfcn.h>

#include <algorithm>
#include <mutex>
#include <stdexcept>
#include <type_traits>

namespace ember {

// The driver entry points we use (cuda.h), with opaque handles.
struct CudaDriver::Api {
  using CUresult = int;
  using CUdevice = int;
  using CUcontext = void*;
  using CUmodule = void*;
  using CUfunction = void*;
  using CUstream = void*;
  void* handle = nullptr;
  CUresult (*init)(unsigned) = nullptr;
  CUresult (*device_get)(CUdevice*, int) = nullptr;
  CUresult (*primary_ctx_retain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*ctx_get_current)(CUcontext*) = nullptr;
  CUresult (*ctx_set_current)(CUcontext) = nullptr;
  CUresult (*module_load_data)(CUmodule*, const void*) = nullptr;
  CUresult (*module_get_function)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*launch_kernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                            void**, void**) = nullptr;
  CUresult (*error_string)(CUresult, const char**) = nullptr;
  // Optional (diagnostics only): nullptr when this libcuda lacks them.
  CUresult (*func_get_attribute)(int*, int, CUfunction) = nullptr;
  CUresult (*occupancy_max_active_blocks)(int*, CUfunction, int, size_t) = nullptr;
  CUresult (*device_get_attribute)(int*, int, CUdevice) = nullptr;
  // Optional (max-autotune's timing only).
  using CUevent = void*;
  CUresult (*event_create)(CUevent*, unsigned) = nullptr;
  CUresult (*event_record)(CUevent, CUstream) = nullptr;
  CUresult (*event_synchronize)(CUevent) = nullptr;
  CUresult (*event_elapsed_time)(float*, CUevent, CUevent) = nullptr;
  CUresult (*event_destroy)(CUevent) = nullptr;
};

const CudaDriver* CudaDriver::get(std::string* why) {
  static std::mutex mutex;
  static const CudaDriver* driver = nullptr;
  static std::string failure;
  std::lock_guard<std::mutex> lock(mutex);
  if (driver || !failure.empty()) {
    if (!driver && why) *why = failure;
    return driver;
  }
  auto api = std::make_shared<Api>();
  api->handle = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!api->handle) {
    const char* e = ::dlerror();
    failure = std::string("the CUDA driver (libcuda.so.1) could not be loaded: ") + (e ? e : "dlopen failed");
  } else {
    auto get = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(api->handle, name));
      if (!fn && failure.empty()) failure = std::string("libcuda.so.1 has no ") + name;
    };
    get(api->init, "cuInit");
    get(api->device_get, "cuDeviceGet");
    get(api->primary_ctx_retain, "cuDevicePrimaryCtxRetain");
    get(api->ctx_get_current, "cuCtxGetCurrent");
    get(api->ctx_set_current, "cuCtxSetCurrent");
    get(api->module_load_data, "cuModuleLoadData");
    get(api->module_get_function, "cuModuleGetFunction");
    get(api->launch_kernel, "cuLaunchKernel");
    get(api->error_string, "cuGetErrorString");
    api->func_get_attribute = reinterpret_cast<decltype(api->func_get_attribute)>(::dlsym(api->handle, "cuFuncGetAttribute"));
    api->occupancy_max_active_blocks = reinterpret_cast<decltype(api->occupancy_max_active_blocks)>(
        ::dlsym(api->handle, "cuOccupancyMaxActiveBlocksPerMultiprocessor"));
    api->device_get_attribute =
        reinterpret_cast<decltype(api->device_get_attribute)>(::dlsym(api->handle, "cuDeviceGetAttribute"));
    auto optional = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(api->handle, name));
    };
    optional(api->event_create, "cuEventCreate");
    optional(api->event_record, "cuEventRecord");
    optional(api->event_synchronize, "cuEventSynchronize");
    optional(api->event_elapsed_time, "cuEventElapsedTime");
    optional(api->event_destroy, "cuEventDestroy_v2");
    if (failure.empty()) {
      int rc = api->init(0);
      if (rc != 0) failure = "cuInit failed with CUDA error " + std::to_string(rc);
    }
  }
  if (!failure.empty()) {
    if (why) *why = failure;
    return nullptr;
  }
  auto* d = new CudaDriver();  // kept for the process's life, like the modules
  d->api_ = api;
  driver = d;
  return driver;
}

void CudaDriver::check(int rc, const char* what) const {
  if (rc == 0) return;
  const char* msg = nullptr;
  api_->error_string(rc, &msg);
  throw std::runtime_error(std::string("ember: ") + what + " failed: CUDA error " + std::to_string(rc) + " (" +
                           (msg ? msg : "unknown") + ")");
}

std::shared_ptr<CudaModule> CudaModule::load(const std::string& cubin, int ordinal) {
  std::string why;
  const CudaDriver* d = CudaDriver::get(&why);
  if (!d) throw std::runtime_error("ember: " + why);
  const auto& api = d->api();
  std::shared_ptr<CudaModule> m(new CudaModule());
  m->driver_ = d;
  m->ordinal_ = ordinal;
  int dev = 0;
  d->check(api.device_get(&dev, ordinal), "cuDeviceGet");
  constexpr int kMultiprocessorCount = 16;  // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
  if (!api.device_get_attribute || api.device_get_attribute(&m->multiprocessors_, kMultiprocessorCount, dev) != 0)
    m->multiprocessors_ = -1;
  // Retained for the process's life: torch's runtime holds the same primary context.
  d->check(api.primary_ctx_retain(&m->context_, dev), "cuDevicePrimaryCtxRetain");
  void* previous = nullptr;
  d->check(api.ctx_get_current(&previous), "cuCtxGetCurrent");
  if (previous != m->context_) d->check(api.ctx_set_current(m->context_), "cuCtxSetCurrent");
  int rc = api.module_load_data(&m->module_, cubin.data());
  if (previous != m->context_) api.ctx_set_current(previous);
  d->check(rc, "cuModuleLoadData");
  return m;
}

void* CudaModule::function(const std::string& name) const {
  void* fn = nullptr;
  driver_->check(driver_->api().module_get_function(&fn, module_, name.c_str()), ("cuModuleGetFunction " + name).c_str());
  return fn;
}

CudaModule::Resources CudaModule::resources(void* fn, uint32_t block) const {
  const auto& api = driver_->api();
  Resources r;
  void* current = nullptr;
  api.ctx_get_current(&current);
  const bool switched = current != context_;
  if (switched && api.ctx_set_current(context_) != 0) return r;
  constexpr int kNumRegs = 4;  // CU_FUNC_ATTRIBUTE_NUM_REGS
  if (api.func_get_attribute && api.func_get_attribute(&r.registers, kNumRegs, fn) != 0) r.registers = -1;
  if (api.occupancy_max_active_blocks &&
      api.occupancy_max_active_blocks(&r.blocks_per_sm, fn, static_cast<int>(block), 0) != 0)
    r.blocks_per_sm = -1;
  if (switched) api.ctx_set_current(current);
  return r;
}

void CudaModule::launch(void* fn, uint32_t grid, uint32_t block, void** params, uintptr_t stream) const {
  const auto& api = driver_->api();
  void* current = nullptr;
  api.ctx_get_current(&current);
  // The caller's context is put back, so torch's idea of the current device holds.
  const bool switched = current != context_;
  if (switched) driver_->check(api.ctx_set_current(context_), "cuCtxSetCurrent");
  int rc = api.launch_kernel(fn, grid, 1, 1, block, 1, 1, 0, reinterpret_cast<void*>(stream), params, nullptr);
  if (switched) api.ctx_set_current(current);
  driver_->check(rc, "cuLaunchKernel");
}

}  // namespace ember

namespace ember {

double CudaModule::time_launches(void* fn, uint32_t grid, uint32_t block, void** params, uintptr_t stream,
                                 int launches) const {
  const auto& api = driver_->api();
  if (!api.event_create || !api.event_record || !api.event_synchronize || !api.event_elapsed_time ||
      !api.event_destroy)
    throw std::runtime_error("ember: this CUDA driver lacks the event API that timing kernels needs");
  void* current = nullptr;
  api.ctx_get_current(&current);
  const bool switched = current != context_;
  if (switched) driver_->check(api.ctx_set_current(context_), "cuCtxSetCurrent");
  void* start = nullptr;
  void* end = nullptr;
  int rc = api.event_create(&start, 0);
  if (rc == 0) rc = api.event_create(&end, 0);
  auto* s = reinterpret_cast<void*>(stream);
  if (rc == 0) rc = api.event_record(start, s);
  for (int i = 0; i < launches && rc == 0; ++i) rc = api.launch_kernel(fn, grid, 1, 1, block, 1, 1, 0, s, params, nullptr);
  if (rc == 0) rc = api.event_record(end, s);
  if (rc == 0) rc = api.event_synchronize(end);
  float ms = 0;
  if (rc == 0) rc = api.event_elapsed_time(&ms, start, end);
  if (start) api.event_destroy(start);
  if (end) api.event_destroy(end);
  if (switched) api.ctx_set_current(current);
  driver_->check(rc, "timing a kernel");
  return 1000.0 * ms / std::max(1, launches);
}

}  // namespace ember
