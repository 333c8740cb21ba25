/* SPDX-License-Identifier: MIT */
/*
 * test_shm_cm.c — unit tests of the shm transport's port space and connections (shm_portspace.c, shm_cm.c, shm_wait.c).
 *
 * Binding and the port space, refusals and junk clients, addresses and
 * the backlog; a forked peer for the handshake, SEND sizes, a peer that
 * ends or is killed, and waking a sleeper.
 * The harness (checks, QPs, a forked peer) is shm_harness.h.
 */
#include <sys/epoll.h>

#include "shm_harness.h"

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

/* A listener that processes share (fork) takes each connection from the
 * kernel's queue and waits for its Hello in accept().  A local user who
 * queues silent connections must not stall that accept() for a second
 * each (a pre-forked server would serve nobody while they last): the wait
 * is bounded per accept(), and a real client queued behind three silent
 * ones is taken within that one bound. */
static void test_shared_listener_silent_clients(void)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	uint8_t priv[SDP_CM_PRIV_MAX];
	struct sdp_conn_req *req = NULL;
	struct sockaddr_in a;
	struct sdp_listener *l;
	struct sdp_qp *c;
	uint64_t t0, dt;
	int port, n, r, raw[3], ep;
	uint32_t plen = 0;

	l = listener_new(&port);
	ep = epoll_create1(EPOLL_CLOEXEC);
	CHECK_EQ(T->share_listener(l, ep), 0);
	n = snprintf(sun.sun_path + 1, sizeof(sun.sun_path) - 1,
		     "libsdp/v1/4/127.0.0.1/%d", port);
	for (int i = 0; i < 3; i++) {
		raw[i] = socket(AF_UNIX, SOCK_SEQPACKET, 0);
		CHECK_EQ(connect(raw[i], (struct sockaddr *)&sun,
				 offsetof(struct sockaddr_un, sun_path) + 1 +
				 n), 0);
	}
	a = sin4("127.0.0.1", port);
	c = qp_new(0);
	CHECK_EQ(T->connect(c, NULL, (struct sockaddr *)&a, sizeof(a), "hey",
			    3), 0);
	t0 = now_ms();
	do {
		plen = sizeof(priv);
		r = T->take_request(l, &req, priv, &plen);
	} while ((r == -EAGAIN || r == -ECONNABORTED) &&
		 now_ms() - t0 < 10000);
	dt = now_ms() - t0;
	CHECK_EQ(r, 0);
	CHECK_EQ(plen, 3);
	if (dt >= 2000)
		fprintf(stderr, "took %llu ms behind three silent clients\n",
			(unsigned long long)dt);
	CHECK(dt < 2000);	/* a second for each of them: 3 s */
	if (r == 0)
		T->reject(req);
	T->destroy_qp(c);
	for (int i = 0; i < 3; i++)
		close(raw[i]);
	T->close_listener(l);
	close(ep);
}


/* A raw client of the shared listener's name that says nothing (yet): bound
 * to a client's name, as a real one is, so that the listener can tell its
 * address once it speaks. */
static int silent_client(int port, int cport)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX }, me = sun;
	int n, m, s = socket(AF_UNIX, SOCK_SEQPACKET, 0);

	n = snprintf(sun.sun_path + 1, sizeof(sun.sun_path) - 1,
		     "libsdp/v1/4/127.0.0.1/%d", port);
	m = snprintf(me.sun_path + 1, sizeof(me.sun_path) - 1,
		     "libsdp/v1/c4/127.0.0.1/%d", cport);
	CHECK_EQ(bind(s, (struct sockaddr *)&me,
		      offsetof(struct sockaddr_un, sun_path) + 1 + m), 0);
	CHECK_EQ(connect(s, (struct sockaddr *)&sun,
			 offsetof(struct sockaddr_un, sun_path) + 1 + n), 0);
	return s;
}

/* take_request until it gives one or `ms` pass; -ECONNABORTED: it took
 * connections that did not become a request. */
static int take_within(struct sdp_listener *l, uint64_t ms,
		       struct sdp_conn_req **req, uint32_t *plen)
{
	uint8_t priv[SDP_CM_PRIV_MAX];
	uint64_t t0 = now_ms();
	int r;

	do {
		*plen = sizeof(priv);
		r = T->take_request(l, req, priv, plen);
	} while ((r == -EAGAIN || r == -ECONNABORTED) &&
		 now_ms() - t0 < ms);
	return r;
}

static bool readable(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, ms) == 1;
}

/* A local user who queues a silent connection before each real one: the
 * first costs accept() its wait, the next ones almost nothing (a second
 * each before). */
static void test_shared_listener_silent_each_time(void)
{
	struct sdp_conn_req *req = NULL;
	struct sockaddr_in a;
	struct sdp_listener *l;
	struct sdp_qp *c[5];
	uint64_t t0, dt;
	int port, raw[5], ep;
	uint32_t plen;

	l = listener_new(&port);
	ep = epoll_create1(EPOLL_CLOEXEC);
	CHECK_EQ(T->share_listener(l, ep), 0);
	a = sin4("127.0.0.1", port);
	t0 = now_ms();
	for (int i = 0; i < 5; i++) {
		raw[i] = silent_client(port, 64000 + i);
		c[i] = qp_new(0);
		CHECK_EQ(T->connect(c[i], NULL, (struct sockaddr *)&a,
				    sizeof(a), "hey", 3), 0);
		CHECK_EQ(take_within(l, 10000, &req, &plen), 0);
		CHECK_EQ(plen, 3);
		T->reject(req);
	}
	dt = now_ms() - t0;
	if (dt >= 2500)
		fprintf(stderr, "took %llu ms for 5 clients behind silent "
			"ones\n", (unsigned long long)dt);
	CHECK(dt < 2500);	/* 5 s before */
	for (int i = 0; i < 5; i++) {
		T->destroy_qp(c[i]);
		close(raw[i]);
	}
	T->close_listener(l);
	close(ep);
}

/* A client whose Hello comes after accept() stopped waiting for it is held,
 * not refused: the next accept() takes it.  Its Hello is a real one, read
 * off a private listener that a real client connected to and passed on. */
static void test_shared_listener_late_hello(void)
{
	union { char b[256]; struct cmsghdr a; } cb;
	struct sdp_conn_req *req = NULL;
	struct sdp_listener *l, *l2;
	struct sockaddr_in a;
	struct sdp_qp *c;
	char buf[4096];
	struct iovec iov = { buf, sizeof(buf) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = cb.b,
			     .msg_controllen = sizeof(cb.b) };
	int port, port2, silent, late, s2, k;
	uint32_t plen;
	uint64_t t0;
	ssize_t n;

	/* The caller's set, as the socket layer's listener descriptor. */
	l = listener_new(&port);
	k = epoll_create1(EPOLL_CLOEXEC);
	CHECK_EQ(T->share_listener(l, k), 0);
	CHECK(!readable(k, 0));
	silent = silent_client(port, 64010);
	CHECK(readable(k, 1000));
	/* Waits a second for it, then holds it; the connection made the
	 * descriptor readable, so accept() says it was aborted. */
	CHECK_EQ(take_within(l, 0, &req, &plen), -ECONNABORTED);
	CHECK(!readable(k, 0));
	late = silent_client(port, 64011);
	t0 = now_ms();
	CHECK_EQ(take_within(l, 0, &req, &plen), -ECONNABORTED);
	CHECK(now_ms() - t0 < 500);	/* after a silent one: no long wait */
	CHECK(!readable(k, 0));
	CHECK_EQ(take_within(l, 0, &req, &plen), -EAGAIN);

	/* The real Hello, from a client of another listener. */
	l2 = listener_new(&port2);
	a = sin4("127.0.0.1", port2);
	c = qp_new(0);
	CHECK_EQ(T->connect(c, NULL, (struct sockaddr *)&a, sizeof(a),
			    "late", 4), 0);
	s2 = accept4(SHM_L(l2)->sock, NULL, NULL, 0);
	CHECK(s2 >= 0);
	n = recvmsg(s2, &mh, 0);
	CHECK(n > 0);
	iov.iov_len = (size_t)n;
	mh.msg_controllen = sizeof(cb.b);
	/* The memfd goes along; the credentials the kernel stamps anew. */
	{
		struct msghdr out = { .msg_iov = &iov, .msg_iovlen = 1 };
		union { char b[CMSG_SPACE(sizeof(int))];
			struct cmsghdr a; } ob;
		struct cmsghdr *h, *o;

		for (h = CMSG_FIRSTHDR(&mh); h; h = CMSG_NXTHDR(&mh, h))
			if (h->cmsg_level == SOL_SOCKET &&
			    h->cmsg_type == SCM_RIGHTS)
				break;
		CHECK(h != NULL);
		out.msg_control = ob.b;
		out.msg_controllen = sizeof(ob.b);
		o = CMSG_FIRSTHDR(&out);
		o->cmsg_level = SOL_SOCKET;
		o->cmsg_type = SCM_RIGHTS;
		o->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(o), CMSG_DATA(h), sizeof(int));
		CHECK_EQ(sendmsg(late, &out, 0), n);
		close(*(int *)CMSG_DATA(h));
	}
	CHECK(readable(k, 1000));	/* the late Hello wakes the family */
	CHECK_EQ(take_within(l, 0, &req, &plen), 0);
	CHECK_EQ(plen, 4);
	CHECK(!readable(k, 0));
	if (req)
		T->reject(req);
	T->destroy_qp(c);
	close(s2);
	close(silent);
	close(late);
	T->close_listener(l2);
	T->close_listener(l);
	close(k);
}

int main(void)
{
	static const struct unit_test tests[] = {
		{ test_bind, "bind, ephemeral port, EADDRINUSE, conflicts" },
		{ test_refused, "connect to nothing: REJECTED; non-local: ENETUNREACH" },
		{ test_reject_and_halfopen, "reject; half-open and junk clients" },
		{ test_shared_listener_silent_clients, "shared listener: silent clients stall accept() once, not each" },
		{ test_shared_listener_silent_each_time, "shared listener: a silent client before each one costs no wait" },
		{ test_shared_listener_late_hello, "shared listener: a late Hello is taken by the next accept()" },
		{ test_addresses_and_backlog, "addresses (v4, v6, dual stack), backlog full" },
		{ test_fork_handshake_and_send, "fork: handshake, SEND sizes, streaming" },
		{ test_peer_destroy, "fork: peer destroy -> completions then flush" },
		{ test_peer_destroy_then_send, "peer destroy, then our send: its completions first" },
		{ test_peer_kill, "fork: peer kill -9 -> flush, waiter wakes" },
		{ test_wait_and_notify, "fork: wait/kick, req_notify doorbell" },
	};

	return shm_run_tests(tests, sizeof(tests) / sizeof(tests[0]));
}
