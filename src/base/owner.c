/* SPDX-License-Identifier: MIT */
/*
 * owner.c — owner slots shared by a process family (see owner.h).
 * A slot is five words: the owner (a pid, 0 released, FREE unused), the
 * asker (a pid, or 0), the generation of the last release, the owner's
 * "busy", and the exec relay's request (relay.h): the asker, then
 * "accepted" for good.
 */
#include "base/owner.h"
#include "base/atfork.h"
#include "base/real.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define OWNER_SLOTS (1u << 20)	/* 16 MiB of address space, touched lazily */
#define OWNER_FREE 0xffffffffu

struct owner_slot {
	_Atomic uint32_t owner;	/* futex word */
	_Atomic uint32_t asker;
	_Atomic uint32_t gen;
	_Atomic uint32_t busy;	/* the owner declined: a call of its own */
	_Atomic uint32_t relay;	/* futex word: requester pid, | ACCEPTED */
};

#define RELAY_ACCEPTED 0x80000000u
#define RELAY_IN_PLACE 0x40000000u	/* pids stay below (pid_max 2^22) */

struct owner_region {
	_Atomic uint32_t hint;
	_Atomic uint32_t in_place;	/* some slot was relayed in place */
	uint32_t pad[2];
	struct owner_slot slot[];
};

static struct owner_region *region;
static pthread_mutex_t region_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t me;

static void owner_atfork_child(void)
{
	me = (uint32_t)getpid();
}

/* Slots start at 0, which reads "released" to anyone: so a never-used slot
 * is first marked FREE, and the whole region is set so once.  Zero-filled
 * pages cost nothing until touched, so the marking is lazy instead: a slot
 * counts as unused while its generation is 0 and its owner 0. */
static struct owner_region *get_region(void)
{
	struct owner_region *r = __atomic_load_n(&region, __ATOMIC_ACQUIRE);
	void *p;

	if (r)
		return r;
	pthread_mutex_lock(&region_lock);
	if (!region) {
		p = mmap(NULL, sizeof(*r) + OWNER_SLOTS * sizeof(r->slot[0]),
			 PROT_READ | PROT_WRITE,
			 MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (p != MAP_FAILED) {
			me = (uint32_t)getpid();
			sdp_atfork_add(SDP_ATFORK_INNER, NULL, NULL,
				       owner_atfork_child);
			__atomic_store_n(&region, p, __ATOMIC_RELEASE);
		}
	}
	r = region;
	pthread_mutex_unlock(&region_lock);
	return r;
}

static int slot_unused(struct owner_slot *s)
{
	uint32_t o = atomic_load(&s->owner);

	return o == OWNER_FREE || (o == 0 && atomic_load(&s->gen) == 0);
}

int sdp_owner_alloc(void)
{
	struct owner_region *r = get_region();
	unsigned i, start, n;

	if (!r)
		return -1;
	start = atomic_fetch_add(&r->hint, 1) % OWNER_SLOTS;
	for (n = 0; n < OWNER_SLOTS; n++) {
		struct owner_slot *s;
		uint32_t expect;

		i = (start + n) % OWNER_SLOTS;
		s = &r->slot[i];
		if (!slot_unused(s))
			continue;
		expect = atomic_load(&s->owner);
		if (atomic_compare_exchange_strong(&s->owner, &expect, me)) {
			atomic_store(&s->asker, 0);
			atomic_store(&s->relay, 0);
			atomic_store(&s->gen, 1);
			atomic_store(&r->hint, i + 1);
			return (int)i;
		}
	}
	return -1;
}

static struct owner_slot *slot_of(int slot)
{
	/* Bounded: a slot number may come from another process (relay.c). */
	return slot >= 0 && (unsigned)slot < OWNER_SLOTS && region ?
	       &region->slot[slot] : NULL;
}

int sdp_owner_is_me(int slot)
{
	struct owner_slot *s = slot_of(slot);

	return !s || atomic_load(&s->owner) == me;
}

uint32_t sdp_owner_get(int slot)
{
	struct owner_slot *s = slot_of(slot);

	return s ? atomic_load(&s->owner) : me;
}

int sdp_owner_take(int slot)
{
	struct owner_slot *s = slot_of(slot);
	uint32_t v = 0;

	if (!s)
		return 0;
	if (atomic_compare_exchange_strong(&s->owner, &v, me)) {
		uint32_t a = me;

		atomic_compare_exchange_strong(&s->asker, &a, 0);
		return 1;
	}
	return v == me ? 0 : -EBUSY;
}

int sdp_owner_take_from(int slot, uint32_t dead)
{
	struct owner_slot *s = slot_of(slot);
	uint32_t v = dead;

	if (!s)
		return 0;
	if (atomic_compare_exchange_strong(&s->owner, &v, me))
		return 1;
	return v == me ? 0 : -EBUSY;
}

void sdp_owner_ask(int slot)
{
	struct owner_slot *s = slot_of(slot);

	if (s)
		atomic_store(&s->asker, me);
}

void sdp_owner_set_busy(int slot, int busy)
{
	struct owner_slot *s = slot_of(slot);

	if (s && atomic_load(&s->busy) != (uint32_t)busy)
		atomic_store(&s->busy, (uint32_t)busy);
}

int sdp_owner_busy(int slot)
{
	struct owner_slot *s = slot_of(slot);

	return s && atomic_load(&s->busy);
}

uint32_t sdp_owner_asked(int slot)
{
	struct owner_slot *s = slot_of(slot);
	uint32_t a = s ? atomic_load(&s->asker) : 0;

	return a == me ? 0 : a;
}

void sdp_owner_wait_change(int slot, uint32_t owner, unsigned ms)
{
	struct owner_slot *s = slot_of(slot);
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	if (s && atomic_load(&s->owner) == owner)
		syscall(SYS_futex, &s->owner, FUTEX_WAIT, owner, &ts, NULL, 0);
}

uint32_t sdp_owner_next_gen(int slot)
{
	struct owner_slot *s = slot_of(slot);
	uint32_t g = s ? atomic_load(&s->gen) + 1 : 1;

	return g ? g : 1;
}

uint32_t sdp_owner_gen(int slot)
{
	struct owner_slot *s = slot_of(slot);

	return s ? atomic_load(&s->gen) : 0;
}

uint32_t sdp_owner_release(int slot)
{
	struct owner_slot *s = slot_of(slot);
	uint32_t g, v = me;

	if (!s || atomic_load(&s->owner) != me)
		return 0;
	g = sdp_owner_next_gen(slot);
	atomic_store(&s->gen, g);
	atomic_store(&s->busy, 0);
	/* The mailbox and the generation are written before the owner word
	 * says "released" (seq_cst): a taker that sees 0 sees both. */
	if (atomic_compare_exchange_strong(&s->owner, &v, 0))
		syscall(SYS_futex, &s->owner, FUTEX_WAKE, INT_MAX, NULL, NULL,
			0);
	return g;
}

void sdp_owner_free(int slot)
{
	struct owner_slot *s = slot_of(slot);
	uint32_t v;

	if (!s)
		return;
	/* Released: another process of the family may take it yet. */
	v = me;
	atomic_compare_exchange_strong(&s->owner, &v, OWNER_FREE);
}

int sdp_owner_alive(uint32_t pid)
{
	char path[32], buf[160], *p;
	ssize_t n;
	int fd;

	if (!pid || pid > INT_MAX)
		return 0;
	if (kill((pid_t)pid, 0) < 0 && errno == ESRCH)
		return 0;
	/* A zombie is dead to us: its parent may be the one waiting. */
	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 1;	/* cannot tell: alive */
	n = sdp_real.read(fd, buf, sizeof(buf) - 1);
	sdp_close(fd);
	if (n <= 0)
		return 1;
	buf[n] = '\0';
	p = strrchr(buf, ')');
	return !(p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X'));
}

int sdp_owner_gone(int slot)
{
	struct owner_slot *s = slot_of(slot);

	return s && atomic_load(&s->owner) == OWNER_FREE;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Wait on `word` while it holds `v`, until `end` (CLOCK_MONOTONIC ns). */
static void wait_word(_Atomic uint32_t *word, uint32_t v, uint64_t end)
{
	uint64_t now = mono_ns();
	struct timespec rel;

	if (now >= end)
		return;
	rel.tv_sec = (time_t)((end - now) / 1000000000ull);
	rel.tv_nsec = (long)((end - now) % 1000000000ull);
	syscall(SYS_futex, word, FUTEX_WAIT, v, &rel, NULL, 0);
}

int sdp_owner_relay_ask(int slot)
{
	struct owner_slot *s = slot_of(slot);
	uint32_t o, v = 0;

	if (!s)
		return -ENOTSUP;
	o = atomic_load(&s->owner);
	if (o == me || o == 0 || o == OWNER_FREE)
		return -ENOTSUP;
	if (!atomic_compare_exchange_strong(&s->relay, &v, me))
		return -EBUSY;		/* relayed already, or being asked */
	return 0;
}

int sdp_owner_relay_wait(int slot, unsigned ms)
{
	struct owner_slot *s = slot_of(slot);
	uint64_t end = mono_ns() + (uint64_t)ms * 1000000ull;
	uint32_t v;

	if (!s)
		return 0;
	while (atomic_load(&s->relay) == me && mono_ns() < end)
		wait_word(&s->relay, me, end);
	/* Withdraw the request unless it was accepted meanwhile: exactly
	 * one of the owner's accept and this withdrawal wins. */
	v = me;
	if (atomic_compare_exchange_strong(&s->relay, &v, 0))
		return 0;
	return (v & ~RELAY_IN_PLACE) == (me | RELAY_ACCEPTED);
}

int sdp_owner_relay_accept(int slot, uint32_t asker, int in_place)
{
	struct owner_slot *s = slot_of(slot);
	uint32_t v = asker;

	if (!s || !asker || (asker & (RELAY_ACCEPTED | RELAY_IN_PLACE)) ||
	    atomic_load(&s->owner) != me)
		return 0;
	if (in_place)	/* before the slot says so (seq_cst) */
		atomic_store(&region->in_place, 1);
	if (!atomic_compare_exchange_strong(&s->relay, &v,
					    asker | RELAY_ACCEPTED |
					    (in_place ? RELAY_IN_PLACE : 0)))
		return 0;
	syscall(SYS_futex, &s->relay, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
	return 1;
}

int sdp_owner_relay_self(int slot)
{
	struct owner_slot *s = slot_of(slot);
	uint32_t v = 0;

	if (!s)
		return 1;
	if (atomic_load(&s->owner) != me)
		return 0;
	atomic_store(&region->in_place, 1);	/* before the slot says so */
	return atomic_compare_exchange_strong(&s->relay, &v,
					      me | RELAY_ACCEPTED |
					      RELAY_IN_PLACE);
}

void sdp_owner_relay_refuse(int slot, uint32_t asker)
{
	struct owner_slot *s = slot_of(slot);
	uint32_t v = asker;

	if (s && asker && !(asker & (RELAY_ACCEPTED | RELAY_IN_PLACE)) &&
	    atomic_compare_exchange_strong(&s->relay, &v, 0))
		syscall(SYS_futex, &s->relay, FUTEX_WAKE, INT_MAX, NULL, NULL,
			0);
}

int sdp_owner_relayed(int slot)
{
	struct owner_slot *s = slot_of(slot);

	return s && (atomic_load(&s->relay) & RELAY_ACCEPTED);
}

int sdp_owner_any_in_place(void)
{
	struct owner_region *r = __atomic_load_n(&region, __ATOMIC_ACQUIRE);

	return r && atomic_load_explicit(&r->in_place, memory_order_relaxed);
}

int sdp_owner_relayed_in_place(int slot)
{
	struct owner_slot *s = slot_of(slot);

	return s && (atomic_load_explicit(&s->relay, memory_order_acquire) &
		     RELAY_IN_PLACE);
}
