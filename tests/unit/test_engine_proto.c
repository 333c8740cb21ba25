/* SPDX-License-Identifier: MIT */
/*
 * test_engine_proto.c — the engine against a hostile or failing peer, over
 * the "loop" transport:
 *  - a raw client built on sdp_loop_transport.ops (its own QP, receives and
 *    hand-encoded messages) connects with a valid Hello, proves the channel
 *    with one valid Data message, then commits one protocol violation; the
 *    engine must reset that connection (ECONNRESET, reason PROTOCOL) and
 *    nothing may crash;
 *  - a malformed Hello is rejected by the listener, which keeps working;
 *  - fault injection: create_qp / post_recv / connect / create_qp_from_req /
 *    accept fail at the N-th call: connect fails cleanly with a negative
 *    errno, nothing leaks (run under ASan), a later connection works.
 */
#include "engine_helpers.h"

/* ---- the raw client ------------------------------------------------------- */

#define RAW_BUFS 4
#define RAW_BUF_SIZE 4096

struct raw {
	struct sdp_qp *qp;
	struct sdp_mr *mr;
	uint32_t next_mseq;	/* our next MSeq */
	uint32_t rx_mseq;	/* last MSeq received from the engine */
	struct sdp_hello_ack ack;
	struct sdp_conn *srv;	/* the engine's side, once accepted */
};

static void put_be16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* A BSDH written byte by byte (no encoder checks: we want bad ones too). */
static void raw_bsdh(uint8_t *p, uint8_t mid, uint8_t flags, uint16_t bufs,
		     uint32_t len, uint32_t mseq, uint32_t mseq_ack)
{
	p[0] = mid;
	p[1] = flags;
	put_be16(p + 2, bufs);
	put_be32(p + 4, len);
	put_be32(p + 8, mseq);
	put_be32(p + 12, mseq_ack);
}

static int raw_post(struct raw *r, const void *msg, uint32_t n)
{
	struct sdp_sge sge = { (uint64_t)(uintptr_t)msg, n, 0 };
	struct sdp_send_wr wr;

	memset(&wr, 0, sizeof(wr));
	wr.opcode = SDP_WR_SEND;
	wr.flags = SDP_SEND_INLINE;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	return eh_ops()->post_send(r->qp, &wr);
}

/* Encode a Hello; `version` = major << 4 | minor as it goes on the wire. */
static int raw_hello(uint8_t *buf, uint8_t version)
{
	struct sdp_hello h;
	int n;

	memset(&h, 0, sizeof(h));
	h.bsdh.mid = SDP_MID_HELLO;
	h.bsdh.len = SDP_HELLO_SIZE;
	h.bsdh.bufs = RAW_BUFS;
	h.major = SDP_VERSION_MAJOR;
	h.minor = SDP_VERSION_MINOR;
	h.ip_version = 4;
	h.max_adverts = 1;
	h.des_rem_rcv_sz = RAW_BUF_SIZE;
	h.local_rcv_sz = RAW_BUF_SIZE;
	h.dst_ip[12] = 127;
	h.dst_ip[15] = 1;
	n = sdp_wire_encode_hello(&h, buf, SDP_HELLO_SIZE);
	if (n < 0)
		return n;
	buf[16] = version;	/* the encoder refuses bad versions: patch */
	return 0;
}

static void raw_destroy(struct raw *r)
{
	if (r->qp)
		eh_ops()->destroy_qp(r->qp);
	r->qp = NULL;
}

/* Connect with a Hello carrying `version`.  Returns the CM event type the
 * raw QP got (SDP_CM_ESTABLISHED, SDP_CM_REJECTED...) or -errno. */
static int raw_connect(struct raw *r, struct eh_server *s, uint8_t version)
{
	struct sdp_qp_attr attr = {
		.max_send_wr = 16,
		.max_recv_wr = RAW_BUFS,
		.recv_region_size = RAW_BUFS * RAW_BUF_SIZE,
	};
	uint8_t hello[SDP_HELLO_SIZE];
	struct sdp_cm_event ev;
	uint64_t end;
	int e;

	memset(r, 0, sizeof(*r));
	r->next_mseq = 1;
	e = eh_ops()->create_qp(&attr, &r->qp);
	if (e < 0)
		return e;
	r->mr = eh_ops()->recv_region(r->qp);
	if (!r->mr)
		return -ENOMEM;
	for (uint32_t i = 0; i < RAW_BUFS; i++) {
		struct sdp_recv_wr wr = {
			.wr_id = i,
			.sge = {
				.addr = (uint64_t)(uintptr_t)r->mr->addr +
					i * RAW_BUF_SIZE,
				.length = RAW_BUF_SIZE,
				.lkey = r->mr->lkey,
			},
		};

		e = eh_ops()->post_recv(r->qp, &wr);
		if (e < 0)
			return e;
	}
	e = raw_hello(hello, version);
	if (e < 0)
		return e;
	e = eh_ops()->connect(r->qp, NULL, (struct sockaddr *)&s->addr,
			      sizeof(s->addr), hello, sizeof(hello));
	if (e < 0)
		return e;
	end = eh_now_ms() + (uint64_t)eh_ms(10000);
	for (;;) {
		uint32_t seq = eh_ops()->wait_seq(r->qp);

		e = eh_ops()->get_event(r->qp, &ev);
		if (e == 0)
			break;
		if (e != -EAGAIN)
			return e;
		if (eh_now_ms() >= end)
			return -ETIMEDOUT;
		eh_ops()->wait(r->qp, seq, 100);
	}
	if (ev.type == SDP_CM_ESTABLISHED) {
		e = sdp_wire_decode_hello_ack(ev.priv, ev.priv_len, &r->ack);
		if (e < 0)
			return e;
	}
	return ev.type;
}

/* Connect, accept the engine side and prove the channel with one valid
 * Data message ("ok", MSeq 1). */
static int raw_setup(struct raw *r, struct eh_server *s)
{
	uint8_t msg[SDP_BSDH_SIZE + 2];
	char got[8];
	int e;

	e = raw_connect(r, s, SDP_VERSION_MAJOR << 4 | SDP_VERSION_MINOR);
	if (e != SDP_CM_ESTABLISHED) {
		printf("#   raw connect: %d\n", e);
		return e < 0 ? e : -ECONNREFUSED;
	}
	e = sdp_listen_accept(s->l, 0, eh_ms(10000), &r->srv);
	if (e < 0)
		return e;
	raw_bsdh(msg, SDP_MID_DATA, 0, RAW_BUFS, sizeof(msg), r->next_mseq++,
		 r->rx_mseq);
	memcpy(msg + SDP_BSDH_SIZE, "ok", 2);
	e = raw_post(r, msg, sizeof(msg));
	if (e < 0)
		return e;
	memset(got, 0, sizeof(got));
	e = (int)eh_recv_all(r->srv, got, 2);
	if (e != 2 || memcmp(got, "ok", 2)) {
		printf("#   valid Data: recv %d \"%.2s\"\n", e, got);
		return -EPROTO;
	}
	return 0;
}

enum violation {
	V_MSEQ_GAP,
	V_MSEQ_ACK_AHEAD,
	V_TRUNCATED,
	V_UNKNOWN_MID,
	V_HELLO_AS_SEND,
	V_HELLO_ACK_AS_SEND,
	V_DATA_AFTER_DISCONN,
	V_RDMA_RD_COMPL,
	V_RESERVED_FLAGS,
	V_OOB_NO_PAYLOAD,
	V_DOUBLE_DISCONN,
	V_OVERSIZED_LEN,
	V_COUNT
};

static const char *const vnames[V_COUNT] = {
	[V_MSEQ_GAP] = "MSeq gap",
	[V_MSEQ_ACK_AHEAD] = "MSeqAck ahead of what the engine sent",
	[V_TRUNCATED] = "Len larger than the bytes sent",
	[V_UNKNOWN_MID] = "unknown MID 0x40",
	[V_HELLO_AS_SEND] = "Hello as a SEND",
	[V_HELLO_ACK_AS_SEND] = "HelloAck as a SEND",
	[V_DATA_AFTER_DISCONN] = "Data after DisConn",
	[V_RDMA_RD_COMPL] = "RdmaRdCompl with nothing outstanding",
	[V_RESERVED_FLAGS] = "reserved flag bits",
	[V_OOB_NO_PAYLOAD] = "OOB_PRES without payload",
	[V_DOUBLE_DISCONN] = "second DisConn",
	[V_OVERSIZED_LEN] = "Len smaller than the bytes sent",
};

/* Commit one violation on an established raw connection. */
static int raw_violate(struct raw *r, enum violation v)
{
	uint8_t m[SDP_HELLO_ACK_SIZE];
	uint32_t seq = r->next_mseq;

	memset(m, 0, sizeof(m));
	switch (v) {
	case V_MSEQ_GAP:
		raw_bsdh(m, SDP_MID_DATA, 0, RAW_BUFS, 17, seq + 2, r->rx_mseq);
		return raw_post(r, m, 17);
	case V_MSEQ_ACK_AHEAD:
		/* The engine has sent nothing: MSeqAck must be 0. */
		raw_bsdh(m, SDP_MID_DATA, 0, RAW_BUFS, 17, seq, 5);
		return raw_post(r, m, 17);
	case V_TRUNCATED:
		raw_bsdh(m, SDP_MID_DATA, 0, RAW_BUFS, 100, seq, r->rx_mseq);
		return raw_post(r, m, 20);
	case V_OVERSIZED_LEN:
		raw_bsdh(m, SDP_MID_DATA, 0, RAW_BUFS, 17, seq, r->rx_mseq);
		return raw_post(r, m, 40);
	case V_UNKNOWN_MID:
		raw_bsdh(m, 0x40, 0, RAW_BUFS, SDP_BSDH_SIZE, seq, r->rx_mseq);
		return raw_post(r, m, SDP_BSDH_SIZE);
	case V_HELLO_AS_SEND:
		if (raw_hello(m, SDP_VERSION_MAJOR << 4 | SDP_VERSION_MINOR))
			return -EINVAL;
		put_be32(m + 8, seq);
		return raw_post(r, m, SDP_HELLO_SIZE);
	case V_HELLO_ACK_AS_SEND: {
		struct sdp_hello_ack a = r->ack;
		int n;

		n = sdp_wire_encode_hello_ack(&a, m, sizeof(m));
		if (n < 0)
			return n;
		put_be32(m + 8, seq);	/* the encoder insists on MSeq 0 */
		return raw_post(r, m, SDP_HELLO_ACK_SIZE);
	}
	case V_DATA_AFTER_DISCONN: {
		int e;

		raw_bsdh(m, SDP_MID_DISCONN, 0, RAW_BUFS, SDP_BSDH_SIZE, seq,
			 r->rx_mseq);
		e = raw_post(r, m, SDP_BSDH_SIZE);
		if (e < 0)
			return e;
		raw_bsdh(m, SDP_MID_DATA, 0, RAW_BUFS, 19, seq + 1, r->rx_mseq);
		memcpy(m + SDP_BSDH_SIZE, "xyz", 3);
		return raw_post(r, m, 19);
	}
	case V_DOUBLE_DISCONN: {
		int e;

		raw_bsdh(m, SDP_MID_DISCONN, 0, RAW_BUFS, SDP_BSDH_SIZE, seq,
			 r->rx_mseq);
		e = raw_post(r, m, SDP_BSDH_SIZE);
		if (e < 0)
			return e;
		raw_bsdh(m, SDP_MID_DISCONN, 0, RAW_BUFS, SDP_BSDH_SIZE,
			 seq + 1, r->rx_mseq);
		return raw_post(r, m, SDP_BSDH_SIZE);
	}
	case V_RDMA_RD_COMPL:
		raw_bsdh(m, SDP_MID_RDMA_RD_COMPL, 0, RAW_BUFS, 20, seq,
			 r->rx_mseq);
		put_be32(m + 16, 1000);
		return raw_post(r, m, 20);
	case V_RESERVED_FLAGS:
		raw_bsdh(m, SDP_MID_DATA, 0x80, RAW_BUFS, 17, seq, r->rx_mseq);
		m[16] = 'r';
		return raw_post(r, m, 17);
	case V_OOB_NO_PAYLOAD:
		raw_bsdh(m, SDP_MID_DATA, SDP_FLAG_OOB_PRES, RAW_BUFS,
			 SDP_BSDH_SIZE, seq, r->rx_mseq);
		return raw_post(r, m, SDP_BSDH_SIZE);
	case V_COUNT:
		break;
	}
	return -EINVAL;
}

static void test_protocol_violations(void)
{
	struct eh_server s = { 0 };

	REQUIRE_OK(eh_listen(&s));
	for (int v = 0; v < V_COUNT; v++) {
		struct raw r;
		char buf[16];
		ssize_t n;
		int e, before = g_checks_failed;

		e = raw_setup(&r, &s);
		if (e < 0) {
			printf("#   %s: setup failed (%d)\n", vnames[v], e);
			g_checks_failed++;
			if (r.srv)
				sdp_conn_close(r.srv, 1);
			raw_destroy(&r);
			continue;
		}
		e = raw_violate(&r, (enum violation)v);
		CHECK_EQ(e, 0);
		n = eh_recv(r.srv, buf, sizeof(buf), 0);
		if (v == V_DATA_AFTER_DISCONN || v == V_DOUBLE_DISCONN) {
			/* EOF came before the reset (as TCP: FIN then RST
			 * reads 0): the reset is reported to the writer. */
			CHECK(n == 0 || n == -ECONNRESET);
			if (n == 0)
				CHECK_EQ(eh_recv(r.srv, buf, sizeof(buf), 0), 0);
			CHECK_EQ(eh_send(r.srv, "x", 1, 0),
				 n == 0 ? -ECONNRESET : -EPIPE);
		} else {
			/* Reported once, then EPIPE / EOF (as TCP). */
			CHECK_EQ(n, -ECONNRESET);
			CHECK_EQ(eh_send(r.srv, "x", 1, 0), -EPIPE);
			CHECK_EQ(eh_recv(r.srv, buf, sizeof(buf), 0), 0);
		}
		CHECK_STATE(r.srv, SDP_ST_RESET);
		CHECK_REASON(r.srv, SDP_REASON_PROTOCOL);
		if (g_checks_failed != before) {
			printf("#   ^ violation: %s\n", vnames[v]);
			eh_dump("srv", r.srv);
		}
		sdp_conn_close(r.srv, 0);
		raw_destroy(&r);
	}
	/* The listener is unharmed: a normal connection still works. */
	{
		struct sdp_conn *cli, *srv;
		char b = 0;

		REQUIRE_OK(eh_connect_pair(&s, &cli, &srv));
		CHECK_EQ(eh_send(cli, "z", 1, 0), 1);
		CHECK_EQ(eh_recv(srv, &b, 1, 0), 1);
		CHECK_EQ(b, 'z');
		sdp_conn_close(cli, 0);
		sdp_conn_close(srv, 0);
	}
	eh_unlisten(&s);
	CHECK_ALL_RELEASED();
}

/* A peer that ignores credits: one SEND more than the engine posted. */
static void test_credit_overrun(void)
{
	struct eh_server s = { 0 };
	struct raw r;
	uint8_t m[SDP_BSDH_SIZE + 1];
	char buf[8];
	int i, e;

	REQUIRE_OK(eh_listen(&s));
	e = raw_setup(&r, &s);
	if (e < 0) {
		if (r.srv)
			sdp_conn_close(r.srv, 1);
		raw_destroy(&r);
		REQUIRE_OK(e);
	}
	/* The engine does not read: its buffers fill; the one after the last
	 * finds no receive (RNR at the transport). */
	for (i = 0; i <= (int)r.ack.bsdh.bufs; i++) {
		raw_bsdh(m, SDP_MID_DATA, 0, RAW_BUFS, sizeof(m),
			 r.next_mseq++, r.rx_mseq);
		m[SDP_BSDH_SIZE] = (uint8_t)('a' + i);
		CHECK_EQ(raw_post(&r, m, sizeof(m)), 0);
	}
	/* The application still reads what had arrived, then the reset. */
	{
		ssize_t n;
		int total = 0;

		while ((n = eh_recv(r.srv, buf, sizeof(buf), 0)) > 0)
			total += (int)n;
		CHECK_EQ(n, -ECONNRESET);
		CHECK_OP(total, <=, (int)r.ack.bsdh.bufs);
	}
	CHECK_STATE(r.srv, SDP_ST_RESET);
	sdp_conn_close(r.srv, 0);
	raw_destroy(&r);
	eh_unlisten(&s);
	CHECK_ALL_RELEASED();
}

static void test_bad_hello(void)
{
	struct eh_server s = { 0 };
	struct raw r;
	static const uint8_t versions[] = { 0x12, 0x32, 0x00, 0xF2 };

	REQUIRE_OK(eh_listen(&s));
	for (size_t i = 0; i < sizeof(versions); i++) {
		CHECK_EQ(raw_connect(&r, &s, versions[i]), SDP_CM_REJECTED);
		raw_destroy(&r);
	}
	{
		struct sdp_conn *none = NULL;

		CHECK_EQ(sdp_listen_accept(s.l, 1, 0, &none), -EAGAIN);
		CHECK_OP(s.l->refused, >=, sizeof(versions));
	}
	/* A valid raw client and a normal one are still served. */
	{
		struct sdp_conn *cli, *srv;
		char b = 0;
		int e = raw_setup(&r, &s);

		CHECK_EQ(e, 0);
		if (r.srv)
			sdp_conn_close(r.srv, 0);
		raw_destroy(&r);
		REQUIRE_OK(eh_connect_pair(&s, &cli, &srv));
		CHECK_EQ(eh_send(srv, "q", 1, 0), 1);
		CHECK_EQ(eh_recv(cli, &b, 1, 0), 1);
		CHECK_EQ(b, 'q');
		sdp_conn_close(cli, 0);
		sdp_conn_close(srv, 0);
	}
	eh_unlisten(&s);
	CHECK_ALL_RELEASED();
}

/* ---- 10. fault injection -------------------------------------------------- */

/* One connection attempt with the fault armed.  Returns 1 if the fault
 * fired, 0 if the attempt never reached the N-th call. */
static int fault_attempt(struct eh_server *s, const char *op, int n)
{
	struct sdp_conn *c, *srv = NULL;
	int r, fired;
	char b = 0;

	sdp_loop_fail_reset();
	r = sdp_loop_fail_nth(op, n);
	CHECK_EQ(r, 0);
	if (r < 0)
		return 0;
	r = sdp_conn_alloc(&c);
	if (r < 0) {
		sdp_loop_fail_reset();
		CHECK_EQ(r, 0);
		return 0;
	}
	r = sdp_conn_connect(c, NULL, (struct sockaddr *)&s->addr,
			     sizeof(s->addr));
	if (r == 0)
		r = sdp_conn_wait_connected(c, eh_ms(10000));
	if (r == 0) {
		r = sdp_listen_accept(s->l, 0, eh_ms(10000), &srv);
		CHECK_EQ(r, 0);	/* the client is established: it is queued */
		if (r == 0) {
			/* May fail if the fault hits a repost: then cleanly. */
			ssize_t x = eh_send(c, "f", 1, 0);

			if (x == 1)
				x = eh_recv(srv, &b, 1, 0);
			if (x == 1)
				x = eh_send(srv, "g", 1, 0);
			if (x == 1)
				x = eh_recv(c, &b, 1, 0);
			if (x != 1)
				CHECK_EQ(x, -ECONNRESET);
		}
	} else {
		/* A clean failure: an errno, never a hang. */
		if (r >= 0 || r == -ETIMEDOUT || r < -4095) {
			printf("#   %s #%d: connect returned %d\n", op, n, r);
			g_checks_failed++;
		}
		CHECK(eh_state(c) == SDP_ST_RESET || eh_state(c) == SDP_ST_CLOSED);
	}
	fired = sdp_loop_op_count(op) >= (unsigned long)n;
	sdp_loop_fail_reset();
	sdp_conn_close(c, 0);
	if (srv)
		sdp_conn_close(srv, 0);
	return fired;
}

static void test_fault_injection(void)
{
	static const struct {
		const char *op;
		int max;
	} ops[] = {
		{ "create_qp", 3 },
		{ "post_recv", 24 },
		{ "connect", 3 },
		{ "create_qp_from_req", 3 },
		{ "accept", 3 },
		{ "post_send", 4 },
	};
	struct eh_server s = { 0 };

	REQUIRE_OK(eh_listen(&s));
	CHECK_ALL_RELEASED();
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		int fired = 0;

		for (int n = 1; n <= ops[i].max; n++) {
			int before = g_checks_failed;

			if (fault_attempt(&s, ops[i].op, n))
				fired++;
			else
				break;	/* past the last call of this op */
			if (g_checks_failed != before)
				printf("#   ^ %s failing at call %d\n",
				       ops[i].op, n);
			/* Everything closed is released before the next
			 * attempt (counters must see only that attempt). */
			CHECK_ALL_RELEASED();
		}
		printf("#   %s: fault fired in %d attempt(s)\n", ops[i].op,
		       fired);
		CHECK_OP(fired, >=, 1);
		/* And a normal connection works afterwards. */
		{
			struct sdp_conn *cli, *srv;
			char b = 0;

			REQUIRE_OK(eh_connect_pair(&s, &cli, &srv));
			CHECK_EQ(eh_send(cli, "k", 1, 0), 1);
			CHECK_EQ(eh_recv(srv, &b, 1, 0), 1);
			CHECK_EQ(b, 'k');
			sdp_conn_close(cli, 0);
			sdp_conn_close(srv, 0);
			CHECK_ALL_RELEASED();
		}
	}
	/* A send whose post fails reports the error: it must not claim the
	 * bytes (queued on a connection that is already reset). */
	{
		struct sdp_conn *cli, *srv;
		char b;

		REQUIRE_OK(eh_connect_pair(&s, &cli, &srv));
		sdp_loop_fail_nth("post_send", 1);
		CHECK_EQ(eh_send(cli, "p", 1, 0), -ECONNRESET);
		sdp_loop_fail_reset();
		CHECK_STATE(cli, SDP_ST_RESET);
		CHECK_REASON(cli, SDP_REASON_TRANSPORT);
		CHECK_EQ(eh_recv(srv, &b, 1, 0), -ECONNRESET);
		sdp_conn_close(cli, 0);
		sdp_conn_close(srv, 0);

		/* An error completion (asynchronous): the next call sees it. */
		REQUIRE_OK(eh_connect_pair(&s, &cli, &srv));
		sdp_loop_fail_wc("post_send", 1, SDP_WC_GENERAL_ERR);
		CHECK_EQ(eh_send(cli, "q", 1, 0), 1);
		sdp_loop_fail_reset();
		CHECK_EQ(eh_send(cli, "q", 1, 0), -ECONNRESET);
		CHECK_EQ(eh_recv(srv, &b, 1, 0), -ECONNRESET);
		sdp_conn_close(cli, 0);
		sdp_conn_close(srv, 0);
		CHECK_ALL_RELEASED();
	}
	/* The listener itself: bind and listen failures are plain errors. */
	{
		struct sdp_listener *tl;
		struct sdp_listen *l;
		struct sockaddr_in sin = { .sin_family = AF_INET };
		int r;

		sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		sdp_loop_fail_nth("bind", 1);
		CHECK_EQ(eh_ops()->bind((struct sockaddr *)&sin, sizeof(sin), &tl),
			 -ENOMEM);
		sdp_loop_fail_reset();
		REQUIRE_OK(eh_ops()->bind((struct sockaddr *)&sin, sizeof(sin), &tl));
		sdp_loop_fail_nth("listen", 1);
		r = sdp_listen_create(tl, 4, NULL, &l);
		CHECK_EQ(r, -ENOMEM);
		sdp_loop_fail_reset();
		if (r < 0)
			eh_ops()->close_listener(tl);	/* still ours */
		else
			sdp_listen_close(l);
	}
	eh_unlisten(&s);
	CHECK_ALL_RELEASED();
}

static const struct eh_test tests[] = {
	{ "protocol violations reset the connection (PROTOCOL)",
	  test_protocol_violations },
	{ "a peer overrunning its credits resets the connection",
	  test_credit_overrun },
	{ "malformed Hello rejected; the listener keeps working",
	  test_bad_hello },
	{ "fault injection: N-th call of each transport op fails",
	  test_fault_injection },
	{ NULL, NULL },
};

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	eh_setup_env();
	eh_run_all(tests);
	return eh_done();
}
