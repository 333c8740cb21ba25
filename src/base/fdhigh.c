/* SPDX-License-Identifier: MIT */
/* fdhigh.c — see fdhigh.h. */
#include "base/fdhigh.h"
#include "base/real.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

static int high_base;
static pthread_once_t base_once = PTHREAD_ONCE_INIT;
/* One bit per descriptor below the limit seen at first use: the library's
 * own (fdhigh.h); NULL if it could not be had (nothing is protected). */
static _Atomic uint64_t *internal;
static unsigned internal_nfds;

static void base_init(void)
{
	struct rlimit rl;
	size_t words;
	void *m;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return;
	if (rl.rlim_cur >= 256 && rl.rlim_cur != RLIM_INFINITY)
		high_base = (int)(rl.rlim_cur - rl.rlim_cur / 4);
	internal_nfds = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (1u << 24) ?
			1u << 24 : (unsigned)rl.rlim_cur;
	words = (internal_nfds + 63) / 64;
	/* Pages are only touched where descriptors are marked. */
	m = mmap(NULL, words * 8, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m != MAP_FAILED)
		internal = m;
}

static void mark(int fd, int on)
{
	if (fd < 0 || !internal || (unsigned)fd >= internal_nfds)
		return;
	if (on)
		atomic_fetch_or(&internal[fd / 64], 1ull << (fd % 64));
	else
		atomic_fetch_and(&internal[fd / 64], ~(1ull << (fd % 64)));
}

bool sdp_fd_is_internal(int fd)
{
	const _Atomic uint64_t *bits = internal;

	if (fd < 0 || !bits || (unsigned)fd >= internal_nfds)
		return false;
	return atomic_load_explicit(&bits[fd / 64], memory_order_relaxed) &
	       (1ull << (fd % 64));
}

void sdp_fd_internal_closing(int fd)
{
	if (sdp_fd_is_internal(fd))
		mark(fd, 0);
}

int sdp_fd_next_internal(int from, int to)
{
	const _Atomic uint64_t *bits = internal;

	if (from < 0)
		from = 0;
	if (!bits)
		return -1;
	if ((unsigned)to >= internal_nfds)
		to = (int)internal_nfds - 1;
	for (int fd = from; fd <= to;) {
		uint64_t w = atomic_load_explicit(&bits[fd / 64],
						  memory_order_relaxed) >>
			     (fd % 64);

		if (w)
			return fd + __builtin_ctzll(w) <= to ?
			       fd + __builtin_ctzll(w) : -1;
		fd = (fd / 64 + 1) * 64;
	}
	return -1;
}

int sdp_fd_high(int fd)
{
	int nfd, saved = errno;

	pthread_once(&base_once, base_init);
	if (fd < 0)
		return fd;
	if (!high_base || fd >= high_base) {
		mark(fd, 1);
		return fd;
	}
	nfd = sdp_real.fcntl(fd, F_DUPFD_CLOEXEC, high_base);
	if (nfd < 0) {
		errno = saved;
		mark(fd, 1);
		return fd;	/* the top is full: a low number still works */
	}
	sdp_close(fd);
	mark(nfd, 1);
	errno = saved;
	return nfd;
}
