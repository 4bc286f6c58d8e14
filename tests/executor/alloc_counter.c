/* Test-only (never installed): counts heap allocations of at least a threshold, for the zero-copy checks of
 * test_python_torch.py, which runs with this library in LD_PRELOAD. It stands in front of glibc's allocator
 * (malloc, calloc, realloc, the aligned forms; C++ new and numpy's and PyTorch's CPU allocators come through
 * them) and forwards every call to glibc's own entry points, __libc_malloc and friends. Python reads it with
 * ctypes: artune_alloc_counter_start(bytes), then artune_alloc_counter_stop() returns the count since. */
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>

extern void* __libc_malloc(size_t size);
extern void* __libc_calloc(size_t count, size_t size);
extern void* __libc_realloc(void* ptr, size_t size);
extern void* __libc_memalign(size_t alignment, size_t size);

static atomic_size_t threshold = (size_t)-1;
static atomic_long counted;

static void note(size_t size) {
  if (size >= atomic_load_explicit(&threshold, memory_order_relaxed)) atomic_fetch_add(&counted, 1);
}

void artune_alloc_counter_start(size_t bytes) {
  atomic_store(&counted, 0);
  atomic_store(&threshold, bytes);
}

long artune_alloc_counter_stop(void) {
  atomic_store(&threshold, (size_t)-1);
  return atomic_load(&counted);
}

void* malloc(size_t size) {
  note(size);
  return __libc_malloc(size);
}

void* calloc(size_t count, size_t size) {
  note(count * size);
  return __libc_calloc(count, size);
}

void* realloc(void* ptr, size_t size) {
  note(size);
  return __libc_realloc(ptr, size);
}

void* memalign(size_t alignment, size_t size) {
  note(size);
  return __libc_memalign(alignment, size);
}

void* aligned_alloc(size_t alignment, size_t size) {
  note(size);
  return __libc_memalign(alignment, size);
}

int posix_memalign(void** out, size_t alignment, size_t size) {
  note(size);
  if (alignment % sizeof(void*) != 0 || (alignment & (alignment - 1)) != 0) return EINVAL;
  void* p = __libc_memalign(alignment, size);
  if (p == NULL && size != 0) return ENOMEM;
  *out = p;
  return 0;
}
