// SPDX-License-Identifier: MIT
/*
 * rawsys_hook.c — syscall(2) called by the program for a descriptor
 * call.  Node.js (libuv's uv__close) closes descriptors with
 * syscall(SYS_close, fd): behind the library's back, that left a stale
 * table entry, and the library later acted on a number it no longer
 * owned (another socket's, or one of its own).  The calls that close or
 * replace a descriptor go through the library's own close(), close_range()
 * and dup2()/dup3() instead; seccomp() first relays what a sandbox could
 * not use (sandbox.c); every other system call passes through.  The
 * library's own raw calls never come here (base/rawsys.c).
 */
#include <errno.h>
#include <linux/seccomp.h>
#include <stdarg.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "socket/sock.h"
#include "base/fdhigh.h"

#undef syscall

long sdp_raw_syscall(long nr, ...);

/* Six arguments are read whatever the call takes, as glibc's syscall()
 * does: the last comes from the caller's stack, past what a call with
 * fewer arguments passed.  Harmless (never used), but ASan sees a read
 * outside the caller's frame. */
SDP_EXPORT __attribute__((no_sanitize_address)) long syscall(long nr, ...)
{
	long a[6];
	va_list ap;
	int i;

	va_start(ap, nr);
	for (i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	switch (nr) {
	case SYS_close:
		/* close() refuses the library's own descriptors. */
		return close((int)a[0]);
#ifdef SYS_close_range
	case SYS_close_range:
		return close_range((unsigned int)a[0], (unsigned int)a[1],
				   (int)a[2]);
#endif
#ifdef SYS_dup2
	case SYS_dup2:
		return dup2((int)a[0], (int)a[1]);
#endif
	case SYS_dup3:
		return dup3((int)a[0], (int)a[1], (int)a[2]);
	case SYS_seccomp:	/* a sandbox goes in (sandbox.c) */
		if (a[0] == SECCOMP_SET_MODE_FILTER ||
		    a[0] == SECCOMP_SET_MODE_STRICT)
			sdp_sandbox_entering();
		return sdp_raw_syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
	default:
		return sdp_raw_syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
	}
}
