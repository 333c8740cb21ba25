// SPDX-License-Identifier: MIT
/*
 * shm_appwake.c — waking the peer's application directly (the transport's
 * share_app_fd / app_arm / drop_peer_app_fd, see transport.h).
 *
 * Why.  An application that sleeps in epoll on an SDP socket waits on the
 * application end of the socket's readiness socketpair.  Without this, a
 * message for it costs two wake-ups: the sender rings our progress thread's
 * doorbell, which wakes, polls the ring and writes the readiness byte that
 * wakes the application.  Here each side hands the peer (SCM_RIGHTS, once,
 * over the connection's unix socket) the library end of that socketpair;
 * when our application is about to wait for data, the engine arms
 * `app_armed` in our segment, and the peer's next solicited SEND (data, an
 * advertisement) writes the readiness byte itself, instead of the progress
 * doorbell.  One wake-up per message, straight into epoll, as with TCP.
 *
 * The arm is a one-shot word, IDLE -> ARMED (owner) -> WRITING -> WRITTEN
 * (waker, by compare-exchange, so at most one byte per arm) -> IDLE (owner,
 * disarming).  QUIET (owner: its application polls the QP itself; or a
 * waker that has already written the byte for the same sleeping wait, see
 * app_sleep_id) asks for nothing.  WRITING covers the waker's send(): an owner that disarms
 * then waits for WRITTEN, so it knows the byte is queued when it drains
 * the readiness fd.  Without that, a byte still in flight would land after
 * the drain and make the descriptor readable with nothing to read — and
 * some programs (wrk) treat EAGAIN after a readable event as an error.
 *
 * Lifetime.  The peer's descriptor is used and closed only under the
 * connection's lock (post_send, drop, release); sdp__shm_set_error() may run
 * without that lock, so it never touches it.  The engine drops it before it
 * posts DisConn or AbortConn, so that by the time the peer acts on those,
 * its socketpair end is referenced by the peer alone again (closing it is
 * how the peer signals a reset to its application).
 */
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transport/fdhigh.h"
#include "transport/shm.h"

#define APPWAKE_TAG 'A'		/* doorbells are one '\0' byte */

/* APP_QUIET: the application polls this QP itself before sleeping (it is
 * running): the peer's solicited send needs no syscall at all. */
enum { APP_IDLE, APP_ARMED, APP_WRITING, APP_WRITTEN, APP_QUIET };

/* A waker in WRITING is inside one non-blocking send(): microseconds,
 * unless preempted.  Past this many yields it is taken as dead. */
#define APPWAKE_MAX_YIELDS 10000

int sdp__shm_share_app_fd(struct sdp_qp *sq, int fd)
{
	struct shm_qp *qp = SHM_QP(sq);
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} cbuf;
	char tag = APPWAKE_TAG;
	struct iovec iov = { &tag, 1 };
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = cbuf.buf, .msg_controllen = sizeof(cbuf.buf),
	};
	struct cmsghdr *cm;

	if (qp->sock < 0 || atomic_load(&qp->err) ||
	    atomic_load(&qp->state) != SHM_ESTABLISHED)
		return -ENOTCONN;
	memset(&cbuf, 0, sizeof(cbuf));
	cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	if (sendmsg(qp->sock, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) != 1)
		return -errno;
	return 0;
}

int sdp__shm_app_arm(struct sdp_qp *sq, int on)
{
	struct shm_ctrl *c = SHM_QP(sq)->me.ctrl;
	uint32_t v;

	if (on) {
		struct shm_qp *qp = SHM_QP(sq);
		uint32_t want = on == SDP_APP_ARM_QUIET ? APP_QUIET : APP_ARMED;

		/* seq_cst store, then look at the ring: against the peer's
		 * publish-then-check, one of us sees the other (Dekker).  A
		 * message already there was announced to nobody: say so.
		 * Already quiet (an event loop looking again): no store, as
		 * the word's cache line is the peer's to read on every send;
		 * a message this look misses is the next look's, or the loud
		 * arm's before any sleep. */
		if (want != APP_QUIET ||
		    atomic_load_explicit(&c->app_armed,
					 memory_order_relaxed) != APP_QUIET)
			atomic_store(&c->app_armed, want);
		return qp->rq_done != qp->rq_prod && !qp->rx_bad &&
		       atomic_load(&c->cq_prod) != qp->rq_done;
	}
	for (int i = 0;; i++) {
		v = atomic_load(&c->app_armed);
		if (v == APP_WRITING && i < APPWAKE_MAX_YIELDS) {
			sched_yield();
			continue;
		}
		if (atomic_compare_exchange_weak(&c->app_armed, &v, APP_IDLE))
			return v == APP_WRITING || v == APP_WRITTEN;
	}
}

/* The peer's count of receives it consumed: one per message it sent. */
const _Atomic uint32_t *sdp__shm_app_arrivals(struct sdp_qp *sq)
{
	return &SHM_QP(sq)->me.ctrl->cq_prod;
}

void sdp__shm_app_sleep_id(struct sdp_qp *sq, uint64_t id)
{
	atomic_store(&SHM_QP(sq)->me.ctrl->app_sleep_id, id);
}

/* The sleeping wait this thread last woke with a byte (app_sleep_id). */
static __thread uint64_t woke_id;

bool sdp__shm_app_wake(struct shm_ctrl *c, int app_fd, uint32_t published)
{
	uint32_t v = atomic_load(&c->app_armed);
	uint64_t id;
	ssize_t r;

	if (v == APP_QUIET)
		return true;	/* the application will look: no syscall */
	/* Loaded after ARMED: an id stored before a later arm is seen with
	 * it, so a stale id can only mismatch. */
	id = v == APP_ARMED ? atomic_load(&c->app_sleep_id) : 0;
	if (id && id == woke_id) {
		/* Our byte for another connection already wakes that wait,
		 * which then looks at this one in user space. */
		if (atomic_compare_exchange_strong(&c->app_armed, &v,
						   APP_QUIET))
			return true;
		return false;	/* the owner disarmed meanwhile */
	}

	/* ARMED: wake the application.  WRITTEN: it was woken and has not
	 * looked yet.  Either a further byte (an EPOLLET edge per arrival,
	 * as TCP gives one per segment) or the progress doorbell (which
	 * makes that edge): bulk streams measured faster with the doorbell,
	 * which is one-shot, than with a syscall per message. */
	if (v != APP_ARMED ||
	    !atomic_compare_exchange_strong(&c->app_armed, &v, APP_WRITING))
		return false;
	if (atomic_load(&c->cq_cons) == published) {
		/* The owner took our messages before it armed (it polled
		 * for another reason): a byte now would announce nothing,
		 * and an application woken to read nothing gets EAGAIN,
		 * which some programs (wrk) count as an error. */
		atomic_store(&c->app_armed, v);
		return true;
	}
	atomic_store_explicit(&c->app_woke_upto, published,
			      memory_order_relaxed);
	r = send(app_fd, "r", 1, MSG_DONTWAIT | MSG_NOSIGNAL);
	(void)r;	/* full: readable anyway; gone: reset */
	woke_id = id;
	atomic_store(&c->app_armed, APP_WRITTEN);
	return true;
}

void sdp__shm_drop_peer_app_fd(struct sdp_qp *sq)
{
	struct shm_qp *qp = SHM_QP(sq);

	if (qp->peer_app_fd >= 0)
		close(qp->peer_app_fd);
	qp->peer_app_fd = -1;
}

/* The peer's descriptor arrived: keep it if it is what it claims to be. */
static void take_app_fd(struct shm_qp *qp, int fd)
{
	int type = 0;
	socklen_t len = sizeof(type);

	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) < 0 ||
	    type != SOCK_STREAM || qp->peer_app_fd >= 0 ||
	    atomic_load(&qp->err)) {
		close(fd);	/* not a stream socket, a second one, or late */
		return;
	}
	qp->peer_app_fd = sdp_fd_high(fd);
}

/* Read what the peer sent on the unix socket (doorbells, a shared app fd);
 * a flood of doorbells is bounded here and read on the next round. */
void sdp__shm_read_doorbells(struct shm_qp *qp)
{
	for (int i = 0; i < 256; i++) {
		union {
			char buf[CMSG_SPACE(sizeof(int)) +
				 CMSG_SPACE(sizeof(struct ucred))];
			struct cmsghdr align;
		} cbuf;
		char data[16];
		struct iovec iov = { data, sizeof(data) };
		struct msghdr mh = {
			.msg_iov = &iov, .msg_iovlen = 1,
			.msg_control = cbuf.buf,
			.msg_controllen = sizeof(cbuf.buf),
		};
		struct cmsghdr *cm;

		if (recvmsg(qp->sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC) <= 0)
			break;
		for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
			int fd;

			if (cm->cmsg_level != SOL_SOCKET ||
			    cm->cmsg_type != SCM_RIGHTS ||
			    cm->cmsg_len != CMSG_LEN(sizeof(int)))
				continue;
			memcpy(&fd, CMSG_DATA(cm), sizeof(fd));
			if (data[0] == APPWAKE_TAG)
				take_app_fd(qp, fd);
			else
				close(fd);	/* nothing else carries fds */
		}
	}
}
