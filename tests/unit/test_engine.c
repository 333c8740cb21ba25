/* SPDX-License-Identifier: MIT */
/*
 * test_engine.c — the SDP engine driven directly over the in-process "loop"
 * transport: handshake and credits, bulk data both ways with concurrent
 * senders/receivers (default and tiny buffer configurations), non-blocking
 * send against a receiver that does not read (credit reserve), Nagle-like
 * coalescing and TCP_NODELAY, out-of-band data, the state transition table.
 *
 * The tiny configuration (SDP_RECV_BUFS=4, SDP_RECV_BUF_SIZE=1040) needs the
 * environment set before the engine reads it, so main() forks first thing
 * and the child runs those sections; its TAP lines are printed as comments
 * and its result is one test line of the parent.
 *
 * Close, abort and peer death: test_engine_close.c.  Protocol violations
 * and fault injection: test_engine_proto.c.
 *
 * SDP_TEST_BULK_MB overrides the 64 MiB each way of the bulk test.
 */
#include <sys/wait.h>

#include "engine_helpers.h"

/* ---- 1. connect / accept ------------------------------------------------- */

static void test_connect_accept(void)
{
	struct eh_server s = { 0 };
	struct sdp_conn *cli, *srv;
	struct sockaddr_in *peer;

	REQUIRE_OK(eh_listen(&s));
	REQUIRE_OK(eh_connect_pair(&s, &cli, &srv));

	CHECK_STATE(cli, SDP_ST_ESTABLISHED);
	CHECK_STATE(srv, SDP_ST_ESTABLISHED);
	pthread_mutex_lock(&cli->lock);
	pthread_mutex_lock(&srv->lock);
	CHECK_EQ(cli->nbufs, sdp_cfg.recv_bufs);
	CHECK_EQ(cli->posted, cli->nbufs);
	CHECK_EQ(srv->posted, srv->nbufs);
	/* Credits: exactly the receives the peer posted (Hello/HelloAck Bufs). */
	CHECK_EQ(cli->tx_credits, srv->posted);
	CHECK_EQ(srv->tx_credits, cli->posted);
	CHECK_EQ(cli->peer_rcv_sz, srv->buf_size);
	CHECK_EQ(srv->peer_rcv_sz, cli->buf_size);
	CHECK_EQ(cli->err, 0);
	CHECK_EQ(srv->err, 0);
	peer = (struct sockaddr_in *)&cli->addr.peer;
	CHECK_EQ(peer->sin_family, AF_INET);
	CHECK_EQ(ntohs(peer->sin_port), ntohs(s.addr.sin_port));
	peer = (struct sockaddr_in *)&srv->addr.peer;
	CHECK_EQ(ntohs(peer->sin_port),
		 ntohs(((struct sockaddr_in *)&cli->addr.local)->sin_port));
	pthread_mutex_unlock(&srv->lock);
	pthread_mutex_unlock(&cli->lock);

	/* Nothing queued: a non-blocking accept says so. */
	{
		struct sdp_conn *none = NULL;

		CHECK_EQ(sdp_listen_accept(s.l, 1, 0, &none), -EAGAIN);
	}
	sdp_conn_close(cli, 0);
	sdp_conn_close(srv, 0);
	eh_unlisten(&s);
	CHECK_ALL_RELEASED();
}

/* A connect to a port nobody listens on is refused. */
static void test_connect_refused(void)
{
	struct eh_server s = { 0 };
	struct sockaddr_in dst;
	struct sdp_conn *c;
	int r;

	REQUIRE_OK(eh_listen(&s));
	dst = s.addr;
	eh_unlisten(&s);	/* the port is free again */
	REQUIRE_OK(sdp_conn_alloc(&c));
	r = sdp_conn_connect(c, NULL, (struct sockaddr *)&dst, sizeof(dst));
	if (r == 0)
		r = sdp_conn_wait_connected(c, eh_ms(10000));
	CHECK_EQ(r, -ECONNREFUSED);
	CHECK_STATE(c, SDP_ST_RESET);
	CHECK_REASON(c, SDP_REASON_REFUSED);
	sdp_conn_close(c, 0);
	CHECK_ALL_RELEASED();
}

/* A listener whose backlog (one) is full: `queued` fills it, `waiting`
 * is left unanswered.  0, or -errno. */
static int fill_backlog_of_one(struct eh_server *s, struct sdp_conn **queued,
			       struct sdp_conn **waiting)
{
	int r;

	r = eh_listen(s);
	if (r < 0)
		return r;
	sdp_listen_set_backlog(s->l, 1);
	r = sdp_conn_alloc(queued);
	if (r == 0)
		r = sdp_conn_connect(*queued, NULL, (struct sockaddr *)&s->addr,
				     sizeof(s->addr));
	if (r == 0)
		r = sdp_conn_wait_connected(*queued, eh_ms(10000));
	if (r == 0)
		r = sdp_conn_alloc(waiting);
	if (r == 0)
		r = sdp_conn_connect(*waiting, NULL, (struct sockaddr *)&s->addr,
				     sizeof(s->addr));
	return r;
}

/* A listener that refuses (it closes with requests still waiting for room
 * in its backlog) is told apart from no listener at all: the client's
 * reason names the listener, the errno is still ECONNREFUSED. */
static void test_connect_listener_refused(void)
{
	struct eh_server s = { 0 };
	struct sdp_conn *queued, *waiting;
	int r;

	REQUIRE_OK(fill_backlog_of_one(&s, &queued, &waiting));
	/* The backlog is full: it waits, unanswered, until the close. */
	CHECK_EQ(sdp_conn_wait_connected(waiting, 100), -ETIMEDOUT);
	eh_unlisten(&s);
	r = sdp_conn_wait_connected(waiting, eh_ms(10000));
	CHECK_EQ(r, -ECONNREFUSED);
	CHECK_STATE(waiting, SDP_ST_RESET);
	CHECK_REASON(waiting, SDP_REASON_LISTENER_REFUSED);
	sdp_conn_close(waiting, 0);
	sdp_conn_close(queued, 0);
	CHECK_ALL_RELEASED();
}

/* A listener that never answers (its process stopped): the handshake's
 * deadline (SDP_CONNECT_TIMEOUT_MS, 2000 ms in these tests) resets the
 * attempt, with a reason that says so. */
static void test_connect_deadline(void)
{
	struct eh_server s = { 0 };
	struct sdp_conn *queued, *waiting;
	uint64_t t0;
	int r;

	t0 = eh_now_ms();
	REQUIRE_OK(fill_backlog_of_one(&s, &queued, &waiting));
	r = sdp_conn_wait_connected(waiting, eh_ms(30000));
	CHECK_EQ(r, -ETIMEDOUT);
	CHECK(eh_now_ms() - t0 >= sdp_cfg.connect_timeout_ms);
	CHECK_STATE(waiting, SDP_ST_RESET);
	CHECK_REASON(waiting, SDP_REASON_CONNECT_TIMEOUT);
	sdp_conn_close(waiting, 0);
	sdp_conn_close(queued, 0);
	eh_unlisten(&s);
	CHECK_ALL_RELEASED();
}

/* ---- 2. bulk data, both directions, 2 threads per side ------------------- */

struct bulk_dir {
	struct sdp_conn *tx, *rx;
	uint64_t seed;
	uint64_t total;
	/* results */
	uint64_t sent, rcvd;
	uint64_t sum_tx, sum_rx;
	long long tx_err, rx_err;	/* last negative return, 0 if none */
	uint64_t bad_off;		/* first mismatching offset + 1 */
	int early_eof;
};

static uint32_t rnd_size(uint64_t *st)
{
	return 1 + (uint32_t)(eh_splitmix(st) % 200000u);
}

/* Split [p, p+n) into 1..3 iovecs at random points. */
static int rnd_iov(uint64_t *st, uint8_t *p, size_t n, struct iovec *iov)
{
	int k = 1 + (int)(eh_splitmix(st) % 3), i;
	size_t off = 0;

	for (i = 0; i < k - 1; i++) {
		size_t part = n - off ? (size_t)(eh_splitmix(st) % (n - off + 1)) : 0;

		iov[i].iov_base = p + off;
		iov[i].iov_len = part;
		off += part;
	}
	iov[k - 1].iov_base = p + off;
	iov[k - 1].iov_len = n - off;
	return k;
}

static void *bulk_sender(void *arg)
{
	struct bulk_dir *d = arg;
	uint64_t st = d->seed * 3 + 1;
	uint8_t *buf = malloc(200000);
	struct iovec iov[3];

	if (!buf) {
		d->tx_err = -ENOMEM;
		return NULL;
	}
	while (d->sent < d->total) {
		uint64_t n = rnd_size(&st);
		ssize_t r;
		int k;

		if (n > d->total - d->sent)
			n = d->total - d->sent;
		eh_stream_fill(d->seed, d->sent, buf, (size_t)n);
		k = rnd_iov(&st, buf, (size_t)n, iov);
		r = sdp_conn_send(d->tx, iov, k, 0, 0, eh_ms(30000));
		if (r <= 0) {
			d->tx_err = r ? r : -EIO;
			break;
		}
		d->sum_tx = eh_csum(d->sum_tx, buf, (size_t)r);
		d->sent += (uint64_t)r;
	}
	free(buf);
	return NULL;
}

static void *bulk_receiver(void *arg)
{
	struct bulk_dir *d = arg;
	uint64_t st = d->seed * 5 + 2;
	uint8_t *buf = malloc(200000), *want = malloc(200000);
	struct iovec iov[3];

	if (!buf || !want) {
		d->rx_err = -ENOMEM;
		goto out;
	}
	while (d->rcvd < d->total) {
		uint64_t n = rnd_size(&st);
		ssize_t r;
		int k;

		k = rnd_iov(&st, buf, (size_t)n, iov);
		r = sdp_conn_recv(d->rx, iov, k, 0, 0, eh_ms(30000));
		if (r < 0) {
			d->rx_err = r;
			break;
		}
		if (r == 0) {
			d->early_eof = 1;
			break;
		}
		eh_stream_fill(d->seed, d->rcvd, want, (size_t)r);
		if (!d->bad_off && memcmp(buf, want, (size_t)r)) {
			for (ssize_t i = 0; i < r; i++)
				if (buf[i] != want[i]) {
					d->bad_off = d->rcvd + (uint64_t)i + 1;
					break;
				}
		}
		d->sum_rx = eh_csum(d->sum_rx, buf, (size_t)r);
		d->rcvd += (uint64_t)r;
	}
out:
	free(buf);
	free(want);
	return NULL;
}

struct sampler {
	struct sdp_conn *c[2];
	atomic_int stop;
	int32_t max_credits, min_credits;
	uint32_t max_posted;
	uint64_t samples;
};

static void *credit_sampler(void *arg)
{
	struct sampler *s = arg;

	s->max_credits = INT32_MIN;
	s->min_credits = INT32_MAX;
	while (!atomic_load(&s->stop)) {
		for (int i = 0; i < 2; i++) {
			pthread_mutex_lock(&s->c[i]->lock);
			if (s->c[i]->tx_credits > s->max_credits)
				s->max_credits = s->c[i]->tx_credits;
			if (s->c[i]->tx_credits < s->min_credits)
				s->min_credits = s->c[i]->tx_credits;
			if (s->c[i]->posted > s->max_posted)
				s->max_posted = s->c[i]->posted;
			pthread_mutex_unlock(&s->c[i]->lock);
		}
		s->samples++;
		eh_pause();
	}
	return NULL;
}

/* Quiescent: every receive buffer reposted, nothing unread. */
static int fully_reposted(void *arg)
{
	struct sdp_conn *c = arg;
	int ok;

	pthread_mutex_lock(&c->lock);
	sdp_conn_progress_locked(c);
	ok = c->posted == c->nbufs && c->rx_bytes == 0 && c->rxq_count == 0;
	pthread_mutex_unlock(&c->lock);
	return ok;
}

static uint64_t bulk_bytes(void)
{
	const char *e = getenv("SDP_TEST_BULK_MB");
	uint64_t mb = e && atoi(e) > 0 ? (uint64_t)atoi(e) : 64;

	return mb << 20;
}

static void test_bulk_both_ways(void)
{
	struct eh_server s = { 0 };
	struct sdp_conn *cli, *srv;
	struct bulk_dir d[2];
	struct sampler smp;
	pthread_t th[5];
	uint64_t t0 = eh_now_ms();
	int i, hung = 0;

	REQUIRE_OK(eh_listen(&s));
	REQUIRE_OK(eh_connect_pair(&s, &cli, &srv));
	memset(d, 0, sizeof(d));
	d[0].tx = cli;
	d[0].rx = srv;
	d[0].seed = 0x1234;
	d[1].tx = srv;
	d[1].rx = cli;
	d[1].seed = 0xabcdef;
	d[0].total = d[1].total = bulk_bytes();
	memset(&smp, 0, sizeof(smp));
	smp.c[0] = cli;
	smp.c[1] = srv;
	atomic_init(&smp.stop, 0);

	REQUIRE(pthread_create(&th[0], NULL, bulk_sender, &d[0]) == 0);
	REQUIRE(pthread_create(&th[1], NULL, bulk_receiver, &d[0]) == 0);
	REQUIRE(pthread_create(&th[2], NULL, bulk_sender, &d[1]) == 0);
	REQUIRE(pthread_create(&th[3], NULL, bulk_receiver, &d[1]) == 0);
	REQUIRE(pthread_create(&th[4], NULL, credit_sampler, &smp) == 0);
	for (i = 0; i < 4; i++) {
		if (eh_join(th[i], NULL, 110000)) {
			printf("#   bulk thread %d hangs\n", i);
			hung = 1;
		}
	}
	atomic_store(&smp.stop, 1);
	pthread_join(th[4], NULL);
	if (hung) {
		printf("#   cli %s, srv %s\n", sdp_state_name(eh_state(cli)),
		       sdp_state_name(eh_state(srv)));
		g_checks_failed++;
		fflush(stdout);
		_exit(1);	/* threads still use the connections */
	}
	printf("#   %s: %llu MiB each way in %llu ms, %llu credit samples\n",
	       g_tap_prefix[0] ? "small config" : "default config",
	       (unsigned long long)(d[0].total >> 20),
	       (unsigned long long)(eh_now_ms() - t0),
	       (unsigned long long)smp.samples);

	for (i = 0; i < 2; i++) {
		if (d[i].tx_err || d[i].rx_err || d[i].rcvd != d[i].total ||
		    d[i].sum_rx != d[i].sum_tx)
			printf("#   direction %d: sent %llu rcvd %llu tx_err %lld "
			       "rx_err %lld\n", i, (unsigned long long)d[i].sent,
			       (unsigned long long)d[i].rcvd, d[i].tx_err,
			       d[i].rx_err);
		if (d[i].tx_err || d[i].rx_err || d[i].rcvd != d[i].total ||
		    d[i].sum_rx != d[i].sum_tx) {
			eh_dump("cli", cli);
			eh_dump("srv", srv);
		}
		CHECK_EQ(d[i].tx_err, 0);
		CHECK_EQ(d[i].rx_err, 0);
		CHECK_EQ(d[i].early_eof, 0);
		CHECK_EQ_U(d[i].sent, d[i].total);
		CHECK_EQ_U(d[i].rcvd, d[i].total);
		CHECK_EQ_U(d[i].sum_rx, d[i].sum_tx);
		CHECK_EQ_U(d[i].bad_off, 0);
	}
	/* Credits never exceed the peer's buffers, never go negative. */
	CHECK_OP(smp.max_credits, <=, (int32_t)sdp_cfg.recv_bufs);
	CHECK_OP(smp.min_credits, >=, 0);
	CHECK_OP(smp.max_posted, <=, sdp_cfg.recv_bufs);

	/* Every buffer comes back once all data is read. */
	CHECK(eh_poll_until(fully_reposted, cli, 5000));
	CHECK(eh_poll_until(fully_reposted, srv, 5000));
	pthread_mutex_lock(&cli->lock);
	CHECK_EQ(cli->posted, cli->nbufs);
	CHECK_OP(cli->tx_credits, <=, (int32_t)srv->nbufs);
	CHECK_EQ_U(cli->stats.bytes_sent, d[0].total);
	CHECK_EQ_U(cli->stats.bytes_rcvd, d[1].total);
	pthread_mutex_unlock(&cli->lock);
	pthread_mutex_lock(&srv->lock);
	CHECK_EQ(srv->posted, srv->nbufs);
	CHECK_OP(srv->tx_credits, <=, (int32_t)cli->nbufs);
	CHECK_EQ_U(srv->stats.bytes_sent, d[1].total);
	CHECK_EQ_U(srv->stats.bytes_rcvd, d[0].total);
	pthread_mutex_unlock(&srv->lock);
	/* No reset anywhere. */
	CHECK_STATE(cli, SDP_ST_ESTABLISHED);
	CHECK_STATE(srv, SDP_ST_ESTABLISHED);
	CHECK_REASON(cli, SDP_REASON_NONE);
	CHECK_REASON(srv, SDP_REASON_NONE);

	sdp_conn_close(cli, 0);
	sdp_conn_close(srv, 0);
	eh_unlisten(&s);
	CHECK_ALL_RELEASED();
}

/* ---- 3. non-blocking send to a receiver that does not read ---------------- */

static void test_nonblock_credit_reserve(void)
{
	struct eh_server s = { 0 };
	struct sdp_conn *cli, *srv;
	uint8_t chunk[10000], *got;
	uint64_t seed = 77, total = 0, sum_tx = 0, sum_rx = 0;
	ssize_t r;
	int iters = 0;

	REQUIRE_OK(eh_listen(&s));
	REQUIRE_OK(eh_connect_pair(&s, &cli, &srv));

	/* Fill: credits first, then the send queue, until EAGAIN. */
	for (;;) {
		eh_stream_fill(seed, total, chunk, sizeof(chunk));
		r = eh_send_nb(cli, chunk, sizeof(chunk));
		if (r < 0)
			break;
		sum_tx = eh_csum(sum_tx, chunk, (size_t)r);
		total += (uint64_t)r;
		if (++iters > 100000)
			break;
	}
	CHECK_EQ(r, -EAGAIN);
	CHECK_OP(total, >, 0);
	printf("#   %llu bytes accepted before EAGAIN\n",
	       (unsigned long long)total);
	/* The send that would have found no posted receive must not have
	 * happened: both ends are still established after processing all. */
	eh_progress(srv);
	eh_progress(cli);
	CHECK_STATE(cli, SDP_ST_ESTABLISHED);
	CHECK_STATE(srv, SDP_ST_ESTABLISHED);
	CHECK_REASON(cli, SDP_REASON_NONE);
	CHECK_REASON(srv, SDP_REASON_NONE);
	pthread_mutex_lock(&cli->lock);
	CHECK_OP(cli->tx_credits, >=, 0);
	CHECK_OP(cli->txq_len, >, 0);	/* EAGAIN came from a full queue */
	pthread_mutex_unlock(&cli->lock);
	/* Still EAGAIN (not a reset) on a second try. */
	CHECK_EQ(eh_send_nb(cli, chunk, 1), -EAGAIN);

	/* The receiver reads it all, in order. */
	got = malloc((size_t)total);
	REQUIRE(got);
	r = eh_recv_all(srv, got, (size_t)total);
	CHECK_EQ(r, (ssize_t)total);
	if (r > 0) {
		uint8_t *want = malloc((size_t)total);

		REQUIRE(want);
		eh_stream_fill(seed, 0, want, (size_t)total);
		CHECK(memcmp(got, want, (size_t)total) == 0);
		sum_rx = eh_csum(0, got, (size_t)r);
		CHECK_EQ_U(sum_rx, sum_tx);
		free(want);
	}
	free(got);

	/* The sender can send again. */
	eh_stream_fill(seed, total, chunk, sizeof(chunk));
	r = eh_send_nb(cli, chunk, sizeof(chunk));
	CHECK_OP(r, >, 0);
	if (r > 0) {
		uint8_t back[sizeof(chunk)];

		CHECK_EQ(eh_recv_all(srv, back, (size_t)r), r);
		CHECK(memcmp(back, chunk, (size_t)r) == 0);
	}
	CHECK_STATE(cli, SDP_ST_ESTABLISHED);
	CHECK_STATE(srv, SDP_ST_ESTABLISHED);
	CHECK(eh_poll_until(fully_reposted, srv, 5000));

	sdp_conn_close(cli, 0);
	sdp_conn_close(srv, 0);
	eh_unlisten(&s);
	CHECK_ALL_RELEASED();
}

/* ---- 4. Nagle / TCP_NODELAY ----------------------------------------------- */

static void test_nagle(void)
{
	struct eh_server s = { 0 };
	struct sdp_conn *cli, *srv;
	struct sdp_conn_stats a, b;
	uint8_t buf[1000], want[1000];
	int i, n;

	REQUIRE_OK(eh_listen(&s));

	/* Coalescing: 5 one-byte sends, receiver not reading (credits for
	 * all of them are there: only Nagle can merge them). */
	REQUIRE_OK(eh_connect_pair(&s, &cli, &srv));
	a = eh_stats(cli);
	for (i = 0; i < 5; i++)
		CHECK_EQ(eh_send_nb(cli, "abcde" + i, 1), 1);
	b = eh_stats(cli);
	CHECK_OP(b.msgs_sent - a.msgs_sent, <, 5);
	CHECK_OP(b.nagle_holds - a.nagle_holds, >=, 1);
	/* Held bytes still arrive (the hold is bounded), in order. */
	CHECK_EQ(eh_recv_all(srv, buf, 5), 5);
	CHECK(memcmp(buf, "abcde", 5) == 0);

	/* Many 1-byte sends while the receiver does not read. */
	a = eh_stats(cli);
	for (i = 0; i < 1000; i++) {
		want[i] = (uint8_t)(i * 7 + 1);
		CHECK_EQ(eh_send(cli, &want[i], 1, 0), 1);
	}
	b = eh_stats(cli);
	printf("#   1000 one-byte sends -> %llu messages\n",
	       (unsigned long long)(b.msgs_sent - a.msgs_sent));
	CHECK_OP(b.msgs_sent - a.msgs_sent, <=, 100);
	CHECK_EQ(eh_recv_all(srv, buf, 1000), 1000);
	CHECK(memcmp(buf, want, 1000) == 0);
	CHECK_STATE(cli, SDP_ST_ESTABLISHED);
	sdp_conn_close(cli, 0);
	sdp_conn_close(srv, 0);

	/* TCP_NODELAY: every send is its own message (fresh pair: all the
	 * peer's buffers are credits). */
	REQUIRE_OK(eh_connect_pair(&s, &cli, &srv));
	pthread_mutex_lock(&cli->lock);
	cli->nodelay = 1;
	/* Data needs two credits: tx_credits - 1 messages can go now. */
	n = cli->tx_credits - 1;
	pthread_mutex_unlock(&cli->lock);
	if (n > 6)
		n = 6;
	CHECK_OP(n, >=, 2);
	a = eh_stats(cli);
	for (i = 0; i < n; i++)
		CHECK_EQ(eh_send_nb(cli, "uvwxyz" + i, 1), 1);
	b = eh_stats(cli);
	CHECK_EQ(b.msgs_sent - a.msgs_sent, n);
	CHECK_EQ(b.nagle_holds - a.nagle_holds, 0);
	CHECK_EQ(eh_recv_all(srv, buf, (size_t)n), n);
	CHECK(memcmp(buf, "uvwxyz", (size_t)n) == 0);
	a = eh_stats(srv);
	CHECK_OP(a.msgs_rcvd, >=, n);
	sdp_conn_close(cli, 0);
	sdp_conn_close(srv, 0);

	eh_unlisten(&s);
	CHECK_ALL_RELEASED();
}

/* ---- 8. out-of-band data --------------------------------------------------- */

static int at_mark(struct sdp_conn *c)
{
	int m;

	pthread_mutex_lock(&c->lock);
	m = sdp_conn_at_mark_locked(c);
	pthread_mutex_unlock(&c->lock);
	return m;
}

static void test_oob(void)
{
	struct eh_server s = { 0 };
	struct sdp_conn *cli, *srv;
	char buf[16];

	REQUIRE_OK(eh_listen(&s));
	REQUIRE_OK(eh_connect_pair(&s, &cli, &srv));
	/* NODELAY: "def" must already be there when the reader looks. */
	pthread_mutex_lock(&cli->lock);
	cli->nodelay = 1;
	pthread_mutex_unlock(&cli->lock);

	CHECK_EQ(eh_send(cli, "abc", 3, 0), 3);
	CHECK_EQ(eh_send(cli, "!", 1, MSG_OOB), 1);
	CHECK_EQ(eh_send(cli, "def", 3, 0), 3);
	CHECK_EQ(eh_stats(cli).msgs_sent, 3);
	/* All three messages are there before the first recv, which must
	 * stop at the mark. */
	memset(buf, 0, sizeof(buf));
	CHECK_EQ(eh_recv(srv, buf, sizeof(buf), 0), 3);
	CHECK(memcmp(buf, "abc", 3) == 0);
	CHECK(at_mark(srv));
	CHECK_EQ(eh_recv(srv, buf, 1, MSG_OOB | MSG_PEEK), 1);
	CHECK_EQ(buf[0], '!');
	buf[0] = 0;
	CHECK_EQ(eh_recv(srv, buf, 1, MSG_OOB), 1);
	CHECK_EQ(buf[0], '!');
	CHECK_EQ(eh_recv(srv, buf, 1, MSG_OOB), -EINVAL);	/* consumed */
	/* Normal data continues after the urgent byte. */
	memset(buf, 0, sizeof(buf));
	CHECK_EQ(eh_recv_all(srv, buf, 3), 3);
	CHECK(memcmp(buf, "def", 3) == 0);
	CHECK(!at_mark(srv));
	CHECK_EQ(eh_send(cli, "ghi", 3, 0), 3);
	CHECK_EQ(eh_recv_all(srv, buf, 3), 3);
	CHECK(memcmp(buf, "ghi", 3) == 0);
	sdp_conn_close(cli, 0);
	sdp_conn_close(srv, 0);

	/* SO_OOBINLINE: the urgent byte is part of the stream. */
	REQUIRE_OK(eh_connect_pair(&s, &cli, &srv));
	pthread_mutex_lock(&srv->lock);
	srv->oob_inline = 1;
	pthread_mutex_unlock(&srv->lock);
	CHECK_EQ(eh_send(cli, "abc", 3, 0), 3);
	CHECK_EQ(eh_send(cli, "!", 1, MSG_OOB), 1);
	CHECK_EQ(eh_send(cli, "def", 3, 0), 3);
	memset(buf, 0, sizeof(buf));
	CHECK_EQ(eh_recv_all(srv, buf, 7), 7);
	CHECK(memcmp(buf, "abc!def", 7) == 0);
	CHECK_EQ(eh_recv(srv, buf, 1, MSG_OOB), -EINVAL);
	sdp_conn_close(cli, 0);
	sdp_conn_close(srv, 0);

	eh_unlisten(&s);
	CHECK_ALL_RELEASED();
}

/* ---- 11. state transition table ------------------------------------------- */

static void test_state_table(void)
{
	static const struct {
		enum sdp_state from, to;
		int ok;
	} cases[] = {
		{ SDP_ST_CLOSED, SDP_ST_TIME_WAIT, 0 },
		{ SDP_ST_CLOSED, SDP_ST_FIN_WAIT, 0 },
		{ SDP_ST_CLOSED, SDP_ST_LAST_ACK, 0 },
		{ SDP_ST_CLOSED, SDP_ST_CONNECTING, 1 },
		{ SDP_ST_CONNECTING, SDP_ST_FIN_WAIT, 0 },
		{ SDP_ST_CONNECTING, SDP_ST_CLOSE_WAIT, 0 },
		{ SDP_ST_CONNECTING, SDP_ST_ESTABLISHED, 1 },
		{ SDP_ST_ESTABLISHED, SDP_ST_CONNECTING, 0 },
		{ SDP_ST_ESTABLISHED, SDP_ST_LAST_ACK, 0 },
		{ SDP_ST_ESTABLISHED, SDP_ST_TIME_WAIT, 0 },
		{ SDP_ST_ESTABLISHED, SDP_ST_FIN_WAIT, 1 },
		{ SDP_ST_ESTABLISHED, SDP_ST_CLOSE_WAIT, 1 },
		{ SDP_ST_FIN_WAIT, SDP_ST_CLOSE_WAIT, 0 },
		{ SDP_ST_FIN_WAIT, SDP_ST_ESTABLISHED, 0 },
		{ SDP_ST_FIN_WAIT, SDP_ST_TIME_WAIT, 1 },
		{ SDP_ST_CLOSE_WAIT, SDP_ST_FIN_WAIT, 0 },
		{ SDP_ST_CLOSE_WAIT, SDP_ST_TIME_WAIT, 1 },	/* DisConn, then the QP went */
		{ SDP_ST_CLOSE_WAIT, SDP_ST_LAST_ACK, 1 },
		{ SDP_ST_LAST_ACK, SDP_ST_ESTABLISHED, 0 },
		{ SDP_ST_LAST_ACK, SDP_ST_TIME_WAIT, 1 },
		{ SDP_ST_TIME_WAIT, SDP_ST_ESTABLISHED, 0 },
		{ SDP_ST_TIME_WAIT, SDP_ST_CONNECTING, 0 },
		{ SDP_ST_TIME_WAIT, SDP_ST_CLOSED, 1 },
		{ SDP_ST_RESET, SDP_ST_ESTABLISHED, 0 },
		{ SDP_ST_RESET, SDP_ST_FIN_WAIT, 0 },
		{ SDP_ST_RESET, SDP_ST_CLOSED, 1 },
		{ SDP_ST_CONNECTING, SDP_ST_RESET, 1 },
		{ SDP_ST_ESTABLISHED, SDP_ST_RESET, 1 },
		{ SDP_ST_LAST_ACK, SDP_ST_RESET, 1 },
	};
	struct sdp_conn *c;
	size_t i;

	REQUIRE_OK(sdp_conn_alloc(&c));
	CHECK_STATE(c, SDP_ST_CLOSED);
	pthread_mutex_lock(&c->lock);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int r;

		c->state = cases[i].from;	/* force the starting point */
		r = sdp_conn_set_state_locked(c, cases[i].to);
		if (cases[i].ok ? r != 0 : r != -EPROTO) {
			printf("#   %s -> %s returned %d, want %d\n",
			       sdp_state_name(cases[i].from),
			       sdp_state_name(cases[i].to), r,
			       cases[i].ok ? 0 : -EPROTO);
			g_checks_failed++;
		}
		/* A refused transition leaves the state alone. */
		CHECK_EQ(c->state, cases[i].ok ? cases[i].to : cases[i].from);
	}
	c->state = SDP_ST_CLOSED;
	pthread_mutex_unlock(&c->lock);
	CHECK(strcmp(sdp_state_name(SDP_ST_TIME_WAIT), "TIME_WAIT") == 0);
	CHECK(strcmp(sdp_state_name(SDP_ST_COUNT), "?") == 0);
	sdp_conn_put(c);
}

/* ---- main ------------------------------------------------------------------ */

static const struct eh_test small_tests[] = {
	{ "bulk both ways, 4 x 1040-byte buffers", test_bulk_both_ways },
	{ "non-blocking send, 4 x 1040-byte buffers", test_nonblock_credit_reserve },
	{ "nagle, 4 x 1040-byte buffers", test_nagle },
	{ NULL, NULL },
};

static const struct eh_test tests[] = {
	{ "connect/accept over loop: states, credits, addresses",
	  test_connect_accept },
	{ "connect to a closed port is refused", test_connect_refused },
	{ "a listener's refusal is told apart from no listener",
	  test_connect_listener_refused },
	{ "a listener that never answers: reset at the handshake deadline",
	  test_connect_deadline },
	{ "bulk data both ways, 2 threads per side", test_bulk_both_ways },
	{ "non-blocking send to a non-reading receiver: EAGAIN, no reset",
	  test_nonblock_credit_reserve },
	{ "nagle coalescing and TCP_NODELAY", test_nagle },
	{ "out-of-band data, at mark, OOBINLINE", test_oob },
	{ "state transition table", test_state_table },
	{ NULL, NULL },
};

/* The tiny configuration, in a child whose environment is set before the
 * engine reads it.  Returns 1 if every section passed. */
static int run_small_child(char *detail, size_t dlen)
{
	pid_t pid;
	int st;

	fflush(stdout);
	pid = fork();
	if (pid < 0) {
		snprintf(detail, dlen, "fork: %s", strerror(errno));
		return 0;
	}
	if (pid == 0) {
		setenv("SDP_RECV_BUFS", "4", 1);
		setenv("SDP_RECV_BUF_SIZE", "1040", 1);
		eh_setup_env();
		g_tap_prefix = "# [small] ";
		if (sdp_cfg.recv_bufs != 4 || sdp_cfg.recv_buf_size != 1040) {
			printf("# [small] configuration not applied\n");
			_exit(1);
		}
		eh_run_all(small_tests);
		fflush(stdout);
		_exit(eh_done());
	}
	if (waitpid(pid, &st, 0) < 0) {
		snprintf(detail, dlen, "waitpid: %s", strerror(errno));
		return 0;
	}
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 1;
	if (WIFSIGNALED(st))
		snprintf(detail, dlen, "child killed by signal %d",
			 WTERMSIG(st));
	else
		snprintf(detail, dlen, "child exit status %d",
			 WEXITSTATUS(st));
	return 0;
}

int main(void)
{
	char detail[128] = "";
	int ok;

	setvbuf(stdout, NULL, _IOLBF, 0);
	/* Fork before any engine thread exists. */
	ok = run_small_child(detail, sizeof(detail));
	setenv("SDP_CONNECT_TIMEOUT_MS", "2000", 1);
	eh_setup_env();
	eh_report("tiny configuration (SDP_RECV_BUFS=4, SDP_RECV_BUF_SIZE=1040)",
		  ok, detail);
	eh_run_all(tests);
	return eh_done();
}
