/* SPDX-License-Identifier: MIT */
/*
 * real.c — resolve the C library's socket functions once.  Every dlsym is
 * checked: a missing symbol disables interposition instead of crashing later.
 */
#include "base/real.h"
#include "base/fdhigh.h"

#include <dlfcn.h>
#include <sys/syscall.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

struct sdp_real_fns sdp_real;
static pthread_once_t real_once = PTHREAD_ONCE_INIT;
static int real_status;

#define RESOLVE(name)                                                        \
	do {                                                                 \
		*(void **)&sdp_real.name = dlsym(RTLD_NEXT, #name);          \
		if (!sdp_real.name) {                                        \
			*(void **)&sdp_real.name = dlsym(RTLD_DEFAULT, #name); \
		}                                                            \
		if (!sdp_real.name)                                          \
			real_status = -ENOSYS;                               \
	} while (0)

static int (*glibc_close)(int);

static int close_own(int fd)
{
	sdp_fd_internal_closing(fd);
	return glibc_close(fd);
}

static void real_resolve(void)
{
	RESOLVE(socket);
	RESOLVE(socketpair);
	RESOLVE(bind);
	RESOLVE(listen);
	RESOLVE(accept);
	RESOLVE(accept4);
	RESOLVE(connect);
	RESOLVE(close);
	RESOLVE(shutdown);
	RESOLVE(send);
	RESOLVE(recv);
	RESOLVE(sendto);
	RESOLVE(recvfrom);
	RESOLVE(sendmsg);
	RESOLVE(recvmsg);
	RESOLVE(read);
	RESOLVE(write);
	RESOLVE(readv);
	RESOLVE(writev);
	RESOLVE(getsockopt);
	RESOLVE(setsockopt);
	RESOLVE(getsockname);
	RESOLVE(getpeername);
	RESOLVE(fcntl);
	RESOLVE(ioctl);
	RESOLVE(dup);
	RESOLVE(dup2);
	RESOLVE(dup3);
	RESOLVE(epoll_ctl);
	RESOLVE(epoll_wait);
	RESOLVE(epoll_create1);
	RESOLVE(poll);
	/* The library's close of its own descriptors drops their mark. */
	glibc_close = sdp_real.close;
	sdp_real.close = close_own;
	if (real_status) {
		static const char msg[] = "libsdp: cannot resolve the C library's "
					  "socket functions; SDP disabled\n";
		if (write(2, msg, sizeof(msg) - 1) < 0) {
			/* nothing else to do */
		}
	}
}

/* Resolved while the library loads, before anything can call through
 * sdp_real: every layer below the socket switch makes its system calls
 * there, never through the interposed names (which would look each
 * descriptor up in the switch's table first). */
__attribute__((constructor(101))) static void real_ctor(void)
{
	sdp_real_init();
}

int sdp_real_init(void)
{
	pthread_once(&real_once, real_resolve);
	return real_status;
}

int sdp_close(int fd)
{
	/* Resolved by real_ctor; only a C library without close() leaves
	 * it unset. */
	if (!glibc_close) {
		sdp_fd_internal_closing(fd);
		return (int)syscall(SYS_close, fd);
	}
	return close_own(fd);
}
