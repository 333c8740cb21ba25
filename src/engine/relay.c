// SPDX-License-Identifier: MIT
/*
 * relay.c — a connection carried across exec() by the process that drives
 * it (see relay.h).
 *
 * The request.  The exec'ing process sends a 24-byte record (magic, its
 * pid, the connection's owner slot, whether the image gets it as stdio)
 * with two descriptors attached (SCM_RIGHTS): the stream's end for the
 * owner, and its own copy of the application's end, as proof that it
 * holds the connection (the owner compares the inode it took at fork: a
 * descendant cannot have a connection relayed that it was never given).
 * It goes on the request socket of the ancestor named in the owner slot.
 * The slot (owner.h) carries the handshake: the asker names itself there
 * and waits; the owner accepts by turning the name into "accepted", or
 * refuses by clearing it (the asker then resets at once instead of
 * waiting), and an asker that gave up has already withdrawn it, so exactly
 * one side wins and a late request is simply closed.
 *
 * The pump runs in the owner's progress thread, on the connection's own
 * events and the stream's (edge-triggered), through the engine's ordinary
 * non-blocking send and receive.  Each direction holds at most one buffer:
 * a full stream stops reading the connection (its credits stop the peer),
 * a full connection stops reading the stream.
 */
#include "engine/relay.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include "engine/appwake.h"
#include "base/atfork.h"
#include "base/config.h"
#include "engine/conn.h"
#include "base/owner.h"
#include "engine/progress.h"
#include "base/real.h"
#include "base/fdhigh.h"

#define RELAY_MAGIC 0x59414c4552504453ull	/* "SDPRELAY" */
#define RELAY_BUF 65536

struct relay_req {
	uint64_t magic;
	uint32_t pid;		/* the asker */
	uint32_t slot;		/* the connection's owner slot */
	uint32_t stdio;		/* the image gets it as stdin/out/err */
	uint32_t in_place;	/* relay into the descriptor's own pair */
};

_Static_assert(sizeof(struct relay_req) == 24, "relay request: 24 bytes");

struct sdp_relay {
	int fd;			/* our end; the new image holds the other */
	size_t out_off, out_len;	/* connection -> image, not yet written */
	size_t in_off, in_len;		/* image -> connection, not yet sent */
	unsigned out_eof:1;	/* the image was told: EOF or failure */
	unsigned in_eof:1;	/* the image shut its writing side */
	unsigned shut_sent:1;	/* ... and the connection's, after its bytes */
	unsigned image_closed:1; /* writing to the image failed (EPIPE) */
	unsigned in_place:1;	/* fd is the descriptor's own pair */
	int done;		/* ended (set under c->lock, by any thread) */
	uint8_t out[RELAY_BUF];
	uint8_t in[RELAY_BUF];
};

/* ---- the family's request sockets ---------------------------------------
 *
 * Each process that forks with connections makes one SOCK_SEQPACKET pair:
 * it reads requests on `rx` (its progress thread), its children inherit
 * `tx` (close-on-exec, like every library descriptor) and remember it as
 * their parent's, with the ancestors' they inherited themselves.  A
 * request is one datagram: the record and the stream's end.  Datagrams
 * keep requests apart from anything else, whatever the owner does with
 * its own descriptor of the connection meanwhile.
 */
#define RELAY_ANCESTORS 8

static struct {
	pthread_mutex_t lock;
	int rx, tx;			/* ours, or -1 */
	struct {
		uint32_t pid;
		int tx;
	} up[RELAY_ANCESTORS];		/* nearest ancestor last */
	int nup;
	int atfork_done;
} F = { PTHREAD_MUTEX_INITIALIZER, -1, -1, { { 0, -1 } }, 0, 0 };

static void relay_atfork_child(void)
{
	pthread_mutex_init(&F.lock, NULL);
	if (F.rx >= 0)
		sdp_real.close(F.rx);	/* the parent's to read */
	if (F.tx >= 0) {
		if (F.nup == RELAY_ANCESTORS) {
			sdp_real.close(F.up[0].tx);
			memmove(&F.up[0], &F.up[1],
				(RELAY_ANCESTORS - 1) * sizeof(F.up[0]));
			F.nup--;
		}
		F.up[F.nup].pid = (uint32_t)getppid();
		F.up[F.nup++].tx = F.tx;
	}
	F.rx = F.tx = -1;
}

void sdp_relay_before_fork(void)
{
	int sp[2];

	pthread_mutex_lock(&F.lock);
	if (!F.atfork_done) {
		sdp_atfork_add(SDP_ATFORK_INNER, NULL, NULL,
			       relay_atfork_child);
		F.atfork_done = 1;
	}
	if (F.rx < 0 &&
	    sdp_real.socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0,
				sp) == 0) {
		/* The library's own: out of the application's numbers, and
		 * safe from its close loops and dup2()s (fdhigh.h). */
		sp[0] = sdp_fd_high(sp[0]);
		sp[1] = sdp_fd_high(sp[1]);
		sdp_real.fcntl(sp[0], F_SETFL, O_NONBLOCK | O_RDWR);
		if (sdp_progress_watch_relay(sp[0]) == 0) {
			F.rx = sp[0];
			F.tx = sp[1];
		} else {
			sdp_real.close(sp[0]);
			sdp_real.close(sp[1]);
		}
	}
	pthread_mutex_unlock(&F.lock);
}

/* ---- the exec'ing side: system calls and atomics only ------------------- */

static int send_request(int tx, const struct relay_req *req, int fd,
			int proof, unsigned ms)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(2 * sizeof(int))];
	} u;
	int fds[2] = { fd, proof };
	struct iovec iov = { (void *)req, sizeof(*req) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = u.b, .msg_controllen = sizeof(u.b) };
	struct cmsghdr *cm;
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	struct pollfd p = { tx, POLLOUT, 0 };

	memset(&u, 0, sizeof(u));
	cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(fds));
	memcpy(CMSG_DATA(cm), fds, sizeof(fds));
	for (;;) {
		long n = syscall(SYS_sendmsg, tx, &mh,
				 MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n >= 0)
			return 0;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN)
			return -errno;
		if (syscall(SYS_ppoll, &p, 1, &ts, NULL, 0) <= 0)
			return -ETIMEDOUT;
	}
}

/* Name ourselves in c's owner slot and send the request, with `stream`
 * and `proof`, to the ancestor that drives c; wait for its answer.  0 once
 * accepted; else -errno, the request withdrawn. */
static int ask_owner(struct sdp_conn *c, const struct relay_req *req,
		     int stream, int proof)
{
	uint32_t owner = sdp_owner_get(c->owner_slot);
	int r, i, tx = -1;

	/* No lock: the list changes only in fork handlers. */
	for (i = F.nup - 1; i >= 0 && tx < 0; i--)
		if (F.up[i].pid == owner)
			tx = F.up[i].tx;
	if (tx < 0)
		return -ENOTSUP;	/* not an ancestor of ours drives it */
	r = sdp_owner_relay_ask(c->owner_slot);
	if (r < 0)
		return r;
	r = send_request(tx, req, stream, proof, sdp_cfg.fork_claim_ms);
	if (r < 0 || !sdp_owner_relay_wait(c->owner_slot,
					   sdp_cfg.fork_claim_ms)) {
		sdp_owner_relay_wait(c->owner_slot, 0);	/* withdraw */
		return r < 0 ? r : -ETIMEDOUT;
	}
	return 0;
}

int sdp_relay_ask(struct sdp_conn *c, int app_fd, int nonblock, int stdio)
{
	struct relay_req req = { RELAY_MAGIC, (uint32_t)getpid(),
				 (uint32_t)c->owner_slot, !!stdio, 0 };
	int sp[2], r;

	if (syscall(SYS_socketpair, AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0,
		    sp) < 0)
		return -errno;
	r = ask_owner(c, &req, sp[1], app_fd);
	syscall(SYS_close, sp[1]);
	if (r < 0) {
		syscall(SYS_close, sp[0]);
		return r;
	}
	if (nonblock)
		syscall(SYS_fcntl, sp[0], F_SETFL, O_NONBLOCK);
	return sp[0];
}

int sdp_relay_ask_in_place(struct sdp_conn *c, int app_fd)
{
	struct relay_req req = { RELAY_MAGIC, (uint32_t)getpid(),
				 (uint32_t)c->owner_slot, 0, 1 };

	/* The descriptor is its own stream: sent as both. */
	return ask_owner(c, &req, app_fd, app_fd);
}

/* ---- the owner's side --------------------------------------------------- */

static int start_locked(struct sdp_conn *c, int fd, int proof,
			const struct relay_req *q)
{
	struct sdp_relay *r;
	struct stat st;

	if (c->relay || !sdp_owner_is_me(c->owner_slot) || !c->registered ||
	    c->orphan || c->state == SDP_ST_RESET ||
	    c->state == SDP_ST_CLOSED)
		return -EBUSY;
	/* Our application may still use the connection: then it is a
	 * descriptor the child inherited by accident (a client spawning a
	 * helper), unless the child was given it as its stdio (inetd). */
	if (!c->held_elsewhere && !q->stdio)
		return -EBUSY;
	if (!c->ready || !c->ready->app_ino || fstat(proof, &st) < 0 ||
	    (uint64_t)st.st_ino != c->ready->app_ino)
		return -EPERM;	/* it does not hold this connection */
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->fd = fd;
	sdp_real.fcntl(fd, F_SETFL, O_NONBLOCK | O_RDWR);
	if (sdp_progress_watch_fd(c, fd, EPOLLIN | EPOLLOUT | EPOLLRDHUP |
					 EPOLLET) < 0) {
		free(r);
		return -ENOMEM;
	}
	if (!sdp_owner_relay_accept(c->owner_slot, q->pid, 0)) {
		sdp_progress_unwatch_fd(fd);	/* it gave up waiting */
		free(r);
		return -ETIMEDOUT;
	}
	c->relay = r;
	/* The peer must ring our progress thread from now on, not wake an
	 * application of ours that will not call (appwake.h). */
	sdp_appwake_disarm_locked(c);
	c->appwake_off = 1;
	/* The relay decides when the connection ends, not the hang-up of
	 * the application's end (which the exec'ing process gives up now:
	 * watched, it would ring for ever). */
	if (c->held_elsewhere && c->ready_kept && c->ready_kept->lib_fd >= 0)
		sdp_progress_unwatch_fd(c->ready_kept->lib_fd);
	return 0;
}

/*
 * In place (a process about to enter a sandbox, relay.h): the stream is the
 * descriptor's own pair.  Its mirror bytes leave it first, with nothing
 * left to write new ones: the peer's wake-ups are disarmed, and the
 * mirror (c->ready) is dropped, so that from the accept on every byte in
 * the pair is the connection's.
 */
static int start_in_place_locked(struct sdp_conn *c, int proof,
				 const struct relay_req *q, bool self)
{
	struct sdp_ready *rd = c->ready ? c->ready : c->ready_kept;
	struct sdp_relay *r;
	struct stat st;
	int fd, e;

	if (c->relay || !sdp_owner_is_me(c->owner_slot) || !c->registered ||
	    c->orphan || c->state == SDP_ST_RESET ||
	    c->state == SDP_ST_CLOSED || c->state == SDP_ST_CONNECTING)
		return -EBUSY;
	if (!rd || rd->lib_fd < 0 || !rd->app_ino || fstat(proof, &st) < 0 ||
	    (uint64_t)st.st_ino != rd->app_ino)
		return -EPERM;	/* it does not hold this connection */
	/* The pair already carries the peer's EOF: bytes still unread
	 * could not follow it. */
	if (rd->eof && sdp_conn_rx_avail_locked(c) > 0)
		return -EBUSY;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	fd = sdp_real.fcntl(rd->lib_fd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0) {
		free(r);
		return -errno;
	}
	r->fd = sdp_fd_high(fd);
	sdp_appwake_disarm_locked(c);
	c->appwake_off = 1;
	e = sdp_ready_hand_over(rd, proof, 100);
	if (e == 0 && sdp_progress_watch_fd(c, r->fd, EPOLLIN | EPOLLOUT |
					       EPOLLRDHUP | EPOLLET) < 0)
		e = -ENOMEM;
	if (e == 0 && !(self ? sdp_owner_relay_self(c->owner_slot) :
			sdp_owner_relay_accept(c->owner_slot, q->pid, 1))) {
		sdp_progress_unwatch_fd(r->fd);
		e = -ETIMEDOUT;
	}
	if (e < 0) {
		/* The mirror goes on as it was (the pair may have lost its
		 * filler: recomputed at the next change). */
		sdp_real.close(r->fd);
		free(r);
		return e;
	}
	r->in_place = 1;
	r->out_eof = rd->eof;	/* the pair carries no more after an EOF */
	c->relay = r;
	c->ready = NULL;
	if (c->held_elsewhere && c->ready_kept && c->ready_kept->lib_fd >= 0)
		sdp_progress_unwatch_fd(c->ready_kept->lib_fd);
	return 0;
}

struct request {
	struct relay_req req;
	int fd;		/* the stream's end, -1 once taken */
	int proof;	/* the asker's copy of the application's end */
};

static void try_start(struct sdp_conn *c, void *arg)
{
	struct request *q = arg;
	int r;

	if (q->fd < 0 || c->owner_slot != (int)q->req.slot)
		return;
	pthread_mutex_lock(&c->lock);
	if (q->req.in_place) {
		r = start_in_place_locked(c, q->proof, &q->req, false);
		if (r == 0) {
			sdp_real.close(q->fd);	/* the proof's twin */
			q->fd = -1;
		}
	} else {
		r = start_locked(c, q->fd, q->proof, &q->req);
		if (r == 0)
			q->fd = -1;
	}
	pthread_mutex_unlock(&c->lock);
	sdp_log(r ? SDP_LOG_INFO : SDP_LOG_DEBUG,
		"conn %u: relay for process %u %s: %s", c->id, q->req.pid,
		q->req.in_place ? "in place (sandbox)" : "across exec",
		r ? strerror(-r) : "started");
	if (q->fd < 0)
		sdp_progress_wake();	/* pump what is already queued */
}

void sdp_relay_serve_requests(void)
{
	for (;;) {
		union {
			struct cmsghdr h;
			char b[CMSG_SPACE(4 * sizeof(int))];
		} u;
		struct request q = { { 0, 0, 0, 0, 0 }, -1, -1 };
		struct iovec iov = { &q.req, sizeof(q.req) };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
				     .msg_control = u.b,
				     .msg_controllen = sizeof(u.b) };
		struct cmsghdr *cm;
		ssize_t n;

		n = sdp_real.recvmsg(F.rx, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n < 0)
			return;
		for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
			size_t i, nfd;

			if (cm->cmsg_level != SOL_SOCKET ||
			    cm->cmsg_type != SCM_RIGHTS)
				continue;
			nfd = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			for (i = 0; i < nfd; i++) {
				int fd;

				memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int),
				       sizeof(fd));
				if (q.fd < 0)
					q.fd = sdp_fd_high(fd);
				else if (q.proof < 0)
					q.proof = fd;
				else
					sdp_real.close(fd);
			}
		}
		if (n == (ssize_t)sizeof(q.req) && q.req.magic == RELAY_MAGIC &&
		    q.fd >= 0 && q.proof >= 0) {
			sdp_progress_foreach(try_start, &q);
			if (q.fd >= 0)	/* tell it now: it resets, not waits */
				sdp_owner_relay_refuse((int)q.req.slot,
						       q.req.pid);
		}
		if (q.fd >= 0)
			sdp_real.close(q.fd);
		if (q.proof >= 0)
			sdp_real.close(q.proof);
	}
}

/* Has the image closed every descriptor of its end?  Asked only once it
 * stopped writing or reading: a half-close leaves POLLHUP off. */
static int image_gone(const struct sdp_relay *r)
{
	struct pollfd p = { r->fd, POLLOUT, 0 };

	return (r->in_eof || r->image_closed) &&
	       sdp_real.poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLERR));
}

/* Connection -> image.  1 if anything moved. */
static int to_image(struct sdp_conn *c, struct sdp_relay *r)
{
	if (!r->out_len && !r->out_eof) {
		struct iovec v = { r->out, sizeof(r->out) };
		ssize_t n = sdp_conn_recv(c, &v, 1, 0, SDP_IO_NONBLOCK, 0);

		if (n > 0) {
			r->out_off = 0;
			r->out_len = (size_t)n;
		} else if (n == -EAGAIN || n == -EINTR) {
			return 0;
		} else {
			/* The peer's EOF passes on as ours; a failed
			 * connection shuts the stream both ways (EOF, EPIPE:
			 * a stream socket carries no reset). */
			sdp_real.shutdown(r->fd, n == 0 ? SHUT_WR : SHUT_RDWR);
			r->out_eof = 1;
			return 1;
		}
	}
	if (r->out_len) {
		ssize_t w = sdp_real.send(r->fd, r->out + r->out_off,
					  r->out_len,
					  MSG_DONTWAIT | MSG_NOSIGNAL);

		if (w > 0) {
			r->out_off += (size_t)w;
			r->out_len -= (size_t)w;
			return 1;
		}
		if (w < 0 && errno != EAGAIN && errno != EINTR) {
			r->out_eof = 1;		/* the image closed its end */
			r->image_closed = 1;
			return 1;
		}
	}
	return 0;
}

/* Image -> connection.  1 if anything moved. */
static int from_image(struct sdp_conn *c, struct sdp_relay *r)
{
	if (!r->in_len && !r->in_eof) {
		ssize_t n = sdp_real.recv(r->fd, r->in, sizeof(r->in),
					  MSG_DONTWAIT);

		if (n > 0) {
			r->in_off = 0;
			r->in_len = (size_t)n;
		} else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
			r->in_eof = 1;
		} else {
			return 0;
		}
	}
	if (r->in_len) {
		struct iovec v = { r->in + r->in_off, r->in_len };
		ssize_t s = sdp_conn_send(c, &v, 1, MSG_NOSIGNAL,
					  SDP_IO_NONBLOCK, 0);

		if (s == -EAGAIN || s == -EINTR || s == 0)
			return 0;
		if (s < 0) {
			/* The connection cannot take more: the image's
			 * next write fails (EPIPE), as on a TCP socket. */
			sdp_real.shutdown(r->fd, SHUT_RDWR);
			r->in_len = 0;
			r->in_eof = 1;
			r->shut_sent = 1;
			return 1;
		}
		r->in_off += (size_t)s;
		r->in_len -= (size_t)s;
		return 1;
	}
	if (r->in_eof && !r->shut_sent && !image_gone(r)) {
		/* A half-close.  A close is not passed on: the connection
		 * ends when its last descriptor does (pump). */
		r->shut_sent = 1;
		sdp_conn_shutdown(c, SHUT_WR);
		return 1;
	}
	return 0;
}

static void end_locked(struct sdp_conn *c, struct sdp_relay *r, int abort)
{
	sdp_progress_unwatch_fd(r->fd);
	__atomic_store_n(&r->done, 1, __ATOMIC_RELEASE);
	if (abort)
		c->close_reason = SDP_REASON_RELAY_UNREAD;
	sdp_progress_end_held_locked(c, abort);
}

void sdp_relay_pump(struct sdp_conn *c)
{
	struct sdp_relay *r;
	int rounds = 0, moved;

	pthread_mutex_lock(&c->lock);
	r = c->relay;
	pthread_mutex_unlock(&c->lock);
	if (!r || __atomic_load_n(&r->done, __ATOMIC_ACQUIRE))
		return;
	do {
		moved = to_image(c, r);
		moved |= from_image(c, r);
	} while (moved && ++rounds < 64);
	pthread_mutex_lock(&c->lock);
	if (!r->done && image_gone(r) && (r->out_len || !r->in_len)) {
		/* Gone.  With bytes it never read: a reset, as TCP's close
		 * with unread data (the engine adds its own queue), even if
		 * its own last bytes could not go (a peer that only writes
		 * would never take them).  Else a close, once they went. */
		sdp_log(SDP_LOG_DEBUG, "conn %u: relayed image gone (%s)",
			c->id, r->out_len > 0 || r->image_closed ? "reset" :
			"close");
		end_locked(c, r, r->out_len > 0 || r->image_closed);
		sdp_real.close(r->fd);
		r->fd = -1;
	} else if (moved) {
		sdp_progress_arm_timer(c);	/* capped: come back */
	}
	pthread_mutex_unlock(&c->lock);
}

void sdp_relay_owner_exiting(struct sdp_conn *c)
{
	struct sdp_relay *r;
	int unread = 1, queued = 0;

	pthread_mutex_lock(&c->lock);
	r = c->relay;
	pthread_mutex_unlock(&c->lock);
	if (!r || __atomic_load_n(&r->done, __ATOMIC_ACQUIRE))
		return;
	/* In place, the pair's other end is ours too (our descriptors close
	 * with us): what the holders wrote goes out first, and the end is a
	 * close unless bytes are left undelivered either way.  A relay for
	 * another image (exec) cannot go on without us: a reset. */
	if (r->in_place)
		sdp_relay_pump(c);
	pthread_mutex_lock(&c->lock);
	if (!r->done) {
		if (r->in_place && sdp_real.ioctl(r->fd, FIONREAD,
						  &queued) == 0)
			unread = r->out_len > 0 || r->in_len > 0 || queued > 0;
		sdp_relay_abort_locked(c);
		c->close_reason = SDP_REASON_RELAY_ENDED;
		c->held_elsewhere = 1;
		sdp_progress_end_held_locked(c, unread);
	}
	pthread_mutex_unlock(&c->lock);
}

void sdp_relay_abort_locked(struct sdp_conn *c)
{
	struct sdp_relay *r = c->relay;

	if (!r || r->done)
		return;
	/* The progress thread may be inside the pump: the descriptor stays
	 * open until the connection is freed, and only stops working. */
	sdp_real.shutdown(r->fd, SHUT_RDWR);
	sdp_progress_unwatch_fd(r->fd);
	__atomic_store_n(&r->done, 1, __ATOMIC_RELEASE);
}

void sdp_relay_atfork_child(struct sdp_conn *c)
{
	struct sdp_relay *r = c->relay;

	/* The parent relays it: our copy of its stream must not keep the
	 * image from seeing the parent go (EOF). */
	if (!r)
		return;
	if (r->fd >= 0)
		sdp_real.close(r->fd);
	r->fd = -1;
	r->done = 1;
}

int sdp_relay_active(const struct sdp_conn *c)
{
	return atomic_load(&c->relayed_here) ||
	       sdp_owner_relayed(c->owner_slot);
}

int sdp_relay_in_place_here(struct sdp_conn *c)
{
	struct relay_req q = { RELAY_MAGIC, (uint32_t)getpid(),
			       (uint32_t)c->owner_slot, 1, 1 };
	int r = -EBADF;

	pthread_mutex_lock(&c->lock);
	if (c->ready)
		sdp_ready_note_ino(c->ready);
	if (c->ready && c->ready->app_fd >= 0)
		r = start_in_place_locked(c, c->ready->app_fd, &q, true);
	if (r == 0)
		atomic_store(&c->relayed_here, 1);
	pthread_mutex_unlock(&c->lock);
	sdp_log(r ? SDP_LOG_INFO : SDP_LOG_DEBUG,
		"conn %u: relay in place (descriptor passed on): %s", c->id,
		r ? strerror(-r) : "started");
	if (r == 0)
		sdp_progress_wake();	/* pump what is already queued */
	return r;
}

int sdp_relay_in_place(const struct sdp_conn *c)
{
	return atomic_load(&c->relayed_here) ||
	       sdp_owner_relayed_in_place(c->owner_slot);
}

void sdp_relay_forget_in_place(struct sdp_conn *c)
{
	pthread_mutex_lock(&c->lock);
	if (sdp_owner_is_me(c->owner_slot) && c->relay) {
		if (sdp_relay_done(c))
			sdp_conn_close_locked(c, 0);	/* it ended first */
		else
			c->held_elsewhere = 1;	/* the relay ends it */
	}
	pthread_mutex_unlock(&c->lock);
	sdp_conn_put(c);
}

int sdp_relay_done(const struct sdp_conn *c)
{
	return !c->relay || __atomic_load_n(&c->relay->done, __ATOMIC_ACQUIRE);
}

void sdp_relay_free(struct sdp_conn *c)
{
	struct sdp_relay *r = c->relay;

	if (!r)
		return;
	if (r->fd >= 0)
		sdp_real.close(r->fd);
	free(r);
	c->relay = NULL;
}
