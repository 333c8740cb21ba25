/* SPDX-License-Identifier: MIT */
/*
 * test_shm.c — unit tests of the "shm" transport (src/transport/shm_*.c).
 *
 * Two kinds of tests:
 *  - in-process: both ends of a connection live in this process (the shm
 *    transport does not care), which makes exact completion sequences and
 *    a hostile peer (scribbling over the shared segment through the QP's own
 *    mapping) easy to script;
 *  - cross-process: a fork()ed child is the peer, for the handshake, data
 *    transfer, RDMA by cross-memory attach, and peer death by SIGKILL.
 * Steps between parent and child are sequenced by one-byte messages on
 * pipes, and every wait for the transport uses wait()/poll() with a generous
 * timeout that only matters on failure: nothing relies on sleeping.
 *
 * Output is TAP; exit 0 if all pass, 1 otherwise.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "transport/shm/shm.h"
#include "transport/transport.h"

static int g_checks_failed;
static const char *g_who = "";

#define CHECK_EQ(a, b)                                                       \
	do {                                                                 \
		long long a_ = (long long)(a), b_ = (long long)(b);          \
		if (a_ != b_) {                                              \
			printf("#   %s%s:%d: CHECK_EQ(%s, %s): %lld != %lld\n", \
			       g_who, __FILE__, __LINE__, #a, #b, a_, b_);   \
			g_checks_failed++;                                   \
		}                                                            \
	} while (0)

#define CHECK(c)                                                             \
	do {                                                                 \
		if (!(c)) {                                                  \
			printf("#   %s%s:%d: CHECK(%s) failed\n", g_who,     \
			       __FILE__, __LINE__, #c);                      \
			g_checks_failed++;                                   \
		}                                                            \
	} while (0)

static const struct sdp_transport_ops *T;

#define REGION 65536
#define RBUF 4096
#define TMO 5000	/* ms; only reached when a test fails */

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static struct sockaddr_in sin4(const char *ip, int port)
{
	struct sockaddr_in s = { .sin_family = AF_INET, .sin_port = htons(port) };

	inet_pton(AF_INET, ip, &s.sin_addr);
	return s;
}

static struct sockaddr_in6 sin6(const char *ip, int port)
{
	struct sockaddr_in6 s = { .sin6_family = AF_INET6,
				  .sin6_port = htons(port) };

	inet_pton(AF_INET6, ip, &s.sin6_addr);
	return s;
}

static bool fd_readable(int fd, int tmo)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, tmo) == 1;
}

static uint32_t csum(const uint8_t *p, size_t n)
{
	uint32_t h = 2166136261u;

	while (n--)
		h = (h ^ *p++) * 16777619u;
	return h;
}

/* The buffer post_recvs() posted with this wr_id.  A SEND fills the
 * newest posted receive (shm_qp.c), so tests find data by wr_id. */
static uint8_t *recv_buf(struct sdp_qp *qp, uint64_t wr_id)
{
	return (uint8_t *)T->recv_region(qp)->addr +
	       ((wr_id % 1000) % 16) * RBUF;
}

static int post_recvs(struct sdp_qp *qp, int first, int n, uint64_t id0)
{
	struct sdp_mr *r = T->recv_region(qp);

	for (int i = first; i < first + n; i++) {
		struct sdp_recv_wr w = {
			.wr_id = id0 + i,
			.sge = { (uintptr_t)r->addr + (uint64_t)(i % 16) * RBUF,
				 RBUF, r->lkey },
		};
		int err = T->post_recv(qp, &w);

		if (err)
			return err;
	}
	return 0;
}

/* The engine's side of a QP's events (transport.h, "Waiting"): a count,
 * per QP, of the news reported through notify() rather than through the
 * event descriptor. */
static _Atomic int notes[64];
static unsigned note_next;

static void note_notify(void *ctx)
{
	atomic_fetch_add((_Atomic int *)ctx, 1);
}

static void note_fd_changed(void *ctx)
{
	(void)ctx;	/* has_news() asks event_fd() each time */
}

static const struct sdp_qp_events note_events = {
	.fd_changed = note_fd_changed,
	.notify = note_notify,
};

static void attr_events(struct sdp_qp_attr *a)
{
	a->events = &note_events;
	a->events_ctx = &notes[note_next++ % 64];
	atomic_store((_Atomic int *)a->events_ctx, 0);
}

/* News for the QP's progress side: a notify() since the last look, or its
 * event descriptor readable within tmo ms. */
static bool has_news(struct sdp_qp *qp, int tmo)
{
	if (atomic_exchange((_Atomic int *)SHM_QP(qp)->attr.events_ctx, 0))
		return true;
	return fd_readable(T->event_fd(qp), tmo);
}

/* A QP for a connect to 127.0.0.1:port (0: not said, as the engine says
 * it), with `nrecv` receives posted. */
static struct sdp_qp *qp_new_to(int nrecv, int port)
{
	struct sockaddr_in dst = sin4("127.0.0.1", port);
	struct sdp_qp_attr a = { .max_send_wr = 64, .max_recv_wr = 16,
				 .recv_region_size = REGION };
	struct sdp_qp *qp = NULL;

	if (port) {
		a.dst = (struct sockaddr *)&dst;
		a.dst_len = sizeof(dst);
	}
	attr_events(&a);
	CHECK_EQ(T->create_qp(&a, &qp), 0);
	if (qp)
		CHECK_EQ(post_recvs(qp, 0, nrecv, 1000), 0);
	return qp;
}

static struct sdp_qp *qp_new(int nrecv)
{
	return qp_new_to(nrecv, 0);
}

static int send_buf(struct sdp_qp *qp, uint64_t id, const void *buf,
		    uint32_t len, unsigned flags)
{
	struct sdp_sge sge = { (uintptr_t)buf, len, 0 };
	struct sdp_send_wr wr = {
		.wr_id = id, .opcode = SDP_WR_SEND,
		.flags = flags | SDP_SEND_INLINE, .sg_list = &sge,
		.num_sge = 1,
	};

	return T->post_send(qp, &wr);
}

/* Poll until `want` completions arrived, sleeping in wait() in between. */
static int poll_n(struct sdp_qp *qp, struct sdp_wc *wc, int want)
{
	uint64_t end = now_ms() + TMO;
	int n = 0;

	while (n < want && now_ms() < end) {
		uint32_t seq = T->wait_seq(qp);
		int r = T->poll_cq(qp, wc + n, want - n);

		if (r < 0)
			return r;
		n += r;
		if (n < want && !r)
			T->wait(qp, seq, 1000);
	}
	return n;
}

/* Listener on 127.0.0.1 with an ephemeral port. */
static struct sdp_listener *listener_new(int *port)
{
	struct sockaddr_in a = sin4("127.0.0.1", 0);
	struct sdp_listener *l = NULL;
	struct sockaddr_storage ss;
	socklen_t len;

	CHECK_EQ(T->bind((struct sockaddr *)&a, sizeof(a), &l), 0);
	CHECK_EQ(T->listen(l, 8), 0);
	CHECK_EQ(T->bound_addr(l, &ss, &len), 0);
	*port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	return l;
}

/* Server side of a handshake: wait for a request, accept it with `nrecv`
 * receives posted. */
static struct sdp_qp *serve_one(struct sdp_listener *l, int nrecv,
				const char *ack, char *hello)
{
	struct sdp_qp_attr attr = { .max_send_wr = 64, .max_recv_wr = 16,
				    .recv_region_size = REGION };
	uint8_t priv[SDP_CM_PRIV_MAX];
	struct sdp_conn_req *req;
	struct sdp_qp *s = NULL;
	uint32_t plen = 0;
	int err;

	attr_events(&attr);
	do {
		err = T->get_request(l, &req, priv, &plen);
	} while (err == -EAGAIN && fd_readable(T->listener_fd(l), TMO));
	CHECK_EQ(err, 0);
	if (err)
		return NULL;
	if (hello) {
		memcpy(hello, priv, plen);
		hello[plen] = '\0';
	}
	CHECK_EQ(T->create_qp_from_req(req, &attr, &s), 0);
	CHECK_EQ(post_recvs(s, 0, nrecv, 2000), 0);
	CHECK_EQ(T->accept(s, ack, (uint32_t)strlen(ack)), 0);
	return s;
}

/* Client side: connect and wait for ESTABLISHED with wait(). */
/* A connect's outcome, waited for with wait(). */
static void wait_established(struct sdp_qp *c, struct sdp_cm_event *ev)
{
	uint64_t end = now_ms() + TMO;
	int err;

	for (;;) {
		uint32_t seq = T->wait_seq(c);

		err = T->get_event(c, ev);
		if (err != -EAGAIN || now_ms() > end)
			break;
		T->wait(c, seq, 1000);
	}
	CHECK_EQ(err, 0);
	CHECK_EQ(ev->type, SDP_CM_ESTABLISHED);
}

static struct sdp_qp *dial(int port, int nrecv, const char *hello, char *ack)
{
	struct sockaddr_in a = sin4("127.0.0.1", port);
	struct sdp_qp *c = qp_new(nrecv);
	struct sdp_cm_event ev = { 0 };

	CHECK_EQ(T->connect(c, NULL, (struct sockaddr *)&a, sizeof(a), hello,
			    (uint32_t)strlen(hello)), 0);
	wait_established(c, &ev);
	if (ack) {
		memcpy(ack, ev.priv, ev.priv_len);
		ack[ev.priv_len] = '\0';
	}
	return c;
}

struct pair {
	struct sdp_listener *l;
	struct sdp_qp *c, *s;
};

/* Both ends in this process. */
static void pair_up(struct pair *p, int nrecv_c, int nrecv_s)
{
	int port;

	memset(p, 0, sizeof(*p));
	p->l = listener_new(&port);
	{
		struct sockaddr_in a = sin4("127.0.0.1", port);
		struct sdp_cm_event ev;

		p->c = qp_new(nrecv_c);
		CHECK_EQ(T->connect(p->c, NULL, (struct sockaddr *)&a,
				    sizeof(a), "hi", 2), 0);
		p->s = serve_one(p->l, nrecv_s, "ack", NULL);
		CHECK_EQ(T->get_event(p->c, &ev), 0);
		CHECK_EQ(ev.type, SDP_CM_ESTABLISHED);
	}
}

static void pair_down(struct pair *p)
{
	if (p->c)
		T->destroy_qp(p->c);
	if (p->s)
		T->destroy_qp(p->s);
	if (p->l)
		T->close_listener(p->l);
}

/* ---- fork helpers -------------------------------------------------------- */

struct child {
	pid_t pid;
	int to[2], from[2];	/* parent -> child, child -> parent */
};

static struct child g_child;

static void step_send(int fd, char c)
{
	CHECK_EQ(write(fd, &c, 1), 1);
}

static char step_recv(int fd)
{
	char c = 0;

	if (!fd_readable(fd, 3 * TMO) || read(fd, &c, 1) != 1)
		return 0;
	return c;
}

/* Child side shorthands. */
static void to_parent(char c) { step_send(g_child.from[1], c); }
static char from_parent(void) { return step_recv(g_child.to[0]); }
static void to_child(char c) { step_send(g_child.to[1], c); }
static char from_child(void) { return step_recv(g_child.from[0]); }

static void spawn(void (*fn)(void *), void *arg)
{
	if (pipe(g_child.to) || pipe(g_child.from))
		abort();
	fflush(stdout);
	g_child.pid = fork();
	if (g_child.pid == 0) {
		g_who = "child: ";
		g_checks_failed = 0;
		fn(arg);
		fflush(stdout);
		_exit(g_checks_failed ? 1 : 0);
	}
}

static void reap(void)
{
	int st = 0;

	CHECK_EQ(waitpid(g_child.pid, &st, 0), g_child.pid);
	if (!(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL))
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(g_child.to[0]);
	close(g_child.to[1]);
	close(g_child.from[0]);
	close(g_child.from[1]);
}

/* ---- tests: port space --------------------------------------------------- */

static void test_bind(void)
{
	struct sdp_listener *l1, *l2, *l3;
	struct sockaddr_in a;
	struct sockaddr_in6 a6;
	struct sockaddr_storage ss;
	socklen_t len;
	int port;

	l1 = listener_new(&port);
	CHECK(port > 0);
	a = sin4("127.0.0.1", port);
	CHECK_EQ(T->bind((struct sockaddr *)&a, sizeof(a), &l2), -EADDRINUSE);
	a = sin4("0.0.0.0", port);
	CHECK_EQ(T->bind((struct sockaddr *)&a, sizeof(a), &l2), -EADDRINUSE);
	a6 = sin6("::", port);
	CHECK_EQ(T->bind((struct sockaddr *)&a6, sizeof(a6), &l2), -EADDRINUSE);
	a6 = sin6("::1", port);		/* other family, specific: fine */
	CHECK_EQ(T->bind((struct sockaddr *)&a6, sizeof(a6), &l2), 0);
	T->close_listener(l2);
	T->close_listener(l1);
	a = sin4("127.0.0.1", port);	/* released with the fd */
	CHECK_EQ(T->bind((struct sockaddr *)&a, sizeof(a), &l1), 0);
	T->close_listener(l1);

	/* A dual-stack wildcard blocks the IPv4 specific address. */
	a6 = sin6("::", 0);
	CHECK_EQ(T->bind((struct sockaddr *)&a6, sizeof(a6), &l3), 0);
	CHECK_EQ(T->bound_addr(l3, &ss, &len), 0);
	CHECK_EQ(len, sizeof(struct sockaddr_in6));
	port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	a = sin4("127.0.0.1", port);
	CHECK_EQ(T->bind((struct sockaddr *)&a, sizeof(a), &l2), -EADDRINUSE);
	T->close_listener(l3);

	a = sin4("192.0.2.1", 0);	/* TEST-NET: not ours */
	CHECK_EQ(T->bind((struct sockaddr *)&a, sizeof(a), &l2), -EADDRNOTAVAIL);
	a.sin_family = AF_UNIX;
	CHECK_EQ(T->bind((struct sockaddr *)&a, sizeof(a), &l2), -EAFNOSUPPORT);
}

static void test_refused(void)
{
	struct sdp_listener *l;
	struct sdp_qp *qp;
	struct sdp_cm_event ev;
	struct sockaddr_in a;
	int port;

	l = listener_new(&port);
	T->close_listener(l);		/* nobody listens on `port` now */
	a = sin4("127.0.0.1", port);
	qp = qp_new(1);
	CHECK_EQ(T->connect(qp, NULL, (struct sockaddr *)&a, sizeof(a), "x", 1),
		 0);
	CHECK(has_news(qp, 0));
	CHECK_EQ(T->get_event(qp, &ev), 0);
	CHECK_EQ(ev.type, SDP_CM_REJECTED);
	CHECK_EQ(ev.err, -ECONNREFUSED);
	CHECK_EQ(T->get_event(qp, &ev), -EAGAIN);
	T->destroy_qp(qp);

	qp = qp_new(0);
	a = sin4("192.0.2.1", 80);
	CHECK_EQ(T->connect(qp, NULL, (struct sockaddr *)&a, sizeof(a), NULL, 0),
		 -ENETUNREACH);
	T->destroy_qp(qp);
}

static void test_reject_and_halfopen(void)
{
	struct sdp_listener *l;
	struct sdp_conn_req *req;
	struct sdp_qp *c;
	struct sdp_cm_event ev;
	struct sockaddr_in a;
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	uint8_t priv[SDP_CM_PRIV_MAX];
	uint32_t plen;
	int port, raw, n;

	l = listener_new(&port);
	/* A silent raw connection must not block the real one. */
	raw = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	n = snprintf(sun.sun_path + 1, sizeof(sun.sun_path) - 1,
		     "libsdp/v1/4/127.0.0.1/%d", port);
	CHECK_EQ(connect(raw, (struct sockaddr *)&sun,
			 offsetof(struct sockaddr_un, sun_path) + 1 + n), 0);
	CHECK_EQ(T->get_request(l, &req, priv, &plen), -EAGAIN);
	CHECK(!fd_readable(T->listener_fd(l), 0));

	a = sin4("127.0.0.1", port);
	c = qp_new(0);
	CHECK_EQ(T->connect(c, NULL, (struct sockaddr *)&a, sizeof(a), "hey", 3),
		 0);
	CHECK(fd_readable(T->listener_fd(l), TMO));
	CHECK_EQ(T->get_request(l, &req, priv, &plen), 0);
	CHECK_EQ(plen, 3);
	T->reject(req);
	CHECK_EQ(T->get_event(c, &ev), 0);
	CHECK_EQ(ev.type, SDP_CM_REJECTED);
	CHECK_EQ(ev.err, -ECONNREFUSED);
	T->destroy_qp(c);

	/* Garbage instead of a Hello: dropped. */
	CHECK_EQ(send(raw, "junk", 4, 0), 4);
	CHECK_EQ(T->get_request(l, &req, priv, &plen), -EAGAIN);
	CHECK_EQ(send(raw, "x", 1, MSG_NOSIGNAL), -1);	/* we were dropped */
	close(raw);
	T->close_listener(l);
}

static void test_addresses_and_backlog(void)
{
	struct sockaddr_in6 any6 = sin6("::", 0), lo6;
	struct sockaddr_in a4, src4 = sin4("127.0.0.1", 0);
	struct sdp_listener *l, *src;
	struct sdp_qp *c, *s, *cs[3];
	struct sockaddr_storage ss;
	struct sdp_cm_event ev;
	struct sdp_tp_addr ad;
	socklen_t len;
	int port, sport;

	/* IPv4 client, dual-stack IPv6 wildcard listener, explicit source
	 * binding: addresses as the socket layer expects them. */
	CHECK_EQ(T->bind((struct sockaddr *)&any6, sizeof(any6), &l), 0);
	CHECK_EQ(T->listen(l, 4), 0);
	CHECK_EQ(T->bound_addr(l, &ss, &len), 0);
	port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	CHECK_EQ(T->bind((struct sockaddr *)&src4, sizeof(src4), &src), 0);
	CHECK_EQ(T->bound_addr(src, &ss, &len), 0);
	sport = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	a4 = sin4("127.0.0.1", port);
	c = qp_new(0);
	CHECK_EQ(T->connect(c, src, (struct sockaddr *)&a4, sizeof(a4), NULL, 0),
		 0);
	s = serve_one(l, 0, "", NULL);
	CHECK_EQ(T->get_event(c, &ev), 0);
	CHECK_EQ(ev.type, SDP_CM_ESTABLISHED);
	CHECK_EQ(ev.priv_len, 0);
	CHECK_EQ(T->addresses(c, &ad), 0);
	CHECK_EQ(ad.local.ss_family, AF_INET);
	CHECK_EQ(ntohs(((struct sockaddr_in *)&ad.local)->sin_port), sport);
	CHECK_EQ(ntohs(((struct sockaddr_in *)&ad.peer)->sin_port), port);
	CHECK_EQ(T->addresses(s, &ad), 0);
	CHECK_EQ(ad.peer.ss_family, AF_INET6);
	CHECK(IN6_IS_ADDR_V4MAPPED(&((struct sockaddr_in6 *)&ad.peer)->sin6_addr));
	CHECK_EQ(ntohs(((struct sockaddr_in6 *)&ad.peer)->sin6_port), sport);
	CHECK_EQ(ntohs(((struct sockaddr_in6 *)&ad.local)->sin6_port), port);
	T->destroy_qp(c);
	T->destroy_qp(s);

	/* IPv6 loopback. */
	lo6 = sin6("::1", port);
	c = qp_new(0);
	CHECK_EQ(T->connect(c, NULL, (struct sockaddr *)&lo6, sizeof(lo6), NULL,
			    0), 0);
	s = serve_one(l, 0, "", NULL);
	CHECK_EQ(T->get_event(c, &ev), 0);
	CHECK_EQ(ev.type, SDP_CM_ESTABLISHED);
	CHECK_EQ(T->addresses(s, &ad), 0);
	CHECK(IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)&ad.peer)->sin6_addr));
	T->destroy_qp(c);
	T->destroy_qp(s);
	T->close_listener(l);

	/* Backlog full and nobody accepting: the third connect gives up
	 * after about a second instead of hanging. */
	l = listener_new(&port);
	CHECK_EQ(T->listen(l, 1), 0);
	a4 = sin4("127.0.0.1", port);
	for (int i = 0; i < 3; i++) {
		cs[i] = qp_new(0);
		CHECK_EQ(T->connect(cs[i], NULL, (struct sockaddr *)&a4,
				    sizeof(a4), NULL, 0), 0);
	}
	CHECK_EQ(T->get_event(cs[2], &ev), 0);
	CHECK_EQ(ev.type, SDP_CM_UNREACHABLE);
	CHECK_EQ(ev.err, -ETIMEDOUT);
	for (int i = 0; i < 3; i++)
		T->destroy_qp(cs[i]);
	T->close_listener(l);
}

/* ---- tests: cross-process ------------------------------------------------ */

struct hs_arg {
	int port;
};

static void child_handshake(void *v)
{
	struct hs_arg *a = v;
	char ack[SDP_CM_PRIV_MAX + 1];
	struct sdp_tp_addr ad;
	struct sdp_qp *c = dial(a->port, 2, "hello from child", ack);

	CHECK(!strcmp(ack, "welcome"));
	CHECK_EQ(T->addresses(c, &ad), 0);
	CHECK_EQ(ntohs(((struct sockaddr_in *)&ad.peer)->sin_port), a->port);
	/* Send the sizes the parent expects, each with a known pattern. */
	for (int i = 0; i < 6; i++) {
		static const uint32_t sizes[] = { 0, 1, 7, 64, 1000, RBUF };
		uint8_t buf[RBUF];

		for (uint32_t j = 0; j < sizes[i]; j++)
			buf[j] = (uint8_t)(j * 31 + i);
		CHECK_EQ(send_buf(c, 10 + i, buf, sizes[i], SDP_SEND_SIGNALED),
			 0);
	}
	{
		struct sdp_wc wc[8];

		CHECK_EQ(T->poll_cq(c, wc, 8), 6);
		for (int i = 0; i < 6; i++)
			CHECK_EQ(wc[i].wr_id, 10 + i);
	}
	/* Streaming: 100 rounds of 8 messages, receives re-posted by the
	 * parent between rounds (ring indices wrap many times). */
	for (int r = 0; r < 100; r++) {
		CHECK_EQ(from_parent(), 'r');
		for (int i = 0; i < 8; i++) {
			uint32_t v[64];

			for (int k = 0; k < 64; k++)
				v[k] = (uint32_t)(r * 8 + i) * 64 + k;
			CHECK_EQ(send_buf(c, 0, v, sizeof(v), 0), 0);
		}
	}
	/* Read the parent's reply, then disconnect gracefully. */
	{
		struct sdp_wc wc[2];

		CHECK_EQ(poll_n(c, wc, 1), 1);
		CHECK_EQ(wc[0].status, SDP_WC_SUCCESS);
		CHECK_EQ(wc[0].byte_len, 5);
		CHECK(!memcmp(recv_buf(c, wc[0].wr_id), "pong!", 5));
	}
	CHECK_EQ(T->disconnect(c), 0);
	T->destroy_qp(c);
}

static void test_fork_handshake_and_send(void)
{
	static const uint32_t sizes[] = { 0, 1, 7, 64, 1000, RBUF };
	struct hs_arg a;
	struct sdp_listener *l = listener_new(&a.port);
	char hello[SDP_CM_PRIV_MAX + 1];
	struct sdp_tp_addr ad;
	struct sdp_cm_event ev;
	struct sdp_wc wc[16];
	struct sdp_qp *s;
	int n, bad = 0;

	spawn(child_handshake, &a);
	s = serve_one(l, 6, "welcome", hello);
	if (!s)
		goto out;
	CHECK(!strcmp(hello, "hello from child"));
	CHECK_EQ(T->addresses(s, &ad), 0);
	CHECK_EQ(ntohs(((struct sockaddr_in *)&ad.local)->sin_port), a.port);
	n = poll_n(s, wc, 6);
	CHECK_EQ(n, 6);
	for (int i = 0; i < n; i++) {
		uint8_t exp[RBUF];

		for (uint32_t j = 0; j < sizes[i]; j++)
			exp[j] = (uint8_t)(j * 31 + i);
		/* In send order, each in the newest receive still posted. */
		CHECK_EQ(wc[i].wr_id, 2005 - i);
		CHECK_EQ(wc[i].status, SDP_WC_SUCCESS);
		CHECK_EQ(wc[i].byte_len, sizes[i]);
		CHECK_EQ(csum(recv_buf(s, wc[i].wr_id), sizes[i]),
			 csum(exp, sizes[i]));
	}
	for (int r = 0; r < 100; r++) {
		CHECK_EQ(post_recvs(s, (r * 8) % 16, 8, 0), 0);
		to_child('r');
		n = poll_n(s, wc, 8);
		CHECK_EQ(n, 8);
		for (int i = 0; i < n; i++) {
			const uint32_t *v = (const uint32_t *)
				recv_buf(s, wc[i].wr_id);

			bad += wc[i].status != SDP_WC_SUCCESS ||
			       wc[i].byte_len != 256 ||
			       v[0] != (uint32_t)(r * 8 + i) * 64 ||
			       v[63] != (uint32_t)(r * 8 + i) * 64 + 63;
		}
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(post_recvs(s, 0, 2, 0), 0);
	CHECK_EQ(send_buf(s, 1, "pong!", 5, 0), 0);
	/* The child disconnects: our two receives flush, DISCONNECTED. */
	n = poll_n(s, wc, 2);
	CHECK_EQ(n, 2);
	CHECK_EQ(wc[0].status, SDP_WC_WR_FLUSH_ERR);
	CHECK_EQ(T->get_event(s, &ev), 0);
	CHECK_EQ(ev.type, SDP_CM_DISCONNECTED);
	T->destroy_qp(s);
out:
	reap();
	T->close_listener(l);
}

static void child_send_then_destroy(void *v)
{
	struct hs_arg *a = v;
	struct sdp_qp *c = dial(a->port, 0, "x", NULL);

	CHECK_EQ(send_buf(c, 1, "first", 5, 0), 0);
	CHECK_EQ(send_buf(c, 2, "second", 6, 0), 0);
	T->destroy_qp(c);
}

static void test_peer_destroy(void)
{
	struct hs_arg a;
	struct sdp_listener *l = listener_new(&a.port);
	struct sdp_cm_event ev;
	struct sdp_wc wc[8];
	struct sdp_qp *s;
	int n;

	spawn(child_send_then_destroy, &a);
	s = serve_one(l, 5, "ok", NULL);
	if (s) {
		n = poll_n(s, wc, 5);
		CHECK_EQ(n, 5);
		CHECK_EQ(wc[0].status, SDP_WC_SUCCESS);
		CHECK_EQ(wc[0].byte_len, 5);
		CHECK_EQ(wc[1].status, SDP_WC_SUCCESS);
		CHECK_EQ(wc[1].byte_len, 6);
		/* The SENDs took the newest receives; the flush returns the
		 * rest oldest first. */
		CHECK_EQ(wc[0].wr_id, 2004);
		CHECK_EQ(wc[1].wr_id, 2003);
		for (int i = 2; i < 5; i++) {
			CHECK_EQ(wc[i].status, SDP_WC_WR_FLUSH_ERR);
			CHECK_EQ(wc[i].wr_id, 2000 + i - 2);
		}
		CHECK_EQ(T->get_event(s, &ev), 0);
		CHECK_EQ(ev.type, SDP_CM_DISCONNECTED);
		CHECK_EQ(T->get_event(s, &ev), -EAGAIN);
		T->destroy_qp(s);
	}
	reap();
	T->close_listener(l);
}

/* The peer sends, then destroys its QP; our next send is flushed.  The
 * peer's completions came first and must be polled first: the engine
 * resets on a failed send, which would lose the peer's last data and
 * DisConn (switch/stream-blocking: ECONNRESET instead of EOF). */
static void test_peer_destroy_then_send(void)
{
	struct sdp_wc wc[8];
	struct pair p;
	int n;

	pair_up(&p, 2, 4);
	CHECK_EQ(send_buf(p.c, 1, "last", 4, 0), 0);
	CHECK_EQ(send_buf(p.c, 2, "bye", 3, 0), 0);
	T->destroy_qp(p.c);
	p.c = NULL;
	CHECK_EQ(send_buf(p.s, 7, "late", 4, 0), 0);
	n = poll_n(p.s, wc, 5);
	CHECK_EQ(n, 5);
	CHECK_EQ(wc[0].opcode, SDP_WC_RECV);
	CHECK_EQ(wc[0].status, SDP_WC_SUCCESS);
	CHECK_EQ(wc[0].byte_len, 4);
	CHECK_EQ(wc[1].opcode, SDP_WC_RECV);
	CHECK_EQ(wc[1].status, SDP_WC_SUCCESS);
	CHECK_EQ(wc[1].byte_len, 3);
	CHECK_EQ(wc[2].wr_id, 7);
	CHECK_EQ(wc[2].status, SDP_WC_WR_FLUSH_ERR);
	CHECK_EQ(wc[3].status, SDP_WC_WR_FLUSH_ERR);
	CHECK_EQ(wc[4].status, SDP_WC_WR_FLUSH_ERR);
	pair_down(&p);
}

static void child_idle(void *v)
{
	struct hs_arg *a = v;
	struct sdp_qp *c = dial(a->port, 0, "x", NULL);

	CHECK_EQ(send_buf(c, 1, "alive", 5, 0), 0);
	to_parent('s');
	from_parent();		/* killed while blocked here */
	T->destroy_qp(c);
}

static void test_peer_kill(void)
{
	struct hs_arg a;
	struct sdp_listener *l = listener_new(&a.port);
	struct sdp_wc wc[8];
	struct sdp_qp *s;
	uint64_t t0, dt;
	int n = 0;

	spawn(child_idle, &a);
	s = serve_one(l, 3, "ok", NULL);
	if (s) {
		CHECK_EQ(from_child(), 's');
		CHECK_EQ(poll_n(s, wc, 1), 1);
		CHECK_EQ(wc[0].status, SDP_WC_SUCCESS);
		/* Sleep in wait() first, then kill the peer from here: the
		 * waiter must notice within one liveness slice. */
		t0 = now_ms();
		kill(g_child.pid, SIGKILL);
		while (n < 2 && now_ms() - t0 < TMO) {
			uint32_t seq = T->wait_seq(s);
			int r = T->poll_cq(s, wc + n, 2 - n);

			n += r;
			if (!r)
				T->wait(s, seq, -1);
		}
		dt = now_ms() - t0;
		CHECK_EQ(n, 2);
		CHECK_EQ(wc[0].status, SDP_WC_WR_FLUSH_ERR);
		CHECK(dt < 1000);
		printf("# kill -9 noticed after %llu ms\n",
		       (unsigned long long)dt);
		T->destroy_qp(s);
	}
	reap();
	T->close_listener(l);
}

struct waiter_arg {
	struct sdp_qp *qp;
	uint32_t seq;
	int ret;
};

static void *waiter(void *v)
{
	struct waiter_arg *a = v;

	a->ret = T->wait(a->qp, a->seq, 3 * TMO);
	return NULL;
}

static void child_send_on_cue(void *v)
{
	struct hs_arg *a = v;
	struct sdp_qp *c = dial(a->port, 0, "x", NULL);

	/* 'd' tells the parent that post_send (with its wake-ups) returned. */
	while (from_parent() == 's') {
		CHECK_EQ(send_buf(c, 1, "ping", 4, 0), 0);
		to_parent('d');
	}
	T->destroy_qp(c);
}

static void test_wait_and_notify(void)
{
	struct hs_arg a;
	struct sdp_listener *l = listener_new(&a.port);
	struct waiter_arg w;
	struct sdp_wc wc[4];
	struct sdp_qp *s;
	pthread_t th;
	int fd;

	spawn(child_send_on_cue, &a);
	s = serve_one(l, 8, "ok", NULL);
	if (!s)
		goto out;

	/* kick() from another thread. */
	w = (struct waiter_arg){ s, T->wait_seq(s), 1 };
	CHECK_EQ(T->wait(s, w.seq, 0), -ETIMEDOUT);
	pthread_create(&th, NULL, waiter, &w);
	T->kick(s);
	pthread_join(th, NULL);
	CHECK_EQ(w.ret, 0);

	/* A SEND from the other process wakes a waiting thread. */
	w = (struct waiter_arg){ s, T->wait_seq(s), 1 };
	pthread_create(&th, NULL, waiter, &w);
	to_child('s');
	pthread_join(th, NULL);
	CHECK_EQ(w.ret, 0);
	CHECK_EQ(from_child(), 'd');
	CHECK_EQ(T->poll_cq(s, wc, 4), 1);

	/* Doorbell: armed -> the peer's SEND makes event_fd readable. */
	fd = T->event_fd(s);
	T->ack_events(s);
	CHECK_EQ(T->req_notify(s), 0);
	CHECK(!fd_readable(fd, 0));
	to_child('s');
	CHECK_EQ(from_child(), 'd');
	CHECK(fd_readable(fd, 0));
	T->ack_events(s);
	CHECK(!fd_readable(fd, 0));
	CHECK_EQ(T->req_notify(s), 1);		/* the completion is pending */
	CHECK_EQ(T->poll_cq(s, wc, 4), 1);
	CHECK_EQ(T->req_notify(s), 0);
	to_child('q');
	CHECK(fd_readable(fd, TMO));		/* peer hang-up */
	CHECK_EQ(T->req_notify(s), 1);
	T->destroy_qp(s);
out:
	reap();
	T->close_listener(l);
}

struct rdma_info {
	uint64_t addr;
	uint32_t rkey, rkey_ro;
	uint32_t sum;
};

static void child_rdma(void *v)
{
	struct hs_arg *a = v;
	static uint8_t mem[8192];
	struct sdp_mr *mr, *ro;
	struct rdma_info info;
	struct sdp_tp_caps caps;
	struct sdp_qp *c = dial(a->port, 0, "x", NULL);

	T->query_caps(c, &caps);
	CHECK_EQ(caps.rdma, 1);
	for (int i = 0; i < 8192; i++)
		mem[i] = (uint8_t)(i * 7 + 3);
	CHECK_EQ(T->reg_mr(c, mem, 4096, SDP_ACCESS_REMOTE_READ |
			   SDP_ACCESS_REMOTE_WRITE, &mr), 0);
	CHECK_EQ(T->reg_mr(c, mem + 4096, 4096, SDP_ACCESS_REMOTE_READ, &ro), 0);
	info.addr = mr->remote_addr;
	info.rkey = mr->rkey;
	info.rkey_ro = ro->rkey;
	info.sum = csum(mem, 4096);
	CHECK_EQ(send_buf(c, 1, &info, sizeof(info), 0), 0);
	CHECK_EQ(from_parent(), 'w');	/* parent wrote [1000, 3000) */
	info.sum = csum(mem + 1000, 2000);
	CHECK_EQ(write(g_child.from[1], &info.sum, 4), 4);
	CHECK_EQ(from_parent(), 'q');
	T->destroy_qp(c);
}

static void test_rdma(void)
{
	static uint8_t buf[8192];
	struct hs_arg a;
	struct sdp_listener *l = listener_new(&a.port);
	struct sdp_sge sge;
	struct sdp_send_wr wr = { .num_sge = 1, .sg_list = &sge,
				  .flags = SDP_SEND_SIGNALED };
	struct rdma_info info;
	struct sdp_tp_caps caps;
	struct sdp_mr *lmr;
	struct sdp_wc wc[8];
	struct sdp_qp *s;
	uint32_t sum = 0;

	spawn(child_rdma, &a);
	s = serve_one(l, 2, "ok", NULL);
	if (!s)
		goto out;
	T->query_caps(s, &caps);
	CHECK_EQ(caps.rdma, 1);
	CHECK_EQ(poll_n(s, wc, 1), 1);
	memcpy(&info, recv_buf(s, wc[0].wr_id), sizeof(info));
	CHECK_EQ(T->reg_mr(s, buf, sizeof(buf), SDP_ACCESS_LOCAL_WRITE, &lmr), 0);

	/* READ the whole MR in two SGEs. */
	sge = (struct sdp_sge){ (uintptr_t)buf, 4096, lmr->lkey };
	wr.wr_id = 1;
	wr.opcode = SDP_WR_RDMA_READ;
	wr.remote_addr = info.addr;
	wr.rkey = info.rkey;
	CHECK_EQ(T->post_send(s, &wr), 0);
	CHECK_EQ(T->poll_cq(s, wc, 8), 1);
	CHECK_EQ(wc[0].status, SDP_WC_SUCCESS);
	CHECK_EQ(wc[0].byte_len, 4096);
	CHECK_EQ(csum(buf, 4096), info.sum);

	/* WRITE [1000, 3000). */
	for (int i = 0; i < 2000; i++)
		buf[4096 + i] = (uint8_t)(i ^ 0x5a);
	sge = (struct sdp_sge){ (uintptr_t)buf + 4096, 2000, lmr->lkey };
	wr.wr_id = 2;
	wr.opcode = SDP_WR_RDMA_WRITE;
	wr.remote_addr = info.addr + 1000;
	CHECK_EQ(T->post_send(s, &wr), 0);
	CHECK_EQ(T->poll_cq(s, wc, 8), 1);
	CHECK_EQ(wc[0].status, SDP_WC_SUCCESS);
	to_child('w');
	CHECK(fd_readable(g_child.from[0], TMO));
	CHECK_EQ(read(g_child.from[0], &sum, 4), 4);
	CHECK_EQ(sum, csum(buf + 4096, 2000));

	/* Local buffer without LOCAL_WRITE is not a READ target; checked
	 * before anything is copied.  (Kills the QP, so last.) */
	/* Out of range by one byte: REM_ACCESS_ERR, QP in error. */
	sge = (struct sdp_sge){ (uintptr_t)buf, 100, lmr->lkey };
	wr.wr_id = 3;
	wr.opcode = SDP_WR_RDMA_READ;
	wr.remote_addr = info.addr + 3997;
	CHECK_EQ(T->post_send(s, &wr), 0);
	CHECK_EQ(T->poll_cq(s, wc, 8), 2);	/* + the flushed receive */
	CHECK_EQ(wc[0].status, SDP_WC_REM_ACCESS_ERR);
	CHECK_EQ(wc[1].status, SDP_WC_WR_FLUSH_ERR);
	to_child('q');
	T->destroy_qp(s);
out:
	reap();
	T->close_listener(l);
}

/* ---- tests: in-process --------------------------------------------------- */

static void test_rdma_access_inproc(void)
{
	static uint8_t mem[4096], dst[4096];
	struct sdp_sge sge;
	struct sdp_send_wr wr = { .num_sge = 1, .sg_list = &sge,
				  .flags = SDP_SEND_SIGNALED };
	struct sdp_mr *mr, *ro, *lmr;
	struct sdp_wc wc[8];
	struct pair p;
	static const struct { int ro; int bad_rkey; int write; } cases[] = {
		{ 0, 1, 0 },	/* stale/bad rkey */
		{ 1, 0, 1 },	/* WRITE to a read-only MR */
		{ 0, 0, 0 },	/* deregistered before use */
	};

	for (unsigned k = 0; k < 3; k++) {
		pair_up(&p, 0, 0);
		CHECK_EQ(T->reg_mr(p.s, mem, sizeof(mem), SDP_ACCESS_REMOTE_READ |
				   SDP_ACCESS_REMOTE_WRITE, &mr), 0);
		CHECK_EQ(T->reg_mr(p.s, mem, 64, SDP_ACCESS_REMOTE_READ, &ro), 0);
		CHECK_EQ(T->reg_mr(p.c, dst, sizeof(dst), SDP_ACCESS_LOCAL_WRITE,
				   &lmr), 0);
		sge = (struct sdp_sge){ (uintptr_t)dst, 16, lmr->lkey };
		wr.opcode = cases[k].write ? SDP_WR_RDMA_WRITE : SDP_WR_RDMA_READ;
		wr.remote_addr = (cases[k].ro ? ro : mr)->remote_addr;
		wr.rkey = (cases[k].ro ? ro : mr)->rkey +
			  (cases[k].bad_rkey ? 0x100 : 0);
		/* A good one first. */
		{
			struct sdp_send_wr ok = wr;

			ok.opcode = SDP_WR_RDMA_READ;
			ok.rkey = mr->rkey;
			ok.remote_addr = mr->remote_addr;
			CHECK_EQ(T->post_send(p.c, &ok), 0);
			CHECK_EQ(T->poll_cq(p.c, wc, 8), 1);
			CHECK_EQ(wc[0].status, SDP_WC_SUCCESS);
		}
		if (k == 2)
			CHECK_EQ(T->dereg_mr(p.s, mr), 0);
		CHECK_EQ(T->post_send(p.c, &wr), 0);
		CHECK_EQ(T->poll_cq(p.c, wc, 8), 1);
		CHECK_EQ(wc[0].status, SDP_WC_REM_ACCESS_ERR);
		pair_down(&p);
	}
}

/* RDMA only with a peer that runs with our real ids: the probe comes
 * after the handshake, when the peer's pid may name another process of
 * our user (the peer exited, the number was reused); a peer of other ids
 * would then point our copies at that process.  Its ids are the ones the
 * kernel stamped on its CM message. */
static void test_rdma_other_user(void)
{
	static uint8_t mem[4096], dst[4096];
	struct sdp_sge sge;
	struct sdp_send_wr wr = { .num_sge = 1, .sg_list = &sge,
				  .flags = SDP_SEND_SIGNALED,
				  .opcode = SDP_WR_RDMA_READ };
	struct sdp_mr *mr, *lmr;
	struct sdp_tp_caps caps;
	struct pair p;

	pair_up(&p, 0, 0);
	CHECK_EQ((int)SHM_QP(p.c)->peer_uid, (int)getuid());
	SHM_QP(p.c)->peer_uid = getuid() + 1;
	CHECK_EQ(T->reg_mr(p.s, mem, sizeof(mem), SDP_ACCESS_REMOTE_READ, &mr),
		 0);
	CHECK_EQ(T->reg_mr(p.c, dst, sizeof(dst), SDP_ACCESS_LOCAL_WRITE,
			   &lmr), 0);
	sge = (struct sdp_sge){ (uintptr_t)dst, 16, lmr->lkey };
	wr.remote_addr = mr->remote_addr;
	wr.rkey = mr->rkey;
	CHECK_EQ(T->post_send(p.c, &wr), -EOPNOTSUPP);
	T->query_caps(p.c, &caps);
	CHECK_EQ(caps.rdma, 0);
	CHECK(strstr(caps.rdma_reason, "another user") != NULL);
	/* The other side, whose peer has our ids, may. */
	T->query_caps(p.s, &caps);
	CHECK_EQ(caps.rdma, 1);
	pair_down(&p);
}

static void test_rnr_and_oversize(void)
{
	struct sdp_cm_event ev;
	struct sdp_wc wc[8];
	uint8_t big[RBUF + 1] = { 0 };
	struct pair p;

	/* One receive posted, two SENDs: the second is RNR. */
	pair_up(&p, 2, 1);
	CHECK_EQ(send_buf(p.c, 1, "a", 1, 0), 0);
	CHECK_EQ(send_buf(p.c, 2, "b", 1, 0), 0);
	CHECK_EQ(T->poll_cq(p.c, wc, 8), 3);
	CHECK_EQ(wc[0].status, SDP_WC_RNR_RETRY_EXC_ERR);
	CHECK_EQ(wc[0].wr_id, 2);
	CHECK_EQ(wc[1].status, SDP_WC_WR_FLUSH_ERR);
	CHECK_EQ(wc[1].wr_id, 1000);
	CHECK_EQ(T->poll_cq(p.s, wc, 8), 1);
	CHECK_EQ(wc[0].status, SDP_WC_SUCCESS);
	CHECK(has_news(p.s, 0));
	CHECK_EQ(T->get_event(p.s, &ev), 0);
	CHECK_EQ(ev.type, SDP_CM_DISCONNECTED);
	CHECK_EQ(T->req_notify(p.s), 0);
	CHECK_EQ(send_buf(p.s, 3, "c", 1, 0), 0);	/* flushed */
	CHECK_EQ(T->poll_cq(p.s, wc, 8), 1);
	CHECK_EQ(wc[0].status, SDP_WC_WR_FLUSH_ERR);
	pair_down(&p);

	pair_up(&p, 0, 3);
	CHECK_EQ(send_buf(p.c, 1, big, sizeof(big), 0), 0);
	CHECK_EQ(T->poll_cq(p.c, wc, 8), 1);
	CHECK_EQ(wc[0].status, SDP_WC_REM_INV_REQ_ERR);
	CHECK_EQ(T->poll_cq(p.s, wc, 8), 3);
	CHECK_EQ(wc[0].status, SDP_WC_LOC_LEN_ERR);
	CHECK_EQ(wc[0].wr_id, 2002);		/* the newest */
	CHECK_EQ(wc[1].status, SDP_WC_WR_FLUSH_ERR);
	CHECK_EQ(wc[1].wr_id, 2000);
	CHECK_EQ(wc[2].status, SDP_WC_WR_FLUSH_ERR);
	CHECK_EQ(wc[2].wr_id, 2001);
	pair_down(&p);

	/* Misuse is refused at post time. */
	pair_up(&p, 0, 1);
	{
		struct sdp_recv_wr w = { 1, { 12345, 10, SHM_RECV_LKEY } };
		struct sdp_send_wr s = { .opcode = SDP_WR_SEND, .num_sge = 5 };

		CHECK_EQ(T->post_recv(p.c, &w), -EINVAL);
		CHECK_EQ(T->post_send(p.c, &s), -EINVAL);
	}
	pair_down(&p);
}

/* The peer scribbles over shared memory: every case must end with the QP in
 * error, a sane completion sequence, and no crash. */
static void test_corrupt_rings(void)
{
	struct sdp_wc wc[32];
	struct pair p;
	int n;

	/* 1: the sender bumps our cq_prod far beyond what we posted. */
	pair_up(&p, 0, 4);
	atomic_store(&SHM_QP(p.c)->peer.ctrl->cq_prod, 1000000);
	n = T->poll_cq(p.s, wc, 32);
	CHECK_EQ(n, 4);
	CHECK_EQ(wc[0].status, SDP_WC_GENERAL_ERR);
	CHECK_EQ(wc[1].status, SDP_WC_WR_FLUSH_ERR);
	CHECK_EQ(wc[3].wr_id, 2003);
	pair_down(&p);

	/* 2: a completion claiming more bytes than the posted buffer. */
	pair_up(&p, 0, 2);
	atomic_store(&SHM_QP(p.c)->peer.cq[0].byte_len, RBUF + 1);
	atomic_store(&SHM_QP(p.c)->peer.cq[0].status, SHM_CQE_OK);
	atomic_store(&SHM_QP(p.c)->peer.ctrl->cq_prod, 1);
	n = T->poll_cq(p.s, wc, 32);
	CHECK_EQ(n, 2);
	CHECK_EQ(wc[0].status, SDP_WC_LOC_LEN_ERR);
	CHECK_EQ(wc[1].status, SDP_WC_WR_FLUSH_ERR);
	pair_down(&p);

	/* 3: the receiver posts a descriptor outside its region. */
	pair_up(&p, 0, 1);
	atomic_store(&SHM_QP(p.s)->me.rq[0].offset, 0xfffff000u);
	CHECK_EQ(send_buf(p.c, 1, "x", 1, 0), 0);
	CHECK_EQ(T->poll_cq(p.c, wc, 32), 1);
	CHECK_EQ(wc[0].status, SDP_WC_GENERAL_ERR);
	pair_down(&p);

	/* 4: the receiver's rq_prod runs away (more than the ring holds). */
	pair_up(&p, 0, 1);
	atomic_store(&SHM_QP(p.s)->me.ctrl->rq_prod, 0x7fffffff);
	CHECK_EQ(send_buf(p.c, 1, "x", 1, 0), 0);
	CHECK_EQ(T->poll_cq(p.c, wc, 32), 1);
	CHECK_EQ(wc[0].status, SDP_WC_GENERAL_ERR);
	pair_down(&p);

	/* 5: a garbage status word. */
	pair_up(&p, 0, 1);
	atomic_store(&SHM_QP(p.c)->peer.cq[0].status, 77);
	atomic_store(&SHM_QP(p.c)->peer.ctrl->cq_prod, 1);
	CHECK_EQ(T->poll_cq(p.s, wc, 32), 1);
	CHECK_EQ(wc[0].status, SDP_WC_GENERAL_ERR);
	pair_down(&p);

	/* 5b: completions naming a receive that is not posted: a tag past
	 * the ring, then one the previous completion already returned. */
	pair_up(&p, 0, 2);
	atomic_store(&SHM_QP(p.c)->peer.cq[0].tag, 999);
	atomic_store(&SHM_QP(p.c)->peer.cq[0].byte_len, 1);
	atomic_store(&SHM_QP(p.c)->peer.ctrl->cq_prod, 1);
	CHECK_EQ(T->poll_cq(p.s, wc, 32), 2);
	CHECK_EQ(wc[0].status, SDP_WC_GENERAL_ERR);
	CHECK_EQ(wc[0].wr_id, 2000);		/* reported as the oldest */
	CHECK_EQ(wc[1].status, SDP_WC_WR_FLUSH_ERR);
	pair_down(&p);
	pair_up(&p, 0, 2);
	CHECK_EQ(send_buf(p.c, 1, "x", 1, 0), 0);
	atomic_store(&SHM_QP(p.c)->peer.cq[1].tag,
		     atomic_load(&SHM_QP(p.c)->peer.cq[0].tag));
	atomic_store(&SHM_QP(p.c)->peer.cq[1].byte_len, 1);
	atomic_store(&SHM_QP(p.c)->peer.ctrl->cq_prod, 2);
	CHECK_EQ(T->poll_cq(p.s, wc, 32), 2);
	CHECK_EQ(wc[0].status, SDP_WC_SUCCESS);
	CHECK_EQ(wc[1].status, SDP_WC_GENERAL_ERR);
	pair_down(&p);

	/* 6: a torn/odd MR table entry never validates. */
	pair_up(&p, 0, 0);
	{
		static uint8_t mem[64], dst[64];
		struct sdp_mr *mr, *lmr;
		struct sdp_sge sge;
		struct sdp_send_wr wr = { .wr_id = 9, .opcode = SDP_WR_RDMA_READ,
					  .sg_list = &sge, .num_sge = 1 };

		CHECK_EQ(T->reg_mr(p.s, mem, 64, SDP_ACCESS_REMOTE_READ, &mr), 0);
		CHECK_EQ(T->reg_mr(p.c, dst, 64, SDP_ACCESS_LOCAL_WRITE, &lmr), 0);
		atomic_fetch_add(&SHM_QP(p.s)->me.mr[mr->rkey & 0xff].gen,
				 1);
		sge = (struct sdp_sge){ (uintptr_t)dst, 64, lmr->lkey };
		wr.remote_addr = mr->remote_addr;
		wr.rkey = mr->rkey;
		CHECK_EQ(T->post_send(p.c, &wr), 0);
		CHECK_EQ(T->poll_cq(p.c, wc, 32), 1);
		CHECK_EQ(wc[0].status, SDP_WC_REM_ACCESS_ERR);
	}
	pair_down(&p);

	/* 7: an entry registered by another process (a forked child of the
	 * peer) is refused, not applied to the parent's memory. */
	pair_up(&p, 0, 0);
	{
		static uint8_t mem[64], dst[64];
		struct sdp_mr *mr, *lmr;
		struct sdp_sge sge;
		struct sdp_send_wr wr = { .wr_id = 9, .opcode = SDP_WR_RDMA_READ,
					  .sg_list = &sge, .num_sge = 1 };

		CHECK_EQ(T->reg_mr(p.s, mem, 64, SDP_ACCESS_REMOTE_READ, &mr), 0);
		CHECK_EQ(T->reg_mr(p.c, dst, 64, SDP_ACCESS_LOCAL_WRITE, &lmr), 0);
		atomic_store(&SHM_QP(p.s)->me.mr[mr->rkey & 0xff].pid,
			     (uint32_t)getpid() + 1);
		sge = (struct sdp_sge){ (uintptr_t)dst, 64, lmr->lkey };
		wr.remote_addr = mr->remote_addr;
		wr.rkey = mr->rkey;
		CHECK_EQ(T->post_send(p.c, &wr), 0);
		CHECK_EQ(T->poll_cq(p.c, wc, 32), 1);
		CHECK_EQ(wc[0].status, SDP_WC_REM_ACCESS_ERR);
	}
	pair_down(&p);
}

/* ---- tests: kept listener segments (shm_keep.c) ------------------------- */

struct keep_counts {
	unsigned long kept, taken;
};

static struct keep_counts keep_now(void)
{
	struct keep_counts k;

	sdp__shm_keep_counts(&k.kept, &k.taken);
	return k;
}

/* Message i of 8 made from `seed`. */
static uint32_t msg_fill(uint8_t *m, unsigned seed, int i)
{
	for (int j = 0; j < 512; j++)
		m[j] = (uint8_t)(seed * 7919u + i * 31u + j * 13u);
	return 100 + 50 * i;
}

/* Unsignaled: only the peer's messages complete here. */
static void send_msgs(struct sdp_qp *qp, unsigned seed)
{
	uint8_t m[512];

	for (int i = 0; i < 8; i++)
		CHECK_EQ(send_buf(qp, i, m, msg_fill(m, seed, i), 0), 0);
}

/* The 8 messages of `seed` arrived whole, and nothing else. */
static void check_msgs(struct sdp_qp *qp, unsigned seed)
{
	struct sdp_wc wc[9];
	uint8_t m[512];
	int bad = 0;

	int got = poll_n(qp, wc, 8);

	CHECK_EQ(got, 8);
	for (int i = 0; i < 8; i++) {
		uint32_t len = msg_fill(m, seed, i);

		bad += wc[i].status != SDP_WC_SUCCESS || wc[i].byte_len != len ||
		       csum(recv_buf(qp, wc[i].wr_id), len) != csum(m, len);
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(T->poll_cq(qp, wc, 9), 0);
}

static void exchange(struct sdp_qp *from, struct sdp_qp *to, unsigned seed)
{
	send_msgs(from, seed);
	check_msgs(to, seed);
}

/* Client and server in this process, on listener `l`: connect (as the
 * engine does, naming the destination at create_qp if `say_dst`), then 8
 * messages each way with their checksums checked. */
static void pair_on(struct pair *p, struct sdp_listener *l, int port,
		    bool say_dst)
{
	struct sockaddr_in a = sin4("127.0.0.1", port);
	struct sdp_cm_event ev;

	memset(p, 0, sizeof(*p));
	p->c = qp_new_to(8, say_dst ? port : 0);
	CHECK_EQ(T->connect(p->c, NULL, (struct sockaddr *)&a, sizeof(a),
			    "hi", 2), 0);
	p->s = serve_one(l, 8, "ack", NULL);
	if (!p->s)
		return;
	CHECK_EQ(T->get_event(p->c, &ev), 0);
	CHECK_EQ(ev.type, SDP_CM_ESTABLISHED);
	exchange(p->c, p->s, 1);
	exchange(p->s, p->c, 2);
}

static void pair_end(struct pair *p, bool server_first)
{
	if (server_first) {
		T->destroy_qp(p->s);
		T->destroy_qp(p->c);
	} else {
		T->destroy_qp(p->c);
		T->destroy_qp(p->s);
	}
	p->c = p->s = NULL;
}

/* A connection that ends leaves its segments kept; the next connection
 * of the same client process takes them again, reset: the MR tables the
 * last one wrote are empty, the data is right.  With the destination
 * known at create_qp (as the engine says it) both segments are taken,
 * else the listener's only; both orders of the ends. */
static void test_keep_same_process(void)
{
	static uint8_t mem[4096];
	struct keep_counts k0, k1;
	struct sdp_listener *l;
	struct sdp_mr *mr, *cmr;
	struct pair p;
	void *seg, *cseg;
	int port;

	l = listener_new(&port);
	for (int mode = 0; mode < 4; mode++) {
		bool both = mode >= 2, server_first = mode & 1;

		pair_on(&p, l, port, both);
		if (!p.s)
			break;
		seg = SHM_QP(p.s)->me.ctrl;
		cseg = SHM_QP(p.c)->me.ctrl;
		CHECK_EQ(T->reg_mr(p.s, mem, sizeof(mem),
				   SDP_ACCESS_REMOTE_READ, &mr), 0);
		CHECK_EQ(T->reg_mr(p.c, mem, sizeof(mem),
				   SDP_ACCESS_REMOTE_READ, &cmr), 0);
		k0 = keep_now();
		pair_end(&p, server_first);
		k1 = keep_now();
		CHECK_EQ(k1.kept - k0.kept, 2);	/* each side's */

		pair_on(&p, l, port, both);
		if (!p.s)
			break;
		CHECK_EQ(keep_now().taken - k1.taken, 1);
		CHECK(SHM_QP(p.s)->me.ctrl == seg);
		CHECK_EQ(SHM_QP(p.c)->me.ctrl == cseg, both);
		CHECK(SHM_QP(p.c)->peer.ctrl != NULL);
		for (int i = 0; i < SHM_MAX_MR; i++) {
			CHECK_EQ(atomic_load(&SHM_QP(p.c)->peer.mr[i].rkey), 0);
			CHECK_EQ(atomic_load(&SHM_QP(p.s)->peer.mr[i].rkey), 0);
		}
		CHECK_EQ(atomic_load(&SHM_QP(p.c)->peer.ctrl->closed), 0);
		CHECK_EQ(atomic_load(&SHM_QP(p.s)->peer.ctrl->closed), 0);
		pair_end(&p, server_first);
	}
	T->close_listener(l);
}

/* Another process that names a kept segment, with its nonce, is given a
 * new one: a segment serves again only the process it served. */
struct keep_arg {
	int port;
	uint64_t nonce;
	pid_t keeper;
};

static void child_offers_foreign_pair(void *v)
{
	struct keep_arg *a = v;
	struct sockaddr_in sa = sin4("127.0.0.1", a->port);
	struct sdp_qp *c = qp_new(8);
	struct sdp_cm_event ev = { 0 };

	CHECK(c != NULL);
	if (!c)
		return;
	/* What its parent kept is not the child's to offer. */
	{
		struct shm_addr d;
		int v6;

		CHECK_EQ(sdp__shm_addr_parse((struct sockaddr *)&sa, sizeof(sa),
					     &d, &v6), 0);
		sdp__shm_keep_offer(SHM_QP(c), &d);
		CHECK_EQ(SHM_QP(c)->offer, 0);
	}
	/* A process that learnt the nonce tries it anyway. */
	SHM_QP(c)->offer = a->nonce;
	SHM_QP(c)->kept_pid = a->keeper;
	CHECK_EQ(T->connect(c, NULL, (struct sockaddr *)&sa, sizeof(sa), "x",
			    1), 0);
	wait_established(c, &ev);
	/* A new segment: not the one named. */
	CHECK(SHM_QP(c)->peer.ctrl != NULL);
	if (SHM_QP(c)->peer.ctrl)
		CHECK(SHM_QP(c)->peer.nonce != a->nonce);
	CHECK_EQ(send_buf(c, 1, "child", 5, 0), 0);
	from_parent();
	T->destroy_qp(c);
}

static void test_keep_other_process(void)
{
	struct keep_arg a;
	struct sdp_listener *l = listener_new(&a.port);
	struct keep_counts k0;
	struct sdp_wc wc[8];
	struct sdp_qp *s;
	struct pair p;
	void *seg;

	pair_on(&p, l, a.port, false);
	if (!p.s)
		goto out;
	seg = SHM_QP(p.s)->me.ctrl;
	a.nonce = SHM_QP(p.s)->me.nonce;
	a.keeper = getpid();
	pair_end(&p, false);

	k0 = keep_now();
	spawn(child_offers_foreign_pair, &a);
	s = serve_one(l, 4, "ok", NULL);
	if (s) {
		CHECK_EQ(keep_now().taken, k0.taken);
		CHECK(SHM_QP(s)->me.ctrl != seg);
		CHECK_EQ(poll_n(s, wc, 1), 1);
		CHECK_EQ(wc[0].byte_len, 5);
		CHECK(!memcmp(recv_buf(s, wc[0].wr_id), "child", 5));
		to_child('d');
		T->destroy_qp(s);
	}
	reap();

	/* Still kept for this process. */
	pair_on(&p, l, a.port, false);
	if (p.s) {
		CHECK_EQ(keep_now().taken - k0.taken, 1);
		CHECK(SHM_QP(p.s)->me.ctrl == seg);
		pair_end(&p, true);
	}
out:
	T->close_listener(l);
}

/* A listener on an ephemeral port, with the pair of one finished
 * connection kept on both sides. */
static struct sdp_listener *listener_with_pair(int *port)
{
	struct sdp_listener *l = listener_new(port);
	struct pair p;

	pair_on(&p, l, *port, true);
	if (p.s)
		pair_end(&p, true);
	return l;
}

/* Not while the peer's QP on it lives: it may still write there. */
static void test_keep_not_while_peer_lives(void)
{
	struct sdp_listener *l;
	struct keep_counts k0;
	struct sdp_qp *c2, *s2;
	struct sockaddr_in a;
	struct sdp_cm_event ev;
	struct pair p;
	int port;

	l = listener_new(&port);
	a = sin4("127.0.0.1", port);
	pair_on(&p, l, port, false);
	if (!p.s)
		goto out;
	T->destroy_qp(p.s);	/* kept; the client's QP lives on */
	k0 = keep_now();
	c2 = qp_new(8);
	SHM_QP(c2)->offer = SHM_QP(p.c)->peer.nonce;
	SHM_QP(c2)->kept_pid = getpid();
	CHECK_EQ(T->connect(c2, NULL, (struct sockaddr *)&a, sizeof(a), "y",
			    1), 0);
	s2 = serve_one(l, 8, "ok", NULL);
	CHECK_EQ(keep_now().taken, k0.taken);
	if (s2) {
		CHECK(SHM_QP(s2)->me.ctrl != SHM_QP(p.c)->peer.ctrl);
		CHECK_EQ(T->get_event(c2, &ev), 0);
		CHECK_EQ(ev.type, SDP_CM_ESTABLISHED);
		T->destroy_qp(s2);
	}
	T->destroy_qp(c2);
	T->destroy_qp(p.c);

	/* Nor does the client take its own segment back while the
	 * listener's QP on it lives (a new port: none kept there yet). */
	T->close_listener(l);
	l = listener_new(&port);
	pair_on(&p, l, port, true);
	if (!p.s)
		goto out;
	T->destroy_qp(p.c);
	c2 = qp_new_to(8, port);
	CHECK_EQ(SHM_QP(c2)->offer_mine, 0);
	CHECK(SHM_QP(c2)->me.ctrl != SHM_QP(p.s)->peer.ctrl);
	T->destroy_qp(c2);
	T->destroy_qp(p.s);
out:
	T->close_listener(l);
}

/* The client's pair to a listener process that is gone: a new listener
 * process on the same port does not keep it and answers RETRY; the client
 * maps a new segment over its own, its receives written there again from
 * its own records, and sends its Hello again with it.  The old listener,
 * which still maps the client's old segment, writes all over it before
 * and after: the new connection sees none of it. */
struct lsn_child {
	pid_t pid;
	int to[2], from[2];
};

static void lsn_serve(struct lsn_child *k, int port, bool first)
{
	struct sockaddr_in a = sin4("127.0.0.1", port);
	struct sdp_listener *l = NULL;
	struct sockaddr_storage ss;
	struct shm_seg theirs;
	socklen_t len = sizeof(ss);
	struct sdp_qp *s;

	g_who = first ? "listener 1: " : "listener 2: ";
	CHECK_EQ(T->bind((struct sockaddr *)&a, sizeof(a), &l), 0);
	CHECK_EQ(T->listen(l, 8), 0);
	CHECK_EQ(T->bound_addr(l, &ss, &len), 0);
	port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	CHECK_EQ(write(k->from[1], &port, sizeof(port)), sizeof(port));
	s = serve_one(l, 8, "ok", NULL);
	if (!s)
		return;
	check_msgs(s, first ? 1 : 3);
	send_msgs(s, first ? 2 : 4);
	theirs = SHM_QP(s)->peer;
	if (!first) {
		step_recv(k->to[0]);
		T->destroy_qp(s);	/* kept */
		step_send(k->from[1], 'e');
		step_recv(k->to[0]);
		T->close_listener(l);
		return;
	}
	T->destroy_qp(s);	/* kept, with the client's segment mapped */
	T->close_listener(l);
	step_send(k->from[1], 'c');
	/* Each 'w': write all over the client's old segment. */
	while (step_recv(k->to[0]) == 'w') {
		memset(theirs.region, 0xab, theirs.region_size);
		for (uint32_t i = 0; i < theirs.depth; i++) {
			atomic_store(&theirs.rq[i].offset, 0xabab);
			atomic_store(&theirs.cq[i].byte_len, 7);
		}
		atomic_fetch_add(&theirs.ctrl->cq_prod, 3);
		atomic_fetch_add(&theirs.ctrl->rq_prod, 5);
		step_send(k->from[1], 'd');
	}
}

static int lsn_spawn(struct lsn_child *k, int port, bool first)
{
	int got = 0;

	if (pipe(k->to) || pipe(k->from))
		abort();
	fflush(stdout);
	k->pid = fork();
	if (k->pid == 0) {
		g_checks_failed = 0;
		lsn_serve(k, port, first);
		fflush(stdout);
		_exit(g_checks_failed ? 1 : 0);
	}
	if (!fd_readable(k->from[0], 3 * TMO) ||
	    read(k->from[0], &got, sizeof(got)) != sizeof(got))
		return 0;
	return got;
}

static void lsn_reap(struct lsn_child *k)
{
	int st = 0;

	step_send(k->to[1], 'q');
	CHECK_EQ(waitpid(k->pid, &st, 0), k->pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(k->to[0]);
	close(k->to[1]);
	close(k->from[0]);
	close(k->from[1]);
}

static void test_keep_retry(void)
{
	struct lsn_child l1, l2;
	struct sdp_cm_event ev;
	struct sdp_qp *c;
	uint64_t nonce;
	uint8_t *region;
	void *seg;
	int port, run = 0;

	port = lsn_spawn(&l1, 0, true);
	CHECK(port > 0);
	c = qp_new_to(8, port);
	CHECK_EQ(T->connect(c, NULL, (struct sockaddr *)&(struct sockaddr_in){
				    .sin_family = AF_INET,
				    .sin_port = htons(port),
				    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) },
			    sizeof(struct sockaddr_in), "a", 1), 0);
	wait_established(c, &ev);
	send_msgs(c, 1);
	check_msgs(c, 2);
	T->destroy_qp(c);
	CHECK_EQ(step_recv(l1.from[0]), 'c');	/* listener 1 kept its side */

	CHECK_EQ(lsn_spawn(&l2, port, false), port);
	c = qp_new_to(8, port);
	CHECK(SHM_QP(c)->offer_mine != 0);	/* the pair is named */
	seg = SHM_QP(c)->me.ctrl;
	nonce = SHM_QP(c)->me.nonce;
	step_send(l1.to[1], 'w');	/* before the RETRY: nothing carried */
	CHECK_EQ(step_recv(l1.from[0]), 'd');
	CHECK_EQ(T->connect(c, NULL, (struct sockaddr *)&(struct sockaddr_in){
				    .sin_family = AF_INET,
				    .sin_port = htons(port),
				    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) },
			    sizeof(struct sockaddr_in), "b", 1), 0);
	wait_established(c, &ev);
	CHECK_EQ(SHM_QP(c)->offer_mine, 0);
	CHECK(SHM_QP(c)->me.ctrl == seg);	/* in place */
	CHECK(SHM_QP(c)->me.nonce != nonce);	/* a new file */
	step_send(l1.to[1], 'w');		/* and after: unseen */
	CHECK_EQ(step_recv(l1.from[0]), 'd');
	send_msgs(c, 3);
	check_msgs(c, 4);
	region = T->recv_region(c)->addr;
	for (uint32_t i = 0; i + 64 <= REGION; i += 64) {
		bool all = true;

		for (int j = 0; j < 64; j++)
			all &= region[i + j] == 0xab;
		run += all;
	}
	CHECK_EQ(run, 0);
	T->destroy_qp(c);

	/* Listener 2 keeps its side of the new pair: one RETRY does not
	 * stop the client naming pairs there. */
	step_send(l2.to[1], 'k');
	CHECK_EQ(step_recv(l2.from[0]), 'e');
	c = qp_new_to(8, port);
	CHECK(SHM_QP(c)->offer_mine != 0);
	T->destroy_qp(c);
	lsn_reap(&l2);
	lsn_reap(&l1);
}

/* A listener that answers RETRY to a quarter or more of the pairs named
 * (processes share it: which one accepts is not known) is named none for
 * a while, though pairs are kept for it.  The RETRYs come from offers
 * whose listener segment is not one the listener keeps. */
static void test_keep_off_after_retries(void)
{
	struct sockaddr_in a;
	struct sdp_listener *l;
	struct sdp_cm_event ev;
	struct sdp_qp *c, *s;
	int port;

	l = listener_with_pair(&port);
	a = sin4("127.0.0.1", port);
	for (int i = 0; i < 3; i++) {
		c = qp_new_to(8, port);
		CHECK(SHM_QP(c)->offer_mine != 0);
		SHM_QP(c)->offer ^= 0x5a5a;	/* not what the listener keeps */
		CHECK_EQ(T->connect(c, NULL, (struct sockaddr *)&a, sizeof(a),
				    "r", 1), 0);
		/* Both ends here: the listener answers RETRY, the client
		 * sends its Hello again, the listener takes that one. */
		{
			uint8_t priv[SDP_CM_PRIV_MAX];
			struct sdp_conn_req *req = NULL;
			uint32_t plen = 0;

			CHECK(fd_readable(T->listener_fd(l), TMO));
			CHECK_EQ(T->get_request(l, &req, priv, &plen), -EAGAIN);
			CHECK(fd_readable(T->event_fd(c), TMO));
			CHECK_EQ(T->get_event(c, &ev), -EAGAIN);
		}
		s = serve_one(l, 8, "ok", NULL);
		if (!s)
			break;
		wait_established(c, &ev);
		CHECK_EQ(SHM_QP(c)->offer_mine, 0);	/* RETRY taken */
		exchange(c, s, 5);
		exchange(s, c, 6);
		T->destroy_qp(s);
		T->destroy_qp(c);
	}
	c = qp_new_to(8, port);
	CHECK_EQ(SHM_QP(c)->offer_mine, 0);
	T->destroy_qp(c);
	T->close_listener(l);
}

/* A RETRY while a thread sleeps in wait() on the connecting QP (as the
 * engine's connect does, the progress thread taking the answer): the
 * segment it sleeps on is replaced; it is woken, and the count of
 * sleepers the peer reads is the new segment's, back to 0 once it left. */
static void test_keep_retry_sleeper(void)
{
	uint8_t priv[SDP_CM_PRIV_MAX];
	struct sdp_conn_req *req = NULL;
	struct waiter_arg z = { 0 };
	struct sockaddr_in a;
	struct sdp_listener *l;
	struct sdp_cm_event ev;
	struct sdp_qp *s;
	uint32_t plen = 0;
	uint64_t end;
	pthread_t th;
	int port;

	l = listener_with_pair(&port);
	a = sin4("127.0.0.1", port);
	z.qp = qp_new_to(8, port);
	CHECK(SHM_QP(z.qp)->offer_mine != 0);
	SHM_QP(z.qp)->offer ^= 0x5a5a;	/* not what the listener keeps */
	CHECK_EQ(T->connect(z.qp, NULL, (struct sockaddr *)&a, sizeof(a), "z",
			    1), 0);
	z.seq = T->wait_seq(z.qp);
	CHECK_EQ(pthread_create(&th, NULL, waiter, &z), 0);
	end = now_ms() + TMO;
	while (!atomic_load(&SHM_QP(z.qp)->me.ctrl->waiters) && now_ms() < end)
		sched_yield();
	CHECK(fd_readable(T->listener_fd(l), TMO));
	CHECK_EQ(T->get_request(l, &req, priv, &plen), -EAGAIN);  /* RETRY */
	CHECK(fd_readable(T->event_fd(z.qp), TMO));
	CHECK_EQ(T->get_event(z.qp, &ev), -EAGAIN);	/* the Hello again */
	CHECK_EQ(pthread_join(th, NULL), 0);
	CHECK_EQ(z.ret, 0);
	CHECK_EQ(atomic_load(&SHM_QP(z.qp)->me.ctrl->waiters), 0);
	s = serve_one(l, 8, "ok", NULL);
	if (s) {
		wait_established(z.qp, &ev);
		exchange(z.qp, s, 7);
		exchange(s, z.qp, 8);
		T->destroy_qp(s);
	}
	T->destroy_qp(z.qp);
	T->close_listener(l);
}

/* A listener whose pool is full gives its oldest pair up, and says so in
 * its segment: the client names that pair no more (it would be answered
 * RETRY, a round trip lost). */
static void test_keep_given_up(void)
{
	struct sockaddr_in a;
	struct sdp_listener *l, *l2;
	int port, port2;

	l = listener_with_pair(&port);
	l2 = listener_new(&port2);
	a = sin4("127.0.0.1", port2);
	/* 16 more kept by the listener only: these clients never see their
	 * connection established, so they keep nothing. */
	for (int i = 0; i < 16; i++) {
		struct sdp_qp *c = qp_new(8), *s;

		CHECK_EQ(T->connect(c, NULL, (struct sockaddr *)&a, sizeof(a),
				    "g", 1), 0);
		s = serve_one(l2, 8, "ok", NULL);
		if (s)
			T->destroy_qp(s);
		T->destroy_qp(c);
	}
	{
		struct sdp_qp *c = qp_new_to(8, port);

		CHECK_EQ(SHM_QP(c)->offer_mine, 0);
		T->destroy_qp(c);
	}
	T->close_listener(l2);
	T->close_listener(l);
}

static void test_local_completion_notify(void)
{
	struct sdp_wc wc[4];
	struct pair p;

	pair_up(&p, 0, 2);
	T->ack_events(p.c);
	has_news(p.c, 0);		/* the handshake's */
	CHECK_EQ(T->req_notify(p.c), 0);
	CHECK(!has_news(p.c, 0));
	CHECK_EQ(send_buf(p.c, 7, "q", 1, SDP_SEND_SIGNALED), 0);
	CHECK(has_news(p.c, 0));	/* own send completion notifies */
	T->ack_events(p.c);
	CHECK_EQ(T->poll_cq(p.c, wc, 4), 1);
	CHECK_EQ(wc[0].wr_id, 7);
	CHECK_EQ(T->req_notify(p.c), 0);
	CHECK(!has_news(p.c, 0));
	/* Disconnect: the peer's fd fires and it flushes. */
	CHECK_EQ(T->req_notify(p.s), 1);	/* the SEND is pending */
	CHECK_EQ(T->poll_cq(p.s, wc, 4), 1);
	CHECK_EQ(T->req_notify(p.s), 0);
	T->ack_events(p.s);
	CHECK_EQ(T->disconnect(p.c), 0);
	CHECK(has_news(p.s, TMO));
	CHECK_EQ(T->poll_cq(p.s, wc, 4), 1);
	CHECK_EQ(wc[0].status, SDP_WC_WR_FLUSH_ERR);
	pair_down(&p);
}

int main(void)
{
	static const struct { void (*fn)(void); const char *name; } tests[] = {
		{ test_bind, "bind, ephemeral port, EADDRINUSE, conflicts" },
		{ test_refused, "connect to nothing: REJECTED; non-local: ENETUNREACH" },
		{ test_reject_and_halfopen, "reject; half-open and junk clients" },
		{ test_addresses_and_backlog, "addresses (v4, v6, dual stack), backlog full" },
		{ test_fork_handshake_and_send, "fork: handshake, SEND sizes, streaming" },
		{ test_peer_destroy, "fork: peer destroy -> completions then flush" },
		{ test_peer_destroy_then_send, "peer destroy, then our send: its completions first" },
		{ test_peer_kill, "fork: peer kill -9 -> flush, waiter wakes" },
		{ test_wait_and_notify, "fork: wait/kick, req_notify doorbell" },
		{ test_rdma, "fork: RDMA READ/WRITE by cross-memory attach" },
		{ test_rdma_access_inproc, "RDMA REM_ACCESS_ERR cases" },
		{ test_rdma_other_user, "no RDMA with a peer of other ids" },
		{ test_rnr_and_oversize, "RNR and oversize SEND are fatal" },
		{ test_corrupt_rings, "hostile peer corrupts shared memory" },
		{ test_local_completion_notify, "local completions notify the engine" },
		{ test_keep_same_process, "kept listener segment: taken again, reset" },
		{ test_keep_other_process, "kept segment: not for another process" },
		{ test_keep_not_while_peer_lives, "kept segment: not while its client's QP lives" },
		{ test_keep_retry, "kept pair: RETRY from another listener, old peer's writes unseen" },
		{ test_keep_off_after_retries, "kept pair: none named where a quarter are answered RETRY" },
		{ test_keep_retry_sleeper, "kept pair: RETRY under a sleeper in wait(): woken, count moved" },
		{ test_keep_given_up, "kept pair: one the listener gave up is named no more" },
	};
	int n = sizeof(tests) / sizeof(tests[0]), failed = 0;

	signal(SIGPIPE, SIG_IGN);
	T = sdp_shm_transport.ops;
	printf("1..%d\n", n);
	for (int i = 0; i < n; i++) {
		g_checks_failed = 0;
		tests[i].fn();
		printf("%sok %d - %s\n", g_checks_failed ? "not " : "", i + 1,
		       tests[i].name);
		fflush(stdout);
		failed += !!g_checks_failed;
	}
	return failed ? 1 : 0;
}
