// A per-thread cache of small freed blocks behind operator new and delete. Building a graph makes
// and drops thousands of small objects (UOps, their source lists, hash-table nodes), more of one
// size at a time than glibc's own per-thread cache keeps (7), so most went through malloc's
// arena, which takes locks once the process has ever started a thread. That made graph building
// 10-45% slower on 2 threads than on 1 (bench/thread_cost.cpp, and G1/W6 in bench/run.sh), and
// cost 14% even on one. Blocks up to 1 KiB are kept here, up to 64 KiB per size, and go back to
// malloc when their thread ends. AddressSanitizer builds leave operator new alone, so that it
// still sees every use after free.
#include <malloc.h>

#include <cstddef>
#include <cstdlib>
#include <new>

#if !defined(__SANITIZE_ADDRESS__)

namespace {

// glibc hands out chunks whose usable size is 24, 40, 56, ... bytes: one class each
constexpr size_t kMin = 24, kStep = 16, kClasses = 64, kMaxBytes = kMin + kStep * (kClasses - 1);
constexpr size_t kKeepBytes = 64 << 10; // per class

size_t class_of_request(size_t n) { return n <= kMin ? 0 : (n - kMin + kStep - 1) / kStep; }

// Set when this thread's cache is gone (at thread exit): blocks then go straight to malloc. A
// flag of its own, since a store to a member in its object's destructor may be dropped.
thread_local bool gone = false;

struct Cache {
  struct Node {
    Node* next;
  };
  Node* head[kClasses] = {};
  size_t count[kClasses] = {};
  ~Cache() {
    gone = true;
    for (Node* h : head)
      while (h) {
        Node* n = h->next;
        std::free(h);
        h = n;
      }
  }
};

thread_local Cache cache;

void* take(size_t n) {
  if (n <= kMaxBytes && !gone) {
    size_t c = class_of_request(n);
    if (Cache::Node* b = cache.head[c]) {
      cache.head[c] = b->next;
      cache.count[c]--;
      return b;
    }
  }
  for (;;) { // as the standard's operator new: a new-handler may free memory, then it retries
    if (void* p = std::malloc(n ? n : 1)) return p;
    std::new_handler h = std::get_new_handler();
    if (!h) throw std::bad_alloc();
    h();
  }
}

void give(void* p) {
  if (!p) return;
  size_t u = malloc_usable_size(p);
  if (u >= kMin && u <= kMaxBytes && (u - kMin) % kStep == 0 && !gone) {
    size_t c = (u - kMin) / kStep;
    if (cache.count[c] * u < kKeepBytes) {
      auto* b = static_cast<Cache::Node*>(p);
      b->next = cache.head[c];
      cache.head[c] = b;
      cache.count[c]++;
      return;
    }
  }
  std::free(p);
}

} // namespace

void* operator new(size_t n) { return take(n); }
void* operator new[](size_t n) { return take(n); }
void operator delete(void* p) noexcept { give(p); }
void operator delete[](void* p) noexcept { give(p); }
void operator delete(void* p, size_t) noexcept { give(p); }
void operator delete[](void* p, size_t) noexcept { give(p); }

#endif
