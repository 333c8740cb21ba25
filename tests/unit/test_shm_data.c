/* SPDX-License-Identifier: MIT */
/*
 * test_shm_data.c — unit tests of the shm transport's data path (shm_qp.c, shm_rdma.c, shm_creds.c).
 *
 * RDMA by cross-memory attach and its access errors, RNR and oversized
 * SENDs, a hostile peer that corrupts the shared segment, and local
 * completions reported to the engine.
 * The harness (checks, QPs, a forked peer) is shm_harness.h.
 */
#include "shm_harness.h"

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

static void mr_torn(struct shm_mr_entry *e)
{
	atomic_fetch_add(&e->gen, 1);
}

static void mr_other_pid(struct shm_mr_entry *e)
{
	atomic_store(&e->pid, (uint32_t)getpid() + 1);
}

/* The status of an RDMA READ by the client of 64 bytes the server
 * registered, once `spoil` changed the server's MR table entry. */
static int read_spoiled(struct pair *p, void (*spoil)(struct shm_mr_entry *))
{
	static uint8_t mem[64], dst[64];
	struct sdp_mr *mr, *lmr;
	struct sdp_sge sge;
	struct sdp_send_wr wr = { .wr_id = 9, .opcode = SDP_WR_RDMA_READ,
				  .sg_list = &sge, .num_sge = 1 };
	struct sdp_wc wc[4];

	CHECK_EQ(T->reg_mr(p->s, mem, 64, SDP_ACCESS_REMOTE_READ, &mr), 0);
	CHECK_EQ(T->reg_mr(p->c, dst, 64, SDP_ACCESS_LOCAL_WRITE, &lmr), 0);
	spoil(&SHM_QP(p->s)->me.mr[mr->rkey & 0xff]);
	sge = (struct sdp_sge){ (uintptr_t)dst, 64, lmr->lkey };
	wr.remote_addr = mr->remote_addr;
	wr.rkey = mr->rkey;
	CHECK_EQ(T->post_send(p->c, &wr), 0);
	CHECK_EQ(T->poll_cq(p->c, wc, 4), 1);
	return wc[0].status;
}
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
	CHECK_EQ(read_spoiled(&p, mr_torn), SDP_WC_REM_ACCESS_ERR);
	pair_down(&p);

	/* 7: an entry registered by another process (a forked child of the
	 * peer) is refused, not applied to the parent's memory. */
	pair_up(&p, 0, 0);
	CHECK_EQ(read_spoiled(&p, mr_other_pid), SDP_WC_REM_ACCESS_ERR);
	pair_down(&p);
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


/* fork() copies the descriptor table before the memory.  When the peer's
 * readiness descriptor arrives in between (the parent's progress thread
 * takes it), the child's copy of the QP names a number the child does not
 * hold, which it may reuse for anything: vsftpd's session process wrote
 * the client's wake-up byte into its own data listener, and the client
 * waited for a reply for ever.  Taking the QP over must find that out and
 * ring the peer's doorbell instead. */
static void test_handover_stale_app_fd(void)
{
	const struct sdp_app_wake_ops *aw = T->app_wake;
	int app[2], impostor[2], num;
	struct sdp_wc wc[4];
	static char buf[1 << 20];
	struct pair p;
	ssize_t n;
	char b;

	pair_up(&p, 4, 2);
	/* The client shares its readiness descriptor; the server takes it.
	 * Sent (SCM_RIGHTS) as by a QP that a fork() moved to another
	 * process, which cannot offer it by number: not before the
	 * connection brought two messages (a unix socket in flight makes
	 * every close on the host queue the kernel's garbage collector). */
	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, app), 0);
	SHM_QP(p.c)->cm_pid = 0;
	CHECK_EQ(aw->share_app_fd(p.c, app[1]), -EAGAIN);
	CHECK(!fd_readable(T->event_fd(p.s), 0));	/* nothing sent */
	CHECK_EQ(send_buf(p.s, 20, "m", 1, 0), 0);
	CHECK_EQ(poll_n(p.c, wc, 1), 1);
	CHECK_EQ(aw->share_app_fd(p.c, app[1]), -EAGAIN);
	CHECK_EQ(send_buf(p.s, 21, "m", 1, 0), 0);
	CHECK_EQ(poll_n(p.c, wc, 1), 1);
	CHECK_EQ(aw->share_app_fd(p.c, app[1]), 0);
	CHECK(fd_readable(T->event_fd(p.s), TMO));
	T->ack_events(p.s);
	num = SHM_QP(p.s)->peer_app_fd;
	CHECK(num >= 0);
	n = T->export_qp(p.s, buf, sizeof(buf));
	CHECK(n > 0);
	/* What the child holds under that number: another file. */
	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, impostor), 0);
	CHECK_EQ(dup2(impostor[1], num), num);
	close(impostor[1]);
	CHECK_EQ(T->import_qp(p.s, buf, (size_t)n), 0);
	CHECK_EQ(SHM_QP(p.s)->peer_app_fd, -1);
	CHECK(SHM_QP(p.s)->peer_app_fd_lost);
	/* The client waits for its byte; the server's message rings the
	 * client's doorbell, and writes nothing into the impostor. */
	T->ack_events(p.c);
	CHECK_EQ(aw->app_arm(p.c, 1), 0);
	CHECK_EQ(send_buf(p.s, 9, "x", 1, SDP_SEND_SOLICITED), 0);
	CHECK(fd_readable(T->event_fd(p.c), TMO));
	CHECK_EQ(recv(impostor[0], &b, 1, MSG_DONTWAIT), -1);
	CHECK_EQ(errno, EAGAIN);
	CHECK_EQ(T->poll_cq(p.c, wc, 4), 1);
	close(num);
	close(impostor[0]);
	close(app[0]);
	close(app[1]);
	pair_down(&p);
}

/* Between processes of one user the readiness descriptor is offered by
 * number, not sent: no unix socket is in flight (each one makes every
 * unix socket closed on the host queue the kernel's garbage collector
 * until it is received) and the peer's progress thread is not woken for
 * it.  The peer's first message that must wake the application takes it
 * and writes the byte.  An offer that names another file (a hostile peer,
 * or a number closed and reused) leaves the peer on the doorbell. */
static void test_appwake_offered_by_number(void)
{
	const struct sdp_app_wake_ops *aw = T->app_wake;
	const _Atomic uint64_t *words = NULL;
	unsigned long opened = 0, ids = 0;
	uint64_t t0 = 0;
	struct sdp_wc wc[4];
	struct pair p;
	int app[2];
	char b;

	/* Twice honest (the second takes the wake page mapped for the
	 * first, not a descriptor), then hostile. */
	for (int round = 0; round < 3; round++) {
		int hostile = round == 2;

		pair_up(&p, 2, 2);
		T->ack_events(p.s);
		CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0,
				    app), 0);
		CHECK_EQ(aw->share_app_fd(p.c, app[1]), 0);
		CHECK(!fd_readable(T->event_fd(p.s), 0));	/* nothing sent */
		if (hostile)
			atomic_fetch_add(&SHM_QP(p.c)->me.ctrl->app_offer_ino, 1);
		T->ack_events(p.c);
		CHECK_EQ(aw->app_arm(p.c, 1), 0);
		CHECK_EQ(send_buf(p.s, 9, "x", 1, SDP_SEND_SOLICITED), 0);
		if (!hostile) {
			CHECK(SHM_QP(p.s)->peer_app_fd >= 0);
			CHECK(SHM_QP(p.s)->peer_words != NULL);
			/* The next connection with the same process takes
			 * its offer through the pidfd opened for the first. */
			if (round == 0) {
				opened = sdp__shm_peer_pidfd_opened();
				ids = sdp__shm_own_ids_read();
				t0 = now_ms();
			}
			if (round == 1) {
				CHECK(SHM_QP(p.s)->peer_words == words);
				CHECK_EQ(sdp__shm_peer_pidfd_opened(), opened);
				/* Nor did the offer read our ids again (but
				 * once a second). */
				CHECK(sdp__shm_own_ids_read() - ids <=
				      (now_ms() - t0 >= 900 ? 1u : 0u));
			}
			words = SHM_QP(p.s)->peer_words;
			CHECK(fd_readable(app[0], TMO));
			CHECK_EQ(recv(app[0], &b, 1, MSG_DONTWAIT), 1);
		} else {
			CHECK_EQ(SHM_QP(p.s)->peer_app_fd, -1);
			CHECK(SHM_QP(p.s)->peer_app_fd_lost);
			CHECK(fd_readable(T->event_fd(p.c), TMO));
			CHECK(!fd_readable(app[0], 0));
		}
		CHECK_EQ(T->poll_cq(p.c, wc, 4), 1);
		close(app[0]);
		close(app[1]);
		pair_down(&p);
	}
}

/* The peer in WRITING, standing in for a waker preempted inside its
 * send(): it lands the byte after `hold_ms`. */
struct writing_peer {
	struct shm_ctrl *c;
	int hold_ms;
	_Atomic int landed;
};

static void *writing_peer_main(void *arg)
{
	struct writing_peer *w = arg;

	usleep((useconds_t)w->hold_ms * 1000);
	atomic_store(&w->landed, 1);
	sdp__shm_app_written(w->c, APP_WRITTEN);
	return NULL;
}

static uint64_t thread_cpu_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

/* A disarm that finds the peer's readiness byte in flight (WRITING)
 * waits for it to land.  The waker is often a process preempted right
 * after it claimed the word, by the very application its byte woke: a
 * yield does not hand the CPU back to a waker the scheduler will not run
 * yet, so a yielding disarm spun for whole slices (a PostgreSQL backend
 * per connection spent a tenth of its CPU there).  It sleeps until the
 * byte lands, and wakes as soon as it has. */
static void test_disarm_sleeps_while_byte_in_flight(void)
{
	const struct sdp_app_wake_ops *aw = T->app_wake;
	struct writing_peer w = { .hold_ms = 30 };
	uint64_t cpu0, t0, cpu_us, wall_ms;
	pthread_t th;
	struct pair p;

	pair_up(&p, 2, 2);
	w.c = SHM_QP(p.c)->me.ctrl;
	CHECK_EQ(aw->app_arm(p.c, 1), 0);
	atomic_store(&w.c->app_armed, APP_WRITING);	/* the peer claimed it */
	CHECK_EQ(pthread_create(&th, NULL, writing_peer_main, &w), 0);
	cpu0 = thread_cpu_us();
	t0 = sdp__shm_now_ms();
	CHECK_EQ(aw->app_arm(p.c, 0), 1);	/* a byte came */
	cpu_us = thread_cpu_us() - cpu0;
	wall_ms = sdp__shm_now_ms() - t0;
	CHECK(atomic_load(&w.landed));
	CHECK_EQ(atomic_load(&w.c->app_armed), APP_IDLE);
	CHECK(wall_ms < 100);	/* woken when it landed, not timed out */
	if (cpu_us >= 5000)
		fprintf(stderr, "disarm burnt %llu us of CPU over %llu ms\n",
			(unsigned long long)cpu_us,
			(unsigned long long)wall_ms);
	CHECK(cpu_us < 5000);
	pthread_join(th, NULL);
	pair_down(&p);
}

int main(void)
{
	static const struct unit_test tests[] = {
		{ test_rdma, "fork: RDMA READ/WRITE by cross-memory attach" },
		{ test_rdma_access_inproc, "RDMA REM_ACCESS_ERR cases" },
		{ test_rdma_other_user, "no RDMA with a peer of other ids" },
		{ test_rnr_and_oversize, "RNR and oversize SEND are fatal" },
		{ test_corrupt_rings, "hostile peer corrupts shared memory" },
		{ test_local_completion_notify, "local completions notify the engine" },
		{ test_handover_stale_app_fd, "handover: a readiness fd named but not held is lost" },
		{ test_appwake_offered_by_number, "readiness fd offered by number, taken once, checked" },
		{ test_disarm_sleeps_while_byte_in_flight, "a disarm sleeps while the peer's byte is in flight" },
	};

	return shm_run_tests(tests, sizeof(tests) / sizeof(tests[0]));
}
