/* SPDX-License-Identifier: MIT */
/*
 * stats_shm.c — publishes this process's sockets for sdpstat in
 * /dev/shm/libsdp-stat.<pid> (layout and protocol: stats_layout.h).
 *
 * Producers: conn.c gives every connection a record (attach/detach), the
 * socket switch fills in descriptors, listeners and TCP fallbacks, and the
 * progress thread copies each connection's counters into its record when a
 * reader asked for them (sdp_stat_progress_tick).  The consumer is
 * tools/sdpstat, in another process, reading the mapping under the
 * per-record seqlock.
 *
 * All writers take S.lock, so a record has one writer at a time, which is
 * what the seqlock needs.  Lock order: conn->lock, then S.lock.  Nothing
 * here makes a system call after the file exists, except the progress
 * thread draining the wake socket, the clock (vDSO), and reserving more
 * records when every reserved one is in use.
 *
 * Every page of the file that this process touches is reserved first
 * (fallocate): any user can fill /dev/shm, and a page tmpfs cannot supply
 * to a store (or a load) is SIGBUS.  The file is sized for SDP_STAT_NSLOTS
 * records but reserved in steps, doubling from STAT_RESERVE_FIRST, so that
 * a process with a few sockets holds a few pages; when tmpfs is full the
 * next socket goes unpublished, nothing else.
 */
#include "base/atfork.h"
#include "base/config.h"
#include "base/fdhigh.h"
#include "engine/stats_shm.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "engine/conn.h"
#include "engine/listener.h"
#include "engine/progress.h"
#include "engine/stats_layout.h"
#include "base/real.h"

#define MAP_CAP (2 * SDP_STAT_NSLOTS)	/* conn -> slot hash, power of 2 */
#define STAT_RESERVE_FIRST 56u		/* header + 56 records: 8 pages */
/*
 * The wake socket has an abstract name, which any local user can address.
 * What a datagram costs is bounded: it counts only from this user or root
 * (SO_PASSCRED), a wake-up reads at most STAT_POKES_PER_WAKE of them, and
 * the socket is armed one-shot, again STAT_POKE_GAP_MS after each wake-up.
 * A flood then costs at most 1000 / STAT_POKE_GAP_MS short wake-ups a
 * second; a genuine sdpstat is answered within the gap, and its refreshes
 * run on the timer anyway (want_until_ns).
 */
#define STAT_POKES_PER_WAKE 16
#define STAT_POKE_GAP_MS 10

struct map_ent {
	const struct sdp_conn *c;
	int32_t slot;
};

static struct {
	pthread_mutex_t lock;
	int state;			/* 0 not tried, 1 publishing, -1 off */
	pid_t pid;			/* owner of the mapping */
	struct sdp_stat_hdr *hdr;
	struct sdp_stat_rec *recs;
	int fd;				/* the file, to reserve more of it */
	uint32_t reserved;		/* records whose pages are reserved */
	uint32_t next_free;		/* no free slot below this */
	struct map_ent *map;
	char path[64];
	int wake_fd;			/* abstract datagram socket */
	int epfd;			/* progress thread's epoll, -1 none */
	void *tag;
	int watched;
	int poked;			/* progress thread only */
	uint64_t rearm_ns;		/* progress thread only: re-arm the
					 * wake socket then (0: armed) */
	uint64_t next_refresh_ns;	/* progress thread only */
} S = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.fd = -1,
	.wake_fd = -1,
	.epfd = -1,
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- seqlock writer side (S.lock held) ----------------------------------- */

static struct sdp_stat_rec *rec_begin(int slot)
{
	struct sdp_stat_rec *r;

	if (S.state != 1 || slot < 0 || (uint32_t)slot >= S.reserved)
		return NULL;
	r = &S.recs[slot];
	__atomic_store_n(&r->seq, r->seq + 1, __ATOMIC_RELAXED);
	/* Readers that see any of the stores below also see seq odd.  The
	 * readers are other processes (sdpstat), which ThreadSanitizer does
	 * not see, and it rejects fences: its build goes without. */
#ifndef __SANITIZE_THREAD__
	__atomic_thread_fence(__ATOMIC_RELEASE);
#endif
	return r;
}

static void rec_end(struct sdp_stat_rec *r)
{
	r->updated_ns = mono_ns();
	__atomic_store_n(&r->seq, r->seq + 1, __ATOMIC_RELEASE);
}

static void copy_str(char *dst, size_t len, const char *src)
{
	size_t n = src ? strnlen(src, len - 1) : 0;

	memcpy(dst, src ? src : "", n);
	memset(dst + n, 0, len - n);
}

/* ---- the file ----------------------------------------------------------- */

/* "<prefix><n>" without stdio: also used in the fork child. */
static void fmt_name(char *buf, size_t len, const char *prefix, long n)
{
	char digits[24];
	int i = (int)sizeof(digits);
	size_t p = strnlen(prefix, len - 1);

	memcpy(buf, prefix, p);
	digits[--i] = '\0';
	do {
		digits[--i] = (char)('0' + n % 10);
		n /= 10;
	} while (n && i > 0);
	copy_str(buf + p, len - p, digits + i);
}

static size_t file_bytes(uint32_t nrecs)
{
	return 4096 + (size_t)nrecs * sizeof(struct sdp_stat_rec);
}

/* Reserve the pages of the first nrecs records (and the header). */
static int reserve(int fd, uint32_t nrecs)
{
	int r;

	do
		r = fallocate(fd, 0, 0, (off_t)file_bytes(nrecs));
	while (r < 0 && errno == EINTR);
	return r < 0 ? -errno : 0;
}

/* Map a fresh file for pid, with nrecs records reserved; its descriptor in
 * *fdp.  Async-signal-safe (fork child). */
static struct sdp_stat_hdr *map_new_file(pid_t pid, char *path, size_t len,
					 uint32_t nrecs, int *fdp)
{
	void *m;
	int fd, tries;

	fmt_name(path, len, SDP_STAT_DIR "/" SDP_STAT_PREFIX, pid);
	/* O_EXCL|O_NOFOLLOW: never write through a file or link someone
	 * planted under our name; one left by an earlier holder of this pid
	 * (or our own image before exec) is ours to replace. */
	for (tries = 0; tries < 2; tries++) {
		fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW |
			  O_CLOEXEC, 0600);
		if (fd >= 0 || errno != EEXIST || unlink(path) < 0)
			break;
	}
	if (fd < 0)
		return NULL;
	fd = sdp_fd_high(fd);
	if (fd < 0 || reserve(fd, nrecs) < 0 ||
	    ftruncate(fd, (off_t)SDP_STAT_FILE_SIZE) < 0)
		goto fail;
	m = mmap(NULL, SDP_STAT_FILE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED,
		 fd, 0);
	if (m == MAP_FAILED)
		goto fail;
	*fdp = fd;
	return m;
fail:
	if (fd >= 0)
		sdp_close(fd);
	unlink(path);
	return NULL;
}

/* Reserve more records (S.lock held): twice as many, or -ENOSPC. */
static int reserve_more_locked(void)
{
	uint32_t want = S.reserved * 2;

	if (S.reserved >= SDP_STAT_NSLOTS)
		return -ENOSPC;
	if (want > SDP_STAT_NSLOTS)
		want = SDP_STAT_NSLOTS;
	if (reserve(S.fd, want) < 0)
		return -ENOSPC;
	S.reserved = want;
	return 0;
}

/* Abstract datagram socket readers poke; -1 if unavailable (then records
 * are refreshed only when the progress thread wakes for other reasons). */
static int open_wake_socket(pid_t pid)
{
	struct sockaddr_un a;
	socklen_t alen;
	int fd;

	fd = sdp_fd_high(sdp_real.socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK |
					SOCK_CLOEXEC, 0));
	if (fd < 0)
		return -1;
	if (sdp_real.setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &(int){ 1 },
				sizeof(int))) {
		sdp_close(fd);
		return -1;
	}
	memset(&a, 0, sizeof(a));
	a.sun_family = AF_UNIX;
	fmt_name(a.sun_path + 1, sizeof(a.sun_path) - 1, SDP_STAT_PREFIX, pid);
	alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
			   strlen(a.sun_path + 1));
	if (sdp_real.bind(fd, (struct sockaddr *)&a, alen) < 0) {
		sdp_close(fd);
		return -1;
	}
	return fd;
}

static void watch_locked(void)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLONESHOT };

	if (S.watched || S.epfd < 0 || S.wake_fd < 0)
		return;
	ev.data.ptr = S.tag;
	if (sdp_real.epoll_ctl(S.epfd, EPOLL_CTL_ADD, S.wake_fd, &ev) == 0)
		S.watched = 1;
}

static void stat_atfork_prepare(void)
{
	pthread_mutex_lock(&S.lock);
}

static void stat_atfork_parent(void)
{
	pthread_mutex_unlock(&S.lock);
}

/*
 * The child holds copies of the parent's descriptors, so it publishes the
 * same records, in its own file (the parent's mapping is shared: writing
 * there would corrupt the parent's view).  The parent's epoll and wake
 * socket are not ours.  Only async-signal-safe calls here.
 */
static void stat_atfork_child(void)
{
	struct sdp_stat_hdr *old = S.hdr, *h;
	pid_t pid = getpid();

	pthread_mutex_init(&S.lock, NULL);
	if (S.wake_fd >= 0)
		sdp_close(S.wake_fd);
	S.wake_fd = -1;
	if (S.fd >= 0)
		sdp_close(S.fd);	/* the parent's file */
	S.fd = -1;
	S.epfd = -1;
	S.watched = 0;
	S.poked = 0;
	S.rearm_ns = 0;
	if (S.state != 1)
		return;
	h = map_new_file(pid, S.path, sizeof(S.path), S.reserved, &S.fd);
	if (h) {
		memcpy(h, old, 4096 + (size_t)old->high_water *
		       sizeof(struct sdp_stat_rec));
		h->pid = pid;
		h->want_until_ns = 0;
		S.hdr = h;
		S.recs = (struct sdp_stat_rec *)((char *)h + 4096);
		S.pid = pid;
		S.wake_fd = open_wake_socket(pid);
	} else {
		__atomic_store_n(&S.state, -1, __ATOMIC_RELAXED);
	}
	munmap(old, SDP_STAT_FILE_SIZE);
}

__attribute__((destructor)) static void stat_at_exit(void)
{
	if (S.state == 1 && S.pid == getpid())
		unlink(S.path);
}

void sdp_stat_leave(void)
{
	if (S.state == 1 && S.pid == getpid())
		unlink(S.path);
	__atomic_store_n(&S.state, -1, __ATOMIC_RELEASE);
}

/*
 * Remove the files of our uid whose process is gone: killed, or ended
 * through _exit(), which skips the destructor.  Once per process, so that
 * /dev/shm does not fill up between sdpstat runs (which also clean).
 */
static void sweep_stale(void)
{
	size_t plen = strlen(SDP_STAT_PREFIX);
	DIR *d = opendir(SDP_STAT_DIR);
	struct dirent *e;
	struct stat st;

	if (!d)
		return;
	while ((e = readdir(d))) {
		char *end;
		long pid;

		if (strncmp(e->d_name, SDP_STAT_PREFIX, plen) ||
		    e->d_name[plen] < '0' || e->d_name[plen] > '9')
			continue;
		pid = strtol(e->d_name + plen, &end, 10);
		if (*end || pid <= 0 || pid == S.pid ||
		    kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) ||
		    st.st_uid != geteuid() || !S_ISREG(st.st_mode))
			continue;
		unlinkat(dirfd(d), e->d_name, 0);
	}
	closedir(d);
}

static int init_locked(void)
{
	extern char *program_invocation_short_name;
	struct sdp_stat_hdr *h;
	struct timespec rt;

	if (S.state)
		return S.state == 1 ? 0 : -ENODEV;
	__atomic_store_n(&S.state, -1, __ATOMIC_RELAXED);
	sdp_config_init();
	if (!sdp_cfg.stat)
		return -ENODEV;
	S.map = calloc(MAP_CAP, sizeof(*S.map));
	if (!S.map)
		return -ENODEV;
	S.pid = getpid();
	sweep_stale();
	h = map_new_file(S.pid, S.path, sizeof(S.path), STAT_RESERVE_FIRST,
			 &S.fd);
	if (!h) {
		free(S.map);
		S.map = NULL;
		return -ENODEV;
	}
	clock_gettime(CLOCK_REALTIME, &rt);
	h->version = SDP_STAT_VERSION;
	h->hdr_size = 4096;
	h->rec_size = sizeof(struct sdp_stat_rec);
	h->nslots = SDP_STAT_NSLOTS;
	h->pid = S.pid;
	h->uid = geteuid();
	copy_str(h->program, sizeof(h->program), program_invocation_short_name);
	h->created_ns = (uint64_t)rt.tv_sec * 1000000000ull +
			(uint64_t)rt.tv_nsec;
	/* Readers check the magic last. */
	__atomic_store_n(&h->magic, SDP_STAT_MAGIC, __ATOMIC_RELEASE);
	S.hdr = h;
	S.recs = (struct sdp_stat_rec *)((char *)h + 4096);
	S.reserved = STAT_RESERVE_FIRST;
	__atomic_store_n(&S.wake_fd, open_wake_socket(S.pid), __ATOMIC_RELAXED);
	sdp_atfork_add(SDP_ATFORK_INNER, stat_atfork_prepare,
		       stat_atfork_parent, stat_atfork_child);
	/* Unlocked readers (progress thread) load state, then hdr. */
	__atomic_store_n(&S.state, 1, __ATOMIC_RELEASE);
	watch_locked();
	return 0;
}

/* ---- slots ---------------------------------------------------------------- */

static int slot_alloc_locked(int fd, int listener)
{
	struct sdp_stat_rec *r;
	uint32_t i;
	int err = init_locked();

	if (err)
		return err;
	for (i = S.next_free; i < S.reserved; i++)
		if (!S.recs[i].in_use)
			break;
	if (i == S.reserved && reserve_more_locked() < 0)
		return -ENOSPC;
	S.next_free = i + 1;
	r = rec_begin((int)i);
	if (!r)
		return -ENODEV;
	memset((char *)r + sizeof(r->seq), 0, sizeof(*r) - sizeof(r->seq));
	r->in_use = 1;
	r->fd = fd;
	r->flags = listener ? SDP_STAT_F_LISTENER : 0;
	copy_str(r->state, sizeof(r->state), listener ? "LISTEN" : "CLOSED");
	copy_str(r->transport, sizeof(r->transport), "-");
	copy_str(r->mode, sizeof(r->mode), "bcopy");
	rec_end(r);
	if (i + 1 > S.hdr->high_water)
		__atomic_store_n(&S.hdr->high_water, i + 1, __ATOMIC_RELEASE);
	return (int)i;
}

int sdp_stat_slot_alloc(int fd, int listener)
{
	int r;

	pthread_mutex_lock(&S.lock);
	r = slot_alloc_locked(fd, listener);
	pthread_mutex_unlock(&S.lock);
	return r;
}

static void slot_free_locked(int slot)
{
	struct sdp_stat_rec *r = rec_begin(slot);
	uint32_t hw;

	if (!r)
		return;
	r->in_use = 0;
	r->fd = -1;
	r->reason[0] = '\0';
	rec_end(r);
	if ((uint32_t)slot < S.next_free)
		S.next_free = (uint32_t)slot;
	hw = S.hdr->high_water;
	while (hw && !S.recs[hw - 1].in_use)
		hw--;
	__atomic_store_n(&S.hdr->high_water, hw, __ATOMIC_RELEASE);
}

void sdp_stat_slot_free(int slot)
{
	pthread_mutex_lock(&S.lock);
	slot_free_locked(slot);
	pthread_mutex_unlock(&S.lock);
}

void sdp_stat_slot_set_fd(int slot, int fd)
{
	struct sdp_stat_rec *r;

	pthread_mutex_lock(&S.lock);
	r = rec_begin(slot);
	if (r) {
		r->fd = fd;
		rec_end(r);
	}
	pthread_mutex_unlock(&S.lock);
}

/* Set one string field of a record. */
static void slot_set_str(int slot, size_t off, size_t len, const char *s)
{
	struct sdp_stat_rec *r;

	pthread_mutex_lock(&S.lock);
	r = rec_begin(slot);
	if (r) {
		copy_str((char *)r + off, len, s);
		rec_end(r);
	}
	pthread_mutex_unlock(&S.lock);
}

#define SET_STR(slot, field, s)                                         \
	slot_set_str(slot, offsetof(struct sdp_stat_rec, field),        \
		     sizeof(((struct sdp_stat_rec *)0)->field), s)

void sdp_stat_slot_set_reason(int slot, const char *reason)
{
	SET_STR(slot, reason, reason);
}

void sdp_stat_slot_set_transport(int slot, const char *name)
{
	SET_STR(slot, transport, name);
}

void sdp_stat_slot_set_state(int slot, const char *state)
{
	SET_STR(slot, state, state);
}

static void addr_from(struct sdp_stat_addr *d, const struct sockaddr *sa)
{
	memset(d, 0, sizeof(*d));
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *sin = (const void *)sa;

		d->family = 4;
		d->port = ntohs(sin->sin_port);
		memcpy(d->addr, &sin->sin_addr, 4);
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *sin6 = (const void *)sa;

		d->family = 6;
		d->port = ntohs(sin6->sin6_port);
		memcpy(d->addr, &sin6->sin6_addr, 16);
	}
}

void sdp_stat_slot_set_addrs(int slot, const struct sockaddr *local,
			     const struct sockaddr *remote)
{
	struct sdp_stat_rec *r;

	pthread_mutex_lock(&S.lock);
	r = rec_begin(slot);
	if (r) {
		if (local)
			addr_from(&r->local, local);
		if (remote)
			addr_from(&r->remote, remote);
		rec_end(r);
	}
	pthread_mutex_unlock(&S.lock);
}

static void update_conn_locked(int slot, const struct sdp_conn *c)
{
	struct sdp_stat_rec *r = rec_begin(slot);

	if (!r)
		return;
	r->conn_id = c->id;
	r->flags = (r->flags & ~SDP_STAT_F_ORPHAN) |
		   (c->orphan ? SDP_STAT_F_ORPHAN : 0);
	copy_str(r->state, sizeof(r->state), sdp_state_name(c->state));
	copy_str(r->transport, sizeof(r->transport),
		 c->qp ? c->caps.name : "-");
	if (c->addr.local_len)
		addr_from(&r->local, (const struct sockaddr *)&c->addr.local);
	if (c->addr.peer_len)
		addr_from(&r->remote, (const struct sockaddr *)&c->addr.peer);
	r->tx_bytes = c->stats.bytes_sent;
	r->rx_bytes = c->stats.bytes_rcvd;
	r->tx_msgs = c->stats.msgs_sent;
	r->rx_msgs = c->stats.msgs_rcvd;
	/* Sends by mode: advertisements we sent or filled are ZCopy. */
	r->zcopy_tx = c->stats.zc_tx_adverts + c->stats.zc_wr_src_adverts -
		      c->stats.zc_wr_src_unused;
	r->bcopy_tx = c->stats.msgs_sent;
	r->zc_rd_tx = c->stats.zc_tx_bytes;
	r->zc_rd_rx = c->stats.zc_rx_bytes;
	r->zc_wr_tx = c->stats.zc_wr_tx_bytes;
	r->zc_wr_rx = c->stats.zc_wr_rx_bytes;
	r->tx_mode = c->zc_mode_tx;
	r->rx_mode = c->zc_mode_rx;
	copy_str(r->mode, sizeof(r->mode),
		 r->zc_rd_tx | r->zc_rd_rx | r->zc_wr_tx | r->zc_wr_rx ?
		 "zcopy" : "bcopy");
	r->tx_queued = c->txq_len;
	r->rx_queued = c->rx_bytes;
	r->credit_stalls = c->stats.credit_stalls;
	r->tx_credits = c->tx_credits;
	r->peer_credits = c->adv_bufs;
	r->posted = c->posted;
	/* The switch's fallback reason wins; else why the engine ended it. */
	if (c->reason != SDP_REASON_NONE && !r->reason[0])
		copy_str(r->reason, sizeof(r->reason),
			 sdp_reason_str(c->reason));
	rec_end(r);
}

void sdp_stat_slot_update_conn(int slot, const struct sdp_conn *c)
{
	pthread_mutex_lock(&S.lock);
	update_conn_locked(slot, c);
	pthread_mutex_unlock(&S.lock);
}

void sdp_stat_slot_update_listen(int slot, const struct sdp_listen *l)
{
	struct sdp_stat_rec *r;

	pthread_mutex_lock(&S.lock);
	r = rec_begin(slot);
	if (r) {
		r->flags |= SDP_STAT_F_LISTENER;
		/* Shared (fork): requests wait in the kernel's queue, which
		 * no process can count; rx_queued is this process's queue. */
		copy_str(r->state, sizeof(r->state),
			 l->shared ? "LISTEN(shared)" : "LISTEN");
		static const char *const kind[] = { "sdp", "both" };

		copy_str(r->mode, sizeof(r->mode), kind[l->tcp_fd >= 0]);
		r->accepted = l->accepted;
		r->refused = l->refused;
		r->backlog = (uint32_t)l->backlog;
		r->rx_queued = l->count;	/* connections awaiting accept */
		rec_end(r);
	}
	pthread_mutex_unlock(&S.lock);
}

/* ---- connection -> slot map (open addressing, linear probing) ------------ */

static uint32_t map_hash(const struct sdp_conn *c)
{
	uint64_t h = (uint64_t)(uintptr_t)c * 0x9e3779b97f4a7c15ull;

	return (uint32_t)(h >> 40) & (MAP_CAP - 1);
}

static int map_find_locked(const struct sdp_conn *c)
{
	uint32_t i;

	if (!S.map)
		return -1;
	for (i = map_hash(c); S.map[i].c; i = (i + 1) & (MAP_CAP - 1))
		if (S.map[i].c == c)
			return (int)i;
	return -1;
}

static void map_insert_locked(const struct sdp_conn *c, int slot)
{
	uint32_t i;

	/* Never full: at most SDP_STAT_NSLOTS of MAP_CAP entries are used. */
	for (i = map_hash(c); S.map[i].c; i = (i + 1) & (MAP_CAP - 1))
		;
	S.map[i].c = c;
	S.map[i].slot = slot;
}

/* Backward-shift deletion keeps every probe chain unbroken. */
static void map_delete_locked(uint32_t i)
{
	uint32_t j = i, k;

	for (;;) {
		S.map[i].c = NULL;
		for (;;) {
			j = (j + 1) & (MAP_CAP - 1);
			if (!S.map[j].c)
				return;
			k = map_hash(S.map[j].c);
			/* Entry j may stay if its home k lies in (i, j]. */
			if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
				continue;
			S.map[i] = S.map[j];
			i = j;
			break;
		}
	}
}

void sdp_stat_conn_attach(struct sdp_conn *c)
{
	int slot;

	pthread_mutex_lock(&S.lock);
	slot = slot_alloc_locked(-1, 0);
	if (slot >= 0) {
		map_insert_locked(c, slot);
		update_conn_locked(slot, c);
	}
	pthread_mutex_unlock(&S.lock);
}

void sdp_stat_conn_detach(struct sdp_conn *c)
{
	int i;

	pthread_mutex_lock(&S.lock);
	i = map_find_locked(c);
	if (i >= 0) {
		slot_free_locked(S.map[i].slot);
		map_delete_locked((uint32_t)i);
	}
	pthread_mutex_unlock(&S.lock);
}

int sdp_stat_conn_slot(const struct sdp_conn *c)
{
	int i, slot = -1;

	pthread_mutex_lock(&S.lock);
	i = map_find_locked(c);
	if (i >= 0)
		slot = S.map[i].slot;
	pthread_mutex_unlock(&S.lock);
	return slot;
}

/* ---- progress thread ---------------------------------------------------- */

void sdp_stat_watch(int epfd, void *tag)
{
	pthread_mutex_lock(&S.lock);
	S.epfd = epfd;
	S.tag = tag;
	S.watched = 0;
	watch_locked();
	pthread_mutex_unlock(&S.lock);
}

/* A datagram from this user or root (sdpstat). */
static int poke_is_ours(struct msghdr *m)
{
	struct cmsghdr *cm;
	struct ucred uc;

	for (cm = CMSG_FIRSTHDR(m); cm; cm = CMSG_NXTHDR(m, cm))
		if (cm->cmsg_level == SOL_SOCKET &&
		    cm->cmsg_type == SCM_CREDENTIALS &&
		    cm->cmsg_len >= CMSG_LEN(sizeof(uc))) {
			memcpy(&uc, CMSG_DATA(cm), sizeof(uc));
			return uc.uid == 0 || uc.uid == geteuid();
		}
	return 0;
}

void sdp_stat_poked(void)
{
	int fd = __atomic_load_n(&S.wake_fd, __ATOMIC_RELAXED), i;
	union {
		char buf[CMSG_SPACE(sizeof(struct ucred))];
		struct cmsghdr align;
	} ctl;
	char byte[16];

	for (i = 0; fd >= 0 && i < STAT_POKES_PER_WAKE; i++) {
		struct iovec iov = { .iov_base = byte, .iov_len = sizeof(byte) };
		struct msghdr m = {
			.msg_iov = &iov, .msg_iovlen = 1,
			.msg_control = ctl.buf,
			.msg_controllen = sizeof(ctl.buf),
		};

		if (sdp_real.recvmsg(fd, &m, MSG_DONTWAIT) < 0)
			break;
		if (poke_is_ours(&m))
			S.poked = 1;
	}
	S.rearm_ns = mono_ns() + STAT_POKE_GAP_MS * 1000000ull;
}

/* Arm the one-shot wake socket again once the gap after a wake-up passed. */
static void rearm_wake(uint64_t now)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLONESHOT };

	if (!S.rearm_ns || now < S.rearm_ns)
		return;
	S.rearm_ns = 0;
	pthread_mutex_lock(&S.lock);
	ev.data.ptr = S.tag;
	if (S.watched)
		sdp_real.epoll_ctl(S.epfd, EPOLL_CTL_MOD, S.wake_fd, &ev);
	pthread_mutex_unlock(&S.lock);
}

static int publishing(void)
{
	return __atomic_load_n(&S.state, __ATOMIC_ACQUIRE) == 1;
}

static uint64_t want_until(void)
{
	if (!publishing())
		return 0;
	return __atomic_load_n(&S.hdr->want_until_ns, __ATOMIC_RELAXED);
}

int sdp_stat_progress_timeout(int tmo)
{
	uint64_t now, until = want_until();
	int ms;

	if (S.poked)
		return 0;
	now = mono_ns();
	if (S.rearm_ns) {
		ms = S.rearm_ns > now ?
			(int)((S.rearm_ns - now) / 1000000ull) + 1 : 0;
		if (tmo < 0 || ms < tmo)
			tmo = ms;
	}
	if (!until)
		return tmo;
	if (until <= now)
		return tmo;
	ms = S.next_refresh_ns > now ?
		(int)((S.next_refresh_ns - now) / 1000000ull) + 1 : 0;
	return tmo < 0 || ms < tmo ? ms : tmo;
}

static void refresh_one(struct sdp_conn *c, void *arg)
{
	(void)arg;
	pthread_mutex_lock(&c->lock);
	pthread_mutex_lock(&S.lock);
	{
		int i = map_find_locked(c);

		if (i >= 0)
			update_conn_locked(S.map[i].slot, c);
	}
	pthread_mutex_unlock(&S.lock);
	pthread_mutex_unlock(&c->lock);
}

void sdp_stat_progress_tick(void)
{
	uint64_t now;

	if (!publishing())
		return;
	now = mono_ns();
	rearm_wake(now);
	if (!S.poked && (want_until() <= now || now < S.next_refresh_ns))
		return;
	S.poked = 0;
	S.next_refresh_ns = now + SDP_STAT_REFRESH_MS * 1000000ull;
	sdp_progress_foreach(refresh_one, NULL);
	__atomic_store_n(&S.hdr->refreshed_ns, mono_ns(), __ATOMIC_RELEASE);
}
