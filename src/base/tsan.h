/* Happens-before annotations for ThreadSanitizer around liburcu's queues,
 * whose atomics are inline assembly that TSan cannot see. No-ops otherwise. */
#ifndef KB_BASE_TSAN_H
#define KB_BASE_TSAN_H

#if defined(__SANITIZE_THREAD__)
#define KB_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define KB_TSAN 1
#endif
#endif

#ifdef KB_TSAN
#include <sanitizer/tsan_interface.h>
#define KB_TSAN_RELEASE(p) __tsan_release((void *)(p))
#define KB_TSAN_ACQUIRE(p) __tsan_acquire((void *)(p))
#else
#define KB_TSAN_RELEASE(p) ((void)(p))
#define KB_TSAN_ACQUIRE(p) ((void)(p))
#endif

#endif
