/* SPDX-License-Identifier: MIT */
/*
 * test_engine_close.c — how SDP connections end, over the "loop" transport:
 * half-close (DisConn after the data, EOF, CLOSE_WAIT, TIME_WAIT), abortive
 * close (AbortConn -> ECONNRESET at the peer), close with unread data
 * (resets the peer, like TCP), the peer's QP dying under blocked readers and
 * writers, and the release of every closed connection by the progress thread.
 */
#include "engine_helpers.h"

/* ---- 5. half-close -------------------------------------------------------- */

static void test_half_close(void)
{
	struct eh_server s = { 0 };
	struct sdp_conn *cli, *srv;
	char buf[64];

	REQUIRE_OK(eh_listen(&s));
	REQUIRE_OK(eh_connect_pair(&s, &cli, &srv));

	CHECK_EQ(eh_send(cli, "request", 7, 0), 7);
	CHECK_EQ(sdp_conn_shutdown(cli, SHUT_WR), 0);
	CHECK_STATE(cli, SDP_ST_FIN_WAIT);
	/* Writing after SHUT_WR fails. */
	CHECK_EQ(eh_send(cli, "x", 1, 0), -EPIPE);

	/* The server reads the data, then EOF (DisConn came after it). */
	memset(buf, 0, sizeof(buf));
	CHECK_EQ(eh_recv_all(srv, buf, 7), 7);
	CHECK(memcmp(buf, "request", 7) == 0);
	CHECK_EQ(eh_recv(srv, buf, sizeof(buf), 0), 0);
	CHECK_EQ(eh_recv(srv, buf, sizeof(buf), 0), 0);	/* EOF sticks */
	CHECK_STATE(srv, SDP_ST_CLOSE_WAIT);

	/* The other half still works. */
	CHECK_EQ(eh_send(srv, "response", 8, 0), 8);
	memset(buf, 0, sizeof(buf));
	CHECK_EQ(eh_recv_all(cli, buf, 8), 8);
	CHECK(memcmp(buf, "response", 8) == 0);
	CHECK_STATE(cli, SDP_ST_FIN_WAIT);

	CHECK_EQ(sdp_conn_shutdown(srv, SHUT_WR), 0);
	CHECK_EQ(eh_recv(cli, buf, sizeof(buf), 0), 0);
	CHECK_STATE(cli, SDP_ST_TIME_WAIT);
	CHECK_STATE(srv, SDP_ST_TIME_WAIT);
	CHECK_REASON(cli, SDP_REASON_NONE);
	CHECK_REASON(srv, SDP_REASON_NONE);
	CHECK_EQ(eh_send(srv, "x", 1, 0), -EPIPE);

	sdp_conn_close(cli, 0);
	sdp_conn_close(srv, 0);
	eh_unlisten(&s);
	CHECK_ALL_RELEASED();
}

/* Graceful close() with queued data: the peer gets all of it, then EOF. */
static void test_close_flushes(void)
{
	struct eh_server s = { 0 };
	struct sdp_conn *cli, *srv;
	uint8_t *out, *in;
	size_t n = 300000;	/* more than credits + one send queue */
	ssize_t r, sent = 0;

	REQUIRE_OK(eh_listen(&s));
	REQUIRE_OK(eh_connect_pair(&s, &cli, &srv));
	out = malloc(n);
	in = malloc(n + 1);
	REQUIRE(out && in);
	eh_stream_fill(9, 0, out, n);
	/* Non-blocking: whatever fits (credits and the queue). */
	while ((size_t)sent < n) {
		r = eh_send_nb(cli, out + sent, n - (size_t)sent);
		if (r < 0)
			break;
		sent += r;
	}
	CHECK_OP(sent, >, 0);
	sdp_conn_close(cli, 0);		/* data still queued */
	r = eh_recv_all(srv, in, n + 1);
	CHECK_EQ(r, sent);
	if (r > 0)
		CHECK(memcmp(in, out, (size_t)r) == 0);
	CHECK_STATE(srv, SDP_ST_CLOSE_WAIT);
	CHECK_REASON(srv, SDP_REASON_NONE);
	sdp_conn_close(srv, 0);
	free(out);
	free(in);
	eh_unlisten(&s);
	CHECK_ALL_RELEASED();
}

/* ---- 6. abort --------------------------------------------------------------- */

struct blocked_io {
	struct sdp_conn *c;
	int send;		/* 1: send until error, 0: recv until error */
	atomic_int started;
	ssize_t last;		/* the final (negative or 0) return */
	uint64_t bytes;
	uint64_t ended_ms;
};

static void *blocked_io_main(void *arg)
{
	struct blocked_io *b = arg;
	static uint8_t junk[65536];
	uint8_t buf[4096];
	ssize_t r;

	atomic_store(&b->started, 1);
	for (;;) {
		if (b->send)
			r = sdp_conn_send(b->c, &(struct iovec){ junk, sizeof(junk) },
					  1, 0, 0, eh_ms(20000));
		else
			r = sdp_conn_recv(b->c, &(struct iovec){ buf, sizeof(buf) },
					  1, 0, 0, eh_ms(20000));
		if (r <= 0)
			break;
		b->bytes += (uint64_t)r;
	}
	b->last = r;
	b->ended_ms = eh_now_ms();
	return NULL;
}

static int started(void *arg)
{
	return atomic_load(&((struct blocked_io *)arg)->started);
}

static int sender_stuck(void *arg)
{
	struct sdp_conn *c = arg;
	int stuck;

	pthread_mutex_lock(&c->lock);
	stuck = c->txq_len >= c->sndbuf && c->tx_credits < 2;
	pthread_mutex_unlock(&c->lock);
	return stuck;
}

static void test_abort(void)
{
	struct eh_server s = { 0 };
	struct sdp_conn *cli, *srv;
	struct blocked_io b;
	pthread_t th;
	char buf[8];

	REQUIRE_OK(eh_listen(&s));

	/* close(abort): the peer's blocked recv fails with ECONNRESET. */
	REQUIRE_OK(eh_connect_pair(&s, &cli, &srv));
	memset(&b, 0, sizeof(b));
	b.c = srv;
	REQUIRE(pthread_create(&th, NULL, blocked_io_main, &b) == 0);
	CHECK(eh_poll_until(started, &b, 5000));
	sdp_conn_close(cli, 1);
	REQUIRE(eh_join(th, NULL, 10000) == 0);
	CHECK_EQ(b.last, -ECONNRESET);
	CHECK_EQ(b.bytes, 0);
	CHECK_STATE(srv, SDP_ST_RESET);
	{
		enum sdp_reason why = eh_reason(srv);

		if (why != SDP_REASON_PEER_ABORT && why != SDP_REASON_PEER_GONE) {
			printf("#   reason \"%s\"\n", sdp_reason_str(why));
			g_checks_failed++;
		}
		/* AbortConn travels before the QP goes down. */
		CHECK_REASON(srv, SDP_REASON_PEER_ABORT);
	}
	/* Reported once, as TCP: then EPIPE for writes, EOF for reads. */
	CHECK_EQ(eh_send(srv, "x", 1, 0), -EPIPE);
	CHECK_EQ(eh_recv(srv, buf, 1, 0), 0);
	sdp_conn_close(srv, 0);

	/* Graceful close with unread data resets the peer too. */
	REQUIRE_OK(eh_connect_pair(&s, &cli, &srv));
	CHECK_EQ(eh_send(srv, "unread", 6, 0), 6);
	CHECK_EQ(eh_recv(cli, buf, 1, MSG_PEEK), 1);	/* it has arrived */
	memset(&b, 0, sizeof(b));
	b.c = srv;
	REQUIRE(pthread_create(&th, NULL, blocked_io_main, &b) == 0);
	CHECK(eh_poll_until(started, &b, 5000));
	sdp_conn_close(cli, 0);
	REQUIRE(eh_join(th, NULL, 10000) == 0);
	CHECK_EQ(b.last, -ECONNRESET);
	CHECK_STATE(srv, SDP_ST_RESET);
	CHECK_REASON(srv, SDP_REASON_PEER_ABORT);
	sdp_conn_close(srv, 0);

	/* Abort of a connection whose peer is blocked in send. */
	REQUIRE_OK(eh_connect_pair(&s, &cli, &srv));
	memset(&b, 0, sizeof(b));
	b.c = srv;
	b.send = 1;
	REQUIRE(pthread_create(&th, NULL, blocked_io_main, &b) == 0);
	CHECK(eh_poll_until(sender_stuck, srv, 5000));
	sdp_conn_close(cli, 1);
	REQUIRE(eh_join(th, NULL, 10000) == 0);
	CHECK_EQ(b.last, -ECONNRESET);
	CHECK_OP(b.bytes, >, 0);
	CHECK_STATE(srv, SDP_ST_RESET);
	sdp_conn_close(srv, 0);

	eh_unlisten(&s);
	CHECK_ALL_RELEASED();
}

/* ---- 7. peer gone ------------------------------------------------------------ */

static void test_peer_gone(void)
{
	struct eh_server s = { 0 };
	struct sdp_conn *cli, *srv;
	struct blocked_io rx, tx;
	pthread_t th_rx, th_tx;
	uint64_t t0;

	REQUIRE_OK(eh_listen(&s));
	REQUIRE_OK(eh_connect_pair(&s, &cli, &srv));

	/* Server: one thread blocked in recv (nothing comes), one blocked in
	 * send (the client never reads). */
	memset(&rx, 0, sizeof(rx));
	memset(&tx, 0, sizeof(tx));
	rx.c = tx.c = srv;
	tx.send = 1;
	REQUIRE(pthread_create(&th_rx, NULL, blocked_io_main, &rx) == 0);
	REQUIRE(pthread_create(&th_tx, NULL, blocked_io_main, &tx) == 0);
	CHECK(eh_poll_until(started, &rx, 5000));
	CHECK(eh_poll_until(sender_stuck, srv, 5000));

	/* The link dies under the client's QP. */
	t0 = eh_now_ms();
	pthread_mutex_lock(&cli->lock);
	sdp_loop_qp_error(cli->qp);
	pthread_mutex_unlock(&cli->lock);
	REQUIRE(eh_join(th_rx, NULL, 10000) == 0);
	REQUIRE(eh_join(th_tx, NULL, 10000) == 0);
	/* The reset is reported once: to one of the two blocked calls; the
	 * other sees what follows a reported reset (EOF, EPIPE). */
	if (!((rx.last == -ECONNRESET && tx.last == -EPIPE) ||
	      (rx.last == 0 && tx.last == -ECONNRESET))) {
		printf("#   blocked recv -> %zd, blocked send -> %zd\n",
		       rx.last, tx.last);
		g_checks_failed++;
	}
	CHECK_OP(tx.bytes, >, 0);
	/* Promptly: woken by the flush, not by the 20 s I/O timeout. */
	CHECK_OP(rx.ended_ms - t0, <, eh_ms(5000));
	CHECK_OP(tx.ended_ms - t0, <, eh_ms(5000));
	CHECK_STATE(srv, SDP_ST_RESET);
	{
		enum sdp_reason why = eh_reason(srv);

		if (why != SDP_REASON_PEER_GONE && why != SDP_REASON_TRANSPORT) {
			printf("#   server reason \"%s\"\n", sdp_reason_str(why));
			g_checks_failed++;
		}
	}
	/* The client's own I/O fails too (after the data that had arrived). */
	{
		char buf[4096];
		ssize_t r;
		uint64_t got = 0;

		while ((r = eh_recv(cli, buf, sizeof(buf), 0)) > 0)
			got += (uint64_t)r;
		CHECK_EQ(r, -ECONNRESET);
		CHECK_OP(got, <=, tx.bytes);
		CHECK_EQ(eh_send(cli, "x", 1, 0), -EPIPE);
	}
	CHECK_STATE(cli, SDP_ST_RESET);
	sdp_conn_close(cli, 0);
	sdp_conn_close(srv, 0);

	/* Peer gone while idle: the next recv reports it (PEER_GONE). */
	REQUIRE_OK(eh_connect_pair(&s, &cli, &srv));
	pthread_mutex_lock(&srv->lock);
	sdp_loop_qp_error(srv->qp);
	pthread_mutex_unlock(&srv->lock);
	{
		char c;

		CHECK_EQ(eh_recv(cli, &c, 1, 0), -ECONNRESET);
	}
	CHECK_REASON(cli, SDP_REASON_PEER_GONE);
	sdp_conn_close(cli, 0);
	sdp_conn_close(srv, 0);

	/* Peer finished (DisConn) and then vanished: EOF, not an error. */
	REQUIRE_OK(eh_connect_pair(&s, &cli, &srv));
	CHECK_EQ(eh_send(srv, "bye", 3, 0), 3);
	CHECK_EQ(sdp_conn_shutdown(srv, SHUT_WR), 0);
	{
		char buf[8];

		CHECK_EQ(eh_recv_all(cli, buf, 3), 3);
		CHECK_EQ(eh_recv(cli, buf, 1, 0), 0);
		pthread_mutex_lock(&srv->lock);
		sdp_loop_qp_error(srv->qp);
		pthread_mutex_unlock(&srv->lock);
		CHECK_EQ(eh_recv(cli, buf, 1, 0), 0);
	}
	sdp_conn_close(cli, 0);
	sdp_conn_close(srv, 0);

	eh_unlisten(&s);
	CHECK_ALL_RELEASED();
}

/* Closing a listener resets connections it queued but never handed out. */
static void test_listener_close_resets_queued(void)
{
	struct eh_server s = { 0 };
	struct sdp_conn *c;
	char b;
	int r;

	REQUIRE_OK(eh_listen(&s));
	REQUIRE_OK(sdp_conn_alloc(&c));
	r = sdp_conn_connect(c, NULL, (struct sockaddr *)&s.addr, sizeof(s.addr));
	if (r == 0)
		r = sdp_conn_wait_connected(c, eh_ms(10000));
	CHECK_EQ(r, 0);
	eh_unlisten(&s);	/* never accepted */
	CHECK_EQ(eh_recv(c, &b, 1, 0), -ECONNRESET);
	CHECK_STATE(c, SDP_ST_RESET);
	sdp_conn_close(c, 0);
	CHECK_ALL_RELEASED();
}

/* ---- orphans: no busy progress thread, close timeout ------------------------ */

static double cpu_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int one_conn_left(void *arg)
{
	(void)arg;
	return eh_live_conns() == 1;
}

static void test_orphan_linger(void)
{
	struct eh_server s = { 0 };
	struct sdp_conn *cli, *srv;
	struct timespec ts = { 0, 300 * 1000 * 1000 };
	uint8_t junk[4096] = { 0 };
	uint64_t queued = 0;
	double c0, used;
	char buf[4096];
	ssize_t r;

	REQUIRE_OK(eh_listen(&s));
	REQUIRE_OK(eh_connect_pair(&s, &cli, &srv));
	/* The server never reads: the client's close cannot complete. */
	while ((r = eh_send_nb(cli, junk, sizeof(junk))) > 0)
		queued += (uint64_t)r;
	CHECK_EQ(r, -EAGAIN);
	sdp_conn_close(cli, 0);

	/* Measure, not synchronise: an orphan waiting for its peer must not
	 * keep the progress thread busy. */
	c0 = cpu_s();
	nanosleep(&ts, NULL);
	used = cpu_s() - c0;
	printf("#   %.3f s CPU during 0.3 s with a lingering orphan\n", used);
	CHECK(used < 0.1);
	CHECK_EQ(eh_live_conns(), 2);

	/* SDP_CLOSE_TIMEOUT_MS (1500 here) ends it: reset, released. */
	CHECK(eh_poll_until(one_conn_left, NULL, 10000));
	while ((r = eh_recv(srv, buf, sizeof(buf), 0)) > 0)
		;
	CHECK_EQ(r, -ECONNRESET);
	sdp_conn_close(srv, 0);
	eh_unlisten(&s);
	CHECK_ALL_RELEASED();
}

static const struct eh_test tests[] = {
	{ "half-close: EOF after data, CLOSE_WAIT, both TIME_WAIT",
	  test_half_close },
	{ "graceful close sends queued data before DisConn", test_close_flushes },
	{ "abort and close with unread data reset the peer", test_abort },
	{ "peer QP error wakes blocked recv and send with ECONNRESET",
	  test_peer_gone },
	{ "listener close resets never-accepted connections",
	  test_listener_close_resets_queued },
	{ "a lingering orphan: no busy progress thread, close timeout",
	  test_orphan_linger },
	{ NULL, NULL },
};

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	setenv("SDP_CLOSE_TIMEOUT_MS", "1500", 1);
	eh_setup_env();
	eh_run_all(tests);
	return eh_done();
}
