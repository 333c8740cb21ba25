/* SPDX-License-Identifier: MIT */
/*
 * zcopy_sink.c — Write ZCopy (annex 5.1-5.5: SinkAvail, RdmaWrCompl,
 * SinkAvailCancel, SinkCancelAck) and the per-direction modes (ModeChange,
 * REQ_PIPE).  Read ZCopy lives in zcopy.c; DESIGN.md "ZCopy" and
 * PROTOCOL.md explain how the two coexist.
 *
 * Modes.  Both halves start Combined.  SinkAvail is legal only while the
 * source's send half is Pipelined, and only the source may put it there
 * (ModeChange Pipelined-recv).  So a sink that wants to advertise sets
 * REQ_PIPE in everything it sends (one bare hint if nothing else goes out);
 * a source with ZCopy enabled answers with ModeChange and from then on sends
 * its SrcAvails without inline bytes, as Pipelined mode requires.  It goes
 * back to Combined when its own ZCopy is switched off.  A source in
 * Buffered mode (never ours) is asked back to Combined with Combined-send.
 *
 * Sink.  A blocking recv() of at least the threshold that finds nothing to
 * read registers its buffer (REMOTE_WRITE) for this one call and advertises
 * it: SinkAvail with NonDiscards = data-carrying messages received so far.
 * It then sleeps until the source is done with the buffer:
 *  - RdmaWrCompl(n): n bytes were written; recv() returns them;
 *  - any data-carrying message (Data, SrcAvail): the source dropped the
 *    advertisement when it sent that (annex 5.4), so it ends empty and the
 *    data is read as usual;
 *  - DisConn, or a ModeChange out of Pipelined: ends empty too;
 *  - a signal, SO_RCVTIMEO or close(): SinkAvailCancel, then wait for the
 *    SinkCancelAck (or an RdmaWrCompl / data that crossed the cancel).
 * Only then is the buffer deregistered and handed back: the source can no
 * longer write into it.
 *
 * Source.  A SinkAvail is stale, and dropped, when its NonDiscards differs
 * from our count of data-carrying messages sent: data crossed it and the
 * sink will read that data first (gen1's rule).  A pending SinkAvail is
 * used by the next blocking send() of at least the threshold with nothing
 * queued before it: one RDMA WRITE of min(send, buffer) bytes, then
 * RdmaWrCompl (which ends the advertisement: partial fulfilment).  Any data
 * message sent instead supersedes it.  Every SinkAvailCancel is answered
 * with SinkCancelAck, after the RdmaWrCompl of a write that crossed it.
 *
 * Every function here is called with c->lock held.
 */
#include <errno.h>
#include <string.h>

#include "engine/config.h"
#include "engine/conn.h"
#include "engine/zcopy.h"

static void snk_protocol_error(struct sdp_conn *c, const char *what,
			       uint8_t mid)
{
	sdp_log(SDP_LOG_ERR, "conn %u: protocol error: %s (%s) in %s", c->id,
		what, sdp_mid_name(mid), sdp_state_name(c->state));
	c->abort_sent = 0;
	sdp_conn_reset_locked(c, -ECONNRESET, SDP_REASON_PROTOCOL);
}

static int post_hdr(struct sdp_conn *c, uint8_t mid, uint32_t len)
{
	struct sdp_msg m;

	memset(&m, 0, sizeof(m));
	m.bsdh.mid = mid;
	m.h.len = len;
	return sdp_tx_post_msg_any_locked(c, &m, NULL, 0, 0);
}

static int post_mch(struct sdp_conn *c, uint8_t byte)
{
	struct sdp_msg m;

	memset(&m, 0, sizeof(m));
	m.bsdh.mid = SDP_MID_MODE_CHANGE;
	m.h.mch = byte;
	return sdp_tx_post_msg_any_locked(c, &m, NULL, 0, 0);
}

static uint8_t mch_byte(int send_half, unsigned mode)
{
	return (uint8_t)((send_half ? SDP_MCH_SEND_HALF : 0) |
			 (mode << SDP_MCH_MODE_SHIFT));
}

/* Our sink advertisement is over without data (dropped by the source). */
static void snk_end_empty(struct sdp_conn *c)
{
	struct sdp_zc_snk *sk = &c->zc_snk;

	if (!sk->active || sk->ended)
		return;
	sk->ended = 1;
	sk->written = 0;
	c->stats.zc_wr_sink_unused++;
}

/* The peer's advertisement will not be used. */
static void peer_snk_drop(struct sdp_conn *c)
{
	struct sdp_zc_snk_peer *sp = &c->zc_snk_peer;

	if (!sp->active || sp->writing)
		return;
	sp->active = 0;
	c->stats.zc_wr_src_unused++;
}

/* ---- modes ------------------------------------------------------------------ */

void sdp_zcopy_mode_decide_locked(struct sdp_conn *c)
{
	int on;

	if (c->zc_mch_due || !c->qp)
		return;
	on = sdp_zcopy_thresh_locked(c) && sdp_zcopy_rdma_ok_locked(c);
	if (c->zc_mode_tx == SDP_MODE_COMBINED && c->zc_peer_pipe && on) {
		c->zc_pend_mch = mch_byte(0, SDP_MODE_PIPELINED);
		c->zc_mch_due = 1;
	} else if (c->zc_mode_tx == SDP_MODE_PIPELINED && !on) {
		c->zc_pend_mch = mch_byte(0, SDP_MODE_COMBINED);
		c->zc_mch_due = 1;
	}
}

void sdp_zcopy_mode_pipelined_self_locked(struct sdp_conn *c)
{
	/* Only a peer that holds several advertisements gains from it
	 * (OFED announces 1 and never expects a ModeChange). */
	if (c->zc_mch_due || !c->qp || c->zc_mode_tx != SDP_MODE_COMBINED ||
	    c->zc_peer_max_adverts < 2 || sdp_cfg.zcopy_adverts < 2)
		return;
	c->zc_pend_mch = mch_byte(0, SDP_MODE_PIPELINED);
	c->zc_mch_due = 1;
	sdp_tx_flush_locked(c, 0);
}

void sdp_zcopy_rx_flags_locked(struct sdp_conn *c, uint8_t flags)
{
	/* REQ_PIPE is a hint (annex CA4-8).  Once asked, we stay Pipelined
	 * while our ZCopy is on: gen1 sets it on RdmaRdCompl only, and
	 * following every clear/set would thrash the mode. */
	if ((flags & SDP_FLAG_REQ_PIPE) && !c->zc_peer_pipe) {
		c->zc_peer_pipe = 1;
		sdp_zcopy_mode_decide_locked(c);
	}
}

int sdp_zcopy_rx_mode_change_locked(struct sdp_conn *c, const struct sdp_msg *m)
{
	unsigned mode = (m->h.mch & SDP_MCH_MODE_MASK) >> SDP_MCH_MODE_SHIFT;
	unsigned old = c->zc_mode_rx;

	if (m->h.mch & SDP_MCH_SEND_HALF) {
		/* The sink may only bring a Buffered source to Combined. */
		if (mode != SDP_MODE_COMBINED ||
		    c->zc_mode_tx != SDP_MODE_BUFFERED) {
			snk_protocol_error(c, "ModeChange for our send half "
					   "not allowed", m->bsdh.mid);
			return -EPROTO;
		}
		c->zc_mode_tx = SDP_MODE_COMBINED;
		return 0;
	}
	if (!((mode == SDP_MODE_BUFFERED && old == SDP_MODE_COMBINED &&
	       !c->zc_rx.active) ||
	      (mode == SDP_MODE_PIPELINED && old == SDP_MODE_COMBINED) ||
	      (mode == SDP_MODE_COMBINED && old == SDP_MODE_PIPELINED))) {
		snk_protocol_error(c, mode == old ?
				   "ModeChange to the mode in effect" :
				   "ModeChange not allowed from this mode",
				   m->bsdh.mid);
		return -EPROTO;
	}
	c->zc_mode_rx = (uint8_t)mode;
	/* Out of Pipelined the source drops our SinkAvail (it treats one
	 * that crossed the ModeChange as stale). */
	if (mode != SDP_MODE_PIPELINED)
		snk_end_empty(c);
	return 0;
}

int sdp_zcopy_rx_check_src_avail_locked(struct sdp_conn *c,
					const struct sdp_msg *m)
{
	const char *bad = NULL;

	if (c->zc_mode_rx == SDP_MODE_BUFFERED)
		bad = "SrcAvail in Buffered mode";
	else if (c->zc_rx.active && c->zc_mode_rx == SDP_MODE_COMBINED)
		bad = "second SrcAvail outstanding in Combined mode";
	else if (sdp_zcopy_rx_held(c) + c->zc_snk_peer.active >=
		 SDP_ZC_MAX_ADVERTS)
		bad = "more advertisements outstanding than our MaxAdverts";
	else if (c->zc_mode_rx == SDP_MODE_COMBINED && !m->payload_len)
		bad = "SrcAvail without inline data in Combined mode";
	else if (c->zc_mode_rx == SDP_MODE_PIPELINED && m->payload_len)
		bad = "SrcAvail with inline data in Pipelined mode";
	else if (m->h.srcah.len <= m->payload_len)
		bad = "SrcAvail Len not above its inline bytes";
	if (!bad)
		return 0;
	snk_protocol_error(c, bad, m->bsdh.mid);
	return -EPROTO;
}

/* ---- pending control messages ---------------------------------------------- */

int sdp_zcopy_sink_flush_ctl_locked(struct sdp_conn *c)
{
	struct sdp_zc_snk *sk = &c->zc_snk;

	if (c->zc_wrcompl_due) {
		if (!sdp_zcopy_can_post_ctl_locked(c) ||
		    post_hdr(c, SDP_MID_RDMA_WR_COMPL, c->zc_pend_wrcompl) < 0)
			return 0;	/* data stays behind it */
		c->zc_wrcompl_due = 0;
		c->zc_pend_wrcompl = 0;
	}
	/* While a write is in flight the acknowledgement waits: its
	 * RdmaWrCompl must reach the sink first, or the sink would free the
	 * buffer under the write. */
	while (c->zc_pend_cancel_ack && !c->zc_snk_peer.writing) {
		if (!sdp_zcopy_can_post_ctl_locked(c) ||
		    post_hdr(c, SDP_MID_SINK_CANCEL_ACK, 0) < 0)
			return 1;
		c->zc_pend_cancel_ack--;
	}
	/* A mode change waits for our SrcAvail and any write to end: the
	 * sink judges both by the mode they were sent in. */
	if (c->zc_mch_due && !c->zc_tx.active && !c->zc_snk_peer.writing &&
	    sdp_zcopy_can_post_ctl_locked(c) &&
	    post_mch(c, c->zc_pend_mch) == 0) {
		c->zc_mch_due = 0;
		c->zc_mode_tx = (uint8_t)((c->zc_pend_mch & SDP_MCH_MODE_MASK) >>
					  SDP_MCH_MODE_SHIFT);
		c->zc_mode_tx_mseq = c->tx_next_mseq - 1;
		c->stats.zc_mode_changes++;
		if (c->zc_mode_tx != SDP_MODE_PIPELINED)
			peer_snk_drop(c);
		sdp_log(SDP_LOG_DEBUG, "conn %u: send half now mode %u", c->id,
			c->zc_mode_tx);
	}
	if (c->zc_mch_csend_due && sdp_zcopy_can_post_ctl_locked(c) &&
	    post_mch(c, mch_byte(1, SDP_MODE_COMBINED)) == 0) {
		c->zc_mch_csend_due = 0;
		c->stats.zc_mode_changes++;
	}
	if (sk->cancel_want && !sk->cancel_sent) {
		if (!sk->active || sk->ended) {
			sk->cancel_want = 0;
		} else if (sdp_zcopy_can_post_ctl_locked(c) &&
			   post_hdr(c, SDP_MID_SINK_AVAIL_CANCEL, 0) == 0) {
			sk->cancel_sent = 1;
			c->zc_cancel_acks_due++;
			c->stats.zc_wr_sink_cancels++;
		}
	}
	if (c->zc_hint_due && sdp_zcopy_can_post_ctl_locked(c) &&
	    sdp_tx_post_ctrl_locked(c, SDP_MID_DATA) == 0)
		c->zc_hint_due = 0;	/* REQ_PIPE rides on it */
	return 1;
}

/* ---- data-carrying messages -------------------------------------------------- */

void sdp_zcopy_tx_data_msg_locked(struct sdp_conn *c, uint8_t mid,
				  uint32_t plen)
{
	if (mid == SDP_MID_DISCONN) {
		peer_snk_drop(c);	/* nothing more will fill it */
		return;
	}
	if (!((mid == SDP_MID_DATA && plen) || mid == SDP_MID_SRC_AVAIL ||
	      (mid == SDP_MID_SINK_AVAIL && plen)))
		return;
	c->zc_data_msgs_tx++;
	peer_snk_drop(c);
}

void sdp_zcopy_rx_data_msg_locked(struct sdp_conn *c)
{
	c->zc_data_msgs_rx++;
	snk_end_empty(c);
}

void sdp_zcopy_rx_disconn_locked(struct sdp_conn *c)
{
	snk_end_empty(c);
}

/* ---- messages to the source -------------------------------------------------- */

int sdp_zcopy_rx_sink_avail_locked(struct sdp_conn *c, const struct sdp_msg *m)
{
	struct sdp_zc_snk_peer *sp = &c->zc_snk_peer;
	const char *stale = NULL;

	c->zc_snk_seen = 1;
	if (!m->h.sinkah.len) {
		snk_protocol_error(c, "SinkAvail of zero bytes", m->bsdh.mid);
		return -EPROTO;
	}
	if (c->zc_mode_tx != SDP_MODE_PIPELINED) {
		/* Sent before the sink saw us leave Pipelined: stale. */
		if (sdp_seq_before(m->bsdh.mseq_ack, c->zc_mode_tx_mseq)) {
			c->stats.zc_wr_src_unused++;
			return 0;
		}
		snk_protocol_error(c, "SinkAvail while our send half is not "
				   "Pipelined", m->bsdh.mid);
		return -EPROTO;
	}
	if (sp->active) {
		snk_protocol_error(c, "second SinkAvail outstanding",
				   m->bsdh.mid);
		return -EPROTO;
	}
	if (m->h.sinkah.non_discards != c->zc_data_msgs_tx)
		stale = "data crossed it";
	else if (c->zc_tx.live)
		stale = "our SrcAvail is outstanding";
	else if (c->disconn_sent || c->wr_shut)
		stale = "we shut down writing";
	if (stale) {
		sdp_log(SDP_LOG_DEBUG, "conn %u: SinkAvail dropped: %s", c->id,
			stale);
		c->stats.zc_wr_src_unused++;
		return 0;
	}
	memset(sp, 0, sizeof(*sp));
	sp->active = 1;
	sp->mseq = m->bsdh.mseq;
	sp->rkey = m->h.sinkah.rkey;
	sp->vaddr = m->h.sinkah.vaddr;
	sp->len = m->h.sinkah.len;
	c->stats.zc_wr_src_adverts++;
	return 0;
}

int sdp_zcopy_rx_sink_cancel_locked(struct sdp_conn *c, const struct sdp_msg *m)
{
	if (!c->zc_snk_seen) {
		snk_protocol_error(c, "SinkAvailCancel with no SinkAvail ever "
				   "received", m->bsdh.mid);
		return -EPROTO;
	}
	/* A write in flight completes first (its RdmaWrCompl goes before
	 * the acknowledgement); otherwise the advertisement is dropped.
	 * Always acknowledged: the sink then knows the buffer is free. */
	peer_snk_drop(c);
	c->zc_pend_cancel_ack++;
	return 0;
}

/* ---- messages to the sink ------------------------------------------------------ */

int sdp_zcopy_rx_wr_compl_locked(struct sdp_conn *c, const struct sdp_msg *m)
{
	struct sdp_zc_snk *sk = &c->zc_snk;

	if (!sk->active || sk->ended) {
		snk_protocol_error(c, "RdmaWrCompl with no SinkAvail "
				   "outstanding", m->bsdh.mid);
		return -EPROTO;
	}
	if (sdp_seq_before(m->bsdh.mseq_ack, sk->mseq)) {
		snk_protocol_error(c, "RdmaWrCompl older than our SinkAvail",
				   m->bsdh.mid);
		return -EPROTO;
	}
	if (m->h.len > sk->len) {
		snk_protocol_error(c, "RdmaWrCompl beyond the advertised "
				   "buffer", m->bsdh.mid);
		return -EPROTO;
	}
	if (!m->h.len) {
		snk_end_empty(c);
		return 0;
	}
	sk->ended = 1;
	sk->written = m->h.len;
	/* The bytes are in the application's buffer already: they are
	 * consumed stream bytes at this point of the message order. */
	c->rx_end += m->h.len;
	c->rx_off += m->h.len;
	c->stats.bytes_rcvd += m->h.len;
	c->stats.zc_wr_rx_bytes += m->h.len;
	return 0;
}

int sdp_zcopy_rx_cancel_ack_locked(struct sdp_conn *c, const struct sdp_msg *m)
{
	struct sdp_zc_snk *sk = &c->zc_snk;

	if (!c->zc_cancel_acks_due) {
		snk_protocol_error(c, "SinkCancelAck with no SinkAvailCancel "
				   "outstanding", m->bsdh.mid);
		return -EPROTO;
	}
	/* Acks come in order: the last one answers the current cancel. */
	if (--c->zc_cancel_acks_due == 0 && sk->cancel_sent)
		snk_end_empty(c);
	return 0;
}

/* ---- sink: recv() ---------------------------------------------------------------- */

/* The contiguous piece of iov at offset skip, at most `want` bytes. */
static size_t iov_piece(const struct iovec *iov, int iovcnt, size_t skip,
			size_t want, uint8_t **p)
{
	int vi = 0;
	size_t n;

	while (vi < iovcnt && skip >= iov[vi].iov_len)
		skip -= iov[vi++].iov_len;
	if (vi == iovcnt)
		return 0;
	n = iov[vi].iov_len - skip;
	*p = (uint8_t *)iov[vi].iov_base + skip;
	return n < want ? n : want;
}

int sdp_zcopy_sink_wanted_locked(struct sdp_conn *c, const struct iovec *iov,
				 int iovcnt, size_t skip, size_t want)
{
	uint32_t t = sdp_zcopy_thresh_locked(c);
	uint8_t *p;

	if (!t || want < t || !sdp_cfg.zcopy_write || c->zc_write_off)
		return 0;
	if ((c->state != SDP_ST_ESTABLISHED && c->state != SDP_ST_FIN_WAIT) ||
	    c->disconn_rcvd || c->rd_shut || c->orphan || c->zc_snk.active ||
	    c->zc_rx.active || c->rx_bytes || !c->qp)
		return 0;
	if (iov_piece(iov, iovcnt, skip, want, &p) < t ||
	    !sdp_zcopy_rdma_ok_locked(c))
		return 0;
	/* The peer's MaxAdverts counts our SrcAvails there too. */
	if (c->zc_tx.live + 1 > c->zc_peer_max_adverts)
		return 0;
	if (c->zc_mode_rx != SDP_MODE_PIPELINED) {
		/* Ask for Pipelined; this recv waits as usual meanwhile. */
		if (!c->zc_want_pipe) {
			c->zc_want_pipe = 1;
			c->zc_hint_due = 1;
		}
		if (c->zc_mode_rx == SDP_MODE_BUFFERED && !c->zc_mch_csend_due) {
			c->zc_mch_csend_due = 1;
			/* Combined suffices for validation from now on. */
			c->zc_mode_rx = SDP_MODE_COMBINED;
		}
		sdp_tx_flush_locked(c, 0);
		return 0;
	}
	return c->tx_credits >= 2;
}

ssize_t sdp_zcopy_sink_recv_locked(struct sdp_conn *c, const struct iovec *iov,
				   int iovcnt, size_t skip, size_t want,
				   uint64_t deadline_ns, int *stop)
{
	struct sdp_zc_snk *sk = &c->zc_snk;
	uint64_t cancel_dl = 0;
	struct sdp_mr *mr = NULL;
	struct sdp_msg m;
	uint8_t *p = NULL;
	size_t len = iov_piece(iov, iovcnt, skip, want, &p);
	uint32_t written;
	int r;

	*stop = 0;
	if (len > SDP_ZC_MAX_ADVERT)
		len = SDP_ZC_MAX_ADVERT;
	r = SDP_TP(c->qp)->reg_mr(c->qp, p, len, SDP_ACCESS_LOCAL_WRITE |
				  SDP_ACCESS_REMOTE_WRITE, &mr);
	if (r < 0)
		return -EAGAIN;
	atomic_fetch_add(&sdp_zcopy_live_mrs, 1);
	memset(&m, 0, sizeof(m));
	m.bsdh.mid = SDP_MID_SINK_AVAIL;
	m.h.sinkah.len = (uint32_t)len;
	m.h.sinkah.rkey = mr->rkey;
	m.h.sinkah.vaddr = mr->remote_addr;
	m.h.sinkah.non_discards = c->zc_data_msgs_rx;
	if (sdp_tx_post_msg_locked(c, &m, NULL, 0, 0) < 0) {
		sdp_zcopy_dereg_locked(c, mr);
		return -EAGAIN;
	}
	memset(sk, 0, sizeof(*sk));
	sk->active = 1;
	sk->mseq = c->tx_next_mseq - 1;
	sk->len = (uint32_t)len;
	sk->mr = mr;
	c->stats.zc_wr_sink_adverts++;

	for (;;) {
		uint32_t seq = SDP_TP(c->qp)->wait_seq(c->qp);
		uint64_t now, dl;

		sdp_conn_progress_locked(c);
		if (sk->ended || c->state == SDP_ST_RESET)
			break;
		if (c->orphan && !sk->cancel_want) {
			sk->cancel_want = 1;	/* closed under us */
			sdp_tx_flush_locked(c, 0);
		}
		now = sdp_now_ns();
		if (sk->cancel_want && !cancel_dl)
			cancel_dl = now +
				SDP_ZC_SINK_CANCEL_TIMEOUT_MS * 1000000ull;
		if (cancel_dl && now >= cancel_dl) {
			sdp_log(SDP_LOG_ERR, "conn %u: SinkAvailCancel never "
				"acknowledged", c->id);
			sdp_conn_reset_locked(c, -ECONNRESET,
					      SDP_REASON_TIMEOUT);
			break;
		}
		dl = cancel_dl;
		if (!*stop && deadline_ns && (!dl || deadline_ns < dl))
			dl = deadline_ns;
		pthread_mutex_unlock(&c->lock);
		r = sdp_conn_wait(c, seq, dl);
		pthread_mutex_lock(&c->lock);
		if (*stop || sk->ended)
			continue;
		if (r == -EINTR ||
		    (r == -ETIMEDOUT && deadline_ns &&
		     sdp_now_ns() >= deadline_ns)) {
			*stop = r == -EINTR ? -EINTR : -EAGAIN;
			sk->cancel_want = 1;
			sdp_tx_flush_locked(c, 0);
		}
	}
	/* Ended (the source will not touch the buffer any more) or reset
	 * (the QP is gone): either way the registration goes now. */
	written = sk->ended ? sk->written : 0;
	sdp_zcopy_dereg_locked(c, sk->mr);
	memset(sk, 0, sizeof(*sk));
	return (ssize_t)written;
}

/* ---- source: send() ------------------------------------------------------------- */

int sdp_zcopy_write_wanted_locked(struct sdp_conn *c, size_t len)
{
	uint32_t t;

	if (!c->zc_snk_peer.active || c->zc_snk_peer.writing)
		return 0;
	t = sdp_zcopy_thresh_locked(c);
	return t && len >= t && sdp_zcopy_rdma_ok_locked(c);
}

ssize_t sdp_zcopy_write_locked(struct sdp_conn *c, const void *p, size_t len)
{
	struct sdp_zc_snk_peer *sp = &c->zc_snk_peer;
	uint32_t n;
	int r;

	/* Everything sent before must be in the stream first. */
	if (!sp->active || sp->writing || c->txq_len || c->zc_tx.active ||
	    sdp_zcopy_tx_blocks_data(c) || c->disconn_sent || c->wr_shut ||
	    (c->state != SDP_ST_ESTABLISHED && c->state != SDP_ST_CLOSE_WAIT))
		return -EAGAIN;
	n = len > sp->len ? sp->len : (uint32_t)len;
	sp->writing = 1;
	r = sdp_zcopy_rdma_locked(c, 1, (void *)(uintptr_t)p, n, sp->vaddr,
				  sp->rkey);
	sp->writing = 0;
	if (r < 0) {
		if (c->state == SDP_ST_RESET)
			return r;
		return -EAGAIN;	/* could not register: BCopy drops it */
	}
	sp->active = 0;
	c->zc_pend_wrcompl = n;
	c->zc_wrcompl_due = 1;
	c->stats.zc_wr_tx_bytes += n;
	c->stats.bytes_sent += n;
	c->tx_queued_off += n;
	sdp_tx_flush_locked(c, 0);
	return n;
}
