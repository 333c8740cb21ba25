/* SPDX-License-Identifier: MIT */
/*
 * progress.c — one thread per process that keeps every connection moving
 * without the application's help, and the only place orphaned connections
 * (closed by the application, close still in progress) are finished.
 *
 * It sleeps in epoll_wait on:
 *   - each connection's transport event fd (armed with req_notify, so the
 *     peer rings it only when this thread really sleeps on that QP);
 *   - each listener's fd (pending connection requests);
 *   - an eventfd for "look at timers/orphans now";
 *   - a timerfd for a deadline armed while it sleeps past it.
 * The timeout is the nearest deadline (Nagle hold, close timeout).
 *
 * Lifetime: epoll entries carry a reference.  A connection is removed from
 * epoll and its reference dropped only here, after the batch of events that
 * may still name it has been handled.
 */
#include "engine/appwake.h"
#include "base/atfork.h"
#include "base/fdhigh.h"
#include "engine/progress.h"

#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "base/config.h"
#include "engine/conn.h"
#include "base/libthreads.h"
#include "engine/listener.h"
#include "base/real.h"
#include "engine/handover.h"
#include "base/owner.h"
#include "engine/relay.h"
#include "engine/stats_shm.h"	/* sdpstat */
#include "base/tsan.h"

#define TAG_LISTENER 0x1ul
#define TAG_MASK 0x3ul
#define TAG_STAT 0x4ul	/* sdpstat wake socket: compared first */
#define TAG_RELAY 0x8ul	/* relay requests (relay.h) */
#define TAG_TIMER 0xcul	/* P.timerfd */

static struct {
	pthread_mutex_t start_lock;
	pthread_mutex_t lock;	/* registry and timer list */
	int epfd;
	int wakefd;
	/* A deadline armed while the thread sleeps past it (a connect's
	 * timeout) sets this timer instead of waking the thread: a
	 * connection per request would otherwise wake it at every connect
	 * only to have it compute a new timeout.  Armed for timer_at (ns,
	 * CLOCK_MONOTONIC as sdp_now_ns; 0: disarmed). */
	int timerfd;
	uint64_t timer_at;
	int started;
	struct sdp_conn *conns;	/* registered connections */
	struct sdp_conn *timers;
	/* When the thread, asleep, will wake anyway (ns; UINT64_MAX: not
	 * before an event; 0: awake, it looks at `timers` before sleeping).
	 * A timer due later needs no wake-up: nginx corks every response,
	 * and waking the thread for each cork deadline cost a wake-up and a
	 * handful of syscalls per request. */
	uint64_t wake_at;
	uint64_t lazy_min;	/* earliest deadline armed while awake */
	struct sdp_listen *released;
	pid_t pid;
} P = {
	.start_lock = PTHREAD_MUTEX_INITIALIZER,
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.epfd = -1,
	.wakefd = -1,
	.timerfd = -1,
};

static void *progress_main(void *arg);

/*
 * After fork() the child has no progress thread, and the epoll instance it
 * inherited is the parent's (the same open file): registering anything in it
 * would hand the parent's thread pointers into the child's memory.  So the
 * child starts from nothing: its own epoll, its own thread on first use.
 * Connections inherited from the parent are not serviced in the background
 * in the child (README: fork).
 */
static void progress_atfork_child(void)
{
	/* A connection's lock may have been copied held by the parent's
	 * progress thread, mid-batch, which the child does not have: the
	 * child's first close() of an inherited socket then waited for ever.
	 * Nothing in the child holds one yet (it has one thread). */
	struct sdp_conn *c, *next;

	/* The parent's registrations are not ours: none of its lists or
	 * epoll entries exist here (the references they hold are dropped if
	 * this process adopts the connection, handover.c). */
	for (c = P.conns; c; c = next) {
		next = c->next;
		pthread_mutex_init(&c->lock, NULL);
		c->inherited_refs = c->registered + !!c->in_timer;
		c->registered = 0;
		/* In the parent's epoll instance, which is not ours. */
		c->ev_live = 0;
		c->ev_fd = -1;
		c->in_timer = 0;
		c->next = c->prev = c->timer_next = NULL;
	}
	for (c = P.timers; c; c = next) {
		next = c->timer_next;
		if (c->in_timer) {	/* on the timer list only */
			c->inherited_refs++;
			c->in_timer = 0;
		}
		c->timer_next = NULL;
	}
	if (P.epfd >= 0)
		sdp_close(P.epfd);
	if (P.wakefd >= 0)
		sdp_close(P.wakefd);
	if (P.timerfd >= 0)
		sdp_close(P.timerfd);
	pthread_mutex_init(&P.start_lock, NULL);
	pthread_mutex_init(&P.lock, NULL);
	P.epfd = P.wakefd = P.timerfd = -1;
	P.timer_at = 0;
	P.started = 0;
	P.conns = NULL;
	P.timers = NULL;
	P.wake_at = 0;
	P.lazy_min = 0;
	P.released = NULL;
}

static int progress_start_locked(void)
{
	static int atfork_done;
	pthread_attr_t a;
	pthread_t th;
	sigset_t all, old;
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
	struct epoll_event tev = { .events = EPOLLIN,
				   .data.ptr = (void *)TAG_TIMER };

	if (!atfork_done) {
		sdp_atfork_add(SDP_ATFORK_INNER, NULL, NULL,
			       progress_atfork_child);
		atfork_done = 1;
	}
	P.epfd = sdp_fd_high(sdp_real.epoll_create1(EPOLL_CLOEXEC));
	P.wakefd = sdp_fd_high(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
	P.timerfd = sdp_fd_high(timerfd_create(CLOCK_MONOTONIC,
					       TFD_CLOEXEC | TFD_NONBLOCK));
	if (P.epfd < 0 || P.wakefd < 0 || P.timerfd < 0 ||
	    sdp_real.epoll_ctl(P.epfd, EPOLL_CTL_ADD, P.wakefd, &ev) < 0 ||
	    sdp_real.epoll_ctl(P.epfd, EPOLL_CTL_ADD, P.timerfd, &tev) < 0)
		goto err;
	sdp_stat_watch(P.epfd, (void *)TAG_STAT);	/* sdpstat */
	/* The thread must never take the application's signals. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&a, 256 * 1024);
	if (sdp_lib_thread_create(&th, &a, progress_main, NULL) == 0)
		P.started = 1;
	pthread_attr_destroy(&a);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!P.started)
		goto err;
	P.pid = getpid();
	return 0;
err:
	if (P.epfd >= 0)
		sdp_close(P.epfd);
	if (P.wakefd >= 0)
		sdp_close(P.wakefd);
	if (P.timerfd >= 0)
		sdp_close(P.timerfd);
	P.epfd = P.wakefd = P.timerfd = -1;
	return -ENOMEM;
}

static int progress_init(void)
{
	int r = 0;

	if (__atomic_load_n(&P.started, __ATOMIC_ACQUIRE))
		return 0;
	pthread_mutex_lock(&P.start_lock);
	if (!P.started)
		r = progress_start_locked();
	pthread_mutex_unlock(&P.start_lock);
	return r;
}

void sdp_progress_wake(void)
{
	uint64_t one = 1;

	if (P.wakefd >= 0 && sdp_real.write(P.wakefd, &one, sizeof(one)) < 0) {
		/* counter saturated: a wake-up is already pending */
	}
}

/* P.lock held: our epoll holds the QP's event descriptor exactly while
 * the connection is registered and its transport names one (transport.h:
 * event_fd() may change, or be -1).  0, or -errno if it could not be
 * added. */
static int ev_fd_sync_locked(struct sdp_conn *c)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP,
				  .data.ptr = c };
	int want = c->ev_live ? SDP_TP(c->qp)->event_fd(c->qp) : -1;

	if (want == c->ev_fd)
		return 0;
	if (c->ev_fd >= 0)
		sdp_real.epoll_ctl(P.epfd, EPOLL_CTL_DEL, c->ev_fd, NULL);
	c->ev_fd = -1;
	if (want < 0)
		return 0;
	SDP_TSAN_RELEASE(c);	/* handed to the progress thread by epoll */
	if (sdp_real.epoll_ctl(P.epfd, EPOLL_CTL_ADD, want, &ev) < 0)
		return -errno;
	c->ev_fd = want;
	return 0;
}

static void qp_fd_changed(void *ctx)
{
	struct sdp_conn *c = ctx;

	pthread_mutex_lock(&P.lock);
	ev_fd_sync_locked(c);
	pthread_mutex_unlock(&P.lock);
}

static void timer_list_add_locked(struct sdp_conn *c, int full);

static void qp_notify(void *ctx)
{
	struct sdp_conn *c = ctx;

	pthread_mutex_lock(&P.lock);
	timer_list_add_locked(c, 1);
	pthread_mutex_unlock(&P.lock);
	/* The progress thread takes the list after every batch. */
	if (!sdp_in_progress_thread)
		sdp_progress_wake();
}

const struct sdp_qp_events sdp_progress_qp_events = {
	.fd_changed = qp_fd_changed,
	.notify = qp_notify,
};

int sdp_progress_add_conn(struct sdp_conn *c)
{
	int r, missed;

	r = progress_init();
	if (r < 0)
		return r;
	sdp_conn_get(c);
	pthread_mutex_lock(&c->lock);
	/* A listener on this host often answers before the connect gets
	 * here: take the answer now.  Added to the epoll set while readable,
	 * the socket would wake the progress thread, which would only wait
	 * for the locks held here, then find nothing to do. */
	if (c->state == SDP_ST_CONNECTING)
		sdp_conn_progress_locked(c);
	pthread_mutex_lock(&P.lock);
	c->ev_live = 1;
	r = ev_fd_sync_locked(c);
	if (r < 0) {
		c->ev_live = 0;
		pthread_mutex_unlock(&P.lock);
		pthread_mutex_unlock(&c->lock);
		sdp_conn_put(c);
		return r;
	}
	c->registered = 1;
	c->prev = NULL;
	c->next = P.conns;
	if (P.conns)
		P.conns->prev = c;
	P.conns = c;
	/* A timer asked for before it was ours (the answer taken above,
	 * with data held back): listed now. */
	missed = c->timer_missed;
	c->timer_missed = 0;
	if (missed)
		timer_list_add_locked(c, 1);
	pthread_mutex_unlock(&P.lock);
	if (missed && !sdp_in_progress_thread)
		sdp_progress_wake();
	/* Anything that arrived before the QP was armed is handled now:
	 * the peer may have sent before we listened for its doorbell. */
	while (SDP_TP(c->qp)->req_notify(c->qp) > 0)
		sdp_conn_progress_locked(c);
	pthread_mutex_unlock(&c->lock);
	/* No wake-up: the epoll set now holds the connection, and its
	 * deadlines come with their own timers. */
	return 0;
}

int sdp_progress_add_listener(struct sdp_listen *l)
{
	struct epoll_event ev;
	int r;

	r = progress_init();
	if (r < 0)
		return r;
	sdp_listen_get(l);
	ev.events = EPOLLIN;
	ev.data.ptr = (void *)((uintptr_t)l | TAG_LISTENER);
	SDP_TSAN_RELEASE(l);	/* handed to the progress thread by epoll */
	if (sdp_real.epoll_ctl(P.epfd, EPOLL_CTL_ADD, sdp_listen_fd(l),
			       &ev) < 0) {
		r = -errno;
		sdp_listen_put(l);
		return r;
	}
	return 0;
}

void sdp_progress_unwatch(int fd)
{
	if (P.epfd >= 0)
		sdp_real.epoll_ctl(P.epfd, EPOLL_CTL_DEL, fd, NULL);
}

void sdp_progress_release_listener(struct sdp_listen *l)
{
	pthread_mutex_lock(&P.lock);
	l->rel_next = P.released;
	P.released = l;
	pthread_mutex_unlock(&P.lock);
	sdp_progress_wake();
}

static void release_listeners(void)
{
	struct sdp_listen *l, *next;

	pthread_mutex_lock(&P.lock);
	l = P.released;
	P.released = NULL;
	pthread_mutex_unlock(&P.lock);
	for (; l; l = next) {
		next = l->rel_next;
		sdp_listen_put(l);
	}
}

/* P.lock held: put c on the timer list once (the list holds a reference). */
/* `full`: the connection needs a full service when the list is taken
 * (progress, doorbells, an orphan's end).  Without it, it is only a
 * hold's deadline (Nagle, cork), which costs nothing until it is due. */
static void timer_list_add_locked(struct sdp_conn *c, int full)
{
	if (!c->ev_live) {	/* not ours to service (or not yet) */
		c->timer_missed = 1;
		return;
	}
	if (full)
		c->timer_full = 1;
	if (c->in_timer)
		return;
	sdp_conn_get(c);
	c->in_timer = 1;
	c->timer_next = P.timers;
	P.timers = c;
}

/* Put c on the timer list and have the thread look at it by
 * `deadline_ns`: a wake-up only if it would otherwise sleep past it, and
 * then through the timerfd, not now. */
static void arm_timer_by(struct sdp_conn *c, uint64_t deadline_ns, int full)
{
	pthread_mutex_lock(&P.lock);
	timer_list_add_locked(c, full);
	if (!P.wake_at && (!P.lazy_min || deadline_ns < P.lazy_min))
		P.lazy_min = deadline_ns;	/* seen before it sleeps */
	if (deadline_ns < P.wake_at && !sdp_in_progress_thread &&
	    (!P.timer_at || deadline_ns < P.timer_at)) {
		struct itimerspec its = {
			.it_value = {
				.tv_sec = (time_t)(deadline_ns / 1000000000ull),
				.tv_nsec = (long)(deadline_ns % 1000000000ull),
			},
		};

		/* Under P.lock: a later deadline never overwrites it. */
		if (timerfd_settime(P.timerfd, TFD_TIMER_ABSTIME, &its,
				    NULL) == 0)
			__atomic_store_n(&P.timer_at, deadline_ns,
					 __ATOMIC_RELEASE);
		else
			sdp_progress_wake();
	}
	pthread_mutex_unlock(&P.lock);
}

/* Without P.lock, a hint that errs towards "no": will the thread take
 * its timer list by `deadline_ns` anyway (it sleeps until then at the
 * latest, or its timer fires by then)?  Awake (0) says nothing: past its
 * look at the list, it may sleep as long as the deadlines it knew allow. */
static int looks_by(uint64_t deadline_ns)
{
	uint64_t w = __atomic_load_n(&P.wake_at, __ATOMIC_ACQUIRE);
	uint64_t t = __atomic_load_n(&P.timer_at, __ATOMIC_ACQUIRE);

	return (w && w <= deadline_ns) || (t && t <= deadline_ns);
}

void sdp_progress_arm_timer_at(struct sdp_conn *c, uint64_t deadline_ns)
{
	arm_timer_by(c, deadline_ns, 0);
}

void sdp_progress_arm_hold(struct sdp_conn *c, uint64_t deadline_ns)
{
	/* Still on the list from an earlier hold (nginx corks every
	 * response) and the list is taken before the deadline: the thread
	 * reads the deadline under c->lock then, and re-arms.  Saves P.lock
	 * per response.  Listed for a deadline seconds away (a connect's),
	 * the thread may sleep past this one: arm it. */
	if (atomic_load(&c->in_timer) && looks_by(deadline_ns))
		return;
	arm_timer_by(c, deadline_ns, 0);
}

void sdp_progress_arm_orphan(struct sdp_conn *c, uint64_t by_ns)
{
	arm_timer_by(c, by_ns, 1);
}

void sdp_progress_arm_timer(struct sdp_conn *c)
{
	pthread_mutex_lock(&P.lock);
	timer_list_add_locked(c, 1);
	pthread_mutex_unlock(&P.lock);
	/* The progress thread itself recomputes its timeout after every
	 * batch: waking it from there would make it spin while a timer (an
	 * orphan's close deadline) is pending. */
	if (!sdp_in_progress_thread)
		sdp_progress_wake();
}

static int relaying(const struct sdp_conn *c);

void sdp_progress_watch_holders(struct sdp_conn *c)
{
	/* A relayed connection ends with its relay (relay.c). */
	if (c->ready_kept && c->ready_kept->lib_fd >= 0 && !relaying(c))
		sdp_progress_watch_fd(c, c->ready_kept->lib_fd, EPOLLRDHUP);
}

int sdp_progress_watch_relay(int fd)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr =
				  (void *)TAG_RELAY };

	if (!P.started)
		return -EINVAL;
	return sdp_real.epoll_ctl(P.epfd, EPOLL_CTL_ADD, fd,
				  &ev) == 0 ? 0 : -errno;
}

int sdp_progress_watch_fd(struct sdp_conn *c, int fd, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = c };

	if (!c->registered)
		return -EINVAL;
	return sdp_real.epoll_ctl(P.epfd, EPOLL_CTL_ADD, fd,
				  &ev) == 0 ? 0 : -errno;
}

void sdp_progress_unwatch_fd(int fd)
{
	sdp_real.epoll_ctl(P.epfd, EPOLL_CTL_DEL, fd, NULL);
}

static int relaying(const struct sdp_conn *c)
{
	return c->relay && sdp_relay_active(c) && !sdp_relay_done(c);
}

/* A connection we drive for other processes ends: the kernel closes a TCP
 * socket when its last descriptor goes. */
void sdp_progress_end_held_locked(struct sdp_conn *c, int abort)
{
	if (!c->held_elsewhere)
		return;
	if (c->ready_kept && c->ready_kept->lib_fd >= 0)
		sdp_real.epoll_ctl(P.epfd, EPOLL_CTL_DEL, c->ready_kept->lib_fd,
				   NULL);
	c->held_elsewhere = 0;
	sdp_conn_close_locked(c, abort);
}

/* A connection we drive for other processes (held_elsewhere): has the
 * last descriptor of it closed?  Not while it is relayed: the relay ends
 * it (relay.c). */
static void check_holders_locked(struct sdp_conn *c)
{
	struct pollfd p;

	if (!c->held_elsewhere || !c->ready_kept ||
	    c->ready_kept->lib_fd < 0)
		return;
	if (relaying(c))
		return;
	p.fd = c->ready_kept->lib_fd;
	p.events = POLLRDHUP;
	if (sdp_real.poll(&p, 1, 0) <= 0 ||
	    !(p.revents & (POLLRDHUP | POLLHUP | POLLERR)))
		return;
	sdp_log(SDP_LOG_DEBUG, "conn %u: its last descriptor closed", c->id);
	sdp_progress_end_held_locked(c, 0);
}

static void unregister_conn_locked(struct sdp_conn *c)
{
	if (c->held_elsewhere && c->ready_kept && c->ready_kept->lib_fd >= 0)
		sdp_real.epoll_ctl(P.epfd, EPOLL_CTL_DEL, c->ready_kept->lib_fd,
				   NULL);
	if (relaying(c))
		sdp_relay_abort_locked(c);
	pthread_mutex_lock(&P.lock);
	c->ev_live = 0;
	ev_fd_sync_locked(c);
	if (c->prev)
		c->prev->next = c->next;
	else if (P.conns == c)
		P.conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->next = c->prev = NULL;
	pthread_mutex_unlock(&P.lock);
	c->registered = 0;
	c->dead = 1;
}

/* Progress thread only: a connection stopped at the spin cap with work
 * pending, so the next epoll_wait must not sleep. */
static int poll_again;

/* The earliest deadline a connection waits for without a message: its
 * Nagle/cork hold, or the end of a handshake that gets no answer.  0 if
 * none. */
static uint64_t deadline_locked(const struct sdp_conn *c)
{
	uint64_t d = c->nagle_deadline_ns;

	if (c->state == SDP_ST_CONNECTING && c->connect_deadline_ns &&
	    (!d || c->connect_deadline_ns < d))
		d = c->connect_deadline_ns;
	return d;
}

static int connect_due_locked(const struct sdp_conn *c, uint64_t now)
{
	return c->state == SDP_ST_CONNECTING && c->connect_deadline_ns &&
	       now >= c->connect_deadline_ns;
}

/* Run one connection's progress; returns 1 if it must be released. */
static int service_conn(struct sdp_conn *c, uint64_t now)
{
	int spins = 0, release = 0, more, relay;

	pthread_mutex_lock(&c->lock);
	if (!c->registered) {
		pthread_mutex_unlock(&c->lock);
		return 0;
	}
	if (c->detached || !sdp_owner_is_me(c->owner_slot) ||
	    sdp_handover_serve_locked(c)) {
		/* Another process drives it now. */
		unregister_conn_locked(c);
		pthread_mutex_unlock(&c->lock);
		return 1;
	}
	check_holders_locked(c);
	SDP_TP(c->qp)->ack_events(c->qp);
	if (connect_due_locked(c, now)) {
		sdp_conn_progress_locked(c);	/* the answer may be in */
		if (c->state == SDP_ST_CONNECTING)
			sdp_conn_reset_locked(c, -ETIMEDOUT,
					      SDP_REASON_CONNECT_TIMEOUT);
	}
	do {
		sdp_conn_progress_locked(c);
		if (c->nagle_deadline_ns && now >= c->nagle_deadline_ns) {
			c->nagle_deadline_ns = 0;
			sdp_tx_flush_locked(c, 1);
		}
	} while ((more = SDP_TP(c->qp)->req_notify(c->qp) > 0) &&
		 ++spins < 64);
	if (c->orphan) {
		if (!sdp_conn_over_locked(c) && c->close_deadline_ns &&
		    now >= c->close_deadline_ns)
			sdp_conn_reset_locked(c, -ETIMEDOUT, SDP_REASON_TIMEOUT);
		if (sdp_conn_over_locked(c)) {
			unregister_conn_locked(c);
			release = 1;
		}
	}
	/* Stopped at the cap with work pending: req_notify() left the QP
	 * unarmed, so no doorbell will ring for it.  Come back next turn. */
	if (c->registered && (c->nagle_deadline_ns || c->orphan || more))
		sdp_progress_arm_timer(c);
	else if (c->registered && deadline_locked(c))
		sdp_progress_arm_timer_at(c, deadline_locked(c));
	if (c->registered && more)
		poll_again = 1;
	relay = !release && relaying(c);
	pthread_mutex_unlock(&c->lock);
	if (relay)
		sdp_relay_pump(c);
	return release;
}

/* Only a hold's deadline armed the timer: is it due?  If not, keep it
 * on the list and in `nearest`. */
static int hold_due(struct sdp_conn *c, uint64_t now, uint64_t *nearest)
{
	uint64_t d;

	pthread_mutex_lock(&c->lock);
	d = deadline_locked(c);
	if (d && now < d && c->registered) {
		sdp_progress_arm_timer_at(c, d);
		if (!*nearest || d < *nearest)
			*nearest = d;
	}
	pthread_mutex_unlock(&c->lock);
	return d && now >= d;
}

static uint64_t service_timers(uint64_t now, struct sdp_conn **release,
			       int *nrelease, int max)
{
	struct sdp_conn *list, *c, *next;
	uint64_t nearest = 0;

	struct sdp_conn *snap[256];
	unsigned char full[256];
	int ns = 0, si;

	pthread_mutex_lock(&P.lock);
	list = P.timers;
	P.timers = NULL;
	for (c = list; c; c = next) {
		next = c->timer_next;
		c->in_timer = 0;
		if (ns < 256) {
			full[ns] = c->timer_full;
			c->timer_full = 0;
			snap[ns++] = c;
		} else {	/* keep the rest for the next round */
			c->in_timer = 1;
			c->timer_next = P.timers;
			P.timers = c;
			poll_again = 1;
		}
	}
	pthread_mutex_unlock(&P.lock);
	for (si = 0; si < ns; si++) {
		uint64_t d;

		c = snap[si];
		/* A hold that is not due (or was released by a send since:
		 * nginx corks every response) needs no service: servicing
		 * costs three syscalls per connection. */
		if (!full[si] && !hold_due(c, now, &nearest)) {
			sdp_conn_put(c);
			continue;
		}
		if (*nrelease < max && service_conn(c, now))
			release[(*nrelease)++] = c;
		pthread_mutex_lock(&c->lock);
		d = deadline_locked(c);
		if (c->orphan && c->close_deadline_ns &&
		    (!d || c->close_deadline_ns < d))
			d = c->close_deadline_ns;
		pthread_mutex_unlock(&c->lock);
		if (d && (!nearest || d < nearest))
			nearest = d;
		sdp_conn_put(c);	/* the list's; the release array's stays */
	}
	return nearest;
}

static void *progress_main(void *arg)
{
	struct epoll_event ev[64];
	struct sdp_conn *release[128];
	uint64_t nearest = 0, now;
	int n, i, nrel, tmo;

	(void)arg;
	sdp_in_progress_thread = 1;
	sdp_lib_thread_started();
	for (;;) {
		release_listeners();	/* between batches: nothing names them */
		tmo = -1;
		if (nearest) {
			now = sdp_now_ns();
			tmo = nearest > now ?
				(int)((nearest - now) / 1000000ull) + 1 : 0;
		}
		if (poll_again)
			tmo = 0;
		tmo = sdp_stat_progress_timeout(tmo);	/* sdpstat */
		pthread_mutex_lock(&P.lock);
		now = sdp_now_ns();
		if (P.lazy_min) {
			/* Armed while we were awake, after service_timers()
			 * looked: sleep no later than that deadline. */
			int t = P.lazy_min > now ?
				(int)((P.lazy_min - now) / 1000000ull) + 1 : 0;

			if (tmo < 0 || t < tmo)
				tmo = t;
			P.lazy_min = 0;
		}
		__atomic_store_n(&P.wake_at, tmo < 0 ? UINT64_MAX :
				 now + (uint64_t)tmo * 1000000ull,
				 __ATOMIC_RELEASE);
		pthread_mutex_unlock(&P.lock);
		n = sdp_real.epoll_wait(P.epfd, ev, 64, tmo);
		pthread_mutex_lock(&P.lock);
		__atomic_store_n(&P.wake_at, 0, __ATOMIC_RELEASE);
		pthread_mutex_unlock(&P.lock);
		if (n < 0 && errno != EINTR)
			continue;
		now = sdp_now_ns();
		nrel = 0;
		for (i = 0; i < n; i++) {
			uintptr_t p = (uintptr_t)ev[i].data.ptr;

			if (!p) {
				uint64_t v;

				if (sdp_real.read(P.wakefd, &v,
						  sizeof(v)) < 0) {
					/* already drained */
				}
			} else if (p == TAG_TIMER) {
				uint64_t v;

				pthread_mutex_lock(&P.lock);
				if (sdp_real.read(P.timerfd, &v,
						  sizeof(v)) < 0) {
					/* re-armed meanwhile: not yet */
				} else {
					__atomic_store_n(&P.timer_at, 0,
							 __ATOMIC_RELEASE);
				}
				pthread_mutex_unlock(&P.lock);
			} else if (p == TAG_STAT) {	/* sdpstat */
				sdp_stat_poked();
			} else if (p == TAG_RELAY) {
				sdp_relay_serve_requests();
			} else if (p & TAG_LISTENER) {
				struct sdp_listen *l = (void *)(p & ~TAG_MASK);

				SDP_TSAN_ACQUIRE(l);
				sdp_listen_service(l);
			} else if (nrel < 64) {
				struct sdp_conn *c = (void *)p;

				SDP_TSAN_ACQUIRE(c);
				if (service_conn(c, now))
					release[nrel++] = c;
			}
		}
		poll_again = 0;	/* set again by whoever is still capped */
		nearest = service_timers(now, release, &nrel, 128);
		sdp_stat_progress_tick();	/* sdpstat */
		for (i = 0; i < nrel; i++)
			sdp_conn_put(release[i]);
	}
	return NULL;
}

void sdp_progress_foreach(void (*cb)(struct sdp_conn *c, void *arg), void *arg)
{
	struct sdp_conn *c, **snap = NULL;
	size_t n = 0, cap = 0, i;

	/* Snapshot with references, then call back without P.lock held: the
	 * callback may take connection locks, which nest outside P.lock. */
	pthread_mutex_lock(&P.lock);
	for (c = P.conns; c; c = c->next) {
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 64;
			struct sdp_conn **ns = realloc(snap, ncap * sizeof(*ns));

			if (!ns)
				break;
			snap = ns;
			cap = ncap;
		}
		sdp_conn_get(c);
		snap[n++] = c;
	}
	pthread_mutex_unlock(&P.lock);
	for (i = 0; i < n; i++) {
		cb(snap[i], arg);
		sdp_conn_put(snap[i]);
	}
	free(snap);
}

/*
 * At exit, close what the application left open the way the kernel would
 * for TCP: queued data is sent and DisConn follows, so the peer reads EOF
 * instead of a reset.  Bounded: a peer that grants no credit cannot hold
 * the exit for more than about a second.
 */
/* Our reference to the application's end goes (so that the hang-up on
 * ours says whether another process holds it), but its number stays
 * taken: the descriptor table still names the socket there until the
 * process is gone, and a descriptor the kernel handed out under that
 * number meanwhile (an fd the progress thread receives from a peer) would
 * be taken for the socket when the library closes it: a release of the
 * connection from inside its own service, under its lock (a deadlock seen
 * with wrk exiting while nginx shared its readiness descriptor). */
static bool drop_app_end(int app_fd)
{
	static int inert = -1;	/* one for every connection; the process
				 * is going */

	if (inert < 0)
		inert = sdp_fd_high(open("/dev/null", O_RDONLY | O_CLOEXEC));
	return inert >= 0 &&
	       sdp_real.dup3(inert, app_fd, O_CLOEXEC) >= 0;
}

/* Set while _exit() flushes: it may come from a signal handler that
 * interrupted a thread holding a connection's lock, so a lock is waited
 * for briefly there (a connection then goes unflushed, never a hang). */
static int exit_try_only;

static int exit_lock(struct sdp_conn *c)
{
	struct timespec ts;

	if (exit_try_only) {
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 100000000L;	/* a holder that runs: soon */
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		return pthread_mutex_timedlock(&c->lock, &ts) == 0;
	}
	pthread_mutex_lock(&c->lock);
	return 1;
}

/* Exiting while another process still holds the descriptor (a fork child,
 * daemonizing): the connection is not ours to end.  Its queued bytes are
 * sent while the exit flush lasts, then its state is left to that process
 * (handover.h), as the kernel keeps a TCP socket for its other holders. */
static int held_by_other_process(struct sdp_conn *c)
{
	struct pollfd p;

	if (c->held_elsewhere || c->detached)
		return 1;
	if (!c->ready || c->ready->lib_fd < 0)
		return 0;
	if (!drop_app_end(c->ready->app_fd))
		return 0;	/* cannot tell: flush it as ours */
	p.fd = c->ready->lib_fd;
	p.events = POLLRDHUP;
	if (sdp_real.poll(&p, 1, 0) < 0 ||
	    (p.revents & (POLLRDHUP | POLLHUP | POLLERR)))
		return 0;
	sdp_appwake_disarm_locked(c);
	c->ready = NULL;
	c->held_elsewhere = 1;
	return 1;
}

static void flush_one(struct sdp_conn *c, void *arg)
{
	(void)arg;
	if (!exit_lock(c))
		return;
	if (relaying(c)) {
		/* Nobody can relay it after us (relay.h). */
		pthread_mutex_unlock(&c->lock);
		sdp_relay_owner_exiting(c);
		return;
	}
	if (held_by_other_process(c)) {
		if (!c->detached && sdp_owner_is_me(c->owner_slot)) {
			sdp_conn_progress_locked(c);
			sdp_tx_flush_locked(c, 1);
		}
		pthread_mutex_unlock(&c->lock);
		return;
	}
	if (!c->wr_shut && (c->state == SDP_ST_ESTABLISHED ||
			    c->state == SDP_ST_CLOSE_WAIT))
		c->wr_shut = 1;
	sdp_conn_progress_locked(c);
	sdp_tx_flush_locked(c, 1);
	pthread_mutex_unlock(&c->lock);
}

static void leave_one(struct sdp_conn *c, void *arg)
{
	(void)arg;
	if (!exit_lock(c))
		return;
	if (relaying(c)) {	/* as in flush_one: nobody can take it on */
		pthread_mutex_unlock(&c->lock);
		sdp_relay_owner_exiting(c);
		return;
	}
	if (held_by_other_process(c) && !c->detached) {
		sdp_handover_leave_locked(c);
		c->ready = NULL;
		c->detached = 1;
	}
	pthread_mutex_unlock(&c->lock);
}

/* daemon(): the parent leaves with _exit() (no exit flush), so it hands
 * the connections its child holds over before it goes (socket/exec.c). */
void sdp_progress_hand_over(void)
{
	if (!P.started || P.pid != getpid())
		return;
	sdp_progress_foreach(leave_one, NULL);
}

struct pending_arg {
	int pending;
};

static void count_pending(struct sdp_conn *c, void *arg)
{
	struct pending_arg *a = arg;

	if (!exit_lock(c))
		return;
	if (!c->detached && sdp_owner_is_me(c->owner_slot) &&
	    sdp_conn_can_still_send_locked(c) &&
	    (c->txq_len || (!c->held_elsewhere && !c->disconn_sent)))
		a->pending++;
	pthread_mutex_unlock(&c->lock);
}

__attribute__((destructor)) static void progress_at_exit(void)
{
	sdp_progress_exit_flush();
}

void sdp_progress_exit_flush_try(void)
{
	exit_try_only = 1;
	sdp_progress_exit_flush();
}

void sdp_progress_exit_flush(void)
{
	uint64_t end;
	struct pending_arg a;

	if (!P.started || P.pid != getpid())
		return;
	end = sdp_now_ns() + 1000000000ull;
	do {
		sdp_progress_foreach(flush_one, NULL);
		a.pending = 0;
		sdp_progress_foreach(count_pending, &a);
		if (!a.pending)
			break;
		usleep(1000);	/* poll credits: the progress thread helps */
	} while (sdp_now_ns() < end);
	sdp_progress_foreach(leave_one, NULL);
}
