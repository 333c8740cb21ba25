// SPDX-License-Identifier: MIT
/*
 * shm_rdma.c — memory registration and RDMA READ/WRITE for the shm
 * transport, by cross-memory attach (process_vm_readv/writev).
 *
 * reg_mr() publishes remotely accessible ranges in the MR table of our own
 * segment; the peer validates every RDMA against that table (rkey, range,
 * access) before it asks the kernel to copy.  The table is advisory between
 * cooperating libraries (the peer, or a child it forked, can rewrite it):
 * the boundary is the kernel's ptrace access check on process_vm_*, made
 * with no more privilege than the peer's own credentials (shm_creds.c: a
 * privileged process copies without CAP_SYS_PTRACE).  So every copy
 * reaches only memory the peer's user could write with ptrace anyway, and
 * an exec of a setuid program or a change of the peer's ids ends its RDMA
 * before the next copy, decided by the kernel under the peer's exec lock:
 * the copy fails (REM_ACCESS_ERR) and the engine resets the connection.
 * What remains: a same-user image the peer exec'd (not setuid) may still
 * receive bytes its predecessor asked for, memory its user could write with
 * ptrace anyway.  We never widen the check (no PR_SET_PTRACER); where it
 * denies access, caps.rdma is 0 and the engine stays with buffer copies.
 *
 * The peer's pid comes from SCM_CREDENTIALS on its CM message (verified by
 * the kernel).  When the engine first asks whether RDMA works (query_caps,
 * before its first ZCopy; a short connection never does) we read a random
 * nonce from the peer's segment through process_vm_readv at the address
 * the peer reported and compare it with the nonce we see in our mapping:
 * that proves both that
 * cross-memory attach works and that the pid is the process holding the
 * segment (not, e.g., a parent that forked before accepting).
 *
 * Two more guards keep a copy from landing in the wrong process: a pidfd of
 * the peer is polled before every RDMA (the pid cannot have been recycled
 * while the pidfd says the process lives), and each table entry records the
 * pid that registered it, so that after a fork the child's registrations are
 * refused rather than applied to the parent's address space.
 *
 * Table entries are rewritten under a per-entry seqlock so that a reader in
 * the other process never validates against a half-written entry.  An rkey
 * is (generation << 8 | slot): a stale rkey of a re-used slot does not
 * match.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/atfork.h"
#include "base/fdhigh.h"
#include "transport/shm/shm.h"
#include "base/real.h"

/*
 * One pidfd per peer process, not per connection: a server with a thousand
 * connections from one client process holds one descriptor for it, not a
 * thousand (docs/DESIGN.md, "Descriptors").  An entry is shared only while
 * its pidfd says the process lives: then no other process can hold that
 * pid, so it is the process the caller just identified.  A dead one is
 * left to its remaining users and a fresh pidfd is opened.  One that no
 * connection uses any more stays open for the next connection with that
 * process (a connection per request took a pidfd_open and two closes
 * each time), up to PF_IDLE_MAX of them, the longest idle closed first.
 */
#define PF_IDLE_MAX 8

struct pidfd_ent {
	pid_t pid;
	int fd;
	int refs;
	uint64_t idle_order;	/* refs == 0: when it became idle */
};

static pthread_mutex_t pf_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pidfd_ent *pf_tab;
static int pf_n, pf_cap;
static uint64_t pf_idle_clock;
static atomic_ulong pf_opened;		/* tests: pidfd_open calls */
static pthread_once_t pf_once = PTHREAD_ONCE_INIT;

static void pf_prepare(void)
{
	pthread_mutex_lock(&pf_lock);
}

static void pf_after(void)
{
	pthread_mutex_unlock(&pf_lock);
}

static void pf_init(void)
{
	sdp_atfork_add(SDP_ATFORK_INNER, pf_prepare, pf_after, pf_after);
}

static bool pidfd_exited(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return sdp_real.poll(&p, 1, 0) > 0;
}

int sdp__shm_peer_pidfd_get(pid_t pid)
{
	struct pidfd_ent *t;
	int fd;

	pthread_once(&pf_once, pf_init);
	pthread_mutex_lock(&pf_lock);
	for (int i = 0; i < pf_n; i++) {
		if (pf_tab[i].pid != pid)
			continue;
		if (!pidfd_exited(pf_tab[i].fd)) {
			pf_tab[i].refs++;
			fd = pf_tab[i].fd;
			pthread_mutex_unlock(&pf_lock);
			return fd;
		}
		if (!pf_tab[i].refs) {	/* idle, and its process is gone */
			sdp_close(pf_tab[i].fd);
			pf_tab[i--] = pf_tab[--pf_n];
		}
	}
	fd = sdp_fd_high((int)syscall(SYS_pidfd_open, pid, 0));
	atomic_fetch_add(&pf_opened, 1);
	if (fd >= 0 && pf_n == pf_cap) {
		t = realloc(pf_tab, (size_t)(pf_cap ? pf_cap * 2 : 16) *
				    sizeof(*t));
		if (t) {
			pf_tab = t;
			pf_cap = pf_cap ? pf_cap * 2 : 16;
		}
	}
	if (fd >= 0 && pf_n < pf_cap)
		pf_tab[pf_n++] = (struct pidfd_ent){ pid, fd, 1, 0 };
	else if (fd >= 0) {
		sdp_close(fd);	/* no memory for the table: no guard */
		fd = -1;
	}
	pthread_mutex_unlock(&pf_lock);
	return fd;
}

/* pf_lock held: past PF_IDLE_MAX idle entries, close the longest idle. */
static void pf_trim_idle_locked(void)
{
	int idle = 0, oldest = -1;

	for (int i = 0; i < pf_n; i++) {
		if (pf_tab[i].refs)
			continue;
		idle++;
		if (oldest < 0 ||
		    pf_tab[i].idle_order < pf_tab[oldest].idle_order)
			oldest = i;
	}
	if (idle > PF_IDLE_MAX) {
		sdp_close(pf_tab[oldest].fd);
		pf_tab[oldest] = pf_tab[--pf_n];
	}
}

void sdp__shm_peer_pidfd_put(int fd)
{
	if (fd < 0)
		return;
	pthread_mutex_lock(&pf_lock);
	for (int i = 0; i < pf_n; i++) {
		if (pf_tab[i].fd != fd)
			continue;
		if (--pf_tab[i].refs == 0) {
			pf_tab[i].idle_order = ++pf_idle_clock;
			pf_trim_idle_locked();
		}
		break;
	}
	pthread_mutex_unlock(&pf_lock);
}

unsigned long sdp__shm_peer_pidfd_opened(void)
{
	return atomic_load(&pf_opened);
}

void sdp__shm_rdma_probe(struct shm_qp *qp)
{
	uint64_t seen = 0, expect;
	struct iovec local = { &seen, sizeof(seen) };
	struct iovec remote = {
		(void *)(uintptr_t)(qp->peer_base +
				    offsetof(struct shm_ctrl, nonce)),
		sizeof(seen)
	};
	ssize_t n;

	qp->caps.rdma = 0;
	if (qp->peer_pid <= 0) {
		strcpy(qp->caps.rdma_reason, "peer credentials unavailable");
		return;
	}
	/* The kernel lets only a caller with our real ids into a process
	 * (shm_creds.c), so a peer of other ids never had RDMA to lose.  And
	 * its pid, probed after the handshake, may name another process by
	 * now (it exited, the number was reused): one of our user's, whose
	 * memory the nonce check would then let a peer of another user point
	 * our copies at. */
	if (qp->peer_uid != getuid() || qp->peer_gid != getgid()) {
		strcpy(qp->caps.rdma_reason, "peer runs as another user");
		return;
	}
	n = sdp__shm_vm_rw(qp, false, &local, 1, &remote, 1);
	if (n != (ssize_t)sizeof(seen)) {
		snprintf(qp->caps.rdma_reason, sizeof(qp->caps.rdma_reason),
			 "cross-memory attach denied: %s",
			 n < 0 ? strerror((int)-n) : "short read");
		return;
	}
	expect = atomic_load(&qp->peer.ctrl->nonce);
	if (seen != expect) {
		strcpy(qp->caps.rdma_reason, "peer identity check failed");
		return;
	}
	qp->caps.rdma = 1;
	qp->caps.rdma_reason[0] = '\0';
	if (qp->peer_pidfd < 0)	/* or taken for the peer's offer */
		qp->peer_pidfd = sdp__shm_peer_pidfd_get(qp->peer_pid);
}

/* Has the peer process exited?  (No pidfd support: rely on the socket.) */
static bool peer_exited(struct shm_qp *qp)
{
	return qp->peer_pidfd >= 0 && pidfd_exited(qp->peer_pidfd);
}

/* Rewrite table entry `idx` of our segment (seqlock writer side). */
static void mr_publish(struct shm_qp *qp, int idx, uint32_t rkey,
		       unsigned access, uint64_t addr, uint64_t len)
{
	struct shm_mr_entry *e = &qp->me.mr[idx];
	uint32_t g = atomic_load_explicit(&e->gen, memory_order_relaxed) | 1;

	/* Release stores instead of a fence after the odd gen: each keeps
	 * that store before it, costs nothing more on x86, and
	 * ThreadSanitizer (which rejects fences) can follow it. */
	atomic_store_explicit(&e->gen, g, memory_order_relaxed);	/* odd */
	atomic_store_explicit(&e->rkey, rkey, memory_order_release);
	atomic_store_explicit(&e->access, access, memory_order_release);
	atomic_store_explicit(&e->pid, (uint32_t)getpid(), memory_order_release);
	atomic_store_explicit(&e->addr, addr, memory_order_release);
	atomic_store_explicit(&e->length, len, memory_order_release);
	atomic_store_explicit(&e->gen, g + 1, memory_order_release);
}

int sdp__shm_reg_mr(struct sdp_qp *sq, void *addr, size_t len,
		    unsigned access, struct sdp_mr **out)
{
	struct shm_qp *qp = SHM_QP(sq);
	struct shm_mr *mr;
	uint32_t gen;
	int idx;

	if (!addr || !len ||
	    (access & ~(SDP_ACCESS_LOCAL_WRITE | SDP_ACCESS_REMOTE_WRITE |
			SDP_ACCESS_REMOTE_READ)))
		return -EINVAL;
	for (idx = 0; idx < SHM_MAX_MR && qp->mrs[idx]; idx++)
		;
	if (idx == SHM_MAX_MR)
		return -ENOMEM;
	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return -ENOMEM;
	gen = ++qp->mr_gen & 0x7fffff;
	if (!gen)
		gen = ++qp->mr_gen & 0x7fffff;
	mr->pub.addr = addr;
	mr->pub.length = len;
	mr->pub.lkey = mr->pub.rkey = gen << 8 | (uint32_t)idx;
	mr->pub.remote_addr = (uintptr_t)addr;
	mr->access = access;
	qp->mrs[idx] = mr;
	if (access & (SDP_ACCESS_REMOTE_READ | SDP_ACCESS_REMOTE_WRITE))
		mr_publish(qp, idx, mr->pub.rkey, access, (uintptr_t)addr, len);
	*out = &mr->pub;
	return 0;
}

int sdp__shm_dereg_mr(struct sdp_qp *sq, struct sdp_mr *pub)
{
	struct shm_qp *qp = SHM_QP(sq);
	int idx = pub->lkey & (SHM_MAX_MR - 1);
	struct shm_mr *mr = qp->mrs[idx];

	if (!mr || &mr->pub != pub)
		return -EINVAL;
	if (mr->access & (SDP_ACCESS_REMOTE_READ | SDP_ACCESS_REMOTE_WRITE))
		mr_publish(qp, idx, 0, 0, 0, 0);
	qp->mrs[idx] = NULL;
	free(mr);
	return 0;
}

static bool range_in(uint64_t addr, uint64_t len, uint64_t base, uint64_t size)
{
	return addr >= base && len <= size && addr - base <= size - len;
}

/* Does the peer's table allow `access` to [addr, addr+len) under `rkey`?
 * Seqlock reader; a writer that never finishes just fails the check. */
static bool remote_ok(struct shm_qp *qp, uint32_t rkey, uint64_t addr,
		      uint64_t len, unsigned access)
{
	struct shm_mr_entry *e = &qp->peer.mr[rkey & (SHM_MAX_MR - 1)];

	for (int tries = 0; tries < 64; tries++) {
		uint32_t g = atomic_load_explicit(&e->gen, memory_order_acquire);
		uint32_t k, acc, pid;
		uint64_t base, size;

		if (g & 1)
			continue;
		/* Acquire loads instead of a fence before the re-check: the
		 * gen load below cannot move above any of them. */
		k = atomic_load_explicit(&e->rkey, memory_order_acquire);
		acc = atomic_load_explicit(&e->access, memory_order_acquire);
		pid = atomic_load_explicit(&e->pid, memory_order_acquire);
		base = atomic_load_explicit(&e->addr, memory_order_acquire);
		size = atomic_load_explicit(&e->length, memory_order_acquire);
		if (atomic_load_explicit(&e->gen, memory_order_relaxed) != g)
			continue;
		return rkey && k == rkey && (acc & access) == access &&
		       pid == (uint32_t)qp->peer_pid &&
		       range_in(addr, len, base, size);
	}
	return false;
}

enum sdp_wc_status sdp__shm_rdma(struct shm_qp *qp,
				 const struct sdp_send_wr *wr, uint64_t total)
{
	bool rd = wr->opcode == SDP_WR_RDMA_READ;
	struct iovec local[SDP_MAX_SGE];
	struct iovec remote = { (void *)(uintptr_t)wr->remote_addr, total };
	ssize_t n;

	if (!remote_ok(qp, wr->rkey, wr->remote_addr, total,
		       rd ? SDP_ACCESS_REMOTE_READ : SDP_ACCESS_REMOTE_WRITE))
		return SDP_WC_REM_ACCESS_ERR;
	if (!total)
		return SDP_WC_SUCCESS;
	if (peer_exited(qp))
		return SDP_WC_RETRY_EXC_ERR;
	for (int i = 0; i < wr->num_sge; i++) {
		local[i].iov_base = (void *)(uintptr_t)wr->sg_list[i].addr;
		local[i].iov_len = wr->sg_list[i].length;
	}
	n = sdp__shm_vm_rw(qp, !rd, local, (unsigned long)wr->num_sge,
			   &remote, 1);
	if (n == (ssize_t)total)
		return SDP_WC_SUCCESS;
	if (n == -ESRCH)
		return SDP_WC_RETRY_EXC_ERR;	/* the peer is gone */
	/* EPERM: the peer exec'd or changed its credentials (shm_creds.c).
	 * The engine resets the connection: the application's send or recv
	 * fails, no byte is counted as delivered. */
	return SDP_WC_REM_ACCESS_ERR;
}
