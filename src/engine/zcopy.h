/* SPDX-License-Identifier: MIT */
/*
 * zcopy.h — Read ZCopy (annex §5): the data source advertises the
 * application's send buffers with SrcAvail (Combined mode: one at a time,
 * first bytes inline; Pipelined mode: several outstanding, none inline),
 * the data sink RDMA-reads them in stream order straight into the
 * application's receive buffer and answers RdmaRdCompl, or declines with
 * SendSm; cancels (SrcAvailCancel) on a signal, a send timeout or an
 * unanswered advertisement.  Write ZCopy and the modes: zcopy_sink.c.
 * docs/DESIGN.md "ZCopy" explains the choices.
 *
 * Every function here is called with c->lock held.
 */
#ifndef SDP_ZCOPY_H
#define SDP_ZCOPY_H

#include <stdatomic.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "base/config.h"
#include "engine/conn.h"

/* Inline bytes of a SrcAvail: at least 1 in Combined mode; 64 so that a
 * gen1 sink consumes them as stream data (its SDP_SRC_AVAIL_RECV). */
#define SDP_ZC_INLINE 64u
/* Largest single advertisement (SrcAH Len is 32 bits); larger sends are
 * advertised piece by piece. */
#define SDP_ZC_MAX_ADVERT (16u << 20)
/* Largest single RDMA READ the sink posts. */
#define SDP_ZC_MAX_READ (4u << 20)
/* How long a sink holds a SrcAvail that no recv() is reading yet before it
 * declines it (the application is usually between two recv calls). */
#define SDP_ZC_HOLD_MS 20u
/* How long a cancelled advertisement may stay unacknowledged before the
 * connection is reset (OFED SDP_SRCAVAIL_CANCEL_TIMEOUT). */
#define SDP_ZC_CANCEL_TIMEOUT_MS 60000u

/* MaxAdverts in our Hello/HelloAck: we hold up to SDP_ZC_WINDOW of the
 * peer's SrcAvails, of which one may instead be a SinkAvail (annex 5.1
 * counts both kinds together). */
#define SDP_ZC_MAX_ADVERTS SDP_ZC_WINDOW
/* How long a SinkAvailCancel may stay unanswered before a reset. */
#define SDP_ZC_SINK_CANCEL_TIMEOUT_MS 60000u

/* Registrations ZCopy holds right now, all connections (tests: must come
 * back to 0 after every send/recv/close/abort). */
extern atomic_long sdp_zcopy_live_mrs;

/* The threshold in effect (0 = ZCopy off for this connection). */
static inline uint32_t sdp_zcopy_thresh_locked(const struct sdp_conn *c)
{
	return c->zc_thresh_set ? c->zc_thresh : sdp_cfg.zcopy_thresh;
}
/* setsockopt(SDP_ZCOPY_THRESH): v < 0 restores the system default. */
void sdp_zcopy_set_thresh_locked(struct sdp_conn *c, int v);

/* ---- data source (tx.c) ---- */

/* Can this connection RDMA?  The transport knows only once the handshake
 * is over (shm probes cross-memory attach then), later than the caps the
 * connection read when it created its QP: re-read them once. */
static inline int sdp_zcopy_rdma_ok_locked(struct sdp_conn *c)
{
	if (!c->zc_caps_fresh && c->qp && c->state != SDP_ST_CONNECTING &&
	    c->state != SDP_ST_CLOSED) {
		SDP_TP(c->qp)->query_caps(c->qp, &c->caps);
		c->zc_caps_fresh = 1;
	}
	return c->caps.rdma;
}

/* The contiguous rest of the iovec element at stream offset `skip` of iov
 * (0 past the end); *p points at it. */
static inline size_t sdp_zcopy_iov_piece(const struct iovec *iov, int iovcnt,
					 size_t skip, const uint8_t **p)
{
	int vi = 0;

	while (vi < iovcnt && skip >= iov[vi].iov_len)
		skip -= iov[vi++].iov_len;
	if (vi == iovcnt)
		return 0;
	*p = (const uint8_t *)iov[vi].iov_base + skip;
	return iov[vi].iov_len - skip;
}

/* May a blocking send of `len` more contiguous bytes go ZCopy at all? */
static inline int sdp_zcopy_tx_wanted(struct sdp_conn *c, size_t len)
{
	uint32_t t = sdp_zcopy_thresh_locked(c);

	return t && len >= t && len >= 2 && sdp_zcopy_rdma_ok_locked(c);
}

enum sdp_zc_end {
	SDP_ZC_DONE,		/* the sink read everything advertised */
	SDP_ZC_DECLINED,	/* SendSm: send the rest by BCopy */
	SDP_ZC_STOPPED,		/* cancelled for a signal / send timeout */
};

/* Advertise the iovec elements from stream offset `skip` of iov on, each
 * element (rest) of at least the threshold its own SrcAvail (pieces of at
 * most SDP_ZC_MAX_ADVERT), several outstanding at once in Pipelined mode
 * (zcopy_src.c), and wait, without the lock, until the sink no longer
 * needs them.  Stops before the first element below the threshold.
 * Returns the bytes the peer took, from `skip` on (inline + RDMA-read),
 * and sets *end (and *stop_err for STOPPED: -EINTR or -EAGAIN); or
 * -EBUSY (no credit now: wait), or another negative errno if nothing could
 * be advertised (then send by BCopy). */
ssize_t sdp_zcopy_send_locked(struct sdp_conn *c, const struct iovec *iov,
			      int iovcnt, size_t skip, uint64_t deadline_ns,
			      enum sdp_zc_end *end, int *stop_err);

/* ---- messages from the peer (rx.c) ---- */

/* A SrcAvail whose inline bytes rx.c just queued: read it or decline. */
void sdp_zcopy_rx_advert_locked(struct sdp_conn *c, const struct sdp_msg *m);
/* SendSm / RdmaRdCompl (we are the source), SrcAvailCancel (sink).
 * 0, or -EPROTO after resetting the connection. */
int sdp_zcopy_rx_send_sm_locked(struct sdp_conn *c, const struct sdp_msg *m);
int sdp_zcopy_rx_rd_compl_locked(struct sdp_conn *c, const struct sdp_msg *m);
int sdp_zcopy_rx_src_cancel_locked(struct sdp_conn *c, const struct sdp_msg *m);

/* ---- data sink (rx.c) ---- */

/* Bytes of the peer's advertisements not yet read. */
static inline uint64_t sdp_zcopy_rx_pending(const struct sdp_conn *c)
{
	return c->zc_rx.active ?
	       c->zc_rx.len - c->zc_rx.off + c->zc_rxq_bytes : 0;
}

/* Our SinkAvails the source may still write into. */
static inline uint32_t sdp_zcopy_snk_out(const struct sdp_conn *c)
{
	return c->zc_snk.active && !c->zc_snk.ended ?
	       1 + c->zc_snk_nmore - c->zc_snk_cur : 0;
}

/* The peer's SinkAvails we hold (we are the source). */
static inline uint32_t sdp_zcopy_snk_peer_held(const struct sdp_conn *c)
{
	return c->zc_snk_peer.active ? 1 + c->zc_snk_peer_qn : 0;
}

/* The peer's SrcAvails we hold (the one being read and those behind). */
static inline uint32_t sdp_zcopy_rx_held(const struct sdp_conn *c)
{
	return c->zc_rx.active ? 1 + c->zc_rxq_n : 0;
}

/* The receive queue is empty and the peer's advertisement is next in the
 * stream: RDMA-read up to `want` bytes into iov (after `skip` bytes), or
 * decline when the buffer is too small / MSG_PEEK.  Returns bytes read
 * (0 = declined), or -errno (the connection was reset). */
ssize_t sdp_zcopy_read_locked(struct sdp_conn *c, const struct iovec *iov,
			      int iovcnt, size_t skip, size_t want, int peek);
/* The last recv() left with the peer's advertisement still unread. */
void sdp_zcopy_readers_gone_locked(struct sdp_conn *c);
/* Give up the peer's advertisement: report what was read, SendSm. */
void sdp_zcopy_decline_locked(struct sdp_conn *c);

/* Post pending RdmaRdCompl / SendSm / SrcAvailCancel (tx flush). */
void sdp_zcopy_flush_ctl_locked(struct sdp_conn *c);

/*
 * When a ZCopy wait should end, for the transport's wait_rdma (which may
 * sleep until shortly before then and poll from there): `bytes` at the
 * pace this connection's waits of that kind have had, per KiB.  0 (no
 * idea yet) until one is learned.  The pace follows the waits that ended
 * while polling (they are exact) or after it (late by a wake-up at most,
 * and later than the pace: it must grow).  One that ended in the sleep
 * before polling (the news came first: the due time was late, or that
 * sample holds a wake-up) moves it 1/8 earlier instead, so a late
 * estimate does not feed on its own wake-ups (docs/DESIGN.md, "Verbs:
 * waiting for an RDMA in flight").
 */
enum { SDP_ZC_PACE_READ, SDP_ZC_PACE_WRITE, SDP_ZC_PACE_SOURCE };

static inline uint64_t sdp_zc_due(uint32_t pace, uint64_t since_ns,
				  uint64_t bytes)
{
	return pace && bytes ? since_ns + (uint64_t)pace * ((bytes + 1023) / 1024) :
			       0;
}

/* A wait of `took_ns` for `bytes` ended; `how`: wait_rdma's last result. */
static inline void sdp_zc_pace_learn(uint32_t *pace, uint64_t took_ns,
				     uint64_t bytes, int how)
{
	uint64_t s;

	if (!bytes)
		return;
	if (how == 1) {
		*pace -= *pace / 8;
		return;
	}
	s = took_ns / ((bytes + 1023) / 1024);
	if (s > UINT32_MAX)
		s = UINT32_MAX;
	if (!*pace)
		*pace = (uint32_t)s;
	else
		*pace = (uint32_t)((int64_t)*pace + ((int64_t)s - *pace) / 4);
}

/* One RDMA READ or WRITE of n bytes between local `buf` and the peer's
 * (raddr, rkey), waited for in this locked section (completions met on the
 * way are processed as the progress step would).  0, or -errno after the
 * connection was reset (transport failure) or registration failed (then
 * the connection is intact).  On success the local registration (which
 * grants the peer nothing) is handed to the caller in *done_mr, to drop
 * with sdp_zcopy_dereg_locked() once its RdmaRdCompl / RdmaWrCompl is
 * posted: the peer's wake-up need not wait for the deregistration. */
int sdp_zcopy_rdma_locked(struct sdp_conn *c, int write, void *buf,
			  uint32_t n, uint64_t raddr, uint32_t rkey,
			  struct sdp_mr **done_mr);
/* Is `wc` the completion of a ZCopy RDMA READ or WRITE?  Then it is
 * recorded for the thread waiting in sdp_zcopy_rdma_locked (1); every CQ
 * drain of the connection must ask before dropping a send completion. */
int sdp_zcopy_take_wc_locked(struct sdp_conn *c, const struct sdp_wc *wc);
void sdp_zcopy_dereg_locked(struct sdp_conn *c, struct sdp_mr *mr);
/* Reset for a peer's protocol violation around ZCopy (reason PROTOCOL). */
void sdp_zcopy_protocol_error_locked(struct sdp_conn *c, const char *what,
				     uint8_t mid);
/* May a ZCopy control message go now (credit rule in zcopy.c)? */
int sdp_zcopy_can_post_ctl_locked(const struct sdp_conn *c);
/* Re-decide our send half's mode (REQ_PIPE seen, threshold changed). */
void sdp_zcopy_mode_decide_locked(struct sdp_conn *c);
/* A send has several pieces to advertise: put our send half in Pipelined
 * mode ourselves (ModeChange Pipelined-recv, annex 5.2) if the peer holds
 * several advertisements. */
void sdp_zcopy_mode_pipelined_self_locked(struct sdp_conn *c);

/* ---- Write ZCopy and modes (zcopy_sink.c) ---- */

/* Control messages of Write ZCopy and ModeChange waiting for a credit;
 * posted first by sdp_zcopy_flush_ctl_locked (RdmaWrCompl must precede
 * any later data).  Returns 0 if something is still held back. */
int sdp_zcopy_sink_flush_ctl_locked(struct sdp_conn *c);

static inline int sdp_zcopy_ctl_pending(const struct sdp_conn *c)
{
	return c->zc_pend_rdcompl | c->zc_pend_sendsm |
	       (c->zc_tx.cancel_want & !c->zc_tx.cancel_sent) |
	       (c->zc_rx.active & (c->orphan | !c->zc_readers)) |
	       c->zc_wrcompl_due | c->zc_pend_cancel_ack | c->zc_mch_due |
	       c->zc_hint_due |
	       (c->zc_snk.cancel_want & !c->zc_snk.cancel_sent);
}

/* BCopy data may not leave while an RDMA WRITE into the peer's buffer is in
 * flight or its RdmaWrCompl is unsent: the written bytes come first. */
static inline int sdp_zcopy_tx_blocks_data(const struct sdp_conn *c)
{
	return c->zc_snk_peer.writing | c->zc_wrcompl_due;
}

/* Data source: a message we post carries stream data (Data with payload,
 * any SrcAvail, SinkAvail with payload): count it (NonDiscards) and drop
 * the peer's pending SinkAvail, which that data supersedes (annex 5.4). */
void sdp_zcopy_tx_data_msg_locked(struct sdp_conn *c, uint8_t mid,
				  uint32_t plen);
/* Data sink: the same on arrival; ends our SinkAvail (the source dropped
 * it when it sent this). */
void sdp_zcopy_rx_data_msg_locked(struct sdp_conn *c);
/* DisConn arrived: the source will never fill our SinkAvail. */
void sdp_zcopy_rx_disconn_locked(struct sdp_conn *c);
/* REQ_PIPE (or its absence) in a message from the peer. */
void sdp_zcopy_rx_flags_locked(struct sdp_conn *c, uint8_t flags);
/* Checks a SrcAvail against the receive mode; -EPROTO after a reset. */
int sdp_zcopy_rx_check_src_avail_locked(struct sdp_conn *c,
					const struct sdp_msg *m);
/* Messages of Write ZCopy and modes.  0, or -EPROTO after a reset. */
int sdp_zcopy_rx_sink_avail_locked(struct sdp_conn *c, const struct sdp_msg *m);
int sdp_zcopy_rx_wr_compl_locked(struct sdp_conn *c, const struct sdp_msg *m);
int sdp_zcopy_rx_sink_cancel_locked(struct sdp_conn *c, const struct sdp_msg *m);
int sdp_zcopy_rx_cancel_ack_locked(struct sdp_conn *c, const struct sdp_msg *m);
int sdp_zcopy_rx_mode_change_locked(struct sdp_conn *c, const struct sdp_msg *m);

/* Data sink: could a blocking recv() wanting `want` more bytes into iov
 * (after `skip`) advertise its buffer now?  Also requests Pipelined mode
 * (REQ_PIPE) when needed.  The receive queue is known empty. */
int sdp_zcopy_sink_wanted_locked(struct sdp_conn *c, const struct iovec *iov,
				 int iovcnt, size_t skip, size_t want);
/* Advertise that buffer (SinkAvail; with several large iovec elements,
 * several SinkAvails, filled in order) and wait until the source wrote
 * into it, dropped it, or a signal / the deadline / close cancelled it
 * (without `waitall`, the rest is cancelled once the first is full).
 * Returns the bytes written (0: none; the caller looks at the queue again)
 * and sets *stop (-EINTR, -EAGAIN) when interrupted; or -errno on a reset. */
ssize_t sdp_zcopy_sink_recv_locked(struct sdp_conn *c, const struct iovec *iov,
				   int iovcnt, size_t skip, size_t want,
				   int waitall, uint64_t deadline_ns, int *stop);

/* Data source: a blocking send of `len` more contiguous bytes could fill
 * the peer's SinkAvail now. */
int sdp_zcopy_write_wanted_locked(struct sdp_conn *c, size_t len);
/* RDMA-write up to `len` bytes of p into the peer's SinkAvail and queue
 * RdmaWrCompl.  Returns the bytes written, -EAGAIN (not now: use BCopy or
 * SrcAvail), or -errno after a reset. */
ssize_t sdp_zcopy_write_locked(struct sdp_conn *c, const void *p, size_t len);

#endif /* SDP_ZCOPY_H */
