/* A recursion through about `kib` KiB of stack, for the tests of a kernel
 * that overflows its stack (tests/check_api.c, tests/plugins/overflow.c):
 * a volatile frame the compiler must keep, and a use of the callee's
 * result after the call, so that it stays a recursion, not a loop. */
#ifndef KB_TESTS_DEEP_STACK_H
#define KB_TESTS_DEEP_STACK_H

static __attribute__((noinline, unused)) int kbt_deep(int kib)
{
	volatile char frame[1024];
	int r;

	frame[0] = (char)kib;
	frame[sizeof(frame) - 1] = 1;
	r = kib <= 1 ? frame[0] : kbt_deep(kib - 1);
	/* The frame in use after the call: Clang turned `kbt_deep(kib - 1) +
	 * frame[...]` into a loop (tail recursion with an accumulator). */
	__asm__ volatile("" : : "r"(frame) : "memory");
	return r + frame[sizeof(frame) - 1];
}

#endif
