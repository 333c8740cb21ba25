/* SPDX-License-Identifier: MIT */
/*
 * owner.c — owner words shared by a process family (see owner.h).
 * Slot values: 0 free, OWNER_RELEASED nobody, else the owner's pid.
 */
#include "engine/owner.h"
#include "engine/atfork.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define OWNER_SLOTS (1u << 20)	/* 4 MiB of address space, touched lazily */
#define OWNER_RELEASED 0xffffffffu

struct owner_region {
	atomic_uint hint;
	atomic_uint slot[];
};

static struct owner_region *region;
static pthread_mutex_t region_lock = PTHREAD_MUTEX_INITIALIZER;
static pid_t me;

static void owner_atfork_child(void)
{
	me = getpid();
}

static struct owner_region *get_region(void)
{
	struct owner_region *r = __atomic_load_n(&region, __ATOMIC_ACQUIRE);
	void *p;

	if (r)
		return r;
	pthread_mutex_lock(&region_lock);
	if (!region) {
		p = mmap(NULL, sizeof(*r) + OWNER_SLOTS * sizeof(atomic_uint),
			 PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
			 -1, 0);
		if (p != MAP_FAILED) {
			me = getpid();
			sdp_atfork_add(SDP_ATFORK_INNER, NULL, NULL,
				       owner_atfork_child);
			__atomic_store_n(&region, p, __ATOMIC_RELEASE);
		}
	}
	r = region;
	pthread_mutex_unlock(&region_lock);
	return r;
}

int sdp_owner_alloc(void)
{
	struct owner_region *r = get_region();
	unsigned i, start, n;

	if (!r)
		return -1;
	start = atomic_fetch_add(&r->hint, 1) % OWNER_SLOTS;
	for (n = 0; n < OWNER_SLOTS; n++) {
		unsigned expect = 0;

		i = (start + n) % OWNER_SLOTS;
		if (atomic_compare_exchange_strong(&r->slot[i], &expect,
						   (unsigned)me)) {
			atomic_store(&r->hint, i + 1);
			return (int)i;
		}
	}
	return -1;
}

static int alive(unsigned pid)
{
	return kill((pid_t)pid, 0) == 0 || errno != ESRCH;
}

int sdp_owner_wait_released(int slot, unsigned wait_ms)
{
	struct timespec t0, t;
	useconds_t step_us = 20;
	unsigned v;

	if (slot < 0 || !region || !wait_ms)
		return 0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		v = atomic_load(&region->slot[slot]);
		if (v == (unsigned)me || v == OWNER_RELEASED || v == 0 ||
		    !alive(v))
			return 0;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000 +
		    (t.tv_nsec - t0.tv_nsec) / 1000000 >= (long)wait_ms)
			return -ETIMEDOUT;
		usleep(step_us);	/* EINTR: just look again */
		if (step_us < 1000)
			step_us *= 2;
	}
}

int sdp_owner_claim(int slot)
{
	unsigned v;

	if (slot < 0 || !region)
		return 0;
	v = atomic_load(&region->slot[slot]);
	if (v == (unsigned)me)
		return 0;
	for (;;) {
		if (v != OWNER_RELEASED && v != 0 && alive(v))
			return -EBADFD;
		if (atomic_compare_exchange_strong(&region->slot[slot], &v,
						   (unsigned)me))
			return 1;
		if (v == (unsigned)me)
			return 0;
	}
}

void sdp_owner_release(int slot)
{
	unsigned v = (unsigned)me;

	if (slot >= 0 && region)
		atomic_compare_exchange_strong(&region->slot[slot], &v,
					       OWNER_RELEASED);
}

void sdp_owner_free(int slot)
{
	unsigned v;

	if (slot < 0 || !region)
		return;
	v = atomic_load(&region->slot[slot]);
	if (v == (unsigned)me || v == OWNER_RELEASED)
		atomic_compare_exchange_strong(&region->slot[slot], &v, 0);
}

int sdp_owner_is_me(int slot)
{
	return slot < 0 || !region ||
	       atomic_load(&region->slot[slot]) == (unsigned)me;
}
