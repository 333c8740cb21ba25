/* SPDX-License-Identifier: MIT */
/*
 * epfast.c — user-space readiness for SDP connections in an epoll set.
 *
 * Why.  With kernel-mirrored readiness (engine/readiness.c), every message
 * for an event loop costs a readiness byte (written by the peer) and its
 * drain (by us): as many syscalls as TCP, so no faster.  Here the library
 * keeps, per epoll descriptor, the SDP connections registered in it
 * (through the interposed epoll_ctl), and the interposed epoll_wait looks
 * at them in user space first.  A connection handled this way is in
 * "user-space readiness" (ready.user.on, engine/readiness.h): while the
 * application runs, "readable" is not mirrored into the kernel at all, and the peer's
 * solicited sends cost no syscall (the quiet arm, SDP_APP_ARM_QUIET).
 * Only when epoll_wait is about to sleep does the peer need to write the
 * readiness byte that wakes the kernel's epoll: the set's wake word
 * (transport/wakeword.h) says so for every connection whose quiet arm is
 * keyed to it, in one store; any other connection is counted in
 * (ready.user.sleepers) and brought back to the kernel mirror with a loud
 * arm, undone when the wait wakes.  Every eligible connection of the set
 * is looked at, however many: a connection left out would cost the peer a
 * byte per message.
 *
 * Exactness.  Events found in user space are reported with the
 * registration's data; the kernel's own events (TCP descriptors, listeners,
 * EPOLLOUT, EOF and errors, which always stay mirrored) are still collected
 * by a real epoll_wait (timeout 0 when user-space events are at hand) and
 * merged, one entry per registration.  Level-triggered: reported while data
 * is unread.  EPOLLET: one report per arrival (rx_end moved since the last
 * report).  Anything this cannot follow exactly puts the connection back
 * to the kernel mirror for good ("demotion"):
 *   - EPOLLONESHOT or EPOLLEXCLUSIVE registrations (never promoted);
 *   - a connection registered more than once (two sets, or a dup);
 *   - an epoll set added to another epoll set (nesting), or polled;
 *   - poll/ppoll/select/pselect naming the connection or such a set;
 *   - fork() (the parent's sets and connections; sets are then shared).
 * A connection is promoted only at its set's epoll_wait, so a program that
 * never calls epoll_wait keeps today's behaviour.  SDP_EPOLL_FAST=0 turns
 * this off; SDP_EPOLL_WORD=0 leaves out the wake word.
 *
 * Not async-signal-safe, as epoll_wait itself may not be assumed to be:
 * it takes mutexes.  epoll_ctl allocates (it is not async-signal-safe in
 * practice either for an interposer); epoll_wait only grows its thread's
 * snapshot array when the set has grown past it.
 */
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>

#include "base/atfork.h"
#include "base/owner.h"
#include "engine/appwake.h"
#include "base/config.h"
#include "engine/conn.h"
#include "base/real.h"
#include "base/sigseen.h"
#include "base/spin.h"
#include "socket/sock.h"

#define EP_MAX_FD 65536		/* epoll descriptors tracked (by number) */

struct ep_ent {
	struct sdp_sock *s;	/* a reference */
	int fd;
	uint32_t events;
	epoll_data_t data;
};

struct ep_set {
	int n, cap;
	unsigned off:1;		/* nested, polled or forked: kernel only */
	int word;		/* wake word handle (wakeword.h), or -1 */
	struct ep_ent *e;
	/* Changed with anything a snapshot copies (entries, EPOLLIN/EPOLLET,
	 * data, off): unique across sets (ep_gen_next), so that a thread's
	 * cached snapshot of a set is known current by one compare. */
	uint64_t gen;
};

static pthread_mutex_t ep_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ep_set *sets[EP_MAX_FD];
static uint64_t ep_gen_next = 1;	/* under ep_lock */
/* Bumped when a socket's connection may have changed for a snapshot (a
 * socket released, connected, demoted): every cached snapshot is stale. */
static _Atomic uint64_t ep_conn_gen;

static void set_changed_locked(struct ep_set *set)
{
	set->gen = ep_gen_next++;
}

static void snap_drop_own(void);

void sdp_epfast_conns_changed(void)
{
	atomic_fetch_add(&ep_conn_gen, 1);
	/* This thread's own cache goes now (its connections' descriptors
	 * with it); other threads' at their next epoll_wait, or exit. */
	snap_drop_own();
}
/* sets[ep]->off, readable without ep_lock (the set may be freed). */
static _Atomic unsigned char set_off[EP_MAX_FD];
static _Atomic int ep_any;	/* some set has entries: poll/select look */
static int ep_disabled = -1;	/* SDP_EPOLL_FAST=0 */
static int ep_no_word;		/* SDP_EPOLL_WORD=0: arm one by one */

static int (*real_epoll_wait)(int, struct epoll_event *, int, int);
static int (*real_epoll_pwait)(int, struct epoll_event *, int, int,
			       const sigset_t *);
static int (*real_epoll_pwait2)(int, struct epoll_event *, int,
				const struct timespec *, const sigset_t *);
static int (*real_epoll_create)(int);
static int (*real_epoll_create1)(int);
static int (*real_poll)(struct pollfd *, nfds_t, int);
static int (*real_ppoll)(struct pollfd *, nfds_t, const struct timespec *,
			 const sigset_t *);
static int (*real_select)(int, fd_set *, fd_set *, fd_set *,
			  struct timeval *);
static int (*real_pselect)(int, fd_set *, fd_set *, fd_set *,
			   const struct timespec *, const sigset_t *);

static pthread_once_t ep_once = PTHREAD_ONCE_INIT;

static void ep_resolve(void)
{
	real_epoll_wait = dlsym(RTLD_NEXT, "epoll_wait");
	real_epoll_pwait = dlsym(RTLD_NEXT, "epoll_pwait");
	real_epoll_pwait2 = dlsym(RTLD_NEXT, "epoll_pwait2");
	real_epoll_create = dlsym(RTLD_NEXT, "epoll_create");
	real_epoll_create1 = dlsym(RTLD_NEXT, "epoll_create1");
	real_poll = dlsym(RTLD_NEXT, "poll");
	real_ppoll = dlsym(RTLD_NEXT, "ppoll");
	real_select = dlsym(RTLD_NEXT, "select");
	real_pselect = dlsym(RTLD_NEXT, "pselect");
	sdp_config_init();
	ep_disabled = !sdp_cfg.epoll_fast || !sdp_cfg.appwake ||
		      sdp_real_init() < 0;
	ep_no_word = !sdp_cfg.epoll_word;
}

static void ep_init(void)
{
	pthread_once(&ep_once, ep_resolve);
}

/* ---- demotion -------------------------------------------------------------- */

static struct sdp_conn *sock_conn(struct sdp_sock *s)
{
	struct sdp_conn *c = NULL;

	pthread_mutex_lock(&s->lock);
	if (s->kind == SDP_SK_CONN && s->conn) {
		c = s->conn;
		sdp_conn_get(c);
	}
	pthread_mutex_unlock(&s->lock);
	return c;
}

/* Back to the kernel mirror ("readable" mirrored now, a loud arm); for
 * good if `for_good`.  Takes the socket's lock and then the connection's:
 * never with ep_lock held (the lock order is socket, connection,
 * ep_lock). */
static void sock_mirror(struct sdp_sock *s, int for_good)
{
	struct sdp_ready_user *u = &s->ready.user;
	struct sdp_conn *c = sock_conn(s);

	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	if (for_good)
		u->off = 1;
	if (u->on) {
		u->on = 0;
		sdp_conn_update_ready_locked(c);
	}
	pthread_mutex_unlock(&c->lock);
	sdp_conn_put(c);
}

/* The socket may no longer use user-space readiness. */
static void sock_demote(struct sdp_sock *s)
{
	atomic_store(&s->ep_off, 1);
	sdp_epfast_conns_changed();	/* out of every snapshot */
	sock_mirror(s, 1);
}

/* The registration changed: the next epoll_wait looks under the lock. */
static void sock_relook(struct sdp_sock *s)
{
	atomic_store(&s->ready.user.idle, 0);
}

/*
 * Added to a set while another thread may already sleep in epoll_wait on
 * it (an event MPM's worker hands a keep-alive connection back to the
 * listener thread): that sleep armed the connections it knew, not this
 * one, and a quiet arm would leave the next request unseen until the
 * sleep's timeout.  So the connection goes back to the kernel mirror
 * (readable mirrored now, a loud arm) until an epoll_wait looks at it
 * and may promote it again.
 */
static void sock_unpromote(struct sdp_sock *s)
{
	sock_mirror(s, 0);
}

#define DEMOTE_BATCH 256

/* A set the kernel's own waiters watch from now on (nested, polled,
 * renumbered, forked): demote its sockets, in batches taken under ep_lock
 * and demoted outside it. */
static void set_demote(int ep)
{
	struct sdp_sock *v[DEMOTE_BATCH];
	int n;

	if (ep < 0 || ep >= EP_MAX_FD)
		return;
	do {
		struct ep_set *set;

		n = 0;
		pthread_mutex_lock(&ep_lock);
		set = sets[ep];
		if (set) {
			set->off = 1;
			set_changed_locked(set);
			atomic_store(&set_off[ep], 1);
			for (int i = 0; i < set->n && n < DEMOTE_BATCH; i++) {
				struct sdp_sock *s = set->e[i].s;

				if (atomic_exchange(&s->ep_off, 1))
					continue;	/* done, or being done */
				atomic_fetch_add(&s->refs, 1);
				v[n++] = s;
			}
		}
		pthread_mutex_unlock(&ep_lock);
		for (int i = 0; i < n; i++) {
			sock_demote(v[i]);
			sdp_sock_put(v[i]);
		}
	} while (n == DEMOTE_BATCH);
}

static void set_free_locked(int ep)
{
	struct ep_set *set = sets[ep];

	if (!set)
		return;
	for (int i = 0; i < set->n; i++) {
		set->e[i].s->ep_regs--;
		sdp_sock_put(set->e[i].s);
	}
	if (set->word >= 0)
		sdp_appwake_set_word_free(set->word);
	free(set->e);
	free(set);
	sets[ep] = NULL;
	atomic_store(&set_off[ep], 0);
}

/* ---- epoll_ctl bookkeeping --------------------------------------------------- */

static int ent_find(const struct ep_set *set, int ep, int fd,
		    const struct sdp_sock *s)
{
	int h = s->ep_idx;

	/* redis-benchmark and others MOD on every request: O(1) first. */
	if (s->ep_ep == ep && h >= 0 && h < set->n && set->e[h].s == s &&
	    set->e[h].fd == fd)
		return h;
	for (int i = 0; i < set->n; i++)
		if (set->e[i].fd == fd && set->e[i].s == s)
			return i;
	return -1;
}

static void ent_del_locked(struct ep_set *set, int i)
{
	struct sdp_sock *moved;

	set->e[i].s->ep_regs--;
	sdp_sock_put(set->e[i].s);
	set_changed_locked(set);
	set->e[i] = set->e[--set->n];
	moved = set->e[i].s;
	if (i < set->n && moved->ep_idx == set->n &&
	    moved->ep_ep >= 0 && sets[moved->ep_ep] == set)
		moved->ep_idx = i;
}

/* After a successful real epoll_ctl(ep, op, fd, ev); `s`: fd's SDP socket
 * (the caller's reference), or NULL. */
static void ctl_bookkeep(int ep, int op, int fd, const struct epoll_event *ev,
			 struct sdp_sock *s)
{
	struct ep_set *set;
	int i, demote = 0, relook = 0;

	ep_init();
	if (ep_disabled || ep < 0 || ep >= EP_MAX_FD || fd < 0)
		return;
	/* An epoll set inside another one: its waiters are the kernel's. */
	if (op == EPOLL_CTL_ADD && fd < EP_MAX_FD && sets[fd] &&
	    !atomic_load(&set_off[fd]))
		set_demote(fd);
	/* Descriptors that are not SDP sockets (the library's own among
	 * them) take no lock here. */
	if (!s)
		return;
	pthread_mutex_lock(&ep_lock);
	set = sets[ep];
	switch (op) {
	case EPOLL_CTL_ADD:
		if (!set) {
			set = calloc(1, sizeof(*set));
			if (!set) {
				demote = 1;
				break;
			}
			set->word = ep_no_word ? -1 : sdp_appwake_set_word_alloc();
			sets[ep] = set;
		}
		if (set->n == set->cap) {
			int cap = set->cap ? set->cap * 2 : 16;
			struct ep_ent *e = realloc(set->e, cap * sizeof(*e));

			if (!e) {
				demote = 1;
				break;
			}
			set->e = e;
			set->cap = cap;
		}
		atomic_fetch_add(&s->refs, 1);
		s->ep_ep = ep;
		s->ep_idx = set->n;
		set->e[set->n++] = (struct ep_ent){ s, fd, ev->events, ev->data };
		set_changed_locked(set);
		demote = ++s->ep_regs > 1 || set->off ||
			 (ev->events & (EPOLLONESHOT | EPOLLEXCLUSIVE));
		atomic_store(&ep_any, 1);
		break;
	case EPOLL_CTL_MOD:
		if (set && (i = ent_find(set, ep, fd, s)) >= 0) {
			/* EPOLLIN or EPOLLET changed: what is due changed. */
			relook = !!((set->e[i].events ^ ev->events) &
				    (EPOLLIN | EPOLLET));
			/* Only EPOLLOUT toggled (wrk, redis: per request):
			 * a snapshot's copy is still good. */
			if (relook || set->e[i].data.u64 != ev->data.u64)
				set_changed_locked(set);
			set->e[i].events = ev->events;
			set->e[i].data = ev->data;
			demote = !!(ev->events & (EPOLLONESHOT | EPOLLEXCLUSIVE));
		}
		break;
	case EPOLL_CTL_DEL:
		if (set && (i = ent_find(set, ep, fd, s)) >= 0)
			ent_del_locked(set, i);
		break;
	}
	pthread_mutex_unlock(&ep_lock);
	if (demote)
		sock_demote(s);
	else if (op == EPOLL_CTL_ADD)
		sock_unpromote(s);
	else if (relook)
		sock_relook(s);
}

/* The kernel's epoll_ctl and our record of it are one step for the other
 * threads of the process, as the kernel's call alone is: a DEL that ran
 * between another thread's kernel ADD and its record (the DEL's event came
 * from the kernel, which already had the descriptor) left the descriptor
 * recorded here and gone from the kernel.  User space then reported it,
 * the caller's DEL failed with ENOENT, its next ADD with EEXIST, and a
 * listener thread handing connections to a worker stopped.  Striped by
 * set, so that calls on unrelated sets seldom wait for each other. */
#define CTL_LOCKS 16
static pthread_mutex_t ctl_locks[CTL_LOCKS] = {
	[0 ... CTL_LOCKS - 1] = PTHREAD_MUTEX_INITIALIZER
};

int sdp_epfast_ctl(int ep, int op, int fd, struct epoll_event *ev)
{
	pthread_mutex_t *m = &ctl_locks[(unsigned)ep % CTL_LOCKS];
	struct sdp_sock *s = NULL;
	int r, e;

	pthread_mutex_lock(m);
	s = fd >= 0 ? sdp_fd_get(fd) : NULL;
	/* The set holds the file: the pair must be in place first. */
	r = s && op != EPOLL_CTL_DEL ? sdp_sock_pair(s) : 0;
	if (r < 0) {
		e = ENOMEM;	/* as epoll_ctl reports a lack of resources */
		r = -1;
	} else {
		r = sdp_real.epoll_ctl(ep, op, fd, ev);
		e = errno;
	}
	if (r == 0) {
		/* The set's epoll_wait reads the kernel's readiness when it
		 * sleeps (a thread may sleep in it already: the re-arm
		 * mirrors what came). */
		if (s && op != EPOLL_CTL_DEL)
			sdp_sock_kernel_watch(s);
		ctl_bookkeep(ep, op, fd, ev, s);
	}
	pthread_mutex_unlock(m);
	if (s)
		sdp_sock_put(s);
	errno = e;
	return r;
}

static void replace_in_set_locked(struct ep_set *set, int ep, int fd,
				  struct sdp_sock *s, int readd)
{
	int i;

	while ((i = ent_find(set, ep, fd, s)) >= 0) {
		struct epoll_event ev = { .events = set->e[i].events,
					  .data = set->e[i].data };

		/* The old file leaves the set when it closes; the new one
		 * must be added under the same number. */
		if (readd)
			sdp_real.epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
		ent_del_locked(set, i);
	}
}

void sdp_epfast_fd_replaced(int fd, struct sdp_sock *s, int readd)
{
	int ep;

	if (!atomic_load(&ep_any))
		return;
	pthread_mutex_lock(&ep_lock);
	/* Most fall back before any epoll_ctl: nothing to look for.  Else
	 * the last set it joined first, the rest by scanning. */
	ep = s->ep_ep;
	if (s->ep_regs > 0 && ep >= 0 && ep < EP_MAX_FD && sets[ep])
		replace_in_set_locked(sets[ep], ep, fd, s, readd);
	for (ep = 0; s->ep_regs > 0 && ep < EP_MAX_FD; ep++) {
		if (sets[ep])
			replace_in_set_locked(sets[ep], ep, fd, s, readd);
	}
	pthread_mutex_unlock(&ep_lock);
}

/* A new epoll descriptor: whatever we knew under that number is stale. */
static int ep_created(int ep)
{
	if (ep >= 0 && ep < EP_MAX_FD && !ep_disabled && sets[ep]) {
		set_demote(ep);
		pthread_mutex_lock(&ep_lock);
		set_free_locked(ep);
		pthread_mutex_unlock(&ep_lock);
	}
	return ep;
}

SDP_EXPORT int epoll_create(int size)
{
	ep_init();
	return ep_created(real_epoll_create(size));
}

SDP_EXPORT int epoll_create1(int flags)
{
	ep_init();
	return ep_created(real_epoll_create1(flags));
}

/* ---- epoll_wait ---------------------------------------------------------------- */

struct snap {
	struct sdp_sock *s;	/* a reference */
	struct sdp_conn *c;	/* a reference: s->conn when taken */
	uint32_t events;
	epoll_data_t data;
	int covered;		/* this sleep: armed with the set's word */
};

/* This thread's snapshot array, grown to the largest set it waited on;
 * freed when the thread exits. */
static __thread struct snap *snap_buf;
static __thread int snap_cap;
static pthread_key_t snap_key;
static pthread_once_t snap_key_once = PTHREAD_ONCE_INIT;

/* The snapshot in snap_buf is kept, with its references, for the next
 * epoll_wait of the same set: rebuilding it took each socket's lock and a
 * reference per connection per call (wrk: 125 connections a thread). */
static __thread int snap_n, snap_ep = -1, snap_word = -1;
static __thread uint64_t snap_set_gen, snap_conn_gen;

static void snap_drop(void)
{
	for (int i = 0; i < snap_n; i++) {
		sdp_conn_put(snap_buf[i].c);
		sdp_sock_put(snap_buf[i].s);
	}
	snap_n = 0;
	snap_ep = -1;
}

/* Set while fast_wait uses snap_buf (a handler's close must not drop
 * it under it). */
static __thread int snap_in_use;

static void snap_drop_own(void)
{
	if (!snap_in_use && snap_n)
		snap_drop();
}

static void snap_buf_free(void *b)
{
	snap_drop();
	free(b);
}

static void snap_key_make(void)
{
	pthread_key_create(&snap_key, snap_buf_free);
}

/* Room for n entries (0 if none could be had: the caller then waits in
 * the kernel alone, as for a set with no SDP connection). */
static int snap_room_locked(int n)
{
	struct snap *b;
	int cap;

	if (n <= snap_cap)
		return 1;
	cap = snap_cap ? snap_cap : 64;
	while (cap < n)
		cap *= 2;
	b = realloc(snap_buf, (size_t)cap * sizeof(*b));
	if (!b)
		return 0;
	pthread_once(&snap_key_once, snap_key_make);
	pthread_setspecific(snap_key, b);
	snap_buf = b;
	snap_cap = cap;
	return 1;
}

/* The set's eligible connections (references, kept for the next call:
 * snap_n) in snap_buf, and the set's wake word into *word. */
static int snapshot(int ep, int *word)
{
	struct ep_set *set;
	struct snap *out;
	uint64_t conn_gen = atomic_load(&ep_conn_gen);
	int n = 0;

	pthread_mutex_lock(&ep_lock);
	set = sets[ep];
	if (set && !set->off && ep == snap_ep && set->gen == snap_set_gen &&
	    conn_gen == snap_conn_gen) {
		pthread_mutex_unlock(&ep_lock);
		*word = snap_word;
		return snap_n;	/* unchanged: the cached one */
	}
	pthread_mutex_unlock(&ep_lock);
	snap_drop();		/* its puts without ep_lock */
	pthread_mutex_lock(&ep_lock);
	set = sets[ep];
	if (!set || set->off || !snap_room_locked(set->n)) {
		pthread_mutex_unlock(&ep_lock);
		return 0;
	}
	*word = set->word;
	out = snap_buf;
	for (int i = 0; i < set->n; i++) {
		struct ep_ent *e = &set->e[i];
		struct sdp_conn *c;

		if (atomic_load(&e->s->nfds) == 0) {
			/* Closed: the kernel dropped the registration. */
			ent_del_locked(set, i--);
			continue;
		}
		if (e->s->ep_off || !(e->events & EPOLLIN))
			continue;
		c = sock_conn(e->s);
		if (!c)
			continue;
		atomic_fetch_add(&e->s->refs, 1);
		out[n++] = (struct snap){ e->s, c, e->events, e->data, 0 };
	}
	snap_n = n;
	snap_ep = ep;
	snap_word = *word;
	snap_set_gen = set->gen;
	snap_conn_gen = conn_gen;
	pthread_mutex_unlock(&ep_lock);
	return n;
}

static int promotable_locked(const struct sdp_sock *s,
			     const struct sdp_conn *c)
{
	if (s->ready.user.off || c->ready != &s->ready || s->ready.lib_fd < 0 ||
	    c->orphan || c->detached || c->appwake_off || !c->qp ||
	    c->state != SDP_ST_ESTABLISHED || !sdp_owner_is_me(c->owner_slot))
		return 0;
	return sdp_appwake_capable_locked(c);
}

/* Nothing new since the connection was last found with nothing to
 * report: the peer's arrival counter has not moved and no readiness
 * update came in between (engine/readiness.h user.idle).  Lock-free, so that a loop with
 * many quiet connections pays a load or two per connection per look, not a
 * lock and the transport's ring.  A message this misses (published just
 * now, the peer seeing the quiet arm) is the next look's, or the loud
 * arm's before any sleep. */
static int conn_idle(const struct snap *sn)
{
	struct sdp_ready_user *u = &sn->s->ready.user;
	const _Atomic uint32_t *arr =
		atomic_load_explicit(&u->arrivals, memory_order_acquire);
	uint64_t idle = atomic_load_explicit(&u->idle, memory_order_acquire);

	return idle && arr &&
	       (uint32_t)idle == atomic_load_explicit(arr, memory_order_acquire);
}

/* Look at one connection in user space; 1 if an event is due.  `word`:
 * its set's wake word. */
static int conn_check(struct snap *sn, int word)
{
	struct sdp_conn *c = sn->c;
	struct sdp_ready_user *u = &sn->s->ready.user;
	const _Atomic uint32_t *arr;
	uint32_t arrivals;
	int due = 0;

	if (conn_idle(sn))
		return 0;
	pthread_mutex_lock(&c->lock);
	if (!sdp_owner_is_me(c->owner_slot)) {
		/* Another process drives it: the kernel readiness it steers
		 * is the truth here (engine/handover.h). */
		pthread_mutex_unlock(&c->lock);
		return 0;
	}
	if (!u->on) {
		if (!promotable_locked(sn->s, c)) {
			pthread_mutex_unlock(&c->lock);
			return 0;
		}
		u->on = 1;
		/* Take "readable" out of the kernel (a drain, once). */
		sdp_conn_update_ready_locked(c);
	}
	arr = atomic_load_explicit(&u->arrivals, memory_order_relaxed);
	if (!arr) {
		arr = sdp_appwake_arrivals_locked(c);
		atomic_store_explicit(&u->arrivals, arr, memory_order_release);
	}
	/* Read before looking: a message after this moves the counter. */
	arrivals = arr ? atomic_load(arr) : 0;
	u->et = !!(sn->events & EPOLLET);
	/* A new set, or the first look: its word keys the quiet arm, which
	 * the readiness update of the full path below re-makes. */
	if (u->on)
		sdp_appwake_word_locked(c, word);
	/* Quietly armed and nothing waiting in the ring: nothing new since
	 * the connection was last looked at, no lock-step progress needed. */
	if (!sdp_appwake_quiet_idle_locked(c))
		sdp_conn_progress_locked(c);
	if (u->on && sdp_conn_rx_avail_locked(c) > 0 &&
	    (!(sn->events & EPOLLET) || u->seen_end != c->rx_end)) {
		u->seen_end = c->rx_end;
		due = 1;
	}
	/* Level-triggered: nothing unread.  Edge-triggered: no arrival
	 * since the last report.  Either way only a message or a readiness
	 * update can change that. */
	if (!due && u->on && arr)
		atomic_store_explicit(&u->idle, (1ull << 32) | arrivals,
				      memory_order_release);
	pthread_mutex_unlock(&c->lock);
	return due;
}

/* Going to sleep in the kernel (+1) or back from it (-1): the
 * connection's kernel mirror follows its count of sleepers. */
static void conn_resync(const struct snap *sn, int sleeping)
{
	struct sdp_conn *c = sn->c;
	struct sdp_ready_user *u = &sn->s->ready.user;

	pthread_mutex_lock(&c->lock);
	u->sleepers += sleeping;
	if (u->on)
		sdp_conn_update_ready_locked(c);
	pthread_mutex_unlock(&c->lock);
}

/* The kernel reported this registration after a sleep: its arrival has
 * had its edge. */
static void conn_seen(const struct snap *sn)
{
	struct sdp_conn *c = sn->c;

	pthread_mutex_lock(&c->lock);
	sn->s->ready.user.seen_end = c->rx_end;
	pthread_mutex_unlock(&c->lock);
}

static int kernel_wait_now(int ep, struct epoll_event *ev, int max, int tmo,
			   const struct timespec *ts, const sigset_t *mask,
			   int kind)
{
	struct timespec zero = { 0, 0 };

	switch (kind) {
	case 0:
		return real_epoll_wait(ep, ev, max, tmo);
	case 1:
		return real_epoll_pwait(ep, ev, max, tmo, mask);
	default:
		return real_epoll_pwait2(ep, ev, max, tmo == 0 ? &zero : ts,
					 mask);
	}
}

/* The kernel calls below are cancellation points: a thread cancelled in
 * one (pthread_cancel, deferred) still ends its sleep. */
static void app_sleep_cancelled(void *token)
{
	sdp_appwake_sleep_end(*(int *)token);
}

/* A poll/select/epoll call: with a timeout that is not zero, a sleep;
 * else a look (multi.h).  Returns the call's result, errno intact. */
#define AS_APP_SLEEP(zero_timeout, call)				\
	do {								\
		int token_, r_, e_;					\
		if (zero_timeout) {					\
			sdp_appwake_look();				\
			return call;					\
		}							\
		token_ = sdp_appwake_sleep_begin();			\
		pthread_cleanup_push(app_sleep_cancelled, &token_);	\
		r_ = call;						\
		e_ = errno;						\
		pthread_cleanup_pop(0);					\
		sdp_appwake_sleep_end(token_);				\
		errno = e_;						\
		return r_;						\
	} while (0)

static int kernel_wait(int ep, struct epoll_event *ev, int max, int tmo,
		       const struct timespec *ts, const sigset_t *mask,
		       int kind)
{
	AS_APP_SLEEP(tmo == 0,
		     kernel_wait_now(ep, ev, max, tmo, ts, mask, kind));
}

/* Merge kernel events ev[k..k+n) into the user ones ev[0..k) by data. */
static int merge(struct epoll_event *ev, int k, int n)
{
	int out = k;

	for (int i = k; i < k + n; i++) {
		int j;

		for (j = 0; j < k; j++)
			if (ev[j].data.u64 == ev[i].data.u64)
				break;
		if (j < k)
			ev[j].events |= ev[i].events;
		else
			ev[out++] = ev[i];
	}
	return out;
}

static __thread unsigned ep_tick;
/* When this thread's epoll_wait last found a user-space event. */
static __thread uint64_t ep_hit_ns;

/* Up to max-1 user-space events into ev (room is left for the kernel's,
 * so that they are not starved by busy SDP connections). */
static int user_events(struct snap *sn, int n, int word,
		       struct epoll_event *ev, int max)
{
	int k = 0;

	for (int i = 0; i < n && k < (max > 1 ? max - 1 : 1); i++) {
		if (conn_check(&sn[i], word))
			ev[k++] = (struct epoll_event){ EPOLLIN, sn[i].data };
	}
	return k;
}

/* Spin only in a loop that is busy with SDP traffic: an event loop that
 * found one within the last 10 ms.  Any other wait sleeps at once. */
#define EP_SPIN_RECENT_NS 10000000ull
static int spin_worthwhile(void)
{
	uint64_t now;

	if (!sdp_cfg.spin_us || !ep_hit_ns)
		return 0;
	now = sdp_now_ns();
	return now - ep_hit_ns < EP_SPIN_RECENT_NS && sdp_spin_allowed(now);
}

/* Busy-poll the set for SDP_SPIN_US before epoll_wait sleeps, as a
 * blocking recv does (engine/rx.c): the answer to what the loop just sent
 * usually comes within microseconds, and sleeping for it costs the peer a
 * readiness byte (the loud arm) and us a sleep and a wake-up, about as
 * much as TCP's whole path.  Spinning, the arms stay quiet.  The kernel's
 * own events are looked at every few rounds (timeout 0).  Yield rather
 * than pause: on a small host the peer shares our CPU; a yield that lost
 * the CPU to other work ends the spin (base/spin.h).  Returns the
 * kernel's answer if it had events or failed (-1, errno), else 0 with *k
 * user-space events in ev. */
static int spin(int ep, struct snap *sn, int n, int word,
		struct epoll_event *ev, int max, const struct timespec *ts,
		const sigset_t *mask, int kind, int *k, unsigned sig)
{
	uint64_t now = sdp_now_ns(), end = now + sdp_cfg.spin_us * 1000ull;
	unsigned round = 0;
	bool more = true;
	int r;

	do {
		more = sdp_spin_yield(&now);
		if (sdp_sig_seen != sig) {
			errno = EINTR;	/* a handler ran: as a sleep would */
			return -1;
		}
		*k = user_events(sn, n, word, ev, max);
		if (*k)
			return 0;
		if ((++round & 3) == 0) {
			r = kernel_wait(ep, ev, max, 0, ts, mask, kind);
			if (r != 0)
				return r;
		}
	} while (more && now < end);
	return 0;
}

static uint32_t ep_pid;		/* sleep ids: unique across processes */
static _Atomic uint32_t ep_waits;

/* About to sleep in the kernel.  Connections armed with the set's wake
 * word need nothing but the word: add ourselves to it, then make sure that
 * none of them had news meanwhile (wakeword.h: store, then look; the peer
 * publishes, then reads the word).  The others go back to the kernel
 * mirror with loud arms: a message that came since conn_check() is
 * mirrored now (a byte), so the kernel returns at once.  Returns 0, with
 * nothing to undo, if a connection of the word had news: look again. */
static int sleep_begin(struct snap *sn, int n, int word)
{
	int i, news = 0;

	if (word >= 0)
		sdp_appwake_set_word_sleep(word, 1);
	sdp_appwake_sleep_id = ((uint64_t)ep_pid << 32) |
			       (uint32_t)atomic_fetch_add(&ep_waits, 1);
	for (i = 0; i < n && !news; i++) {
		sn[i].covered = word >= 0 &&
				sdp_appwake_armed_word(sn[i].c) == word;
		if (!sn[i].covered)
			conn_resync(&sn[i], 1);
		else if (!conn_idle(&sn[i]))
			news = 1;
	}
	sdp_appwake_sleep_id = 0;
	if (!news)
		return 1;
	while (i-- > 0)
		if (!sn[i].covered)
			conn_resync(&sn[i], -1);
	sdp_appwake_set_word_sleep(word, -1);
	return 0;
}

/* A connection of the word whose byte woke us: take the byte and its
 * message in now (the update disarms, which accounts for the byte, and
 * re-arms with the word, the set being awake), so that the kernel mirror
 * holds nothing stale; the kernel's report was its edge. */
static void covered_seen(const struct snap *sn)
{
	struct sdp_conn *c = sn->c;

	pthread_mutex_lock(&c->lock);
	sdp_conn_update_ready_locked(c);
	sn->s->ready.user.seen_end = c->rx_end;
	pthread_mutex_unlock(&c->lock);
}

static void sleep_end(struct snap *sn, int n, int word,
		      const struct epoll_event *ev, int r)
{
	sdp_appwake_set_word_sleep(word, -1);
	for (int i = 0; i < n; i++) {
		int seen = 0;

		for (int j = 0; j < r; j++) {
			if (ev[j].data.u64 == sn[i].data.u64) {
				seen = 1;
				break;
			}
		}
		if (sn[i].covered) {
			/* Not reported: any byte on its way is accounted
			 * when the connection is next looked at (its
			 * arrival counter moved; conn_check). */
			if (seen)
				covered_seen(&sn[i]);
			else if (sdp_appwake_armed_word(sn[i].c) != word)
				/* Armed loudly while the set slept (the
				 * progress thread updated it then): quiet
				 * again now, or each message costs a byte
				 * until the next look, which a cancelled or
				 * finished loop never makes. */
				conn_resync(&sn[i], 0);
			continue;
		}
		if (seen)
			conn_seen(&sn[i]);
		conn_resync(&sn[i], -1);
	}
}

/* Sleep attempts that found news under the word before the set arms its
 * connections one by one instead (they bound a loop with a connection
 * that keeps changing). */
#define WORD_TRIES 4

/* What a thread cancelled in its kernel sleep (a cancellation point) must
 * undo: the set's sleep (else it looks asleep for good and its peers write
 * a readiness byte for every message). */
struct sleep_undo {
	struct snap *sn;
	int n, word;
	int sleeping;		/* between sleep_begin and sleep_end */
};

static void sleep_cancelled(void *arg)
{
	const struct sleep_undo *u = arg;

	if (u->sleeping)
		sleep_end(u->sn, u->n, u->word, NULL, -1);
	/* The snapshot's references stay with the thread's cache (its key's
	 * destructor drops them when the thread exits). */
	snap_in_use = 0;
}

static int fast_wait(int ep, struct epoll_event *ev, int max, int tmo,
		     const struct timespec *ts, const sigset_t *mask, int kind)
{
	/* Any handler from now on interrupts the wait, as it would the
	 * kernel's (base/sigseen.h), even one that ran while we looked. */
	unsigned sig = sdp_sig_seen;
	struct snap *sn;
	int n, k = 0, r, saved, word = -1;

	ep_init();
	if (ep_disabled || ep < 0 || ep >= EP_MAX_FD || max <= 0 ||
	    !atomic_load_explicit((_Atomic(struct ep_set *) *)&sets[ep],
				  memory_order_relaxed))
		return kernel_wait(ep, ev, max, tmo, ts, mask, kind);
	/* A signal handler's epoll_wait inside ours: the snapshot is
	 * ours (the kernel alone answers it). */
	if (snap_in_use)
		return kernel_wait(ep, ev, max, tmo, ts, mask, kind);
	n = snapshot(ep, &word);
	sn = snap_buf;
	if (!n)
		return kernel_wait(ep, ev, max, tmo, ts, mask, kind);
	snap_in_use = 1;
	/* From here every exit is through `out` (the pop). */
	struct sleep_undo undo = { sn, n, -1, 0 };

	pthread_cleanup_push(sleep_cancelled, &undo);
	/* Leave room for the kernel's events, so that they are not starved
	 * by busy SDP connections; with room for one event only, give the
	 * kernel the first look every few calls. */
	if (max == 1 && (++ep_tick & 7) == 0) {
		r = kernel_wait(ep, ev, max, 0, ts, mask, kind);
		if (r != 0)
			goto out;
	}
	k = user_events(sn, n, word, ev, max);
	if (!k && tmo != 0 && spin_worthwhile()) {
		r = spin(ep, sn, n, word, ev, max, ts, mask, kind, &k, sig);
		if (r != 0)
			goto out;
	}
	if (!k && tmo == 0) {
		r = kernel_wait(ep, ev, max, 0, ts, mask, kind);
		goto out;
	}
	for (int tries = 1; !k; tries++) {
		undo.word = tries < WORD_TRIES ? word : -1;
		if (sleep_begin(sn, n, undo.word)) {
			if (sdp_sig_seen != sig) {
				errno = EINTR;
				r = -1;
			} else {
				undo.sleeping = 1;
				r = kernel_wait(ep, ev, max, tmo, ts, mask,
						kind);
				undo.sleeping = 0;
			}
			saved = errno;
			sleep_end(sn, n, undo.word, ev, r);
			errno = saved;
			goto out;
		}
		k = user_events(sn, n, word, ev, max);
	}
	ep_hit_ns = sdp_now_ns();
	if (k == max) {
		r = k;
		goto out;
	}
	r = kernel_wait(ep, ev + k, max - k, 0, ts, mask, kind);
	r = r < 0 ? (errno == EINTR ? k : -1) : merge(ev, k, r);
out:
	saved = errno;
	pthread_cleanup_pop(0);
	snap_in_use = 0;
	errno = saved;
	return r;
}

SDP_EXPORT int epoll_wait(int ep, struct epoll_event *ev, int max, int tmo)
{
	return fast_wait(ep, ev, max, tmo, NULL, NULL, 0);
}

SDP_EXPORT int epoll_pwait(int ep, struct epoll_event *ev, int max, int tmo,
			   const sigset_t *mask)
{
	return fast_wait(ep, ev, max, tmo, NULL, mask, 1);
}

SDP_EXPORT int epoll_pwait2(int ep, struct epoll_event *ev, int max,
			    const struct timespec *ts, const sigset_t *mask)
{
	int tmo = !ts ? -1 : (ts->tv_sec == 0 && ts->tv_nsec == 0 ? 0 : 1);

	ep_init();
	if (!real_epoll_pwait2) {
		errno = ENOSYS;
		return -1;
	}
	return fast_wait(ep, ev, max, tmo, ts, mask, 2);
}

/* ---- poll and select: the kernel must see everything they name ---------------- */

/* A poll or select names fd.  Even one that does not sleep reads the
 * kernel's readiness: an SDP socket is watched from now on (sock.h), and
 * it and any epoll set named leave user-space readiness (`any`: some set
 * uses it). */
static int fd_named(int fd, int any)
{
	struct sdp_sock *s;
	int r = 0;

	if (fd < 0)
		return 0;
	if (any && fd < EP_MAX_FD && sets[fd] && !atomic_load(&set_off[fd]))
		set_demote(fd);
	s = sdp_fd_get(fd);
	if (s) {
		r = sdp_sock_kernel_watch(s);
		if (any && !atomic_load(&s->ep_off))
			sock_demote(s);
		sdp_sock_put(s);
	}
	return r;
}

/* 0, or -errno when a socket named could not get its readiness pair: the
 * wait would not see it, so it fails instead. */
static int poll_demote(const struct pollfd *p, nfds_t n)
{
	int any = atomic_load(&ep_any), r = 0;

	for (nfds_t i = 0; i < n; i++)
		if (fd_named(p[i].fd, any) < 0)
			r = -ENOMEM;
	return r;
}

static int select_demote(int nfds, const fd_set *r, const fd_set *w,
			 const fd_set *e)
{
	int any = atomic_load(&ep_any), ret = 0;

	for (int fd = 0; fd < nfds && fd < FD_SETSIZE; fd++)
		if (((r && FD_ISSET(fd, r)) || (w && FD_ISSET(fd, w)) ||
		     (e && FD_ISSET(fd, e))) && fd_named(fd, any) < 0)
			ret = -ENOMEM;
	return ret;
}

SDP_EXPORT int poll(struct pollfd *p, nfds_t n, int tmo)
{
	ep_init();
	if (poll_demote(p, n) < 0) {
		errno = ENOMEM;
		return -1;
	}
	AS_APP_SLEEP(tmo == 0, real_poll(p, n, tmo));
}

SDP_EXPORT int __poll_chk(struct pollfd *p, nfds_t n, int tmo, size_t len)
{
	(void)len;
	return poll(p, n, tmo);
}

SDP_EXPORT int ppoll(struct pollfd *p, nfds_t n, const struct timespec *ts,
		     const sigset_t *mask)
{
	ep_init();
	if (poll_demote(p, n) < 0) {
		errno = ENOMEM;
		return -1;
	}
	AS_APP_SLEEP(ts && !ts->tv_sec && !ts->tv_nsec,
		     real_ppoll(p, n, ts, mask));
}

SDP_EXPORT int __ppoll_chk(struct pollfd *p, nfds_t n,
			   const struct timespec *ts, const sigset_t *mask,
			   size_t len)
{
	(void)len;
	return ppoll(p, n, ts, mask);
}

SDP_EXPORT int select(int nfds, fd_set *r, fd_set *w, fd_set *e,
		      struct timeval *tv)
{
	ep_init();
	if (select_demote(nfds, r, w, e) < 0) {
		errno = ENOMEM;
		return -1;
	}
	AS_APP_SLEEP(tv && !tv->tv_sec && !tv->tv_usec,
		     real_select(nfds, r, w, e, tv));
}

SDP_EXPORT int pselect(int nfds, fd_set *r, fd_set *w, fd_set *e,
		       const struct timespec *ts, const sigset_t *mask)
{
	ep_init();
	if (select_demote(nfds, r, w, e) < 0) {
		errno = ENOMEM;
		return -1;
	}
	AS_APP_SLEEP(ts && !ts->tv_sec && !ts->tv_nsec,
		     real_pselect(nfds, r, w, e, ts, mask));
}

/* ---- fork ------------------------------------------------------------------------- */

/* Before fork: every set becomes shared with the child and every
 * connection may be used by either process; both need the kernel mirror. */
static void ep_prepare(void)
{
	if (ep_disabled != 0 || !atomic_load(&ep_any))
		return;
	for (int ep = 0; ep < EP_MAX_FD; ep++)
		if (sets[ep] && !atomic_load(&set_off[ep]))
			set_demote(ep);
}

static void ep_child(void)
{
	ep_pid = (uint32_t)getpid();
	for (int i = 0; i < CTL_LOCKS; i++)	/* one thread here now */
		pthread_mutex_init(&ctl_locks[i], NULL);
}

__attribute__((constructor)) static void ep_ctor(void)
{
	ep_pid = (uint32_t)getpid();
	sdp_atfork_add(SDP_ATFORK_INNER, ep_prepare, NULL, ep_child);
}
