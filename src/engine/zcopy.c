/* SPDX-License-Identifier: MIT */
/*
 * zcopy.c — Read ZCopy (annex §5.1-5.5) over the transport interface: the
 * data sink (RDMA READ + RdmaRdCompl, or SendSm), the RDMA helper both
 * ZCopy kinds use, and the pending ZCopy control messages.  The data
 * source (registration + SrcAvail, several outstanding in Pipelined mode)
 * is in zcopy_src.c; Write ZCopy and the modes in zcopy_sink.c.
 *
 * Sink: a SrcAvail's inline bytes (Combined mode) are queued as ordinary
 * stream data; the advertised remainder follows them in the stream.  In
 * Pipelined mode several SrcAvails may be held: zc_rx is the oldest, the
 * others wait in zc_rxq, and they are read strictly in that order (the
 * source may not send Data meanwhile, annex 5.3, so they are contiguous in
 * the stream).  When a recv() reaches them with a buffer of at least
 * min(threshold, remaining) bytes, they are RDMA-read straight into the
 * application's buffer (registered LOCAL_WRITE for that read only) and
 * reported with RdmaRdCompl (bytes since the last report, whichever
 * advertisements they came from).  Otherwise (small buffer, MSG_PEEK,
 * ZCopy off, no reader within the hold time, closed socket) the sink
 * declines with SendSm — all it holds at once: the rest must come by
 * BCopy in stream order, and the source may not send Data while any of its
 * SrcAvails is out.  A SrcAvail the source sent before it saw that SendSm
 * follows the declined ones in the stream, so it is declined on arrival.
 * The private receive buffers belong to the peer's SENDs, so there is
 * nowhere else to read into.
 *
 * A SrcAvail no recv() is reading is held SDP_ZC_HOLD_MS, then declined.  So
 * both sides advertising at once with nobody reading (each application
 * blocked in its own send) decline each other's SrcAvail after the hold and
 * fall back to BCopy: no deadlock; with reader threads, each side's reader
 * reads the other's.
 */
#include "engine/zcopy.h"

#include <errno.h>
#include <string.h>

#include "base/config.h"
#include "engine/conn.h"
#include "engine/progress.h"

atomic_long sdp_zcopy_live_mrs;

#define ZC_WRID_READ 0x5a43524541440001ull	/* "ZCREAD" */
#define ZC_WRID_WRITE 0x5a43575249540001ull	/* "ZCWRIT" */
#define ZC_MIN_CREDITS 2

void sdp_zcopy_set_thresh_locked(struct sdp_conn *c, int v)
{
	if (v < 0) {
		c->zc_thresh_set = 0;
		c->zc_thresh = 0;
	} else {
		c->zc_thresh_set = 1;
		c->zc_thresh = (uint32_t)v;
	}
	/* ZCopy switched off: our send half leaves Pipelined. */
	sdp_zcopy_mode_decide_locked(c);
	if (c->zc_mch_due)
		sdp_tx_flush_locked(c, 0);
}

void sdp_zcopy_protocol_error_locked(struct sdp_conn *c, const char *what,
				     uint8_t mid)
{
	sdp_log(SDP_LOG_ERR, "conn %u: protocol error: %s (%s) in %s", c->id,
		what, sdp_mid_name(mid), sdp_state_name(c->state));
	c->abort_sent = 0;
	sdp_conn_reset_locked(c, -ECONNRESET, SDP_REASON_PROTOCOL);
}

static void zc_dereg(struct sdp_conn *c, struct sdp_mr *mr)
{
	if (!mr)
		return;
	SDP_TP(c->qp)->dereg_mr(c->qp, mr);
	atomic_fetch_sub(&sdp_zcopy_live_mrs, 1);
}

/*
 * ZCopy control messages normally need two credits, like Data (annex 4.3:
 * the last one stays for a credit update).  They may take the last one when
 * the peer can still send to us (it sees at least two of our buffers): its
 * next message returns credits, so we are never left unable to announce
 * our buffers.  Without this, a source whose application is blocked in
 * send() with its receive buffers full of our unread data could never get
 * our RdmaRdCompl or SendSm: it would wait for us, we for its buffers.
 */
static int zc_can_post(const struct sdp_conn *c)
{
	int32_t peer_view = (int32_t)c->adv_bufs -
			    (int32_t)(c->rx_mseq - c->adv_mseq_ack);

	if (!c->qp || c->tx_credits < 1 ||
	    (c->tx_credits < ZC_MIN_CREDITS && peer_view < 2))
		return 0;
	switch (c->state) {
	case SDP_ST_ESTABLISHED:
	case SDP_ST_FIN_WAIT:
	case SDP_ST_CLOSE_WAIT:
	case SDP_ST_LAST_ACK:
		return 1;
	default:
		return 0;
	}
}

int sdp_zcopy_can_post_ctl_locked(const struct sdp_conn *c)
{
	return zc_can_post(c);
}

static int zc_post_ctl(struct sdp_conn *c, uint8_t mid, uint32_t len)
{
	struct sdp_msg m;

	memset(&m, 0, sizeof(m));
	m.bsdh.mid = mid;
	m.h.len = len;
	return sdp_tx_post_msg_any_locked(c, &m, NULL, 0, 0);
}

/* Decline without flushing (the flush may be our caller): every
 * advertisement held goes, answered by one SendSm. */
static void zc_decline_noflush(struct sdp_conn *c)
{
	if (!c->zc_rx.active)
		return;
	c->zc_rx.active = 0;
	c->zc_rx.cancel_rcvd = 0;
	c->zc_rxq_n = 0;
	c->zc_rxq_bytes = 0;
	c->zc_pend_sendsm++;
	c->stats.zc_rx_declined++;
}

/* The oldest advertisement is read completely: the next one held (if
 * any) becomes the one to read. */
static void zc_rx_next(struct sdp_conn *c)
{
	struct sdp_zc_rx *zr = &c->zc_rx;
	const struct sdp_zc_rx_next *nx;
	uint64_t decline_ns = zr->decline_ns;

	if (!c->zc_rxq_n) {
		zr->active = 0;
		return;
	}
	nx = &c->zc_rxq[c->zc_rxq_head];
	memset(zr, 0, sizeof(*zr));
	zr->active = 1;
	zr->mseq = nx->mseq;
	zr->rkey = nx->rkey;
	zr->vaddr = nx->vaddr;
	zr->len = nx->len;
	zr->decline_ns = decline_ns;
	c->zc_rxq_bytes -= nx->len;
	c->zc_rxq_head = (c->zc_rxq_head + 1) % (SDP_ZC_WINDOW - 1);
	c->zc_rxq_n--;
}

/* An advertisement no recv() is reading: decline it once its hold time
 * is over; until then keep a progress timer for that moment (the Nagle
 * deadline, which only makes held small data go out a little early). */
static void zc_check_hold(struct sdp_conn *c)
{
	struct sdp_zc_rx *zr = &c->zc_rx;

	if (c->orphan || sdp_now_ns() >= zr->decline_ns) {
		zc_decline_noflush(c);
		return;
	}
	if (!c->nagle_deadline_ns || c->nagle_deadline_ns > zr->decline_ns) {
		c->nagle_deadline_ns = zr->decline_ns;
		sdp_progress_arm_timer(c);
	}
}

void sdp_zcopy_readers_gone_locked(struct sdp_conn *c)
{
	c->zc_rx.decline_ns = sdp_now_ns() + SDP_ZC_HOLD_MS * 1000000ull;
	zc_check_hold(c);
}

void sdp_zcopy_flush_ctl_locked(struct sdp_conn *c)
{
	if (c->zc_rx.active && !c->zc_rx.reading &&
	    (c->orphan || !c->zc_readers))
		zc_check_hold(c);
	/* Write ZCopy completions and mode changes first: RdmaWrCompl
	 * accounts for bytes that precede anything sent after it. */
	if (!sdp_zcopy_sink_flush_ctl_locked(c))
		return;
	/* RdmaRdCompl before SendSm (annex 5.4). */
	if (c->zc_pend_rdcompl) {
		if (!zc_can_post(c) ||
		    zc_post_ctl(c, SDP_MID_RDMA_RD_COMPL, c->zc_pend_rdcompl) < 0)
			return;
		c->zc_pend_rdcompl = 0;
	}
	while (c->zc_pend_sendsm) {
		if (!zc_can_post(c) || zc_post_ctl(c, SDP_MID_SEND_SM, 0) < 0)
			return;
		c->zc_pend_sendsm--;
		/* SrcAvails sent before the source sees this one follow
		 * what it declines: they are declined on arrival. */
		c->zc_sendsm_mseq = c->tx_next_mseq - 1;
		c->zc_sendsm_ever = 1;
	}
	if (c->zc_tx.cancel_want && !c->zc_tx.cancel_sent) {
		if (!c->zc_tx.active || !c->zc_tx.live) {
			c->zc_tx.cancel_want = 0;
			return;
		}
		if (!zc_can_post(c) ||
		    zc_post_ctl(c, SDP_MID_SRC_AVAIL_CANCEL, 0) < 0)
			return;
		c->zc_tx.cancel_sent = 1;
		c->stats.zc_tx_cancels++;
	}
}

void sdp_zcopy_decline_locked(struct sdp_conn *c)
{
	if (!c->zc_rx.active || c->zc_rx.reading)
		return;
	zc_decline_noflush(c);
	sdp_tx_flush_locked(c, 0);
}

/* ---- sink ------------------------------------------------------------------ */

void sdp_zcopy_rx_advert_locked(struct sdp_conn *c, const struct sdp_msg *m)
{
	struct sdp_zc_rx *zr = &c->zc_rx;

	c->rx_pulse = 1;
	if (c->zc_pend_sendsm ||
	    (c->zc_sendsm_ever &&
	     sdp_seq_before(m->bsdh.mseq_ack, c->zc_sendsm_mseq))) {
		/* Sent before the source saw our SendSm: it follows the
		 * advertisements we declined, whose rest comes by BCopy
		 * first.  Declined too (a pending SendSm covers it). */
		if (!c->zc_pend_sendsm)
			c->zc_pend_sendsm++;
		c->stats.zc_rx_declined++;
		return;
	}
	if (zr->active) {
		/* Pipelined: behind the ones held (rx.c checked the count). */
		struct sdp_zc_rx_next *nx = &c->zc_rxq[(c->zc_rxq_head +
			c->zc_rxq_n) % (SDP_ZC_WINDOW - 1)];

		nx->mseq = m->bsdh.mseq;
		nx->rkey = m->h.srcah.rkey;
		nx->vaddr = m->h.srcah.vaddr;
		nx->len = m->h.srcah.len;
		c->zc_rxq_n++;
		c->zc_rxq_bytes += nx->len;
	} else {
		memset(zr, 0, sizeof(*zr));
		zr->active = 1;
		zr->mseq = m->bsdh.mseq;
		zr->rkey = m->h.srcah.rkey;
		zr->vaddr = m->h.srcah.vaddr;
		zr->len = m->h.srcah.len;
		zr->off = m->payload_len;
	}
	c->stats.zc_rx_adverts++;
	if (sdp_zcopy_rx_held(c) > c->stats.zc_rx_peak)
		c->stats.zc_rx_peak = sdp_zcopy_rx_held(c);
	/* Decline (flushed by the progress step) when ZCopy is off here.
	 * With no recv() in progress, hold it SDP_ZC_HOLD_MS for the next
	 * one, then decline: the application may not read for a long time
	 * (or be blocked advertising its own buffer to us: both sides then
	 * decline the other's and fall back to BCopy), and the source must
	 * not stay blocked on us. */
	if (!sdp_zcopy_thresh_locked(c) || !sdp_zcopy_rdma_ok_locked(c) ||
	    c->rd_shut || c->orphan)
		zc_decline_noflush(c);
	else if (!c->zc_readers && sdp_zcopy_rx_held(c) == 1)
		sdp_zcopy_readers_gone_locked(c);
}

int sdp_zcopy_rx_src_cancel_locked(struct sdp_conn *c, const struct sdp_msg *m)
{
	(void)m;
	if (!c->zc_rx.active)
		return 0;	/* already read or declined: the answer is out */
	if (c->zc_rx.reading) {
		c->zc_rx.cancel_rcvd = 1;	/* answered after the READ */
		return 0;
	}
	zc_decline_noflush(c);
	return 0;
}

int sdp_zcopy_take_wc_locked(struct sdp_conn *c, const struct sdp_wc *wc)
{
	int k;

	if (wc->opcode == SDP_WC_RDMA_READ && wc->wr_id == ZC_WRID_READ)
		k = 0;
	else if (wc->opcode == SDP_WC_RDMA_WRITE && wc->wr_id == ZC_WRID_WRITE)
		k = 1;
	else
		return 0;
	c->zc_rdma_done[k] = 1;
	c->zc_rdma_st[k] = (int)wc->status;
	return 1;
}

int sdp_zcopy_rdma_locked(struct sdp_conn *c, int write, void *buf,
			  uint32_t n, uint64_t raddr, uint32_t rkey,
			  struct sdp_mr **done_mr)
{
	const uint64_t wrid = write ? ZC_WRID_WRITE : ZC_WRID_READ;
	struct sdp_mr *mr = NULL;
	struct sdp_send_wr wr;
	struct sdp_sge sge;
	struct sdp_wc wc[16];
	enum sdp_wc_status st = SDP_WC_SUCCESS;
	uint64_t posted_ns, due_ns;
	int r, k, i, last = 0;

	/* The source of a WRITE is only read locally: no remote right. */
	r = SDP_TP(c->qp)->reg_mr(c->qp, buf, n,
				  write ? 0 : SDP_ACCESS_LOCAL_WRITE, &mr);
	if (r < 0)
		return r;
	atomic_fetch_add(&sdp_zcopy_live_mrs, 1);
	sge.addr = (uint64_t)(uintptr_t)buf;
	sge.length = n;
	sge.lkey = mr->lkey;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wrid;
	wr.opcode = write ? SDP_WR_RDMA_WRITE : SDP_WR_RDMA_READ;
	wr.flags = SDP_SEND_SIGNALED;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.remote_addr = raddr;
	wr.rkey = rkey;
	c->zc_rdma_done[write] = 0;
	r = sdp_post_send(c->qp, &wr);
	posted_ns = sdp_now_ns();
	due_ns = sdp_zc_due(c->zc_pace[write], posted_ns, n);
	if (r < 0) {
		zc_dereg(c, mr);
		sdp_conn_reset_locked(c, -ECONNRESET, SDP_REASON_TRANSPORT);
		return -ECONNRESET;
	}
	/* The completion may be polled here or, while we sleep without the
	 * lock, by another thread's progress step on this connection (a
	 * transport whose RDMA takes time: verbs); either records it in
	 * zc_rdma_done.  Past it, polling goes on while batches are full:
	 * poll_cq's callers take in everything (transport.h). */
	k = 0;
	while (!c->zc_rdma_done[write] || k == 16) {
		uint32_t seq = SDP_TP(c->qp)->wait_seq(c->qp);

		k = sdp_poll_cq(c->qp, wc, 16);
		for (i = 0; i < k; i++) {
			if (sdp_zcopy_take_wc_locked(c, &wc[i])) {
				continue;
			} else if (c->state == SDP_ST_RESET) {
				continue;
			} else if (wc[i].opcode == SDP_WC_RECV) {
				sdp_rx_handle_wc_locked(c, &wc[i]);
			} else if (wc[i].status != SDP_WC_SUCCESS) {
				sdp_conn_reset_locked(c, -ECONNRESET,
						      SDP_REASON_TRANSPORT);
			}
		}
		if (c->zc_rdma_done[write] || k > 0)
			continue;
		if (c->state == SDP_ST_RESET)
			break;
		/* An asynchronous transport: wait for the completion, which
		 * is due within the transfer's time (wait_rdma). */
		pthread_mutex_unlock(&c->lock);
		last = sdp_tp_wait_rdma(c->qp, seq, 10, posted_ns, due_ns);
		pthread_mutex_lock(&c->lock);
	}
	st = c->zc_rdma_done[write] ? (enum sdp_wc_status)c->zc_rdma_st[write] :
				      SDP_WC_WR_FLUSH_ERR;
	c->zc_rdma_done[write] = 0;
	if (st != SDP_WC_SUCCESS) {
		zc_dereg(c, mr);
		sdp_log(SDP_LOG_INFO, "conn %u: RDMA %s failed: %s", c->id,
			write ? "WRITE" : "READ", sdp_wc_status_str(st));
		sdp_conn_reset_locked(c, -ECONNRESET, SDP_REASON_TRANSPORT);
		return -ECONNRESET;
	}
	sdp_zc_pace_learn(&c->zc_pace[write], sdp_now_ns() - posted_ns, n,
			  last);
	*done_mr = mr;
	return 0;
}

void sdp_zcopy_dereg_locked(struct sdp_conn *c, struct sdp_mr *mr)
{
	zc_dereg(c, mr);
}

ssize_t sdp_zcopy_read_locked(struct sdp_conn *c, const struct iovec *iov,
			      int iovcnt, size_t skip, size_t want, int peek)
{
	struct sdp_zc_rx *zr = &c->zc_rx;
	uint32_t thresh = sdp_zcopy_thresh_locked(c), rem;
	size_t done = 0, voff = skip;
	struct sdp_mr *held = NULL;	/* last READ's, dropped after the flush */
	int vi = 0, r;

	if (!zr->active || zr->reading || c->rx_bytes)
		return 0;
	if (c->state == SDP_ST_RESET) {
		/* Nothing can be read any more: forget the advertisements
		 * (the reader then sees the reset). */
		zr->active = 0;
		c->zc_rxq_n = 0;
		c->zc_rxq_bytes = 0;
		return 0;
	}
	rem = zr->len - zr->off;
	/* The whole recv() buffer counts (skip: filled by queued bytes). */
	if (peek || !thresh || c->rd_shut ||
	    skip + want < (thresh < rem ? thresh : rem)) {
		sdp_zcopy_decline_locked(c);
		return 0;
	}
	while (vi < iovcnt && voff >= iov[vi].iov_len)
		voff -= iov[vi++].iov_len;
	while (done < want && zr->active && vi < iovcnt) {
		size_t n = want - done;
		int cancelled;

		rem = zr->len - zr->off;
		/* The next advertisement with little room left: let the
		 * next recv() read it whole rather than a sliver now. */
		if (done && !zr->off && n < (thresh < rem ? thresh : rem))
			break;
		if (n > iov[vi].iov_len - voff)
			n = iov[vi].iov_len - voff;
		if (n > rem)
			n = rem;
		if (n > SDP_ZC_MAX_READ)
			n = SDP_ZC_MAX_READ;
		zc_dereg(c, held);
		held = NULL;
		zr->reading = 1;
		r = sdp_zcopy_rdma_locked(c, 0,
					  (uint8_t *)iov[vi].iov_base + voff,
					  (uint32_t)n, zr->vaddr + zr->off,
					  zr->rkey, &held);
		zr->reading = 0;
		if (r < 0) {
			if (c->state == SDP_ST_RESET)
				return done ? (ssize_t)done : r;
			sdp_zcopy_decline_locked(c);	/* reg_mr failed */
			break;
		}
		zr->off += (uint32_t)n;
		done += n;
		voff += n;
		c->zc_pend_rdcompl += (uint32_t)n;
		c->rx_end += n;
		c->rx_off += n;
		c->stats.bytes_rcvd += n;
		c->stats.zc_rx_bytes += n;
		/* A SrcAvailCancel that came during the READ applies to
		 * every advertisement still held. */
		cancelled = zr->cancel_rcvd;
		zr->cancel_rcvd = 0;
		if (zr->off == zr->len)
			zc_rx_next(c);
		if (cancelled)
			zc_decline_noflush(c);
		if (voff == iov[vi].iov_len) {
			vi++;
			voff = 0;
		}
	}
	if (done || c->zc_pend_sendsm)
		sdp_tx_flush_locked(c, 0);	/* RdmaRdCompl first ... */
	zc_dereg(c, held);			/* ... then the registration */
	return (ssize_t)done;
}
