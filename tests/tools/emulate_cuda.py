"""Run one generated CUDA kernel on the CPU: a check of its indexing with no GPU.

The kernel's text (from the `generate_cuda` pass) is compiled by the host C++ compiler
under a small shim: a block's threads are std::threads, `__syncthreads()` a std::barrier,
`__shared__` arrays static (blocks run one after another), and the prelude's few helpers
that elementwise and transpose kernels call (bf16 conversions, clamps, max/min) in plain
C++. Arithmetic is the host's f32, so results equal the GPU's where the kernel's values
are exact (small multiples of a power of two); what this checks is which element each
thread reads and writes, in every tile, aligned and not.

    from emulate_cuda import compiled_kernels, run_kernel
    source, kernels = compiled_kernels(graph_text)
    run_kernel(source, kernels[0], {buffer_id: numpy_array, ...}, offsets={buffer_id: 1})
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile

import numpy as np

SHIM = r"""
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>
struct uint2 { unsigned x, y; };
struct uint4 { unsigned x, y, z, w; };
struct EmDim3 { unsigned x = 0, y = 0, z = 0; };
thread_local EmDim3 threadIdx;
EmDim3 blockIdx, blockDim, gridDim;
std::barrier<>* em_barrier;
inline void __syncthreads() { em_barrier->arrive_and_wait(); }
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __restrict__
#define __shared__ static
#define EMBER_FN static inline
static inline float __uint_as_float(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
static inline uint32_t __float_as_uint(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
static inline float __int_as_float(int32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
static inline int32_t __float_as_int(float f) { int32_t u; std::memcpy(&u, &f, 4); return u; }
EMBER_FN float ember_bf2f(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }
EMBER_FN uint16_t ember_f2bf(float x) {
  uint32_t u = __float_as_uint(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
EMBER_FN float ember_round_bf(float x) { return ember_bf2f(ember_f2bf(x)); }
EMBER_FN int64_t ember_clamp_index(int64_t i, int64_t hi) { return i < 0 ? 0 : (i > hi ? hi : i); }
EMBER_FN float ember_max_f32(float a, float b) { return a != a ? a : (b != b ? b : fmaxf(a, b)); }
EMBER_FN float ember_min_f32(float a, float b) { return a != a ? a : (b != b ? b : fminf(a, b)); }
EMBER_FN float ember_max2_f32(float a, float b) { return ember_max_f32(a, b); }
EMBER_FN float ember_min2_f32(float a, float b) { return ember_min_f32(a, b); }
"""

MAIN = r"""
int main(int argc, char** argv) {
  // argv: grid block then, per parameter, a file (read, and written back after the run)
  // and an element offset from the allocation's start.
  const unsigned grid = atoi(argv[1]), block = atoi(argv[2]);
  std::vector<std::vector<char>> mem;
  std::vector<void*> ptr;
  std::vector<long> size;
  for (int a = 3; a + 2 < argc; a += 3) {
    FILE* f = fopen(argv[a], "rb");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    const long offset = atol(argv[a + 1]), elem = atol(argv[a + 2]);
    mem.emplace_back(n + offset * elem + 64);
    // 16-byte aligned base, then the offset in elements.
    char* base = mem.back().data() + (16 - (reinterpret_cast<uintptr_t>(mem.back().data()) & 15)) % 16;
    if (fread(base + offset * elem, 1, n, f) != (size_t)n) return 2;
    fclose(f);
    ptr.push_back(base + offset * elem);
    size.push_back(n);
  }
  gridDim.x = grid;
  blockDim.x = block;
  for (unsigned b = 0; b < grid; ++b) {
    blockIdx.x = b;
    std::barrier<> bar(block);
    em_barrier = &bar;
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < block; ++t)
      threads.emplace_back([&, t] {
        threadIdx.x = t;
        CALL;
        bar.arrive_and_drop();
      });
    for (auto& th : threads) th.join();
  }
  for (size_t a = 0; a < ptr.size(); ++a) {
    FILE* f = fopen(argv[3 + 3 * a], "wb");
    fwrite(ptr[a], 1, size[a], f);
    fclose(f);
  }
  return 0;
}
"""


def compiler() -> str | None:
    return shutil.which("g++") or shutil.which("clang++")


def compiled_kernels(text: str):
    """(source, kernels) of graph text through ember's CUDA pipeline, no NVRTC: kernels as
    the bindings list them (name, function, grid, block, args, ...)."""
    from ember import _core

    with tempfile.TemporaryDirectory(prefix="ember-emulate-") as d:
        cg = _core.compile_cuda(text, build=False, disk_cache=False, debug_dir=d)
        source = dict(cg.passes)["generate_cuda"]
        return source, cg.kernels


def kernel_text(source: str, function: str) -> str:
    start = source.index(f" {function}(")
    start = source.rindex("\n", 0, start) + 1
    end = source.index("\n}\n", start) + 3
    return source[start:end]


def run_kernel(source: str, kernel: dict, buffers: dict, offsets: dict | None = None, workdir: str | None = None):
    """Runs `kernel` (an entry of compiled_kernels' list) over `buffers` (buffer id -> a
    numpy array, in place: written buffers come back changed). `offsets`: buffer id ->
    elements from a 16-byte boundary (1: the kernel's unaligned path)."""
    offsets = offsets or {}
    text = kernel_text(source, kernel["function"])
    params = re.search(re.escape(kernel["function"]) + r"\((.*?)\)\s*\{", text, re.S).group(1).split(",")
    if len(params) != len(kernel["args"]):
        raise ValueError("a kernel with parameters other than its buffers (symbols?)")
    call = kernel["function"] + "(" + ", ".join(
        f"({p.rsplit('*', 1)[0].replace('__restrict__', '').strip()}*)ptr[{i}]" for i, p in enumerate(params)) + ")"
    with tempfile.TemporaryDirectory(prefix="ember-emulate-", dir=workdir) as d:
        cpp = os.path.join(d, "k.cpp")
        with open(cpp, "w") as f:
            f.write(SHIM + text.replace('extern "C" ', "") + MAIN.replace("CALL", call))
        exe = os.path.join(d, "k")
        subprocess.run([compiler(), "-std=c++20", "-O1", "-pthread", "-w", cpp, "-o", exe], check=True)
        argv = [exe, str(kernel["grid"]), str(kernel["block"])]
        for i, b in enumerate(kernel["args"]):
            path = os.path.join(d, f"b{i}")
            buffers[b].tofile(path)
            argv += [path, str(offsets.get(b, 0)), str(buffers[b].itemsize)]
        subprocess.run(argv, check=True)
        for i, b in enumerate(kernel["args"]):
            buffers[b][...] = np.fromfile(os.path.join(d, f"b{i}"), dtype=buffers[b].dtype).reshape(buffers[b].shape)
