/* SPDX-License-Identifier: MIT */
/*
 * conn.h — one SDP connection: state machine, credits, BCopy send and receive
 * queues, out-of-band data, close.  Transport-independent: it talks to a
 * struct sdp_qp through transport.h only.
 *
 * Locking: conn->lock protects everything below it.  Blocking waits drop the
 * lock and sleep in the transport (sdp_tp wait), so one thread may read while
 * another writes.  Connections are freed only by the progress thread.
 */
#ifndef SDP_CONN_H
#define SDP_CONN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "engine/readiness.h"
#include "transport/transport.h"
#include "wire/wire.h"

enum sdp_state {
	SDP_ST_CLOSED = 0,	/* not connected (yet, or any more) */
	SDP_ST_CONNECTING,	/* Hello sent, waiting for HelloAck */
	SDP_ST_ESTABLISHED,
	SDP_ST_FIN_WAIT,	/* we shut down writing; peer still sending */
	SDP_ST_CLOSE_WAIT,	/* peer sent DisConn; we may still send */
	SDP_ST_LAST_ACK,	/* both shut down, waiting for our DisConn to go */
	SDP_ST_TIME_WAIT,	/* both DisConns exchanged: QP can go */
	SDP_ST_RESET,		/* aborted or failed (conn->err says why) */
	SDP_ST_COUNT
};

const char *sdp_state_name(enum sdp_state st);

/* Why a connection ended abnormally: shown by sdpstat, counted in stats. */
#define SDP_REASON_MAP(X)                                                  \
	X(NONE, "none")                                                    \
	X(PEER_ABORT, "peer aborted the connection")                       \
	X(PEER_GONE, "peer process or QP went away")                       \
	X(PROTOCOL, "peer violated the SDP protocol")                      \
	X(TRANSPORT, "transport error")                                    \
	X(LOCAL_ABORT, "aborted locally (SO_LINGER 0)")                    \
	X(CLOSED_UNREAD, "closed with data unread (a reset, as TCP's)")    \
	X(CLOSED_CONNECTING, "closed while connecting")                    \
	X(DATA_AFTER_CLOSE, "data arrived after close (a reset, as TCP's)") \
	X(TIMEOUT, "close timed out")                                      \
	X(REFUSED, "no SDP listener at the destination")                   \
	X(OWNER_GONE, "the process that drove it died (fork)")             \
	X(LISTENER_REFUSED, "the SDP listener refused it (backlog full or " \
	  "out of descriptors)")                                           \
	X(CONNECT_TIMEOUT, "the SDP listener did not answer in time "      \
	  "(SDP_CONNECT_TIMEOUT_MS)")                                      \
	X(RELAY_UNREAD, "the relayed program closed it with data unread")  \
	X(RELAY_ENDED, "the process relaying it exited with data "         \
	  "undelivered, or for an exec'd program")

enum sdp_reason {
#define X(name, text) SDP_REASON_##name,
	SDP_REASON_MAP(X)
#undef X
};

const char *sdp_reason_str(enum sdp_reason r);
/* This end chose to reset it (the peer is told with AbortConn). */
int sdp_reason_is_local_abort(enum sdp_reason r);

/* A received Data message still (partly) unread, in its private buffer. */
struct sdp_relay;

struct sdp_rx_seg {
	uint32_t buf;		/* receive buffer index */
	uint32_t off;		/* first unread payload byte within the buffer */
	uint32_t len;		/* unread bytes */
};

struct sdp_conn_stats {
	uint64_t bytes_sent, bytes_rcvd;
	uint64_t msgs_sent, msgs_rcvd;
	uint64_t credit_updates_sent;
	uint64_t credit_stalls;		/* send found no credit */
	uint64_t nagle_holds;
	/* ZCopy (zcopy.c); SDP_ZCOPY_STATS reports these. */
	uint64_t zc_tx_adverts;		/* SrcAvail sent */
	uint64_t zc_tx_bytes;		/* bytes the peer RDMA-read from us */
	uint64_t zc_tx_declined;	/* SendSm ended one of our SrcAvails */
	uint64_t zc_tx_cancels;		/* SrcAvailCancel sent */
	uint64_t zc_rx_adverts;		/* peer SrcAvails we accepted to read */
	uint64_t zc_rx_bytes;		/* bytes we RDMA-read into app buffers */
	uint64_t zc_rx_declined;	/* SendSm we sent (declines, cancel acks) */
	uint64_t zc_tx_peak;		/* most SrcAvails outstanding at once */
	uint64_t zc_rx_peak;		/* most peer SrcAvails held at once */
	/* Write ZCopy (zcopy_sink.c). */
	uint64_t zc_wr_sink_adverts;	/* SinkAvail sent (our recv buffers) */
	uint64_t zc_wr_rx_bytes;	/* bytes the peer RDMA-wrote into them */
	uint64_t zc_wr_sink_cancels;	/* SinkAvailCancel sent */
	uint64_t zc_wr_sink_unused;	/* our SinkAvails that ended empty */
	uint64_t zc_wr_src_adverts;	/* peer SinkAvails accepted */
	uint64_t zc_wr_tx_bytes;	/* bytes we RDMA-wrote into them */
	uint64_t zc_wr_src_unused;	/* peer SinkAvails dropped unused
					 * (stale, superseded by BCopy, cancel) */
	uint64_t zc_mode_changes;	/* ModeChange sent */
};

/* Largest number of ZCopy advertisements we accept outstanding towards us
 * (our MaxAdverts: SrcAvails, plus at most one SinkAvail, annex 5.1), and
 * the most SrcAvails one send() keeps outstanding. */
#define SDP_ZC_WINDOW 8

/* One of our SrcAvails. */
struct sdp_zc_adv {
	uint32_t mseq;			/* the SrcAvail's MSeq */
	uint32_t len;			/* advertised bytes (inline included) */
	uint32_t inl;			/* bytes carried inline */
	uint32_t rd_done;		/* RDMA-read bytes reported so far */
	unsigned ended:1;		/* all read, or a SendSm covered it */
	unsigned declined:1;		/* ended by SendSm */
	struct sdp_mr *mr;
};

/* Our outstanding SrcAvails (data source side): one in Combined mode, up
 * to the window in Pipelined mode, all of one send(), in stream order.
 * The sink consumes them in that order, so the ended ones are always a
 * prefix of the ring.  Owned by the thread blocked in send(); rx.c and
 * zcopy_src.c update the counts. */
struct sdp_zc_tx {
	unsigned active:1;		/* a send() owns advertisements */
	unsigned declined:1;		/* a SendSm ended one: post no more */
	unsigned cancel_want:1;		/* SrcAvailCancel to post */
	unsigned cancel_sent:1;
	uint32_t head, n;		/* adv[head..head+n): posted, kept */
	uint32_t live;			/* the last `live` of them not ended */
	uint64_t progress_ns;		/* last sign of the sink's progress */
	struct sdp_zc_adv adv[SDP_ZC_WINDOW];
};

/* Our SinkAvail (data sink side, Write ZCopy): at most one, owned by the
 * thread blocked in recv(); rx.c/zcopy_sink.c end it. */
struct sdp_zc_snk {
	unsigned active:1;		/* advertised, buffer registered */
	unsigned ended:1;		/* the source is done with it */
	unsigned cancel_want:1;		/* SinkAvailCancel to post */
	unsigned cancel_sent:1;
	uint32_t mseq;			/* the SinkAvail's MSeq */
	uint32_t len;			/* advertised bytes */
	uint32_t written;		/* bytes RdmaWrCompl reported */
	struct sdp_mr *mr;
};

/* Further SinkAvails of the same recv() (a readv of several large
 * elements), behind zc_snk, filled in that order. */
struct sdp_zc_snk_more {
	uint32_t mseq;
	uint32_t len;
	uint32_t written;		/* bytes RdmaWrCompl reported */
	struct sdp_mr *mr;
};

/* The peer's SinkAvail we may RDMA-write into (data source side). */
struct sdp_zc_snk_peer {
	unsigned active:1;		/* accepted, not yet used or dropped */
	unsigned writing:1;		/* an RDMA WRITE into it is in flight */
	uint32_t mseq;
	uint32_t rkey;
	uint64_t vaddr;
	uint32_t len;
};

/* The peer's SrcAvail we read now (data sink side): the oldest one held. */
struct sdp_zc_rx {
	unsigned active:1;
	unsigned reading:1;		/* an RDMA READ is in flight */
	unsigned cancel_rcvd:1;		/* SrcAvailCancel came while reading */
	uint32_t mseq;
	uint32_t rkey;
	uint64_t vaddr;
	uint32_t len;			/* advertised bytes (inline included) */
	uint32_t off;			/* bytes of it consumed (inline + read) */
	uint64_t decline_ns;		/* no reader came by then: decline */
};

/* Further SrcAvails held behind it (Pipelined mode), in stream order. */
struct sdp_zc_rx_next {
	uint32_t mseq;
	uint32_t rkey;
	uint64_t vaddr;
	uint32_t len;
};

struct sdp_conn {
	pthread_mutex_t lock;
	atomic_int refs;		/* socket + progress references */
	enum sdp_state state;
	int err;			/* sticky error for I/O (-ECONNRESET...) */
	int so_error;			/* pending SO_ERROR (read clears) */
	enum sdp_reason reason;
	uint32_t id;			/* for logs and stats */

	struct sdp_qp *qp;
	struct sdp_tp_caps caps;
	struct sdp_mr *rmr;		/* receive region (nbufs * buf_size) */
	struct sdp_tp_addr addr;

	/* ---- receive side (our private buffers) ---- */
	uint32_t nbufs;			/* receive buffers */
	uint32_t buf_size;		/* bytes each, BSDH included */
	uint32_t posted;		/* currently posted receives */
	struct sdp_rx_seg *rxq;		/* ring of nbufs unread segments */
	uint32_t rxq_head, rxq_count;
	uint64_t rx_bytes;		/* unread payload bytes queued */
	uint32_t rx_mseq;		/* mseq of the last message received */
	uint16_t adv_bufs;		/* Bufs in our last header */
	uint32_t adv_mseq_ack;		/* MSeqAck in our last header */
	uint64_t rx_off;		/* stream bytes consumed by the app */
	uint64_t rx_end;		/* stream bytes queued in total */
	unsigned disconn_rcvd:1;	/* peer's DisConn processed (EOF) */
	unsigned rd_shut:1;		/* shutdown(SHUT_RD) */
	unsigned oob_inline:1;		/* SO_OOBINLINE */
	unsigned oob_have:1;		/* an urgent byte waits for MSG_OOB */
	unsigned oob_seen:1;		/* urgent mark known (SIOCATMARK) */
	unsigned rx_pulse:1;		/* data arrived since readiness sync */
	uint8_t oob_byte;
	uint64_t oob_mark;		/* stream offset of the urgent mark */

	/* ---- send side ---- */
	uint32_t tx_next_mseq;		/* mseq of our next message */
	int32_t tx_credits;		/* peer receives we may consume */
	uint32_t peer_rcv_sz;		/* peer's buffer size (max message) */
	uint8_t *txq;			/* byte ring: queued, unsent data */
	uint32_t txq_cap, txq_head, txq_len;
	uint32_t sndbuf;		/* SO_SNDBUF as set (txq grows to it) */
	uint32_t rcvbuf;		/* SO_RCVBUF as set (reported) */
	uint64_t tx_queued_off;		/* stream bytes queued in total */
	uint64_t tx_urg_off;		/* stream offset just past urgent byte */
	unsigned tx_urg:1;		/* an urgent byte is queued */
	unsigned nodelay:1;		/* TCP_NODELAY */
	unsigned cork:1;		/* TCP_CORK: hold short messages */
	unsigned nagle_inflight:1;	/* a short Data is unacknowledged */
	uint32_t nagle_mseq;		/* its mseq */
	uint64_t nagle_deadline_ns;	/* flush held data by then */
	unsigned wr_shut:1;		/* shutdown(SHUT_WR) or close */
	unsigned disconn_sent:1;
	unsigned abort_sent:1;

	/* ---- life (this process's; a hand-over keeps them) ---- */
	int owner_slot;			/* fork ownership slot (owner.h) */
	struct sdp_mbox *mbox;		/* hand-over mailbox (handover.h) */
	size_t mbox_size;
	/* Application calls inside the engine on it: a hand-over waits for
	 * none (handover.c). */
	atomic_int app_calls;
	unsigned detached:1;		/* another process took it over */
	/* Our application closed its descriptor while another process
	 * holds one: we drive the connection on (the kernel would), with
	 * `ready` pointing at ready_kept, until that process asks for it or
	 * every descriptor is closed. */
	unsigned held_elsewhere:1;
	/* References the fork parent's progress thread held (its epoll set,
	 * its timer list), copied by fork(): dropped when this process
	 * adopts the connection. */
	unsigned inherited_refs:2;
	struct sdp_ready *ready_kept;
	/* Relayed for a process that exec'd (relay.h); NULL if not. */
	struct sdp_relay *relay;
	/* Relayed in place by this process on its own initiative, with no
	 * owner slot to say so (relay.h, sdp_relay_in_place_here). */
	_Atomic int relayed_here;
	unsigned orphan:1;		/* application closed it */
	unsigned registered:1;		/* in the progress thread's epoll */
	/* Under the progress lock (progress.c): registered, as seen by the
	 * transport's callbacks, which may not hold c->lock; and the QP's
	 * event descriptor in the progress thread's epoll, or -1. */
	bool ev_live;
	int ev_fd;
	unsigned dead:1;		/* queued for freeing */
	uint64_t close_deadline_ns;
	uint64_t connect_deadline_ns;	/* CONNECTING: reset after it */
	/* An active open whose caller waits for the answer (a blocking
	 * connect): it sleeps on the transport's answer_fd itself, and the
	 * progress thread gets the connection only once the wait ends
	 * (unlisted until then), so that the answer wakes one thread, not
	 * the progress thread and then the caller. */
	unsigned connect_waits:1;
	unsigned unlisted:1;
	/* Why a close that resets does so, when the closer knows better
	 * than "SO_LINGER 0" or "unread data" (the exec relay). */
	enum sdp_reason close_reason;
	struct sdp_ready *ready;	/* app fd mirror; NULL once orphaned */
	unsigned peer_takes_tcp:1;	/* active open: the listener said it
					 * takes kernel TCP too (SDP_CM_F_*) */
	unsigned active_open_done:1;	/* active open: it got established */
	unsigned ready_defer:1;		/* inside an app call: mirror at its end */
	/* Application wake-up (appwake.c): the transport's arm, and the
	 * epoll set's wake word it is keyed to. */
	unsigned app_fd_shared:1;	/* ready->lib_fd handed to the peer */
	unsigned app_armed:1;		/* peer may wake the app */
	unsigned app_quiet:1;		/* armed with SDP_APP_ARM_QUIET */
	unsigned appwake_off:1;		/* not for this connection any more */
	/* The wake word (transport/wakeword.h) of the epoll set the
	 * application watches this connection in, while its transport can
	 * use it, else -1; wake_word_of: the set's handle last offered. */
	int wake_word, wake_word_of;
	/* Read by epoll_wait without the lock: the word the transport's
	 * quiet arm is keyed to now, or -1.  A connection so armed needs no
	 * arm of its own before its set sleeps. */
	_Atomic int armed_word;
	struct sdp_conn *next, *prev;	/* progress registry list */
	struct sdp_conn *all_next, *all_prev;	/* every connection here */
	struct sdp_conn *timer_next;	/* progress timer list */
	/* On the progress timer list.  Written under the progress lock; read
	 * without it by a hold that would arm the timer (tx.c): the progress
	 * thread clears it before it looks at the deadline under c->lock. */
	atomic_uchar in_timer;
	unsigned timer_full:1;		/* armed for more than a hold's
					 * deadline (progress.c) */
	unsigned timer_missed:1;	/* armed before it was registered:
					 * listed at registration */
	struct sdp_conn *acc_next;	/* listener accept queue */

	struct sdp_conn_stats stats;

	/* ---- ZCopy (zcopy.c) ---- */
	struct sdp_zc_tx zc_tx;
	struct sdp_zc_rx zc_rx;		/* the oldest peer SrcAvail held */
	struct sdp_zc_rx_next zc_rxq[SDP_ZC_WINDOW - 1]; /* the ones after */
	uint32_t zc_rxq_head, zc_rxq_n;
	uint64_t zc_rxq_bytes;		/* advertised bytes in zc_rxq */
	uint32_t zc_sendsm_mseq;	/* MSeq of our latest SendSm */
	unsigned zc_sendsm_ever:1;	/* we sent a SendSm at least once */
	uint8_t zc_peer_max_adverts;	/* the peer's MaxAdverts (Hello) */
	uint32_t zc_pend_rdcompl;	/* read bytes not yet reported */
	uint32_t zc_pend_sendsm;	/* SendSm messages to post */
	uint32_t zc_readers;		/* recv() calls in progress */
	uint32_t zc_last_tx_mseq;	/* MSeq of our latest SrcAvail */
	unsigned zc_ever_tx:1;		/* we sent a SrcAvail at least once */
	unsigned zc_sendsm_grace:1;	/* a SendSm may follow a full read
					 * that crossed our cancel */
	unsigned zc_thresh_set:1;	/* zc_thresh overrides the default */
	unsigned zc_caps_fresh:1;	/* caps re-read after the handshake */
	uint32_t zc_thresh;		/* SDP_ZCOPY_THRESH of this socket */
	/* Completions of our RDMA READ ([0]) and WRITE ([1]) taken off the
	 * CQ by whichever thread drained it (sdp_zcopy_take_wc_locked): the
	 * thread that posted the RDMA waits with the lock dropped, and the
	 * progress step of another thread (our writer, our reader) may poll
	 * its completion first. */
	unsigned zc_rdma_done[2];
	int zc_rdma_st[2];		/* its enum sdp_wc_status */
	/* How long our ZCopy waits last per KiB, learned (sdp_zc_due in
	 * zcopy.h): our READ [SDP_ZC_PACE_READ], our WRITE, and, as a
	 * source, the sink's reading of our SrcAvail. */
	uint32_t zc_pace[3];

	/* ---- Write ZCopy and modes (zcopy_sink.c) ---- */
	struct sdp_zc_snk zc_snk;	/* our (first) SinkAvail (we are the sink) */
	struct sdp_zc_snk_more zc_snk_more[SDP_ZC_WINDOW - 1];
	uint32_t zc_snk_nmore;		/* further SinkAvails posted */
	uint32_t zc_snk_cur;		/* of all, the ones filled whole */
	struct sdp_zc_snk_peer zc_snk_peer; /* the peer's oldest (we are the
					 * source), then the others: */
	struct sdp_zc_snk_peer zc_snk_peer_q[SDP_ZC_WINDOW - 1];
	uint32_t zc_snk_peer_qhead, zc_snk_peer_qn;
	unsigned zc_snk_peer_drop:1;	/* drop them all after the write */
	unsigned zc_wrcompl_partial:1;	/* the due RdmaWrCompl ends the
					 * sink's advertisements */
	unsigned zc_wrcompl_end_ever:1;
	uint32_t zc_wrcompl_end_mseq;	/* MSeq of the last such one */
	uint32_t zc_data_msgs_tx;	/* data-carrying messages sent */
	uint32_t zc_data_msgs_rx;	/* ... received (SinkAvail NonDiscards) */
	uint32_t zc_pend_wrcompl;	/* RdmaWrCompl bytes to post (0: none) */
	unsigned zc_wrcompl_due:1;	/* an RdmaWrCompl is to be posted */
	uint32_t zc_pend_cancel_ack;	/* SinkCancelAck messages to post */
	uint32_t zc_cancel_acks_due;	/* our SinkAvailCancels unanswered */
	uint8_t zc_mode_tx;		/* our send half (SDP_MODE_*) */
	uint8_t zc_mode_rx;		/* our receive half (the peer's send) */
	uint8_t zc_pend_mch;		/* ModeChange byte to post, if _due */
	unsigned zc_mch_due:1;
	unsigned zc_want_pipe:1;	/* REQ_PIPE in what we send */
	unsigned zc_peer_pipe:1;	/* the peer asked for Pipelined */
	unsigned zc_mch_csend_due:1;	/* post ModeChange Combined-send */
	unsigned zc_hint_due:1;		/* send a bare REQ_PIPE hint */
	unsigned zc_snk_seen:1;		/* the peer sent a SinkAvail once */
	unsigned zc_write_off:1;	/* tests: never advertise SinkAvail */
	uint32_t zc_mode_tx_mseq;	/* MSeq of our last ModeChange */
};

/* ---- lifecycle (conn.c) ---- */

/* The transport new connections use (SDP_TRANSPORT, default shm). */
const struct sdp_transport_ops *sdp_tp_default(void);
/* Checked transition (see the table in conn.c); -EPROTO if not allowed. */
int sdp_conn_set_state_locked(struct sdp_conn *c, enum sdp_state to);

/* Allocate an unconnected connection (refs = 1 for the caller). */
int sdp_conn_alloc(struct sdp_conn **out);
/* Active open: create the QP, post receives, send Hello to `dst`.
 * `local` (from a bind) fixes the source address; it is consumed.
 * Returns 0 (connecting; completion reported via progress) or -errno. */
int sdp_conn_connect(struct sdp_conn *c, struct sdp_listener *local,
		     const struct sockaddr *dst, socklen_t len);
/* Passive open from a transport request carrying the peer's Hello;
 * `cm_flags` (SDP_CM_F_*) go to the client with the accept. */
int sdp_conn_accept_req(struct sdp_conn_req *req, const struct sdp_hello *hello,
			uint32_t cm_flags, struct sdp_conn **out);
/* Drop a reference; the progress thread frees at zero. */
void sdp_conn_put(struct sdp_conn *c);
void sdp_conn_get(struct sdp_conn *c);

/* Application close: graceful (DisConn after queued data) unless `abort`
 * or unread data is pending.  The connection lives on as an orphan until
 * the close completes or times out. */
void sdp_conn_close(struct sdp_conn *c, int abort);
/* The same, c->lock held and the connection ours (no reference dropped). */
void sdp_conn_close_locked(struct sdp_conn *c, int abort);
int sdp_conn_shutdown(struct sdp_conn *c, int how);

/* fork(): make sure this process drives `c`, taking it over from the
 * process that does (handover.h).  0, or -EBADFD if that process cannot
 * let go. */
int sdp_conn_claim(struct sdp_conn *c);
/* An application call on `c` begins and ends (after sdp_conn_claim): a
 * process asking for the connection is served once none is inside. */
void sdp_conn_call_begin(struct sdp_conn *c);
void sdp_conn_call_end(struct sdp_conn *c);
/* The application closed its descriptor here but another process still
 * holds one: drive the connection on without ending it, keeping the
 * library end of `r` (the socket's readiness pair, taken over: the caller
 * must not close it).  Drops the caller's reference. */
void sdp_conn_detach(struct sdp_conn *c, struct sdp_ready *r);

/* Nothing more can happen on it (RESET, CLOSED, TIME_WAIT): an orphan in
 * such a state is finished. */
int sdp_conn_over_locked(const struct sdp_conn *c);

/* Wait until connected (blocking connect).  timeout_ms < 0: forever. */
int sdp_conn_wait_connected(struct sdp_conn *c, int timeout_ms);

/* ---- data (tx.c / rx.c) ---- */

#define SDP_IO_NONBLOCK 0x1

/* About how many bytes a non-blocking send would take now (0: none, or
 * not established): lets sendfile() read no more of the file than fits. */
size_t sdp_conn_send_room(struct sdp_conn *c);
/* Descriptors an SDP connection holds in its process, at most
 * (fdlimit.c, docs/DESIGN.md "Descriptor budget"): four, one more while a
 * "both" client connects, and six once a fork() shares it. */
#define SDP_CONN_FDS 6
/* Room for one more connection within half of RLIMIT_NOFILE: the other
 * half stays for the application and for the connections that go TCP. */
int sdp_conn_fd_budget_ok(void);
/* The program set its descriptor limit: read it again. */
void sdp_conn_fd_limit_changed(void);
ssize_t sdp_conn_send(struct sdp_conn *c, const struct iovec *iov, int iovcnt,
		      int msg_flags, int io_flags, int timeout_ms);
/* Read up to `len` bytes straight into the transport's send buffers with
 * `fill` (a file read) and post them as data, while credits last; never
 * waits.  Returns the bytes of `fill` that were posted, 0 when this path
 * is not open now (use sdp_conn_send), or -errno (from fill, or the
 * connection's) when nothing went.  `fill` runs under the connection's
 * lock and may have read more than was posted if a post failed. */
ssize_t sdp_conn_send_fill(struct sdp_conn *c, size_t len,
			   ssize_t (*fill)(void *ctx, void *dst, size_t n),
			   void *ctx);
ssize_t sdp_conn_recv(struct sdp_conn *c, const struct iovec *iov, int iovcnt,
		      int msg_flags, int io_flags, int timeout_ms);

/* ---- progress (called with c->lock held) ---- */

/* Poll completions, process messages, flush queues, send credit updates,
 * update readiness.  Returns 0 or -errno on a fatal connection error (the
 * connection is then in SDP_ST_RESET). */
int sdp_conn_progress_locked(struct sdp_conn *c);
/* The same, from inside an application call that ends with
 * sdp_conn_update_ready_locked(): the kernel readiness is left alone until
 * then, so a message taken and consumed within the call costs no readiness
 * byte and no drain. */
int sdp_conn_poll_locked(struct sdp_conn *c);
void sdp_conn_update_ready_locked(struct sdp_conn *c);
/* Abort: tell the peer (best effort), tear the QP down, report `err`. */
void sdp_conn_reset_locked(struct sdp_conn *c, int err, enum sdp_reason why);
/* Flush queued data / DisConn as credits and Nagle allow. */
int sdp_tx_flush_locked(struct sdp_conn *c, int force);
/* Send a zero-length Data if the peer's view of our buffers is low. */
int sdp_rx_maybe_credit_update_locked(struct sdp_conn *c);
/* Process one receive completion. */
int sdp_rx_handle_wc_locked(struct sdp_conn *c, const struct sdp_wc *wc);
/* Post one receive buffer. */
int sdp_rx_post_locked(struct sdp_conn *c, uint32_t idx);
/* Queued data or DisConn could still go out (not reset, peer not gone). */
int sdp_conn_can_still_send_locked(const struct sdp_conn *c);
/* Answer ChRcvBuf with our (unchanged) buffer size. */
int sdp_tx_post_ch_rcv_buf_ack_locked(struct sdp_conn *c);
/* Post a header-only message (control or credit update). */
int sdp_tx_post_ctrl_locked(struct sdp_conn *c, uint8_t mid);
/* Post any message: `m` supplies mid, flags and the extended header (m->h);
 * the BSDH sequence/credit fields are filled here.  Needs 2 credits. */
int sdp_tx_post_msg_locked(struct sdp_conn *c, struct sdp_msg *m,
			   const struct sdp_sge *payload, int npayload,
			   uint32_t plen);
/* The same with any credit left: the caller checked the reserve rule. */
int sdp_tx_post_msg_any_locked(struct sdp_conn *c, struct sdp_msg *m,
			       const struct sdp_sge *payload, int npayload,
			       uint32_t plen);

/* Readiness mask (SDP_READY_*) the socket should show now. */
unsigned sdp_conn_ready_mask_locked(const struct sdp_conn *c);

/* The pending error for a read or write: ECONNRESET is reported once, as
 * TCP does; after that writes fail with EPIPE and reads see EOF. */
int sdp_conn_take_err_locked(struct sdp_conn *c);
/* Set in the progress thread: arrivals there re-signal edge-triggered
 * epoll, as each TCP segment does. */
extern __thread int sdp_in_progress_thread;

/* Bytes readable now (FIONREAD) and unsent (SIOCOUTQ). */
uint64_t sdp_conn_rx_avail_locked(const struct sdp_conn *c);
int sdp_conn_at_mark_locked(const struct sdp_conn *c);

uint64_t sdp_now_ns(void);

static inline size_t sdp_iov_total(const struct iovec *iov, int iovcnt)
{
	size_t t = 0;
	int i;

	for (i = 0; i < iovcnt; i++)
		t += iov[i].iov_len;
	return t;
}
/* Sleep (without the lock) until the QP's wait sequence moves past `seq`,
 * spinning first for SDP_SPIN_US.  0, -EINTR or -ETIMEDOUT. */
int sdp_conn_wait(struct sdp_conn *c, uint32_t seq, uint64_t deadline_ns);
/* After a blocking call's sleep (`r` from sdp_conn_wait, the lock taken
 * again): 0 to go round again (woken; or a signal whose handler has
 * SA_RESTART, with no timeout: *sig is marked anew), else the call's
 * error, -EINTR or -EAGAIN (its timeout), after a last look at what
 * arrived. */
struct sdp_sig_mark;
int sdp_conn_wait_end_locked(struct sdp_conn *c, int r, uint64_t deadline_ns,
			     struct sdp_sig_mark *sig);
/* The same for news an RDMA in flight since `since_ns` brings, expected at
 * `due_ns` (0: unknown): the transport's wait_rdma, which may poll for it.
 * Its result: 0 (found polling), 1 (woken before polling), 2 (woken after
 * polling), -EINTR or -ETIMEDOUT. */
int sdp_conn_wait_rdma(struct sdp_conn *c, uint32_t seq, uint64_t deadline_ns,
		       uint64_t since_ns, uint64_t due_ns);

#endif /* SDP_CONN_H */
