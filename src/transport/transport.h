/* SPDX-License-Identifier: MIT */
/*
 * transport.h — the verbs-shaped interface between the SDP engine and its
 * providers (transport/shm/, transport/verbs/; the unit tests' loop).
 *
 * The engine sees no provider's internals: it calls providers through
 * this table, and picks one per connection through multi.h.  Every
 * provider implements the core operations.  What only some can do is
 * optional and NULL elsewhere, and the engine asks before it uses it: the
 * application wake-up (one table, app_wake), sharing a QP or a listener
 * with other processes (detach_qp, export_qp/import_qp/summon,
 * share_listener/take_request), and the flags and claim of a bind
 * (bind_flags, set_tcp_claim).  The multiplexer (multi.c), which serves
 * only the port space, takes "not supported" defaults for the rest from
 * dummy.c.
 *
 * Semantics follow an InfiniBand RC queue pair strictly:
 *  - A SEND consumes exactly one posted receive of the peer: which one is the
 *    transport's choice (verbs: the oldest; shm: the newest, whose buffer is
 *    still in cache), so the engine finds the data by the WC's wr_id and
 *    never assumes an order among its posted receives.  A SEND that finds
 *    no posted receive is fatal for the QP (RNR retry count 0): the sender's WC
 *    has status SDP_WC_RNR_RETRY_EXC_ERR, both QPs go to the error state.
 *  - A SEND larger than the peer's posted buffer is fatal too
 *    (SDP_WC_REM_INV_REQ_ERR at the sender, SDP_WC_LOC_LEN_ERR at the receiver).
 *  - Completions come back in posting order per queue (receive completions:
 *    in the order of the peer's SENDs).
 *  - When a QP enters the error state (peer died, peer destroyed its QP, local
 *    error), every completion that was already delivered to this side stays
 *    pollable first; then every outstanding WR (posted receives included)
 *    completes with SDP_WC_WR_FLUSH_ERR.  This is how the engine learns that
 *    the peer is gone: it always has receives posted.
 *  - RDMA READ/WRITE touch only ranges the peer registered with the matching
 *    access right and advertised by rkey; anything else completes with
 *    SDP_WC_REM_ACCESS_ERR and the QP goes to error.
 *
 * Errors: functions return 0 / a count, or a negative errno.  Never -1/errno.
 *
 * Threads: all functions may be called from any thread; the engine serialises
 * calls per QP with its connection lock, except sdp_tp_wait()/sdp_tp_kick()
 * which are called without that lock.
 */
#ifndef SDP_TRANSPORT_H
#define SDP_TRANSPORT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

struct sdp_qp;
struct sdp_listener;
struct sdp_mr;
struct sdp_conn_req;

/* ---- memory registration ------------------------------------------------ */

#define SDP_ACCESS_LOCAL_WRITE  0x1u
#define SDP_ACCESS_REMOTE_WRITE 0x2u
#define SDP_ACCESS_REMOTE_READ  0x4u

struct sdp_mr {
	void *addr;		/* start of the registered range (local VA) */
	size_t length;		/* bytes */
	uint32_t lkey;		/* local key for SGEs */
	uint32_t rkey;		/* remote key the peer uses for RDMA */
	uint64_t remote_addr;	/* what the peer puts in remote_addr for addr */
};

/* ---- work requests and completions --------------------------------------- */

enum sdp_wr_opcode {
	SDP_WR_SEND = 1,
	SDP_WR_RDMA_WRITE = 2,
	SDP_WR_RDMA_READ = 3,
};

#define SDP_SEND_SIGNALED  0x1u	/* generate a send completion */
#define SDP_SEND_INLINE    0x2u	/* copy the data at post time (len <= max_inline) */
#define SDP_SEND_SOLICITED 0x4u	/* solicited event at the receiver */

struct sdp_sge {
	uint64_t addr;		/* local VA */
	uint32_t length;	/* bytes */
	uint32_t lkey;		/* ignored for SDP_SEND_INLINE */
};

#define SDP_MAX_SGE 4

struct sdp_send_wr {
	uint64_t wr_id;
	enum sdp_wr_opcode opcode;
	unsigned flags;		/* SDP_SEND_* */
	const struct sdp_sge *sg_list;
	int num_sge;		/* 0 .. caps.max_sge */
	uint64_t remote_addr;	/* RDMA only: peer's address (from its mr.remote_addr) */
	uint32_t rkey;		/* RDMA only */
};

struct sdp_recv_wr {
	uint64_t wr_id;
	struct sdp_sge sge;	/* must lie in the QP's receive region (sdp_tp_recv_region) */
};

enum sdp_wc_opcode {
	SDP_WC_SEND = 1,
	SDP_WC_RDMA_WRITE = 2,
	SDP_WC_RDMA_READ = 3,
	SDP_WC_RECV = 4,
};

enum sdp_wc_status {
	SDP_WC_SUCCESS = 0,
	SDP_WC_LOC_LEN_ERR,		/* incoming SEND larger than the posted buffer */
	SDP_WC_LOC_PROT_ERR,		/* bad lkey / range */
	SDP_WC_WR_FLUSH_ERR,		/* QP in error: WR flushed */
	SDP_WC_REM_ACCESS_ERR,		/* RDMA outside what the peer registered */
	SDP_WC_REM_INV_REQ_ERR,		/* SEND larger than the peer's receive buffer */
	SDP_WC_RNR_RETRY_EXC_ERR,	/* SEND with no receive posted at the peer */
	SDP_WC_RETRY_EXC_ERR,		/* peer unreachable / dead */
	SDP_WC_GENERAL_ERR,
};

struct sdp_wc {
	uint64_t wr_id;
	enum sdp_wc_status status;
	enum sdp_wc_opcode opcode;
	uint32_t byte_len;	/* RECV: bytes received; RDMA READ: bytes read */
	unsigned flags;		/* SDP_WC_* below */
};

/* RECV: the sender already woke the application for this message (appwake,
 * see app_arm): the engine need not make another readiness edge for it. */
#define SDP_WC_APP_WOKEN 0x1u

const char *sdp_wc_status_str(enum sdp_wc_status status);

/* ---- queue pair ---------------------------------------------------------- */

/*
 * How a QP reaches the per-process progress thread (see "Waiting" below):
 * the engine's callbacks, with the context it gave in the attributes.
 * Either may be called from any thread, with or without the engine's
 * connection lock, but not with a lock of the provider's that the engine
 * could wait for.
 */
struct sdp_qp_events {
	/* What event_fd() returns has changed: watch the new one. */
	void (*fd_changed)(void *ctx);
	/* News for an armed QP (req_notify() returned 0) that no event
	 * descriptor shows: have it serviced. */
	void (*notify)(void *ctx);
};

struct sdp_qp_attr {
	uint32_t max_send_wr;	/* send queue depth */
	uint32_t max_recv_wr;	/* receive queue depth */
	uint32_t recv_region_size; /* bytes of receive-buffer memory the
				    * transport allocates and registers for
				    * this QP (the private receive buffers) */
	uint32_t cm_flags;	/* create_qp_from_req: SDP_CM_F_* sent with the
				 * accept, where the transport can carry them */
	const struct sdp_qp_events *events;	/* the engine's callbacks */
	void *events_ctx;
	/* create_qp for a connect: the address it will dial, or NULL.  A
	 * transport may set the QP up from what it kept from an earlier
	 * connection there (shm: transport/shm/shm_keep.c). */
	const struct sockaddr *dst;
	socklen_t dst_len;
};

/* Carried beside the HelloAck by transports that can (shm), outside the
 * SDP messages: 0 from any other. */
#define SDP_CM_F_TCP_TOO 1u	/* the listener also takes kernel TCP
				 * connections on its port (policy "both") */
#define SDP_CM_F_LISTENER_SAID_NO 2u /* REJECTED: a listener refused it
				      * (not: nobody listens) */

struct sdp_tp_caps {
	uint32_t max_inline;	/* SDP_SEND_INLINE allowed up to this many bytes */
	uint32_t max_sge;
	int rdma;		/* 1 if RDMA READ/WRITE work on this QP */
	char rdma_reason[64];	/* when !rdma: why (e.g. "ptrace denied") */
	char name[16];		/* transport name: "shm", "verbs" */
};

/* Address of a connection as the socket layer sees it (sockaddr_in/in6). */
struct sdp_tp_addr {
	struct sockaddr_storage local;
	struct sockaddr_storage peer;
	socklen_t local_len, peer_len;
};

/* CM events on an active QP (sdp_tp_get_event). */
enum sdp_cm_event_type {
	SDP_CM_NONE = 0,
	SDP_CM_ESTABLISHED,	/* connect accepted; private data = HelloAck */
	SDP_CM_REJECTED,	/* no listener / refused: ECONNREFUSED */
	SDP_CM_UNREACHABLE,	/* route/address error: errno in `err` */
	SDP_CM_DISCONNECTED,	/* peer disconnected or died */
};

#define SDP_CM_PRIV_MAX 256

struct sdp_cm_event {
	enum sdp_cm_event_type type;
	int err;			/* negative errno for REJECTED/UNREACHABLE */
	uint32_t flags;			/* ESTABLISHED: the peer's SDP_CM_F_* */
	uint32_t priv_len;
	uint8_t priv[SDP_CM_PRIV_MAX];	/* private data carried by the CM message */
};

/*
 * The ops table.  A provider also exports one `struct sdp_transport` (below).
 *
 * Connection management, active side:
 *   create_qp(attr) -> post receives -> connect(qp, bind?, dst, Hello) ->
 *   the QP's event fd becomes readable -> get_event() = ESTABLISHED(HelloAck)
 *   or REJECTED.
 * Passive side:
 *   bind(addr) -> listen(backlog) -> listener fd readable -> get_request()
 *   gives a request with the Hello -> create_qp_from_req(attr) -> post
 *   receives -> accept(qp, HelloAck)  (or reject(req)).
 *
 * Waiting:
 *   seq = wait_seq(qp); <check for work: poll_cq, state>; wait(qp, seq, tmo)
 *   returns when anything happened on the QP since `seq` was read (a new
 *   completion, a CM event, the peer's death, a kick), on timeout
 *   (-ETIMEDOUT) or on a signal (-EINTR).  Only then is it safe to sleep:
 *   the transport wakes a waiter for every completion posted after wait_seq().
 *
 *   event_fd(qp) is for the per-process progress thread's epoll: after
 *   req_notify(qp) returns 0, the fd becomes readable when a new completion
 *   or event arrives, or the provider calls attr->events->notify() for news
 *   the fd does not show; req_notify returns 1 when work is already pending
 *   (poll again instead of sleeping), and the QP is then left unarmed.
 *   The engine also calls it from an application thread, where the
 *   application's own wake-up falls back to it (engine/appwake.c).
 *   ack_events(qp) drains the fd.
 *   event_fd() may be -1 (nothing to watch yet, or any more) and may
 *   change over the QP's life; the provider then calls
 *   attr->events->fd_changed().  shm watches its rendezvous socket, so a
 *   connection costs no descriptor of its own for events.
 */
/*
 * Flags of bind_flags().  SDP_BIND_TCP_HELD: the caller holds the kernel TCP
 * port at this address itself (a "both" socket's TCP side); without it shm
 * takes that port as a claim, the proof of ownership its clients check
 * (shm_owner.c).  SDP_BIND_V6ONLY: an IPv6 wildcard that takes no IPv4
 * (IPV6_V6ONLY), so that it shares its port with an IPv4 listener.
 */
#define SDP_BIND_TCP_HELD	0x1u
#define SDP_BIND_V6ONLY		0x2u

/*
 * The application wake-up, an optional capability of a provider (shm):
 * every member is implemented where the table is given.
 */
struct sdp_app_wake_ops {
	/* Direct application wake-up.
	 * The engine hands over `fd`, a descriptor whose readability is what
	 * the application sleeps on (the library end of its readiness
	 * socketpair); the provider lets the peer write one byte into it.
	 * While app_arm(qp, 1) is in force, the peer's next SOLICITED send
	 * writes that byte INSTEAD of ringing event_fd() — one wake-up per
	 * message, straight into the application's poll/epoll, as with TCP.
	 * app_arm(qp, 1) returns 1 if a completion is already waiting (it
	 * may have been published before the arm was seen: poll, disarm and
	 * try again), else 0.  app_arm(qp, 0) disarms and returns 1 if the
	 * peer consumed the arm (a byte was or is being written, and the
	 * message it announces is in the CQ), else 0.  drop_peer_app_fd()
	 * forgets the peer's descriptor (before DisConn/AbortConn, so that the
	 * peer's last reference to its socketpair is its own). */
	int (*share_app_fd)(struct sdp_qp *qp, int fd);
	/* on == SDP_APP_ARM_QUIET: the application looks at this QP by
	 * itself before it sleeps (socket/epfast.c), so the peer neither
	 * writes the byte nor rings event_fd() for a solicited send; returns
	 * as for on == 1.  Disarming it returns 0.  on ==
	 * SDP_APP_ARM_ALONE: the same for every message, and without a
	 * descriptor shared: no wait in the kernel names the application's,
	 * and whatever comes is taken by the application's next call
	 * (engine/appwake.c). */
	int (*app_arm)(struct sdp_qp *qp, int on);
	/* Before app_arm(qp, 1), name the sleeping wait the arm
	 * is for (unique per process and wait; 0: unknown).  A peer thread
	 * that has already written a byte for that wait, for another QP in
	 * the same epoll set, skips the byte: the woken wait looks at every
	 * connection of its set before it sleeps again. */
	void (*app_sleep_id)(struct sdp_qp *qp, uint64_t id);
	/* From now on this QP's quiet arms defer to wake word
	 * `handle` (transport/wakeword.h; -1: to none): the peer writes the
	 * byte for a solicited send when that word says a thread sleeps on
	 * the set, and stays quiet otherwise.  Returns 1 if the peer can
	 * read that word, else 0 (quiet arms stay plain quiet).  Takes effect
	 * at the next app_arm(qp, SDP_APP_ARM_QUIET). */
	int (*app_word)(struct sdp_qp *qp, int handle);
	void (*drop_peer_app_fd)(struct sdp_qp *qp);
	/* A counter the peer moves with every message it sends,
	 * readable without the connection's lock for as long as the QP
	 * exists.  An event loop skips a connection whose counter has not
	 * moved since it found nothing there (socket/epfast.c). */
	const _Atomic uint32_t *(*app_arrivals)(struct sdp_qp *qp);
};

struct sdp_transport_ops {
	/* Port space (SDP's own, per network namespace). */
	int (*bind)(const struct sockaddr *addr, socklen_t len,
		    struct sdp_listener **out);
	/* bind() with SDP_BIND_* flags; NULL: bind() serves, flags unused. */
	int (*bind_flags)(const struct sockaddr *addr, socklen_t len,
			  unsigned flags, struct sdp_listener **out);
	/* Such a caller that serves SDP only hands its TCP socket, bound to
	 * the listener's address, over as the claim before listen(); the
	 * listener owns it from then on (closes it, even on failure). */
	int (*set_tcp_claim)(struct sdp_listener *l, int fd);
	int (*bound_addr)(struct sdp_listener *l, struct sockaddr_storage *ss,
			  socklen_t *len);
	int (*listen)(struct sdp_listener *l, int backlog);
	int (*listener_fd)(struct sdp_listener *l);
	/* Returns -EAGAIN when no request is pending. */
	int (*get_request)(struct sdp_listener *l, struct sdp_conn_req **req,
			   void *priv, uint32_t *priv_len);
	void (*reject)(struct sdp_conn_req *req);
	void (*close_listener)(struct sdp_listener *l);
	/* Shared listener (fork): from now on requests are taken with
	 * take_request() by whichever process of the family accepts, straight
	 * from a kernel queue they all hold; listener_fd() is no longer used.
	 * The provider adds what makes requests visible to epoll set
	 * `watch_ep` (the caller's, which every process of the family holds;
	 * the provider keeps a descriptor of its own for it): the queue, and
	 * later a connection it holds for a late Hello.  0, or -errno
	 * (-EOPNOTSUPP: not shareable).  take_request() returns -EAGAIN when
	 * none is waiting, -ECONNABORTED when it took connections that did
	 * not become requests (the descriptor was readable for them); it may
	 * wait briefly for a request whose Hello is still in flight. */
	int (*share_listener)(struct sdp_listener *l, int watch_ep);
	int (*take_request)(struct sdp_listener *l, struct sdp_conn_req **req,
			    void *priv, uint32_t *priv_len);

	/* QPs. */
	int (*create_qp)(const struct sdp_qp_attr *attr, struct sdp_qp **out);
	int (*create_qp_from_req)(struct sdp_conn_req *req,
				  const struct sdp_qp_attr *attr,
				  struct sdp_qp **out);
	/* `local` may be a listener obtained from bind() to fix the source
	 * address/port (it is consumed), or NULL for an ephemeral one. */
	int (*connect)(struct sdp_qp *qp, struct sdp_listener *local,
		       const struct sockaddr *dst, socklen_t len,
		       const void *priv, uint32_t priv_len);
	int (*accept)(struct sdp_qp *qp, const void *priv, uint32_t priv_len);
	int (*get_event)(struct sdp_qp *qp, struct sdp_cm_event *ev);
	int (*addresses)(struct sdp_qp *qp, struct sdp_tp_addr *addr);
	void (*query_caps)(struct sdp_qp *qp, struct sdp_tp_caps *caps);
	/* Graceful end of the QP: the peer's QP flushes once it drained what
	 * was delivered.  destroy_qp implies disconnect. */
	int (*disconnect)(struct sdp_qp *qp);
	void (*destroy_qp)(struct sdp_qp *qp);
	/* Release this process's handle on the QP WITHOUT disconnecting it:
	 * another process (a fork() child) inherited the connection and goes
	 * on using it.  Providers that cannot share a QP across fork leave
	 * this NULL and get destroy_qp (the connection then ends). */
	void (*detach_qp)(struct sdp_qp *qp);
	/* Hand-over between processes of one family (engine/handover.c):
	 * write the QP's live state to `buf` (at most `cap` bytes; NULL asks
	 * for the size), and load such a state into this process's copy of
	 * the same QP (inherited by fork).  Only when nothing is in flight
	 * that names this process's memory (registered regions).  Either
	 * returns bytes/0, or -errno (-EBUSY: not now).  NULL: the QP cannot
	 * change process (verbs), and a second process gets EBADFD. */
	ssize_t (*export_qp)(struct sdp_qp *qp, void *buf, size_t cap);
	int (*import_qp)(struct sdp_qp *qp, const void *buf, size_t len);
	/* Before a fork() that may share the QP with the child: create what
	 * another process of the family needs to summon (below) the one that
	 * drives it.  0, or -errno: the QP then stays with this process.
	 * NULL: nothing to prepare. */
	int (*share_prepare)(struct sdp_qp *qp);
	/* Wake the process that drives this QP now (its progress thread and
	 * its waiting threads), from another process of the family. */
	void (*summon)(struct sdp_qp *qp);

	/* Memory. */
	struct sdp_mr *(*recv_region)(struct sdp_qp *qp);
	int (*reg_mr)(struct sdp_qp *qp, void *addr, size_t len, unsigned access,
		      struct sdp_mr **out);
	int (*dereg_mr)(struct sdp_qp *qp, struct sdp_mr *mr);

	/* Data path. */
	int (*post_send)(struct sdp_qp *qp, const struct sdp_send_wr *wr);
	int (*post_recv)(struct sdp_qp *qp, const struct sdp_recv_wr *wr);
	/* Up to `max` completions.  A caller that gets `max` calls again
	 * until it gets fewer: a transport may count on the caller taking
	 * in everything it polled for (verbs does not ring the progress
	 * thread for them). */
	int (*poll_cq)(struct sdp_qp *qp, struct sdp_wc *wc, int max);

	/* Waiting and notification. */
	uint32_t (*wait_seq)(struct sdp_qp *qp);
	int (*wait)(struct sdp_qp *qp, uint32_t seq, int timeout_ms);
	/* wait(), for news that an RDMA in flight
	 * brings within its transfer time: the completion of our RDMA READ
	 * or WRITE, or the peer's RdmaRdCompl for a buffer of ours that it
	 * is reading.  `since_ns` (CLOCK_MONOTONIC) is when that transfer
	 * began or last showed progress, `due_ns` when the caller expects
	 * the news (0: no idea).  Such news is due, not merely possible, so
	 * a transport may poll for it around due_ns rather than sleep
	 * (verbs: SDP_VERBS_RDMA_SPIN_US).  Calls for one transfer pass the
	 * same since_ns and due_ns.  Returns 0 for news found while polling
	 * (or there before it slept), 1 for news that woke it from a sleep
	 * before it polled (due_ns was late, or the news was something
	 * else), 2 for news that woke it from a sleep after its polling
	 * (due_ns was early, or the transfer slow), or wait()'s -ETIMEDOUT /
	 * -EINTR. */
	int (*wait_rdma)(struct sdp_qp *qp, uint32_t seq, int timeout_ms,
			 uint64_t since_ns, uint64_t due_ns);
	void (*kick)(struct sdp_qp *qp);
	int (*event_fd)(struct sdp_qp *qp);
	int (*req_notify)(struct sdp_qp *qp);
	void (*ack_events)(struct sdp_qp *qp);
	/* While connect()'s answer is awaited: a descriptor that becomes
	 * readable when the answer (or the listener's hang-up) is there to
	 * take with get_event(), for a caller that sleeps on it itself
	 * instead of handing the QP to the progress thread first; -1 if the
	 * provider has none. */
	int (*answer_fd)(struct sdp_qp *qp);

	/* Optional capability: the peer wakes the application directly
	 * (struct sdp_app_wake_ops below); NULL where the provider cannot. */
	const struct sdp_app_wake_ops *app_wake;

	/* Where the next SEND's bytes will land, when that is memory this
	 * process can write (shm: the newest of the peer's posted receive
	 * buffers); NULL when there is none or no such memory (verbs).
	 * *cap is its size.  The caller may put a message's payload there
	 * before it posts the SEND: an SGE whose address is where its bytes
	 * are to land is not copied.  Valid until the next post on the QP,
	 * so the caller holds the connection's lock from here to the post. */
	uint8_t *(*send_slot)(struct sdp_qp *qp, uint32_t *cap);

	/* Optional: the private receive buffers this provider runs best
	 * with (count, and bytes each, BSDH included); 0 for the engine's
	 * defaults.  SDP_RECV_BUFS / SDP_RECV_BUF_SIZE override them. */
	uint32_t recv_bufs_pref, recv_buf_size_pref;
};

#define SDP_APP_ARM_QUIET 2
#define SDP_APP_ARM_ALONE 3

struct sdp_transport {
	const char *name;
	const struct sdp_transport_ops *ops;
};

/* Every QP/listener object starts with this, so the engine can dispatch. */
struct sdp_tp_object {
	const struct sdp_transport_ops *ops;
};

/* Providers. */
extern const struct sdp_transport sdp_shm_transport;

/* Fill every NULL entry of `ops` with the "not supported" default. */
void sdp_transport_fill_defaults(struct sdp_transport_ops *ops);
/* For providers: wait_rdma() as a plain wait(), for one with nothing to
 * poll for; send_slot() for one whose SENDs land in memory this process
 * cannot write. */
int sdp_tp_wait_rdma_plain(struct sdp_qp *qp, uint32_t seq, int timeout_ms,
			   uint64_t since_ns, uint64_t due_ns);
uint8_t *sdp_tp_no_send_slot(struct sdp_qp *qp, uint32_t *cap);

/* Thin dispatch helpers: call sites read naturally, indirection lives here. */
#define SDP_TP(obj) (((const struct sdp_tp_object *)(obj))->ops)

static inline int sdp_post_send(struct sdp_qp *qp, const struct sdp_send_wr *wr)
{
	return SDP_TP(qp)->post_send(qp, wr);
}

static inline int sdp_post_recv(struct sdp_qp *qp, const struct sdp_recv_wr *wr)
{
	return SDP_TP(qp)->post_recv(qp, wr);
}

static inline int sdp_tp_wait_rdma(struct sdp_qp *qp, uint32_t seq,
				   int timeout_ms, uint64_t since_ns,
				   uint64_t due_ns)
{
	return SDP_TP(qp)->wait_rdma(qp, seq, timeout_ms, since_ns, due_ns);
}

static inline int sdp_poll_cq(struct sdp_qp *qp, struct sdp_wc *wc, int max)
{
	return SDP_TP(qp)->poll_cq(qp, wc, max);
}

/* bind(), with flags where the transport takes them. */
static inline int sdp_tp_bind(const struct sdp_transport_ops *ops,
			      const struct sockaddr *sa, socklen_t len,
			      unsigned flags, struct sdp_listener **out)
{
	return ops->bind_flags ? ops->bind_flags(sa, len, flags, out) :
				 ops->bind(sa, len, out);
}

#endif /* SDP_TRANSPORT_H */
