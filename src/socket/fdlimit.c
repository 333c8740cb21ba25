/* SPDX-License-Identifier: MIT */
/*
 * fdlimit.c — room for the library's descriptors under RLIMIT_NOFILE.
 *
 * Why.  An SDP connection costs its process 4 descriptors where TCP costs
 * one: the application's socketpair end and the library's, the shm
 * rendezvous socket and the peer's wake-up socket (the peer's pidfd is
 * shared per peer process; a connection a fork() shares gets an eventfd
 * and an epoll set more).  Under the common
 * soft limit of 1024 a server that holds 500 TCP connections would fail
 * with EMFILE at about 150 under sdp_run, a difference the program can
 * see.  So, when the library loads,
 * the soft limit is raised toward the hard limit, to SDP_NOFILE (default
 * 65536; 0 leaves the limit alone), never lowered.  The Go runtime does the
 * same since 1.19, for the same reason.  The library's own descriptors sit
 * in the top quarter of the limit (base/fdhigh.c), so the
 * application's numbers stay as low as over TCP, and select() users keep
 * below FD_SETSIZE.  What is left when even the hard limit is too low:
 * an SDP connect that fails for want of descriptors or memory falls back
 * to TCP ("both" policy, socket/switch.c).
 *
 * Children inherit the raised limit (children under sdp_run would raise it
 * themselves anyway).
 */
#include <errno.h>
#include <sys/resource.h>

#include "base/config.h"
#include "socket/sock.h"

void sdp_fdlimit_raise(void)
{
	unsigned long long want = sdp_cfg.nofile;
	struct rlimit rl;
	rlim_t old;

	if (!want || getrlimit(RLIMIT_NOFILE, &rl))
		return;
	if (rl.rlim_max != RLIM_INFINITY && want > rl.rlim_max)
		want = rl.rlim_max;
	if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= want)
		return;
	old = rl.rlim_cur;
	rl.rlim_cur = (rlim_t)want;
	if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
		sdp_log(SDP_LOG_DEBUG, "RLIMIT_NOFILE soft limit %llu -> %llu",
			(unsigned long long)old, want);
}
