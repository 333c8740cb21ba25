// SPDX-License-Identifier: MIT
/*
 * shm_wait.c — sleeping and waking for the shm transport.
 *
 * Two kinds of sleepers, one wake-up word.  Every piece of news for a QP
 * (a completion the peer published, a local completion, a CM reply, an
 * error, a kick) increments `seq` in the QP's own segment.  Then:
 *  - threads in wait() sleep on `seq` with a non-private futex (the word is
 *    in shared memory, so the peer's process can FUTEX_WAKE it); they
 *    announce themselves in `waiters` so that a waker makes the syscall only
 *    when somebody sleeps;
 *  - the progress thread sleeps in epoll on event_fd(), the unix socket
 *    itself (a shared QP's summon epoll set, over the socket and its
 *    summon eventfd, once a fork() shares it).  After req_notify() sets
 *    `armed`, the first waker clears it and rings once: the peer writes
 *    one byte on the unix socket, local news goes through the engine's
 *    notify callback (no descriptor of the QP's own).
 * Waker: publish, seq_cst RMW on seq, then load waiters/armed.  Sleeper:
 * seq_cst store to waiters/armed, then load seq/the rings.  One of the two
 * always sees the other (Dekker), so no wake-up is lost.
 *
 * Peer death does not touch the futex word.  The progress thread sees the
 * hang-up in epoll at once and wakes the waiters (set_error); as a
 * fallback, wait() sleeps in slices of SHM_WAIT_SLICE_MS and checks the
 * unix socket between them: an idle waiter costs ten wake-ups a second
 * and notices a kill -9 within one slice even without that thread.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <linux/futex.h>

#include "base/cancel.h"
#include "transport/shm/shm.h"
#include "base/real.h"

static long futex(_Atomic uint32_t *uaddr, int op, uint32_t val,
		  const struct timespec *ts)
{
	return syscall(SYS_futex, uaddr, op, val, ts, NULL, 0);
}

uint64_t sdp__shm_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int sdp__shm_futex_wake(_Atomic uint32_t *word)
{
	return futex(word, FUTEX_WAKE, INT_MAX, NULL) < 0 ? -errno : 0;
}

void sdp__shm_futex_wait(_Atomic uint32_t *word, uint32_t val, uint64_t ms)
{
	struct timespec ts = {
		.tv_sec = (time_t)(ms / 1000),
		.tv_nsec = (long)(ms % 1000) * 1000000L,
	};

	futex(word, FUTEX_WAIT, val, &ts);
}

/* News for the owner of segment `c` (the peer, or a client we reject):
 * bump its seq, wake its sleepers; else write its application's readiness
 * byte on `app_fd` if that is armed (shm_appwake.c), else ring its progress
 * doorbell on `sock` if armed. */
void sdp__shm_wake_owner_seg(struct shm_ctrl *c, int sock, int app_fd,
			     const _Atomic uint64_t *words, uint32_t published)
{
	if (!c)
		return;
	atomic_fetch_add(&c->seq, 1);
	if (atomic_load(&c->waiters)) {
		/* A thread sleeps in wait() on this QP: it polls the CQ when
		 * it wakes (the engine's rule), so the progress thread need
		 * not be rung too.  One wake-up per message, as with TCP. */
		sdp__shm_futex_wake(&c->seq);
		return;
	}
	/* No wait in the kernel names the owner's descriptor: its
	 * application takes the message when it calls in. */
	if (atomic_load(&c->app_armed) == APP_ALONE)
		return;
	if (app_fd >= 0) {
		int r = sdp__shm_app_wake(c, app_fd, words, published);

		if (r > 0)
			return;
		if (r < 0) {
			/* The byte could not be written while the
			 * application waits for one: ring the doorbell even
			 * if the progress thread did not arm it. */
			sdp__shm_wake_owner_nofd(c, sock);
			return;
		}
	}
	if (sock >= 0 && atomic_load(&c->armed) &&
	    atomic_exchange(&c->armed, 0)) {
		ssize_t r = sdp_real.send(sock, "", 1,
					  MSG_DONTWAIT | MSG_NOSIGNAL);

		(void)r;	/* full or gone: the fd is readable anyway */
	}
}

void sdp__shm_wake_owner_nofd(struct shm_ctrl *c, int sock)
{
	uint32_t v;

	if (!c)
		return;
	v = atomic_load(&c->app_armed);
	if (sock >= 0 && v != APP_IDLE && v != APP_QUIET && v != APP_ALONE) {
		atomic_fetch_add(&c->seq, 1);
		if (atomic_load(&c->waiters))
			sdp__shm_futex_wake(&c->seq);
		atomic_store(&c->armed, 0);
		ssize_t r = sdp_real.send(sock, "", 1,
					  MSG_DONTWAIT | MSG_NOSIGNAL);

		(void)r;	/* full or gone: the fd is readable anyway */
		return;
	}
	sdp__shm_wake_owner_seg(c, sock, -1, NULL, 0);
}

/* News for our own QP.  `force_event` has the progress side service it
 * even when it is not armed (CM events and errors).  The engine's
 * callback, not a descriptor per QP: a connection's only event descriptor
 * is its rendezvous socket (transport.h, "Waiting"). */
void sdp__shm_wake_self(struct shm_qp *qp, bool force_event)
{
	struct shm_ctrl *c = qp->me.ctrl;

	atomic_fetch_add(&c->seq, 1);
	if (atomic_load(&c->waiters))
		sdp__shm_futex_wake(&c->seq);
	if ((force_event ||
	     (atomic_load(&c->armed) && atomic_exchange(&c->armed, 0))) &&
	    qp->attr.events)
		qp->attr.events->notify(qp->attr.events_ctx);
}

static void event_fd_changed(struct shm_qp *qp)
{
	if (qp->attr.events)
		qp->attr.events->fd_changed(qp->attr.events_ctx);
}

void sdp__shm_sock_watch(struct shm_qp *qp)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP,
				  .data.fd = qp->sock };

	if (atomic_exchange(&qp->sock_in_ep, 1))
		return;
	if (qp->summon_ep >= 0)
		sdp_real.epoll_ctl(qp->summon_ep, EPOLL_CTL_ADD, qp->sock, &ev);
	else
		event_fd_changed(qp);
}

void sdp__shm_sock_unwatch(struct shm_qp *qp)
{
	/* After a hang-up the socket stays readable (EOF) for good; keeping
	 * it in the epoll set would make a level-triggered progress loop
	 * spin on a dead connection. */
	if (!atomic_exchange(&qp->sock_in_ep, 0))
		return;
	if (qp->summon_ep >= 0)
		sdp_real.epoll_ctl(qp->summon_ep, EPOLL_CTL_DEL, qp->sock, NULL);
	else
		event_fd_changed(qp);
}

static short sock_revents(struct shm_qp *qp, short events)
{
	struct pollfd p = { .fd = qp->sock, .events = events };

	if (qp->sock < 0 || sdp_real.poll(&p, 1, 0) <= 0)
		return 0;
	return p.revents;
}

/* Notice a peer that is gone (closed flag or socket hang-up); puts the QP in
 * error.  Returns true if the QP is in error.  `ask_sock`: poll the socket
 * for a hang-up.  Without it only the closed flag is read, which is enough
 * while an epoll set watches the socket (the progress thread's, or the
 * summon set of a shared QP): a hang-up then makes event_fd readable, and
 * ack_events() reads it off the socket. */
bool sdp__shm_check_peer(struct shm_qp *qp, bool ask_sock)
{
	enum shm_state st;

	if (atomic_load(&qp->err))
		return true;
	/* While connecting, a hang-up is the CM's answer (get_event). */
	st = atomic_load(&qp->state);
	if (st != SHM_ESTABLISHED && st != SHM_PASSIVE)
		return false;
	if (atomic_load_explicit(&qp->me.ctrl->closed, memory_order_acquire) ||
	    (ask_sock &&
	     (sock_revents(qp, POLLRDHUP) & (POLLRDHUP | POLLHUP | POLLERR)))) {
		sdp__shm_set_error(qp);
		return true;
	}
	return false;
}

/* A CM reply (or the listener's hang-up) is waiting to be read. */
static bool connect_reply_ready(struct shm_qp *qp)
{
	return atomic_load(&qp->state) == SHM_CONNECTING &&
	       sock_revents(qp, POLLIN | POLLRDHUP);
}

uint32_t sdp__shm_wait_seq(struct sdp_qp *sq)
{
	return atomic_load(&SHM_QP(sq)->me.ctrl->seq);
}

int sdp__shm_wait(struct sdp_qp *sq, uint32_t seq, int timeout_ms)
{
	struct shm_qp *qp = SHM_QP(sq);
	struct shm_ctrl *c = qp->me.ctrl;
	uint64_t deadline = timeout_ms < 0 ? UINT64_MAX :
			    sdp__shm_now_ms() + (uint64_t)timeout_ms;
	int ret = 0;

	atomic_fetch_add(&c->waiters, 1);
	for (int round = 0;; round++) {
		struct timespec ts;
		uint64_t now, slice;

		if (atomic_load(&c->seq) != seq)
			break;
		/* The progress thread sees a hang-up in epoll at once and
		 * wakes us; the poll() here is the fallback, once a slice has
		 * passed (a syscall saved on every sleep of the fast path). */
		if (round)
			sdp__shm_check_peer(qp, true);	/* bumps seq if so */
		else if (atomic_load(&qp->err))
			break;
		if (atomic_load(&c->seq) != seq || connect_reply_ready(qp))
			break;
		now = sdp__shm_now_ms();
		if (now >= deadline) {
			ret = -ETIMEDOUT;
			break;
		}
		slice = deadline - now;
		if (slice > SHM_WAIT_SLICE_MS)
			slice = SHM_WAIT_SLICE_MS;
		ts.tv_sec = 0;
		ts.tv_nsec = (long)slice * 1000000;
		/* pthread_cancel wakes us through the same word.  A slice
		 * that times out only looks again. */
		if (sdp_cancel_futex_wait(&c->seq, seq, &ts, 0) == -EINTR) {
			ret = -EINTR;
			break;
		}
	}
	atomic_fetch_sub(&c->waiters, 1);
	return ret;
}

void sdp__shm_kick(struct sdp_qp *sq)
{
	struct shm_ctrl *c = SHM_QP(sq)->me.ctrl;

	atomic_fetch_add(&c->seq, 1);
	if (atomic_load(&c->waiters))
		sdp__shm_futex_wake(&c->seq);
}

int sdp__shm_event_fd(struct sdp_qp *sq)
{
	struct shm_qp *qp = SHM_QP(sq);

	if (qp->summon_ep >= 0)
		return qp->summon_ep;
	return atomic_load(&qp->sock_in_ep) ? qp->sock : -1;
}

int sdp__shm_answer_fd(struct sdp_qp *sq)
{
	struct shm_qp *qp = SHM_QP(sq);

	return atomic_load(&qp->state) == SHM_CONNECTING ? qp->sock : -1;
}

static bool work_pending(struct shm_qp *qp)
{
	bool err, watched;

	if (qp->ev_pending || qp->lcq_count)
		return true;
	if (qp->rq_done != qp->rq_prod && !qp->rx_bad &&
	    atomic_load(&qp->me.ctrl->cq_prod) != qp->rq_done)
		return true;
	/* An unread SDP_CM_DISCONNECTED is not "work": engines learn of the
	 * error from the flushed receives, and may never call get_event()
	 * once established. */
	watched = atomic_load(&qp->sock_in_ep);
	err = sdp__shm_check_peer(qp, !watched);
	if (err && qp->rq_done != qp->rq_prod)
		return true;
	/* A reply that arrives makes event_fd readable as well. */
	return !watched && connect_reply_ready(qp);
}

int sdp__shm_req_notify(struct sdp_qp *sq)
{
	struct shm_qp *qp = SHM_QP(sq);

	atomic_store(&qp->me.ctrl->armed, 1);
	if (!work_pending(qp))
		return 0;
	atomic_store(&qp->me.ctrl->armed, 0);
	return 1;
}

void sdp__shm_ack_events(struct sdp_qp *sq)
{
	struct shm_qp *qp = SHM_QP(sq);
	bool drained = false;

	if (qp->summon_fd >= 0) {
		uint64_t v;
		ssize_t r = sdp_real.read(qp->summon_fd, &v, sizeof(v));

		(void)r;	/* nothing to drain */
	}
	/* A socket read down to EAGAIN has not hung up: seqpacket reads
	 * return 0 after the peer's last message. */
	if (atomic_load(&qp->state) == SHM_ESTABLISHED &&
	    atomic_load(&qp->sock_in_ep))
		drained = sdp__shm_read_doorbells(qp);
	sdp__shm_check_peer(qp, !drained);
}
