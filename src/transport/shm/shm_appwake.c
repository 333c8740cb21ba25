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
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/fdhigh.h"
#include "transport/shm/shm.h"
#include "transport/wakeword.h"
#include "base/real.h"

#define APPWAKE_TAG 'A'		/* doorbells are one '\0' byte */

/* A waker in WRITING is inside one non-blocking send(): microseconds,
 * unless preempted (on a busy host, a few scheduler slices).  Past this
 * long it is taken as dead.  The owner sleeps meanwhile (wait_written). */
#define APPWAKE_WRITING_MAX_MS 100
/* Messages a connection brings before its readiness descriptor is sent
 * to a peer that cannot take it by number (sdp__shm_share_app_fd). */
#define SHM_APP_FD_SEND_AFTER 2

/* Yama's ptrace_scope (0 where the module is absent): above 0, only an
 * ancestor may take our descriptors.  Read once. */
static int ptrace_scope(void)
{
	static _Atomic int scope = -1;
	int v = atomic_load_explicit(&scope, memory_order_relaxed);

	if (v < 0) {
		int fd = open("/proc/sys/kernel/yama/ptrace_scope",
			      O_RDONLY | O_CLOEXEC);
		char b[8] = "";

		v = 0;
		if (fd >= 0) {
			if (sdp_real.read(fd, b, sizeof(b) - 1) > 0)
				v = atoi(b);
			sdp_real.close(fd);
		}
		atomic_store_explicit(&scope, v, memory_order_relaxed);
	}
	return v;
}

/* pidfd_getfd (Linux 5.6) works in this process: tried once. */
static bool getfd_supported(void)
{
	static _Atomic int known = -1;
	int v = atomic_load_explicit(&known, memory_order_relaxed);

	if (v < 0) {
		/* Our own pidfd's descriptor, through our own pidfd: what a
		 * seccomp filter or a missing system call refuses shows here
		 * (a filter on the peer's side alone does not). */
		int pfd = (int)syscall(SYS_pidfd_open, getpid(), 0), fd;

		fd = pfd >= 0 ? (int)syscall(SYS_pidfd_getfd, pfd, pfd, 0) : -1;
		v = fd >= 0;
		if (fd >= 0)
			sdp_real.close(fd);
		if (pfd >= 0)
			sdp_real.close(pfd);
		atomic_store_explicit(&known, v, memory_order_relaxed);
	}
	return v;
}

/* Our ids and dumpability as the kernel's ptrace check sees them: all
 * three uids and gids equal to `uid`/`gid` (else -1), and dumpable. */
static _Atomic unsigned long ids_reads;

unsigned long sdp__shm_own_ids_read(void)
{
	return atomic_load(&ids_reads);
}

static bool ids_read(uint32_t *uid, uint32_t *gid)
{
	uid_t ru, eu, su;
	gid_t rg, eg, sg;

	atomic_fetch_add_explicit(&ids_reads, 1, memory_order_relaxed);
	if (getresuid(&ru, &eu, &su) || getresgid(&rg, &eg, &sg))
		return false;
	*uid = ru == eu && eu == su ? ru : (uint32_t)-1;
	*gid = rg == eg && eg == sg ? rg : (uint32_t)-1;
	return prctl(PR_GET_DUMPABLE) == 1;
}

/* The same, read at most once a second (three system calls per connection
 * of an event loop otherwise).  Ids change only by set*id() or prctl(), and
 * an answer gone stale costs an offer the peer then fails to take (the
 * kernel decides, and the peer stays on the doorbell) or one not made.
 * Published with a version, odd while written; a reader that meets a
 * write, or a writer that meets another, reads the ids itself (no lock: a
 * fork() may come at any instant). */
static _Atomic uint32_t ids_ver, ids_uid, ids_gid, ids_dumpable;
static _Atomic uint64_t ids_until_ms;

static bool ids_cached(uint32_t *uid, uint32_t *gid)
{
	uint64_t now = sdp__shm_now_ms();
	uint32_t v, d;
	bool dumpable;

	v = atomic_load(&ids_ver);
	if (!(v & 1) && now < atomic_load(&ids_until_ms)) {
		*uid = atomic_load(&ids_uid);
		*gid = atomic_load(&ids_gid);
		d = atomic_load(&ids_dumpable);
		if (atomic_load(&ids_ver) == v)
			return d;
	}
	dumpable = ids_read(uid, gid);
	if ((v & 1) ||
	    !atomic_compare_exchange_strong(&ids_ver, &v, v + 1))
		return dumpable;
	atomic_store(&ids_uid, *uid);
	atomic_store(&ids_gid, *gid);
	atomic_store(&ids_dumpable, dumpable);
	atomic_store(&ids_until_ms, now + 1000);
	atomic_store(&ids_ver, v + 2);
	return dumpable;
}

/* Can the peer take our descriptors with pidfd_getfd?  The kernel lets a
 * process into another (PTRACE_MODE_ATTACH_REALCREDS) when its real ids
 * are all of the target's ids and the target is dumpable; the peer knows
 * us by the pid that sent our CM message, so a QP that a fork() moved to
 * another process offers nothing.  Where this cannot tell (a security
 * module), the peer's failed attempt leaves it on the doorbell. */
static bool peer_can_take(const struct shm_qp *qp)
{
	uint32_t uid, gid;

	if (qp->peer_pid <= 0 || ptrace_scope() > 0 || !getfd_supported())
		return false;
	/* The pid last: a system call, and a peer of other ids is asked
	 * again at every arm until the descriptor is sent. */
	return ids_cached(&uid, &gid) && uid != (uint32_t)-1 &&
	       gid != (uint32_t)-1 && uid == qp->peer_uid &&
	       gid == qp->peer_gid && qp->cm_pid == getpid();
}

static uint64_t ino_of(int fd)
{
	struct stat st;

	return fd >= 0 && fstat(fd, &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* Offered by number in our segment: nothing is sent.  A unix socket in
 * flight (SCM_RIGHTS) makes every unix socket closed anywhere on the
 * host, until it is received, queue the kernel's garbage collector, and
 * its receipt is a wake-up of the peer's progress thread: an event loop's
 * connection per request paid both each time.  The peer takes the
 * descriptor when it first has a byte to write (take_offer). */
static int offer_app_fd(struct shm_qp *qp, int fd)
{
	struct shm_ctrl *c = qp->me.ctrl;
	uint64_t ino = ino_of(fd), page_ino, page_dev;
	int page, gen;

	if (!ino)
		return -errno;
	page = sdp_wakeword_share(&gen, &page_dev, &page_ino);
	atomic_store_explicit(&c->app_offer_ino, ino, memory_order_relaxed);
	atomic_store_explicit(&c->page_offer_dev, page_dev,
			      memory_order_relaxed);
	atomic_store_explicit(&c->page_offer_ino, page_ino,
			      memory_order_relaxed);
	atomic_store_explicit(&c->page_offer_fd,
			      page_ino ? (uint32_t)page + 1 : 0,
			      memory_order_relaxed);
	/* Last, with release: a peer that reads the number reads the inodes
	 * too.  One that looks before it is written (0) wakes us through
	 * the progress doorbell once, and takes it at its next message. */
	atomic_store_explicit(&c->app_offer_fd, (uint32_t)fd + 1,
			      memory_order_release);
	qp->ww_gen = page_ino ? gen : -1;
	return 0;
}

int sdp__shm_share_app_fd(struct sdp_qp *sq, int fd)
{
	struct shm_qp *qp = SHM_QP(sq);
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} cbuf;
	int fds[2] = { fd, -1 }, nfds = 1, gen;
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
	if (fd >= 0 && peer_can_take(qp))
		return offer_app_fd(qp, fd);
	/* Sent, it is a unix socket in flight until the peer takes it, and
	 * meanwhile every unix socket closed on the host queues the kernel's
	 * garbage collector (see offer_app_fd): a connection per request
	 * between two users (nginx's workers, a client run as root) paid
	 * three collector wake-ups a request.  So not before the connection
	 * has brought SHM_APP_FD_SEND_AFTER messages; until then each one
	 * rings the progress doorbell, as when the descriptor is lost. */
	if (qp->rq_done < SHM_APP_FD_SEND_AFTER)
		return -EAGAIN;
	/* Our wake page goes with it, when we have one: the peer maps it
	 * read-only (a connection whose peer has none never arms APP_WORD). */
	fds[1] = sdp_wakeword_share(&gen, NULL, NULL);
	if (fds[1] >= 0)
		nfds = 2;
	memset(&cbuf, 0, sizeof(cbuf));
	mh.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
	cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(nfds * sizeof(int));
	memcpy(CMSG_DATA(cm), fds, nfds * sizeof(int));
	if (sdp_real.sendmsg(qp->sock, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) != 1)
		return -errno;
	qp->ww_gen = nfds == 2 ? gen : -1;
	return 0;
}

int sdp__shm_app_word(struct sdp_qp *sq, int handle)
{
	struct shm_qp *qp = SHM_QP(sq);

	if (handle < 0 || !sdp_wakeword_of_gen(handle, qp->ww_gen)) {
		qp->app_word = -1;
		return 0;
	}
	qp->app_word = handle;
	atomic_store_explicit(&qp->me.ctrl->app_slot,
			      (uint32_t)handle % SDP_WAKEWORD_SLOTS,
			      memory_order_relaxed);
	return 1;
}

/* The peer's byte is in flight (WRITING): sleep until it lands, at most
 * `ms`.  Not a yield: the waker is typically a process that the byte's
 * wake-up preempted right after it claimed the word, and a yield does not
 * hand the CPU back to a task the scheduler will not run yet (EEVDF
 * eligibility), so yielding spun for whole slices.  The waker wakes us
 * (sdp__shm_app_written) only when the count says somebody sleeps. */
static void wait_written(struct shm_ctrl *c, uint64_t ms)
{
	atomic_fetch_add(&c->app_waiting, 1);
	if (atomic_load(&c->app_armed) == APP_WRITING)
		sdp__shm_futex_wait(&c->app_armed, APP_WRITING, ms);
	atomic_fetch_sub(&c->app_waiting, 1);
}

int sdp__shm_app_arm(struct sdp_qp *sq, int on)
{
	struct shm_ctrl *c = SHM_QP(sq)->me.ctrl;
	uint32_t v;

	if (on) {
		struct shm_qp *qp = SHM_QP(sq);
		uint32_t want = on == SDP_APP_ARM_ALONE ? APP_ALONE :
				on != SDP_APP_ARM_QUIET ? APP_ARMED :
				qp->app_word >= 0 ? APP_WORD : APP_QUIET;

		/* seq_cst store, then look at the ring: against the peer's
		 * publish-then-check, one of us sees the other (Dekker).  A
		 * message already there was announced to nobody: say so.
		 * Already quiet (an event loop looking again): no store, as
		 * the word's cache line is the peer's to read on every send;
		 * a message this look misses is the next look's, or the loud
		 * arm's (the word's) before any sleep. */
		if (want == APP_ARMED) {
			atomic_store(&c->app_armed, want);
		} else {
			/* A quiet arm over a word arm the peer has taken (its
			 * byte is on the way): no store, which would lose
			 * that byte; report a completion waiting, so that the
			 * engine disarms, which accounts for it. */
			v = atomic_load_explicit(&c->app_armed,
						 memory_order_relaxed);
			while (v != want) {
				if (v == APP_WRITING || v == APP_WRITTEN)
					return 1;
				if (atomic_compare_exchange_weak(&c->app_armed,
								 &v, want))
					break;
			}
		}
		return qp->rq_done != qp->rq_prod && !qp->rx_bad &&
		       atomic_load(&c->cq_prod) != qp->rq_done;
	}
	for (uint64_t since = 0;;) {
		v = atomic_load(&c->app_armed);
		if (v == APP_WRITING) {
			uint64_t now = sdp__shm_now_ms();

			if (!since)
				since = now;
			if (now - since < APPWAKE_WRITING_MAX_MS) {
				wait_written(c, APPWAKE_WRITING_MAX_MS -
						(now - since));
				continue;
			}
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

/* The set word whose sleep this thread last woke with a byte, and its
 * value then (APP_WORD). */
static __thread const _Atomic uint64_t *woke_word;
static __thread uint64_t woke_word_val;

/* APP_WORD: write the byte only while a thread sleeps on the owner's set,
 * and once per sleep.  True: nothing to do (the owner is awake and will
 * look, or our byte for another connection already wakes it). */
static bool word_says_quiet(struct shm_ctrl *c, const _Atomic uint64_t *words,
			    uint64_t *val, const _Atomic uint64_t **word)
{
	/* Loaded after APP_WORD, as app_sleep_id after APP_ARMED.  No page,
	 * or a slot past it (a hostile owner): wake as for APP_ARMED. */
	*word = sdp_wakeword_at(words, atomic_load(&c->app_slot));
	if (!*word)
		return false;
	*val = atomic_load(*word);
	return !(*val & SDP_WAKEWORD_SLEEPERS) ||
	       (*word == woke_word && *val == woke_word_val);
}

void sdp__shm_app_written(struct shm_ctrl *c, uint32_t v)
{
	/* seq_cst store, then the count: against the owner's count, then
	 * look (wait_written), one of us sees the other. */
	atomic_store(&c->app_armed, v);
	if (atomic_load(&c->app_waiting))
		sdp__shm_futex_wake(&c->app_armed);
}

int sdp__shm_app_wake(struct shm_ctrl *c, int app_fd,
		       const _Atomic uint64_t *words, uint32_t published)
{
	uint32_t v = atomic_load(&c->app_armed);
	const _Atomic uint64_t *word = NULL;
	uint64_t id, val = 0;
	ssize_t r;

	if (v == APP_QUIET || v == APP_ALONE)
		return 1;	/* the application will look: no syscall */
	if (v == APP_WORD && word_says_quiet(c, words, &val, &word))
		return 1;
	/* Loaded after ARMED: an id stored before a later arm is seen with
	 * it, so a stale id can only mismatch. */
	id = v == APP_ARMED ? atomic_load(&c->app_sleep_id) : 0;
	if (id && id == woke_id) {
		/* Our byte for another connection already wakes that wait,
		 * which then looks at this one in user space. */
		if (atomic_compare_exchange_strong(&c->app_armed, &v,
						   APP_QUIET))
			return 1;
		return 0;	/* the owner disarmed meanwhile */
	}

	/* ARMED: wake the application.  WRITTEN: it was woken and has not
	 * looked yet.  Either a further byte (an EPOLLET edge per arrival,
	 * as TCP gives one per segment) or the progress doorbell (which
	 * makes that edge): bulk streams measured faster with the doorbell,
	 * which is one-shot, than with a syscall per message. */
	if ((v != APP_ARMED && v != APP_WORD) ||
	    !atomic_compare_exchange_strong(&c->app_armed, &v, APP_WRITING))
		return 0;
	if (atomic_load(&c->cq_cons) == published) {
		/* The owner took our messages before it armed (it polled
		 * for another reason): a byte now would announce nothing,
		 * and an application woken to read nothing gets EAGAIN,
		 * which some programs (wrk) count as an error. */
		sdp__shm_app_written(c, v);
		return 1;
	}
	atomic_store_explicit(&c->app_woke_upto, published,
			      memory_order_relaxed);
	r = sdp_real.send(app_fd, "r", 1, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (r < 0 && (errno == EBADF || errno == ENOTSOCK)) {
		/* Not a descriptor of this process (any more): nobody was
		 * woken.  The caller rings the progress doorbell instead. */
		sdp__shm_app_written(c, v);
		return -1;
	}
	/* Full: readable anyway; the peer's end gone: a reset. */
	woke_id = id;
	woke_word = word;
	woke_word_val = val;
	sdp__shm_app_written(c, APP_WRITTEN);
	return 1;
}

void sdp__shm_drop_peer_app_fd(struct sdp_qp *sq)
{
	struct shm_qp *qp = SHM_QP(sq);

	qp->peer_offer_taken = true;	/* not taken after this */
	if (qp->peer_app_fd >= 0)
		sdp_close(qp->peer_app_fd);
	qp->peer_app_fd = -1;
	sdp_wakeword_unmap_peer(qp->peer_words);
	qp->peer_words = NULL;
}

/* The peer's descriptors arrived: keep them if they are what they claim
 * to be (its readiness socket, of inode `ino` if known already, and maybe
 * its wake page). */
static void take_app_fd(struct shm_qp *qp, int fd, uint64_t ino,
			int page_fd)
{
	int type = 0;
	socklen_t len = sizeof(type);

	if (sdp_real.getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) < 0 ||
	    type != SOCK_STREAM || qp->peer_app_fd >= 0 ||
	    atomic_load(&qp->err)) {
		sdp_close(fd);	/* not a stream socket, a second one, or late */
		if (page_fd >= 0)
			sdp_close(page_fd);
		return;
	}
	qp->peer_app_fd = sdp_fd_high(fd);
	qp->peer_app_ino = ino ? ino : ino_of(qp->peer_app_fd);
	if (page_fd >= 0) {
		/* Not a sealed page: the peer's APP_WORD arms wake always. */
		qp->peer_words = sdp_wakeword_map_peer(page_fd);
		sdp_close(page_fd);
	}
}

/* The peer's descriptor `num` (offered + 1), if it is the file `ino`. */
static int take_one(int pidfd, uint32_t num, uint64_t ino)
{
	int fd;

	if (!num || !ino || num > INT_MAX)
		return -1;
	fd = (int)syscall(SYS_pidfd_getfd, pidfd, (int)(num - 1), 0);
	if (fd >= 0 && ino_of(fd) != ino) {
		sdp_close(fd);	/* closed and the number reused since */
		fd = -1;
	}
	return fd;
}

void sdp__shm_take_offer(struct shm_qp *qp)
{
	const struct shm_ctrl *pc = qp->peer.ctrl;
	const _Atomic uint64_t *words = NULL;
	uint32_t num, page_num;
	uint64_t ino, page_ino, page_dev;
	int fd, page = -1;
	bool ours;

	if (qp->peer_offer_taken || qp->peer_app_fd >= 0 || !pc)
		return;
	num = atomic_load_explicit(&pc->app_offer_fd, memory_order_acquire);
	if (!num)
		return;		/* not offered (yet, or by SCM_RIGHTS) */
	qp->peer_offer_taken = true;
	/* Read once: the peer may rewrite them any time. */
	ino = atomic_load_explicit(&pc->app_offer_ino, memory_order_relaxed);
	page_num = atomic_load_explicit(&pc->page_offer_fd,
					memory_order_relaxed);
	page_ino = atomic_load_explicit(&pc->page_offer_ino,
					memory_order_relaxed);
	page_dev = atomic_load_explicit(&pc->page_offer_dev,
					memory_order_relaxed);
	/* Only from the process the kernel named at the handshake, and only
	 * while it lives (a recycled pid is another process): never from a
	 * pid the peer could write; and only from a peer of our own user, as
	 * the sharer decides. */
	ours = qp->peer_uid == getuid() && qp->peer_gid == getgid() &&
	       qp->peer_pid > 0;
	if (ours && qp->peer_pidfd < 0)
		qp->peer_pidfd = sdp__shm_peer_pidfd_get(qp->peer_pid);
	fd = ours && qp->peer_pidfd >= 0 ?
	     take_one(qp->peer_pidfd, num, ino) : -1;
	if (fd < 0) {
		/* Not ours to take after all: its application waits for a
		 * byte, so ring its progress thread for every message. */
		qp->peer_app_fd_lost = true;
		return;
	}
	/* The peer's wake page is one per process: mapped already for an
	 * earlier connection with it, it is not taken again. */
	if (page_num && !(words = sdp_wakeword_peer_mapped(page_dev, page_ino)))
		page = take_one(qp->peer_pidfd, page_num, page_ino);
	take_app_fd(qp, fd, ino, page);
	if (qp->peer_app_fd < 0)
		qp->peer_app_fd_lost = true;
	if (words && qp->peer_app_fd >= 0 && !qp->peer_words)
		qp->peer_words = words;
	else
		sdp_wakeword_unmap_peer(words);
}

/* Read what the peer sent on the unix socket (doorbells, a shared app fd);
 * a flood of doorbells is bounded here and read on the next round.  True
 * if the socket was read to EAGAIN: it has not hung up. */
bool sdp__shm_read_doorbells(struct shm_qp *qp)
{
	for (int i = 0; i < 256; i++) {
		union {
			char buf[CMSG_SPACE(2 * sizeof(int)) +
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

		ssize_t n = sdp_real.recvmsg(qp->sock, &mh,
					     MSG_DONTWAIT | MSG_CMSG_CLOEXEC);

		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return true;
		if (n <= 0)
			return false;
		for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
			int fds[2] = { -1, -1 }, n;

			if (cm->cmsg_level != SOL_SOCKET ||
			    cm->cmsg_type != SCM_RIGHTS ||
			    cm->cmsg_len < CMSG_LEN(sizeof(int)))
				continue;
			n = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
			if (n > 2) {	/* more than anyone sends: close all */
				int fd;

				for (int i = 0; i < n; i++) {
					memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int),
					       sizeof(fd));
					sdp_close(fd);
				}
				continue;
			}
			memcpy(fds, CMSG_DATA(cm), (size_t)n * sizeof(int));
			if (data[0] == APPWAKE_TAG) {
				take_app_fd(qp, fds[0], 0, fds[1]);
			} else {	/* nothing else carries fds */
				sdp_close(fds[0]);
				if (fds[1] >= 0)
					sdp_close(fds[1]);
			}
		}
	}
	return false;	/* bounded: more may wait, a hang-up among them */
}
