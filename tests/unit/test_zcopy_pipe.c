/* SPDX-License-Identifier: MIT */
/*
 * test_zcopy_pipe.c — several SrcAvails outstanding at once (Pipelined
 * mode) over the "loop" transport: a writev of several large elements has
 * each element advertised at once and the sink reads them strictly in
 * stream order (partial reads across advertisements); mixed small and
 * large elements; the peer's MaxAdverts honoured; a large buffer split in
 * pieces (SDP_ZCOPY_SPLIT); a decline in the middle, also with an
 * advertisement crossing the sink's SendSm; a send timeout cancelling
 * several at once; abort, link death and a source closed under its own send
 * with several outstanding (every registration released); malformed
 * sequences (RdmaRdCompl beyond what is outstanding, more SrcAvails than
 * our MaxAdverts, data between advertisements) resetting cleanly.  Every
 * transfer is checked byte for byte.
 *
 * The sink holds advertisements without reading them by pretending a
 * recv() is in progress (zc_readers), the white-box way to reach "several
 * accepted, none read yet".  Write ZCopy is off: these tests count
 * SrcAvails.
 */
#include "engine/zcopy.h"
#include "engine_helpers.h"

#define T (64u * 1024)	/* the threshold */

static void set_peer_max(struct sdp_conn *c, uint8_t v)
{
	pthread_mutex_lock(&c->lock);
	c->zc_peer_max_adverts = v;
	pthread_mutex_unlock(&c->lock);
}

static int pair(struct eh_server *s, struct sdp_conn **cli, struct sdp_conn **srv)
{
	int r = eh_connect_pair(s, cli, srv);

	if (r == 0) {
		eh_zc_thresh(*cli, T);
		eh_zc_thresh(*srv, T);
		pthread_mutex_lock(&(*cli)->lock);
		(*cli)->zc_write_off = 1;
		pthread_mutex_unlock(&(*cli)->lock);
		pthread_mutex_lock(&(*srv)->lock);
		(*srv)->zc_write_off = 1;
		pthread_mutex_unlock(&(*srv)->lock);
	}
	return r;
}

static int no_live_mrs(void *arg)
{
	(void)arg;
	return atomic_load(&sdp_zcopy_live_mrs) == 0;
}

#define CHECK_MRS_RELEASED() CHECK(eh_poll_until(no_live_mrs, NULL, 5000))

static uint32_t held(struct sdp_conn *c)
{
	uint32_t n;

	pthread_mutex_lock(&c->lock);
	n = sdp_zcopy_rx_held(c);
	pthread_mutex_unlock(&c->lock);
	return n;
}

static uint32_t tx_live(struct sdp_conn *c)
{
	uint32_t n;

	pthread_mutex_lock(&c->lock);
	n = c->zc_tx.live;
	pthread_mutex_unlock(&c->lock);
	return n;
}

struct held_arg {
	struct sdp_conn *c;
	uint32_t n;
};

static int held_is(void *arg)
{
	struct held_arg *h = arg;

	return held(h->c) == h->n;
}

static int wait_held(struct sdp_conn *c, uint32_t n)
{
	struct held_arg h = { c, n };

	return eh_poll_until(held_is, &h, 5000);
}

static int is_reset(void *arg)
{
	return eh_state(arg) == SDP_ST_RESET;
}

/* ---- a writev in a thread ------------------------------------------------------ */

#define MAXV 8

struct wv {
	struct sdp_conn *c;
	struct iovec iov[MAXV];
	int n;
	size_t total;
	int timeout_ms;
	ssize_t ret;
	uint8_t *mem;		/* the elements, back to back */
};

/* Elements of the given sizes, filled with stream `seed` in order. */
static int wv_make(struct wv *w, struct sdp_conn *c, const size_t *sizes,
		   int n, uint64_t seed)
{
	size_t off = 0;

	memset(w, 0, sizeof(*w));
	w->c = c;
	w->n = n;
	w->timeout_ms = eh_ms(10000);
	for (int i = 0; i < n; i++)
		w->total += sizes[i];
	w->mem = malloc(w->total);
	if (!w->mem)
		return 0;
	eh_stream_fill(seed, 0, w->mem, w->total);
	for (int i = 0; i < n; i++) {
		w->iov[i].iov_base = w->mem + off;
		w->iov[i].iov_len = sizes[i];
		off += sizes[i];
	}
	return 1;
}

/* wv_make(), and a zeroed buffer for the reader to fill (NULL on failure). */
static uint8_t *wv_make_for_reader(struct wv *w, struct sdp_conn *c,
				   const size_t *sizes, int n, uint64_t seed)
{
	uint8_t *dst;

	if (!wv_make(w, c, sizes, n, seed))
		return NULL;
	dst = calloc(1, w->total);
	if (!dst)
		free(w->mem);
	return dst;
}

static void *wv_main(void *arg)
{
	struct wv *w = arg;

	w->ret = sdp_conn_send(w->c, w->iov, w->n, 0, 0, w->timeout_ms);
	return NULL;
}

/* The writev in thread `th` sent everything, and the reader got exactly
 * that into dst (`got` bytes). */
static void wv_check_arrived(struct wv *w, pthread_t th, const uint8_t *dst,
			     size_t got)
{
	CHECK(eh_join(th, NULL, 10000) == 0);
	CHECK_EQ(w->ret, w->total);
	CHECK_EQ(got, w->total);
	CHECK(!memcmp(w->mem, dst, w->total));
}

/* Read `n` bytes from c into p (after `got` already there), pieces of at
 * most `piece`. */
static size_t read_into(struct sdp_conn *c, uint8_t *p, size_t got, size_t n,
			size_t piece)
{
	while (got < n) {
		size_t k = n - got;
		ssize_t r;

		if (k > piece)
			k = piece;
		r = eh_recv(c, p + got, k, 0);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	return got;
}

/* ---- 1. several outstanding, read in order ---------------------------------------- */

static void test_window(void)
{
	static const size_t sz[] = { 2 * T + 3, 3 * T, T, 5 * T + 11 };
	struct eh_server s = { 0 };
	struct sdp_conn *cli, *srv;
	struct sdp_conn_stats a, b;
	struct wv w;
	uint8_t *dst;
	pthread_t th;
	size_t got;
	ssize_t k;

	REQUIRE_OK(eh_listen(&s));
	REQUIRE_OK(pair(&s, &cli, &srv));
	REQUIRE((dst = wv_make_for_reader(&w, cli, sz, 4, 11)));

	/* All four elements advertised at once, nothing read yet. */
	eh_zc_fake_reader(srv, 1);
	a = eh_stats(cli);
	b = eh_stats(srv);
	REQUIRE(pthread_create(&th, NULL, wv_main, &w) == 0);
	CHECK(wait_held(srv, 4));
	CHECK_EQ(tx_live(cli), 4);
	CHECK_EQ(atomic_load(&sdp_zcopy_live_mrs), 4);
	pthread_mutex_lock(&cli->lock);
	CHECK_EQ(cli->zc_mode_tx, SDP_MODE_PIPELINED);	/* by itself */
	CHECK_EQ(cli->zc_peer_max_adverts, SDP_ZC_MAX_ADVERTS);
	pthread_mutex_unlock(&cli->lock);
	pthread_mutex_lock(&srv->lock);
	CHECK_EQ(srv->zc_mode_rx, SDP_MODE_PIPELINED);
	CHECK_EQ_U(sdp_conn_rx_avail_locked(srv), w.total);
	pthread_mutex_unlock(&srv->lock);

	/* A partial read of the first; then one recv finishing it and
	 * reading the second whole (but not a sliver of the third). */
	CHECK_EQ(eh_recv(srv, dst, 2 * T, 0), 2 * T);
	CHECK_EQ(held(srv), 4);
	k = eh_recv(srv, dst + 2 * T, 4 * T, 0);
	CHECK_EQ(k, 3 + 3 * T);
	got = 2 * T + (k > 0 ? (size_t)k : 0);
	CHECK_EQ(held(srv), 2);
	got = read_into(srv, dst, got, w.total, 3 * T);
	wv_check_arrived(&w, th, dst, got);
	CHECK_EQ_U(eh_stats(cli).zc_tx_adverts - a.zc_tx_adverts, 4);
	CHECK_EQ_U(eh_stats(cli).zc_tx_bytes - a.zc_tx_bytes, w.total);
	CHECK_EQ_U(eh_stats(cli).zc_tx_declined, a.zc_tx_declined);
	CHECK_OP(eh_stats(cli).zc_tx_peak, >=, 4);
	CHECK_OP(eh_stats(srv).zc_rx_peak, >=, 4);
	CHECK_EQ_U(eh_stats(srv).zc_rx_bytes - b.zc_rx_bytes, w.total);
	CHECK_MRS_RELEASED();
	free(w.mem);
	free(dst);

	/* Small elements between large ones: BCopy for those, in order. */
	{
		static const size_t mix[] = { 100, 2 * T, 50, 3 * T, 4 * T, 7 };

		REQUIRE((dst = wv_make_for_reader(&w, cli, mix, 6, 12)));
		a = eh_stats(cli);
		REQUIRE(pthread_create(&th, NULL, wv_main, &w) == 0);
		got = read_into(srv, dst, 0, w.total, 5 * T);
		wv_check_arrived(&w, th, dst, got);
		CHECK_EQ_U(eh_stats(cli).zc_tx_adverts - a.zc_tx_adverts, 3);
		CHECK_EQ_U(eh_stats(cli).zc_tx_bytes - a.zc_tx_bytes, 9 * T);
		free(w.mem);
		free(dst);
	}

	/* The peer's MaxAdverts (as if it announced 2): never more than two
	 * out; the next goes as the first is read. */
	set_peer_max(cli, 2);
	{
		static const size_t five[] = { T, 2 * T, T, 3 * T, T };

		REQUIRE((dst = wv_make_for_reader(&w, cli, five, 5, 13)));
		a = eh_stats(cli);
		REQUIRE(pthread_create(&th, NULL, wv_main, &w) == 0);
		CHECK(wait_held(srv, 2));
		CHECK_EQ(tx_live(cli), 2);
		CHECK_EQ_U(eh_stats(cli).zc_tx_adverts - a.zc_tx_adverts, 2);
		got = read_into(srv, dst, 0, w.total, 2 * T);
		wv_check_arrived(&w, th, dst, got);
		CHECK_EQ_U(eh_stats(cli).zc_tx_adverts - a.zc_tx_adverts, 5);
		free(w.mem);
		free(dst);
	}
	set_peer_max(cli, SDP_ZC_MAX_ADVERTS);

	/* One large buffer advertised in pieces (SDP_ZCOPY_SPLIT). */
	sdp_cfg.zcopy_split = 2 * T;
	{
		static const size_t one[] = { 8 * T + 5 };

		REQUIRE((dst = wv_make_for_reader(&w, cli, one, 1, 14)));
		a = eh_stats(cli);
		REQUIRE(pthread_create(&th, NULL, wv_main, &w) == 0);
		CHECK(wait_held(srv, 4));
		got = read_into(srv, dst, 0, w.total, w.total);
		wv_check_arrived(&w, th, dst, got);
		CHECK_EQ_U(eh_stats(cli).zc_tx_adverts - a.zc_tx_adverts, 4);
		free(w.mem);
		free(dst);
	}
	sdp_cfg.zcopy_split = 0;
	eh_zc_fake_reader(srv, -1);

	CHECK_EQ(eh_state(cli), SDP_ST_ESTABLISHED);
	CHECK_EQ(eh_state(srv), SDP_ST_ESTABLISHED);
	CHECK_MRS_RELEASED();
	sdp_conn_close(cli, 0);
	sdp_conn_close(srv, 0);
	eh_unlisten(&s);
	CHECK_ALL_RELEASED();
}

/* A peer announcing MaxAdverts 1 (OFED): no ModeChange, one SrcAvail at a
 * time with inline bytes (Combined), even for a writev of several. */
static void test_peer_max_one(void)
{
	static const size_t three[] = { 2 * T, 3 * T, T };
	struct eh_server s = { 0 };
	struct sdp_conn *cli, *srv;
	struct sdp_conn_stats a;
	struct wv w;
	uint8_t *dst;
	pthread_t th;

	REQUIRE_OK(eh_listen(&s));
	REQUIRE_OK(pair(&s, &cli, &srv));
	set_peer_max(cli, 1);
	REQUIRE((dst = wv_make_for_reader(&w, cli, three, 3, 15)));
	eh_zc_fake_reader(srv, 1);
	a = eh_stats(cli);
	REQUIRE(pthread_create(&th, NULL, wv_main, &w) == 0);
	CHECK(wait_held(srv, 1));
	CHECK_EQ(tx_live(cli), 1);
	CHECK_EQ_U(eh_stats(cli).zc_tx_adverts - a.zc_tx_adverts, 1);
	CHECK_EQ(read_into(srv, dst, 0, w.total, w.total), w.total);
	CHECK(eh_join(th, NULL, 10000) == 0);
	CHECK_EQ(w.ret, w.total);
	CHECK(!memcmp(w.mem, dst, w.total));
	CHECK_EQ_U(eh_stats(cli).zc_tx_adverts - a.zc_tx_adverts, 3);
	CHECK_EQ_U(eh_stats(cli).zc_tx_peak, 1);
	CHECK_EQ_U(eh_stats(cli).zc_mode_changes, 0);
	CHECK_EQ_U(eh_stats(cli).zc_tx_bytes - a.zc_tx_bytes,
		   w.total - 3 * SDP_ZC_INLINE);
	pthread_mutex_lock(&cli->lock);
	CHECK_EQ(cli->zc_mode_tx, SDP_MODE_COMBINED);
	pthread_mutex_unlock(&cli->lock);
	eh_zc_fake_reader(srv, -1);
	free(w.mem);
	free(dst);
	CHECK_MRS_RELEASED();
	sdp_conn_close(cli, 0);
	sdp_conn_close(srv, 0);
	eh_unlisten(&s);
	CHECK_ALL_RELEASED();
}

/* ---- 2. a decline in the middle ----------------------------------------------------- */

static void test_decline_middle(void)
{
	static const size_t four[] = { 2 * T, 2 * T, 2 * T, 2 * T };
	struct eh_server s = { 0 };
	struct sdp_conn *cli, *srv;
	struct sdp_conn_stats a, b;
	struct wv w;
	uint8_t *dst;
	pthread_t th;
	size_t got;

	REQUIRE_OK(eh_listen(&s));
	REQUIRE_OK(pair(&s, &cli, &srv));

	/* The first read whole and half the second, then a recv buffer
	 * below the threshold: all held are declined at once, the rest
	 * (half of the second, the third, the fourth) comes by BCopy. */
	REQUIRE((dst = wv_make_for_reader(&w, cli, four, 4, 21)));
	eh_zc_fake_reader(srv, 1);
	a = eh_stats(cli);
	b = eh_stats(srv);
	REQUIRE(pthread_create(&th, NULL, wv_main, &w) == 0);
	CHECK(wait_held(srv, 4));
	CHECK_EQ(eh_recv(srv, dst, 3 * T, 0), 3 * T);
	CHECK_EQ(eh_recv(srv, dst + 3 * T, 100, 0), 100);
	CHECK_EQ(held(srv), 0);
	got = read_into(srv, dst, 3 * T + 100, w.total, 1000);
	wv_check_arrived(&w, th, dst, got);
	CHECK_EQ_U(eh_stats(cli).zc_tx_declined - a.zc_tx_declined, 1);
	CHECK_EQ_U(eh_stats(srv).zc_rx_declined - b.zc_rx_declined, 1);
	CHECK_EQ_U(eh_stats(cli).zc_tx_bytes - a.zc_tx_bytes, 3 * T);
	CHECK_MRS_RELEASED();
	free(w.mem);
	free(dst);

	/* An advertisement crossing the sink's SendSm: two out (MaxAdverts
	 * 2); the sink reads the first, the source advertises the third;
	 * before it arrives the sink declines the second.  The third was
	 * sent before the source saw that SendSm: declined on arrival with
	 * its own SendSm; all the rest comes by BCopy, in order. */
	set_peer_max(cli, 2);
	REQUIRE((dst = wv_make_for_reader(&w, cli, four, 4, 22)));
	a = eh_stats(cli);
	b = eh_stats(srv);
	REQUIRE(pthread_create(&th, NULL, wv_main, &w) == 0);
	CHECK(wait_held(srv, 2));
	pthread_mutex_lock(&srv->lock);	/* the third cannot arrive */
	{
		struct iovec v = { dst, 2 * T };
		uint64_t end = eh_now_ms() + (uint64_t)eh_ms(5000);

		CHECK_EQ(sdp_zcopy_read_locked(srv, &v, 1, 0, 2 * T, 0), 2 * T);
		while (eh_stats(cli).zc_tx_adverts - a.zc_tx_adverts < 3 &&
		       eh_now_ms() < end)
			eh_pause();
		CHECK_EQ_U(eh_stats(cli).zc_tx_adverts - a.zc_tx_adverts, 3);
		CHECK_EQ(sdp_zcopy_rx_held(srv), 1);
		sdp_zcopy_decline_locked(srv);
		CHECK_EQ(sdp_zcopy_rx_held(srv), 0);
	}
	pthread_mutex_unlock(&srv->lock);
	got = read_into(srv, dst, 2 * T, w.total, 3 * T);
	wv_check_arrived(&w, th, dst, got);
	CHECK_EQ_U(eh_stats(srv).zc_rx_declined - b.zc_rx_declined, 2);
	CHECK_EQ_U(eh_stats(cli).zc_tx_declined - a.zc_tx_declined, 2);
	CHECK_EQ_U(eh_stats(cli).zc_tx_bytes - a.zc_tx_bytes, 2 * T);
	set_peer_max(cli, SDP_ZC_MAX_ADVERTS);
	eh_zc_fake_reader(srv, -1);
	free(w.mem);
	free(dst);

	CHECK_EQ(eh_state(cli), SDP_ST_ESTABLISHED);
	CHECK_EQ(eh_state(srv), SDP_ST_ESTABLISHED);
	CHECK_MRS_RELEASED();
	sdp_conn_close(cli, 0);
	sdp_conn_close(srv, 0);
	eh_unlisten(&s);
	CHECK_ALL_RELEASED();
}

/* ---- 3. cancel with several outstanding ----------------------------------------------- */

static void test_cancel_window(void)
{
	static const size_t four[] = { 2 * T, 2 * T, 2 * T, 2 * T };
	struct eh_server s = { 0 };
	struct sdp_conn *cli, *srv;
	struct sdp_conn_stats a;
	struct wv w;
	uint8_t *dst;
	pthread_t th;

	REQUIRE_OK(eh_listen(&s));
	REQUIRE_OK(pair(&s, &cli, &srv));

	/* Send timeout with four held, half the first read: one
	 * SrcAvailCancel for all, the sink reports the read part and
	 * declines the rest; send() returns what was read. */
	REQUIRE((dst = wv_make_for_reader(&w, cli, four, 4, 31)));
	w.timeout_ms = eh_ms(1000);
	eh_zc_fake_reader(srv, 1);
	a = eh_stats(cli);
	REQUIRE(pthread_create(&th, NULL, wv_main, &w) == 0);
	CHECK(wait_held(srv, 4));
	CHECK_EQ(eh_recv(srv, dst, T, 0), T);
	CHECK(eh_join(th, NULL, 10000) == 0);
	CHECK_EQ(w.ret, T);
	CHECK_EQ_U(eh_stats(cli).zc_tx_cancels - a.zc_tx_cancels, 1);
	CHECK_EQ_U(eh_stats(cli).zc_tx_declined - a.zc_tx_declined, 1);
	CHECK_EQ(held(srv), 0);
	CHECK_MRS_RELEASED();
	pthread_mutex_lock(&srv->lock);
	CHECK_EQ_U(sdp_conn_rx_avail_locked(srv), 0);	/* nothing more */
	pthread_mutex_unlock(&srv->lock);
	CHECK(!memcmp(w.mem, dst, T));

	/* The application sends the rest: the stream goes on, exactly. */
	{
		struct iovec rest[4];
		int n = 0;

		rest[n].iov_base = w.mem + T;
		rest[n++].iov_len = T;
		for (int i = 1; i < 4; i++) {
			rest[n].iov_base = w.mem + 2 * T * (size_t)i;
			rest[n++].iov_len = 2 * T;
		}
		memcpy(w.iov, rest, sizeof(rest));
		w.n = n;
		w.timeout_ms = eh_ms(10000);
		REQUIRE(pthread_create(&th, NULL, wv_main, &w) == 0);
		CHECK_EQ(read_into(srv, dst, T, w.total, 3 * T), w.total);
		CHECK(eh_join(th, NULL, 10000) == 0);
		CHECK_EQ(w.ret, w.total - T);
		CHECK(!memcmp(w.mem, dst, w.total));
	}
	free(w.mem);
	free(dst);

	/* A SrcAvailCancel that came while a READ was in flight (the loop
	 * transport completes READs at once: marked by hand) applies to
	 * all held: the READ's bytes are reported, the rest declined with
	 * one SendSm, and comes by BCopy. */
	REQUIRE((dst = wv_make_for_reader(&w, cli, four, 4, 32)));
	a = eh_stats(cli);
	REQUIRE(pthread_create(&th, NULL, wv_main, &w) == 0);
	CHECK(wait_held(srv, 4));
	pthread_mutex_lock(&srv->lock);
	{
		struct iovec v = { dst, 3 * T };

		srv->zc_rx.cancel_rcvd = 1;
		CHECK_EQ(sdp_zcopy_read_locked(srv, &v, 1, 0, 3 * T, 0), 2 * T);
		CHECK_EQ(sdp_zcopy_rx_held(srv), 0);
	}
	pthread_mutex_unlock(&srv->lock);
	CHECK_EQ(read_into(srv, dst, 2 * T, w.total, 3 * T), w.total);
	CHECK(eh_join(th, NULL, 10000) == 0);
	CHECK_EQ(w.ret, w.total);
	CHECK(!memcmp(w.mem, dst, w.total));
	CHECK_EQ_U(eh_stats(cli).zc_tx_declined - a.zc_tx_declined, 1);
	CHECK_EQ_U(eh_stats(cli).zc_tx_bytes - a.zc_tx_bytes, 2 * T);
	eh_zc_fake_reader(srv, -1);
	free(w.mem);
	free(dst);

	CHECK_EQ(eh_state(cli), SDP_ST_ESTABLISHED);
	CHECK_EQ(eh_state(srv), SDP_ST_ESTABLISHED);
	CHECK_MRS_RELEASED();
	sdp_conn_close(cli, 0);
	sdp_conn_close(srv, 0);
	eh_unlisten(&s);
	CHECK_ALL_RELEASED();
}

/* ---- 4. abort / peer death / close with several outstanding ----------------------------- */

static void test_abort_window(void)
{
	static const size_t four[] = { 2 * T, 3 * T, 2 * T, 4 * T };
	struct eh_server s = { 0 };
	struct sdp_conn *cli, *srv;
	struct wv w;
	pthread_t th;

	REQUIRE_OK(eh_listen(&s));
	for (int k = 0; k < 3; k++) {
		REQUIRE_OK(pair(&s, &cli, &srv));
		REQUIRE(wv_make(&w, cli, four, 4, 40 + (uint64_t)k));
		w.timeout_ms = eh_ms(20000);
		eh_zc_fake_reader(srv, 1);
		REQUIRE(pthread_create(&th, NULL, wv_main, &w) == 0);
		CHECK(wait_held(srv, 4));
		CHECK_EQ(atomic_load(&sdp_zcopy_live_mrs), 4);
		if (k == 0) {
			/* The sink aborts (SO_LINGER 0). */
			sdp_conn_close(srv, 1);
		} else if (k == 1) {
			/* The link dies. */
			pthread_mutex_lock(&srv->lock);
			sdp_loop_qp_error(srv->qp);
			pthread_mutex_unlock(&srv->lock);
		} else {
			/* The source is aborted under its own send. */
			sdp_conn_get(cli);
			sdp_conn_close(cli, 1);
		}
		REQUIRE(eh_join(th, NULL, 10000) == 0);
		/* The orphan (k == 0) declines before its AbortConn: the
		 * rest may have gone by BCopy before the reset came. */
		if (!(w.ret == -ECONNRESET ||
		      (k == 0 && w.ret >= 0 && w.ret <= (ssize_t)w.total))) {
			printf("#   case %d: send returned %zd\n", k, w.ret);
			g_checks_failed++;
		}
		CHECK_MRS_RELEASED();
		CHECK(eh_poll_until(is_reset, k == 2 ? srv : cli, 5000));
		if (k == 2) {
			sdp_conn_put(cli);
		} else {
			sdp_conn_close(cli, 0);
		}
		if (k) {
			eh_zc_fake_reader(srv, -1);
			sdp_conn_close(srv, 0);
		}
		free(w.mem);
	}
	eh_unlisten(&s);
	CHECK_MRS_RELEASED();
	CHECK_ALL_RELEASED();
}

/* ---- 5. malformed sequences ------------------------------------------------------------- */

static int post_raw(struct sdp_conn *from, uint8_t mid, uint32_t h_len,
		    uint32_t sa_len, const void *payload, uint32_t plen)
{
	struct sdp_msg m;
	struct sdp_sge sg = { (uint64_t)(uintptr_t)payload, plen, 0 };
	uint64_t end = eh_now_ms() + (uint64_t)eh_ms(5000);
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
	for (;;) {	/* wait for a credit if need be */
		pthread_mutex_lock(&from->lock);
		sdp_conn_progress_locked(from);
		r = sdp_tx_post_msg_locked(from, &m, plen ? &sg : NULL,
					   plen ? 1 : 0, plen);
		pthread_mutex_unlock(&from->lock);
		if (r != -EAGAIN || eh_now_ms() >= end)
			return r;
		eh_pause();
	}
}

/* Put cli's send half in Pipelined mode with one real two-element writev. */
static void go_pipelined(struct sdp_conn *cli, struct sdp_conn *srv)
{
	static const size_t two[] = { T, T };
	struct wv w;
	uint8_t *dst = malloc(2 * T);
	pthread_t th;

	REQUIRE(dst && wv_make(&w, cli, two, 2, 50));
	REQUIRE(pthread_create(&th, NULL, wv_main, &w) == 0);
	CHECK_EQ(read_into(srv, dst, 0, 2 * T, 2 * T), 2 * T);
	CHECK(eh_join(th, NULL, 10000) == 0);
	CHECK(!memcmp(w.mem, dst, 2 * T));
	pthread_mutex_lock(&cli->lock);
	CHECK_EQ(cli->zc_mode_tx, SDP_MODE_PIPELINED);
	pthread_mutex_unlock(&cli->lock);
	free(w.mem);
	free(dst);
}

static void test_violations(void)
{
	static const size_t four[] = { 2 * T, 2 * T, 2 * T, 2 * T };
	struct eh_server s = { 0 };
	struct sdp_conn *cli, *srv;
	struct wv w;
	pthread_t th;

	REQUIRE_OK(eh_listen(&s));

	/* RdmaRdCompl: two advertisements' worth is accepted (oldest
	 * first), then more than the two left is a reset, not a crash. */
	REQUIRE_OK(pair(&s, &cli, &srv));
	REQUIRE(wv_make(&w, cli, four, 4, 60));
	w.timeout_ms = eh_ms(20000);
	eh_zc_fake_reader(srv, 1);
	REQUIRE(pthread_create(&th, NULL, wv_main, &w) == 0);
	CHECK(wait_held(srv, 4));
	CHECK_EQ(post_raw(srv, SDP_MID_RDMA_RD_COMPL, 4 * T, 0, NULL, 0), 0);
	{
		uint64_t end = eh_now_ms() + (uint64_t)eh_ms(5000);

		while (tx_live(cli) != 2 && eh_now_ms() < end)
			eh_pause();
	}
	CHECK_EQ(tx_live(cli), 2);
	CHECK_EQ(eh_state(cli), SDP_ST_ESTABLISHED);
	CHECK_EQ(post_raw(srv, SDP_MID_RDMA_RD_COMPL, 4 * T + 1, 0, NULL, 0), 0);
	REQUIRE(eh_join(th, NULL, 10000) == 0);
	CHECK(w.ret == -ECONNRESET || w.ret == 4 * T);
	CHECK(eh_poll_until(is_reset, cli, 5000));
	CHECK_REASON(cli, SDP_REASON_PROTOCOL);
	CHECK_MRS_RELEASED();
	eh_zc_fake_reader(srv, -1);
	sdp_conn_close(cli, 0);
	sdp_conn_close(srv, 1);
	free(w.mem);

	/* A SendSm covering only the first two (its MSeqAck is before the
	 * third: white-box, the sink's rx_mseq set back while it posts):
	 * two stay outstanding; RdmaRdCompl bytes after it would be out of
	 * order: reset. */
	REQUIRE_OK(pair(&s, &cli, &srv));
	REQUIRE(wv_make(&w, cli, four, 4, 61));
	w.timeout_ms = eh_ms(20000);
	eh_zc_fake_reader(srv, 1);
	REQUIRE(pthread_create(&th, NULL, wv_main, &w) == 0);
	CHECK(wait_held(srv, 4));
	{
		uint32_t second, saved;
		struct sdp_msg m;
		uint64_t end = eh_now_ms() + (uint64_t)eh_ms(5000);

		pthread_mutex_lock(&cli->lock);
		second = cli->zc_tx.adv[(cli->zc_tx.head + 1) %
					SDP_ZC_WINDOW].mseq;
		pthread_mutex_unlock(&cli->lock);
		memset(&m, 0, sizeof(m));
		m.bsdh.mid = SDP_MID_SEND_SM;
		pthread_mutex_lock(&srv->lock);
		saved = srv->rx_mseq;
		srv->rx_mseq = second;
		CHECK_EQ(sdp_tx_post_msg_locked(srv, &m, NULL, 0, 0), 0);
		srv->rx_mseq = saved;
		pthread_mutex_unlock(&srv->lock);
		while (tx_live(cli) != 2 && eh_now_ms() < end)
			eh_pause();
	}
	CHECK_EQ(tx_live(cli), 2);
	CHECK_EQ(eh_state(cli), SDP_ST_ESTABLISHED);
	CHECK_EQ(post_raw(srv, SDP_MID_RDMA_RD_COMPL, T, 0, NULL, 0), 0);
	REQUIRE(eh_join(th, NULL, 10000) == 0);
	CHECK_EQ(w.ret, -ECONNRESET);
	CHECK(eh_poll_until(is_reset, cli, 5000));
	CHECK_REASON(cli, SDP_REASON_PROTOCOL);
	CHECK_MRS_RELEASED();
	eh_zc_fake_reader(srv, -1);
	sdp_conn_close(cli, 0);
	sdp_conn_close(srv, 1);
	free(w.mem);

	/* More SrcAvails outstanding than our MaxAdverts. */
	REQUIRE_OK(pair(&s, &cli, &srv));
	go_pipelined(cli, srv);
	eh_zc_fake_reader(srv, 1);
	for (unsigned i = 0; i < SDP_ZC_MAX_ADVERTS; i++)
		CHECK_EQ(post_raw(cli, SDP_MID_SRC_AVAIL, 0, 2 * T, NULL, 0), 0);
	CHECK(wait_held(srv, SDP_ZC_MAX_ADVERTS));
	CHECK_EQ(eh_state(srv), SDP_ST_ESTABLISHED);
	CHECK_EQ(post_raw(cli, SDP_MID_SRC_AVAIL, 0, 2 * T, NULL, 0), 0);
	eh_progress(srv);
	CHECK(eh_poll_until(is_reset, srv, 5000));
	CHECK_REASON(srv, SDP_REASON_PROTOCOL);
	eh_zc_fake_reader(srv, -1);
	sdp_conn_close(cli, 1);
	sdp_conn_close(srv, 1);

	/* Data between advertisements. */
	REQUIRE_OK(pair(&s, &cli, &srv));
	go_pipelined(cli, srv);
	eh_zc_fake_reader(srv, 1);
	CHECK_EQ(post_raw(cli, SDP_MID_SRC_AVAIL, 0, 2 * T, NULL, 0), 0);
	CHECK_EQ(post_raw(cli, SDP_MID_SRC_AVAIL, 0, 2 * T, NULL, 0), 0);
	CHECK(wait_held(srv, 2));
	CHECK_EQ(post_raw(cli, SDP_MID_DATA, 0, 0, "x", 1), 0);
	eh_progress(srv);
	CHECK(eh_poll_until(is_reset, srv, 5000));
	CHECK_REASON(srv, SDP_REASON_PROTOCOL);
	eh_zc_fake_reader(srv, -1);
	sdp_conn_close(cli, 1);
	sdp_conn_close(srv, 1);

	/* SendSm with none outstanding after a window ended: reset. */
	REQUIRE_OK(pair(&s, &cli, &srv));
	go_pipelined(cli, srv);
	pthread_mutex_lock(&cli->lock);
	cli->zc_sendsm_grace = 0;
	pthread_mutex_unlock(&cli->lock);
	CHECK_EQ(post_raw(srv, SDP_MID_SEND_SM, 0, 0, NULL, 0), 0);
	eh_progress(cli);
	CHECK(eh_poll_until(is_reset, cli, 5000));
	CHECK_REASON(cli, SDP_REASON_PROTOCOL);
	sdp_conn_close(cli, 1);
	sdp_conn_close(srv, 1);

	CHECK_MRS_RELEASED();
	eh_unlisten(&s);
	CHECK_ALL_RELEASED();
}

static const struct eh_test tests[] = {
	{ "writev: several SrcAvails out at once, read in order; mixed "
	  "elements; peer MaxAdverts; split", test_window },
	{ "peer MaxAdverts 1: Combined, one at a time", test_peer_max_one },
	{ "decline in the middle; an advertisement crossing the SendSm",
	  test_decline_middle },
	{ "send timeout cancels several at once", test_cancel_window },
	{ "abort / link death / source closed with several outstanding",
	  test_abort_window },
	{ "malformed sequences with several outstanding reset",
	  test_violations },
	{ NULL, NULL },
};

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* Cancels here come from the send timeout only. */
	setenv("SDP_ZCOPY_ADV_TIMEOUT_MS", "30000", 1);
	eh_setup_env();
	eh_run_all(tests);
	return eh_done();
}
