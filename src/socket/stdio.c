/* SPDX-License-Identifier: MIT */
/*
 * stdio.c — stdio streams on SDP sockets: fdopen, dprintf, vdprintf.
 *
 * Why.  glibc's FILE streams do their I/O with internal calls (__read,
 * __write) that no preloaded library can interpose.  A program that wraps
 * an SDP socket in a FILE (fdopen, then fprintf/fgets) therefore wrote into
 * the descriptor's kernel object, which is the application end of our
 * readiness socketpair, not the connection: the bytes never reached the
 * peer, and a reader got readiness tokens for data.  dprintf() builds such
 * a stream internally.
 *
 * How.  fdopen() of an SDP socket returns a stream made by fopencookie()
 * whose read, write and close are the library's recv, send and close, with
 * the descriptor number in its _fileno, so that fileno() answers as for an
 * fdopen()ed socket (glibc's cookie streams do all their I/O through the
 * cookie functions).  Writes are completed in full unless an error or a
 * signal stops them (a short write sets the stream's error flag, as
 * glibc's own streams do on EINTR); seeks fail with ESPIPE.
 * dprintf/vdprintf and their fortified variants format into memory, then
 * send.  Other descriptors go to glibc.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "socket/sock.h"

/* All of buf, unless an error comes first (then what went, or -1). */
static ssize_t write_all(int fd, const char *buf, size_t n)
{
	size_t done = 0;

	while (done < n) {
		ssize_t r = write(fd, buf + done, n - done);	/* ours */

		if (r < 0)	/* EINTR included, as glibc's own streams */
			return done ? (ssize_t)done : -1;
		done += (size_t)r;
	}
	return (ssize_t)done;
}

static ssize_t ck_read(void *cookie, char *buf, size_t n)
{
	return read((int)(intptr_t)cookie, buf, n);	/* ours */
}

static ssize_t ck_write(void *cookie, const char *buf, size_t n)
{
	return write_all((int)(intptr_t)cookie, buf, n);
}

/* A socket cannot seek (fflush of a read stream asks). */
static int ck_seek(void *cookie, off64_t *pos, int whence)
{
	(void)cookie;
	(void)pos;
	(void)whence;
	errno = ESPIPE;
	return -1;
}

static int ck_close(void *cookie)
{
	return close((int)(intptr_t)cookie);		/* ours */
}

SDP_EXPORT FILE *fdopen(int fd, const char *mode)
{
	static void *real;
	cookie_io_functions_t io = { ck_read, ck_write, ck_seek, ck_close };
	char m[16];
	FILE *f;

	if (!mode || !sdp_fd_mapped(fd)) {
		FILE *(*fn)(int, const char *) = sdp_real_sym(&real, "fdopen");

		return fn ? fn(fd, mode) : (errno = ENOSYS, NULL);
	}
	/* A socket has no end to append at: "a" writes as "w" does. */
	snprintf(m, sizeof(m), "%s", mode);
	if (m[0] == 'a')
		m[0] = 'w';
	f = fopencookie((void *)(intptr_t)fd, m, io);
	if (f)
		f->_fileno = fd;
	return f;
}

static int sdp_vdprintf(int fd, const char *fmt, va_list ap)
{
	char *out;
	int n = vasprintf(&out, fmt, ap);
	ssize_t w;

	if (n < 0)
		return -1;
	w = write_all(fd, out, (size_t)n);
	free(out);
	return w < n ? -1 : n;
}

SDP_EXPORT int vdprintf(int fd, const char *fmt, va_list ap)
{
	static void *real;
	int (*fn)(int, const char *, va_list);

	if (sdp_fd_mapped(fd))
		return sdp_vdprintf(fd, fmt, ap);
	fn = sdp_real_sym(&real, "vdprintf");
	return fn ? fn(fd, fmt, ap) : (errno = ENOSYS, -1);
}

SDP_EXPORT int dprintf(int fd, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vdprintf(fd, fmt, ap);
	va_end(ap);
	return r;
}

/* -D_FORTIFY_SOURCE turns dprintf into these. */
SDP_EXPORT int __vdprintf_chk(int fd, int flag, const char *fmt, va_list ap)
{
	static void *real;
	int (*fn)(int, int, const char *, va_list);

	if (sdp_fd_mapped(fd))
		return sdp_vdprintf(fd, fmt, ap);
	fn = sdp_real_sym(&real, "__vdprintf_chk");
	return fn ? fn(fd, flag, fmt, ap) : (errno = ENOSYS, -1);
}

SDP_EXPORT int __dprintf_chk(int fd, int flag, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = __vdprintf_chk(fd, flag, fmt, ap);
	va_end(ap);
	return r;
}
