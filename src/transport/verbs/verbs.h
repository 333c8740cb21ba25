/* SPDX-License-Identifier: MIT */
/*
 * verbs.h — internals of the "verbs" transport (rdma-core: libibverbs +
 * librdmacm; InfiniBand, RoCE, iWARP, soft-RoCE).
 *
 * Shape:
 *  - One process-wide CM event channel.  One completion channel, one PD and
 *    one shared CQ per device, created on first use; every QP of the device
 *    uses that CQ for sends and receives (no CQ per connection).
 *  - One internal event thread sleeps in epoll on the CM channel and on every
 *    device's completion channel.  It runs the CM state machine (resolve
 *    address -> route -> create QP -> connect; requests -> listener queues)
 *    and drains the shared CQ when it fires.
 *  - Whoever drains a shared CQ (that thread or any poll_cq caller) moves each
 *    completion into its QP's private software CQ (the hardware wr_id names
 *    the QP: table slot + generation), then bumps the QP's event sequence
 *    word, wakes futex waiters, and writes the QP's eventfd if it was armed.
 *  - A QP's receive region and send ring are registered once and outlive
 *    it: the next QP takes them from a small pool (verbs_bufs.c).
 *  - The engine posts every SEND "inline" from unregistered memory.  Data that
 *    fits the device's max_inline_data goes with IBV_SEND_INLINE; anything
 *    larger is copied into a per-QP registered send ring (freed in order as
 *    send completions come back, all sends being signalled in hardware).
 *
 * Device contexts: the transport opens its own ibv_context per device
 * (ibv_open_device) and creates every PD, CQ, MR and QP there; librdmacm's
 * id->verbs only names the device.  QPs are therefore not rdma_create_qp()'d
 * but moved through INIT/RTR/RTS here (rdma_init_qp_attr gives the CM's
 * attributes), the active side answering CONNECT_RESPONSE with
 * rdma_establish().  Reason: fork().  librdmacm keeps one context per device
 * for the life of the process and a fork() child inherits it, but the kernel
 * refuses write()-based uverbs/ucma commands on descriptors opened under the
 * parent's credentials (EACCES).  With contexts of our own, a child simply
 * forgets them and opens fresh ones (see "fork" in verbs_dev.c).
 *
 * Files: verbs_dev.c (global state, devices, event thread, CQ dispatch,
 * waiting), verbs_cm.c (port space and connection management),
 * verbs_qp.c (QP life cycle, data path, memory registration).
 */
#ifndef SDP_TRANSPORT_VERBS_H
#define SDP_TRANSPORT_VERBS_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "transport/transport.h"

#define VB_CQ_INIT	4096		/* shared CQ entries at creation */
#define VB_RESOLVE_MS	2000		/* rdma_resolve_addr / _route */
/* Address resolution is tried first with this timeout, doubled on each
 * timeout until VB_RESOLVE_MS in all.  Why: when the peer's link-layer
 * address is not cached, the kernel (ib_addr) sends the ARP/ND request and
 * retries only when its neighbour-update notification comes or the
 * timeout expires; an answer that arrives before the request is queued
 * (veth, a fast LAN) is missed, and the connect waited the whole 2 s every
 * time, where TCP takes milliseconds.  A short first timeout finds the
 * entry at the retry. */
#define VB_RESOLVE_FIRST_MS	25
/* Transport retries.  Not 7: soft-RoCE (rxe) treats 7 like the RNR
 * "infinite" value and never gives up on a dead peer. */
#define VB_RETRY_COUNT	6
/* The settings (base/config.c, defaults there):
 * - SDP_VERBS_ACK_TIMEOUT, the local ACK timeout exponent, 16: 4.096 us *
 *   2^16 = 268 ms per try, so a peer that stopped answering (link down,
 *   host gone) fails the QP after about (VB_RETRY_COUNT + 1) * 268 ms =
 *   1.9 s instead of the path-derived default (soft-RoCE: 2^19 * 4.096 us
 *   = 2.1 s per try, ~15 s).  Long enough for an emulated host's
 *   scheduling hiccups.
 * - SDP_VERBS_SPIN_US, 200: wait() polls the device CQ this long before
 *   sleeping, but only on a QP that had a completion within
 *   VB_SPIN_RECENT_MS (an idle process never spins); 0 switches it off.
 * - SDP_VERBS_RDMA_SPIN_US, 20000: wait_rdma() polls (yielding) for news an
 *   RDMA in flight brings for at most this long per transfer, from three
 *   quarters of its expected time (or its start), before sleeping; 0
 *   switches it off.
 * - SDP_VERBS_REARM_MS, 10: after an application thread polled the shared
 *   CQ, it stays unarmed this long (verbs_dev.c, "Arming the shared CQ"):
 *   that thread will likely poll it again.  Longer than a scheduler time
 *   slice, so that a poller that was preempted for one does not find the
 *   CQ armed again (1 ms: soft-RoCE streams ran at 0.24-0.38 Gbit/s,
 *   bimodal; 10 ms: 0.44-0.46); 0 re-arms at once. */
#define VB_RD_ATOM	4		/* RDMA READs in flight (OFED: 4) */
#define VB_HELLO_WIRE	32		/* Hello bytes carried in the REQ */
#define VB_HELLO_SIZE	92		/* the whole Hello (BSDH + HH) */
#define VB_MAX_EVENTS	4		/* queued CM events per QP */
#define VB_SEND_WAIT_MS	2000		/* post_send waiting for SQ room */
#define VB_SPIN_RECENT_MS 100

/* Hardware wr_id: | slot:20 | gen:12 | recv:1 | index:31 | */
#define VB_WRID(slot, gen, recv, idx) \
	(((uint64_t)(slot) << 44) | ((uint64_t)((gen) & 0xfff) << 32) | \
	 ((uint64_t)(recv) << 31) | ((idx) & 0x7fffffffu))
#define VB_WRID_SLOT(w)	((uint32_t)((w) >> 44))
#define VB_WRID_GEN(w)	((uint32_t)(((w) >> 32) & 0xfff))
#define VB_WRID_RECV(w)	((uint32_t)(((w) >> 31) & 1))
#define VB_WRID_IDX(w)	((uint32_t)((w) & 0x7fffffffu))

struct vb_qp;

struct vb_dev {
	struct vb_dev *next;
	struct ibv_device *device;	/* key: same pointer as id->verbs->device */
	struct ibv_context *ctx;	/* ours (ibv_open_device), not librdmacm's */
	struct rdma_cm_id *anchor;	/* keeps librdmacm's device PD alive */
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;		/* shared by every QP of the device */
	uint32_t max_inline;		/* bytes IBV_SEND_INLINE takes */
	uint64_t down_since_ms;		/* port down (async event), 0: up */
	int max_rd_atom;
	int max_cqe;

	pthread_mutex_t lock;		/* CQ polling, table, cq_used */
	int cq_cap, cq_used;		/* CQ entries, reserved by QPs */
	/* The CQ will raise a completion event (written under lock). */
	_Atomic bool cq_armed;
	_Atomic uint32_t spinners;	/* threads polling it in wait() */
	_Atomic uint32_t sleepers;	/* threads asleep in wait() */
	/* When an application thread last polled the CQ (a spin in wait(),
	 * a poll_cq; coarse clock): it will likely poll again. */
	_Atomic uint64_t polled_ns;
	struct vb_qp **tab;		/* slot -> QP (NULL = free) */
	uint32_t *tab_gen;
	uint32_t ntab;
};

enum vb_state {
	VB_IDLE,		/* created, not connected */
	VB_RESOLVING,		/* connect(): address/route resolution */
	VB_CONNECTING,		/* REQ sent */
	VB_PASSIVE,		/* from a request, accept() not yet called */
	VB_ESTABLISHED,
	VB_FAILED,		/* connect failed: no DISCONNECTED later */
	VB_DISCONNECTED,	/* QP in error */
};

struct vb_swr {				/* a posted send, in posting order */
	uint64_t wr_id;
	uint64_t ring_end;		/* send-ring head after this WR */
	uint8_t signaled;
	uint8_t opcode;			/* enum sdp_wc_opcode */
};

struct vb_mr {
	struct sdp_mr pub;
	struct ibv_mr *mr;
	struct vb_mr *next;
};

struct vb_qp {
	struct sdp_tp_object obj;
	struct sdp_qp_attr attr;
	struct rdma_cm_id *id;
	struct ibv_qp *hw;		/* on dev->ctx; NULL until bound */
	struct vb_dev *dev;		/* NULL until the route is known */
	uint32_t epoch;			/* sdp__vb.epoch at creation (fork) */
	bool orphaned;			/* inherited: flushed in this process */
	uint32_t slot, gen;		/* dev->tab entry */
	_Atomic(enum vb_state) state;

	pthread_mutex_t lock;		/* everything below */
	struct sdp_wc *scq;		/* software CQ [scq_cap] */
	uint32_t scq_cap, scq_head, scq_count;
	struct vb_swr *swr;		/* [sq_depth] */
	uint32_t sq_depth, sq_head, sq_tail;
	uint64_t *rwr;			/* [rq_depth] engine wr_ids */
	uint32_t *rlen;			/* [rq_depth] posted lengths */
	uint64_t *roff;			/* [rq_depth] region offsets */
	uint32_t rq_depth, rq_head, rq_tail, rq_hw; /* rq_hw: handed to HW */
	uint8_t *ring;			/* registered send ring */
	uint64_t ring_size, ring_head, ring_tail;
	struct ibv_mr *ring_mr;
	uint8_t *region;		/* receive region */
	struct ibv_mr *region_mr;
	struct vb_bufs *bufs;		/* owns region and ring (verbs_bufs.c) */
	struct sdp_mr recv_mr;
	struct vb_mr *mrs;
	struct sdp_cm_event ev[VB_MAX_EVENTS];
	uint32_t ev_head, ev_count;
	uint32_t max_inline;		/* IBV_SEND_INLINE limit of the QP */
	uint8_t hello[VB_HELLO_WIRE];	/* connect(): REQ private data */
	struct sdp_tp_addr addr;
	struct sockaddr_storage dst;	/* connect(): address being resolved */
	uint64_t resolve_dl_ms;		/* end of the resolution budget */
	uint32_t resolve_ms;		/* timeout of the current try */

	_Atomic uint32_t seq;		/* futex: news for this QP */
	_Atomic uint32_t waiters;	/* asleep in wait() */
	_Atomic uint32_t spinners;	/* polling in wait() */
	_Atomic uint32_t armed;		/* req_notify() wants an evfd write */
	_Atomic uint64_t news_ns;	/* last completion, coarse clock */
	int evfd;
};

struct vb_conn_req {
	struct vb_conn_req *next;
	uint32_t epoch;
	struct rdma_cm_id *id;
	uint32_t priv_len;
	uint8_t priv[SDP_CM_PRIV_MAX];
};

struct vb_listener {
	struct sdp_tp_object obj;
	struct rdma_cm_id *id;
	uint32_t epoch;
	int evfd;			/* listener_fd: readable = requests */
	pthread_mutex_t lock;
	struct vb_conn_req *head, *tail;
	int count, backlog;
	bool listening;
};

#define VB_QP(q) ((struct vb_qp *)(q))
#define VB_L(l) ((struct vb_listener *)(l))

extern const struct sdp_transport_ops sdp__verbs_ops;

/* verbs_dev.c */
struct vb_global {
	/* Bumped in every fork() child: objects of an older epoch were
	 * inherited and belong to the parent's kernel resources. */
	uint32_t epoch;
	int state;			/* 0: not yet, 1: up, <0: failed */
	uint8_t ack_timeout;		/* QP local ACK timeout exponent */
	uint32_t spin_ns;		/* wait(): bounded CQ polling */
	uint64_t rdma_spin_ns;		/* wait_rdma(): SDP_VERBS_RDMA_SPIN_US */
	uint64_t rearm_ns;		/* SDP_VERBS_REARM_MS */
	_Atomic uint32_t unarmed;	/* devices whose CQ is not armed */
	/* Application threads asleep in poll/select/epoll (app_sleep). */
	_Atomic uint32_t app_sleepers;
	pthread_mutex_t init_lock;
	struct rdma_event_channel *cm;
	int epfd;
	int trim_fd;			/* eventfd: an idle buffer set to age */
	int ndevices;			/* ibv devices at start-up */
	int err;			/* why unavailable (negative errno) */
	pthread_mutex_t lock;		/* device list */
	pthread_mutex_t cm_lock;	/* held by the event thread per event */
	struct vb_dev *devs;
	pthread_t thread;
};
extern struct vb_global sdp__vb;
int sdp__verbs_init(void);
int sdp__verbs_dev_get(struct rdma_cm_id *id, struct vb_dev **out);
/* True for an object created before the last fork() (in another process). */
static inline bool sdp__verbs_inherited(uint32_t epoch)
{
	return epoch != __atomic_load_n(&sdp__vb.epoch, __ATOMIC_RELAXED);
}
void sdp__verbs_orphan(struct vb_qp *qp);
int sdp__verbs_dev_attach(struct vb_dev *d, struct vb_qp *qp, int entries);
void sdp__verbs_dev_detach(struct vb_dev *d, struct vb_qp *qp, int entries);
void sdp__verbs_dev_drain(struct vb_dev *d);
void sdp__verbs_dev_drain_for(struct vb_qp *qp);
bool sdp__verbs_dev_try_drain(struct vb_dev *d);
uint64_t sdp__verbs_now_ns(void);
uint64_t sdp__verbs_coarse_ns(void);
void sdp__verbs_bump(struct vb_qp *qp);
void sdp__verbs_bump_completion(struct vb_qp *qp);
void sdp__verbs_ring_progress(struct vb_qp *qp);
void sdp__verbs_push_event(struct vb_qp *qp, enum sdp_cm_event_type type,
			   int err, const void *priv, uint32_t priv_len);
uint32_t sdp__verbs_wait_seq(struct sdp_qp *qp);
int sdp__verbs_wait(struct sdp_qp *qp, uint32_t seq, int timeout_ms);
int sdp__verbs_wait_rdma(struct sdp_qp *qp, uint32_t seq, int timeout_ms,
			 uint64_t since_ns, uint64_t due_ns);
void sdp__verbs_kick(struct sdp_qp *qp);
int sdp__verbs_event_fd(struct sdp_qp *qp);
int sdp__verbs_req_notify(struct sdp_qp *qp);
void sdp__verbs_ack_events(struct sdp_qp *qp);
void sdp__verbs_cm_event(struct rdma_cm_event *e);

/* verbs_cm.c */
int sdp__verbs_bind(const struct sockaddr *addr, socklen_t len,
		    struct sdp_listener **out);
int sdp__verbs_bound_addr(struct sdp_listener *l, struct sockaddr_storage *ss,
			  socklen_t *len);
int sdp__verbs_listen(struct sdp_listener *l, int backlog);
int sdp__verbs_listener_fd(struct sdp_listener *l);
int sdp__verbs_get_request(struct sdp_listener *l, struct sdp_conn_req **req,
			   void *priv, uint32_t *priv_len);
void sdp__verbs_reject(struct sdp_conn_req *req);
void sdp__verbs_close_listener(struct sdp_listener *l);
int sdp__verbs_connect(struct sdp_qp *qp, struct sdp_listener *local,
		       const struct sockaddr *dst, socklen_t len,
		       const void *priv, uint32_t priv_len);
int sdp__verbs_accept(struct sdp_qp *qp, const void *priv, uint32_t priv_len);
int sdp__verbs_get_event(struct sdp_qp *qp, struct sdp_cm_event *ev);
int sdp__verbs_addresses(struct sdp_qp *qp, struct sdp_tp_addr *addr);
int sdp__verbs_disconnect(struct sdp_qp *qp);

/* verbs_bufs.c */
int sdp__verbs_bufs_take(struct vb_qp *qp, size_t region_size);
int sdp__verbs_bufs_bind(struct vb_qp *qp, uint64_t ring_size);
void sdp__verbs_bufs_put(struct vb_qp *qp);
void sdp__verbs_bufs_orphan(struct vb_qp *qp);
void sdp__verbs_bufs_forget(void);
int sdp__verbs_bufs_trim(void);
/* verbs_dev.c: have the event thread look at the idle sets' ages. */
void sdp__verbs_trim_kick(void);

/* verbs_qp.c */
int sdp__verbs_create_qp(const struct sdp_qp_attr *attr, struct sdp_qp **out);
int sdp__verbs_create_qp_from_req(struct sdp_conn_req *req,
				  const struct sdp_qp_attr *attr,
				  struct sdp_qp **out);
int sdp__verbs_qp_bind_dev(struct vb_qp *qp);
void sdp__verbs_destroy_qp(struct sdp_qp *qp);
void sdp__verbs_query_caps(struct sdp_qp *qp, struct sdp_tp_caps *caps);
struct sdp_mr *sdp__verbs_recv_region(struct sdp_qp *qp);
int sdp__verbs_reg_mr(struct sdp_qp *qp, void *addr, size_t len,
		      unsigned access, struct sdp_mr **out);
int sdp__verbs_dereg_mr(struct sdp_qp *qp, struct sdp_mr *mr);
int sdp__verbs_post_send(struct sdp_qp *qp, const struct sdp_send_wr *wr);
int sdp__verbs_post_recv(struct sdp_qp *qp, const struct sdp_recv_wr *wr);
int sdp__verbs_poll_cq(struct sdp_qp *qp, struct sdp_wc *wc, int max);
void sdp__verbs_dispatch_wc(struct vb_qp *qp, const struct ibv_wc *wc);
void sdp__verbs_qp_set_error(struct vb_qp *qp);
void sdp__verbs_scq_push(struct vb_qp *qp, const struct sdp_wc *wc);
int sdp__verbs_qp_rtr_rts(struct vb_qp *qp, int resp_res, int init_depth);

#endif /* SDP_TRANSPORT_VERBS_H */
