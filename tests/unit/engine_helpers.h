/* SPDX-License-Identifier: MIT */
/*
 * engine_helpers.h — shared helpers of the engine unit tests
 * (tests/unit/test_engine*.c): TAP runner and CHECK macros, loop-transport
 * setup, connected pairs, a deterministic PRNG / data stream, bounded waits.
 *
 * Header-only (static functions); every test binary includes it once.
 * Each binary must call eh_setup_env() first thing in main(), before anything
 * reaches sdp_config_init(): the engine reads SDP_* once.
 *
 * No sleep() is used for synchronisation: blocking engine calls carry
 * timeouts, and where state has to be observed from outside, eh_poll_until()
 * polls with a generous hang guard.
 */
#ifndef SDP_TEST_ENGINE_HELPERS_H
#define SDP_TEST_ENGINE_HELPERS_H

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/config.h"
#include "engine/conn.h"
#include "engine/listener.h"
#include "engine/progress.h"
#include "engine/zcopy.h"
#include "transport/multi.h"
#include "transport/transport.h"
#include "wire/wire.h"

/* Not every binary uses every helper. */
#pragma GCC diagnostic ignored "-Wunused-function"

/* ---- TAP and checks ------------------------------------------------------ */

/* g_checks_failed, CHECK and CHECK_EQ. */
#include "loop_transport.h"
#include "unit_tap.h"

static int g_tests_failed;
static int g_test_no;
static const char *g_tap_prefix = "";	/* "# " in a forked sub-run */

/* Compare as unsigned 64-bit (byte counts, checksums). */
#define CHECK_EQ_U(a, b)                                                     \
	do {                                                                 \
		unsigned long long a_ = (unsigned long long)(a);             \
		unsigned long long b_ = (unsigned long long)(b);             \
		if (a_ != b_) {                                              \
			printf("#   %s:%d: CHECK_EQ_U(%s, %s): %llu (0x%llx) " \
			       "!= %llu (0x%llx)\n", __FILE__, __LINE__, #a, \
			       #b, a_, a_, b_, b_);                          \
			fflush(stdout);                                      \
			g_checks_failed++;                                   \
		}                                                            \
	} while (0)

#define CHECK_OP(a, op, b)                                                   \
	do {                                                                 \
		long long a_ = (long long)(a);                               \
		long long b_ = (long long)(b);                               \
		if (!(a_ op b_)) {                                           \
			printf("#   %s:%d: CHECK(%s %s %s): %lld vs %lld\n", \
			       __FILE__, __LINE__, #a, #op, #b, a_, b_);     \
			fflush(stdout);                                      \
			g_checks_failed++;                                   \
		}                                                            \
	} while (0)

/* States and reasons by name, so a failure is readable. */
#define CHECK_STATE(c, want)                                                 \
	do {                                                                 \
		enum sdp_state s_ = eh_state(c);                             \
		if (s_ != (want)) {                                          \
			printf("#   %s:%d: state of %s: %s, want %s\n",      \
			       __FILE__, __LINE__, #c, sdp_state_name(s_),   \
			       sdp_state_name(want));                        \
			fflush(stdout);                                      \
			g_checks_failed++;                                   \
		}                                                            \
	} while (0)

/* Fatal for the current test: stop it (the runner reports "not ok"). */
#define REQUIRE(c)                                                           \
	do {                                                                 \
		if (!(c)) {                                                  \
			printf("#   %s:%d: REQUIRE(%s) failed\n", __FILE__,  \
			       __LINE__, #c);                                \
			fflush(stdout);                                      \
			g_checks_failed++;                                   \
			return;                                              \
		}                                                            \
	} while (0)

#define REQUIRE_OK(expr)                                                     \
	do {                                                                 \
		long long r_ = (long long)(expr);                            \
		if (r_ < 0) {                                                \
			printf("#   %s:%d: %s = %lld (%s)\n", __FILE__,      \
			       __LINE__, #expr, r_, strerror((int)-r_));     \
			fflush(stdout);                                      \
			g_checks_failed++;                                   \
			return;                                              \
		}                                                            \
	} while (0)

struct eh_test {
	const char *name;
	void (*fn)(void);
};

static void eh_run(const struct eh_test *t)
{
	g_checks_failed = 0;
	t->fn();
	g_test_no++;
	if (g_checks_failed) {
		printf("%snot ok %d - %s: %d check(s) failed\n", g_tap_prefix,
		       g_test_no, t->name, g_checks_failed);
		g_tests_failed++;
	} else {
		printf("%sok %d - %s\n", g_tap_prefix, g_test_no, t->name);
	}
	fflush(stdout);
}

/* Run every test of a NULL-terminated table. */
static void eh_run_all(const struct eh_test *tests)
{
	for (const struct eh_test *t = tests; t->name; t++)
		eh_run(t);
}

/* Report an externally decided result (e.g. a forked sub-run). */
static void eh_report(const char *name, int ok, const char *detail)
{
	g_test_no++;
	if (ok) {
		printf("%sok %d - %s\n", g_tap_prefix, g_test_no, name);
	} else {
		printf("%snot ok %d - %s: %s\n", g_tap_prefix, g_test_no, name,
		       detail);
		g_tests_failed++;
	}
	fflush(stdout);
}

/* Print the plan; the exit status. */
static int eh_done(void)
{
	printf("%s1..%d\n", g_tap_prefix, g_test_no);
	fflush(stdout);
	return g_tests_failed ? 1 : 0;
}

/* ---- environment --------------------------------------------------------- */

/* Must run before anything calls sdp_config_init(). */
static void eh_setup_env(void)
{
	/* Errors the tests provoke on purpose would only be noise. */
	if (!getenv("SDP_LOG"))
		setenv("SDP_LOG", "0", 1);
	sdp_config_init();
	sdp_tp_override(&sdp_loop_transport);
}

/* Timeouts are multiplied under sanitizers (tests/run.sh exports this). */
static int eh_ms(int ms)
{
	const char *m = getenv("SDP_TEST_TIMEOUT_MULT");
	int k = m ? atoi(m) : 1;

	return ms * (k > 0 ? k : 1);
}

static const struct sdp_transport_ops *eh_ops(void)
{
	return sdp_loop_transport.ops;
}

static uint64_t eh_now_ms(void)
{
	return sdp_now_ns() / 1000000ull;
}

/* Short pause inside a bounded polling loop (never for ordering). */
static void eh_pause(void)
{
	struct timespec ts = { 0, 200 * 1000 };

	nanosleep(&ts, NULL);
}

/* Poll `cond(arg)` until true or `ms` pass.  Returns 1 if it became true. */
static int eh_poll_until(int (*cond)(void *), void *arg, int ms)
{
	uint64_t end = eh_now_ms() + (uint64_t)eh_ms(ms);

	for (;;) {
		if (cond(arg))
			return 1;
		if (eh_now_ms() >= end)
			return 0;
		eh_pause();
	}
}

/* ---- locked accessors ---------------------------------------------------- */

static enum sdp_state eh_state(struct sdp_conn *c)
{
	enum sdp_state s;

	pthread_mutex_lock(&c->lock);
	s = c->state;
	pthread_mutex_unlock(&c->lock);
	return s;
}

static enum sdp_reason eh_reason(struct sdp_conn *c)
{
	enum sdp_reason r;

	pthread_mutex_lock(&c->lock);
	r = c->reason;
	pthread_mutex_unlock(&c->lock);
	return r;
}

static struct sdp_conn_stats eh_stats(struct sdp_conn *c)
{
	struct sdp_conn_stats s;

	pthread_mutex_lock(&c->lock);
	s = c->stats;
	pthread_mutex_unlock(&c->lock);
	return s;
}

/* Run one progress step (as the progress thread would). */
static void eh_progress(struct sdp_conn *c)
{
	pthread_mutex_lock(&c->lock);
	sdp_conn_progress_locked(c);
	pthread_mutex_unlock(&c->lock);
}

/* One diagnostic line with the connection's state (for failures). */
static void eh_dump(const char *tag, struct sdp_conn *c)
{
	pthread_mutex_lock(&c->lock);
	printf("#   %s: %s err %d reason \"%s\" credits %d posted %u/%u "
	       "rx_bytes %llu rxq %u txq %u rx_mseq %u tx_next %u adv %u/%u "
	       "nagle %d/%llu msgs %llu/%llu\n", tag, sdp_state_name(c->state),
	       c->err, sdp_reason_str(c->reason), c->tx_credits, c->posted,
	       c->nbufs, (unsigned long long)c->rx_bytes, c->rxq_count,
	       c->txq_len, c->rx_mseq, c->tx_next_mseq, c->adv_bufs,
	       c->adv_mseq_ack, c->nagle_inflight,
	       (unsigned long long)c->nagle_deadline_ns,
	       (unsigned long long)c->stats.msgs_sent,
	       (unsigned long long)c->stats.msgs_rcvd);
	pthread_mutex_unlock(&c->lock);
	fflush(stdout);
}

#define CHECK_REASON(c, want)                                                \
	do {                                                                 \
		enum sdp_reason r_ = eh_reason(c);                           \
		if (r_ != (want)) {                                          \
			printf("#   %s:%d: reason of %s: \"%s\", want \"%s\"\n", \
			       __FILE__, __LINE__, #c, sdp_reason_str(r_),   \
			       sdp_reason_str(want));                        \
			fflush(stdout);                                      \
			g_checks_failed++;                                   \
		}                                                            \
	} while (0)

/* ---- listeners and pairs -------------------------------------------------- */

struct eh_server {
	struct sdp_listen *l;
	struct sockaddr_in addr;	/* where it listens (real port) */
};

static int eh_listen(struct eh_server *s)
{
	struct sockaddr_in sin;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	struct sdp_listener *tl;
	int r;

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin.sin_port = 0;
	r = eh_ops()->bind((struct sockaddr *)&sin, sizeof(sin), &tl);
	if (r < 0)
		return r;
	r = eh_ops()->bound_addr(tl, &ss, &sl);
	if (r < 0 || ss.ss_family != AF_INET) {
		eh_ops()->close_listener(tl);
		return r < 0 ? r : -EAFNOSUPPORT;
	}
	memcpy(&s->addr, &ss, sizeof(s->addr));
	if (s->addr.sin_port == 0) {
		eh_ops()->close_listener(tl);
		return -EADDRNOTAVAIL;
	}
	r = sdp_listen_create(tl, 16, NULL, &s->l);
	if (r < 0)
		eh_ops()->close_listener(tl);
	return r;
}

static void eh_unlisten(struct eh_server *s)
{
	if (s->l)
		sdp_listen_close(s->l);
	s->l = NULL;
}

/* Active open + passive accept.  Returns 0 or -errno (then nothing leaks). */
static int eh_connect_pair(struct eh_server *s, struct sdp_conn **cli,
			   struct sdp_conn **srv)
{
	struct sdp_conn *c;
	int r;

	*cli = *srv = NULL;
	r = sdp_conn_alloc(&c);
	if (r < 0)
		return r;
	r = sdp_conn_connect(c, NULL, (struct sockaddr *)&s->addr,
			     sizeof(s->addr));
	if (r == 0)
		r = sdp_conn_wait_connected(c, eh_ms(10000));
	if (r < 0) {
		sdp_conn_close(c, 1);
		return r;
	}
	r = sdp_listen_accept(s->l, 0, eh_ms(10000), srv);
	if (r < 0) {
		sdp_conn_close(c, 1);
		return r;
	}
	*cli = c;
	return 0;
}

/* ---- I/O helpers ---------------------------------------------------------- */

static ssize_t eh_send(struct sdp_conn *c, const void *p, size_t n, int flags)
{
	struct iovec iov = { (void *)p, n };

	return sdp_conn_send(c, &iov, 1, flags, 0, eh_ms(10000));
}

static ssize_t eh_send_nb(struct sdp_conn *c, const void *p, size_t n)
{
	struct iovec iov = { (void *)p, n };

	return sdp_conn_send(c, &iov, 1, 0, SDP_IO_NONBLOCK, 0);
}

static ssize_t eh_recv(struct sdp_conn *c, void *p, size_t n, int flags)
{
	struct iovec iov = { p, n };

	return sdp_conn_recv(c, &iov, 1, flags, 0, eh_ms(10000));
}

/* Receive exactly n bytes (or stop at EOF / error).  Returns bytes or -errno. */
static ssize_t eh_recv_all(struct sdp_conn *c, void *p, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = eh_recv(c, (uint8_t *)p + got, n - got, 0);

		if (r < 0)
			return got ? (ssize_t)got : r;
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

/* ---- deterministic data --------------------------------------------------- */

static uint64_t eh_splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/* Byte `off` of the stream named `seed`: no short period, so a duplicated,
 * dropped or reordered segment shows. */
static uint8_t eh_stream_byte(uint64_t seed, uint64_t off)
{
	uint64_t s = seed ^ ((off >> 3) * 0xD6E8FEB86659FD93ull);

	return (uint8_t)(eh_splitmix(&s) >> ((off & 7) * 8));
}

static void eh_stream_fill(uint64_t seed, uint64_t off, uint8_t *p, size_t n)
{
	size_t i = 0;

	while (i < n) {
		uint64_t o = off + i;
		uint64_t s = seed ^ ((o >> 3) * 0xD6E8FEB86659FD93ull);
		uint64_t w = eh_splitmix(&s);

		for (unsigned b = (unsigned)(o & 7); b < 8 && i < n; b++, i++)
			p[i] = (uint8_t)(w >> (b * 8));
	}
}

/* Running checksum (FNV-1a 64). */
static uint64_t eh_csum(uint64_t h, const uint8_t *p, size_t n)
{
	if (!h)
		h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

/* ---- connection registry (leak check) ------------------------------------- */

static void eh_count_cb(struct sdp_conn *c, void *arg)
{
	(void)c;
	(*(int *)arg)++;
}

/* Connections the progress thread still holds (closed ones must go). */
static int eh_live_conns(void)
{
	int n = 0;

	sdp_progress_foreach(eh_count_cb, &n);
	return n;
}

static int eh_no_conns(void *arg)
{
	(void)arg;
	return eh_live_conns() == 0;
}

/* After every connection was closed: all must be released, in bounded time. */
#define CHECK_ALL_RELEASED()                                                 \
	do {                                                                 \
		if (!eh_poll_until(eh_no_conns, NULL, 5000)) {               \
			printf("#   %s:%d: %d closed connection(s) never "   \
			       "released by the progress thread\n",          \
			       __FILE__, __LINE__, eh_live_conns());         \
			fflush(stdout);                                      \
			g_checks_failed++;                                   \
		}                                                            \
	} while (0)

/* Join with a hang guard; returns 0 or ETIMEDOUT (thread left running). */
static int eh_join(pthread_t th, void **ret, int ms)
{
	struct timespec ts;
	uint64_t ns;

	clock_gettime(CLOCK_REALTIME, &ts);
	ns = (uint64_t)ts.tv_nsec + (uint64_t)eh_ms(ms) * 1000000ull;
	ts.tv_sec += (time_t)(ns / 1000000000ull);
	ts.tv_nsec = (long)(ns % 1000000000ull);
	return pthread_timedjoin_np(th, ret, &ts);
}

/* A stream job for a thread: a writer sends `rounds` messages of `n` bytes
 * filled from seed_out + round; a checker reads them back in pieces of at
 * most `piece` bytes (0: whole) and compares with seed_in + round. */
struct eh_duplex {
	struct sdp_conn *c;
	size_t n, piece;
	int rounds;
	uint64_t seed_out, seed_in;
	int ok;
};

static void *eh_writer_main(void *arg)
{
	struct eh_duplex *d = arg;
	uint8_t *out = malloc(d->n);

	d->ok = !!out;
	for (int i = 0; d->ok && i < d->rounds; i++) {
		eh_stream_fill(d->seed_out + i, 0, out, d->n);
		if (eh_send(d->c, out, d->n, 0) != (ssize_t)d->n)
			d->ok = 0;
	}
	free(out);
	return NULL;
}

static void *eh_checker_main(void *arg)
{
	struct eh_duplex *d = arg;
	uint8_t *in = malloc(d->n), *want = malloc(d->n);

	d->ok = in && want;
	for (int i = 0; d->ok && i < d->rounds; i++) {
		size_t got = 0;

		eh_stream_fill(d->seed_in + i, 0, want, d->n);
		while (got < d->n) {
			size_t k = d->n - got;
			ssize_t r;

			if (d->piece && k > d->piece)
				k = d->piece;
			r = eh_recv(d->c, in + got, k, 0);
			if (r <= 0) {
				d->ok = 0;
				break;
			}
			got += (size_t)r;
		}
		if (d->ok && memcmp(in, want, d->n))
			d->ok = 0;
	}
	free(in);
	free(want);
	return NULL;
}

/* ---- ZCopy knobs shared by the ZCopy tests ------------------------------------ */

/* Per-socket threshold, as setsockopt(SDP_ZCOPY_THRESH) would set it. */
static __attribute__((unused)) void eh_zc_thresh(struct sdp_conn *c, int v)
{
	pthread_mutex_lock(&c->lock);
	sdp_zcopy_set_thresh_locked(c, v);
	pthread_mutex_unlock(&c->lock);
}

/* Pretend a blocking recv() is (delta 1) or is no longer (-1) in
 * progress, so that an arriving advertisement is held, not declined. */
static __attribute__((unused)) void eh_zc_fake_reader(struct sdp_conn *c,
						      int delta)
{
	pthread_mutex_lock(&c->lock);
	c->zc_readers += (uint32_t)delta;
	pthread_mutex_unlock(&c->lock);
}

#endif /* SDP_TEST_ENGINE_HELPERS_H */
