/* SPDX-License-Identifier: MIT */
/*
 * test_shm_keep.c — unit tests of segment pairs kept between connections (shm_keep.c).
 *
 * Taken again and reset, never for another process or while the peer's
 * QP lives, RETRY from a listener that does not keep the pair (an old
 * peer's writes unseen, a sleeper woken), and when no pair is named.
 * The harness (checks, QPs, a forked peer) is shm_harness.h.
 */
#include "shm_harness.h"

#include <sys/epoll.h>
#include <sys/mman.h>

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
	struct sockaddr_in a;
	struct lsn_child l1, l2;
	struct sdp_cm_event ev;
	struct sdp_qp *c;
	uint64_t nonce;
	uint8_t *region;
	void *seg;
	int port, run = 0;

	port = lsn_spawn(&l1, 0, true);
	CHECK(port > 0);
	a = sin4("127.0.0.1", port);
	c = qp_new_to(8, port);
	CHECK_EQ(T->connect(c, NULL, (struct sockaddr *)&a, sizeof(a), "a", 1), 0);
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
	CHECK_EQ(T->connect(c, NULL, (struct sockaddr *)&a, sizeof(a), "b", 1), 0);
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
	/* A poolful more kept by the listener only: these clients never see
	 * their connection established, so they keep nothing. */
	for (int i = 0; i < SHM_KEEP_PER_ROLE; i++) {
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

/* A burst of connections open at once (8 clients at 11,000 a second keep
 * dozens in flight) is taken back whole: every pair of the burst is kept
 * and taken again by the next burst, so none makes a new segment (each
 * one was a memfd, a mapping and, at its end, an munmap's TLB
 * shootdown). */
static void test_keep_burst(void)
{
	enum { BURST = 40 };
	static struct pair ps[BURST];
	struct keep_counts k0, k1;
	struct sdp_listener *l;
	int port;

	l = listener_new(&port);
	for (int round = 0; round < 2; round++) {
		int both = 0;

		k0 = keep_now();
		for (int i = 0; i < BURST; i++) {
			pair_on(&ps[i], l, port, true);
			both += ps[i].c && SHM_QP(ps[i].c)->offer_mine != 0;
		}
		k1 = keep_now();
		/* The second burst takes back every pair of the first: the
		 * listener its segments, the clients theirs. */
		if (round == 1) {
			CHECK_EQ(k1.taken - k0.taken, BURST);
			CHECK_EQ(both, BURST);
		}
		for (int i = 0; i < BURST; i++)
			if (ps[i].s)
				pair_end(&ps[i], i & 1);
	}
	T->close_listener(l);
}

/* Pages resident of the `len` bytes at `p` (a shared mapping). */
static int resident(void *p, size_t len)
{
	unsigned char v[REGION / 4096];
	int n = 0;

	CHECK(len <= sizeof(v) * 4096);
	CHECK_EQ(mincore(p, len, v), 0);
	for (size_t i = 0; i < len / 4096; i++)
		n += v[i] & 1;
	return n;
}

/* A kept pair gives back the receive region's pages of a connection that
 * received more than SHM_KEEP_RESIDENT (an idle pool of 64 pairs per
 * role would otherwise hold whole regions), and keeps those of a short
 * one, whose next connection then faults none in. */
static void test_keep_gives_pages_back(void)
{
	static uint8_t big[RBUF];
	struct sdp_listener *l;
	struct sdp_wc wc[16];
	struct pair p;
	void *region;
	int port;

	l = listener_new(&port);
	for (int bulk = 0; bulk < 2; bulk++) {
		pair_on(&p, l, port, true);
		if (!p.s)
			break;
		/* Bulk: the client fills 16 receives of the server, twice. */
		for (int round = 0; bulk && round < 2; round++) {
			CHECK_EQ(post_recvs(p.s, 0, 16, 3000), 0);
			for (int i = 0; i < 16; i++) {
				memset(big, i + round, sizeof(big));
				CHECK_EQ(send_buf(p.c, i, big, sizeof(big), 0),
					 0);
			}
			CHECK_EQ(poll_n(p.s, wc, 16), 16);
		}
		region = SHM_QP(p.s)->me.region;
		CHECK(resident(region, REGION) > 0);
		pair_end(&p, false);	/* both kept: the region stays mapped */
		if (bulk)
			CHECK_EQ(resident(region, REGION), 0);
		else
			CHECK(resident(region, REGION) > 0);
	}
	T->close_listener(l);
}


/* A listener that two processes share (a pre-forking server): the client
 * keeps a pair with each, and names both; whichever accepts takes its own
 * (the other is given back), and no process makes a new segment.  Here
 * the two take turns, so the pair named first (the newest) is always the
 * other process's: the client moves its receives to the second pair's
 * segment, at the same address, after the Accept. */
struct shared_child {
	pid_t pid;
	int to[2];
};

static void shared_serve(struct sdp_listener *l, struct shared_child *k,
			 int from)
{
	struct sdp_qp_attr attr = { .max_send_wr = 64, .max_recv_wr = 16,
				    .recv_region_size = REGION };
	uint8_t priv[SDP_CM_PRIV_MAX];
	unsigned long made = sdp__shm_segs_made();

	attr_events(&attr);
	g_who = "acceptor: ";
	while (step_recv(k->to[0]) == 't') {
		struct sdp_conn_req *req = NULL;
		struct sdp_qp *s = NULL;
		uint32_t plen = 0;
		uint64_t end = now_ms() + TMO;
		int err;
		char seed;

		do {
			plen = sizeof(priv);
			err = T->take_request(l, &req, priv, &plen);
		} while ((err == -EAGAIN || err == -ECONNABORTED) &&
			 now_ms() < end);
		CHECK_EQ(err, 0);
		if (err)
			break;
		seed = priv[0];
		CHECK_EQ(T->create_qp_from_req(req, &attr, &s), 0);
		CHECK_EQ(post_recvs(s, 0, 8, 2000), 0);
		CHECK_EQ(T->accept(s, "ok", 2), 0);
		check_msgs(s, (unsigned)seed);
		send_msgs(s, (unsigned)seed + 1);
		/* Whether this process made a segment for it. */
		step_send(from, sdp__shm_segs_made() == made ? 'y' : 'n');
		made = sdp__shm_segs_made();
		step_recv(k->to[0]);	/* the client's QP is gone */
		T->destroy_qp(s);	/* kept */
		step_send(from, 'k');
	}
}

static void test_keep_shared_listener(void)
{
	struct shared_child w[2];
	struct sdp_listener *l;
	struct sockaddr_in a;
	struct sdp_cm_event ev;
	int port, from[2], ep, alts = 0;
	unsigned long made = 0;

	l = listener_new(&port);
	ep = epoll_create1(EPOLL_CLOEXEC);
	CHECK_EQ(T->share_listener(l, ep), 0);
	CHECK_EQ(pipe(from), 0);
	for (int i = 0; i < 2; i++) {
		CHECK_EQ(pipe(w[i].to), 0);
		fflush(stdout);
		w[i].pid = fork();
		if (w[i].pid == 0) {
			g_checks_failed = 0;
			shared_serve(l, &w[i], from[1]);
			fflush(stdout);
			_exit(g_checks_failed ? 1 : 0);
		}
	}
	a = sin4("127.0.0.1", port);
	for (int i = 0; i < 12; i++) {
		struct shared_child *k = &w[i % 2];
		struct sdp_qp *c;

		if (i == 2)	/* a pair kept with each from now on */
			made = sdp__shm_segs_made();
		c = qp_new_to(8, port);
		alts += SHM_QP(c)->nalt > 0;
		step_send(k->to[1], 't');
		CHECK_EQ(T->connect(c, NULL, (struct sockaddr *)&a,
				    sizeof(a), (char[]){ (char)(10 + i) }, 1), 0);
		wait_established(c, &ev);
		send_msgs(c, 10 + i);
		check_msgs(c, 11 + i);
		/* The acceptor took its own pair (once it has one). */
		if (step_recv(from[0]) != 'y' && i >= 2)
			CHECK(!"the acceptor made a segment");
		T->destroy_qp(c);
		step_send(k->to[1], 'g');
		CHECK_EQ(step_recv(from[0]), 'k');
	}
	CHECK_EQ(sdp__shm_segs_made(), made);	/* the client made none */
	CHECK_EQ(alts, 10);
	for (int i = 0; i < 2; i++) {
		int st = 0;

		step_send(w[i].to[1], 'q');
		CHECK_EQ(waitpid(w[i].pid, &st, 0), w[i].pid);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		close(w[i].to[0]);
		close(w[i].to[1]);
	}
	close(from[0]);
	close(from[1]);
	T->close_listener(l);
	close(ep);
}

int main(void)
{
	static const struct unit_test tests[] = {
		{ test_keep_same_process, "kept listener segment: taken again, reset" },
		{ test_keep_burst, "kept pairs: a burst of 40 connections taken back whole" },
		{ test_keep_gives_pages_back, "kept pair: a bulk connection's region pages given back" },
		{ test_keep_other_process, "kept segment: not for another process" },
		{ test_keep_not_while_peer_lives, "kept segment: not while its client's QP lives" },
		{ test_keep_retry, "kept pair: RETRY from another listener, old peer's writes unseen" },
		{ test_keep_off_after_retries, "kept pair: none named where a quarter are answered RETRY" },
		{ test_keep_retry_sleeper, "kept pair: RETRY under a sleeper in wait(): woken, count moved" },
		{ test_keep_given_up, "kept pair: one the listener gave up is named no more" },
		{ test_keep_shared_listener, "kept pairs: with each process of a shared listener, none made" },
	};

	return shm_run_tests(tests, sizeof(tests) / sizeof(tests[0]));
}
