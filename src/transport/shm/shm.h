/* SPDX-License-Identifier: MIT */
/*
 * shm.h — internals of the "shm" transport (processes on one host).
 *
 * Each QP owns one memfd segment: a control block, its receive-queue ring
 * (posted receive descriptors, written by the owner, consumed by the peer),
 * its receive-completion ring (written by the peer), a wake-up word and an MR
 * table, followed by the receive region.  The fd travels to the peer once,
 * with SCM_RIGHTS, inside the CM message over an AF_UNIX SOCK_SEQPACKET
 * connection that also serves as doorbell and liveness signal.
 *
 * Trust: the peer can write anything into our segment at any time.  Every
 * value read from it is copied once into a local and validated; layout values
 * (depth, region size) are copied into private memory at handshake and never
 * read again.  The segment is sealed against shrinking so a mapping can never
 * SIGBUS.
 *
 * Files: shm_portspace.c (names, bind/listen/get_request, rendezvous),
 * shm_cm.c (connect/accept/get_event, CM messages, segment mapping),
 * shm_qp.c (QP life cycle, post/poll, error and flush), shm_wait.c (futex,
 * doorbell, liveness), shm_rdma.c (MR table, RDMA), shm_creds.c
 * (cross-memory attach with no more privilege than the peer's), shm_owner.c
 * (who may answer for an address).
 */
#ifndef SDP_TRANSPORT_SHM_H
#define SDP_TRANSPORT_SHM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>

#include "transport/transport.h"

#define SHM_MAGIC	0x314d48535044534cULL	/* "LSDPSHM1" */
#define SHM_VERSION	9	/* 3: receives are tagged (shm_qp.c);
				 * 4: app_slot, wake words (wakeword.h);
				 * 5: the rings before the MR table;
				 * 6: segment pairs kept (shm_keep.c);
				 * 7: readiness offered by number;
				 * 8: a disarm sleeps out WRITING;
				 * 9: a Hello names pairs kept with other
				 * processes of the listener's too */
#define SHM_MAX_MR	256		/* rkey low byte = table index */
#define SHM_MAX_DEPTH	65536		/* ring entries */
#define SHM_MAX_REGION	(1u << 30)	/* receive region bytes */
#define SHM_RECV_LKEY	0x80000000u	/* never a valid rkey (bit 31) */
#define SHM_WAIT_SLICE_MS 100
#define SHM_PENDING_TMO_MS 5000		/* half-open connection lifetime */
/* Accepted, Hello not read yet.  A burst of connects (wrk -c 1000) is
 * taken whole: past this bound new ones are closed, which the client sees
 * as a refusal.  SOMAXCONN's default, as the engine's backlog bound. */
#define SHM_MAX_PENDING	4096
#define SHM_HELLO_WAIT_MS 1000		/* shared listener: Hello in flight */
/* Shared listener after a client that stayed silent (shm_share.c): how
 * long accept() waits for Hellos, how long that lasts, and how many
 * connections one process holds for a late Hello. */
#define SHM_HELLO_PARK_WAIT_MS 2
#define SHM_SILENT_HOLD_MS 10000
#define SHM_PARKED_MAX 16

/* ---- shared segment layout (all multi-writer words atomic) --------------- */

struct shm_rq_entry {			/* owner -> peer: a posted receive */
	_Atomic uint32_t offset;	/* bytes into the receive region */
	_Atomic uint32_t length;	/* bytes */
	_Atomic uint32_t tag;		/* owner's record of it, < depth */
};

enum { SHM_CQE_OK = 0, SHM_CQE_LEN_ERR = 1 };

struct shm_cq_entry {			/* peer -> owner: a receive completion */
	_Atomic uint32_t byte_len;
	_Atomic uint32_t status;	/* SHM_CQE_* */
	_Atomic uint32_t tag;		/* which posted receive it filled */
};

struct shm_mr_entry {			/* owner -> peer, seqlock protected */
	_Atomic uint32_t gen;		/* odd while the owner rewrites it */
	_Atomic uint32_t rkey;		/* 0 = free */
	_Atomic uint32_t access;	/* SDP_ACCESS_REMOTE_* */
	_Atomic uint32_t pid;		/* registering process (fork check) */
	_Atomic uint64_t addr;		/* owner VA */
	_Atomic uint64_t length;	/* bytes */
};

/* shm_ctrl.app_armed (shm_appwake.c).  APP_QUIET: the application polls
 * the QP itself before sleeping (it is running): the peer's solicited send
 * needs no syscall at all.  APP_WORD: quiet while the word of slot
 * app_slot in the owner's wake page says nobody sleeps on the connection's
 * epoll set, armed while somebody does (transport/wakeword.h): the owner
 * sleeps with one store for the whole set instead of an arm per
 * connection.  APP_ALONE: quiet for every message, and the owner's
 * descriptor is not ours (SDP_APP_ARM_ALONE): neither byte nor doorbell.
 * A peer that does not know a value rings the doorbell. */
enum { APP_IDLE, APP_ARMED, APP_WRITING, APP_WRITTEN, APP_QUIET, APP_WORD,
       APP_ALONE };

struct shm_ctrl {
	/* Written once by the owner before the fd is sent. */
	uint64_t magic;
	uint32_t version;
	uint32_t depth;			/* ring entries, power of two */
	uint64_t seg_size;		/* bytes, whole segment */
	uint64_t region_off;		/* receive region offset */
	uint64_t region_size;		/* receive region bytes */
	_Atomic uint64_t nonce;		/* identity probe for RDMA */

	_Alignas(64) _Atomic uint32_t rq_prod;	/* owner: receives posted */
	_Atomic uint32_t cq_cons;	/* owner: completions taken (appwake) */
	_Atomic uint32_t app_woke_upto;	/* peer: completions announced by its
					 * last readiness byte (appwake) */
	_Alignas(64) _Atomic uint32_t cq_prod;	/* peer: receives consumed */
	_Alignas(64) _Atomic uint32_t seq;	/* futex: news for the owner */
	_Atomic uint32_t waiters;	/* owner threads sleeping in wait() */
	_Atomic uint32_t armed;		/* owner wants a doorbell byte */
	_Atomic uint32_t app_armed;	/* APP_*: the owner's application
					 * sleeps on its readiness fd; the
					 * next solicited send writes a byte
					 * there (shm_appwake.c) */
	_Atomic uint32_t app_waiting;	/* owner: threads asleep on app_armed
					 * until the peer's byte in flight
					 * lands (WRITING, shm_appwake.c) */
	_Atomic uint32_t closed;	/* peer disconnected or failed */
	_Atomic uint32_t released;	/* peer: its QP is gone, it writes
					 * here no more (shm_keep.c) */
	_Atomic uint32_t kept;		/* owner: kept for the same peer */
	_Atomic uint64_t app_sleep_id;	/* owner: which sleeping epoll_wait
					 * armed app_armed (0: none known) */
	_Atomic uint32_t app_slot;	/* owner: with app_armed == APP_WORD,
					 * the slot of its wake page whose
					 * word says whether to wake */
	/* Owner: its readiness descriptor and wake page offered by number,
	 * for the peer to take with pidfd_getfd (shm_appwake.c): numbers
	 * + 1 (0: not offered), and the inodes (and the page's device) the
	 * peer checks them by.
	 * The inodes are written first, app_offer_fd last. */
	_Atomic uint64_t app_offer_ino;
	_Atomic uint64_t page_offer_ino;
	_Atomic uint64_t page_offer_dev;
	_Atomic uint32_t page_offer_fd;
	_Atomic uint32_t app_offer_fd;
};

/* Where the parts of a segment lie, for a ring depth and a region size:
 * both sides compute it, neither trusts the other's numbers.  The control
 * block and the rings come first, in the page every connection touches;
 * the MR table (10 KiB, used only by ZCopy) after them, untouched by a
 * connection that never registers memory: an idle connection keeps one
 * page of each segment resident, not two. */
struct shm_layout {
	size_t rq, cq, mr, region, total;
};

static inline struct shm_layout sdp__shm_layout(uint32_t depth,
						uint32_t region_size)
{
	struct shm_layout lo;

	lo.rq = (sizeof(struct shm_ctrl) + 63) & ~(size_t)63;
	lo.cq = lo.rq + (size_t)depth * sizeof(struct shm_rq_entry);
	lo.mr = (lo.cq + (size_t)depth * sizeof(struct shm_cq_entry) + 63) &
		~(size_t)63;
	lo.region = (lo.mr + SHM_MAX_MR * sizeof(struct shm_mr_entry) +
		     4095) & ~(size_t)4095;
	lo.total = lo.region + (((size_t)region_size + 4095) & ~(size_t)4095);
	return lo;
}

/* A mapped segment: layout values are private copies. */
struct shm_seg {
	struct shm_ctrl *ctrl;
	size_t size;
	uint32_t depth;
	struct shm_rq_entry *rq;
	struct shm_cq_entry *cq;
	struct shm_mr_entry *mr;	/* [SHM_MAX_MR] */
	uint8_t *region;
	uint32_t region_size;
	uint64_t nonce;			/* as the owner wrote it first */
};

/* Write the owner's header of a segment (shm_cm.c): what the peer checks
 * before it maps it, and the nonce. */
void sdp__shm_ctrl_header(struct shm_ctrl *c, uint32_t depth,
			  uint32_t region_size, uint64_t nonce);
/* Fill `seg` for a segment mapped at `map` (shm_cm.c). */
void sdp__shm_seg_place(struct shm_seg *seg, void *map, size_t size,
			uint32_t depth, uint32_t region_size);

/* ---- addresses and port space -------------------------------------------- */

struct shm_addr {
	int v6;				/* else IPv4 (v4-mapped stored as v4) */
	uint8_t a[16];
	uint16_t port;			/* host order */
};

struct shm_pending;

struct shm_listener {
	struct sdp_tp_object obj;
	struct shm_addr addr;		/* bound address, actual port */
	int is_v6_socket;		/* present addresses as sockaddr_in6 */
	int sock;			/* AF_UNIX seqpacket, bound to the name */
	int epfd;			/* listener_fd: sock + pending conns */
	int claim;			/* kernel TCP socket holding the port
					 * (shm_owner.c), or -1 */
	bool v6only;			/* IPv6 wildcard taking no IPv4 */
	bool listening;
	struct shm_pending *pending;	/* accepted, Hello not read yet */
	int npending;
	bool shared;			/* served by take_request (fork) */
	uint64_t silent_until;		/* shared: a client was silent; wait
					 * briefly for Hellos until then */
	int share_ep;			/* shared: epoll set over sock and the
					 * connections held for their Hello
					 * (shm_share.c), or -1 */
};

struct shm_conn_req {
	int sock;
	struct shm_seg peer;
	struct shm_seg kept_me;		/* my segment kept for this client */
	uint64_t kept_nonce;		/* its nonce, the Hello's offer */
	bool kept_mr_used;		/* its MR table was written */
	uint64_t peer_base;		/* peer's VA of its segment (probe) */
	pid_t peer_pid;			/* from SCM_CREDENTIALS, 0 unknown */
	uid_t peer_uid;			/* the same message's real ids */
	gid_t peer_gid;
	struct shm_addr src, dst;
	int is_v6_socket;
};

/* ---- QP ------------------------------------------------------------------ */

enum shm_state {		/* order matters: >= SHM_PASSIVE has a peer */
	SHM_IDLE,		/* created, not connected */
	SHM_CONNECTING,		/* Hello sent, waiting for the reply */
	SHM_FAILED,		/* connect refused; no DISCONNECTED later */
	SHM_PASSIVE,		/* from a request, accept() not called yet */
	SHM_ESTABLISHED,
};

struct shm_rwr {			/* private record of a posted receive */
	uint64_t wr_id;
	uint32_t offset;		/* into the receive region */
	uint32_t length;
	uint32_t seq;			/* rq_prod when posted (flush order) */
	bool posted;
};

struct shm_avail {			/* a peer's posted receive, validated */
	uint32_t offset, length, tag;
};

struct shm_mr {
	struct sdp_mr pub;
	unsigned access;
};

/* A pair kept with another process of the same listener, that a Hello
 * names beside the first (shm_keep.c): whichever process accepts takes
 * its own. */
#define SHM_KEEP_ALTS 3

struct shm_alt {
	struct shm_seg mine, theirs;	/* as kept: our segment (reset), our
					 * mapping of the listener's */
	pid_t peer;
	uint64_t since_ms;
};

struct shm_qp {
	struct sdp_tp_object obj;
	struct sdp_qp_attr attr;
	_Atomic(enum shm_state) state;	/* read by wait() without the lock */
	_Atomic int err;		/* in error: flush everything */
	/* sock is the QP's event descriptor (event_fd), from the Hello on
	 * until the peer hangs up. */
	_Atomic int sock_in_ep;
	bool disc_reported;
	int sock;			/* AF_UNIX seqpacket to the peer, or -1 */
	/* Made before the first fork() that shares the QP (share_prepare),
	 * else -1: the eventfd another process of the family summons the
	 * owner with, and an epoll set over it and `sock`, which is then the
	 * event descriptor (event_fd). */
	int summon_fd, summon_ep;
	int memfd;			/* my segment, until sent */
	/* Segments kept for the next connection between the same two
	 * processes (shm_keep.c).  Client: `offer` is the nonce of the
	 * listener's kept segment the Hello names (0: none), `kept_peer` its
	 * mapping until the answer, `kept_pid` the process that keeps it;
	 * `offer_mine` the nonce of our own kept segment when the Hello
	 * passes no memfd (0: it passes one), and `hello` the SDP Hello, to
	 * send again with a memfd if the listener no longer keeps the pair.
	 * Acceptor: `offer` is the nonce the Accept says it took again. */
	uint64_t offer, offer_mine;
	struct shm_seg kept_peer;
	pid_t kept_pid;
	uint8_t hello[SDP_CM_PRIV_MAX];
	uint32_t hello_len;
	/* Named beside `offer`; one slot more, where the first pair waits
	 * to go back to the pool when the answer passed it over. */
	struct shm_alt alt[SHM_KEEP_ALTS + 1];
	int nalt;
	bool shared;			/* a fork() shared it: never kept */

	struct shm_seg me;		/* my segment */
	struct shm_seg peer;		/* the peer's segment, once known */
	uint64_t peer_base;
	pid_t peer_pid;
	/* The real ids of the process that sent the peer's CM message, as
	 * the kernel stamped them (SCM_CREDENTIALS): RDMA only with a peer
	 * of our own ids (shm_rdma.c). */
	uid_t peer_uid;
	gid_t peer_gid;
	int peer_pidfd;			/* liveness of peer_pid, or -1 */
	bool rdma_probed;		/* caps.rdma is known (query_caps) */
	/* The peer gave its readiness fd to the process this QP moved from
	 * (shm_handover.c): it may wait for a byte we cannot write. */
	bool peer_app_fd_lost;
	int peer_app_fd;		/* peer's readiness fd (share_app_fd),
					 * or -1; used and closed only under
					 * the owner's lock */
	uint64_t peer_app_ino;		/* its inode: a fork child checks that
					 * it holds the same file */
	bool peer_offer_taken;		/* the peer's offer was tried (or
					 * dropped): never again */
	pid_t cm_pid;			/* the process that sent our CM
					 * message: the pid the peer knows */
	/* Wake words (transport/wakeword.h). */
	int app_word;			/* my quiet arms defer to this handle's
					 * word, or -1 */
	int ww_gen;			/* my wake page the peer was given, or
					 * -1 */
	const _Atomic uint64_t *peer_words; /* the peer's page, read-only */
	uint32_t peer_cons;		/* peer receives consumed by my SENDs */
	uint32_t peer_rd;		/* peer's rq entries read into avail */
	struct shm_avail *avail;	/* [peer.depth] posted, unused; a stack:
					 * the newest is used first */
	uint32_t navail;

	struct shm_rwr *rwr;		/* [me.depth], index = tag */
	uint32_t *rwr_free;		/* [me.depth] stack of unposted tags */
	uint32_t nfree;
	uint32_t rq_prod;		/* receives posted */
	uint32_t rq_done;		/* receive completions returned */
	uint64_t rx_bytes;		/* bytes those brought: a bound on the
					 * region's pages the peer touched */
	bool rx_bad;			/* completion ring no longer trusted */

	struct sdp_wc *lcq;		/* [attr.max_send_wr] local completions */
	uint32_t lcq_head, lcq_count;

	struct shm_mr *mrs[SHM_MAX_MR];
	uint32_t mr_gen;
	struct sdp_mr recv_mr;

	struct sdp_tp_caps caps;
	struct sdp_tp_addr addr;
	struct shm_listener *local;	/* source port reservation */
	struct sdp_cm_event ev;
	bool ev_pending;
	struct shm_addr dst;
	int is_v6_socket;
	uint8_t cm_flags;		/* sent with the Accept (attr.cm_flags) */
};

#define SHM_QP(q) ((struct shm_qp *)(q))
#define SHM_L(l) ((struct shm_listener *)(l))

extern const struct sdp_transport_ops sdp__shm_ops;

/* shm_portspace.c */
int sdp__shm_addr_parse(const struct sockaddr *sa, socklen_t len,
			struct shm_addr *a, int *is_v6_socket);
void sdp__shm_addr_to_sockaddr(const struct shm_addr *a, int want_v6,
			       struct sockaddr_storage *ss, socklen_t *len);
bool sdp__shm_addr_is_any(const struct shm_addr *a);
/* A wildcard destination is this host, as on Linux: 0.0.0.0 = 127.0.0.1. */
void sdp__shm_addr_dial(struct shm_addr *a);
int sdp__shm_addr_is_local(const struct shm_addr *a);
int sdp__shm_name_connect(int *sock, const struct shm_addr *dst);
int sdp__shm_name_parse(const char *path, size_t len, struct shm_addr *a);
/* flags: SDP_BIND_* (transport.h). */
int sdp__shm_bind_addr(const struct shm_addr *a, int is_v6_socket,
		       unsigned flags, struct shm_listener **out);
/* The name of a client that did not bind: an ephemeral port of `a`'s
 * address, in the clients' own names (shm_portspace.c). */
int sdp__shm_bind_client(const struct shm_addr *a, int is_v6_socket,
			 struct shm_listener **out);
void sdp__shm_listener_free(struct shm_listener *l);
int sdp__shm_bind(const struct sockaddr *addr, socklen_t len,
		  struct sdp_listener **out);
int sdp__shm_bind_flags(const struct sockaddr *addr, socklen_t len,
			unsigned flags, struct sdp_listener **out);
int sdp__shm_set_tcp_claim(struct sdp_listener *l, int fd);
/* Reset the TCP connections the claim took (an SDP-only port). */
void sdp__shm_claim_reset_clients(struct shm_listener *l);

/* shm_owner.c: 1 if the listener at the other end of the connected socket
 * runs as the user who owns the kernel TCP listener a connection to dst
 * would reach, 0 if not, -errno if the kernel cannot tell. */
int sdp__shm_peer_owns_port(int sock, const struct shm_addr *dst);
/* The same for the listener bound to an abstract name (`like`: a socket of
 * the caller's, for its network namespace). */
int sdp__shm_name_owns_port(int like, const struct sockaddr_un *sun,
			    socklen_t len, const struct shm_addr *dst);
int sdp__shm_bound_addr(struct sdp_listener *l, struct sockaddr_storage *ss,
			socklen_t *len);
int sdp__shm_listen(struct sdp_listener *l, int backlog);
int sdp__shm_listener_fd(struct sdp_listener *l);
int sdp__shm_get_request(struct sdp_listener *l, struct sdp_conn_req **req,
			 void *priv, uint32_t *priv_len);
void sdp__shm_reject(struct sdp_conn_req *req);
void sdp__shm_close_listener(struct sdp_listener *l);
int sdp__shm_pending_scan(struct shm_listener *l, struct sdp_conn_req **out,
			  void *priv, uint32_t *priv_len);
/* Hold a connection taken from a shared listener's queue until its Hello
 * comes (pending_scan), at most `max` of them: the oldest goes first. */
/* Add the pending connections to epoll set `ep` (readable for a Hello). */
void sdp__shm_pending_watch(struct shm_listener *l, int ep);
void sdp__shm_pending_park(struct shm_listener *l, int sock, bool retried,
			   int max);
struct shm_hello {			/* what a CM message said beside the
					 * SDP one */
	struct shm_addr dst;		/* Hello: the address dialled */
	uint64_t base;			/* the sender's segment's VA */
	uint64_t pair;			/* the listener's kept segment named */
	uint64_t pair_client;		/* Hello: the client's, passed no memfd */
	uint64_t alt_pair[SHM_KEEP_ALTS];	/* Hello: more pairs kept, with */
	uint64_t alt_client[SHM_KEEP_ALTS];	/* other processes (0: none) */
	int memfd;			/* the sender's segment, or -1 */
	struct ucred cred;		/* stamped by the kernel */
};
/* 0 if a Hello passes a segment or names both of a kept pair. */
int sdp__shm_hello_check(uint16_t type, const struct shm_hello *h);
int sdp__shm_request_build(struct shm_listener *l, int sock,
			   const struct shm_hello *h,
			   struct shm_conn_req **out);

/* shm_share.c */
int sdp__shm_share_listener(struct sdp_listener *l, int watch_ep);
int sdp__shm_take_request(struct sdp_listener *l, struct sdp_conn_req **req,
			  void *priv, uint32_t *priv_len);

/* shm_cm.c */
struct shm_wire_msg;
int sdp__shm_send_msg(int sock, uint16_t type, const struct shm_qp *qp,
		      const struct shm_addr *dst, const void *priv,
		      uint32_t priv_len);
int sdp__shm_recv_msg(int sock, uint16_t *type, void *priv, uint32_t *priv_len,
		      struct shm_hello *h, uint8_t *flags);
int sdp__shm_map_peer(int fd, struct shm_seg *seg);
void sdp__shm_seg_unmap(struct shm_seg *seg);
int sdp__shm_connect(struct sdp_qp *qp, struct sdp_listener *local,
		     const struct sockaddr *dst, socklen_t len,
		     const void *priv, uint32_t priv_len);
int sdp__shm_accept(struct sdp_qp *qp, const void *priv, uint32_t priv_len);
int sdp__shm_get_event(struct sdp_qp *qp, struct sdp_cm_event *ev);

/* RETRY: a Hello that passed no memfd named a pair this process does not
 * keep; the client sends it again with one. */
enum { SHM_MSG_HELLO = 1, SHM_MSG_ACCEPT = 2, SHM_MSG_REJECT = 3,
       SHM_MSG_RETRY = 4 };

/* shm_qp.c */
/* `r`: the request whose kept segment to use, if any (else a new one). */
int sdp__shm_qp_alloc(const struct sdp_qp_attr *attr, struct shm_conn_req *r,
		      const struct shm_addr *dst, struct shm_qp **out);
/* My segment as a new file mapped in its place, the receives posted
 * written into it again from our own records: for a Hello sent again.
 * `was`: the one replaced, still mapped there (else unmapped). */
int sdp__shm_seg_renew(struct shm_qp *qp, struct shm_seg *was);

/* shm_keep.c: a listener's segment kept for the next connection of the
 * same client process.  Pairs kept per role (client, listener): a pair
 * is whole again only once the peer's QP on it is gone, which a server's
 * progress thread may finish some milliseconds after the close, so a
 * burst of connections (8 clients at 11,000 a second) keeps dozens in
 * flight; with 16, from 4% to most of them, run to run, made and
 * unmapped new segments. */
#define SHM_KEEP_PER_ROLE 64
/* A pair kept from a connection that received more than this gives its
 * receive region's pages back (an idle pool stays small); one that
 * received less keeps them, so the next connection faults none in. */
#define SHM_KEEP_RESIDENT (64u * 1024)
/* Client, at create_qp: both segments of the pair kept from a connection
 * to `dst`, if the listener keeps its own too, as qp->me (reset) and
 * kept_peer, offer, offer_mine; true if so. */
bool sdp__shm_keep_take_pair(struct shm_qp *qp, const struct shm_addr *dst,
			     uint32_t depth);
/* Client, at connect without a pair: name the listener's segment kept
 * from the last connection to `dst` in the Hello (offer, kept_peer). */
void sdp__shm_keep_offer(struct shm_qp *qp, const struct shm_addr *dst);
/* Client: the listener answered RETRY to a pair named; where a quarter
 * are, none is named for a while (a listener that processes share). */
void sdp__shm_keep_missed(const struct shm_addr *dst);
/* Acceptor: the segment a Hello offers, if this process keeps it for the
 * sender and the sender is done with it: into r->kept_*, and with
 * h->pair_client the client's segment into r->peer; true if so. */
bool sdp__shm_keep_take(struct shm_conn_req *r, const struct shm_hello *h);
/* Bring a kept segment back to a new one's state. */
void sdp__shm_keep_reset(struct shm_seg *me, bool mr_used);
/* A QP that ends: keep its two segments for its peer process. */
void sdp__shm_keep_park(struct shm_qp *qp);
/* Client: the pairs in qp->alt go back to the pool, once the answer shows
 * that no process of the listener took them (`untaken`); else they are
 * given up. */
void sdp__shm_keep_alts_return(struct shm_qp *qp, bool untaken);
/* The receives posted, from our records, into `seg` (one of ours). */
void sdp__shm_seg_write_recvs(const struct shm_qp *qp, struct shm_seg *seg);
/* Client: the Accept took alt `a`: its segment takes the place of ours at
 * the same address (shm_qp.c). */
int sdp__shm_seg_switch(struct shm_qp *qp, struct shm_seg *to,
			struct shm_seg *was);
/* Tests: segments this process made (memfd files). */
unsigned long sdp__shm_segs_made(void);
/* Tests: segments kept, and taken again. */
void sdp__shm_keep_counts(unsigned long *kept, unsigned long *taken);
void sdp__shm_set_error(struct shm_qp *qp);
void sdp__shm_lcq_push(struct shm_qp *qp, uint64_t wr_id,
		       enum sdp_wc_opcode op, enum sdp_wc_status st,
		       uint32_t byte_len);
bool sdp__shm_local_sge_ok(struct shm_qp *qp, const struct sdp_sge *sge,
			   unsigned access);

/* shm_wait.c */
int sdp__shm_futex_wake(_Atomic uint32_t *word);
/* Sleep while *word == val, at most `ms` (a word in a shared segment:
 * not a private futex; no pthread_cancel point). */
void sdp__shm_futex_wait(_Atomic uint32_t *word, uint32_t val, uint64_t ms);
/* News for the owner of segment `c`: `app_fd` >= 0 (the owner's readiness
 * fd, for a solicited SEND) wakes its application directly when armed and
 * the owner has not yet taken all `published` completions; `words` is the
 * owner's wake page mapped here, or NULL.  An owner armed APP_ALONE needs
 * nothing for any message but its sleepers woken. */
/* The same for a solicited message when we cannot write the peer's
 * readiness byte (peer_app_fd_lost): ring its progress doorbell whenever
 * its application waits for one. */
void sdp__shm_wake_owner_nofd(struct shm_ctrl *c, int sock);
void sdp__shm_wake_owner_seg(struct shm_ctrl *c, int sock, int app_fd,
			     const _Atomic uint64_t *words, uint32_t published);
/* shm_appwake.c: read doorbells and a shared app fd off the unix socket;
 * wake the owner of `c` through `app_fd` if armed: 1 done, 0 not (the
 * caller rings the doorbell if armed), -1 `app_fd` is not a descriptor of
 * this process (the caller rings the doorbell). */
bool sdp__shm_read_doorbells(struct shm_qp *qp);
int sdp__shm_app_word(struct sdp_qp *qp, int handle);
/* A waker leaves WRITING for `v` (shm_appwake.c). */
void sdp__shm_app_written(struct shm_ctrl *c, uint32_t v);
int sdp__shm_app_wake(struct shm_ctrl *c, int app_fd,
		       const _Atomic uint64_t *words, uint32_t published);
void sdp__shm_wake_self(struct shm_qp *qp, bool force_event);
bool sdp__shm_check_peer(struct shm_qp *qp, bool ask_sock);
void sdp__shm_sock_unwatch(struct shm_qp *qp);
uint32_t sdp__shm_wait_seq(struct sdp_qp *qp);
int sdp__shm_wait(struct sdp_qp *qp, uint32_t seq, int timeout_ms);
void sdp__shm_kick(struct sdp_qp *qp);
int sdp__shm_event_fd(struct sdp_qp *qp);
/* The rendezvous socket, while the answer to our Hello is awaited. */
int sdp__shm_answer_fd(struct sdp_qp *qp);
/* `sock` is the QP's event descriptor (on) or no longer (off). */
void sdp__shm_sock_watch(struct shm_qp *qp);
int sdp__shm_share_prepare(struct sdp_qp *qp);
int sdp__shm_req_notify(struct sdp_qp *qp);
void sdp__shm_ack_events(struct sdp_qp *qp);
int sdp__shm_share_app_fd(struct sdp_qp *qp, int fd);
int sdp__shm_app_arm(struct sdp_qp *qp, int on);
const _Atomic uint32_t *sdp__shm_app_arrivals(struct sdp_qp *qp);
void sdp__shm_app_sleep_id(struct sdp_qp *qp, uint64_t id);
void sdp__shm_drop_peer_app_fd(struct sdp_qp *qp);
/* Take the readiness descriptor the peer offered by number, once, before
 * the first byte it may need (shm_appwake.c). */
void sdp__shm_take_offer(struct shm_qp *qp);
/* shm_handover.c: the QP changes process within a fork family. */
ssize_t sdp__shm_export_qp(struct sdp_qp *qp, void *buf, size_t cap);
int sdp__shm_import_qp(struct sdp_qp *qp, const void *buf, size_t len);
void sdp__shm_summon(struct sdp_qp *qp);
uint64_t sdp__shm_now_ms(void);

/* shm_rdma.c */
void sdp__shm_rdma_probe(struct shm_qp *qp);
/* A pidfd of `pid`, shared per peer process while it lives, or -1. */
int sdp__shm_peer_pidfd_get(pid_t pid);
/* Release the qp->peer_pidfd the probe took (shared per peer process). */
void sdp__shm_peer_pidfd_put(int fd);
/* Tests: pidfds opened so far. */
unsigned long sdp__shm_peer_pidfd_opened(void);
/* Tests: how often this process read its own ids for an offer
 * (shm_appwake.c: at most once a second). */
unsigned long sdp__shm_own_ids_read(void);
int sdp__shm_reg_mr(struct sdp_qp *qp, void *addr, size_t len,
		    unsigned access, struct sdp_mr **out);
int sdp__shm_dereg_mr(struct sdp_qp *qp, struct sdp_mr *mr);
enum sdp_wc_status sdp__shm_rdma(struct shm_qp *qp,
				 const struct sdp_send_wr *wr, uint64_t total);

/* shm_creds.c: process_vm_writev (write) or _readv to qp->peer_pid, with
 * no more privilege than the peer's credentials give; bytes or -errno. */
ssize_t sdp__shm_vm_rw(const struct shm_qp *qp, bool write,
		       const struct iovec *local, unsigned long nl,
		       const struct iovec *remote, unsigned long nr);

#endif /* SDP_TRANSPORT_SHM_H */
