/* SPDX-License-Identifier: MIT */
/*
 * test_loop.c — unit tests of the "loop" transport (src/transport/loop.c)
 * and of the shared defaults (dummy.c).
 *
 * Everything here is deterministic: the loop provider completes work at post
 * time, so tests check exact completion sequences.  The wait()/kick() test
 * uses a second thread and synchronises only through the transport itself.
 *
 * Output is TAP: one "ok N - desc" / "not ok N - desc" per test function;
 * failed checks print both values.  Exit 0 if all pass, 1 otherwise.
 */
#include <errno.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loop_transport.h"
#include "transport/transport.h"
#include "unit_tap.h"


static const struct sdp_transport_ops *T;

#define REGION 65536
#define RBUF 4096

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

static bool fd_readable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, 0) == 1;
}

static struct sdp_qp *qp_new(int nrecv)
{
	struct sdp_qp_attr a = { .max_send_wr = 64, .max_recv_wr = 64,
				 .recv_region_size = REGION };
	struct sdp_qp *qp = NULL;

	CHECK_EQ(T->create_qp(&a, &qp), 0);
	for (int i = 0; qp && i < nrecv; i++) {
		struct sdp_mr *r = T->recv_region(qp);
		struct sdp_recv_wr w = {
			.wr_id = 1000 + i,
			.sge = { (uintptr_t)r->addr + (uint64_t)i * RBUF, RBUF,
				 r->lkey },
		};

		CHECK_EQ(T->post_recv(qp, &w), 0);
	}
	return qp;
}

struct pair {
	struct sdp_listener *l;
	struct sdp_qp *c, *s;
};

/* Client with `nrecv` receives connects to a listener on `port`; the server
 * QP gets `nrecv` receives too. */
static int pair_up(struct pair *p, int port, int nrecv)
{
	struct sockaddr_in a = sin4("127.0.0.1", port);
	struct sdp_qp_attr attr = { .max_send_wr = 64, .max_recv_wr = 64,
				    .recv_region_size = REGION };
	struct sdp_conn_req *req;
	struct sdp_cm_event ev;
	uint8_t priv[SDP_CM_PRIV_MAX];
	uint32_t plen = 0;

	memset(p, 0, sizeof(*p));
	if (T->bind((struct sockaddr *)&a, sizeof(a), &p->l) ||
	    T->listen(p->l, 8))
		return -1;
	p->c = qp_new(nrecv);
	if (T->connect(p->c, NULL, (struct sockaddr *)&a, sizeof(a), "hi", 2))
		return -1;
	if (T->get_request(p->l, &req, priv, &plen) || plen != 2)
		return -1;
	if (T->create_qp_from_req(req, &attr, &p->s))
		return -1;
	for (int i = 0; i < nrecv; i++) {
		struct sdp_mr *r = T->recv_region(p->s);
		struct sdp_recv_wr w = {
			.wr_id = 2000 + i,
			.sge = { (uintptr_t)r->addr + (uint64_t)i * RBUF, RBUF,
				 r->lkey },
		};

		if (T->post_recv(p->s, &w))
			return -1;
	}
	if (T->accept(p->s, "ack", 3))
		return -1;
	if (T->get_event(p->c, &ev) || ev.type != SDP_CM_ESTABLISHED)
		return -1;
	return 0;
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

static uint32_t csum(const uint8_t *p, size_t n)
{
	uint32_t h = 2166136261u;

	while (n--)
		h = (h ^ *p++) * 16777619u;
	return h;
}

/* ---- tests --------------------------------------------------------------- */

static void test_defaults(void)
{
	struct sdp_transport_ops ops = { 0 };
	struct sdp_tp_caps caps;
	struct sdp_qp *qp = NULL;

	sdp_transport_fill_defaults(&ops);
	CHECK_EQ(ops.create_qp(NULL, &qp), -EOPNOTSUPP);
	CHECK_EQ(ops.post_send(NULL, NULL), -EOPNOTSUPP);
	CHECK_EQ(ops.wait_seq(NULL), 0);
	CHECK_EQ(ops.wait(NULL, 0, 0), -EOPNOTSUPP);
	CHECK(ops.recv_region(NULL) == NULL);
	ops.kick(NULL);
	ops.query_caps(NULL, &caps);
	CHECK_EQ(caps.rdma, 0);
	CHECK(!strcmp(sdp_wc_status_str(SDP_WC_RNR_RETRY_EXC_ERR),
		      "RNR retry exceeded"));
	CHECK(!strcmp(sdp_wc_status_str((enum sdp_wc_status)99),
		      "unknown status"));
}

static void test_bind(void)
{
	struct sockaddr_in a = sin4("127.0.0.1", 5000), any = sin4("0.0.0.0", 5000);
	struct sockaddr_in6 any6 = sin6("::", 5001);
	struct sockaddr_in b = sin4("127.0.0.1", 5001), e = sin4("127.0.0.1", 0);
	struct sdp_listener *l1, *l2, *l3, *l4;
	struct sockaddr_storage ss;
	socklen_t len;

	CHECK_EQ(T->bind((struct sockaddr *)&a, sizeof(a), &l1), 0);
	CHECK_EQ(T->bind((struct sockaddr *)&a, sizeof(a), &l2), -EADDRINUSE);
	CHECK_EQ(T->bind((struct sockaddr *)&any, sizeof(any), &l2), -EADDRINUSE);
	CHECK_EQ(T->bind((struct sockaddr *)&any6, sizeof(any6), &l3), 0);
	CHECK_EQ(T->bind((struct sockaddr *)&b, sizeof(b), &l2), -EADDRINUSE);
	CHECK_EQ(T->bind((struct sockaddr *)&e, sizeof(e), &l4), 0);
	CHECK_EQ(T->bound_addr(l4, &ss, &len), 0);
	CHECK_EQ(len, sizeof(struct sockaddr_in));
	CHECK(ntohs(((struct sockaddr_in *)&ss)->sin_port) != 0);
	CHECK_EQ(T->bind((struct sockaddr *)&a, 3, &l2), -EINVAL);
	T->close_listener(l1);
	CHECK_EQ(T->bind((struct sockaddr *)&a, sizeof(a), &l1), 0);
	T->close_listener(l1);
	T->close_listener(l3);
	T->close_listener(l4);
}

static void test_refused(void)
{
	struct sockaddr_in a = sin4("127.0.0.1", 5100);
	struct sdp_qp *qp = qp_new(1);
	struct sdp_cm_event ev;
	struct sdp_wc wc[4];

	CHECK_EQ(T->connect(qp, NULL, (struct sockaddr *)&a, sizeof(a), NULL, 0),
		 0);
	CHECK(fd_readable(T->event_fd(qp)));
	CHECK_EQ(T->get_event(qp, &ev), 0);
	CHECK_EQ(ev.type, SDP_CM_REJECTED);
	CHECK_EQ(ev.err, -ECONNREFUSED);
	CHECK_EQ(T->get_event(qp, &ev), -EAGAIN);
	CHECK_EQ(T->poll_cq(qp, wc, 4), 0);
	T->destroy_qp(qp);
}

static void test_handshake(void)
{
	struct sockaddr_in6 a6 = sin6("::", 5200);
	struct sockaddr_in d = sin4("127.0.0.1", 5200);
	struct sdp_qp_attr attr = { .max_send_wr = 8, .max_recv_wr = 8,
				    .recv_region_size = REGION };
	struct sdp_listener *l;
	struct sdp_conn_req *req;
	struct sdp_qp *c = qp_new(1), *s;
	struct sdp_cm_event ev;
	struct sdp_tp_addr ad;
	uint8_t priv[SDP_CM_PRIV_MAX];
	uint32_t plen;

	CHECK_EQ(T->bind((struct sockaddr *)&a6, sizeof(a6), &l), 0);
	CHECK_EQ(T->listen(l, 4), 0);
	CHECK(!fd_readable(T->listener_fd(l)));
	CHECK_EQ(T->get_request(l, &req, priv, &plen), -EAGAIN);
	CHECK_EQ(T->connect(c, NULL, (struct sockaddr *)&d, sizeof(d), "hello",
			    5), 0);
	CHECK_EQ(T->get_event(c, &ev), -EAGAIN);
	CHECK(fd_readable(T->listener_fd(l)));
	CHECK_EQ(T->get_request(l, &req, priv, &plen), 0);
	CHECK_EQ(plen, 5);
	CHECK(!memcmp(priv, "hello", 5));
	CHECK(!fd_readable(T->listener_fd(l)));
	CHECK_EQ(T->create_qp_from_req(req, &attr, &s), 0);
	CHECK_EQ(T->accept(s, "helloack", 8), 0);
	CHECK(fd_readable(T->event_fd(c)));
	CHECK_EQ(T->get_event(c, &ev), 0);
	CHECK_EQ(ev.type, SDP_CM_ESTABLISHED);
	CHECK_EQ(ev.priv_len, 8);
	CHECK(!memcmp(ev.priv, "helloack", 8));
	T->ack_events(c);
	CHECK(!fd_readable(T->event_fd(c)));

	/* Client: IPv4; server: dual-stack listener presents v4-mapped. */
	CHECK_EQ(T->addresses(c, &ad), 0);
	CHECK_EQ(ad.local.ss_family, AF_INET);
	CHECK_EQ(ntohs(((struct sockaddr_in *)&ad.peer)->sin_port), 5200);
	CHECK_EQ(T->addresses(s, &ad), 0);
	CHECK_EQ(ad.local.ss_family, AF_INET6);
	CHECK_EQ(ntohs(((struct sockaddr_in6 *)&ad.local)->sin6_port), 5200);
	CHECK(IN6_IS_ADDR_V4MAPPED(&((struct sockaddr_in6 *)&ad.peer)->sin6_addr));

	T->destroy_qp(c);
	CHECK_EQ(T->get_event(s, &ev), 0);
	CHECK_EQ(ev.type, SDP_CM_DISCONNECTED);
	T->destroy_qp(s);
	T->close_listener(l);
}

static void test_send_sizes(void)
{
	static const uint32_t sizes[] = { 0, 1, 7, 64, 1000, RBUF };
	struct pair p;
	struct sdp_wc wc[16];
	uint8_t buf[RBUF];
	uint8_t *region;
	int n;

	CHECK_EQ(pair_up(&p, 5300, 8), 0);
	region = T->recv_region(p.s)->addr;
	for (unsigned i = 0; i < 6; i++) {
		for (uint32_t j = 0; j < sizes[i]; j++)
			buf[j] = (uint8_t)(j * 31 + i);
		CHECK_EQ(send_buf(p.c, 10 + i, buf, sizes[i], SDP_SEND_SIGNALED),
			 0);
		n = T->poll_cq(p.s, wc, 16);
		CHECK_EQ(n, 1);
		CHECK_EQ(wc[0].wr_id, 2000 + i);
		CHECK_EQ(wc[0].status, SDP_WC_SUCCESS);
		CHECK_EQ(wc[0].opcode, SDP_WC_RECV);
		CHECK_EQ(wc[0].byte_len, sizes[i]);
		CHECK_EQ(csum(region + i * RBUF, sizes[i]), csum(buf, sizes[i]));
	}
	n = T->poll_cq(p.c, wc, 16);
	CHECK_EQ(n, 6);
	for (int i = 0; i < n; i++) {
		CHECK_EQ(wc[i].wr_id, 10 + i);
		CHECK_EQ(wc[i].opcode, SDP_WC_SEND);
	}
	/* Gather from an MR with several SGEs, unsignaled: no send WC. */
	{
		static uint8_t src[300];
		struct sdp_mr *mr;
		struct sdp_sge sg[3];
		struct sdp_send_wr wr = { .wr_id = 77, .opcode = SDP_WR_SEND,
					  .sg_list = sg, .num_sge = 3 };

		for (int i = 0; i < 300; i++)
			src[i] = (uint8_t)i;
		CHECK_EQ(T->reg_mr(p.c, src, sizeof(src), 0, &mr), 0);
		for (int i = 0; i < 3; i++)
			sg[i] = (struct sdp_sge){ (uintptr_t)src + 100 * i, 100,
						  mr->lkey };
		CHECK_EQ(T->post_send(p.c, &wr), 0);
		CHECK_EQ(T->poll_cq(p.c, wc, 16), 0);
		CHECK_EQ(T->poll_cq(p.s, wc, 16), 1);
		CHECK_EQ(wc[0].byte_len, 300);
		CHECK_EQ(csum(region + 6 * RBUF, 300), csum(src, 300));
		/* Bad lkey: local protection error, QP in error. */
		sg[0].lkey += 1000;
		wr.flags = SDP_SEND_SIGNALED;
		CHECK_EQ(T->post_send(p.c, &wr), 0);
		CHECK_EQ(T->poll_cq(p.c, wc, 16), 9);	/* + 8 flushed recvs */
		CHECK_EQ(wc[0].status, SDP_WC_LOC_PROT_ERR);
		CHECK_EQ(wc[1].status, SDP_WC_WR_FLUSH_ERR);
		CHECK_EQ(T->dereg_mr(p.c, mr), 0);
	}
	pair_down(&p);
}

static void test_rnr_and_oversize(void)
{
	struct pair p;
	struct sdp_wc wc[16];
	uint8_t big[RBUF + 1] = { 0 };
	int n;

	/* RNR: server has no receive posted. */
	CHECK_EQ(pair_up(&p, 5400, 0), 0);
	CHECK_EQ(send_buf(p.c, 1, "x", 1, 0), 0);
	n = T->poll_cq(p.c, wc, 16);
	CHECK_EQ(n, 1);
	CHECK_EQ(wc[0].status, SDP_WC_RNR_RETRY_EXC_ERR);
	CHECK_EQ(wc[0].wr_id, 1);
	/* The receiver's event fd fired for the error; with no receive
	 * posted there is nothing to flush, so nothing is pending. */
	CHECK(fd_readable(T->event_fd(p.s)));
	CHECK_EQ(T->req_notify(p.s), 0);
	pair_down(&p);

	/* Oversize: REM_INV_REQ at the sender, LOC_LEN at the receiver, then
	 * flushes on both sides. */
	CHECK_EQ(pair_up(&p, 5401, 2), 0);
	CHECK_EQ(send_buf(p.c, 5, big, sizeof(big), 0), 0);
	n = T->poll_cq(p.c, wc, 16);
	CHECK_EQ(n, 3);
	CHECK_EQ(wc[0].status, SDP_WC_REM_INV_REQ_ERR);
	CHECK_EQ(wc[1].status, SDP_WC_WR_FLUSH_ERR);
	n = T->poll_cq(p.s, wc, 16);
	CHECK_EQ(n, 2);
	CHECK_EQ(wc[0].status, SDP_WC_LOC_LEN_ERR);
	CHECK_EQ(wc[0].wr_id, 2000);
	CHECK_EQ(wc[1].status, SDP_WC_WR_FLUSH_ERR);
	CHECK_EQ(wc[1].wr_id, 2001);
	/* Posting on a QP in error: accepted, flushed. */
	CHECK_EQ(send_buf(p.c, 6, "y", 1, 0), 0);
	CHECK_EQ(T->poll_cq(p.c, wc, 16), 1);
	CHECK_EQ(wc[0].status, SDP_WC_WR_FLUSH_ERR);
	pair_down(&p);
}

static void test_peer_destroy(void)
{
	struct pair p;
	struct sdp_wc wc[16];
	struct sdp_cm_event ev;
	int n;

	CHECK_EQ(pair_up(&p, 5500, 4), 0);
	CHECK_EQ(send_buf(p.c, 1, "ab", 2, 0), 0);
	CHECK_EQ(send_buf(p.c, 2, "cde", 3, 0), 0);
	T->destroy_qp(p.c);
	p.c = NULL;
	CHECK_EQ(T->req_notify(p.s), 1);
	n = T->poll_cq(p.s, wc, 16);
	CHECK_EQ(n, 4);
	CHECK_EQ(wc[0].status, SDP_WC_SUCCESS);
	CHECK_EQ(wc[0].byte_len, 2);
	CHECK_EQ(wc[1].status, SDP_WC_SUCCESS);
	CHECK_EQ(wc[1].byte_len, 3);
	CHECK_EQ(wc[2].status, SDP_WC_WR_FLUSH_ERR);
	CHECK_EQ(wc[3].status, SDP_WC_WR_FLUSH_ERR);
	CHECK_EQ(wc[3].wr_id, 2003);
	CHECK_EQ(T->get_event(p.s, &ev), 0);
	CHECK_EQ(ev.type, SDP_CM_DISCONNECTED);
	CHECK_EQ(T->req_notify(p.s), 0);
	pair_down(&p);
}

struct waiter_arg {
	struct sdp_qp *qp;
	uint32_t seq;
	int ret;
};

static void *waiter(void *v)
{
	struct waiter_arg *a = v;

	a->ret = T->wait(a->qp, a->seq, 10000);
	return NULL;
}

static void test_wait_kick(void)
{
	struct pair p;
	struct waiter_arg a;
	pthread_t th;
	uint32_t seq;

	CHECK_EQ(pair_up(&p, 5600, 2), 0);
	seq = T->wait_seq(p.s);
	CHECK_EQ(T->wait(p.s, seq, 0), -ETIMEDOUT);
	CHECK_EQ(T->wait(p.s, seq - 1, 0), 0);

	a = (struct waiter_arg){ p.s, T->wait_seq(p.s), 1 };
	pthread_create(&th, NULL, waiter, &a);
	T->kick(p.s);
	pthread_join(th, NULL);
	CHECK_EQ(a.ret, 0);

	/* A completion posted after wait_seq() wakes the waiter. */
	a = (struct waiter_arg){ p.s, T->wait_seq(p.s), 1 };
	pthread_create(&th, NULL, waiter, &a);
	CHECK_EQ(send_buf(p.c, 1, "z", 1, 0), 0);
	pthread_join(th, NULL);
	CHECK_EQ(a.ret, 0);
	pair_down(&p);
}

static void test_notify(void)
{
	struct pair p;
	struct sdp_wc wc[4];
	int fd;

	CHECK_EQ(pair_up(&p, 5700, 2), 0);
	fd = T->event_fd(p.s);
	T->ack_events(p.s);
	CHECK_EQ(T->req_notify(p.s), 0);
	CHECK(!fd_readable(fd));
	CHECK_EQ(send_buf(p.c, 1, "z", 1, 0), 0);
	CHECK(fd_readable(fd));
	T->ack_events(p.s);
	CHECK(!fd_readable(fd));
	/* Not re-armed: the next completion does not ring. */
	CHECK_EQ(send_buf(p.c, 2, "z", 1, 0), 0);
	CHECK(!fd_readable(fd));
	CHECK_EQ(T->req_notify(p.s), 1);	/* work pending */
	CHECK_EQ(T->poll_cq(p.s, wc, 4), 2);
	CHECK_EQ(T->req_notify(p.s), 0);
	pair_down(&p);
}

static void test_rdma(void)
{
	static uint8_t srv[8192], cli[8192];
	struct sdp_mr *smr, *cmr, *ro;
	struct sdp_sge sge;
	struct sdp_send_wr wr = { .num_sge = 1, .sg_list = &sge,
				  .flags = SDP_SEND_SIGNALED };
	struct sdp_tp_caps caps;
	struct sdp_wc wc[4];
	struct pair p;

	CHECK_EQ(pair_up(&p, 5800, 2), 0);
	T->query_caps(p.c, &caps);
	CHECK_EQ(caps.rdma, 1);
	CHECK_EQ(caps.max_inline, UINT32_MAX);
	for (int i = 0; i < 8192; i++)
		srv[i] = (uint8_t)(i * 7), cli[i] = (uint8_t)(i * 13);
	CHECK_EQ(T->reg_mr(p.s, srv, 4096, SDP_ACCESS_REMOTE_READ |
			   SDP_ACCESS_REMOTE_WRITE, &smr), 0);
	CHECK_EQ(T->reg_mr(p.s, srv + 4096, 4096, SDP_ACCESS_REMOTE_READ, &ro), 0);
	CHECK_EQ(T->reg_mr(p.c, cli, sizeof(cli), SDP_ACCESS_LOCAL_WRITE, &cmr),
		 0);

	/* READ 1000 bytes at offset 100 into cli. */
	sge = (struct sdp_sge){ (uintptr_t)cli, 1000, cmr->lkey };
	wr.wr_id = 1;
	wr.opcode = SDP_WR_RDMA_READ;
	wr.remote_addr = smr->remote_addr + 100;
	wr.rkey = smr->rkey;
	CHECK_EQ(T->post_send(p.c, &wr), 0);
	CHECK_EQ(T->poll_cq(p.c, wc, 4), 1);
	CHECK_EQ(wc[0].status, SDP_WC_SUCCESS);
	CHECK_EQ(wc[0].opcode, SDP_WC_RDMA_READ);
	CHECK_EQ(wc[0].byte_len, 1000);
	CHECK_EQ(csum(cli, 1000), csum(srv + 100, 1000));

	/* WRITE 2000 bytes from cli+4096 to the end of smr. */
	sge = (struct sdp_sge){ (uintptr_t)cli + 4096, 2000, cmr->lkey };
	wr.wr_id = 2;
	wr.opcode = SDP_WR_RDMA_WRITE;
	wr.remote_addr = smr->remote_addr + 4096 - 2000;
	CHECK_EQ(T->post_send(p.c, &wr), 0);
	CHECK_EQ(T->poll_cq(p.c, wc, 4), 1);
	CHECK_EQ(wc[0].status, SDP_WC_SUCCESS);
	CHECK_EQ(csum(srv + 2096, 2000), csum(cli + 4096, 2000));

	/* WRITE into a read-only MR: remote access error, QP dead. */
	wr.wr_id = 3;
	wr.remote_addr = ro->remote_addr;
	wr.rkey = ro->rkey;
	CHECK_EQ(T->post_send(p.c, &wr), 0);
	CHECK_EQ(T->poll_cq(p.c, wc, 1), 1);
	CHECK_EQ(wc[0].status, SDP_WC_REM_ACCESS_ERR);
	pair_down(&p);

	/* One byte past the end, and a bad rkey. */
	for (int k = 0; k < 2; k++) {
		CHECK_EQ(pair_up(&p, 5801 + k, 2), 0);
		CHECK_EQ(T->reg_mr(p.s, srv, 4096, SDP_ACCESS_REMOTE_READ, &smr),
			 0);
		CHECK_EQ(T->reg_mr(p.c, cli, sizeof(cli),
				   SDP_ACCESS_LOCAL_WRITE, &cmr), 0);
		sge = (struct sdp_sge){ (uintptr_t)cli, 100, cmr->lkey };
		wr.opcode = SDP_WR_RDMA_READ;
		wr.remote_addr = smr->remote_addr + (k ? 0 : 3997);
		wr.rkey = smr->rkey + (k ? 0x100 : 0);
		CHECK_EQ(T->post_send(p.c, &wr), 0);
		CHECK_EQ(T->poll_cq(p.c, wc, 1), 1);
		CHECK_EQ(wc[0].status, SDP_WC_REM_ACCESS_ERR);
		pair_down(&p);
	}
}

static void test_faults(void)
{
	struct sdp_qp_attr attr = { .max_send_wr = 8, .max_recv_wr = 8,
				    .recv_region_size = REGION };
	struct sockaddr_in a = sin4("127.0.0.1", 5900);
	struct sdp_qp *qp;
	struct sdp_cm_event ev;
	struct sdp_wc wc[8];
	struct pair p;

	CHECK_EQ(sdp_loop_fail_nth("nonsense", 1), -EINVAL);
	CHECK_EQ(sdp_loop_fail_nth("create_qp", 2), 0);
	CHECK_EQ(T->create_qp(&attr, &qp), 0);
	T->destroy_qp(qp);
	CHECK_EQ(T->create_qp(&attr, &qp), -ENOMEM);
	CHECK_EQ(T->create_qp(&attr, &qp), 0);
	T->destroy_qp(qp);

	CHECK_EQ(sdp_loop_fail_from("bind", 1), 0);
	CHECK_EQ(T->bind((struct sockaddr *)&a, sizeof(a), &p.l), -ENOMEM);
	CHECK_EQ(T->bind((struct sockaddr *)&a, sizeof(a), &p.l), -ENOMEM);
	sdp_loop_fail_reset();
	CHECK_EQ(sdp_loop_op_count("bind"), 0);

	CHECK_EQ(sdp_loop_fail_nth("connect", 1), 0);
	qp = qp_new(0);
	CHECK_EQ(T->connect(qp, NULL, (struct sockaddr *)&a, sizeof(a), NULL, 0),
		 0);
	CHECK_EQ(T->get_event(qp, &ev), 0);
	CHECK_EQ(ev.type, SDP_CM_UNREACHABLE);
	CHECK_EQ(ev.err, -ENOMEM);
	T->destroy_qp(qp);

	CHECK_EQ(pair_up(&p, 5901, 2), 0);
	CHECK_EQ(sdp_loop_fail_nth("post_send", 1), 0);
	CHECK_EQ(send_buf(p.c, 1, "a", 1, 0), -ENOMEM);
	CHECK_EQ(send_buf(p.c, 2, "a", 1, 0), 0);
	CHECK_EQ(sdp_loop_fail_wc("post_send", 1, SDP_WC_RETRY_EXC_ERR), 0);
	CHECK_EQ(send_buf(p.c, 3, "a", 1, 0), 0);
	CHECK_EQ(T->poll_cq(p.c, wc, 8), 3);
	CHECK_EQ(wc[0].status, SDP_WC_RETRY_EXC_ERR);
	CHECK_EQ(wc[0].wr_id, 3);
	CHECK_EQ(T->poll_cq(p.s, wc, 8), 2);
	CHECK_EQ(wc[0].status, SDP_WC_SUCCESS);
	CHECK_EQ(wc[1].status, SDP_WC_WR_FLUSH_ERR);
	pair_down(&p);

	/* create_qp_from_req fails: the request is consumed and refused. */
	CHECK_EQ(T->bind((struct sockaddr *)&a, sizeof(a), &p.l), 0);
	CHECK_EQ(T->listen(p.l, 4), 0);
	p.c = qp_new(0);
	CHECK_EQ(T->connect(p.c, NULL, (struct sockaddr *)&a, sizeof(a), NULL,
			    0), 0);
	{
		struct sdp_conn_req *req;
		uint8_t priv[SDP_CM_PRIV_MAX];
		uint32_t plen;

		CHECK_EQ(T->get_request(p.l, &req, priv, &plen), 0);
		CHECK_EQ(sdp_loop_fail_nth("create_qp_from_req", 1), 0);
		CHECK_EQ(T->create_qp_from_req(req, &attr, &qp), -ENOMEM);
	}
	CHECK_EQ(T->get_event(p.c, &ev), 0);
	CHECK_EQ(ev.type, SDP_CM_REJECTED);
	p.s = NULL;
	pair_down(&p);

	CHECK_EQ(pair_up(&p, 5902, 2), 0);
	sdp_loop_qp_error(p.s);
	CHECK_EQ(T->poll_cq(p.c, wc, 8), 2);
	CHECK_EQ(wc[0].status, SDP_WC_WR_FLUSH_ERR);
	pair_down(&p);
	sdp_loop_fail_reset();
}

static void test_listener_close(void)
{
	struct sockaddr_in a = sin4("127.0.0.1", 6000);
	struct sdp_listener *l;
	struct sdp_qp *c = qp_new(0);
	struct sdp_cm_event ev;

	CHECK_EQ(T->bind((struct sockaddr *)&a, sizeof(a), &l), 0);
	CHECK_EQ(T->listen(l, 1), 0);
	CHECK_EQ(T->connect(c, NULL, (struct sockaddr *)&a, sizeof(a), NULL, 0),
		 0);
	T->close_listener(l);
	CHECK_EQ(T->get_event(c, &ev), 0);
	CHECK_EQ(ev.type, SDP_CM_REJECTED);
	T->destroy_qp(c);
}

int main(void)
{
	static const struct unit_test tests[] = {
		{ test_defaults, "dummy defaults and status names" },
		{ test_bind, "bind, ephemeral port, EADDRINUSE" },
		{ test_refused, "connect to nothing: REJECTED/ECONNREFUSED" },
		{ test_handshake, "handshake with private data, addresses" },
		{ test_send_sizes, "SEND sizes, checksums, completion order" },
		{ test_rnr_and_oversize, "RNR and oversize SEND are fatal" },
		{ test_peer_destroy, "peer destroy: completions then flush" },
		{ test_wait_kick, "wait/kick and completion wake-ups" },
		{ test_notify, "req_notify / event_fd doorbell" },
		{ test_rdma, "RDMA READ/WRITE and access errors" },
		{ test_faults, "fault injection" },
		{ test_listener_close, "listener close rejects pending" },
	};
	T = sdp_loop_transport.ops;
	return unit_run_all(tests, (int)(sizeof(tests) / sizeof(tests[0])));
}
