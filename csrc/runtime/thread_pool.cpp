#include "runtime/thread_pool.h"

#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <stdexcept>
#include <utility>

namespace ember {

namespace {

// How long an idle worker spins before it sleeps. It must outlast a wake-up (8-25 us after
// a short sleep, ~100 us after a long one, measured on a 16-core VM): with 5 us, one late
// worker makes the others' spins run out while they wait for it, they sleep too, and
// back-to-back loops settle at wake-up speed (~40 us per loop at 16 threads instead of
// ~2.5 us). Much longer would take CPU from other thread pools (PyTorch's) between graphs.
constexpr auto kSpinTime = std::chrono::microseconds(50);

// True on pool workers always, and on a user thread while it runs a loop: parallel_for
// calls made there run inline.
thread_local bool tl_in_parallel_region = false;

struct ParallelRegionGuard {
  bool saved = tl_in_parallel_region;
  ParallelRegionGuard() { tl_in_parallel_region = true; }
  ~ParallelRegionGuard() { tl_in_parallel_region = saved; }
};

// Tells the CPU we are spinning: saves power and frees the core for its hyperthread twin.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Spins until done() holds or kSpinTime passed; returns done()'s last answer.
template <typename Done>
bool spin_until(Done done) {
  auto deadline = std::chrono::steady_clock::now() + kSpinTime;
  for (int i = 1;; ++i) {
    if (done()) return true;
    cpu_relax();
    if (i % 16 == 0 && std::chrono::steady_clock::now() > deadline) return done();
  }
}

// Sleeping workers wait on a futex rather than a condition variable: every worker woken
// from a condition variable must re-take its mutex, which turns waking N workers into a
// chain of N hand-offs; a futex wakes them all in one call.
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) && std::atomic<uint32_t>::is_always_lock_free,
              "futex needs a plain 32-bit word");

void futex_wait(std::atomic<uint32_t>* word, uint32_t expected) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>* word) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
}

// The CPUs we may run on (taskset, cgroup cpusets), which can be far fewer than the
// machine's: more threads than that would only spin against each other.
int default_num_threads() {
  if (const char* env = std::getenv("EMBER_NUM_THREADS")) {
    char* end = nullptr;
    long n = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && n > 0 && n <= 4096) return int(n);
  }
  cpu_set_t cpus;
  if (sched_getaffinity(0, sizeof cpus, &cpus) == 0 && CPU_COUNT(&cpus) > 0) return CPU_COUNT(&cpus);
  return std::max(1, int(std::thread::hardware_concurrency()));
}

// [begin, end) of chunk `index` when [0, n) is cut into num_chunks near-equal pieces.
std::pair<int64_t, int64_t> chunk_range(int64_t n, int num_chunks, int index) {
  int64_t base = n / num_chunks, extra = n % num_chunks;
  int64_t begin = index * base + std::min<int64_t>(index, extra);
  return {begin, begin + base + (index < extra ? 1 : 0)};
}

// ---- the global pool -----------------------------------------------------------------

std::atomic<ThreadPool*> g_pool{nullptr};

// In a forked child the parent's workers do not exist, and their pool's mutexes may be
// held forever; abandon that pool (never touch or free it) and let the child make its own.
void forget_pool_in_child() { g_pool.store(nullptr, std::memory_order_relaxed); }

// Joins the global pool's workers at exit. Skipped if exit() is called from inside a loop:
// the loop's dispatcher holds the pool, and the process is going away anyway.
struct GlobalPoolReaper {
  ~GlobalPoolReaper() {
    if (!tl_in_parallel_region) delete g_pool.exchange(nullptr);
  }
};

ThreadPool& create_global_pool() {
  // Constructed before the first pool, so destroyed after anything created later that
  // might still run a loop in its destructor.
  static GlobalPoolReaper reaper;
  static std::once_flag atfork_registered;
  std::call_once(atfork_registered, [] { pthread_atfork(nullptr, nullptr, forget_pool_in_child); });

  auto* fresh = new ThreadPool(default_num_threads());
  ThreadPool* existing = nullptr;
  if (g_pool.compare_exchange_strong(existing, fresh)) return *fresh;
  delete fresh;  // another thread won; workers start lazily, so this cost nothing
  return *existing;
}

}  // namespace

ThreadPool& ThreadPool::global() {
  ThreadPool* pool = g_pool.load(std::memory_order_acquire);
  return pool ? *pool : create_global_pool();
}

ThreadPool::ThreadPool(int num_threads) : num_threads_(std::max(1, num_threads)) {}

ThreadPool::~ThreadPool() {
  std::lock_guard<std::mutex> lock(dispatch_mu_);
  stop_workers();
}

void ThreadPool::set_num_threads(int num_threads) {
  if (tl_in_parallel_region) throw std::logic_error("ThreadPool::set_num_threads called inside parallel_for");
  std::lock_guard<std::mutex> lock(dispatch_mu_);
  num_threads = std::max(1, num_threads);
  if (num_threads == num_threads_.load()) return;
  stop_workers();  // the next loop starts the new number
  num_threads_.store(num_threads);
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, const RangeFn& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  if (n <= grain || num_threads() == 1 || tl_in_parallel_region) {
    fn(0, n);
    return;
  }

  std::unique_lock<std::mutex> lock(dispatch_mu_);
  int num_chunks = int(std::min<int64_t>(num_threads(), n / grain));
  if (num_chunks <= 1) {
    lock.unlock();
    fn(0, n);
    return;
  }
  if (workers_.size() + 1 != size_t(num_threads())) start_workers();

  ParallelRegionGuard in_region;
  fn_ = &fn;
  n_ = n;
  error_ = nullptr;
  pending_.store(num_chunks - 1, std::memory_order_relaxed);
  ticket_.store(++loop_count_ << 32 | uint64_t(num_chunks));  // seq_cst: pairs with sleepers_
  if (sleepers_.load() > 0) {
    wake_word_.fetch_add(1);
    futex_wake_all(&wake_word_);
  }

  run_chunk(0, num_chunks);
  wait_for_workers();
  fn_ = nullptr;
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void ThreadPool::run_chunk(int index, int num_chunks) {
  auto [begin, end] = chunk_range(n_, num_chunks, index);
  try {
    (*fn_)(begin, end);
  } catch (...) {
    std::lock_guard<std::mutex> lock(error_mu_);
    if (!error_) error_ = std::current_exception();
  }
}

void ThreadPool::park() { park_ticket_.store(ticket_.load()); }

void ThreadPool::wait_for_workers() {
  auto done = [this] { return pending_.load(std::memory_order_acquire) == 0; };
  if (spin_until(done)) return;
  std::unique_lock<std::mutex> lock(done_mu_);
  done_cv_.wait(lock, done);
}

void ThreadPool::worker_main(int index, uint64_t seen_ticket) {
  tl_in_parallel_region = true;
  for (;;) {
    seen_ticket = wait_for_new_ticket(seen_ticket);
    if (stop_.load()) return;
    int num_chunks = int(seen_ticket & 0xffffffffu);
    if (index >= num_chunks) continue;  // this loop is too small to need us
    run_chunk(index, num_chunks);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(done_mu_);
      done_cv_.notify_one();
    }
  }
}

uint64_t ThreadPool::wait_for_new_ticket(uint64_t seen_ticket) {
  uint64_t ticket = seen_ticket;
  auto changed = [&] {
    ticket = ticket_.load();
    return ticket != seen_ticket || stop_.load();
  };
  // After park() for the loop we just saw, go straight to sleep.
  auto changed_or_parked = [&] { return changed() || park_ticket_.load(std::memory_order_relaxed) == seen_ticket; };
  if (spin_until(changed_or_parked) && changed()) return ticket;

  // Dekker with the dispatcher: we count ourselves as a sleeper, read the wake word, then
  // re-check the ticket; it publishes the ticket, reads the count, then bumps the word and
  // wakes (all seq_cst). So either we see the new ticket, or it sees us and the word
  // changes after we read it, which futex_wait notices even if it has not slept yet.
  sleepers_.fetch_add(1);
  for (;;) {
    uint32_t word = wake_word_.load();
    if (changed()) break;
    futex_wait(&wake_word_, word);
  }
  sleepers_.fetch_sub(1);
  return ticket;
}

// Both called with dispatch_mu_ held and no loop running.
void ThreadPool::start_workers() {
  stop_workers();
  uint64_t current = ticket_.load();
  for (int i = 1; i < num_threads(); ++i) workers_.emplace_back([this, i, current] { worker_main(i, current); });
}

void ThreadPool::stop_workers() {
  if (workers_.empty()) return;
  stop_.store(true);
  wake_word_.fetch_add(1);
  futex_wake_all(&wake_word_);
  for (std::thread& w : workers_) w.join();
  workers_.clear();
  stop_.store(false);
}

}  // namespace ember
