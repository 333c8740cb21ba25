// SPDX-License-Identifier: MIT
/*
 * rawsys_hook.c — syscall(2) called by the program for a descriptor
 * call.  Node.js (libuv's uv__close) closes descriptors with
 * syscall(SYS_close, fd): behind the library's back, that left a stale
 * table entry, and the library later acted on a number it no longer
 * owned (another socket's, or one of its own).  The calls that close or
 * replace a descriptor go through the library's own close(), close_range()
 * and dup2()/dup3() instead; seccomp() first relays what a sandbox could
 * not use (sandbox.c); a clone() that makes a process as fork() does
 * (vsftpd's session child: CLONE_NEWIPC | SIGCHLD, no stack) runs the
 * library's fork handlers around it, so that the child can use the
 * connections it inherits; every other system call passes through.  The
 * library's own raw calls never come here (base/rawsys.c).
 */
#include <errno.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <stdarg.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "socket/sock.h"
#include "base/atfork.h"
#include "base/fdhigh.h"

#undef syscall

long sdp_raw_syscall(long nr, ...);

/* What a clone() may ask and still be a fork: a copy of the memory and the
 * descriptor table, in new namespaces or not, with the ids it reports.
 * Sharing memory (a vfork, a thread: socket.c's memory-sharing child), the
 * descriptor table or a stack of its own is not a fork.  Nor is a new PID
 * or user namespace: the family names its processes by pid (owner slots,
 * relays), and there the child's pid is 1, its parent's 0, and its ids
 * are mapped; such a child keeps the memory-sharing child's rules. */
#define CLONE_AS_FORK (CSIGNAL | CLONE_PARENT_SETTID | CLONE_CHILD_SETTID | \
		       CLONE_CHILD_CLEARTID | CLONE_PIDFD | CLONE_PTRACE | \
		       CLONE_UNTRACED | CLONE_IO | CLONE_NEWNS | \
		       CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | \
		       CLONE_NEWNET)

static long clone_call(void *arg)
{
	const long *a = arg;

	return sdp_raw_syscall(SYS_clone, a[0], a[1], a[2], a[3], a[4], a[5]);
}

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
	case SYS_clone:
		if (!(a[0] & ~(long)CLONE_AS_FORK) && !a[1])
			return sdp_atfork_around(clone_call, a);
		return sdp_raw_syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
	case SYS_prlimit64:	/* so may a descriptor limit (sandbox.c) */
		return sdp_sandbox_prlimit(a[0], a[1], (const void *)a[2],
					   (void *)a[3]);
	case SYS_setrlimit:
		return sdp_sandbox_prlimit(0, a[0], (const void *)a[1], NULL);
	case SYS_seccomp:	/* a sandbox goes in (sandbox.c) */
		if (a[0] == SECCOMP_SET_MODE_FILTER ||
		    a[0] == SECCOMP_SET_MODE_STRICT)
			sdp_sandbox_entering();
		return sdp_raw_syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
	default:
		return sdp_raw_syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
	}
}
