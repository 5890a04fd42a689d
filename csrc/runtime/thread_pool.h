// A persistent pool of worker threads that runs the parallel loops of generated CPU kernels.
//
// What parallel_for(n, grain, fn) guarantees:
//  * fn is called on disjoint, contiguous ranges that together cover [0, n) exactly once,
//    each at least `grain` long, and parallel_for returns only after every call returned.
//    fn is not called at all when n <= 0.
//  * If n <= grain or the pool has one thread, it is simply fn(0, n) on the calling thread:
//    no locks, no atomics (the common case for small kernels).
//  * Otherwise the caller runs the first range itself while up to num_threads() - 1 workers
//    run the rest.
//  * A parallel_for called from inside fn, on any thread, runs inline and serially.
//  * Loops from different user threads take turns: one loop at a time owns the workers.
//  * An exception thrown by fn on any thread is rethrown on the caller once every range
//    has finished (the first one if there are several).
//
// Kernels can be ~10 us long, so waking the workers must cost far less: idle workers spin
// for a while (longer than waking a sleeping thread takes) before they sleep on a futex.
// Linux only (futex, sched_getaffinity).
//
// Workers are started by the first loop that needs them, and the global pool is created on
// first use; a process forked from one that used it gets a fresh pool in the child (the
// parent's workers do not exist there). The global pool joins its workers at exit.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ember {

class ThreadPool {
 public:
  using RangeFn = std::function<void(int64_t begin, int64_t end)>;

  // The process-wide pool. Its size is $EMBER_NUM_THREADS if that is a positive integer,
  // else the number of CPUs this process may run on.
  static ThreadPool& global();

  // A separate pool (mostly for tests); num_threads counts the calling thread.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_.load(std::memory_order_relaxed); }
  // Values below 1 mean 1. Waits for a running loop; must not be called from inside one.
  void set_num_threads(int num_threads);

  void parallel_for(int64_t n, int64_t grain, const RangeFn& fn);

  // The caller is about to run something else (an ATen op with its own threads):
  // workers that finished the last loop sleep now instead of spinning for the next
  // one, so they do not take cores from that work. The next loop wakes them.
  void park();

 private:
  void start_workers();
  void stop_workers();
  void worker_main(int index, uint64_t seen_ticket);
  uint64_t wait_for_new_ticket(uint64_t seen_ticket);
  void wait_for_workers();
  void run_chunk(int index, int num_chunks);

  std::atomic<int> num_threads_;
  std::mutex dispatch_mu_;  // held by the loop that owns the workers
  std::vector<std::thread> workers_;
  uint64_t loop_count_ = 0;

  // The current loop: written under dispatch_mu_ before ticket_ is published, read by a
  // worker only after it saw the ticket and only while the dispatcher waits for it.
  const RangeFn* fn_ = nullptr;
  int64_t n_ = 0;

  // Each hot atomic has its own cache line: workers spin reading ticket_ while others
  // decrement pending_, and sharing a line would make every decrement stall every spinner.
  //
  // (loop number << 32) | number of chunks. One atomic word, so a worker that is not part
  // of a loop learns that without reading the fields above, which the next loop may be
  // rewriting.
  alignas(64) std::atomic<uint64_t> ticket_{0};
  std::atomic<bool> stop_{false};  // read with ticket_, written only when no loop runs
  alignas(64) std::atomic<int> pending_{0};  // chunks handed to workers and not yet finished
  alignas(64) std::atomic<int> sleepers_{0};  // workers asleep, so busy loops skip the wake call
  std::atomic<uint32_t> wake_word_{0};        // the futex sleeping workers wait on
  std::atomic<uint64_t> park_ticket_{~0ull};  // workers done with this loop skip their spin

  // Where the dispatcher sleeps when the workers' chunks outlast its spin.
  std::mutex done_mu_;
  std::condition_variable done_cv_;

  std::mutex error_mu_;
  std::exception_ptr error_;
};

}  // namespace ember
