/* SPDX-License-Identifier: MIT */
/*
 * zcopy.c — Read ZCopy, Combined mode (annex §5.1-5.5), over the transport
 * interface: reg_mr + SrcAvail at the source, RDMA READ + RdmaRdCompl (or
 * SendSm) at the sink, SrcAvailCancel and its acknowledgement.
 *
 * Source: the thread blocked in send() owns the advertisement.  It registers
 * the application's buffer (REMOTE_READ) for this one send only — no
 * registration cache, so a buffer unmapped or reallocated between sends can
 * never be read through a stale translation — sends SrcAvail with the first
 * SDP_ZC_INLINE bytes inline, and sleeps until RdmaRdCompl totals cover the
 * rest or a SendSm ends it; it deregisters before returning.  A signal, the
 * send timeout or SDP_ZCOPY_ADV_TIMEOUT_MS without any sign of the sink
 * reading cancel it (SrcAvailCancel, then wait for the acknowledgement:
 * SendSm, or RdmaRdCompl covering everything).
 *
 * Sink: the SrcAvail's inline bytes are queued as ordinary stream data; the
 * advertised remainder follows them in the stream.  When a recv() reaches it
 * with a buffer of at least min(threshold, remaining) bytes, the remainder is
 * RDMA-read straight into the application's buffer (registered LOCAL_WRITE
 * for that read only) and reported with RdmaRdCompl.  Otherwise (small
 * buffer, MSG_PEEK, ZCopy off, no reader within the hold time, closed socket)
 * the sink declines with SendSm and the source sends the rest by BCopy: the
 * private receive buffers belong to the peer's SENDs, so there is nowhere
 * else to read into.
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

#include "engine/config.h"
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

static void zc_protocol_error(struct sdp_conn *c, const char *what, uint8_t mid)
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

/* Decline without flushing (the flush may be our caller). */
static void zc_decline_noflush(struct sdp_conn *c)
{
	if (!c->zc_rx.active)
		return;
	c->zc_rx.active = 0;
	c->zc_rx.cancel_rcvd = 0;
	c->zc_pend_sendsm++;
	c->stats.zc_rx_declined++;
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
	}
	if (c->zc_tx.cancel_want && !c->zc_tx.cancel_sent) {
		if (!c->zc_tx.active || c->zc_tx.ended) {
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

/* ---- source ---------------------------------------------------------------- */

static void zc_request_cancel(struct sdp_conn *c)
{
	if (c->zc_tx.cancel_want || c->zc_tx.ended)
		return;
	c->zc_tx.cancel_want = 1;
	sdp_tx_flush_locked(c, 0);
}

ssize_t sdp_zcopy_send_locked(struct sdp_conn *c, const void *p, size_t len,
			      uint64_t deadline_ns, enum sdp_zc_end *end,
			      int *stop_err)
{
	const uint64_t adv_ns = sdp_cfg.zcopy_adv_timeout_ms * 1000000ull;
	struct sdp_zc_tx *zt = &c->zc_tx;
	uint32_t chunk, inl, room;
	uint64_t cancel_dl = 0;
	struct sdp_mr *mr = NULL;
	struct sdp_sge sg;
	struct sdp_msg m;
	int stop = 0, r;
	ssize_t taken;

	*end = SDP_ZC_DONE;
	*stop_err = 0;
	if (zt->active || c->txq_len || c->tx_credits < ZC_MIN_CREDITS ||
	    sdp_zcopy_tx_blocks_data(c) ||
	    c->zc_mode_tx == SDP_MODE_BUFFERED ||
	    !c->qp || len < 2 ||
	    c->peer_rcv_sz <= sdp_wire_hdr_size(SDP_MID_SRC_AVAIL))
		return -EAGAIN;
	chunk = len > SDP_ZC_MAX_ADVERT ? SDP_ZC_MAX_ADVERT : (uint32_t)len;
	room = c->peer_rcv_sz - sdp_wire_hdr_size(SDP_MID_SRC_AVAIL);
	/* Combined mode: at least one byte inline; Pipelined: none (5.1). */
	inl = c->zc_mode_tx == SDP_MODE_PIPELINED ? 0 : SDP_ZC_INLINE;
	if (inl > room)
		inl = room;
	if (inl > chunk - 1)
		inl = chunk - 1;
	r = SDP_TP(c->qp)->reg_mr(c->qp, (void *)(uintptr_t)p, chunk,
				  SDP_ACCESS_REMOTE_READ, &mr);
	if (r < 0)
		return r;
	atomic_fetch_add(&sdp_zcopy_live_mrs, 1);

	memset(&m, 0, sizeof(m));
	m.bsdh.mid = SDP_MID_SRC_AVAIL;
	m.h.srcah.len = chunk;
	m.h.srcah.rkey = mr->rkey;
	m.h.srcah.vaddr = mr->remote_addr;
	sg.addr = (uint64_t)(uintptr_t)p;
	sg.length = inl;
	sg.lkey = 0;
	r = sdp_tx_post_msg_locked(c, &m, inl ? &sg : NULL, inl ? 1 : 0, inl);
	if (r < 0) {
		zc_dereg(c, mr);
		return r;
	}
	memset(zt, 0, sizeof(*zt));
	zt->active = 1;
	zt->mseq = c->tx_next_mseq - 1;
	zt->len = chunk;
	zt->inl = inl;
	zt->mr = mr;
	zt->progress_ns = sdp_now_ns();
	c->zc_last_tx_mseq = zt->mseq;
	c->zc_ever_tx = 1;
	c->zc_sendsm_grace = 0;
	c->stats.zc_tx_adverts++;

	for (;;) {
		uint32_t seq = SDP_TP(c->qp)->wait_seq(c->qp);
		uint64_t now, dl;

		sdp_conn_progress_locked(c);
		if (zt->ended || c->state == SDP_ST_RESET)
			break;
		now = sdp_now_ns();
		if (!zt->cancel_want && now - zt->progress_ns >= adv_ns) {
			/* The sink shows no sign of reading (busy, or blocked
			 * itself): take the buffer back, send by BCopy. */
			sdp_log(SDP_LOG_DEBUG, "conn %u: SrcAvail unanswered, "
				"cancelling", c->id);
			zc_request_cancel(c);
		}
		if (zt->cancel_want && !cancel_dl)
			cancel_dl = now + SDP_ZC_CANCEL_TIMEOUT_MS * 1000000ull;
		if (cancel_dl && now >= cancel_dl) {
			sdp_log(SDP_LOG_ERR, "conn %u: SrcAvailCancel never "
				"acknowledged", c->id);
			sdp_conn_reset_locked(c, -ECONNRESET,
					      SDP_REASON_TIMEOUT);
			break;
		}
		dl = cancel_dl ? cancel_dl : zt->progress_ns + adv_ns;
		if (!stop && deadline_ns && deadline_ns < dl)
			dl = deadline_ns;
		pthread_mutex_unlock(&c->lock);
		r = sdp_conn_wait(c, seq, dl);
		pthread_mutex_lock(&c->lock);
		if (r == -EINTR && !stop) {
			stop = -EINTR;
			zc_request_cancel(c);
		} else if (r == -ETIMEDOUT && !stop && deadline_ns &&
			   sdp_now_ns() >= deadline_ns) {
			stop = -EAGAIN;
			zc_request_cancel(c);
		}
	}

	taken = (ssize_t)zt->inl + zt->rd_done;
	if (zt->declined)
		*end = SDP_ZC_DECLINED;
	if (zt->cancel_sent && !zt->declined)
		c->zc_sendsm_grace = 1;	/* full read crossed our cancel */
	if (stop && zt->ended) {
		*end = SDP_ZC_STOPPED;
		*stop_err = stop;
	}
	if (!zt->ended)
		*end = SDP_ZC_STOPPED;	/* reset: the caller reports it */
	c->stats.zc_tx_bytes += zt->rd_done;
	c->stats.bytes_sent += zt->rd_done;
	c->tx_queued_off += (uint64_t)taken;
	zc_dereg(c, zt->mr);
	memset(zt, 0, sizeof(*zt));
	/* BCopy data held back behind the advertisement may go now. */
	sdp_tx_flush_locked(c, 0);
	return taken;
}

int sdp_zcopy_rx_rd_compl_locked(struct sdp_conn *c, const struct sdp_msg *m)
{
	struct sdp_zc_tx *zt = &c->zc_tx;

	if (!zt->active || zt->ended ||
	    sdp_seq_before(m->bsdh.mseq_ack, zt->mseq)) {
		if (c->zc_ever_tx &&
		    sdp_seq_before(m->bsdh.mseq_ack, c->zc_last_tx_mseq))
			return 0;	/* older than our SrcAvail: ignored */
		zc_protocol_error(c, "RdmaRdCompl with nothing outstanding",
				  m->bsdh.mid);
		return -EPROTO;
	}
	if (m->h.len > zt->len - zt->inl - zt->rd_done) {
		zc_protocol_error(c, "RdmaRdCompl beyond the advertisement",
				  m->bsdh.mid);
		return -EPROTO;
	}
	zt->rd_done += m->h.len;
	zt->progress_ns = sdp_now_ns();
	if (zt->rd_done == zt->len - zt->inl)
		zt->ended = 1;
	return 0;
}

int sdp_zcopy_rx_send_sm_locked(struct sdp_conn *c, const struct sdp_msg *m)
{
	struct sdp_zc_tx *zt = &c->zc_tx;

	if (zt->active && !zt->ended &&
	    !sdp_seq_before(m->bsdh.mseq_ack, zt->mseq)) {
		zt->ended = 1;
		zt->declined = 1;
		c->stats.zc_tx_declined++;
		return 0;
	}
	if (c->zc_sendsm_grace && !zt->active) {
		/* Our cancel crossed a complete read; the sink may ack it. */
		c->zc_sendsm_grace = 0;
		return 0;
	}
	if (c->zc_ever_tx &&
	    sdp_seq_before(m->bsdh.mseq_ack, c->zc_last_tx_mseq))
		return 0;	/* older than our SrcAvail: ignored */
	zc_protocol_error(c, "SendSm with no SrcAvail outstanding", m->bsdh.mid);
	return -EPROTO;
}

/* ---- sink ------------------------------------------------------------------ */

void sdp_zcopy_rx_advert_locked(struct sdp_conn *c, const struct sdp_msg *m)
{
	struct sdp_zc_rx *zr = &c->zc_rx;

	memset(zr, 0, sizeof(*zr));
	zr->active = 1;
	zr->mseq = m->bsdh.mseq;
	zr->rkey = m->h.srcah.rkey;
	zr->vaddr = m->h.srcah.vaddr;
	zr->len = m->h.srcah.len;
	zr->off = m->payload_len;
	c->stats.zc_rx_adverts++;
	c->rx_pulse = 1;
	/* Decline (flushed by the progress step) when ZCopy is off here.
	 * With no recv() in progress, hold it SDP_ZC_HOLD_MS for the next
	 * one, then decline: the application may not read for a long time
	 * (or be blocked advertising its own buffer to us: both sides then
	 * decline the other's and fall back to BCopy), and the source must
	 * not stay blocked on us. */
	if (!sdp_zcopy_thresh_locked(c) || !sdp_zcopy_rdma_ok_locked(c) ||
	    c->rd_shut || c->orphan)
		zc_decline_noflush(c);
	else if (!c->zc_readers)
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
			  uint32_t n, uint64_t raddr, uint32_t rkey)
{
	const uint64_t wrid = write ? ZC_WRID_WRITE : ZC_WRID_READ;
	struct sdp_mr *mr = NULL;
	struct sdp_send_wr wr;
	struct sdp_sge sge;
	struct sdp_wc wc[16];
	enum sdp_wc_status st = SDP_WC_SUCCESS;
	int r, k, i;

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
	if (r < 0) {
		zc_dereg(c, mr);
		sdp_conn_reset_locked(c, -ECONNRESET, SDP_REASON_TRANSPORT);
		return -ECONNRESET;
	}
	/* The completion may be polled here or, while we sleep without the
	 * lock, by another thread's progress step on this connection (a
	 * transport whose RDMA takes time: verbs); either records it in
	 * zc_rdma_done. */
	while (!c->zc_rdma_done[write]) {
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
		/* An asynchronous transport: sleep for the completion. */
		pthread_mutex_unlock(&c->lock);
		SDP_TP(c->qp)->wait(c->qp, seq, 10);
		pthread_mutex_lock(&c->lock);
	}
	st = c->zc_rdma_done[write] ? (enum sdp_wc_status)c->zc_rdma_st[write] :
				      SDP_WC_WR_FLUSH_ERR;
	c->zc_rdma_done[write] = 0;
	zc_dereg(c, mr);
	if (st != SDP_WC_SUCCESS) {
		sdp_log(SDP_LOG_INFO, "conn %u: RDMA %s failed: %s", c->id,
			write ? "WRITE" : "READ", sdp_wc_status_str(st));
		sdp_conn_reset_locked(c, -ECONNRESET, SDP_REASON_TRANSPORT);
		return -ECONNRESET;
	}
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
	int vi = 0, r;

	if (!zr->active || zr->reading || c->rx_bytes)
		return 0;
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

		if (n > iov[vi].iov_len - voff)
			n = iov[vi].iov_len - voff;
		if (n > zr->len - zr->off)
			n = zr->len - zr->off;
		if (n > SDP_ZC_MAX_READ)
			n = SDP_ZC_MAX_READ;
		zr->reading = 1;
		r = sdp_zcopy_rdma_locked(c, 0,
					  (uint8_t *)iov[vi].iov_base + voff,
					  (uint32_t)n, zr->vaddr + zr->off,
					  zr->rkey);
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
		if (zr->off == zr->len)
			zr->active = 0;
		else if (zr->cancel_rcvd)
			zc_decline_noflush(c);
		if (voff == iov[vi].iov_len) {
			vi++;
			voff = 0;
		}
	}
	if (done || c->zc_pend_sendsm)
		sdp_tx_flush_locked(c, 0);
	return (ssize_t)done;
}
