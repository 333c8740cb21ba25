/* SPDX-License-Identifier: MIT */
/*
 * unit_tap.h — TAP output and checks for the unit tests (the engine tests
 * take the checks from here and add their own runner in engine_helpers.h).
 * A check that fails prints where and what (flushed: forked sub-runs share
 * stdout), and fails its test; the binary exits 1 if any test failed.
 */
#ifndef SDP_TEST_UNIT_TAP_H
#define SDP_TEST_UNIT_TAP_H

#include <stdio.h>

static int g_checks_failed;	/* failures in the current test */
/* Said before each failure: which process of a forked test ("child: "). */
static const char *g_who = "";

#define CHECK_EQ(a, b)                                                       \
	do {                                                                 \
		long long a_ = (long long)(a), b_ = (long long)(b);          \
		if (a_ != b_) {                                              \
			printf("#   %s%s:%d: CHECK_EQ(%s, %s): %lld != %lld\n", \
			       g_who, __FILE__, __LINE__, #a, #b, a_, b_);   \
			fflush(stdout);                                      \
			g_checks_failed++;                                   \
		}                                                            \
	} while (0)

#define CHECK(c)                                                             \
	do {                                                                 \
		if (!(c)) {                                                  \
			printf("#   %s%s:%d: CHECK(%s) failed\n", g_who,     \
			       __FILE__, __LINE__, #c);                      \
			fflush(stdout);                                      \
			g_checks_failed++;                                   \
		}                                                            \
	} while (0)

struct unit_test {
	void (*fn)(void);
	const char *name;
};

/* Run every test, one TAP line each; the process's exit status. */
static inline int unit_run_all(const struct unit_test *t, int n)
{
	int failed = 0;

	printf("1..%d\n", n);
	for (int i = 0; i < n; i++) {
		g_checks_failed = 0;
		t[i].fn();
		printf("%sok %d - %s\n", g_checks_failed ? "not " : "", i + 1,
		       t[i].name);
		fflush(stdout);
		failed += !!g_checks_failed;
	}
	if (failed)
		printf("# %d of %d tests failed\n", failed, n);
	return failed ? 1 : 0;
}

#endif
