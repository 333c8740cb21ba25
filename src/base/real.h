/* SPDX-License-Identifier: MIT */
/*
 * real.h — the C library's own socket functions, resolved once with
 * dlsym(RTLD_NEXT).  The library calls these (never its interposed
 * versions) for its own descriptors, and the socket switch forwards every
 * non-SDP descriptor to them.
 */
#ifndef SDP_BASE_REAL_H
#define SDP_BASE_REAL_H

#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

struct sdp_real_fns {
	int (*socket)(int, int, int);
	int (*socketpair)(int, int, int, int[2]);
	int (*bind)(int, const struct sockaddr *, socklen_t);
	int (*listen)(int, int);
	int (*accept)(int, struct sockaddr *, socklen_t *);
	int (*accept4)(int, struct sockaddr *, socklen_t *, int);
	int (*connect)(int, const struct sockaddr *, socklen_t);
	int (*close)(int);
	int (*shutdown)(int, int);
	ssize_t (*send)(int, const void *, size_t, int);
	ssize_t (*recv)(int, void *, size_t, int);
	ssize_t (*sendto)(int, const void *, size_t, int,
			  const struct sockaddr *, socklen_t);
	ssize_t (*recvfrom)(int, void *, size_t, int, struct sockaddr *,
			    socklen_t *);
	ssize_t (*sendmsg)(int, const struct msghdr *, int);
	ssize_t (*recvmsg)(int, struct msghdr *, int);
	ssize_t (*read)(int, void *, size_t);
	ssize_t (*write)(int, const void *, size_t);
	ssize_t (*readv)(int, const struct iovec *, int);
	ssize_t (*writev)(int, const struct iovec *, int);
	int (*getsockopt)(int, int, int, void *, socklen_t *);
	int (*setsockopt)(int, int, int, const void *, socklen_t);
	int (*getsockname)(int, struct sockaddr *, socklen_t *);
	int (*getpeername)(int, struct sockaddr *, socklen_t *);
	int (*fcntl)(int, int, ...);
	int (*ioctl)(int, unsigned long, ...);
	int (*dup)(int);
	int (*dup2)(int, int);
	int (*dup3)(int, int, int);
	int (*epoll_ctl)(int, int, int, struct epoll_event *);
	int (*epoll_wait)(int, struct epoll_event *, int, int);
	int (*epoll_create1)(int);
	int (*poll)(struct pollfd *, nfds_t, int);
};

extern struct sdp_real_fns sdp_real;

/* Resolve the table (idempotent, thread-safe).  Returns 0, or -ENOSYS if a
 * symbol is missing, in which case the socket switch stays out of the way. */
int sdp_real_init(void);

/* The library closes its own descriptors with this, never through the
 * interposed close(): the C library's close, and the descriptor's mark
 * as the library's own (base/fdhigh.h) dropped. */
int sdp_close(int fd);

#endif
