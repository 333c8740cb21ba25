// SPDX-License-Identifier: MIT
/*
 * verbs_dev.c — process-wide state of the verbs transport: the CM event
 * channel, the per-device PD / completion channel / shared CQ, the event
 * thread, completion dispatch from a shared CQ to per-QP software CQs, and
 * the wait/kick/notify half of the transport interface.
 *
 * Producer/consumer: completions are produced by the device into the shared
 * CQ; whoever holds dev->lock drains it (the event thread when the channel
 * fires, or any poll_cq caller) and moves each one into its QP's software CQ,
 * where only that QP's poll_cq consumes it.  The shared CQ is armed whenever
 * nobody polls it, so a completion nobody polls for still wakes the event
 * thread, which wakes the QP's waiters and (if armed) its eventfd: nothing
 * can be missed by a sleeper that followed the wait_seq()/req_notify() rules.
 *
 * Arming the shared CQ.  An armed CQ raises one event for the next
 * completion, and that event costs the event thread a wake-up, three
 * syscalls and the device lock, and usually the progress thread a wake-up
 * too, on the CPUs the application and (soft-RoCE) the emulated NIC need.
 * An application thread that polls the CQ (a spin in wait(), or any
 * poll_cq: a non-blocking recv/send loop) will look again soon, so the
 * event thread does not re-arm while one spins or for SDP_VERBS_REARM_MS
 * after an application thread last polled.  The CQ is armed again by:
 *  - a thread about to sleep in wait() (before its last look at the CQ);
 *  - an application thread about to sleep in poll/select/epoll
 *    (sdp_verbs_app_sleep_begin, called by the interposed functions);
 *  - the event thread, when an event finds either kind of sleeper;
 *  - the event thread's timer, once nobody polled for SDP_VERBS_REARM_MS.
 * So only news for a process whose threads all sleep some other way
 * (nanosleep, a condition variable) can wait, and at most that long.
 */
#include "base/atfork.h"
#include "base/cancel.h"
#include "base/config.h"
#include "base/sigseen.h"
#include "base/spin.h"
#include "transport/verbs/verbs.h"
#include "transport/multi.h"
#include "base/libthreads.h"
#include "base/real.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>

struct vb_global sdp__vb = {
	.init_lock = PTHREAD_MUTEX_INITIALIZER,
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cm_lock = PTHREAD_MUTEX_INITIALIZER,
	.epfd = -1,
	.trim_fd = -1,
};
/* Serialises the one-time flush of inherited QPs in a fork() child. */
static pthread_mutex_t orphan_lock = PTHREAD_MUTEX_INITIALIZER;

static long futex(_Atomic uint32_t *uaddr, int op, uint32_t val,
		  const struct timespec *ts)
{
	return syscall(SYS_futex, uaddr, op, val, ts, NULL, 0);
}

/* ---- event thread ---------------------------------------------------------- */

static void drain_locked(struct vb_dev *d);

/* d->lock held: may the CQ stay unarmed, because an application thread
 * polls it or will soon?  Not while a thread sleeps in wait() or in the
 * application's poll/select/epoll (app_sleep). */
static bool rearm_may_wait(struct vb_dev *d, uint64_t now)
{
	return sdp__vb.rearm_ns && !atomic_load(&d->sleepers) &&
	       !atomic_load(&sdp__vb.app_sleepers) &&
	       (atomic_load(&d->spinners) ||
		now - atomic_load(&d->polled_ns) <
		sdp__vb.rearm_ns);
}

/* d->lock held: arm the CQ if it is not, then look at it (a completion
 * that came before the arm raises no event). */
static void arm_locked(struct vb_dev *d)
{
	if (!atomic_load(&d->cq_armed) && ibv_req_notify_cq(d->cq, 0) == 0) {
		atomic_store(&d->cq_armed, true);
		atomic_fetch_sub(&sdp__vb.unarmed, 1);
	}
	drain_locked(d);
}

static void cq_event(struct vb_dev *d)
{
	struct ibv_cq *cq;
	void *ctx;

	while (ibv_get_cq_event(d->ch, &cq, &ctx) == 0)
		ibv_ack_cq_events(cq, 1);
	pthread_mutex_lock(&d->lock);
	/* The event consumed the arm. */
	if (atomic_exchange(&d->cq_armed, false))
		atomic_fetch_add(&sdp__vb.unarmed, 1);
	if (rearm_may_wait(d, sdp__verbs_coarse_ns()))
		drain_locked(d);
	else
		arm_locked(d);
	pthread_mutex_unlock(&d->lock);
}

static struct vb_dev *dev_list(void)
{
	struct vb_dev *d;

	pthread_mutex_lock(&sdp__vb.lock);
	d = sdp__vb.devs;
	pthread_mutex_unlock(&sdp__vb.lock);
	return d;			/* devices are never freed */
}

/* For the interposed poll/select/epoll, which a signal handler may call
 * while its thread holds d->lock: never block on it.  The holder drains
 * already; if it does not let go soon, the event thread's timer arms the
 * CQ (an application sleeper forbids waiting: rearm_may_wait). */
static bool dev_trylock(struct vb_dev *d)
{
	for (int i = 0; i < 64; i++) {
		uint64_t t;

		if (pthread_mutex_trylock(&d->lock) == 0)
			return true;
		t = sdp__verbs_now_ns();	/* only once it must wait */
		if (!sdp_spin_yield(&t))
			break;	/* the CPU went to other work: stop here */
	}
	return false;
}

static void arm_all(void)
{
	for (struct vb_dev *d = dev_list(); d; d = d->next) {
		if (atomic_load(&d->cq_armed) || !dev_trylock(d))
			continue;
		arm_locked(d);
		pthread_mutex_unlock(&d->lock);
	}
}

/* An application thread is about to sleep in poll/select/epoll (begin),
 * or is back (end, with what begin returned).  While one sleeps, every CQ
 * is armed: its news may be what that thread waits for, through the
 * progress thread. */
int sdp_verbs_app_sleep_begin(void)
{
	/* Our own threads' epoll_wait goes through the interposed one too. */
	if (sdp_in_lib_thread ||
	    __atomic_load_n(&sdp__vb.state, __ATOMIC_ACQUIRE) != 1)
		return 0;
	atomic_fetch_add(&sdp__vb.app_sleepers, 1);
	if (atomic_load(&sdp__vb.unarmed))
		arm_all();
	return 1;
}

void sdp_verbs_app_sleep_end(int token)
{
	if (token)
		atomic_fetch_sub(&sdp__vb.app_sleepers, 1);
}

/* An application thread looks without sleeping (poll/select/epoll with a
 * zero timeout): readiness comes from the progress thread, which an
 * unarmed CQ does not wake, so look at the CQ for it.  A thread that
 * looks in a loop is a poller like any other. */
void sdp_verbs_app_look(void)
{
	if (sdp_in_lib_thread || !atomic_load(&sdp__vb.unarmed) ||
	    __atomic_load_n(&sdp__vb.state, __ATOMIC_ACQUIRE) != 1)
		return;
	for (struct vb_dev *d = dev_list(); d; d = d->next) {
		if (atomic_load(&d->cq_armed))
			continue;
		atomic_store(&d->polled_ns, sdp__verbs_coarse_ns());
		sdp__verbs_dev_try_drain(d);
	}
}

/* The event thread's timer: arm every CQ left unarmed once nobody has
 * polled it for SDP_VERBS_REARM_MS.  Returns the epoll timeout until the
 * next look (ms, -1: none needed). */
static int rearm_idle_cqs(void)
{
	struct vb_dev *d;
	uint64_t now, left, since;
	int tmo = -1, t;

	if (!atomic_load(&sdp__vb.unarmed))
		return -1;
	for (d = dev_list(); d; d = d->next) {
		if (atomic_load(&d->cq_armed))
			continue;
		pthread_mutex_lock(&d->lock);
		now = sdp__verbs_coarse_ns();
		if (!rearm_may_wait(d, now))
			arm_locked(d);
		if (!atomic_load(&d->cq_armed)) {	/* waits, or failed */
			left = sdp__vb.rearm_ns;
			since = now - atomic_load(&d->polled_ns);
			if (!atomic_load(&d->spinners) && since < left)
				left -= since;
			t = (int)((left + 999999) / 1000000);
			if (t < 1)
				t = 1;
			if (tmo < 0 || t < tmo)
				tmo = t;
		}
		pthread_mutex_unlock(&d->lock);
	}
	return tmo;
}

static void cm_events(void)
{
	struct rdma_cm_event *e;

	while (rdma_get_cm_event(sdp__vb.cm, &e) == 0) {
		pthread_mutex_lock(&sdp__vb.cm_lock);
		sdp__verbs_cm_event(e);	/* acks the event */
		pthread_mutex_unlock(&sdp__vb.cm_lock);
	}
}

uint64_t sdp__verbs_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A clock read on every poll_cq and completion: the coarse clock is read
 * from the vDSO page without touching the hardware counter, so it is never
 * a syscall (the precise one is, where the clock source is not usable from
 * user space: soft-RoCE's VM).  Good to a scheduler tick (1-10 ms). */
uint64_t sdp__verbs_coarse_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t now_ms(void)
{
	return sdp__verbs_now_ns() / 1000000u;
}

/* How long a QP may go unanswered before the hardware gives up on it:
 * (retries + 1) local ACK timeouts (verbs.h). */
static uint64_t retry_budget_ms(void)
{
	return ((uint64_t)(VB_RETRY_COUNT + 1) * 4096u <<
		sdp__vb.ack_timeout) / 1000000u;
}

#define VB_ASYNC_TAG 1u	/* epoll data: device async fd, not its CQ */
#define VB_TRIM_TAG 2u	/* epoll data: trim_fd (devices are aligned) */

static void async_events(struct vb_dev *d)
{
	struct ibv_async_event e;

	while (ibv_get_async_event(d->ctx, &e) == 0) {
		if (e.event_type == IBV_EVENT_PORT_ERR && !d->down_since_ms)
			d->down_since_ms = now_ms();
		else if (e.event_type == IBV_EVENT_PORT_ACTIVE)
			d->down_since_ms = 0;
		ibv_ack_async_event(&e);
	}
}

/*
 * The local port went down.  A hardware RC QP with sends outstanding keeps
 * retrying and fails with RETRY_EXC once its retry budget is spent; the
 * soft-RoCE driver stops transmitting on a port that is down and never
 * fails them, so the connection would hang forever.  Once the port has
 * been down for that budget, QPs with sends outstanding are put into the
 * error state as the hardware would have (flush: the engine reports
 * ECONNRESET), and the peer is sent a DREQ.  Idle QPs are left alone for
 * VB_IDLE_DOWN_BUDGETS budgets: a link that comes back within ~10 s finds
 * them working, as with real hardware; past that the path is taken as gone
 * (a connection waiting for credits is "idle" too, and would hang).
 */
#define VB_IDLE_DOWN_BUDGETS 5
static void port_down_check(struct vb_dev *d)
{
	struct vb_qp *qp;
	uint32_t i;
	bool busy, all;
	uint64_t down_ms;

	if (!d->down_since_ms)
		return;
	down_ms = now_ms() - d->down_since_ms;
	if (down_ms < retry_budget_ms())
		return;
	/* A port down for several retry budgets is taken as a path gone:
	 * idle QPs go too.  An engine waiting for credits posts nothing, so
	 * "no sends outstanding" does not mean "nothing to say". */
	all = down_ms >= (uint64_t)retry_budget_ms() * VB_IDLE_DOWN_BUDGETS;
	/* cm_lock: destroy_qp changes the state, then passes this lock
	 * before it destroys the QP; a QP seen established here stays. */
	pthread_mutex_lock(&sdp__vb.cm_lock);
	pthread_mutex_lock(&d->lock);
	for (i = 0; i < d->ntab; i++) {
		enum vb_state st = VB_ESTABLISHED;

		if (!(qp = d->tab[i]) || !qp->hw)
			continue;
		pthread_mutex_lock(&qp->lock);
		busy = qp->sq_head != qp->sq_tail;
		pthread_mutex_unlock(&qp->lock);
		if ((!busy && !all) ||
		    !atomic_compare_exchange_strong(&qp->state, &st,
							     VB_DISCONNECTED))
			continue;
		rdma_disconnect(qp->id);
		sdp__verbs_qp_set_error(qp);
	}
	pthread_mutex_unlock(&d->lock);
	pthread_mutex_unlock(&sdp__vb.cm_lock);
}

static void *event_thread(void *arg)
{
	struct epoll_event ev[16];
	struct vb_dev *d;
	bool down;
	int n, i, tmo, trim;

	(void)arg;
	sdp_lib_thread_started();
	for (;;) {
		pthread_mutex_lock(&sdp__vb.lock);
		for (down = false, d = sdp__vb.devs; d; d = d->next)
			down |= d->down_since_ms != 0;
		pthread_mutex_unlock(&sdp__vb.lock);
		tmo = rearm_idle_cqs();
		if (down && (tmo < 0 || tmo > 100))
			tmo = 100;
		trim = sdp__verbs_bufs_trim();
		if (trim >= 0 && (tmo < 0 || trim < tmo))
			tmo = trim;
		n = sdp_real.epoll_wait(sdp__vb.epfd, ev, 16, tmo);
		for (i = 0; i < n; i++) {
			uintptr_t p = (uintptr_t)ev[i].data.ptr;

			if (p == VB_TRIM_TAG) {
				uint64_t v;

				if (sdp_real.read(sdp__vb.trim_fd, &v,
						  sizeof(v)) < 0) {
					/* drained already */
				}
			} else if (p & VB_ASYNC_TAG)
				async_events((struct vb_dev *)(p & ~(uintptr_t)VB_ASYNC_TAG));
			else if (p)
				cq_event((struct vb_dev *)p);
			else
				cm_events();
		}
		if (down) {
			pthread_mutex_lock(&sdp__vb.lock);
			d = sdp__vb.devs;
			pthread_mutex_unlock(&sdp__vb.lock);
			for (; d; d = d->next)	/* devices are never freed */
				port_down_check(d);
		}
	}
	return arg;
}

static int set_nonblock(int fd)
{
	int fl = sdp_real.fcntl(fd, F_GETFL);

	if (fl < 0 || sdp_real.fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

static void vb_atfork_child(void);

/* The SDP_VERBS_* settings (base/config.c), in the units the transport
 * uses. */
static void read_settings(void)
{
	static bool done;

	if (done)
		return;
	done = true;
	sdp_config_init();
	sdp__vb.ack_timeout = (uint8_t)sdp_cfg.verbs_ack_timeout;
	sdp__vb.rearm_ns = sdp_cfg.verbs_rearm_ms * 1000000ull;
	sdp__vb.spin_ns = sdp_cfg.verbs_spin_us * 1000u;
	sdp__vb.rdma_spin_ns = sdp_cfg.verbs_rdma_spin_us * 1000ull;
}

/* Called with init_lock held: the CM channel and the event thread. */
static int vb_start(void)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
	struct ibv_device **list;
	static bool atfork_done;	/* inherited by children: once */
	sigset_t all, old;
	int r;

	if (!atfork_done) {
		if (sdp_atfork_add(SDP_ATFORK_INNER, NULL, NULL,
				   vb_atfork_child))
			return -ENOMEM;
		atfork_done = true;
	}
	read_settings();
	list = ibv_get_device_list(&sdp__vb.ndevices);
	if (!list || sdp__vb.ndevices == 0) {
		if (list)
			ibv_free_device_list(list);
		return -ENODEV;
	}
	ibv_free_device_list(list);
	sdp__vb.cm = rdma_create_event_channel();
	if (!sdp__vb.cm)
		return errno ? -errno : -ENODEV;
	sdp__vb.epfd = sdp_real.epoll_create1(EPOLL_CLOEXEC);
	if (sdp__vb.epfd < 0 || set_nonblock(sdp__vb.cm->fd) < 0 ||
	    sdp_real.epoll_ctl(sdp__vb.epfd, EPOLL_CTL_ADD, sdp__vb.cm->fd,
			       &ev) < 0)
		return -errno;
	sdp__vb.trim_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	ev.data.ptr = (void *)(uintptr_t)VB_TRIM_TAG;
	if (sdp__vb.trim_fd < 0 ||
	    sdp_real.epoll_ctl(sdp__vb.epfd, EPOLL_CTL_ADD, sdp__vb.trim_fd,
			       &ev) < 0)
		return -errno;
	/* The thread must never take the application's signals. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	r = sdp_lib_thread_create(&sdp__vb.thread, NULL, event_thread, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r)
		return -r;
	pthread_detach(sdp__vb.thread);
	return 0;
}

/* 0 when the transport is usable: a device exists and the CM answers.
 * Lazy, and again in a fork() child (vb_atfork_child resets the state). */
int sdp__verbs_init(void)
{
	int st = __atomic_load_n(&sdp__vb.state, __ATOMIC_ACQUIRE);

	if (st)
		return st < 0 ? st : 0;
	pthread_mutex_lock(&sdp__vb.init_lock);
	if (!sdp__vb.state) {
		st = vb_start();
		sdp__vb.err = st;
		__atomic_store_n(&sdp__vb.state, st < 0 ? st : 1,
				 __ATOMIC_RELEASE);
	}
	st = sdp__vb.state;
	pthread_mutex_unlock(&sdp__vb.init_lock);
	return st < 0 ? st : 0;
}

/*
 * fork().  The child has no event thread, and every kernel object it can
 * reach (CM channel, device contexts, PDs, CQs, QPs, MRs) is the parent's:
 * the kernel refuses the child's write() commands on those descriptors
 * (EACCES), and the commands it would accept (ioctl: poll a CQ that is
 * mapped shared, destroy a QP) would act on the parent's connections.  So
 * the child forgets all of it without destroying anything: it closes only
 * its copies of the descriptors (the kernel objects live on with the
 * parent's copies), leaks the user-space handles, and starts from nothing
 * on first use.  Objects of the old epoch (QPs, listeners, requests) are
 * dead in the child: their QPs flush on first touch (sdp__verbs_orphan), the
 * engine sees a reset, and their teardown frees memory only.
 * Runs in the child right after fork(): only this thread exists, so the
 * locks are re-initialised rather than taken.
 */
static void vb_atfork_child(void)
{
	struct vb_dev *d;

	pthread_mutex_init(&sdp__vb.init_lock, NULL);
	pthread_mutex_init(&sdp__vb.lock, NULL);
	pthread_mutex_init(&sdp__vb.cm_lock, NULL);
	pthread_mutex_init(&orphan_lock, NULL);
	sdp__verbs_bufs_forget();
	if (!sdp__vb.state)
		return;		/* never used: nothing inherited */
	__atomic_fetch_add(&sdp__vb.epoch, 1, __ATOMIC_RELAXED);
	if (sdp__vb.epfd >= 0)
		sdp_close(sdp__vb.epfd);
	if (sdp__vb.cm)
		sdp_close(sdp__vb.cm->fd);	/* struct leaked: ids still name it */
	if (sdp__vb.trim_fd >= 0)
		sdp_close(sdp__vb.trim_fd);
	sdp__vb.trim_fd = -1;
	for (d = sdp__vb.devs; d; d = d->next) {
		/* No ibv_destroy_* / ibv_close_device: they would reach the
		 * parent's objects.  Closing our copies of the descriptors
		 * drops only this process's file references. */
		if (d->ch)
			sdp_close(d->ch->fd);
		sdp_close(d->ctx->async_fd);
		sdp_close(d->ctx->cmd_fd);
	}
	sdp__vb.devs = NULL;
	sdp__vb.unarmed = 0;
	sdp__vb.app_sleepers = 0;	/* the sleepers were other threads */
	sdp__vb.cm = NULL;
	sdp__vb.epfd = -1;
	sdp__vb.err = 0;
	sdp__vb.state = 0;
}

void sdp__verbs_trim_kick(void)
{
	uint64_t one = 1;

	if (sdp__vb.trim_fd >= 0 &&
	    sdp_real.write(sdp__vb.trim_fd, &one, sizeof(one)) < 0) {
		/* counter full: the thread will look anyway */
	}
}

/* ---- devices --------------------------------------------------------------- */

/*
 * librdmacm allocates a PD on its own context of a device while any id uses
 * the device and frees it when the last id goes.  A fork() child inherits
 * that context and can still use the PD, but cannot allocate a new one
 * there (EACCES): if the parent had let it go, the child could not even
 * resolve an address on the device.  One id bound to the device for the
 * life of the process keeps it.  Best effort: failure costs only that case.
 */
static void dev_anchor(struct vb_dev *d, struct rdma_cm_id *id)
{
	struct sockaddr_storage ss;
	struct sockaddr *a = rdma_get_local_addr(id);

	memcpy(&ss, a, a->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
	       sizeof(struct sockaddr_in));
	if (ss.ss_family == AF_INET6)
		((struct sockaddr_in6 *)&ss)->sin6_port = 0;
	else
		((struct sockaddr_in *)&ss)->sin_port = 0;
	if (rdma_create_id(sdp__vb.cm, &d->anchor, NULL, RDMA_PS_TCP))
		d->anchor = NULL;
	else if (rdma_bind_addr(d->anchor, (struct sockaddr *)&ss)) {
		rdma_destroy_id(d->anchor);
		d->anchor = NULL;
	}
}

static int dev_open(struct rdma_cm_id *id, struct vb_dev **out)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct ibv_device_attr da;
	struct ibv_context *ctx;
	struct vb_dev *d;
	int r = -ENOMEM;

	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	pthread_mutex_init(&d->lock, NULL);
	d->device = id->verbs->device;
	ctx = ibv_open_device(d->device);
	if (!ctx) {
		r = errno ? -errno : -ENODEV;
		free(d);
		return r;
	}
	d->ctx = ctx;
	if (ibv_query_device(ctx, &da))
		goto err;
	d->max_cqe = da.max_cqe;
	d->max_rd_atom = da.max_qp_rd_atom < VB_RD_ATOM ? da.max_qp_rd_atom :
			 VB_RD_ATOM;
	d->pd = ibv_alloc_pd(ctx);
	d->ch = d->pd ? ibv_create_comp_channel(ctx) : NULL;
	d->cq_cap = VB_CQ_INIT < d->max_cqe ? VB_CQ_INIT : d->max_cqe;
	d->cq = d->ch ? ibv_create_cq(ctx, d->cq_cap, d, d->ch, 0) : NULL;
	if (!d->cq)
		goto err;
	r = set_nonblock(d->ch->fd);
	if (r < 0)
		goto err;
	if (ibv_req_notify_cq(d->cq, 0)) {
		r = -EIO;
		goto err;
	}
	atomic_store(&d->cq_armed, true);
	ev.data.ptr = d;
	if (sdp_real.epoll_ctl(sdp__vb.epfd, EPOLL_CTL_ADD, d->ch->fd,
			       &ev) < 0) {
		r = -errno;
		goto err;
	}
	/* Port state changes (link down: port_down_check).  Best effort. */
	ev.data.ptr = (void *)((uintptr_t)d | VB_ASYNC_TAG);
	if (set_nonblock(ctx->async_fd) == 0)
		sdp_real.epoll_ctl(sdp__vb.epfd, EPOLL_CTL_ADD, ctx->async_fd,
				   &ev);
	dev_anchor(d, id);
	*out = d;
	return 0;
err:
	if (d->cq)
		ibv_destroy_cq(d->cq);
	if (d->ch)
		ibv_destroy_comp_channel(d->ch);
	if (d->pd)
		ibv_dealloc_pd(d->pd);
	ibv_close_device(ctx);
	free(d);
	return r;
}

/* The shared state of the device `id` resolved to (created on first use;
 * kept for the life of the process). */
int sdp__verbs_dev_get(struct rdma_cm_id *id, struct vb_dev **out)
{
	struct vb_dev *d;
	int r = 0;

	pthread_mutex_lock(&sdp__vb.lock);
	for (d = sdp__vb.devs; d && d->device != id->verbs->device; d = d->next)
		;
	if (!d) {
		r = dev_open(id, &d);
		if (r == 0) {
			d->next = sdp__vb.devs;
			sdp__vb.devs = d;
		}
	}
	pthread_mutex_unlock(&sdp__vb.lock);
	*out = d;
	return r;
}

/* Reserve `entries` CQ entries and a table slot for `qp`. */
int sdp__verbs_dev_attach(struct vb_dev *d, struct vb_qp *qp, int entries)
{
	uint32_t i;
	int r = 0;

	pthread_mutex_lock(&d->lock);
	if (d->cq_used + entries > d->cq_cap) {
		int want = d->cq_cap;

		while (want < d->cq_used + entries && want < d->max_cqe)
			want *= 2;
		if (want > d->max_cqe)
			want = d->max_cqe;
		if (d->cq_used + entries > want || ibv_resize_cq(d->cq, want)) {
			r = -ENOMEM;
			goto out;
		}
		d->cq_cap = want;
	}
	for (i = 0; i < d->ntab && d->tab[i]; i++)
		;
	if (i == d->ntab) {
		uint32_t n = d->ntab ? d->ntab * 2 : 64;
		struct vb_qp **t = realloc(d->tab, n * sizeof(*t));
		uint32_t *g;

		if (!t) {
			r = -ENOMEM;
			goto out;
		}
		d->tab = t;
		g = realloc(d->tab_gen, n * sizeof(*g));
		if (!g) {
			r = -ENOMEM;
			goto out;
		}
		d->tab_gen = g;
		memset(t + d->ntab, 0, (n - d->ntab) * sizeof(*t));
		memset(g + d->ntab, 0, (n - d->ntab) * sizeof(*g));
		d->ntab = n;
	}
	d->tab[i] = qp;
	qp->slot = i;
	qp->gen = ++d->tab_gen[i] & 0xfff;
	d->cq_used += entries;
out:
	pthread_mutex_unlock(&d->lock);
	return r;
}

/* After the hardware QP is gone: drop its leftover completions, free the
 * slot and the CQ entries. */
void sdp__verbs_dev_detach(struct vb_dev *d, struct vb_qp *qp, int entries)
{
	sdp__verbs_dev_drain(d);
	pthread_mutex_lock(&d->lock);
	if (qp->slot < d->ntab && d->tab[qp->slot] == qp)
		d->tab[qp->slot] = NULL;
	d->cq_used -= entries;
	pthread_mutex_unlock(&d->lock);
}

/* dev->lock held: move every completion of the shared CQ to its QP. */
static void drain_locked(struct vb_dev *d)
{
	struct ibv_wc wc[32];
	struct vb_qp *qp;
	uint32_t s;
	int n, i;

	do {
		n = ibv_poll_cq(d->cq, 32, wc);
		for (i = 0; i < n; i++) {
			s = VB_WRID_SLOT(wc[i].wr_id);
			if (s >= d->ntab || !(qp = d->tab[s]) ||
			    qp->gen != VB_WRID_GEN(wc[i].wr_id))
				continue;	/* a destroyed QP's leftover */
			sdp__verbs_dispatch_wc(qp, &wc[i]);
		}
	} while (n == 32);
}

void sdp__verbs_dev_drain(struct vb_dev *d)
{
	pthread_mutex_lock(&d->lock);
	drain_locked(d);
	pthread_mutex_unlock(&d->lock);
}

/* The QP whose poll_cq drains in this thread (bump_completion). */
static __thread struct vb_qp *polling_qp;

/* poll_cq: drain for `qp`.  Its own completions need no progress-thread
 * wake-up: this thread takes them in now.  An application thread that
 * polls is likely to poll again (rearm_may_wait). */
void sdp__verbs_dev_drain_for(struct vb_qp *qp)
{
	struct vb_dev *d = __atomic_load_n(&qp->dev, __ATOMIC_ACQUIRE);

	if (!d)
		return;
	if (!sdp_in_lib_thread)
		atomic_store(&d->polled_ns, sdp__verbs_coarse_ns());
	polling_qp = qp;
	sdp__verbs_dev_drain(d);
	polling_qp = NULL;
}

/* For spinners: whoever holds the lock is draining already, and a busy
 * poller must not queue up behind it.  False if it did not get the lock. */
bool sdp__verbs_dev_try_drain(struct vb_dev *d)
{
	if (pthread_mutex_trylock(&d->lock))
		return false;
	drain_locked(d);
	pthread_mutex_unlock(&d->lock);
	return true;
}

/* ---- waking and waiting ------------------------------------------------------ */

/* The progress thread's eventfd, if it armed this QP. */
void sdp__verbs_ring_progress(struct vb_qp *qp)
{
	uint64_t one = 1;

	if (atomic_exchange(&qp->armed, 0)) {
		if (sdp_real.write(qp->evfd, &one, sizeof(one)) < 0) {
			/* eventfd full: it is readable anyway */
		}
	}
}

/* Something happened on `qp` (an event, an error, a kick): tell sleepers
 * and the armed progress fd. */
void sdp__verbs_bump(struct vb_qp *qp)
{
	atomic_fetch_add(&qp->seq, 1);
	if (atomic_load(&qp->waiters))
		futex(&qp->seq, FUTEX_WAKE_PRIVATE, INT_MAX, NULL);
	sdp__verbs_ring_progress(qp);
}

/* A completion for `qp`.  Who takes it in:
 *  - a thread in wait() on it, asleep or spinning: it polls the CQ when it
 *    returns (the engine's rule: wait() returns 0 when `seq` moved, and
 *    the caller polls);
 *  - the thread whose poll_cq on this QP is draining right now.
 * Either way the progress thread is not rung as well: one wake-up per
 * message, as shm does, and none for a thread that polls.  Its arm stays
 * set for the next completion nobody takes in. */
void sdp__verbs_bump_completion(struct vb_qp *qp)
{
	atomic_fetch_add(&qp->seq, 1);
	if (atomic_load(&qp->waiters)) {
		futex(&qp->seq, FUTEX_WAKE_PRIVATE, INT_MAX, NULL);
		return;
	}
	if (qp != polling_qp && !atomic_load(&qp->spinners))
		sdp__verbs_ring_progress(qp);
}

void sdp__verbs_push_event(struct vb_qp *qp, enum sdp_cm_event_type type,
			   int err, const void *priv, uint32_t priv_len)
{
	struct sdp_cm_event *ev;

	pthread_mutex_lock(&qp->lock);
	if (qp->ev_count < VB_MAX_EVENTS) {
		ev = &qp->ev[(qp->ev_head + qp->ev_count++) % VB_MAX_EVENTS];
		memset(ev, 0, sizeof(*ev));
		ev->type = type;
		ev->err = err;
		if (priv_len > SDP_CM_PRIV_MAX)
			priv_len = SDP_CM_PRIV_MAX;
		if (priv && priv_len)
			memcpy(ev->priv, priv, priv_len);
		ev->priv_len = priv ? priv_len : 0;
	}
	pthread_mutex_unlock(&qp->lock);
	sdp__verbs_bump(qp);
}

uint32_t sdp__verbs_wait_seq(struct sdp_qp *q)
{
	return atomic_load(&VB_QP(q)->seq);
}

enum vb_poll_end { VB_POLL_NONE, VB_POLL_NEWS, VB_POLL_SIGNAL };

/* Poll the device CQ until `seq` moves or `end`.  With `sig` (wait_rdma):
 * give the CPU away between looks (and stop if a yield lost it to other
 * work, base/spin.h), stop when that handler count moves
 * (sigseen.h: the futex sleep would have ended with EINTR) and at a
 * pthread_cancel that can act.  Without (wait()'s short spin): pause. */
static enum vb_poll_end poll_until(struct vb_qp *qp, uint32_t seq,
				   uint64_t end, const unsigned *sig)
{
	struct vb_dev *d = qp->dev;
	unsigned sig0 = sig ? *sig : 0;
	enum vb_poll_end r = VB_POLL_NONE;
	uint64_t t;

	if (!d)
		return VB_POLL_NONE;
	/* Counted before the first look: a completion from here on needs
	 * neither the progress thread nor a CQ event. */
	atomic_fetch_add(&qp->spinners, 1);
	atomic_fetch_add(&d->spinners, 1);
	do {
		t = sdp__verbs_now_ns();
		sdp__verbs_dev_try_drain(d);
		if (atomic_load(&qp->seq) != seq) {
			r = VB_POLL_NEWS;
			break;
		}
		if (!sig) {
			__builtin_ia32_pause();
			continue;
		}
		if (*sig != sig0) {
			r = VB_POLL_SIGNAL;
			break;
		}
		/* pthread_cancel marked us (we publish no wait word while
		 * polling): the futex sleep that follows acts on it. */
		if (atomic_load_explicit(&sdp_cancel_me.requested,
					 memory_order_relaxed) &&
		    sdp_cancel_actionable())
			break;
		if (!sdp_spin_yield(&t))
			break;	/* other work holds the CPU: sleep */
	} while (t < end);
	atomic_store(&d->polled_ns, sdp__verbs_coarse_ns());
	atomic_fetch_sub(&d->spinners, 1);
	atomic_fetch_sub(&qp->spinners, 1);
	return r;
}

/*
 * Bounded busy-poll of the device CQ before sleeping.  Why: the sleeping
 * path is completion channel -> event thread (epoll, get/ack the event,
 * re-arm, drain) -> futex wake -> this thread; in a request/response
 * exchange that is several context switches per message, far more than
 * the message itself costs.  Polling the CQ is a read of memory the
 * device shares with us.  Only on a QP that had a completion recently, so
 * an idle connection goes straight to sleep; never longer than spin_ns.
 * True when news arrived.
 */
static bool spin_for_news(struct vb_qp *qp, uint32_t seq)
{
	uint64_t now = sdp__verbs_now_ns();

	if (!sdp__vb.spin_ns ||
	    now - atomic_load(&qp->news_ns) > VB_SPIN_RECENT_MS * 1000000ull)
		return false;
	return poll_until(qp, seq, now + sdp__vb.spin_ns, NULL) ==
	       VB_POLL_NEWS;
}

static struct timespec ns_to_ts(uint64_t ns)
{
	return (struct timespec){ .tv_sec = (time_t)(ns / 1000000000ull),
				  .tv_nsec = (long)(ns % 1000000000ull) };
}

/* The futex sleep of wait(): until `seq` moves, a signal (-EINTR) or
 * `tmo_ns` passes (-ETIMEDOUT; UINT64_MAX: no timeout). */
static int sleep_for_news(struct vb_qp *qp, uint32_t seq, uint64_t tmo_ns)
{
	struct timespec ts = ns_to_ts(tmo_ns);
	const struct timespec *tsp = tmo_ns == UINT64_MAX ? NULL : &ts;
	struct vb_dev *d;
	int r;

	atomic_fetch_add(&qp->waiters, 1);
	/* Read once: a connecting QP gets its device while it sleeps. */
	d = __atomic_load_n(&qp->dev, __ATOMIC_ACQUIRE);
	if (d) {
		/* A sleeper needs the CQ armed; then completions already in
		 * it are news too. */
		atomic_fetch_add(&d->sleepers, 1);
		if (atomic_load(&qp->seq) == seq) {
			pthread_mutex_lock(&d->lock);
			arm_locked(d);
			pthread_mutex_unlock(&d->lock);
		}
	}
	/* pthread_cancel wakes us through the same word (base/cancel.h). */
	r = sdp_cancel_futex_wait(&qp->seq, seq, tsp, 1);
	if (d)
		atomic_fetch_sub(&d->sleepers, 1);
	atomic_fetch_sub(&qp->waiters, 1);
	/* News that came while we gave up (a timeout, a signal) skipped the
	 * progress thread because we were waiting (bump_completion), and
	 * our caller may not poll now: the progress thread takes it in. */
	if (r && atomic_load(&qp->seq) != seq)
		sdp__verbs_ring_progress(qp);
	return r;
}

int sdp__verbs_wait(struct sdp_qp *q, uint32_t seq, int timeout_ms)
{
	struct vb_qp *qp = VB_QP(q);

	if (sdp__verbs_inherited(qp->epoch)) {
		sdp__verbs_orphan(qp);	/* its flush is the news */
		return 0;
	}
	if (timeout_ms == 0) {		/* a look, no sleep: no arm */
		if (qp->dev)
			sdp__verbs_dev_drain(qp->dev);
		return atomic_load(&qp->seq) != seq ? 0 : -ETIMEDOUT;
	}
	if (spin_for_news(qp, seq))
		return 0;
	return sleep_for_news(qp, seq, timeout_ms < 0 ? UINT64_MAX :
				       (uint64_t)timeout_ms * 1000000ull);
}

/*
 * wait(), for news an RDMA in flight brings (transport.h).  Its end is
 * due, so poll for it rather than sleep to it: the sleep's wake-up
 * (completion channel -> event thread -> futex) lands after the news, on
 * the critical path of every ZCopy message.  With a due time, sleep
 * through the first three quarters of the transfer and poll the rest, so
 * that the CPU spent polling is a fraction of the transfer; without one,
 * or when the whole wait is due within wait()'s own spin (a sleep and its
 * wake-up would cost more than the wait: hardware RDMA of a few hundred
 * KiB), poll from the start.  Either way for at most rdma_spin_ns.  Yield
 * between looks: on a software device (rxe, siw) the RDMA itself is kernel
 * work that may need this CPU (a plain spin slowed 1 MiB READs by 15% on
 * two vCPUs); with a CPU to ourselves sched_yield() returns at once.
 * docs/DESIGN.md, "Verbs: waiting for an RDMA in flight".
 */
int sdp__verbs_wait_rdma(struct sdp_qp *q, uint32_t seq, int timeout_ms,
			 uint64_t since_ns, uint64_t due_ns)
{
	struct vb_qp *qp = VB_QP(q);
	uint64_t now = sdp__verbs_now_ns(), wake = since_ns, end;
	uint64_t tmo_end = UINT64_MAX;
	enum vb_poll_end p;
	int r;

	if (!sdp__vb.rdma_spin_ns || sdp__verbs_inherited(qp->epoch) ||
	    timeout_ms == 0 || !sdp_spin_allowed(now)) {
		r = sdp__verbs_wait(q, seq, timeout_ms);
		return r == 0 ? 1 : r;
	}
	if (atomic_load(&qp->seq) != seq)
		return 0;		/* here before any sleep */
	if (timeout_ms > 0)
		tmo_end = now + (uint64_t)timeout_ms * 1000000ull;
	/* Poll from `wake` to `end`: repeated calls for one transfer (the
	 * same since_ns and due_ns) share that window. */
	if (due_ns > since_ns + sdp__vb.spin_ns)
		wake = due_ns - (due_ns - since_ns) / 4;
	end = wake + sdp__vb.rdma_spin_ns;
	if (wake > now) {
		r = sleep_for_news(qp, seq, (wake < tmo_end ? wake : tmo_end) - now);
		if (r != -ETIMEDOUT)
			return r == 0 ? 1 : r;
		now = sdp__verbs_now_ns();
		if (now >= tmo_end)
			return -ETIMEDOUT;
	}
	if (now < end) {
		/* Timed, the futex sleep ends at any handler; untimed, the
		 * kernel restarts it after an SA_RESTART one. */
		p = poll_until(qp, seq, end < tmo_end ? end : tmo_end,
			       tmo_end == UINT64_MAX ? &sdp_sig_seen_norestart :
						       &sdp_sig_seen);
		/* A last look: news after it skipped the progress thread
		 * (we counted as a spinner), and our caller may not poll. */
		if (p == VB_POLL_NEWS || atomic_load(&qp->seq) != seq)
			return 0;
		if (p == VB_POLL_SIGNAL)
			return -EINTR;
		now = sdp__verbs_now_ns();
		if (now >= tmo_end)
			return -ETIMEDOUT;
	}
	r = sleep_for_news(qp, seq, tmo_end == UINT64_MAX ? UINT64_MAX :
							    tmo_end - now);
	return r == 0 ? 2 : r;
}

void sdp__verbs_kick(struct sdp_qp *q)
{
	sdp__verbs_bump(VB_QP(q));
}

int sdp__verbs_event_fd(struct sdp_qp *q)
{
	return VB_QP(q)->evfd;
}

/* 1: work is pending, poll again; 0: the eventfd will fire on news. */
int sdp__verbs_req_notify(struct sdp_qp *q)
{
	struct vb_qp *qp = VB_QP(q);
	uint32_t i;
	bool pending;

	if (sdp__verbs_inherited(qp->epoch))
		sdp__verbs_orphan(qp);
	atomic_store(&qp->armed, 1);
	pthread_mutex_lock(&qp->lock);
	pending = qp->scq_count > 0;
	/* An unread DISCONNECTED is not work: an established connection
	 * learns of the end from its flushed receives and never reads CM
	 * events again (counting it spun the progress thread forever). */
	for (i = 0; i < qp->ev_count && !pending; i++)
		pending = qp->ev[(qp->ev_head + i) % VB_MAX_EVENTS].type !=
			  SDP_CM_DISCONNECTED;
	pthread_mutex_unlock(&qp->lock);
	if (pending) {
		atomic_store(&qp->armed, 0);
		return 1;
	}
	return 0;
}

void sdp__verbs_ack_events(struct sdp_qp *q)
{
	uint64_t v;

	if (sdp_real.read(VB_QP(q)->evfd, &v, sizeof(v)) < 0) {
		/* nothing to drain */
	}
}

/*
 * A QP inherited through fork(), touched for the first time in this
 * process: RDMA resources do not follow fork(), so the connection is over
 * here.  It behaves as a QP that went to the error state: whatever was
 * already completed stays pollable, then every outstanding WR completes
 * flushed and a DISCONNECTED event follows; the engine reports ECONNRESET.
 * Nothing reaches the kernel (the QP is the parent's).
 */
void sdp__verbs_orphan(struct vb_qp *qp)
{
	struct sdp_wc wc;
	uint32_t i;

	pthread_mutex_lock(&orphan_lock);
	if (qp->orphaned) {
		pthread_mutex_unlock(&orphan_lock);
		return;
	}
	/* It may have been copied locked by a parent thread. */
	pthread_mutex_init(&qp->lock, NULL);
	atomic_store(&qp->state, VB_DISCONNECTED);
	pthread_mutex_lock(&qp->lock);
	memset(&wc, 0, sizeof(wc));
	wc.status = SDP_WC_WR_FLUSH_ERR;
	for (i = qp->sq_tail; i != qp->sq_head; i++) {
		wc.wr_id = qp->swr[i % qp->sq_depth].wr_id;
		wc.opcode = qp->swr[i % qp->sq_depth].opcode;
		sdp__verbs_scq_push(qp, &wc);
	}
	qp->sq_tail = qp->sq_head;
	wc.opcode = SDP_WC_RECV;
	for (i = qp->rq_tail; i != qp->rq_head; i++) {
		wc.wr_id = qp->rwr[i % qp->rq_depth];
		sdp__verbs_scq_push(qp, &wc);
	}
	qp->rq_tail = qp->rq_hw = qp->rq_head;
	qp->orphaned = true;
	pthread_mutex_unlock(&qp->lock);
	pthread_mutex_unlock(&orphan_lock);
	sdp__verbs_push_event(qp, SDP_CM_DISCONNECTED, -ECONNRESET, NULL, 0);
}
