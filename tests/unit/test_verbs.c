/* SPDX-License-Identifier: MIT */
/*
 * test_verbs.c — the verbs transport on a real RDMA device (soft-RoCE in
 * the VM suite: scripts/vm-run).  Exits 77 (SKIP) when the build has no
 * verbs transport or the machine no RDMA device.
 *
 * Addresses: SDP_VERBS_SERVER (default 10.99.0.2) and SDP_VERBS_CLIENT
 * (default 10.99.0.1), both local, on RDMA devices.
 *
 * Walks the transport contract directly, without the engine: a refused
 * connect, the Hello/HelloAck through the CM private data, SENDs from
 * unregistered memory reused at once (inline and ring copies), RDMA WRITE
 * and READ, a blocked wait() woken by a completion, and teardown flushes.
 * Then, with the engine on the other end, a hostile peer whose SrcAvail
 * names memory it never registered: the engine's RDMA READ fails and puts
 * its QP in error, which the application must see as ECONNRESET.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/config.h"
#include "engine/conn.h"
#include "engine/listener.h"
#include "base/sigseen.h"
#include "engine/zcopy.h"
#include "transport/multi.h"
#include "transport/transport.h"
#include "wire/wire.h"

static int failures, checks;

/* Each macro evaluates `cond` exactly once. */
#define CHECK(cond, ...) check_((cond) != 0, __LINE__, #cond, __VA_ARGS__)
#define REQUIRE(cond, ...)                                                    \
	do {                                                                  \
		if (!CHECK(cond, __VA_ARGS__))                                \
			exit(1);                                              \
	} while (0)

__attribute__((format(printf, 4, 5), unused))
static int check_(int ok, int line, const char *what, const char *fmt, ...)
{
	va_list ap;

	checks++;
	if (ok)
		return 1;
	failures++;
	printf("not ok - line %d: %s: ", line, what);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	return 0;
}

#ifdef SDP_HAVE_VERBS
#define OPS (sdp_verbs_transport.ops)
#define NBUF 8
#define BUFSZ 32784

static struct sockaddr_in mkaddr(const char *env, const char *dflt,
				 uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(port) };
	const char *s = getenv(env);

	inet_pton(AF_INET, s && *s ? s : dflt, &a.sin_addr);
	return a;
}

static uint64_t ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Poll until n completions (or timeout); returns how many. */
static int poll_n(struct sdp_qp *qp, struct sdp_wc *wc, int n, int tmo_ms)
{
	uint64_t end = ms() + (uint64_t)tmo_ms;
	int got = 0, r;

	while (got < n && ms() < end) {
		uint32_t seq = OPS->wait_seq(qp);

		r = OPS->poll_cq(qp, wc + got, n - got);
		if (r > 0) {
			got += r;
			continue;
		}
		OPS->wait(qp, seq, 100);
	}
	return got;
}

static int get_event(struct sdp_qp *qp, struct sdp_cm_event *ev, int tmo_ms)
{
	uint64_t end = ms() + (uint64_t)tmo_ms;

	while (ms() < end) {
		uint32_t seq = OPS->wait_seq(qp);

		if (OPS->get_event(qp, ev) == 0)
			return 0;
		OPS->wait(qp, seq, 100);
	}
	return -ETIMEDOUT;
}

static struct sdp_qp *new_qp(void)
{
	struct sdp_qp_attr attr = { .max_send_wr = 64, .max_recv_wr = NBUF,
				    .recv_region_size = NBUF * BUFSZ };
	struct sdp_qp *qp;
	struct sdp_mr *rm;
	int i, r;

	r = OPS->create_qp(&attr, &qp);
	REQUIRE(r == 0, "create_qp %d", r);
	rm = OPS->recv_region(qp);
	for (i = 0; i < NBUF; i++) {
		struct sdp_recv_wr w = {
			.wr_id = (uint64_t)i,
			.sge = { .addr = (uint64_t)(uintptr_t)rm->addr +
					 (uint64_t)i * BUFSZ,
				 .length = BUFSZ, .lkey = rm->lkey },
		};
		r = OPS->post_recv(qp, &w);
		REQUIRE(r == 0, "post_recv %d", r);
	}
	return qp;
}

static void test_refused(void)
{
	struct sockaddr_in dst = mkaddr("SDP_VERBS_SERVER", "10.99.0.2", 1);
	uint8_t hello[92] = { 0 };
	struct sdp_cm_event ev;
	struct sdp_qp *qp = new_qp();
	uint64_t t0 = ms();
	int r;

	r = OPS->connect(qp, NULL, (struct sockaddr *)&dst, sizeof(dst), hello,
			 sizeof(hello));
	CHECK(r == 0, "connect %d", r);
	r = get_event(qp, &ev, 5000);
	CHECK(r == 0 && ev.type == SDP_CM_REJECTED && ev.err == -ECONNREFUSED,
	      "r=%d type=%d err=%d", r, ev.type, ev.err);
	CHECK(ms() - t0 < 3000, "refusal took %llu ms",
	      (unsigned long long)(ms() - t0));
	printf("# refused in %llu ms\n", (unsigned long long)(ms() - t0));
	OPS->destroy_qp(qp);
}

struct waiter {
	struct sdp_qp *qp;
	uint32_t seq;
	int r;
};

static void *wait_thread(void *arg)
{
	struct waiter *w = arg;

	w->r = OPS->wait(w->qp, w->seq, 5000);
	return NULL;
}

static void send_buf(struct sdp_qp *qp, uint8_t *buf, uint32_t len)
{
	struct sdp_sge sg = { .addr = (uint64_t)(uintptr_t)buf, .length = len };
	struct sdp_send_wr w = { .wr_id = 99, .opcode = SDP_WR_SEND,
				 .flags = SDP_SEND_INLINE, .sg_list = &sg,
				 .num_sge = 1 };
	int r = OPS->post_send(qp, &w);

	CHECK(r == 0, "post_send(%u) %d", len, r);
	memset(buf, 0xEE, len);	/* reusable on return */
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* What the library's signal trampoline does (socket/signals.c). */
static void on_usr1(int sig)
{
	(void)sig;
	sdp_sig_seen++;
	sdp_sig_seen_norestart++;
}

struct rdma_waiter {
	struct sdp_qp *qp;
	uint32_t seq;
	int r;
	uint64_t took_ms;
	_Atomic int started;
};

static void *wait_rdma_thread(void *arg)
{
	struct rdma_waiter *w = arg;
	uint64_t t0 = ms();

	atomic_store(&w->started, 1);
	w->r = OPS->wait_rdma(w->qp, w->seq, 5000, mono_ns(), 0);
	w->took_ms = ms() - t0;
	return NULL;
}

/*
 * wait_rdma(), with SDP_VERBS_RDMA_SPIN_US at 1 s (main()), so that a
 * poll lasts each case through: the completion of an RDMA READ in flight
 * ends it, found by polling (0) when no due time is given, and waking it
 * from its sleep (1) when the due time is far ahead; with nothing due it
 * keeps to its timeout, not to its budget; and a signal handler that runs
 * while it polls ends it with EINTR, as the futex sleep would (else the
 * signal is lost: it sleeps to the timeout).  `rd` is the READ just done
 * into `back` from `src`.  News already there when it is called is
 * "found polling" (0): it slept for none of it.
 */
static void test_wait_rdma(struct sdp_qp *a, struct sdp_send_wr *rd,
			   uint8_t *back, const uint8_t *src, size_t len)
{
	struct rdma_waiter w = { .qp = a };
	struct sigaction sa = { .sa_handler = on_usr1 }, old;
	struct sdp_wc wc[1];
	uint64_t t0;
	pthread_t th;
	int r;

	REQUIRE(OPS->wait_rdma, "verbs has wait_rdma");
	/* Due in 60 s: it sleeps until 45 s, and the READ wakes it (1).  A
	 * READ that completes before the wait first looks is found (0): the
	 * same READ is posted again until one is slower than that, at most
	 * 8 times. */
	for (int due_far = 0, tries = 0, woke; due_far < 2; tries++) {
		uint64_t now, took;

		memset(back, 0, len);
		rd->wr_id = 10;
		w.seq = OPS->wait_seq(a);
		CHECK(OPS->post_send(a, rd) == 0, "rdma read for wait_rdma");
		now = mono_ns();
		r = OPS->wait_rdma(a, w.seq, 30000, now,
				   due_far ? now + 60000000000ull : 0);
		took = (mono_ns() - now) / 1000000u;
		woke = r;
		if (!due_far)
			CHECK(r == 0, "wait_rdma on a READ in flight, due "
			      "unknown: %d", r);
		else if (r == 1 || tries == 8)
			CHECK(r == 1 && took < 5000, "wait_rdma on a READ in "
			      "flight, due in 60 s: %d after %llu ms (try %d)",
			      r, (unsigned long long)took, tries);
		else
			CHECK(r == 0 && took < 5000, "wait_rdma on a READ done "
			      "before it looked, due in 60 s: %d", r);
		r = poll_n(a, wc, 1, 5000);
		CHECK(r == 1 && wc[0].status == SDP_WC_SUCCESS &&
		      wc[0].wr_id == 10, "wait_rdma READ wc r=%d st=%d", r,
		      wc[0].status);
		CHECK(!memcmp(src, back, len), "wait_rdma READ data");
		if (!due_far || woke == 1 || tries == 8) {
			due_far++;
			tries = 0;
		}
	}

	r = OPS->wait_rdma(a, OPS->wait_seq(a) - 1, 5000, mono_ns(), 0);
	CHECK(r == 0, "wait_rdma with its news already there: %d", r);

	t0 = ms();
	r = OPS->wait_rdma(a, OPS->wait_seq(a), 50, mono_ns(), 0);
	t0 = ms() - t0;
	CHECK(r == -ETIMEDOUT && t0 >= 40 && t0 < 1000,
	      "wait_rdma with nothing due, 50 ms: %d after %llu ms", r,
	      (unsigned long long)t0);

	sigemptyset(&sa.sa_mask);	/* no SA_RESTART */
	sigaction(SIGUSR1, &sa, &old);
	w.seq = OPS->wait_seq(a);
	pthread_create(&th, NULL, wait_rdma_thread, &w);
	while (!atomic_load(&w.started))
		usleep(1000);
	usleep(100000);		/* well inside its 1 s of polling */
	pthread_kill(th, SIGUSR1);
	pthread_join(th, NULL);
	sigaction(SIGUSR1, &old, NULL);
	CHECK(w.r == -EINTR && w.took_ms < 900,
	      "wait_rdma and a signal while it polls: %d after %llu ms", w.r,
	      (unsigned long long)w.took_ms);
}

static void test_connection(void)
{
	struct sockaddr_in srv = mkaddr("SDP_VERBS_SERVER", "10.99.0.2", 0);
	struct sockaddr_in cli = mkaddr("SDP_VERBS_CLIENT", "10.99.0.1", 0);
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	struct sdp_listener *l, *local;
	struct sdp_conn_req *req;
	struct sdp_cm_event ev;
	struct sdp_qp *a, *p;
	struct sdp_wc wc[16];
	uint8_t hello[92], ack[196], priv[256], *big;
	uint32_t plen = sizeof(priv);
	struct pollfd pfd;
	int r, i;

	REQUIRE(OPS->bind((struct sockaddr *)&srv, sizeof(srv), &l) == 0,
		"bind server");
	OPS->bound_addr(l, &ss, &sl);
	srv.sin_port = ((struct sockaddr_in *)&ss)->sin_port;
	REQUIRE(ntohs(srv.sin_port) != 0, "port");
	REQUIRE(OPS->listen(l, 16) == 0, "listen");
	REQUIRE(OPS->bind((struct sockaddr *)&cli, sizeof(cli), &local) == 0,
		"bind client");

	for (i = 0; i < 92; i++)
		hello[i] = (uint8_t)(i + 1);
	a = new_qp();
	r = OPS->connect(a, local, (struct sockaddr *)&srv, sizeof(srv), hello,
			 sizeof(hello));
	REQUIRE(r == 0, "connect %d", r);

	pfd.fd = OPS->listener_fd(l);
	pfd.events = POLLIN;
	CHECK(poll(&pfd, 1, 5000) == 1, "listener fd not readable");
	r = OPS->get_request(l, &req, priv, &plen);
	REQUIRE(r == 0, "get_request %d", r);
	CHECK(plen == 92, "Hello %u bytes", plen);
	CHECK(!memcmp(priv, hello, 17) && !memcmp(priv + 18, hello + 18, 10),
	      "Hello BSDH/HH bytes changed");
	CHECK(priv[17] == (0x40 | (hello[17] & 0x0f)), "IPV byte %#x", priv[17]);
	CHECK(!memcmp(priv + 44, &cli.sin_addr, 4), "source IP");
	CHECK(!memcmp(priv + 60, &srv.sin_addr, 4), "destination IP");

	p = new_qp();
	OPS->destroy_qp(p);	/* create/destroy without a connection */
	{
		struct sdp_qp_attr attr = { .max_send_wr = 64,
					    .max_recv_wr = NBUF,
					    .recv_region_size = NBUF * BUFSZ };
		struct sdp_mr *rm;

		r = OPS->create_qp_from_req(req, &attr, &p);
		REQUIRE(r == 0, "create_qp_from_req %d", r);
		rm = OPS->recv_region(p);
		for (i = 0; i < NBUF; i++) {
			struct sdp_recv_wr w = {
				.wr_id = (uint64_t)i,
				.sge = { .addr = (uint64_t)(uintptr_t)rm->addr +
						 (uint64_t)i * BUFSZ,
					 .length = BUFSZ, .lkey = rm->lkey },
			};
			REQUIRE(OPS->post_recv(p, &w) == 0, "post_recv");
		}
	}
	for (i = 0; i < 196; i++)
		ack[i] = (uint8_t)(200 - i);
	REQUIRE(OPS->accept(p, ack, sizeof(ack)) == 0, "accept");
	r = get_event(a, &ev, 5000);
	CHECK(r == 0 && ev.type == SDP_CM_ESTABLISHED, "r=%d type=%d", r,
	      ev.type);
	CHECK(ev.priv_len >= 196 && !memcmp(ev.priv, ack, 196),
	      "HelloAck (%u bytes) differs", ev.priv_len);

	/* SENDs: small (device inline), large (ring copy), zero length. */
	{
		struct waiter w = { .qp = p, .seq = OPS->wait_seq(p) };
		pthread_t th;
		uint8_t small[64];

		pthread_create(&th, NULL, wait_thread, &w);
		usleep(100000);
		memset(small, 0x5a, sizeof(small));
		send_buf(a, small, sizeof(small));
		pthread_join(th, NULL);
		CHECK(w.r == 0, "wait() woken: %d", w.r);
	}
	big = malloc(BUFSZ);
	for (i = 0; i < BUFSZ; i++)
		big[i] = (uint8_t)(i * 7);
	send_buf(a, big, BUFSZ);
	send_buf(a, big, 0);
	r = poll_n(p, wc, 3, 5000);
	CHECK(r == 3, "received %d of 3", r);
	CHECK(wc[0].status == SDP_WC_SUCCESS && wc[0].byte_len == 64 &&
	      wc[0].opcode == SDP_WC_RECV && wc[0].wr_id == 0, "wc0 %d %u",
	      wc[0].status, wc[0].byte_len);
	CHECK(wc[1].status == SDP_WC_SUCCESS && wc[1].byte_len == BUFSZ &&
	      wc[1].wr_id == 1, "wc1 %d %u", wc[1].status, wc[1].byte_len);
	CHECK(wc[2].byte_len == 0 && wc[2].wr_id == 2, "wc2");
	{
		uint8_t *rb = (uint8_t *)OPS->recv_region(p)->addr;
		int bad = 0;

		for (i = 0; i < 64; i++)
			bad += rb[i] != 0x5a;
		for (i = 0; i < BUFSZ; i++)
			bad += rb[BUFSZ + i] != (uint8_t)(i * 7);
		CHECK(bad == 0, "%d corrupted bytes", bad);
	}

	/* RDMA WRITE and READ between registered buffers. */
	{
		static uint8_t src[1 << 20], dst[1 << 20], back[1 << 20];
		struct sdp_mr *ms_, *md, *mb;
		struct sdp_sge sg;
		struct sdp_send_wr w;

		for (i = 0; i < (int)sizeof(src); i++)
			src[i] = (uint8_t)(i ^ (i >> 8));
		REQUIRE(OPS->reg_mr(a, src, sizeof(src), SDP_ACCESS_LOCAL_WRITE,
				    &ms_) == 0, "reg src");
		REQUIRE(OPS->reg_mr(p, dst, sizeof(dst),
				    SDP_ACCESS_LOCAL_WRITE |
				    SDP_ACCESS_REMOTE_WRITE |
				    SDP_ACCESS_REMOTE_READ, &md) == 0, "reg dst");
		REQUIRE(OPS->reg_mr(a, back, sizeof(back),
				    SDP_ACCESS_LOCAL_WRITE, &mb) == 0, "reg back");
		sg = (struct sdp_sge){ (uint64_t)(uintptr_t)src, sizeof(src),
				       ms_->lkey };
		w = (struct sdp_send_wr){ .wr_id = 7,
					  .opcode = SDP_WR_RDMA_WRITE,
					  .flags = SDP_SEND_SIGNALED,
					  .sg_list = &sg, .num_sge = 1,
					  .remote_addr = md->remote_addr,
					  .rkey = md->rkey };
		CHECK(OPS->post_send(a, &w) == 0, "rdma write");
		r = poll_n(a, wc, 1, 5000);
		CHECK(r == 1 && wc[0].status == SDP_WC_SUCCESS &&
		      wc[0].opcode == SDP_WC_RDMA_WRITE && wc[0].wr_id == 7,
		      "write wc r=%d st=%d", r, wc[0].status);
		CHECK(!memcmp(src, dst, sizeof(src)), "RDMA WRITE data");
		sg = (struct sdp_sge){ (uint64_t)(uintptr_t)back, sizeof(back),
				       mb->lkey };
		w.wr_id = 8;
		w.opcode = SDP_WR_RDMA_READ;
		CHECK(OPS->post_send(a, &w) == 0, "rdma read");
		r = poll_n(a, wc, 1, 5000);
		CHECK(r == 1 && wc[0].status == SDP_WC_SUCCESS &&
		      wc[0].opcode == SDP_WC_RDMA_READ &&
		      wc[0].byte_len == sizeof(back), "read wc r=%d st=%d len=%u",
		      r, wc[0].status, wc[0].byte_len);
		CHECK(!memcmp(src, back, sizeof(src)), "RDMA READ data");
		test_wait_rdma(a, &w, back, src, sizeof(back));
		/* Outside the registered range: remote access error. */
		w.wr_id = 9;
		w.remote_addr = md->remote_addr + sizeof(dst) - 16;
		CHECK(OPS->post_send(a, &w) == 0, "bad rdma read");
		r = poll_n(a, wc, 1, 5000);
		CHECK(r == 1 && wc[0].status != SDP_WC_SUCCESS,
		      "bad read: r=%d st=%d", r, wc[0].status);
		printf("# out-of-range READ: %s\n", sdp_wc_status_str(wc[0].status));
		OPS->dereg_mr(a, ms_);
		OPS->dereg_mr(a, mb);
		OPS->dereg_mr(p, md);
	}

	/* The active QP is in error now: both sides flush, the passive one
	 * learns of it (flushed receives and/or DISCONNECTED). */
	{
		int flushed = 0, disc = 0;
		uint64_t end = ms() + 10000;

		while (ms() < end && !(flushed && disc)) {
			uint32_t seq = OPS->wait_seq(p);

			r = OPS->poll_cq(p, wc, 16);
			for (i = 0; i < r; i++)
				flushed += wc[i].status == SDP_WC_WR_FLUSH_ERR;
			if (OPS->get_event(p, &ev) == 0 &&
			    ev.type == SDP_CM_DISCONNECTED)
				disc = 1;
			if (r <= 0)
				OPS->wait(p, seq, 100);
		}
		CHECK(flushed == NBUF - 3 + 0 || flushed >= 1,
		      "passive flushes %d", flushed);
		CHECK(disc, "no DISCONNECTED on the passive side");
	}
	OPS->destroy_qp(a);
	OPS->destroy_qp(p);
	OPS->close_listener(l);
	free(big);
}


/* A peer that advertises memory it does not have: a SrcAvail whose rkey
 * nobody registered.  The engine's RDMA READ (a recv() big enough for Read
 * ZCopy) completes in error and takes its QP to the error state: recv()
 * must fail with ECONNRESET, not hang; the connection must be released
 * (the read buffer's registration too), and the peer must see the
 * disconnect. */
#define INLINE_LEN 16
static void test_hostile_srcavail(void)
{
	struct sockaddr_in srv = mkaddr("SDP_VERBS_SERVER", "10.99.0.2", 0);
	struct sockaddr_in cli = mkaddr("SDP_VERBS_CLIENT", "10.99.0.1", 0);
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	struct sdp_listener *tl, *local;
	struct sdp_listen *lsn;
	struct sdp_conn *c = NULL;
	struct sdp_cm_event ev;
	struct sdp_hello hello;
	struct sdp_hello_ack ack;
	struct sdp_msg m;
	uint8_t priv[SDP_HELLO_SIZE], msg[64];
	struct iovec iov;
	struct sdp_qp *h;
	static const char inline_bytes[INLINE_LEN + 1] = "sixteen bytes ok";
	size_t total;
	uint64_t t0;
	ssize_t got;
	int r, n;

	sdp_config_init();
	REQUIRE(OPS->bind((struct sockaddr *)&srv, sizeof(srv), &tl) == 0,
		"bind server");
	OPS->bound_addr(tl, &ss, &sl);
	srv.sin_port = ((struct sockaddr_in *)&ss)->sin_port;
	REQUIRE(sdp_listen_create(tl, 16, NULL, &lsn) == 0, "engine listener");
	REQUIRE(OPS->bind((struct sockaddr *)&cli, sizeof(cli), &local) == 0,
		"bind client");

	h = new_qp();
	memset(&hello, 0, sizeof(hello));
	hello.bsdh.mid = SDP_MID_HELLO;
	hello.bsdh.bufs = NBUF;
	hello.bsdh.len = SDP_HELLO_SIZE;
	hello.major = SDP_VERSION_MAJOR;
	hello.minor = SDP_VERSION_MINOR;
	hello.ip_version = 4;
	hello.max_adverts = 1;
	hello.des_rem_rcv_sz = BUFSZ;
	hello.local_rcv_sz = BUFSZ;
	memcpy(hello.dst_ip + 12, &srv.sin_addr, 4);
	memcpy(hello.src_ip + 12, &cli.sin_addr, 4);
	n = sdp_wire_encode_hello(&hello, priv, sizeof(priv));
	REQUIRE(n == SDP_HELLO_SIZE, "encode Hello %d", n);
	r = OPS->connect(h, local, (struct sockaddr *)&srv, sizeof(srv), priv,
			 (uint32_t)n);
	REQUIRE(r == 0, "connect %d", r);
	r = sdp_listen_accept(lsn, 0, 20000, &c);
	REQUIRE(r == 0 && c, "engine accept %d", r);
	r = get_event(h, &ev, 10000);
	REQUIRE(r == 0 && ev.type == SDP_CM_ESTABLISHED, "established %d", r);
	r = sdp_wire_decode_hello_ack(ev.priv, ev.priv_len, &ack);
	REQUIRE(r == 0 && ack.bsdh.bufs > 0, "HelloAck %d, %u credits", r,
		ack.bsdh.bufs);
	/* The verbs provider's own receive buffers (transport.h
	 * recv_bufs_pref), unless the environment chose. */
	if (!getenv("SDP_RECV_BUFS") && !getenv("SDP_RECV_BUF_SIZE"))
		CHECK(ack.bsdh.bufs == 8 && ack.act_rcv_sz == 65536 + 16,
		      "HelloAck: %u buffers of %u bytes, want verbs' 8 of "
		      "65552", ack.bsdh.bufs, ack.act_rcv_sz);

	/* Combined mode: the first bytes inline, the rest to be read. */
	memset(&m, 0, sizeof(m));
	m.bsdh.mid = SDP_MID_SRC_AVAIL;
	m.bsdh.bufs = NBUF;
	m.bsdh.len = sdp_wire_hdr_size(SDP_MID_SRC_AVAIL) + INLINE_LEN;
	m.bsdh.mseq = 1;
	m.h.srcah.len = 256 * 1024;
	m.h.srcah.rkey = 0x00c0ffeeu;	/* registered by nobody */
	m.h.srcah.vaddr = 0x10000;
	n = sdp_wire_encode_hdr(&m, msg, sizeof(msg));
	REQUIRE(n > 0 && n + INLINE_LEN <= (int)sizeof(msg),
		"encode SrcAvail %d", n);
	memcpy(msg + n, inline_bytes, INLINE_LEN);
	send_buf(h, msg, (uint32_t)n + INLINE_LEN);

	iov.iov_len = 1 << 20;
	iov.iov_base = malloc(iov.iov_len);
	REQUIRE(iov.iov_base != NULL, "malloc");
	/* The inline bytes may come first, alone; then the error. */
	t0 = ms();
	for (total = 0;;) {
		got = sdp_conn_recv(c, &iov, 1, 0, 0, 30000);
		if (got <= 0 || total + (size_t)got > INLINE_LEN)
			break;
		CHECK(!memcmp(iov.iov_base, inline_bytes + total, (size_t)got),
		      "inline bytes differ");
		total += (size_t)got;
	}
	CHECK(got == -ECONNRESET, "recv after a failed RDMA READ: %zd (%s), "
	      "want ECONNRESET", got, got < 0 ? strerror((int)-got) : "data");
	CHECK(total <= INLINE_LEN, "%zu bytes received", total);
	CHECK(ms() - t0 < 25000, "took %llu ms", (unsigned long long)(ms() - t0));
	CHECK(c->state == SDP_ST_RESET, "state %s", sdp_state_name(c->state));
	CHECK(atomic_load(&sdp_zcopy_live_mrs) == 0,
	      "%ld ZCopy registrations left", atomic_load(&sdp_zcopy_live_mrs));
	sdp_conn_close(c, 1);
	free(iov.iov_base);

	/* The engine tore its side down: the peer is told. */
	for (t0 = ms(); ms() - t0 < 20000;) {
		r = get_event(h, &ev, 1000);
		if (r == 0 && ev.type == SDP_CM_DISCONNECTED)
			break;
	}
	CHECK(r == 0 && ev.type == SDP_CM_DISCONNECTED,
	      "the peer saw no disconnect (%d, type %d)", r,
	      r ? -1 : (int)ev.type);
	OPS->destroy_qp(h);	/* `local` went with connect() */
	sdp_listen_close(lsn);
}

int main(void)
{
	int r;

	setvbuf(stdout, NULL, _IONBF, 0);
	/* test_wait_rdma: poll for a whole second. */
	setenv("SDP_VERBS_RDMA_SPIN_US", "1000000", 1);
	r = sdp_verbs_available();

	if (r < 0) {
		printf("1..0 # SKIP no RDMA device (%s)\n", strerror(-r));
		return 77;
	}
	test_refused();
	test_connection();
	test_hostile_srcavail();
	printf("%s - verbs transport: %d checks, %d failures\n",
	       failures ? "not ok" : "ok", checks, failures);
	printf("1..1\n");
	return failures ? 1 : 0;
}
#else
int main(void)
{
	printf("1..0 # SKIP built without the verbs transport\n");
	return 77;
}
#endif
