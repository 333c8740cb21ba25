/* SPDX-License-Identifier: MIT */
/*
 * test_zcopy.c — Read ZCopy (Combined mode) over the "loop" transport, where
 * RDMA READ is a validated memcpy: transfers checksummed at sizes around the
 * threshold and across several advertisements, partial reads, the decline
 * path (small buffer, no reader, MSG_PEEK), cancels (send timeout, unanswered
 * advertisement), both sides sending large messages at once, MSG_WAITALL,
 * peer death and abort with an advertisement outstanding (every registration
 * released), a buffer unmapped and remapped between sends, and protocol
 * violations around advertisements (reset, reason PROTOCOL).
 *
 * Some tests hold an advertisement at the sink without reading it by
 * pretending a recv() is in progress (zc_readers), the white-box way to
 * reach "accepted but not yet read".
 */
#include <sys/mman.h>

#include "engine/zcopy.h"
#include "engine_helpers.h"

#define THRESH (64u * 1024)

static void write_off(struct sdp_conn *c)
{
	pthread_mutex_lock(&c->lock);
	c->zc_write_off = 1;
	pthread_mutex_unlock(&c->lock);
}

/* Read ZCopy only: these tests count SrcAvails, so no recv() may advertise
 * its buffer (Write ZCopy has its own tests in test_zcopy_write.c). */
static int pair(struct eh_server *s, struct sdp_conn **cli, struct sdp_conn **srv)
{
	int r = eh_connect_pair(s, cli, srv);

	if (r == 0) {
		eh_zc_thresh(*cli, THRESH);
		eh_zc_thresh(*srv, THRESH);
		write_off(*cli);
		write_off(*srv);
	}
	return r;
}

static int no_live_mrs(void *arg)
{
	(void)arg;
	return atomic_load(&sdp_zcopy_live_mrs) == 0;
}

#define CHECK_MRS_RELEASED() CHECK(eh_poll_until(no_live_mrs, NULL, 5000))

/* ---- a reader thread -------------------------------------------------------- */

struct reader {
	struct sdp_conn *c;
	size_t total;		/* bytes to read */
	size_t piece;		/* recv buffer size */
	int flags;
	uint8_t *buf;		/* total bytes */
	size_t got;
	ssize_t err;
};

static void *reader_main(void *arg)
{
	struct reader *r = arg;

	while (r->got < r->total) {
		size_t n = r->total - r->got;
		ssize_t k;

		if (n > r->piece)
			n = r->piece;
		k = eh_recv(r->c, r->buf + r->got, n, r->flags);
		if (k <= 0) {
			r->err = k;
			break;
		}
		r->got += (size_t)k;
	}
	return NULL;
}

static int readers_in(void *arg)
{
	struct sdp_conn *c = arg;
	int in;

	pthread_mutex_lock(&c->lock);
	in = c->zc_readers > 0;
	pthread_mutex_unlock(&c->lock);
	return in;
}

/* Send `n` bytes of stream `seed` from cli to srv, read by a thread with
 * `piece`-byte recvs; returns 1 if the data arrived intact. */
static int xfer(struct sdp_conn *cli, struct sdp_conn *srv, size_t n,
		size_t piece, int rflags, uint64_t seed)
{
	uint8_t *src = malloc(n), *dst = calloc(1, n);
	struct reader rd = { srv, n, piece, rflags, dst, 0, 0 };
	pthread_t th;
	size_t sent = 0;
	int ok = 0;

	if (!src || !dst)
		goto out;
	eh_stream_fill(seed, 0, src, n);
	if (pthread_create(&th, NULL, reader_main, &rd))
		goto out;
	eh_poll_until(readers_in, srv, 2000);
	while (sent < n) {
		ssize_t k = eh_send(cli, src + sent, n - sent, 0);

		if (k <= 0) {
			printf("#   send: %zd\n", k);
			break;
		}
		sent += (size_t)k;
	}
	if (eh_join(th, NULL, 20000)) {
		printf("#   reader hung at %zu/%zu\n", rd.got, n);
		eh_dump("cli", cli);
		eh_dump("srv", srv);
		goto out;	/* leaks the thread: the test fails anyway */
	}
	ok = rd.got == n && !memcmp(src, dst, n);
	if (!ok)
		printf("#   xfer %zu: got %zu err %zd, %s\n", n, rd.got, rd.err,
		       memcmp(src, dst, n) ? "data differs" : "data ok");
out:
	free(src);
	free(dst);
	return ok;
}

/* ---- 1. sizes around the threshold ------------------------------------------ */

static void test_sizes(void)
{
	static const size_t sizes[] = {
		THRESH - 1, THRESH, THRESH + 1, 3 * THRESH + 7,
		SDP_ZC_MAX_ADVERT + THRESH + 1,	/* two advertisements */
	};
	struct eh_server s = { 0 };
	struct sdp_conn *cli, *srv;
	unsigned long regs0 = sdp_loop_op_count("reg_mr");

	REQUIRE_OK(eh_listen(&s));
	REQUIRE_OK(pair(&s, &cli, &srv));
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		struct sdp_conn_stats a = eh_stats(cli), b = eh_stats(srv);
		struct sdp_conn_stats a2, b2;
		size_t n = sizes[i];

		CHECK(xfer(cli, srv, n, n, 0, 100 + i));
		a2 = eh_stats(cli);
		b2 = eh_stats(srv);
		if (n < THRESH) {
			CHECK_EQ_U(a2.zc_tx_adverts, a.zc_tx_adverts);
			continue;
		}
		CHECK_EQ_U(a2.zc_tx_adverts - a.zc_tx_adverts,
			   (n + SDP_ZC_MAX_ADVERT - 1) / SDP_ZC_MAX_ADVERT);
		CHECK_EQ_U(a2.zc_tx_declined, a.zc_tx_declined);
		/* Several pieces: the source went Pipelined itself (no
		 * inline bytes); one piece: Combined, 64 inline. */
		CHECK_EQ_U(b2.zc_rx_bytes - b.zc_rx_bytes,
			   n - (n > SDP_ZC_MAX_ADVERT ? 0 : SDP_ZC_INLINE) *
			   (a2.zc_tx_adverts - a.zc_tx_adverts));
		CHECK_EQ_U(a2.zc_tx_bytes - a.zc_tx_bytes,
			   b2.zc_rx_bytes - b.zc_rx_bytes);
		CHECK_EQ_U(a2.bytes_sent - a.bytes_sent, n);
		CHECK_EQ_U(b2.bytes_rcvd - b.bytes_rcvd, n);
	}
	CHECK_OP(sdp_loop_op_count("reg_mr") - regs0, >=, 4);
	/* Threshold 0: ZCopy off. */
	{
		struct sdp_conn_stats a = eh_stats(cli);

		eh_zc_thresh(cli, 0);
		CHECK(xfer(cli, srv, 4 * THRESH, 4 * THRESH, 0, 7));
		CHECK_EQ_U(eh_stats(cli).zc_tx_adverts, a.zc_tx_adverts);
		eh_zc_thresh(cli, 1);	/* smallest: every send of 2+ bytes */
		CHECK(xfer(cli, srv, 100, 100, 0, 8));
		CHECK_EQ_U(eh_stats(cli).zc_tx_adverts, a.zc_tx_adverts + 1);
	}
	CHECK_MRS_RELEASED();
	sdp_conn_close(cli, 0);
	sdp_conn_close(srv, 0);
	eh_unlisten(&s);
	CHECK_ALL_RELEASED();
}

/* ---- 2. partial reads and the decline path --------------------------------- */

static void test_partial_and_decline(void)
{
	struct eh_server s = { 0 };
	struct sdp_conn *cli, *srv;
	struct sdp_conn_stats a, b;

	REQUIRE_OK(eh_listen(&s));
	REQUIRE_OK(pair(&s, &cli, &srv));

	/* recv buffers of exactly the threshold: several RDMA READs (and
	 * RdmaRdCompls) for one advertisement. */
	a = eh_stats(cli);
	b = eh_stats(srv);
	CHECK(xfer(cli, srv, 8 * THRESH + 5, THRESH, 0, 21));
	CHECK_EQ_U(eh_stats(cli).zc_tx_adverts - a.zc_tx_adverts, 1);
	CHECK_EQ_U(eh_stats(cli).zc_tx_declined, a.zc_tx_declined);
	CHECK_EQ_U(eh_stats(srv).zc_rx_bytes - b.zc_rx_bytes,
		   8 * THRESH + 5 - SDP_ZC_INLINE);

	/* recv buffers below the threshold: declined, rest by BCopy. */
	a = eh_stats(cli);
	b = eh_stats(srv);
	CHECK(xfer(cli, srv, 4 * THRESH, 1000, 0, 22));
	CHECK_OP(eh_stats(cli).zc_tx_declined - a.zc_tx_declined, >=, 1);
	CHECK_OP(eh_stats(srv).zc_rx_declined - b.zc_rx_declined, >=, 1);

	/* Nobody reading when the SrcAvail arrives: declined after the hold
	 * time, the send completes by BCopy into the queues. */
	{
		uint8_t *src = malloc(2 * THRESH), *dst = malloc(2 * THRESH);

		REQUIRE(src && dst);
		eh_stream_fill(23, 0, src, 2 * THRESH);
		a = eh_stats(cli);
		CHECK_EQ(eh_send(cli, src, 2 * THRESH, 0), 2 * THRESH);
		CHECK_EQ(eh_stats(cli).zc_tx_declined - a.zc_tx_declined, 1);
		CHECK_EQ(eh_recv_all(srv, dst, 2 * THRESH), 2 * THRESH);
		CHECK(!memcmp(src, dst, 2 * THRESH));
		free(src);
		free(dst);
	}
	CHECK_MRS_RELEASED();
	sdp_conn_close(cli, 0);
	sdp_conn_close(srv, 0);
	eh_unlisten(&s);
	CHECK_ALL_RELEASED();
}

/* ---- 3. MSG_PEEK and MSG_WAITALL ------------------------------------------- */

struct sender {
	struct sdp_conn *c;
	const uint8_t *p;
	size_t n;
	int timeout_ms;
	ssize_t ret;
};

static void *sender_main(void *arg)
{
	struct sender *s = arg;
	struct iovec iov = { (void *)s->p, s->n };

	s->ret = sdp_conn_send(s->c, &iov, 1, 0, 0, s->timeout_ms);
	return NULL;
}

static int is_reset(void *arg)
{
	return eh_state(arg) == SDP_ST_RESET;
}

static int advert_held(void *arg)
{
	struct sdp_conn *c = arg;
	int held;

	pthread_mutex_lock(&c->lock);
	held = c->zc_rx.active;
	pthread_mutex_unlock(&c->lock);
	return held;
}

static void test_peek_waitall(void)
{
	struct eh_server s = { 0 };
	struct sdp_conn *cli, *srv;
	size_t n = 4 * THRESH;
	uint8_t *src = malloc(n), *dst = malloc(n);
	struct sender sd;
	pthread_t th;
	struct sdp_conn_stats b;

	REQUIRE(src && dst);
	REQUIRE_OK(eh_listen(&s));
	REQUIRE_OK(pair(&s, &cli, &srv));

	/* MSG_PEEK reaching advertised bytes declines them; the data comes by
	 * BCopy and peek then sees it. */
	eh_stream_fill(31, 0, src, n);
	eh_zc_fake_reader(srv, 1);
	sd = (struct sender){ cli, src, n, eh_ms(10000), 0 };
	REQUIRE(pthread_create(&th, NULL, sender_main, &sd) == 0);
	CHECK(eh_poll_until(advert_held, srv, 5000));
	b = eh_stats(srv);
	CHECK_EQ(eh_recv(srv, dst, SDP_ZC_INLINE, 0), SDP_ZC_INLINE);
	CHECK_EQ(eh_recv(srv, dst + SDP_ZC_INLINE, 1000, MSG_PEEK), 1000);
	CHECK_EQ(eh_stats(srv).zc_rx_declined - b.zc_rx_declined, 1);
	eh_zc_fake_reader(srv, -1);
	CHECK_EQ(eh_recv_all(srv, dst + SDP_ZC_INLINE, n - SDP_ZC_INLINE),
		 n - SDP_ZC_INLINE);
	CHECK(eh_join(th, NULL, 10000) == 0);
	CHECK_EQ(sd.ret, n);
	CHECK(!memcmp(src, dst, n));

	/* MSG_WAITALL across the inline part, RDMA reads and two sends. */
	{
		size_t tot = 3 * n;
		uint8_t *s2 = malloc(tot), *d2 = malloc(tot);
		struct reader rd = { srv, tot, tot, MSG_WAITALL, d2, 0, 0 };
		pthread_t rt;

		REQUIRE(s2 && d2);
		eh_stream_fill(32, 0, s2, tot);
		REQUIRE(pthread_create(&rt, NULL, reader_main, &rd) == 0);
		eh_poll_until(readers_in, srv, 2000);
		CHECK_EQ(eh_send(cli, s2, n, 0), n);
		CHECK_EQ(eh_send(cli, s2 + n, 2 * n, 0), 2 * n);
		CHECK(eh_join(rt, NULL, 10000) == 0);
		CHECK_EQ(rd.got, tot);
		CHECK(!memcmp(s2, d2, tot));
		free(s2);
		free(d2);
	}
	CHECK_MRS_RELEASED();
	sdp_conn_close(cli, 0);
	sdp_conn_close(srv, 0);
	eh_unlisten(&s);
	CHECK_ALL_RELEASED();
	free(src);
	free(dst);
}

/* ---- 4. cancels ------------------------------------------------------------- */

static void test_cancel(void)
{
	struct eh_server s = { 0 };
	struct sdp_conn *cli, *srv;
	size_t n = 4 * THRESH;
	uint8_t *src = malloc(n), *dst = malloc(n);
	struct sdp_conn_stats a;
	ssize_t r;

	REQUIRE(src && dst);
	REQUIRE_OK(eh_listen(&s));
	REQUIRE_OK(pair(&s, &cli, &srv));
	eh_stream_fill(41, 0, src, n);

	/* Send timeout with the advertisement held, unread: SrcAvailCancel,
	 * the sink acknowledges (SendSm), send() returns the partial count
	 * (the inline bytes), and nothing of the rest was delivered. */
	eh_zc_fake_reader(srv, 1);
	a = eh_stats(cli);
	{
		struct iovec iov = { src, n };

		r = sdp_conn_send(cli, &iov, 1, 0, 0, 100);
	}
	CHECK_EQ(r, SDP_ZC_INLINE);
	CHECK_EQ(eh_stats(cli).zc_tx_cancels - a.zc_tx_cancels, 1);
	CHECK_EQ(eh_stats(cli).zc_tx_declined - a.zc_tx_declined, 1);
	CHECK(!advert_held(srv));
	eh_zc_fake_reader(srv, -1);
	CHECK_EQ(eh_recv(srv, dst, n, 0), SDP_ZC_INLINE);
	CHECK(!memcmp(src, dst, SDP_ZC_INLINE));
	CHECK_MRS_RELEASED();

	/* Unanswered advertisement (SDP_ZCOPY_ADV_TIMEOUT_MS = 200 here): the
	 * source cancels by itself and sends the rest by BCopy. */
	eh_zc_fake_reader(srv, 1);
	a = eh_stats(cli);
	CHECK_EQ(eh_send(cli, src, n, 0), n);
	CHECK_EQ(eh_stats(cli).zc_tx_cancels - a.zc_tx_cancels, 1);
	eh_zc_fake_reader(srv, -1);
	CHECK_EQ(eh_recv_all(srv, dst, n), n);
	CHECK(!memcmp(src, dst, n));

	CHECK_EQ(eh_state(cli), SDP_ST_ESTABLISHED);
	CHECK_EQ(eh_state(srv), SDP_ST_ESTABLISHED);
	CHECK_MRS_RELEASED();
	sdp_conn_close(cli, 0);
	sdp_conn_close(srv, 0);
	eh_unlisten(&s);
	CHECK_ALL_RELEASED();
	free(src);
	free(dst);
}

/* ---- 5. both directions at once -------------------------------------------- */



/* Each round: send n bytes, then read the peer's n bytes (one thread). */
static void *pingpong_main(void *arg)
{
	struct eh_duplex *d = arg;
	uint8_t *out = malloc(d->n), *in = malloc(d->n), *want = malloc(d->n);

	d->ok = out && in && want;
	for (int i = 0; d->ok && i < d->rounds; i++) {
		eh_stream_fill(d->seed_out + i, 0, out, d->n);
		eh_stream_fill(d->seed_in + i, 0, want, d->n);
		if (eh_send(d->c, out, d->n, 0) != (ssize_t)d->n ||
		    eh_recv_all(d->c, in, d->n) != (ssize_t)d->n ||
		    memcmp(in, want, d->n))
			d->ok = 0;
	}
	free(out);
	free(in);
	free(want);
	return NULL;
}

static void test_crossing(void)
{
	struct eh_server s = { 0 };
	struct sdp_conn *cli, *srv;
	struct eh_duplex a, b;
	pthread_t ta, tb;

	REQUIRE_OK(eh_listen(&s));
	REQUIRE_OK(pair(&s, &cli, &srv));

	/* One thread per side, both send first, then read: both advertise at
	 * once (readers faked in so that the advertisements are held): each
	 * sink declines the crossing one, both finish by BCopy. */
	eh_zc_fake_reader(cli, 1);
	eh_zc_fake_reader(srv, 1);
	a = (struct eh_duplex){ cli, 150 * 1024, 0, 20, 1000, 2000, 0 };
	b = (struct eh_duplex){ srv, 150 * 1024, 0, 20, 2000, 1000, 0 };
	REQUIRE(pthread_create(&ta, NULL, pingpong_main, &a) == 0);
	REQUIRE(pthread_create(&tb, NULL, pingpong_main, &b) == 0);
	CHECK(eh_join(ta, NULL, 20000) == 0);
	CHECK(eh_join(tb, NULL, 20000) == 0);
	CHECK(a.ok && b.ok);
	eh_zc_fake_reader(cli, -1);
	eh_zc_fake_reader(srv, -1);

	/* Reader and writer threads on both sides, 4 MiB messages. */
	{
		struct eh_duplex wa = { cli, 4 << 20, 0, 6, 3000, 0, 0 };
		struct eh_duplex wb = { srv, 4 << 20, 0, 6, 4000, 0, 0 };
		struct eh_duplex ra = { cli, 4 << 20, 1 << 20, 6, 0, 4000, 0 };
		struct eh_duplex rb = { srv, 4 << 20, 3 << 20, 6, 0, 3000, 0 };
		pthread_t t[4];
		struct sdp_conn_stats sa = eh_stats(srv), ca = eh_stats(cli);

		REQUIRE(pthread_create(&t[0], NULL, eh_checker_main, &ra) == 0);
		REQUIRE(pthread_create(&t[1], NULL, eh_checker_main, &rb) == 0);
		eh_poll_until(readers_in, cli, 2000);
		eh_poll_until(readers_in, srv, 2000);
		REQUIRE(pthread_create(&t[2], NULL, eh_writer_main, &wa) == 0);
		REQUIRE(pthread_create(&t[3], NULL, eh_writer_main, &wb) == 0);
		for (int i = 0; i < 4; i++)
			CHECK(eh_join(t[i], NULL, 30000) == 0);
		CHECK(wa.ok && wb.ok && ra.ok && rb.ok);
		printf("#   duplex: ZCopy read %llu + %llu bytes of %u\n",
		       (unsigned long long)(eh_stats(srv).zc_rx_bytes - sa.zc_rx_bytes),
		       (unsigned long long)(eh_stats(cli).zc_rx_bytes - ca.zc_rx_bytes),
		       2 * 6 * (4u << 20));
	}
	CHECK_MRS_RELEASED();
	sdp_conn_close(cli, 0);
	sdp_conn_close(srv, 0);
	eh_unlisten(&s);
	CHECK_ALL_RELEASED();
}

/* ---- 6. peer death / abort with an advertisement outstanding ----------------- */

static void test_abort_outstanding(void)
{
	struct eh_server s = { 0 };
	struct sdp_conn *cli, *srv;
	size_t n = 4 * THRESH;
	uint8_t *src = calloc(1, n);
	struct sender sd;
	pthread_t th;

	REQUIRE(src);
	REQUIRE_OK(eh_listen(&s));

	/* The sink aborts (SO_LINGER 0 close) while holding the SrcAvail. */
	REQUIRE_OK(pair(&s, &cli, &srv));
	eh_zc_fake_reader(srv, 1);
	sd = (struct sender){ cli, src, n, eh_ms(20000), 0 };
	REQUIRE(pthread_create(&th, NULL, sender_main, &sd) == 0);
	CHECK(eh_poll_until(advert_held, srv, 5000));
	CHECK_EQ(atomic_load(&sdp_zcopy_live_mrs), 1);
	sdp_conn_close(srv, 1);	/* (the fake reader goes with it) */
	REQUIRE(eh_join(th, NULL, 10000) == 0);
	/* The orphan declines before its AbortConn: the source may have
	 * queued some of the rest by BCopy when the reset arrives. */
	if (!(sd.ret == -ECONNRESET ||
	      (sd.ret >= SDP_ZC_INLINE && sd.ret <= (ssize_t)n))) {
		printf("#   send returned %zd\n", sd.ret);
		g_checks_failed++;
	}
	/* The send may have finished by BCopy before the AbortConn came:
	 * the reset then arrives on its own, a moment later. */
	eh_poll_until(is_reset, cli, 5000);
	CHECK_STATE(cli, SDP_ST_RESET);
	CHECK_MRS_RELEASED();
	sdp_conn_close(cli, 0);

	/* The link dies with the advertisement held. */
	REQUIRE_OK(pair(&s, &cli, &srv));
	eh_zc_fake_reader(srv, 1);
	sd = (struct sender){ cli, src, n, eh_ms(20000), 0 };
	REQUIRE(pthread_create(&th, NULL, sender_main, &sd) == 0);
	CHECK(eh_poll_until(advert_held, srv, 5000));
	pthread_mutex_lock(&srv->lock);
	sdp_loop_qp_error(srv->qp);
	pthread_mutex_unlock(&srv->lock);
	REQUIRE(eh_join(th, NULL, 10000) == 0);
	/* The orphan declines before its AbortConn: the source may have
	 * queued some of the rest by BCopy when the reset arrives. */
	if (!(sd.ret == -ECONNRESET ||
	      (sd.ret >= SDP_ZC_INLINE && sd.ret <= (ssize_t)n))) {
		printf("#   send returned %zd\n", sd.ret);
		g_checks_failed++;
	}
	eh_zc_fake_reader(srv, -1);
	CHECK_MRS_RELEASED();
	sdp_conn_close(cli, 0);
	sdp_conn_close(srv, 0);

	/* A graceful close by the sink with the advertisement held: the
	 * orphan declines it; the source's BCopy rest then resets it (data
	 * for a closed socket). */
	REQUIRE_OK(pair(&s, &cli, &srv));
	eh_zc_fake_reader(srv, 1);
	sd = (struct sender){ cli, src, n, eh_ms(20000), 0 };
	REQUIRE(pthread_create(&th, NULL, sender_main, &sd) == 0);
	CHECK(eh_poll_until(advert_held, srv, 5000));
	{
		uint8_t tmp[SDP_ZC_INLINE];

		eh_zc_fake_reader(srv, -1);
		CHECK_EQ(eh_recv(srv, tmp, sizeof(tmp), 0), SDP_ZC_INLINE);
	}
	sdp_conn_close(srv, 0);
	REQUIRE(eh_join(th, NULL, 10000) == 0);
	CHECK(sd.ret == (ssize_t)n || sd.ret == -ECONNRESET ||
	      sd.ret >= SDP_ZC_INLINE);
	CHECK_MRS_RELEASED();
	sdp_conn_close(cli, 0);

	eh_unlisten(&s);
	CHECK_ALL_RELEASED();
	free(src);
}

/* ---- 7. the buffer unmapped and remapped between sends ----------------------- */

static void test_remap(void)
{
	struct eh_server s = { 0 };
	struct sdp_conn *cli, *srv;
	size_t n = 1 << 20;
	uint8_t *dst = malloc(n), *want = malloc(n);

	REQUIRE(dst && want);
	REQUIRE_OK(eh_listen(&s));
	REQUIRE_OK(pair(&s, &cli, &srv));
	for (int i = 0; i < 4; i++) {
		uint8_t *p = mmap(NULL, n, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		struct reader rd = { srv, n, n, 0, dst, 0, 0 };
		pthread_t th;

		REQUIRE(p != MAP_FAILED);
		eh_stream_fill(70 + i, 0, p, n);
		eh_stream_fill(70 + i, 0, want, n);
		REQUIRE(pthread_create(&th, NULL, reader_main, &rd) == 0);
		eh_poll_until(readers_in, srv, 2000);
		CHECK_EQ(eh_send(cli, p, n, 0), n);
		CHECK(eh_join(th, NULL, 10000) == 0);
		CHECK(rd.got == n && !memcmp(dst, want, n));
		munmap(p, n);	/* the next mmap likely lands here again */
		/* The same with malloc/free. */
		p = malloc(n);
		REQUIRE(p);
		eh_stream_fill(90 + i, 0, p, n);
		eh_stream_fill(90 + i, 0, want, n);
		rd = (struct reader){ srv, n, n, 0, dst, 0, 0 };
		REQUIRE(pthread_create(&th, NULL, reader_main, &rd) == 0);
		eh_poll_until(readers_in, srv, 2000);
		CHECK_EQ(eh_send(cli, p, n, 0), n);
		CHECK(eh_join(th, NULL, 10000) == 0);
		CHECK(rd.got == n && !memcmp(dst, want, n));
		free(p);
	}
	CHECK_OP(eh_stats(cli).zc_tx_adverts, >=, 8);
	CHECK_MRS_RELEASED();
	sdp_conn_close(cli, 0);
	sdp_conn_close(srv, 0);
	eh_unlisten(&s);
	CHECK_ALL_RELEASED();
	free(dst);
	free(want);
}

/* ---- 8. protocol violations around advertisements ----------------------------- */

/* Make `from` post a crafted message (through the real encoder). */
static int post_raw(struct sdp_conn *from, uint8_t mid, uint32_t h_len,
		    uint32_t sa_len, const void *payload, uint32_t plen)
{
	struct sdp_msg m;
	struct sdp_sge sg = { (uint64_t)(uintptr_t)payload, plen, 0 };
	int r;

	memset(&m, 0, sizeof(m));
	m.bsdh.mid = mid;
	if (mid == SDP_MID_SRC_AVAIL) {
		m.h.srcah.len = sa_len;
		m.h.srcah.rkey = 1;
		m.h.srcah.vaddr = 4096;
	} else {
		m.h.len = h_len;
	}
	pthread_mutex_lock(&from->lock);
	r = sdp_tx_post_msg_locked(from, &m, plen ? &sg : NULL, plen ? 1 : 0,
				   plen);
	pthread_mutex_unlock(&from->lock);
	return r;
}

static void test_violations(void)
{
	struct eh_server s = { 0 };
	struct sdp_conn *cli, *srv;
	size_t n = 4 * THRESH;
	uint8_t *src = calloc(1, n);
	struct sender sd;
	pthread_t th;

	REQUIRE(src);
	REQUIRE_OK(eh_listen(&s));

	/* SendSm with no SrcAvail ever sent. */
	REQUIRE_OK(pair(&s, &cli, &srv));
	CHECK_EQ(post_raw(srv, SDP_MID_SEND_SM, 0, 0, NULL, 0), 0);
	eh_progress(cli);
	CHECK(eh_poll_until(is_reset, cli, 5000));
	CHECK_REASON(cli, SDP_REASON_PROTOCOL);
	sdp_conn_close(cli, 0);
	sdp_conn_close(srv, 0);

	/* SrcAvail whose Len does not exceed its inline bytes. */
	REQUIRE_OK(pair(&s, &cli, &srv));
	CHECK_EQ(post_raw(cli, SDP_MID_SRC_AVAIL, 0, 4, "abcd", 4), 0);
	eh_progress(srv);
	CHECK(eh_poll_until(is_reset, srv, 5000));
	CHECK_REASON(srv, SDP_REASON_PROTOCOL);
	sdp_conn_close(cli, 0);
	sdp_conn_close(srv, 0);

	/* Data while a SrcAvail is outstanding; then a second SrcAvail. */
	for (int v = 0; v < 2; v++) {
		REQUIRE_OK(pair(&s, &cli, &srv));
		eh_zc_fake_reader(srv, 1);
		CHECK_EQ(post_raw(cli, SDP_MID_SRC_AVAIL, 0, 100, "abcd", 4), 0);
		eh_progress(srv);
		CHECK(advert_held(srv));
		if (v == 0)
			CHECK_EQ(post_raw(cli, SDP_MID_DATA, 0, 0, "x", 1), 0);
		else
			CHECK_EQ(post_raw(cli, SDP_MID_SRC_AVAIL, 0, 100, "ab",
					  2), 0);
		eh_progress(srv);
		CHECK(eh_poll_until(is_reset, srv, 5000));
		CHECK_REASON(srv, SDP_REASON_PROTOCOL);
		eh_zc_fake_reader(srv, -1);
		sdp_conn_close(cli, 0);
		sdp_conn_close(srv, 0);
	}

	/* RdmaRdCompl larger than what is outstanding. */
	REQUIRE_OK(pair(&s, &cli, &srv));
	eh_zc_fake_reader(srv, 1);
	sd = (struct sender){ cli, src, n, eh_ms(20000), 0 };
	REQUIRE(pthread_create(&th, NULL, sender_main, &sd) == 0);
	CHECK(eh_poll_until(advert_held, srv, 5000));
	CHECK_EQ(post_raw(srv, SDP_MID_RDMA_RD_COMPL, (uint32_t)n, 0, NULL, 0), 0);
	REQUIRE(eh_join(th, NULL, 10000) == 0);
	CHECK(sd.ret == -ECONNRESET || sd.ret == SDP_ZC_INLINE);
	CHECK_REASON(cli, SDP_REASON_PROTOCOL);
	eh_zc_fake_reader(srv, -1);
	CHECK_MRS_RELEASED();
	sdp_conn_close(cli, 0);
	sdp_conn_close(srv, 1);

	eh_unlisten(&s);
	CHECK_ALL_RELEASED();
	free(src);
}

static const struct eh_test tests[] = {
	{ "ZCopy at sizes around the threshold, several adverts, thresh 0/1",
	  test_sizes },
	{ "partial reads; declines (small buffer, no reader)",
	  test_partial_and_decline },
	{ "MSG_PEEK declines, MSG_WAITALL spans adverts", test_peek_waitall },
	{ "cancel: send timeout, unanswered advertisement", test_cancel },
	{ "both directions at once: no deadlock, data intact", test_crossing },
	{ "abort / peer death / close with an advertisement outstanding",
	  test_abort_outstanding },
	{ "buffer unmapped/freed and reallocated between sends", test_remap },
	{ "protocol violations around advertisements reset", test_violations },
	{ NULL, NULL },
};

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	setenv("SDP_ZCOPY_ADV_TIMEOUT_MS", "200", 1);
	eh_setup_env();
	eh_run_all(tests);
	return eh_done();
}
