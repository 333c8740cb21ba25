/* SPDX-License-Identifier: MIT */
/*
 * fdtable.c — descriptor -> SDP socket map.  Two levels, allocated lazily,
 * covering every descriptor the kernel can hand out (no fd-range cliff).
 * The common question "is this descriptor SDP?" is one atomic load with no
 * lock; taking a reference on an SDP socket uses a read lock so that close()
 * in another thread cannot free it under us.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/atfork.h"
#include "base/owner.h"
#include "engine/relay.h"
#include "socket/sock.h"

#define L2_BITS 10
#define L2_SIZE (1u << L2_BITS)
#define L1_SIZE 1024u	/* 1M descriptors: fs.nr_open's default maximum */

static _Atomic(struct sdp_sock *) *_Atomic table[L1_SIZE];
static pthread_rwlock_t table_lock = PTHREAD_RWLOCK_INITIALIZER;
static pthread_mutex_t alloc_lock = PTHREAD_MUTEX_INITIALIZER;

static _Atomic(struct sdp_sock *) *slot(int fd, int create)
{
	unsigned u = (unsigned)fd, i1 = u >> L2_BITS;
	_Atomic(struct sdp_sock *) *l2;

	if (fd < 0 || i1 >= L1_SIZE)
		return NULL;
	l2 = atomic_load_explicit(&table[i1], memory_order_acquire);
	if (!l2 && create) {
		pthread_mutex_lock(&alloc_lock);
		l2 = atomic_load(&table[i1]);
		if (!l2) {
			l2 = calloc(L2_SIZE, sizeof(*l2));
			if (l2)
				atomic_store_explicit(&table[i1], l2,
						      memory_order_release);
		}
		pthread_mutex_unlock(&alloc_lock);
	}
	return l2 ? &l2[u & (L2_SIZE - 1)] : NULL;
}

bool sdp_fd_mapped(int fd)
{
	_Atomic(struct sdp_sock *) *p = slot(fd, 0);

	return p && atomic_load_explicit(p, memory_order_relaxed);
}

struct sdp_sock *sdp_fd_get(int fd)
{
	_Atomic(struct sdp_sock *) *p = slot(fd, 0);
	struct sdp_sock *s;

	if (!p || !atomic_load_explicit(p, memory_order_relaxed))
		return NULL;
	pthread_rwlock_rdlock(&table_lock);
	s = atomic_load(p);
	if (s)
		atomic_fetch_add(&s->refs, 1);
	pthread_rwlock_unlock(&table_lock);
	/* Relayed in place (engine/relay.h), by any process of the family:
	 * the descriptor is the plain socket it names, for us too. */
	if (s && sdp_owner_any_in_place() && sdp_sock_went_plain(fd, s)) {
		sdp_sock_put(s);
		return NULL;
	}
	return s;
}

/* The process the table belongs to: a vfork() child (or a CLONE_VM one)
 * runs in our memory under another pid, and must not edit the table or
 * run the engine for the parent (socket.c: close, close_range, dup2). */
static _Atomic pid_t table_pid;
static pthread_once_t pid_once = PTHREAD_ONCE_INIT;

static void table_pid_child(void)
{
	atomic_store(&table_pid, (pid_t)syscall(SYS_getpid));
}

static void table_pid_init(void)
{
	table_pid_child();
	sdp_atfork_add(SDP_ATFORK_INNER, NULL, NULL, table_pid_child);
}

bool sdp_in_memory_sharing_child(void)
{
	pid_t p = atomic_load(&table_pid);

	return p && (pid_t)syscall(SYS_getpid) != p;
}

int sdp_fd_set(int fd, struct sdp_sock *s)
{
	_Atomic(struct sdp_sock *) *p = slot(fd, 1);
	struct sdp_sock *old;

	pthread_once(&pid_once, table_pid_init);
	if (!p)
		return -EMFILE;
	atomic_fetch_add(&s->refs, 1);
	atomic_fetch_add(&s->nfds, 1);
	pthread_rwlock_wrlock(&table_lock);
	old = atomic_exchange(p, s);
	pthread_rwlock_unlock(&table_lock);
	if (old) {
		/* The kernel reused a descriptor we still mapped: the old
		 * socket's descriptor was closed behind our back. */
		if (atomic_fetch_sub(&old->nfds, 1) == 1)
			sdp_sock_release(old);
		sdp_sock_put(old);
	}
	return 0;
}

struct sdp_sock *sdp_fd_peek(int fd)
{
	_Atomic(struct sdp_sock *) *p = slot(fd, 0);

	return p ? atomic_load(p) : NULL;
}

struct sdp_sock *sdp_fd_take(int fd)
{
	_Atomic(struct sdp_sock *) *p = slot(fd, 0);
	struct sdp_sock *s;

	if (!p || !atomic_load_explicit(p, memory_order_relaxed))
		return NULL;
	pthread_rwlock_wrlock(&table_lock);
	s = atomic_exchange(p, NULL);
	pthread_rwlock_unlock(&table_lock);
	return s;	/* the table's reference now belongs to the caller */
}

/*
 * The first descriptor >= `from` that the table maps, or -1.  For exec()
 * (exec.c), which may run after vfork() or in a fork() child of a threaded
 * program: no lock (another thread may have held table_lock at fork time,
 * and the child would wait for it forever), no allocation, atomic loads
 * only, and the socket is never dereferenced (a racing close() in another
 * thread of the same image could free it).  The answer is a snapshot: an
 * entry may be stale, so the caller checks what the descriptor really is.
 */
int sdp_fd_scan_next(int from)
{
	unsigned u, i1;

	if (from < 0)
		from = 0;
	for (u = (unsigned)from, i1 = u >> L2_BITS; i1 < L1_SIZE;
	     i1++, u = i1 << L2_BITS) {
		_Atomic(struct sdp_sock *) *l2 =
			atomic_load_explicit(&table[i1], memory_order_acquire);

		if (!l2)
			continue;
		for (; (u >> L2_BITS) == i1; u++)
			if (atomic_load_explicit(&l2[u & (L2_SIZE - 1)],
						 memory_order_relaxed))
				return (int)u;
	}
	return -1;
}
