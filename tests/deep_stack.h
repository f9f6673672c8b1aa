/* A recursion through about `kib` KiB of stack, for the tests of a kernel
 * that overflows its stack (tests/check_api.c, tests/plugins/overflow.c):
 * a volatile frame the compiler must keep, and a use of the callee's
 * result after the call, so that it stays a recursion, not a loop. */
#ifndef KB_TESTS_DEEP_STACK_H
#define KB_TESTS_DEEP_STACK_H

static inline int kbt_deep(int kib)
{
	volatile char frame[1024];

	frame[0] = (char)kib;
	frame[sizeof(frame) - 1] = 1;
	return kib <= 1 ? frame[0] : kbt_deep(kib - 1) + frame[sizeof(frame) - 1];
}

#endif
