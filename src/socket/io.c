/* SPDX-License-Identifier: MIT */
/*
 * io.c — the data entry points: send, sendto, sendmsg, sendmmsg, write,
 * writev, recv, recvfrom, recvmsg, recvmmsg, read, readv and the
 * fortified/_chk aliases glibc uses, so no call slips past the switch.
 * Each maps the descriptor, then hands an iovec to the engine; SIGPIPE and
 * errno are produced here, at the boundary.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <time.h>
#include <unistd.h>

#include "base/cancel.h"
#include "base/real.h"
#include "socket/sock.h"

/* conn_of() result: another process uses the connection (fork). */
#define ERR_PTR_BADFD ((struct sdp_conn *)(intptr_t)-1)

/* Hold both the socket and its connection for the duration of a call. */
static struct sdp_conn *conn_of(struct sdp_sock *s)
{
	struct sdp_conn *c = NULL;

	pthread_mutex_lock(&s->lock);
	if (s->kind == SDP_SK_CONN) {
		c = s->conn;
		sdp_conn_get(c);
	}
	pthread_mutex_unlock(&s->lock);
	if (!c)
		return NULL;
	/* Counted before the claim: a connection just taken over is not
	 * handed on again before this call has run (engine/handover.h). */
	sdp_conn_call_begin(c);
	if (sdp_conn_claim(c) < 0) {
		/* Another live process uses this connection (fork). */
		sdp_conn_call_end(c);
		sdp_conn_put(c);
		return ERR_PTR_BADFD;
	}
	return c;
}

static void conn_done(struct sdp_conn *c)
{
	sdp_conn_call_end(c);
	sdp_conn_put(c);
}

/* The connection went to another process of the family while the call
 * waited (-ERESTART, engine/handover.h): ask for it back.  0, or the
 * error the call returns (`none`: the socket has no connection now). */
static int conn_again(struct sdp_sock *s, struct sdp_conn **c, int none)
{
	conn_done(*c);
	*c = conn_of(s);
	if (*c == ERR_PTR_BADFD)
		return -EBADFD;
	return *c ? 0 : none;
}

static int io_flags(struct sdp_sock *s)
{
	return atomic_load(&s->nonblock) ? SDP_IO_NONBLOCK : 0;
}

static ssize_t sock_send(struct sdp_sock *s, const struct iovec *iov, int cnt,
			 int flags)
{
	struct sdp_conn *c = conn_of(s);
	ssize_t r;

	if (c == ERR_PTR_BADFD)
		return -EBADFD;
	if (!c) {
		r = -EPIPE;	/* as Linux TCP: never connected -> EPIPE */
		goto out;
	}
	while ((r = sdp_conn_send(c, iov, cnt, flags, io_flags(s),
				  s->sndtimeo_ms)) == -ERESTART) {
		int e = conn_again(s, &c, -EPIPE);

		if (e)
			return e;
	}
	conn_done(c);
out:
	if (r == -EPIPE && !(flags & MSG_NOSIGNAL))
		raise(SIGPIPE);		/* as the kernel: to the calling thread */
	return r;
}

static ssize_t sock_recv(struct sdp_sock *s, const struct iovec *iov, int cnt,
			 int flags)
{
	struct sdp_conn *c = conn_of(s);
	ssize_t r;

	if (c == ERR_PTR_BADFD)
		return -EBADFD;
	if (!c)
		return -ENOTCONN;
	while ((r = sdp_conn_recv(c, iov, cnt, flags, io_flags(s),
				  s->rcvtimeo_ms)) == -ERESTART) {
		int e = conn_again(s, &c, -ENOTCONN);

		if (e)
			return e;
	}
	conn_done(c);
	return r;
}

/* The end of every data call on an SDP descriptor, which began with
 * sdp_cancel_enter() (each is a cancellation point, base/cancel.h): a
 * pending pthread_cancel may act only once the socket is released. */
static ssize_t io_end(struct sdp_sock *s, ssize_t r)
{
	sdp_sock_put(s);
	sdp_cancel_leave(r, 1);
	return sdp_sret(r);
}

static ssize_t send1(struct sdp_sock *s, const void *buf, size_t len, int flags)
{
	struct iovec v = { .iov_base = (void *)buf, .iov_len = len };

	sdp_cancel_enter();
	return io_end(s, sock_send(s, &v, 1, flags));
}

static ssize_t recv1(struct sdp_sock *s, void *buf, size_t len, int flags)
{
	struct iovec v = { .iov_base = buf, .iov_len = len };

	sdp_cancel_enter();
	return io_end(s, sock_recv(s, &v, 1, flags));
}

static int iov_ok(const struct iovec *iov, int cnt)
{
	return cnt >= 0 && cnt <= IOV_MAX && (cnt == 0 || iov);
}

SDP_EXPORT ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	struct sdp_sock *s = sdp_fd_get(fd);

	if (!s) {
		sdp_real_init();
		return sdp_real.send(fd, buf, len, flags);
	}
	return send1(s, buf, len, flags);
}

SDP_EXPORT ssize_t sendto(int fd, const void *buf, size_t len, int flags,
			  const struct sockaddr *to, socklen_t tolen)
{
	struct sdp_sock *s = sdp_fd_get(fd);

	if (!s) {
		sdp_real_init();
		return sdp_real.sendto(fd, buf, len, flags, to, tolen);
	}
	return send1(s, buf, len, flags);	/* address ignored, as TCP */
}

SDP_EXPORT ssize_t write(int fd, const void *buf, size_t len)
{
	struct sdp_sock *s = sdp_fd_get(fd);

	if (!s) {
		sdp_real_init();
		return sdp_real.write(fd, buf, len);
	}
	return send1(s, buf, len, 0);
}

SDP_EXPORT ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
	struct sdp_sock *s = sdp_fd_get(fd);
	ssize_t r;

	if (!s) {
		sdp_real_init();
		return sdp_real.writev(fd, iov, cnt);
	}
	sdp_cancel_enter();
	r = iov_ok(iov, cnt) ? sock_send(s, iov, cnt, 0) : -EINVAL;
	return io_end(s, r);
}

SDP_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	struct sdp_sock *s = sdp_fd_get(fd);
	ssize_t r;

	if (!s) {
		sdp_real_init();
		if (msg && msg->msg_controllen && msg->msg_control) {
			int e = sdp_passfd_prepare(msg);

			if (e < 0)
				return sdp_ret(e);
		}
		return sdp_real.sendmsg(fd, msg, flags);
	}
	sdp_cancel_enter();
	if (!msg || !iov_ok(msg->msg_iov, (int)msg->msg_iovlen))
		r = -EINVAL;
	else if (msg->msg_controllen)
		r = -EOPNOTSUPP;	/* no ancillary data on SDP streams */
	else
		r = sock_send(s, msg->msg_iov, (int)msg->msg_iovlen, flags);
	return io_end(s, r);
}

SDP_EXPORT ssize_t recv(int fd, void *buf, size_t len, int flags)
{
	struct sdp_sock *s = sdp_fd_get(fd);

	if (!s) {
		sdp_real_init();
		return sdp_real.recv(fd, buf, len, flags);
	}
	return recv1(s, buf, len, flags);
}

SDP_EXPORT ssize_t recvfrom(int fd, void *buf, size_t len, int flags,
			    struct sockaddr *from, socklen_t *fromlen)
{
	struct sdp_sock *s = sdp_fd_get(fd);

	if (!s) {
		sdp_real_init();
		return sdp_real.recvfrom(fd, buf, len, flags, from, fromlen);
	}
	if (from && fromlen)
		*fromlen = 0;	/* connected stream: no source address */
	return recv1(s, buf, len, flags);
}

SDP_EXPORT ssize_t read(int fd, void *buf, size_t len)
{
	struct sdp_sock *s = sdp_fd_get(fd);

	if (!s) {
		sdp_real_init();
		return sdp_real.read(fd, buf, len);
	}
	return recv1(s, buf, len, 0);
}

SDP_EXPORT ssize_t readv(int fd, const struct iovec *iov, int cnt)
{
	struct sdp_sock *s = sdp_fd_get(fd);
	ssize_t r;

	if (!s) {
		sdp_real_init();
		return sdp_real.readv(fd, iov, cnt);
	}
	sdp_cancel_enter();
	r = iov_ok(iov, cnt) ? sock_recv(s, iov, cnt, 0) : -EINVAL;
	return io_end(s, r);
}

SDP_EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	struct sdp_sock *s = sdp_fd_get(fd);
	ssize_t r;

	if (!s) {
		sdp_real_init();
		return sdp_real.recvmsg(fd, msg, flags);
	}
	sdp_cancel_enter();
	if (!msg || !iov_ok(msg->msg_iov, (int)msg->msg_iovlen)) {
		r = -EINVAL;
	} else {
		r = sock_recv(s, msg->msg_iov, (int)msg->msg_iovlen, flags);
		msg->msg_namelen = 0;
		msg->msg_controllen = 0;
		msg->msg_flags = (r > 0 && (flags & MSG_OOB)) ? MSG_OOB : 0;
	}
	return io_end(s, r);
}

void *sdp_real_sym(void **slot, const char *name)
{
	void *fn = __atomic_load_n(slot, __ATOMIC_ACQUIRE);

	if (!fn) {
		fn = dlsym(RTLD_NEXT, name);
		__atomic_store_n(slot, fn, __ATOMIC_RELEASE);
	}
	return fn;
}

static ssize_t msg_iov_len(const struct msghdr *m)
{
	size_t n = 0;

	for (size_t i = 0; i < m->msg_iovlen; i++)
		n += m->msg_iov[i].iov_len;
	return (ssize_t)n;
}

/* One message of sendmmsg()/recvmmsg(): the checks of sendmsg/recvmsg. */
static ssize_t mmsg_one(struct sdp_sock *s, struct msghdr *m, int flags,
			int sending)
{
	ssize_t r;

	if (!iov_ok(m->msg_iov, (int)m->msg_iovlen))
		return -EINVAL;
	if (sending)
		return m->msg_controllen ? -EOPNOTSUPP :
		       sock_send(s, m->msg_iov, (int)m->msg_iovlen, flags);
	r = sock_recv(s, m->msg_iov, (int)m->msg_iovlen, flags);
	m->msg_namelen = 0;
	m->msg_controllen = 0;
	m->msg_flags = (r > 0 && (flags & MSG_OOB)) ? MSG_OOB : 0;
	return r;
}

/* sendmmsg() as the kernel runs it on a stream socket: sendmsg() per
 * entry, stopping at an error or a short send; the count of entries sent
 * if any was, else the error.  At most UIO_MAXIOV entries. */
SDP_EXPORT int sendmmsg(int fd, struct mmsghdr *vec, unsigned int vlen,
			int flags)
{
	static void *real;
	struct sdp_sock *s = sdp_fd_get(fd);
	unsigned int i;
	ssize_t r = 0;

	if (!s) {
		int (*fn)(int, struct mmsghdr *, unsigned int, int) =
			sdp_real_sym(&real, "sendmmsg");
		return fn ? fn(fd, vec, vlen, flags) : (errno = ENOSYS, -1);
	}
	sdp_cancel_enter();
	if (vlen > IOV_MAX)
		vlen = IOV_MAX;
	for (i = 0; i < vlen; i++) {
		r = mmsg_one(s, &vec[i].msg_hdr, flags, 1);
		if (r < 0)
			break;
		vec[i].msg_len = (unsigned int)r;
		if (r < msg_iov_len(&vec[i].msg_hdr)) {
			i++;
			break;
		}
	}
	return (int)io_end(s, i ? (ssize_t)i : r);
}

/* recvmmsg() as the kernel runs it on a stream socket: recvmsg() per
 * entry; MSG_WAITFORONE makes the entries after the first non-blocking;
 * the timeout is looked at between entries only (as the kernel's).  An
 * error after the first entry ends the call with the count. */
SDP_EXPORT int recvmmsg(int fd, struct mmsghdr *vec, unsigned int vlen,
			int flags, struct timespec *timeout)
{
	static void *real;
	struct sdp_sock *s = sdp_fd_get(fd);
	struct timespec now, end = { 0, 0 };
	unsigned int i;
	ssize_t r = 0;

	if (!s) {
		int (*fn)(int, struct mmsghdr *, unsigned int, int,
			  struct timespec *) = sdp_real_sym(&real, "recvmmsg");
		return fn ? fn(fd, vec, vlen, flags, timeout) :
			    (errno = ENOSYS, -1);
	}
	if (timeout && (timeout->tv_sec < 0 || timeout->tv_nsec < 0 ||
			timeout->tv_nsec >= 1000000000L)) {
		sdp_sock_put(s);
		errno = EINVAL;
		return -1;
	}
	sdp_cancel_enter();
	if (timeout) {
		clock_gettime(CLOCK_MONOTONIC, &end);
		end.tv_sec += timeout->tv_sec;
		end.tv_nsec += timeout->tv_nsec;
		if (end.tv_nsec >= 1000000000L) {
			end.tv_sec++;
			end.tv_nsec -= 1000000000L;
		}
	}
	if (vlen > IOV_MAX)
		vlen = IOV_MAX;
	for (i = 0; i < vlen; i++) {
		r = mmsg_one(s, &vec[i].msg_hdr, flags, 0);
		if (r < 0)
			break;
		vec[i].msg_len = (unsigned int)r;
		if (flags & MSG_WAITFORONE)
			flags |= MSG_DONTWAIT;
		if (vec[i].msg_hdr.msg_flags & MSG_OOB) {
			i++;
			break;
		}
		if (timeout) {
			clock_gettime(CLOCK_MONOTONIC, &now);
			if (now.tv_sec > end.tv_sec ||
			    (now.tv_sec == end.tv_sec &&
			     now.tv_nsec >= end.tv_nsec)) {
				i++;
				break;
			}
		}
	}
	if (timeout && i) {	/* the kernel writes back the time left */
		clock_gettime(CLOCK_MONOTONIC, &now);
		long ns = (end.tv_sec - now.tv_sec) * 1000000000L +
			  (end.tv_nsec - now.tv_nsec);
		if (ns < 0)
			ns = 0;
		timeout->tv_sec = ns / 1000000000L;
		timeout->tv_nsec = ns % 1000000000L;
	}
	return (int)io_end(s, i ? (ssize_t)i : r);
}

/* Fortified variants (-D_FORTIFY_SOURCE): check, then the same path. */
SDP_EXPORT ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen,
			      int flags)
{
	if (len > buflen)
		abort();	/* what glibc's __chk_fail amounts to */
	return recv(fd, buf, len, flags);
}

SDP_EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen,
				  int flags, struct sockaddr *from,
				  socklen_t *fromlen)
{
	if (len > buflen)
		abort();
	return recvfrom(fd, buf, len, flags, from, fromlen);
}

SDP_EXPORT ssize_t __read_chk(int fd, void *buf, size_t len, size_t buflen)
{
	if (len > buflen)
		abort();
	return read(fd, buf, len);
}

/* sdp_conn_send_room() of the socket's connection (0 if none). */
static size_t send_room(struct sdp_sock *s)
{
	struct sdp_conn *c = conn_of(s);
	size_t room;

	if (!c || c == ERR_PTR_BADFD)
		return 0;
	room = sdp_conn_send_room(c);
	conn_done(c);
	return room;
}

/* The file side of sdp_conn_send_fill(): pread() from the caller's
 * offset.  Only pread: it runs under the connection's lock, and a pread
 * that cannot finish soon (a pipe, a socket) fails at once with ESPIPE,
 * as sendfile() with an offset does for those. */
struct file_fill {
	int fd;
	off_t pos;
};

static ssize_t file_fill(void *ctx, void *dst, size_t n)
{
	struct file_fill *f = ctx;
	ssize_t r = pread(f->fd, dst, n, f->pos);

	if (r < 0)
		return -errno;
	f->pos += r;
	return r;
}

/* Send up to len bytes of the file at pos, read straight into the
 * transport's buffers (sdp_conn_send_fill); 0 when that path is closed
 * now. */
static ssize_t send_file_in_place(struct sdp_sock *s, int in_fd, off_t pos,
				  size_t len)
{
	struct file_fill f = { in_fd, pos };
	struct sdp_conn *c = conn_of(s);
	ssize_t r;

	if (!c || c == ERR_PTR_BADFD)
		return 0;	/* the ordinary path reports it */
	r = sdp_conn_send_fill(c, len, file_fill, &f);
	conn_done(c);
	return r;
}

#define SENDFILE_IN_PLACE_MIN 32768	/* a shm message's payload, about */
#define SENDFILE_ROOM_MIN 4096

/*
 * sendfile() to an SDP socket (nginx, Apache): the kernel cannot splice a
 * file into our descriptor, so read the file and send it.  Semantics as
 * sendfile(2): with `offset` the file position is untouched and *offset
 * advances; without it the file position advances by what was sent.
 */
static ssize_t sdp_sendfile(struct sdp_sock *s, int in_fd, off_t *offset,
			    size_t count)
{
	char buf[65536];
	off_t pos = offset ? *offset : 0;
	size_t done = 0, room = 0;
	int room_known = 0, in_place = offset != NULL;
	ssize_t n, w, err = 0;

	while (done < count) {
		size_t want = count - done < sizeof(buf) ? count - done :
							    sizeof(buf);
		struct iovec v = { .iov_base = buf };

		/* Less than a message: the queue takes it (a corked header's
		 * company) at the cost of a small copy; asking the connection
		 * first would cost more than that. */
		if (in_place && count - done >= SENDFILE_IN_PLACE_MIN) {
			n = send_file_in_place(s, in_fd, pos, count - done);
			if (n < 0) {
				err = n;
				break;
			}
			/* Closed (no transport support, no credits, a short
			 * corked tail): the bounce buffer for the rest of
			 * this call, without asking again per chunk. */
			in_place = n > 0;
			if (n > 0) {
				done += (size_t)n;
				pos += n;
				room_known = 0;	/* credits were used */
				continue;
			}
		}

		/* A send that may not block takes only what fits: read no
		 * more of the file than that (the rest would be read again
		 * by the next call; nginx lost a tenth of its reads so).
		 * Asked once per call, then counted down; not for a small
		 * read, which costs less than the asking. */
		if ((done || atomic_load(&s->nonblock)) &&
		    want > SENDFILE_ROOM_MIN) {
			if (!room_known) {
				room = send_room(s);
				room_known = 1;
			}
			if (room == 0 && done)
				break;
			if (room && want > room)
				want = room;
		}

		n = offset ? pread(in_fd, buf, want, pos) :
			     sdp_real.read(in_fd, buf, want);
		if (n < 0) {
			err = -errno;
			break;
		}
		if (n == 0)
			break;
		v.iov_len = (size_t)n;
		w = sock_send(s, &v, 1, done ? MSG_DONTWAIT : 0);
		if (w < 0)
			w = done ? 0 : w;	/* what went is the answer */
		if (w < n && !offset)	/* give back what did not go */
			lseek(in_fd, (w < 0 ? 0 : w) - n, SEEK_CUR);
		if (w < 0) {
			err = w;
			break;
		}
		done += (size_t)w;
		pos += w;
		room = room > (size_t)w ? room - (size_t)w : 0;
		if (w < n)
			break;	/* the socket is full: report what went */
	}
	/* Also after an error: *offset covers every byte that went. */
	if (offset)
		*offset = pos;
	return done ? (ssize_t)done : err;
}

SDP_EXPORT ssize_t sendfile(int out_fd, int in_fd, off_t *offset, size_t count)
{
	struct sdp_sock *s = sdp_fd_get(out_fd);
	ssize_t r;

	if (!s) {
		static void *real;
		ssize_t (*fn)(int, int, off_t *, size_t) =
			sdp_real_sym(&real, "sendfile");

		return fn ? fn(out_fd, in_fd, offset, count) :
			    (errno = ENOSYS, -1);
	}
	/* Not a POSIX cancellation point, but it blocks like send(): one
	 * here (base/cancel.h). */
	sdp_cancel_enter();
	r = sdp_sendfile(s, in_fd, offset, count);
	return io_end(s, r);
}

SDP_EXPORT ssize_t sendfile64(int out_fd, int in_fd, off_t *offset,
			      size_t count)
{
	return sendfile(out_fd, in_fd, offset, count);
}

/* splice() into or out of an SDP socket: refuse as the kernel does for a
 * socket it cannot splice, so programs fall back to read/write. */
SDP_EXPORT ssize_t splice(int fd_in, off_t *off_in, int fd_out, off_t *off_out,
			  size_t len, unsigned int flags)
{
	static void *real;
	ssize_t (*fn)(int, off_t *, int, off_t *, size_t, unsigned int);
	struct sdp_sock *s = sdp_fd_get(fd_in);

	if (!s)
		s = sdp_fd_get(fd_out);
	if (s) {
		sdp_sock_put(s);
		errno = EINVAL;
		return -1;
	}
	fn = sdp_real_sym(&real, "splice");
	return fn ? fn(fd_in, off_in, fd_out, off_out, len, flags) :
		    (errno = ENOSYS, -1);
}
