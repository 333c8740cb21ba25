/* SPDX-License-Identifier: MIT */
/*
 * test_wakeword.c — unit tests of the set wake words (transport/wakeword.c)
 * and of how the shm waker obeys them (APP_WORD in shm_appwake.c).
 *
 * The waker is driven directly: a control block in private memory stands
 * for the owner's segment, a socketpair for its readiness descriptor, and
 * the owner's wake page is mapped a second time the way a peer maps it.
 * Each check then says exactly whether the waker wrote a byte.  A forked
 * child checks that its sets get a page of its own.
 *
 * Output is TAP; exit 0 if all pass, 1 otherwise.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "transport/shm/shm.h"
#include "transport/wakeword.h"
#include "unit_tap.h"
#include "../busy_cpu.h"


/* Bytes waiting on fd (non-blocking), consumed. */
static int bytes_waiting(int fd)
{
	char buf[64];
	ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);

	return n > 0 ? (int)n : 0;
}

static void test_own_page(void)
{
	int h1 = sdp_wakeword_alloc(), h2 = sdp_wakeword_alloc(), gen, fd;

	CHECK(h1 >= 0);
	CHECK(h2 >= 0);
	CHECK(h1 != h2);
	CHECK(!sdp_wakeword_sleeping(h1));
	sdp_wakeword_sleep(h1, 1);
	CHECK(sdp_wakeword_sleeping(h1));
	CHECK(!sdp_wakeword_sleeping(h2));
	sdp_wakeword_sleep(h1, 1);	/* two threads on one set */
	sdp_wakeword_sleep(h1, -1);
	CHECK(sdp_wakeword_sleeping(h1));
	sdp_wakeword_sleep(h1, -1);
	CHECK(!sdp_wakeword_sleeping(h1));
	/* No handle: nothing to sleep on, nothing sleeps. */
	sdp_wakeword_sleep(-1, 1);
	CHECK(!sdp_wakeword_sleeping(-1));

	fd = sdp_wakeword_share(&gen, NULL, NULL);
	CHECK(fd >= 0);
	CHECK(sdp_wakeword_of_gen(h1, gen));
	CHECK(!sdp_wakeword_of_gen(h1, gen + 1));
	CHECK(!sdp_wakeword_of_gen(-1, gen));

	/* A freed slot comes back with nobody asleep on it. */
	sdp_wakeword_sleep(h2, 1);
	sdp_wakeword_free(h2);
	h2 = sdp_wakeword_alloc();
	CHECK(h2 >= 0);
	CHECK(!sdp_wakeword_sleeping(h2));
	sdp_wakeword_free(h1);
	sdp_wakeword_free(h2);

	/* All slots, then none: a set without one arms its connections one
	 * by one (epfast.c), so running out is not an error. */
	{
		static int hs[SDP_WAKEWORD_SLOTS];
		int n = 0;

		while (n < SDP_WAKEWORD_SLOTS && (hs[n] = sdp_wakeword_alloc()) >= 0)
			n++;
		CHECK_EQ(n, SDP_WAKEWORD_SLOTS);
		CHECK_EQ(sdp_wakeword_alloc(), -1);
		while (n-- > 0)
			sdp_wakeword_free(hs[n]);
	}
}

/* A peer maps the page read-only, and only a sealed page of the right size. */
static void test_peer_mapping(void)
{
	int gen, fd = sdp_wakeword_share(&gen, NULL, NULL), h = sdp_wakeword_alloc();
	const _Atomic uint64_t *p1, *p2, *w;
	void *rw;

	CHECK(fd >= 0 && h >= 0);
	p1 = sdp_wakeword_map_peer(fd);
	p2 = sdp_wakeword_map_peer(fd);
	CHECK(p1 != NULL);
	CHECK(p1 == p2);	/* one mapping per page, counted */
	w = sdp_wakeword_at(p1, (uint32_t)h % SDP_WAKEWORD_SLOTS);
	CHECK(w != NULL);
	CHECK(!(atomic_load(w) & SDP_WAKEWORD_SLEEPERS));
	sdp_wakeword_sleep(h, 1);
	CHECK(atomic_load(w) & SDP_WAKEWORD_SLEEPERS);	/* seen by the peer */
	sdp_wakeword_sleep(h, -1);
	CHECK(!(atomic_load(w) & SDP_WAKEWORD_SLEEPERS));
	CHECK(sdp_wakeword_at(p1, SDP_WAKEWORD_SLOTS) == NULL);
	CHECK(sdp_wakeword_at(NULL, 0) == NULL);

	/* Nobody but the owner may write it. */
	rw = mmap(NULL, SDP_WAKEWORD_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED,
		  fd, 0);
	CHECK(rw == MAP_FAILED);
	CHECK(write(fd, "x", 1) < 0);
	CHECK(ftruncate(fd, 4096) < 0);	/* nor shrink it under a peer */
	sdp_wakeword_unmap_peer(p2);
	sdp_wakeword_unmap_peer(p1);
	sdp_wakeword_free(h);

	/* Impostors: unsealed, the wrong size, not a file. */
	{
		int m = memfd_create("not-a-page", MFD_ALLOW_SEALING), sp[2];

		CHECK(m >= 0);
		CHECK(ftruncate(m, SDP_WAKEWORD_BYTES) == 0);
		CHECK(sdp_wakeword_map_peer(m) == NULL);	/* unsealed */
		CHECK(fcntl(m, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_SEAL) == 0);
		/* Sealed against shrinking but writable by its sender. */
		CHECK(sdp_wakeword_map_peer(m) == NULL);
		close(m);
		m = memfd_create("small", MFD_ALLOW_SEALING);
		CHECK(ftruncate(m, 4096) == 0);
		CHECK(fcntl(m, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW |
			    0x0010 /* F_SEAL_FUTURE_WRITE */ | F_SEAL_SEAL) == 0);
		CHECK(sdp_wakeword_map_peer(m) == NULL);	/* size */
		close(m);
		CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == 0);
		CHECK(sdp_wakeword_map_peer(sp[0]) == NULL);
		close(sp[0]);
		close(sp[1]);
	}
}

/* The waker (the peer's side of a solicited SEND) against APP_WORD. */
static void test_waker_obeys_word(void)
{
	struct shm_ctrl *c = calloc(1, sizeof(*c));
	int gen, fd = sdp_wakeword_share(&gen, NULL, NULL), h = sdp_wakeword_alloc(), sp[2];
	const _Atomic uint64_t *page;
	uint32_t published = 1;

	CHECK(c && fd >= 0 && h >= 0);
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == 0);
	page = sdp_wakeword_map_peer(fd);
	CHECK(page != NULL);
	atomic_store(&c->app_slot, (uint32_t)h % SDP_WAKEWORD_SLOTS);

	/* The set is awake: its thread will look; no byte, no doorbell. */
	atomic_store(&c->app_armed, APP_WORD);
	CHECK(sdp__shm_app_wake(c, sp[1], page, published));
	CHECK_EQ(bytes_waiting(sp[0]), 0);
	CHECK_EQ(atomic_load(&c->app_armed), APP_WORD);

	/* Asleep: one byte, and the arm is taken. */
	sdp_wakeword_sleep(h, 1);
	CHECK(sdp__shm_app_wake(c, sp[1], page, published));
	CHECK_EQ(bytes_waiting(sp[0]), 1);
	CHECK_EQ(atomic_load(&c->app_armed), APP_WRITTEN);

	/* Another connection of the same sleeping set (re-armed here): our
	 * byte already wakes that sleep. */
	atomic_store(&c->app_armed, APP_WORD);
	published++;
	CHECK(sdp__shm_app_wake(c, sp[1], page, published));
	CHECK_EQ(bytes_waiting(sp[0]), 0);
	CHECK_EQ(atomic_load(&c->app_armed), APP_WORD);

	/* The set woke and sleeps again: a new sleep, a new byte. */
	sdp_wakeword_sleep(h, -1);
	sdp_wakeword_sleep(h, 1);
	published++;
	CHECK(sdp__shm_app_wake(c, sp[1], page, published));
	CHECK_EQ(bytes_waiting(sp[0]), 1);

	/* The owner already took everything published: a byte would
	 * announce nothing (and an application woken to read nothing gets
	 * EAGAIN).  A new sleep, so the dedup is not what stops it. */
	sdp_wakeword_sleep(h, -1);
	sdp_wakeword_sleep(h, 1);
	atomic_store(&c->app_armed, APP_WORD);
	atomic_store(&c->cq_cons, published);
	CHECK(sdp__shm_app_wake(c, sp[1], page, published));
	CHECK_EQ(bytes_waiting(sp[0]), 0);
	CHECK_EQ(atomic_load(&c->app_armed), APP_WORD);
	published++;

	/* A hostile owner's slot past the page, or no page mapped: the
	 * word cannot be read, so wake as for a plain arm. */
	atomic_store(&c->app_slot, SDP_WAKEWORD_SLOTS + 7);
	CHECK(sdp__shm_app_wake(c, sp[1], page, published));
	CHECK_EQ(bytes_waiting(sp[0]), 1);
	atomic_store(&c->app_armed, APP_WORD);
	atomic_store(&c->app_slot, (uint32_t)h % SDP_WAKEWORD_SLOTS);
	published++;
	CHECK(sdp__shm_app_wake(c, sp[1], NULL, published));
	CHECK_EQ(bytes_waiting(sp[0]), 1);

	/* Plain quiet stays quiet whatever the word says. */
	atomic_store(&c->app_armed, APP_QUIET);
	sdp_wakeword_sleep(h, -1);
	sdp_wakeword_sleep(h, 1);
	published++;
	CHECK(sdp__shm_app_wake(c, sp[1], page, published));
	CHECK_EQ(bytes_waiting(sp[0]), 0);

	sdp_wakeword_sleep(h, -1);
	sdp_wakeword_unmap_peer(page);
	sdp_wakeword_free(h);
	close(sp[0]);
	close(sp[1]);
	free(c);
}

/* After fork the child's sets must not share slots with the parent's: its
 * handles name a page of its own, and the parent's handles are inert. */
static void test_fork_own_page(void)
{
	int parent_h = sdp_wakeword_alloc(), pgen, st = 0;
	pid_t pid;

	CHECK(parent_h >= 0);
	CHECK(sdp_wakeword_share(&pgen, NULL, NULL) >= 0);
	pid = fork();
	if (pid == 0) {
		int h = sdp_wakeword_alloc(), cgen, bad = 0;

		bad |= h < 0;
		bad |= sdp_wakeword_share(&cgen, NULL, NULL) < 0;
		bad |= cgen == pgen;
		bad |= sdp_wakeword_of_gen(h, pgen);
		sdp_wakeword_sleep(parent_h, 1);	/* not ours: no-op */
		bad |= sdp_wakeword_sleeping(parent_h);
		sdp_wakeword_sleep(h, 1);
		bad |= !sdp_wakeword_sleeping(h);
		_exit(bad);
	}
	CHECK(pid > 0);
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	/* The child's sleep left the parent's page alone. */
	CHECK(!sdp_wakeword_sleeping(parent_h));
	sdp_wakeword_free(parent_h);
}

/* A waker that died (or was never run again) between taking the arm and
 * writing its byte leaves WRITING for good.  The owner's disarm waits for
 * it, but boundedly in time: beside a busy CPU every yield hands that CPU
 * to the busy process for a slice, so a bound counted in yields became
 * tens of seconds of a stalled connection. */
static void test_disarm_dead_writer_bounded(void)
{
	struct shm_qp *qp = calloc(1, sizeof(*qp));
	struct shm_ctrl *c = calloc(1, sizeof(*c));
	struct timespec t0, t1;
	double secs;
	pid_t hog;
	int r;

	CHECK(qp && c);
	qp->me.ctrl = c;
	hog = busy_cpu_start();
	CHECK(hog > 0);
	atomic_store(&c->app_armed, APP_WRITING);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	r = sdp__shm_app_arm((struct sdp_qp *)qp, 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	busy_cpu_stop(hog);
	secs = (double)(t1.tv_sec - t0.tv_sec) +
	       (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	CHECK_EQ(r, 1);		/* a byte may be queued: drain */
	CHECK_EQ(atomic_load(&c->app_armed), APP_IDLE);
	if (secs >= 2.0)
		fprintf(stderr, "# disarm waited %.1f s for a dead writer\n",
			secs);
	CHECK(secs < 2.0);
	free(c);
	free(qp);
}

int main(void)
{
	static const struct unit_test tests[] = {
		{ test_own_page, "own page: slots, sleepers, generations, exhaustion" },
		{ test_peer_mapping, "peer mapping: read-only, shared, impostors refused" },
		{ test_waker_obeys_word, "shm waker: APP_WORD wakes only a sleeping set, once per sleep" },
		{ test_fork_own_page, "fork: the child's sets get a page of their own" },
		{ test_disarm_dead_writer_bounded, "shm disarm: a dead writer holds it for a bounded time, beside a busy CPU" },
	};
	signal(SIGPIPE, SIG_IGN);
	return unit_run_all(tests, (int)(sizeof(tests) / sizeof(tests[0])));
}
