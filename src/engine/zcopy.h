/* SPDX-License-Identifier: MIT */
/*
 * zcopy.h — Read ZCopy in Combined mode (annex §5): the data source
 * advertises the application's send buffer with SrcAvail (first bytes
 * inline), the data sink RDMA-reads it straight into the application's
 * receive buffer and answers RdmaRdCompl, or declines with SendSm; cancels
 * (SrcAvailCancel) on a signal, a send timeout or an unanswered
 * advertisement.  docs/DESIGN.md "ZCopy" explains the choices.
 *
 * Every function here is called with c->lock held.
 */
#ifndef SDP_ZCOPY_H
#define SDP_ZCOPY_H

#include <stdatomic.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "engine/config.h"
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

/* Advertise [p, p+len) (at most SDP_ZC_MAX_ADVERT of it) and wait, without
 * the lock, until the sink no longer needs it.  Returns the bytes the peer
 * took (inline + RDMA-read) and sets *end (and *stop_err for STOPPED:
 * -EINTR or -EAGAIN); or a negative errno if nothing could be advertised
 * (then send by BCopy). */
ssize_t sdp_zcopy_send_locked(struct sdp_conn *c, const void *p, size_t len,
			      uint64_t deadline_ns, enum sdp_zc_end *end,
			      int *stop_err);

/* ---- messages from the peer (rx.c) ---- */

/* A SrcAvail whose inline bytes rx.c just queued: read it or decline. */
void sdp_zcopy_rx_advert_locked(struct sdp_conn *c, const struct sdp_msg *m);
/* SendSm / RdmaRdCompl (we are the source), SrcAvailCancel (sink).
 * 0, or -EPROTO after resetting the connection. */
int sdp_zcopy_rx_send_sm_locked(struct sdp_conn *c, const struct sdp_msg *m);
int sdp_zcopy_rx_rd_compl_locked(struct sdp_conn *c, const struct sdp_msg *m);
int sdp_zcopy_rx_src_cancel_locked(struct sdp_conn *c, const struct sdp_msg *m);

/* ---- data sink (rx.c) ---- */

/* Bytes of the peer's advertisement not yet read. */
static inline uint32_t sdp_zcopy_rx_pending(const struct sdp_conn *c)
{
	return c->zc_rx.active ? c->zc_rx.len - c->zc_rx.off : 0;
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

static inline int sdp_zcopy_ctl_pending(const struct sdp_conn *c)
{
	return c->zc_pend_rdcompl | c->zc_pend_sendsm |
	       (c->zc_tx.cancel_want & !c->zc_tx.cancel_sent) |
	       (c->zc_rx.active & (c->orphan | !c->zc_readers));
}

#endif /* SDP_ZCOPY_H */
