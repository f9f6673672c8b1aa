/*
 * A kernel instance as a coroutine on the thread that runs its
 * PE_CPU. PE_CPU resumes it when it has no command left; the kernel runs
 * until it has queued a full ring of commands (or ends) and switches back.
 * The ring is its tl context's (kb_cmd_ring): the context stores into it
 * and PE_CPU takes from it, and stream_push and kb__kernel_next do only
 * what needs this file (a full ring, a stopped consumer, a resume).
 * One switch pair per STREAM_CAP commands, no lock, no second thread: a
 * sequential run uses one core. Under the parallel executor the PE_CPU LP
 * may run on a different worker from one window to the next, so the
 * coroutine may be resumed on another thread than before; the executor's
 * barrier orders those resumptions, and the sanitizers are told about every
 * switch (below), so TSan and ASan follow the fiber wherever it runs.
 *
 * With kb_sim_options.kernel_threads the kernel runs on a thread of its own
 * instead (for kernels that need one, such as Python kernels called through
 * ctypes: an interpreter keeps its call stack per thread, so two kernels
 * interleaved on one thread would corrupt it). The hand-off is the same
 * strict alternation, through a mutex and condition variable: only one side
 * runs at a time, so a --threads 1 run still uses one core.
 *
 * The switch itself: on x86-64 a few instructions of our own (kb__fiber_switch
 * below) that save the callee-saved registers, the x87 control word and
 * MXCSR on the old stack and load them from the new one, as boost.context
 * and libco do. glibc's swapcontext also saves and restores the signal mask,
 * an rt_sigprocmask system call on every switch (about 3% of a decode run);
 * the kernel never changes the signal mask, so there is nothing to restore.
 * Other architectures keep swapcontext. Not CET shadow-stack aware: a
 * process with SHSTK enabled would fault on the first return into a fiber
 * (glibc enables SHSTK only on request, Debian 12 never does; IBT is
 * unaffected: the switch is a direct call and enters fibers through ret).
 *
 * The stack is mmap'd with a PROT_NONE guard region below it (stacks grow
 * down on every platform this builds on): a kernel that overflows its
 * stack faults on the guard deterministically (SIGSEGV) instead of writing
 * over other memory. The library does not install a signal handler (that
 * belongs to the application), so the process dies with SIGSEGV at the
 * first touch of the guard region: deterministic, nothing overwritten. An
 * application's handler can tell that fault from others with
 * kb_kernel_stack_fault: each thread keeps, in a thread-local, the stack
 * of the kernel it runs now (set just before each switch into the
 * coroutine, on the resuming thread, since the coroutine may move between
 * threads; restored right after the switch back), and the threads the
 * library starts have an alternate signal stack (base/altstack.h) for a
 * handler to run on. A kernel thread (kernel_threads) sets its record once,
 * to its own stack's guard, which is as wide as a coroutine's.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1   /* RTLD_NEXT, under ASan */
#endif
#include "runtime/kernel.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "base/altstack.h"
#include "base/err.h"
#include "base/tsan.h"
#include "kernbench/simulation.h"

#if defined(__SANITIZE_ADDRESS__)
#define KB_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KB_ASAN 1
#endif
#endif
#if defined(__x86_64__) && !defined(KB_UCONTEXT)
#define KB_FIBER_ASM 1
#endif

#ifdef KB_FIBER_ASM
/* kb__fiber_switch(save, to): saves this side's registers on its stack, stores
 * that stack pointer in *save, and continues on stack `to` where its own
 * kb__fiber_switch call left off (or, the first time, at kb__fiber_start).
 * Frame, from the saved stack pointer up: x87 control word, MXCSR, r15,
 * r14, r13, r12, rbx, rbp, return address. Every other register is caller-saved in
 * the System V ABI, so the compiler saves what it needs around the call. */
void kb__fiber_switch(void **save, void *to);
void kb__fiber_start(void);
__asm__(".text\n"
	".globl kb__fiber_switch\n"
	".hidden kb__fiber_switch\n"
	".type kb__fiber_switch,@function\n"
	"kb__fiber_switch:\n"
#ifdef __CET__
	"\tendbr64\n"
#endif
	"\tpushq %rbp\n"
	"\tpushq %rbx\n"
	"\tpushq %r12\n"
	"\tpushq %r13\n"
	"\tpushq %r14\n"
	"\tpushq %r15\n"
	"\tsubq $16, %rsp\n"
	"\tfnstcw (%rsp)\n"
	"\tstmxcsr 8(%rsp)\n"
	"\tmovq %rsp, (%rdi)\n"
	"\tmovq %rsi, %rsp\n"
	"\tfldcw (%rsp)\n"
	"\tldmxcsr 8(%rsp)\n"
	"\taddq $16, %rsp\n"
	"\tpopq %r15\n"
	"\tpopq %r14\n"
	"\tpopq %r13\n"
	"\tpopq %r12\n"
	"\tpopq %rbx\n"
	"\tpopq %rbp\n"
	"\tret\n"
	".size kb__fiber_switch,.-kb__fiber_switch\n"
	/* A new fiber's first switch returns here: r12 holds the argument,
	 * r13 the entry function; rsp is 16-byte aligned (the frame built in
	 * kb__kernel_start), as a call needs. The entry never returns. */
	".globl kb__fiber_start\n"
	".hidden kb__fiber_start\n"
	".type kb__fiber_start,@function\n"
	"kb__fiber_start:\n"
	"\tmovq %r12, %rdi\n"
	"\tcallq *%r13\n"
	"\tud2\n"
	".size kb__fiber_start,.-kb__fiber_start\n");
#define SWITCH(from, to) kb__fiber_switch(&(from), (to))
#else
#define SWITCH(from, to) kb_swapcontext(&(from), &(to))
#endif

#if defined(KB_ASAN) && !defined(KB_FIBER_ASM)
#include <dlfcn.h>
#include <pthread.h>
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>

/* ASan's swapcontext interceptor prints a warning on first use (it cannot
 * know that every switch here is annotated for it) and clears the shadow of
 * the target stack; the annotations below do that job, so the switch goes
 * to libc's swapcontext directly and stderr stays clean. */
static int (*swap_fn)(ucontext_t *, const ucontext_t *);
static pthread_once_t swap_once = PTHREAD_ONCE_INIT;

static void find_swap(void)
{
	/* POSIX's way to turn dlsym's result into a function pointer. */
	*(void **)&swap_fn = dlsym(RTLD_NEXT, "swapcontext");
	if (!swap_fn)
		swap_fn = swapcontext;
}

static int kb_swapcontext(ucontext_t *from, const ucontext_t *to)
{
	pthread_once(&swap_once, find_swap);
	return swap_fn(from, to);
}
#elif !defined(KB_FIBER_ASM)
#define kb_swapcontext swapcontext
#endif
#ifdef KB_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

/* The stream's capacity: how far the horizon of a parallel run may look
 * ahead (kb__kernel_peek), and how many commands a kernel on a thread of
 * its own hands over per switch. */
#define STREAM_CAP KB_CMD_RING
/* Below the stack; larger than one page so that a big frame that skips a
 * page still lands on it. */
#define GUARD_BYTES ((size_t)64 << 10)

/* A kernel's stack as kb_kernel_stack_fault sees it. */
typedef struct kb_stack_span {
	const char *guard;       /* lowest address of the guard region; NULL: unknown */
	size_t guard_bytes;
	size_t stack_bytes;      /* usable, above the guard */
} kb_stack_span;

/* The stack of the kernel the calling thread runs now (NULL: none).
 * initial-exec, as the command cache (pe/cmd.h): one %fs-relative access,
 * and the read in kb_kernel_stack_fault stays async-signal-safe (a TLS
 * descriptor call may allocate the block on a thread's first use). */
static _Thread_local const kb_stack_span *running_stack __attribute__((tls_model("initial-exec")));

struct kb_kernel_run {
	kb_kernel_fn fn;
	void *args;
	kb_tl *tl;
	/* the stream: tl's ring; PE_CPU resumes the kernel at ring->low
	 * queued commands (< cap); ring->room is cap, 0 once stopped */
	kb_cmd_ring *ring;
	size_t cap;              /* the kernel yields at cap queued commands (<= STREAM_CAP) */
	int stopped;             /* consumer gone: pushes fail */
	int entered, finished;
	size_t stack_bytes;
	char *map;               /* guard + stack */
	size_t map_bytes;
	kb_stack_span span;      /* running_stack while it runs */
#ifdef KB_FIBER_ASM
	void *self, *caller;     /* saved stack pointers (fiber_switch's frames) */
#else
	ucontext_t self, caller;
#endif
	/* kernel_threads: the kernel's thread, and whose turn it is to run */
	int threaded, thread_started, kernel_turn, quit;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
#ifdef KB_TSAN
	void *fiber, *caller_fiber;
#endif
#ifdef KB_ASAN
	void *fake_stack;        /* the kernel's ASan fake stack while suspended */
	const void *caller_bottom;
	size_t caller_size;
#endif
};

/* Threaded mode: hands the turn to the other side; waits for it back
 * unless `last`. */
static void pass_turn(kb_kernel_run *k, int to_kernel, int last)
{
	pthread_mutex_lock(&k->mu);
	k->kernel_turn = to_kernel;
	pthread_cond_broadcast(&k->cv);
	while (!last && k->kernel_turn == to_kernel)
		pthread_cond_wait(&k->cv, &k->mu);
	pthread_mutex_unlock(&k->mu);
}

/* Consumer side: runs the kernel until it yields or ends. */
static void resume(kb_kernel_run *k)
{
	const kb_stack_span *outer;
#ifdef KB_ASAN
	void *fake = NULL;
#endif

	k->entered = 1;
	if (k->threaded) {
		pass_turn(k, 1, 0);
		return;
	}
#ifdef KB_TSAN
	k->caller_fiber = __tsan_get_current_fiber();
	__tsan_switch_to_fiber(k->fiber, 0);
#endif
#ifdef KB_ASAN
	__sanitizer_start_switch_fiber(&fake, k->map + GUARD_BYTES, k->stack_bytes);
#endif
	outer = running_stack;   /* NULL unless a kernel here drives another simulation */
	running_stack = &k->span;
	SWITCH(k->caller, k->self);
	running_stack = outer;
#ifdef KB_ASAN
	__sanitizer_finish_switch_fiber(fake, NULL, NULL);
#endif
}

/* Kernel side: back to whoever resumed it. `last`: never resumed again. */
static void yield(kb_kernel_run *k, int last)
{
	if (k->threaded) {
		pass_turn(k, 0, last);
		return;
	}
#ifdef KB_ASAN
	__sanitizer_start_switch_fiber(last ? NULL : &k->fake_stack, k->caller_bottom,
				       k->caller_size);
#endif
#ifdef KB_TSAN
	__tsan_switch_to_fiber(k->caller_fiber, 0);
#endif
	SWITCH(k->self, k->caller);
#ifdef KB_ASAN
	__sanitizer_finish_switch_fiber(k->fake_stack, &k->caller_bottom, &k->caller_size);
#endif
	(void)last;
}

/* Producer side (the kernel), for what its tl context does not store
 * itself (kb__tl_push): a full stream, where it yields, or a stopped
 * consumer. */
static int stream_push(void *ctx, kb_cmd *c)
{
	kb_kernel_run *k = ctx;

	if (k->ring->count >= k->cap && !k->stopped)
		yield(k, 0);
	if (k->stopped || kb__cmd_ring_put(k->ring, c)) {
		kb__cmd_free(c);
		return -1;
	}
	return 0;
}

static void kernel_main(kb_kernel_run *k)
{
#ifdef KB_ASAN
	if (!k->threaded)
		__sanitizer_finish_switch_fiber(NULL, &k->caller_bottom, &k->caller_size);
#endif
	k->fn(k->tl, k->args);
	kb__tl_finish(k->tl);
	k->finished = 1;
	yield(k, 1);
	/* never resumed */
}

#ifdef KB_FIBER_ASM
/* Entered from kb__fiber_start on the kernel's stack. */
static void fiber_main(void *arg)
{
	kernel_main(arg);
}
#else
/* makecontext passes int arguments only: the pointer in two halves. */
static void ucontext_main(unsigned hi, unsigned lo)
{
	kernel_main((kb_kernel_run *)(((uintptr_t)hi << 16 << 16) | (uintptr_t)lo));
}
#endif

/* A kernel thread's own stack and guard (glibc's, as pthread_create made
 * them): the guard lies right below the usable stack. Left unknown if the
 * system does not say. */
static void thread_span(kb_stack_span *s, size_t stack_bytes)
{
	pthread_attr_t a;
	void *lo;
	size_t size, guard;

	if (pthread_getattr_np(pthread_self(), &a) != 0)
		return;
	if (pthread_attr_getstack(&a, &lo, &size) == 0 &&
	    pthread_attr_getguardsize(&a, &guard) == 0 && guard > 0) {
		s->guard = (const char *)lo - guard;
		s->guard_bytes = guard;
		s->stack_bytes = stack_bytes;
	}
	pthread_attr_destroy(&a);
}

static void *kernel_thread(void *arg)
{
	kb_kernel_run *k = arg;
	kb_altstack alt;
	int quit;

	/* The thread runs nothing but its kernel: the record is set once. */
	kb__altstack_init(&alt);
	thread_span(&k->span, k->stack_bytes);
	running_stack = &k->span;
	pthread_mutex_lock(&k->mu);
	while (!k->kernel_turn && !k->quit)
		pthread_cond_wait(&k->cv, &k->mu);
	quit = k->quit;
	pthread_mutex_unlock(&k->mu);
	if (!quit)
		kernel_main(k);
	running_stack = NULL;
	kb__altstack_fini(&alt);
	return NULL;
}

/* Consumer side (PE_CPU), for what it does not take from the ring
 * itself: at ring->low queued commands, where the kernel runs first. The
 * kernel always ends with END or ERROR, so a command always comes. */
kb_cmd *kb__kernel_next(void *run)
{
	kb_kernel_run *k = run;

	if (k->ring->count <= k->ring->low && !k->finished)
		resume(k);
	if (k->ring->count == 0)
		return NULL;   /* cannot happen: the kernel's last push is END */
	return kb__cmd_ring_take(k->ring);
}

kb_cmd_ring *kb__kernel_ring(kb_kernel_run *k)
{
	return k->ring;
}

/* The commands queued ahead of PE_CPU, oldest first (the lookahead of the
 * PE's horizon). Called between windows: neither PE_CPU nor the kernel
 * runs, and the executor's barrier orders this after both. */
size_t kb__kernel_peek(void *run, size_t skip, const kb_cmd **out, size_t max)
{
	kb_kernel_run *k = run;
	size_t n = 0;

	if (skip < k->ring->count)
		n = k->ring->count - skip < max ? k->ring->count - skip : max;
	for (size_t i = 0; i < n; i++)
		out[i] = k->ring->slot[(k->ring->head + skip + i) % STREAM_CAP];
	return n;
}

int kb__kernel_create(kb_kernel_run **out, kb_kernel_fn fn, void *args, const kb_tl_config *cfg,
		      size_t stack_bytes, int threaded, kb_error *err)
{
	kb_kernel_run *k = calloc(1, sizeof(*k));
	kb_tl_config c = *cfg;

	*out = NULL;
	if (!k)
		return kb__err(err, KB_ENOMEM, "out of memory launching a kernel");
	k->fn = fn;
	k->args = args;
	k->stack_bytes = stack_bytes ? stack_bytes : KB_KERNEL_STACK_DEFAULT;
	k->threaded = threaded;
	k->cap = STREAM_CAP;
	pthread_mutex_init(&k->mu, NULL);
	pthread_cond_init(&k->cv, NULL);
	c.emit = stream_push;
	c.emit_ctx = k;
	k->tl = kb__tl_create(&c);
	if (!k->tl) {
		kb__kernel_destroy(k);
		return kb__err(err, KB_ENOMEM, "out of memory launching a kernel");
	}
	k->ring = kb__tl_ring(k->tl);
	k->ring->room = (uint32_t)k->cap;
	*out = k;
	return KB_OK;
}

void kb__kernel_lookahead(kb_kernel_run *k, size_t n)
{
	k->cap = n < 1 ? 1 : n > STREAM_CAP ? STREAM_CAP : n;
	if (!k->stopped)
		k->ring->room = (uint32_t)k->cap;
	if (k->ring->low >= k->cap)
		k->ring->low = (uint32_t)k->cap - 1;
}

void kb__kernel_low_water(kb_kernel_run *k, size_t n)
{
	k->ring->low = (uint32_t)(n < k->cap ? n : k->cap - 1);
}

int kb__kernel_start(kb_kernel_run *k, kb_error *err)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	uintptr_t p = (uintptr_t)k;

	k->stack_bytes = (k->stack_bytes + page - 1) / page * page;
	if (k->threaded) {
		pthread_attr_t a;
		int rc = pthread_attr_init(&a);

		/* The thread's own stack, with a guard as wide as a
		 * coroutine's (the system's is one page, which a frame of a
		 * few KiB steps over). */
		if (!rc)
			rc = pthread_attr_setstacksize(&a, k->stack_bytes);
		if (!rc)
			rc = pthread_attr_setguardsize(&a, GUARD_BYTES);
		if (!rc)
			rc = pthread_create(&k->thread, &a, kernel_thread, k);
		pthread_attr_destroy(&a);
		if (rc)
			return kb__err(err, KB_ENOMEM, "kernel_threads: cannot start a kernel thread "
				       "(%s): more threads than the system allows this user?",
				       strerror(rc));
		k->thread_started = 1;
		return KB_OK;
	}
	k->map_bytes = GUARD_BYTES + k->stack_bytes;
	k->map = mmap(NULL, k->map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (k->map == MAP_FAILED) {
		k->map = NULL;
		return kb__err(err, KB_ENOMEM, "cannot map a %zu-byte kernel stack", k->stack_bytes);
	}
	k->span.guard = k->map;
	k->span.guard_bytes = GUARD_BYTES;
	k->span.stack_bytes = k->stack_bytes;
#ifdef KB_FIBER_ASM
	if (mprotect(k->map, GUARD_BYTES, PROT_NONE))
		return kb__err(err, KB_ENOMEM, "cannot set up a kernel stack");
	{
		/* kb__fiber_switch's frame (see there), as if saved by a switch
		 * away from kb__fiber_start; the x87 control word and MXCSR
		 * are this thread's. Below the top: 16 bytes that keep rsp
		 * 16-byte aligned at kb__fiber_start's call. */
		uint64_t *f = (uint64_t *)(k->map + k->map_bytes - 16) - 9;
		uint16_t fcw;
		uint32_t csr;

		__asm__ volatile("fnstcw %0" : "=m"(fcw));
		__asm__ volatile("stmxcsr %0" : "=m"(csr));
		memset(f, 0, 9 * sizeof(*f));
		f[0] = fcw;
		f[1] = csr;
		f[4] = (uint64_t)(uintptr_t)fiber_main;   /* r13 */
		f[5] = (uint64_t)p;                      /* r12 */
		f[8] = (uint64_t)(uintptr_t)kb__fiber_start;
		k->self = f;
	}
#else
	if (mprotect(k->map, GUARD_BYTES, PROT_NONE) || getcontext(&k->self))
		return kb__err(err, KB_ENOMEM, "cannot set up a kernel stack");
	k->self.uc_stack.ss_sp = k->map + GUARD_BYTES;
	k->self.uc_stack.ss_size = k->stack_bytes;
	k->self.uc_link = NULL;
	makecontext(&k->self, (void (*)(void))ucontext_main, 2, (unsigned)(p >> 16 >> 16),
		    (unsigned)(p & 0xffffffffu));
#endif
#ifdef KB_TSAN
	k->fiber = __tsan_create_fiber(0);
#endif
	return KB_OK;
}

void kb__kernel_stop(kb_kernel_run *k)
{
	if (!k)
		return;
	k->stopped = 1;
	if (k->ring)
		k->ring->room = 0;   /* every push through stream_push, which fails it */
	/* A kernel suspended half-way finishes now: its pushes fail, tl turns
	 * every later call into an error, and it returns and frees what it
	 * holds. One that never ran is not started at all. */
	if (k->entered && !k->finished)
		resume(k);
}

void kb__kernel_destroy(kb_kernel_run *k)
{
	if (!k)
		return;
	kb__kernel_stop(k);
	if (k->thread_started) {
		pthread_mutex_lock(&k->mu);
		k->quit = 1;   /* a thread whose kernel never ran leaves */
		pthread_cond_broadcast(&k->cv);
		pthread_mutex_unlock(&k->mu);
		pthread_join(k->thread, NULL);
	}
	while (k->ring && k->ring->count)
		kb__cmd_free(kb__cmd_ring_take(k->ring));
	kb__tl_destroy(k->tl);
#ifdef KB_TSAN
	if (k->fiber)
		__tsan_destroy_fiber(k->fiber);
#endif
	pthread_mutex_destroy(&k->mu);
	pthread_cond_destroy(&k->cv);
	if (k->map) {
#ifdef KB_ASAN
		/* Frames left on a finished kernel's stack keep their redzones
		 * poisoned; the next mapping at this address must not inherit them. */
		__asan_unpoison_memory_region(k->map + GUARD_BYTES, k->stack_bytes);
#endif
		munmap(k->map, k->map_bytes);
	}
	free(k);
}

/* Async-signal-safe: a thread-local read (initial-exec) and a few loads
 * of the record, which lives as long as its kernel runs. */
KB_API int kb_kernel_stack_fault(const void *addr, size_t *stack_bytes)
{
	const kb_stack_span *s = running_stack;
	uintptr_t a = (uintptr_t)addr;

	if (!s || !s->guard || a < (uintptr_t)s->guard ||
	    a - (uintptr_t)s->guard >= s->guard_bytes)
		return 0;
	if (stack_bytes)
		*stack_bytes = s->stack_bytes;
	return 1;
}

uint64_t kb__kernel_commands(const kb_kernel_run *k)
{
	return k && k->tl ? kb__tl_commands(k->tl) : 0;
}

void kb__kernel_tiles(const kb_kernel_run *k, uint64_t *tiles, uint64_t *loop_ps)
{
	*tiles = *loop_ps = 0;
	if (k && k->tl)
		kb__tl_tiles(k->tl, tiles, loop_ps);
}
