// SPDX-License-Identifier: MIT
/*
 * sandbox.c — a process that restricts its own system calls.
 *
 * OpenSSH's preauth child, and other privilege-separated servers, fork a
 * child that drops privileges and installs a seccomp filter allowing little
 * more than read, write and poll on the connection, then talks to the
 * client.  Under libsdp the connection's first use in that child would need
 * the engine: taking it over from the process that drives it (shared
 * memory, a progress thread, epoll descriptors), every one a system call
 * the filter kills the process for (SIGSYS).
 *
 * So the moment the filter goes in (prctl(PR_SET_SECCOMP) or seccomp(2),
 * before the real call), each connection this process holds but does not
 * drive is relayed *in place* by the ancestor that drives it
 * (engine/relay.h): the descriptor's own AF_UNIX pair becomes the stream,
 * and the descriptor leaves the library's table, here and in every other
 * process that holds it.  The sandboxed code then reads and writes a plain
 * socket with the system calls it was allowed.  A connection this process
 * drives itself stays as it is (its progress thread, created before the
 * filter, is not filtered).
 *
 * A descriptor limit lowered below what taking over a connection needs is
 * the same kind of step: vsftpd's unprivileged session child (and OpenSSH's
 * preauth child, before its filter) sets RLIMIT_NOFILE to 0, after which
 * the engine could not make the epoll set, eventfd and timerfd of its
 * progress thread, and the first write on the control connection failed.
 */
#include <errno.h>
#include <linux/seccomp.h>
#include <stdarg.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/config.h"
#include "engine/conn.h"
#include "base/owner.h"
#include "engine/relay.h"
#include "engine/stats_shm.h"
#include "base/real.h"
#include "socket/sock.h"

long sdp_raw_syscall(long nr, ...);

void sdp_sandbox_entering(void)
{
	int fd, r;

	for (fd = sdp_fd_scan_next(0); fd >= 0; fd = sdp_fd_scan_next(fd + 1)) {
		struct sdp_sock *s = sdp_fd_get(fd);

		if (!s)
			continue;
		if (s->kind == SDP_SK_CONN && s->conn &&
		    !sdp_owner_is_me(s->conn->owner_slot)) {
			r = sdp_relay_ask_in_place(s->conn, fd);
			if (r < 0 && r != -EBUSY)
				sdp_log(SDP_LOG_INFO, "fd %d: not relayed before "
					"the seccomp filter (%s): its first use "
					"in the sandbox may be refused", fd,
					strerror(-r));
		}
		sdp_sock_put(s);
		/* Relayed (now or by an earlier ask): the lookup makes the
		 * descriptor plain while system calls are still allowed. */
		s = sdp_fd_get(fd);
		if (s)
			sdp_sock_put(s);
	}
	/* Its exit must not need a system call either. */
	sdp_stat_leave();
}

static int filter_mode(int option, unsigned long mode)
{
	return option == PR_SET_SECCOMP && mode == SECCOMP_MODE_FILTER;
}

SDP_EXPORT int prctl(int option, ...)
{
	unsigned long a[4];
	va_list ap;
	int i;

	va_start(ap, option);
	for (i = 0; i < 4; i++)
		a[i] = va_arg(ap, unsigned long);
	va_end(ap);
	if (filter_mode(option, a[0]) || (option == PR_SET_SECCOMP &&
					   a[0] == SECCOMP_MODE_STRICT))
		sdp_sandbox_entering();
	return (int)sdp_raw_syscall(SYS_prctl, option, a[0], a[1], a[2], a[3]);
}

/* Fewer descriptors than this leave no room to take over a connection
 * (progress thread: epoll set, eventfd, timerfd; readiness pair; stats). */
#define SANDBOX_NOFILE 64

static void nofile_lowering(const struct rlimit *rl)
{
	struct rlimit now;

	/* Lowered, not raised: the library raises its own limit at load
	 * (fdlimit.c), at most to a hard limit that may be small. */
	if (rl->rlim_cur < SANDBOX_NOFILE && !sdp_in_memory_sharing_child() &&
	    getrlimit(RLIMIT_NOFILE, &now) == 0 &&
	    rl->rlim_cur < now.rlim_cur)
		sdp_sandbox_entering();
}

/* The sanitizers' runtime calls setrlimit() while it starts, before its
 * shadow memory exists: these entry points must not be instrumented, and
 * leave everything but RLIMIT_NOFILE to the C library's prlimit() (not
 * interposed) at once. */
#define NO_SANITIZE __attribute__((no_sanitize_address, no_sanitize_thread))

NO_SANITIZE long sdp_sandbox_prlimit(long pid, long resource,
				     const void *new_limit, void *old_limit)
{
	long r;

	if (resource == RLIMIT_NOFILE && new_limit &&
	    (!pid || pid == (long)getpid()))
		nofile_lowering(new_limit);
	r = prlimit((pid_t)pid, (__rlimit_resource_t)resource, new_limit,
		    old_limit);
	if (resource == RLIMIT_NOFILE && new_limit)
		sdp_conn_fd_limit_changed();
	return r;
}

NO_SANITIZE SDP_EXPORT int setrlimit(__rlimit_resource_t resource,
				     const struct rlimit *rl)
{
	return (int)sdp_sandbox_prlimit(0, resource, rl, NULL);
}

NO_SANITIZE SDP_EXPORT int setrlimit64(__rlimit_resource_t resource,
				       const struct rlimit64 *rl)
{
	return (int)sdp_sandbox_prlimit(0, resource, rl, NULL);
}
