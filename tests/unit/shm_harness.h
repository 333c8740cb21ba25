/* SPDX-License-Identifier: MIT */
/*
 * shm_harness.h — what the unit tests of the "shm" transport share
 * (test_shm_cm.c, test_shm_data.c, test_shm_keep.c): QPs and listeners
 * driven through the transport's ops, and a forked peer; the checks and
 * the TAP runner are unit_tap.h's.
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
 * Each program's output is TAP; exit 0 if all pass, 1 otherwise.
 */
#ifndef SDP_TESTS_SHM_HARNESS_H
#define SDP_TESTS_SHM_HARNESS_H

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
#include "unit_tap.h"

static const struct sdp_transport_ops *T;

#define REGION 65536
#define RBUF 4096
#define TMO 5000	/* ms; only reached when a test fails */

static inline uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline struct sockaddr_in sin4(const char *ip, int port)
{
	struct sockaddr_in s = { .sin_family = AF_INET, .sin_port = htons(port) };

	inet_pton(AF_INET, ip, &s.sin_addr);
	return s;
}

static inline struct sockaddr_in6 sin6(const char *ip, int port)
{
	struct sockaddr_in6 s = { .sin6_family = AF_INET6,
				  .sin6_port = htons(port) };

	inet_pton(AF_INET6, ip, &s.sin6_addr);
	return s;
}

static inline bool fd_readable(int fd, int tmo)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, tmo) == 1;
}

static inline uint32_t csum(const uint8_t *p, size_t n)
{
	uint32_t h = 2166136261u;

	while (n--)
		h = (h ^ *p++) * 16777619u;
	return h;
}

/* The buffer post_recvs() posted with this wr_id.  A SEND fills the
 * newest posted receive (shm_qp.c), so tests find data by wr_id. */
static inline uint8_t *recv_buf(struct sdp_qp *qp, uint64_t wr_id)
{
	return (uint8_t *)T->recv_region(qp)->addr +
	       ((wr_id % 1000) % 16) * RBUF;
}

static inline int post_recvs(struct sdp_qp *qp, int first, int n, uint64_t id0)
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

static inline void note_notify(void *ctx)
{
	atomic_fetch_add((_Atomic int *)ctx, 1);
}

static inline void note_fd_changed(void *ctx)
{
	(void)ctx;	/* has_news() asks event_fd() each time */
}

static const struct sdp_qp_events note_events = {
	.fd_changed = note_fd_changed,
	.notify = note_notify,
};

static inline void attr_events(struct sdp_qp_attr *a)
{
	a->events = &note_events;
	a->events_ctx = &notes[note_next++ % 64];
	atomic_store((_Atomic int *)a->events_ctx, 0);
}

/* News for the QP's progress side: a notify() since the last look, or its
 * event descriptor readable within tmo ms. */
static inline bool has_news(struct sdp_qp *qp, int tmo)
{
	if (atomic_exchange((_Atomic int *)SHM_QP(qp)->attr.events_ctx, 0))
		return true;
	return fd_readable(T->event_fd(qp), tmo);
}

/* A QP for a connect to 127.0.0.1:port (0: not said, as the engine says
 * it), with `nrecv` receives posted. */
static inline struct sdp_qp *qp_new_to(int nrecv, int port)
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

static inline struct sdp_qp *qp_new(int nrecv)
{
	return qp_new_to(nrecv, 0);
}

static inline int send_buf(struct sdp_qp *qp, uint64_t id, const void *buf,
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
static inline int poll_n(struct sdp_qp *qp, struct sdp_wc *wc, int want)
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
static inline struct sdp_listener *listener_new(int *port)
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
static inline struct sdp_qp *serve_one(struct sdp_listener *l, int nrecv,
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
static inline void wait_established(struct sdp_qp *c, struct sdp_cm_event *ev)
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

static inline struct sdp_qp *dial(int port, int nrecv, const char *hello, char *ack)
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
static inline void pair_up(struct pair *p, int nrecv_c, int nrecv_s)
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

static inline void pair_down(struct pair *p)
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

static inline void step_send(int fd, char c)
{
	CHECK_EQ(write(fd, &c, 1), 1);
}

static inline char step_recv(int fd)
{
	char c = 0;

	if (!fd_readable(fd, 3 * TMO) || read(fd, &c, 1) != 1)
		return 0;
	return c;
}

/* Child side shorthands. */
static inline void to_parent(char c) { step_send(g_child.from[1], c); }
static inline char from_parent(void) { return step_recv(g_child.to[0]); }
static inline void to_child(char c) { step_send(g_child.to[1], c); }
static inline char from_child(void) { return step_recv(g_child.from[0]); }

static inline void spawn(void (*fn)(void *), void *arg)
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

static inline void reap(void)
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

/* A thread asleep in wait() on a QP. */
struct waiter_arg {
	struct sdp_qp *qp;
	uint32_t seq;
	int ret;
};

static inline void *waiter(void *v)
{
	struct waiter_arg *a = v;

	a->ret = T->wait(a->qp, a->seq, 3 * TMO);
	return NULL;
}

struct hs_arg {
	int port;
};

/* The programs' runner: unit_tap.h's, with the shm transport's ops. */
static inline int shm_run_tests(const struct unit_test *tests, int n)
{
	signal(SIGPIPE, SIG_IGN);
	T = sdp_shm_transport.ops;
	return unit_run_all(tests, n);
}

#endif
