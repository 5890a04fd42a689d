#include "check.h"
#include "runtime/thread_pool.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

using ember::ThreadPool;

namespace {

int64_t parallel_sum(ThreadPool& pool, int64_t n, int64_t grain) {
  std::atomic<int64_t> total{0};
  pool.parallel_for(n, grain, [&](int64_t begin, int64_t end) {
    int64_t local = 0;
    for (int64_t i = begin; i < end; ++i) local += i;
    total += local;
  });
  return total.load();
}

// The ranges one loop hands to fn, sorted.
std::vector<std::pair<int64_t, int64_t>> ranges_of(ThreadPool& pool, int64_t n, int64_t grain) {
  std::mutex mu;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  pool.parallel_for(n, grain, [&](int64_t begin, int64_t end) {
    std::lock_guard<std::mutex> lock(mu);
    ranges.emplace_back(begin, end);
  });
  std::sort(ranges.begin(), ranges.end());
  return ranges;
}

}  // namespace

TEST(thread_pool_sum_10m) {
  const int64_t n = 10'000'000;
  const int64_t expected = n * (n - 1) / 2;
  CHECK(ThreadPool::global().num_threads() >= 1);
  CHECK_EQ(parallel_sum(ThreadPool::global(), n, 10'000), expected);
  ThreadPool four(4);
  CHECK_EQ(parallel_sum(four, n, 10'000), expected);
  CHECK_EQ(parallel_sum(four, n, 1), expected);

  // Every index exactly once.
  std::vector<uint8_t> hits(n, 0);
  four.parallel_for(n, 1000, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) ++hits[i];
  });
  CHECK(std::all_of(hits.begin(), hits.end(), [](uint8_t h) { return h == 1; }));
}

TEST(thread_pool_chunking) {
  ThreadPool pool(4);
  auto ranges = ranges_of(pool, 1000, 10);
  CHECK_EQ(ranges.size(), size_t(4));
  int64_t at = 0;
  for (auto [begin, end] : ranges) {
    CHECK_EQ(begin, at);
    CHECK(end - begin >= 10);
    at = end;
  }
  CHECK_EQ(at, int64_t(1000));

  // Chunks never go below grain, even if that leaves threads idle.
  ranges = ranges_of(pool, 25, 10);
  CHECK_EQ(ranges.size(), size_t(2));
  for (auto [begin, end] : ranges) CHECK(end - begin >= 10);

  // Small loops run inline as one range.
  std::thread::id caller = std::this_thread::get_id(), ran_on;
  int calls = 0;
  pool.parallel_for(10, 10, [&](int64_t begin, int64_t end) {
    ++calls;
    ran_on = std::this_thread::get_id();
    CHECK_EQ(begin, int64_t(0));
    CHECK_EQ(end, int64_t(10));
  });
  CHECK_EQ(calls, 1);
  CHECK(ran_on == caller);
  pool.parallel_for(0, 1, [&](int64_t, int64_t) { ++calls; });
  CHECK_EQ(calls, 1);
}

TEST(thread_pool_nested_runs_inline) {
  ThreadPool pool(4);
  std::atomic<int64_t> total{0};
  std::atomic<int> inner_calls{0};
  std::atomic<bool> inline_everywhere{true};
  pool.parallel_for(8, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      std::thread::id outer_thread = std::this_thread::get_id();
      pool.parallel_for(1000, 1, [&](int64_t b, int64_t e) {
        ++inner_calls;
        if (b != 0 || e != 1000 || std::this_thread::get_id() != outer_thread) inline_everywhere = false;
        for (int64_t j = b; j < e; ++j) total += j;
      });
      // The global pool nests inline too.
      ThreadPool::global().parallel_for(1000, 1, [&](int64_t b, int64_t e) {
        if (b != 0 || e != 1000) inline_everywhere = false;
      });
    }
  });
  CHECK_EQ(inner_calls.load(), 8);
  CHECK(inline_everywhere.load());
  CHECK_EQ(total.load(), int64_t(8 * 999 * 1000 / 2));
  CHECK_THROWS(pool.parallel_for(2, 1, [&](int64_t, int64_t) { pool.set_num_threads(2); }));
}

TEST(thread_pool_exceptions) {
  ThreadPool pool(4);
  // Thrown on a worker (the caller runs the range starting at 0).
  bool caught = false;
  try {
    pool.parallel_for(400, 100, [](int64_t begin, int64_t) {
      if (begin == 300) throw std::runtime_error("boom on a worker");
    });
  } catch (const std::runtime_error& e) {
    caught = std::string(e.what()) == "boom on a worker";
  }
  CHECK(caught);

  // Thrown on the caller; the workers' ranges still all ran.
  std::atomic<int> ran{0};
  CHECK_THROWS(pool.parallel_for(400, 100, [&](int64_t begin, int64_t) {
    ++ran;
    if (begin == 0) throw std::runtime_error("boom on the caller");
  }));
  CHECK_EQ(ran.load(), 4);

  // Everywhere at once: exactly one comes back, and the pool still works.
  CHECK_THROWS(pool.parallel_for(400, 100, [](int64_t, int64_t) { throw 7; }));
  CHECK_EQ(parallel_sum(pool, 100000, 100), int64_t(100000) * 99999 / 2);
}

TEST(thread_pool_concurrent_callers) {
  ThreadPool local(4);
  for (ThreadPool* pool : {&local, &ThreadPool::global()}) {
    std::atomic<int> wrong{0};
    std::vector<std::thread> users;
    for (int u = 0; u < 4; ++u) {
      users.emplace_back([&, u] {
        for (int iter = 0; iter < 1000; ++iter) {
          int64_t n = 1000 + 97 * u + iter % 13;
          if (parallel_sum(*pool, n, 64) != n * (n - 1) / 2) ++wrong;
        }
      });
    }
    for (auto& t : users) t.join();
    CHECK_EQ(wrong.load(), 0);
  }
}

TEST(thread_pool_set_num_threads) {
  ThreadPool pool(4);
  CHECK_EQ(pool.num_threads(), 4);
  pool.set_num_threads(3);
  CHECK_EQ(pool.num_threads(), 3);
  CHECK_EQ(ranges_of(pool, 3000, 1).size(), size_t(3));
  pool.set_num_threads(0);
  CHECK_EQ(pool.num_threads(), 1);
  CHECK_EQ(ranges_of(pool, 3000, 1).size(), size_t(1));
  pool.set_num_threads(8);
  CHECK_EQ(ranges_of(pool, 3000, 1).size(), size_t(8));
  CHECK_EQ(parallel_sum(pool, 100000, 10), int64_t(100000) * 99999 / 2);
}

// A forked child gets its own global pool (sized from the environment it has then),
// uses it, and exits without hanging on the parent's workers.
TEST(thread_pool_after_fork) {
  CHECK_EQ(parallel_sum(ThreadPool::global(), 100000, 10), int64_t(100000) * 99999 / 2);
  std::cout.flush();
  std::cerr.flush();
  pid_t pid = ::fork();
  if (pid == 0) {
    ::alarm(20);  // a hang becomes SIGALRM, not a stuck test run
    ::setenv("EMBER_NUM_THREADS", "3", 1);
    ThreadPool& pool = ThreadPool::global();
    bool ok = pool.num_threads() == 3 && parallel_sum(pool, 100000, 10) == int64_t(100000) * 99999 / 2;
    std::exit(ok ? 0 : 1);  // runs static destructors: joins the child's workers
  }
  CHECK(pid > 0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 0);
}
