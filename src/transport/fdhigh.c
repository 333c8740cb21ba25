/* SPDX-License-Identifier: MIT */
/* fdhigh.c — see fdhigh.h. */
#include "transport/fdhigh.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

static int high_base;
static pthread_once_t base_once = PTHREAD_ONCE_INIT;

static void base_init(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur < 256 ||
	    rl.rlim_cur == RLIM_INFINITY)
		return;
	high_base = (int)(rl.rlim_cur - rl.rlim_cur / 4);
}

int sdp_fd_high(int fd)
{
	int nfd, saved = errno;

	pthread_once(&base_once, base_init);
	if (fd < 0 || !high_base || fd >= high_base)
		return fd;
	nfd = fcntl(fd, F_DUPFD_CLOEXEC, high_base);
	if (nfd < 0) {
		errno = saved;
		return fd;	/* the top is full: a low number still works */
	}
	close(fd);
	errno = saved;
	return nfd;
}
