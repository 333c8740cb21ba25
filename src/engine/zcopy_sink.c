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
 * longer write into it.  A readv of several large elements advertises
 * each (several SinkAvails, within the peer's MaxAdverts); they are filled
 * in order, a partial fill ends them all (no hole in the stream), and
 * without MSG_WAITALL the rest is cancelled once the first ones are full.
 *
 * Source.  A SinkAvail is stale, and dropped, when its NonDiscards differs
 * from our count of data-carrying messages sent: data crossed it and the
 * sink will read that data first (gen1's rule).  A pending SinkAvail is
 * used by the next blocking send() of at least the threshold with nothing
 * queued before it: one RDMA WRITE of min(send, buffer) bytes, then
 * RdmaWrCompl (which ends the advertisement: partial fulfilment).  Several
 * pending ones are queued and filled oldest first; after a partial fill
 * the rest of that batch is dropped, and SinkAvails the sink sent before
 * it saw that RdmaWrCompl are stale.  Any data
 * message sent instead supersedes it.  Every SinkAvailCancel is answered
 * with SinkCancelAck, after the RdmaWrCompl of a write that crossed it.
 *
 * Every function here is called with c->lock held.
 */
#include <errno.h>
#include <string.h>

#include "base/config.h"
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

/* Our sink advertisements are over (dropped by the source): the ones not
 * filled yet end without data. */
static void snk_end_empty(struct sdp_conn *c)
{
	struct sdp_zc_snk *sk = &c->zc_snk;

	if (!sk->active || sk->ended)
		return;
	sk->ended = 1;
	c->stats.zc_wr_sink_unused += 1 + c->zc_snk_nmore - c->zc_snk_cur;
}

/* The peer's advertisements queued behind the oldest will not be used. */
static void peer_snk_drop_queue(struct sdp_conn *c)
{
	c->stats.zc_wr_src_unused += c->zc_snk_peer_qn;
	c->zc_snk_peer_qn = 0;
}

/* The oldest is done with (written or dropped): the next becomes it. */
static void peer_snk_next(struct sdp_conn *c)
{
	struct sdp_zc_snk_peer *sp = &c->zc_snk_peer;

	if (!c->zc_snk_peer_qn) {
		sp->active = 0;
		return;
	}
	*sp = c->zc_snk_peer_q[c->zc_snk_peer_qhead];
	c->zc_snk_peer_qhead = (c->zc_snk_peer_qhead + 1) % (SDP_ZC_WINDOW - 1);
	c->zc_snk_peer_qn--;
}

/* The peer's advertisements will not be used (a write in flight ends
 * first, and the rest are dropped after it). */
static void peer_snk_drop(struct sdp_conn *c)
{
	struct sdp_zc_snk_peer *sp = &c->zc_snk_peer;

	if (!sp->active)
		return;
	peer_snk_drop_queue(c);
	if (sp->writing) {
		c->zc_snk_peer_drop = 1;
		return;
	}
	sp->active = 0;
	c->zc_snk_peer_drop = 0;
	c->stats.zc_wr_src_unused++;
}

/* ---- modes ------------------------------------------------------------------ */

void sdp_zcopy_mode_decide_locked(struct sdp_conn *c)
{
	int on;

	/* Only a send half in Pipelined, or asked to go there, has a mode to
	 * change: asking whether RDMA works costs shm a cross-memory probe,
	 * which every accepted connection would pay here at its options. */
	if (c->zc_mch_due || !c->qp ||
	    !(c->zc_mode_tx == SDP_MODE_PIPELINED ||
	      (c->zc_mode_tx == SDP_MODE_COMBINED && c->zc_peer_pipe)))
		return;
	on = sdp_zcopy_thresh_locked(c) && sdp_zcopy_rdma_ok_locked(c);
	if (c->zc_mode_tx == SDP_MODE_COMBINED && on) {
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
	else if (sdp_zcopy_rx_held(c) + sdp_zcopy_snk_peer_held(c) >=
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
		if (c->zc_wrcompl_partial) {
			/* The sink ends all its advertisements on it: those
			 * it sent before seeing it are stale. */
			c->zc_wrcompl_partial = 0;
			c->zc_wrcompl_end_mseq = c->tx_next_mseq - 1;
			c->zc_wrcompl_end_ever = 1;
		}
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
	struct sdp_zc_snk_peer *sp = &c->zc_snk_peer, *nx;
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
	if (sdp_zcopy_rx_held(c) + sdp_zcopy_snk_peer_held(c) >=
	    SDP_ZC_MAX_ADVERTS) {
		snk_protocol_error(c, "more advertisements outstanding than "
				   "our MaxAdverts", m->bsdh.mid);
		return -EPROTO;
	}
	if (m->h.sinkah.non_discards != c->zc_data_msgs_tx)
		stale = "data crossed it";
	else if (c->zc_tx.live)
		stale = "our SrcAvail is outstanding";
	else if (c->disconn_sent || c->wr_shut)
		stale = "we shut down writing";
	else if ((c->zc_wrcompl_due && c->zc_wrcompl_partial) ||
		 (c->zc_wrcompl_end_ever &&
		  sdp_seq_before(m->bsdh.mseq_ack, c->zc_wrcompl_end_mseq)))
		stale = "a partial RdmaWrCompl ended its batch";
	else if (sp->active && c->zc_snk_peer_drop)
		stale = "the ones before it are dropped";
	if (stale) {
		sdp_log(SDP_LOG_DEBUG, "conn %u: SinkAvail dropped: %s", c->id,
			stale);
		c->stats.zc_wr_src_unused++;
		return 0;
	}
	/* Several (a readv of several large elements): filled in order. */
	nx = sp->active ? &c->zc_snk_peer_q[(c->zc_snk_peer_qhead +
			  c->zc_snk_peer_qn++) % (SDP_ZC_WINDOW - 1)] : sp;
	memset(nx, 0, sizeof(*nx));
	nx->active = 1;
	nx->mseq = m->bsdh.mseq;
	nx->rkey = m->h.sinkah.rkey;
	nx->vaddr = m->h.sinkah.vaddr;
	nx->len = m->h.sinkah.len;
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

/* Our i-th SinkAvail of this recv() (0 = zc_snk). */
static uint32_t snk_mseq(const struct sdp_conn *c, uint32_t i)
{
	return i ? c->zc_snk_more[i - 1].mseq : c->zc_snk.mseq;
}

static uint32_t snk_len(const struct sdp_conn *c, uint32_t i)
{
	return i ? c->zc_snk_more[i - 1].len : c->zc_snk.len;
}

int sdp_zcopy_rx_wr_compl_locked(struct sdp_conn *c, const struct sdp_msg *m)
{
	struct sdp_zc_snk *sk = &c->zc_snk;
	uint32_t i = c->zc_snk_cur, n = m->h.len;

	if (!sk->active || sk->ended) {
		snk_protocol_error(c, "RdmaWrCompl with no SinkAvail "
				   "outstanding", m->bsdh.mid);
		return -EPROTO;
	}
	/* It reports the oldest outstanding one (annex 3.5). */
	if (sdp_seq_before(m->bsdh.mseq_ack, snk_mseq(c, i))) {
		snk_protocol_error(c, "RdmaWrCompl older than our SinkAvail",
				   m->bsdh.mid);
		return -EPROTO;
	}
	if (n > snk_len(c, i)) {
		snk_protocol_error(c, "RdmaWrCompl beyond the advertised "
				   "buffer", m->bsdh.mid);
		return -EPROTO;
	}
	if (!n) {
		snk_end_empty(c);
		return 0;
	}
	if (i)
		c->zc_snk_more[i - 1].written = n;
	else
		sk->written = n;
	/* The bytes are in the application's buffer already: they are
	 * consumed stream bytes at this point of the message order. */
	c->rx_end += n;
	c->rx_off += n;
	c->stats.bytes_rcvd += n;
	c->stats.zc_wr_rx_bytes += n;
	/* Filled whole: the next one is the oldest.  Partly (or the last):
	 * this ends them all, the stream must not have a hole; the source
	 * drops the rest on its side. */
	c->zc_snk_cur++;
	if (n < snk_len(c, i) || c->zc_snk_cur == 1 + c->zc_snk_nmore)
		snk_end_empty(c);
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

/* Register [p, p+len) for the source's RDMA WRITE and post its SinkAvail. */
static int snk_post(struct sdp_conn *c, uint8_t *p, uint32_t len,
		    struct sdp_mr **mrp, uint32_t *mseq)
{
	struct sdp_mr *mr = NULL;
	struct sdp_msg m;

	if (SDP_TP(c->qp)->reg_mr(c->qp, p, len, SDP_ACCESS_LOCAL_WRITE |
				  SDP_ACCESS_REMOTE_WRITE, &mr) < 0)
		return -EAGAIN;
	atomic_fetch_add(&sdp_zcopy_live_mrs, 1);
	memset(&m, 0, sizeof(m));
	m.bsdh.mid = SDP_MID_SINK_AVAIL;
	m.h.sinkah.len = len;
	m.h.sinkah.rkey = mr->rkey;
	m.h.sinkah.vaddr = mr->remote_addr;
	m.h.sinkah.non_discards = c->zc_data_msgs_rx;
	if (sdp_tx_post_msg_locked(c, &m, NULL, 0, 0) < 0) {
		sdp_zcopy_dereg_locked(c, mr);
		return -EAGAIN;
	}
	*mrp = mr;
	*mseq = c->tx_next_mseq - 1;
	c->stats.zc_wr_sink_adverts++;
	return 0;
}

/* More SinkAvails after the first piece [skip, skip+first): the next
 * iovec elements, whole, each of at least the threshold, while the peer's
 * MaxAdverts and our window allow. */
static void snk_post_more(struct sdp_conn *c, const struct iovec *iov,
			  int iovcnt, size_t skip, size_t want, size_t first)
{
	uint32_t t = sdp_zcopy_thresh_locked(c), room = c->zc_peer_max_adverts;
	size_t off = first;
	uint8_t *p = NULL;

	if (room > SDP_ZC_WINDOW)
		room = SDP_ZC_WINDOW;
	if (room > sdp_cfg.zcopy_adverts)
		room = sdp_cfg.zcopy_adverts;
	room = room > c->zc_tx.live + 1 ? room - c->zc_tx.live - 1 : 0;
	/* Only if the first piece ends its element: no hole in between. */
	if (first == SDP_ZC_MAX_ADVERT)
		return;
	while (c->zc_snk_nmore < room && off < want &&
	       c->tx_credits >= 2) {
		struct sdp_zc_snk_more *mo = &c->zc_snk_more[c->zc_snk_nmore];
		size_t n = iov_piece(iov, iovcnt, skip + off, want - off, &p);

		if (n < t || n >= SDP_ZC_MAX_ADVERT)
			break;	/* short, or a piece of a huge element */
		memset(mo, 0, sizeof(*mo));
		if (snk_post(c, p, (uint32_t)n, &mo->mr, &mo->mseq) < 0)
			break;
		mo->len = (uint32_t)n;
		c->zc_snk_nmore++;
		off += n;
	}
}

ssize_t sdp_zcopy_sink_recv_locked(struct sdp_conn *c, const struct iovec *iov,
				   int iovcnt, size_t skip, size_t want,
				   int waitall, uint64_t deadline_ns, int *stop)
{
	struct sdp_zc_snk *sk = &c->zc_snk;
	uint64_t cancel_dl = 0;
	struct sdp_mr *mr = NULL;
	uint8_t *p = NULL;
	size_t len = iov_piece(iov, iovcnt, skip, want, &p);
	uint32_t written, mseq, i;
	int r;

	*stop = 0;
	if (len > SDP_ZC_MAX_ADVERT)
		len = SDP_ZC_MAX_ADVERT;
	if (snk_post(c, p, (uint32_t)len, &mr, &mseq) < 0)
		return -EAGAIN;
	memset(sk, 0, sizeof(*sk));
	sk->active = 1;
	sk->mseq = mseq;
	sk->len = (uint32_t)len;
	sk->mr = mr;
	c->zc_snk_nmore = 0;
	c->zc_snk_cur = 0;
	/* A readv of several large elements: each its own SinkAvail. */
	if (len < want)
		snk_post_more(c, iov, iovcnt, skip, want, len);

	for (;;) {
		uint32_t seq = SDP_TP(c->qp)->wait_seq(c->qp);
		uint64_t now, dl;

		sdp_conn_progress_locked(c);
		if (sk->ended || c->state == SDP_ST_RESET)
			break;
		if ((c->orphan || (!waitall && c->zc_snk_cur)) &&
		    !sk->cancel_want) {
			/* Closed under us; or the first buffers are full and
			 * this recv() returns them: take the rest back. */
			sk->cancel_want = 1;
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
	/* Ended (the source will not touch the buffers any more) or reset
	 * (the QP is gone): either way the registrations go now.  What was
	 * written is a prefix of the buffers, already counted as read. */
	written = sk->written;
	sdp_zcopy_dereg_locked(c, sk->mr);
	for (i = 0; i < c->zc_snk_nmore; i++) {
		written += c->zc_snk_more[i].written;
		sdp_zcopy_dereg_locked(c, c->zc_snk_more[i].mr);
	}
	memset(sk, 0, sizeof(*sk));
	memset(c->zc_snk_more, 0, sizeof(c->zc_snk_more));
	c->zc_snk_nmore = 0;
	c->zc_snk_cur = 0;
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
	struct sdp_mr *mr = NULL;
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
				  sp->rkey, &mr);
	sp->writing = 0;
	if (r < 0) {
		if (c->state == SDP_ST_RESET)
			return r;
		return -EAGAIN;	/* could not register: BCopy drops it */
	}
	/* Filled whole: the next advertisement (same recv) is next in the
	 * stream.  Partly: the sink ends them all on this RdmaWrCompl. */
	if (n == sp->len && !c->zc_snk_peer_drop) {
		peer_snk_next(c);
	} else {
		peer_snk_drop_queue(c);
		sp->active = 0;
		c->zc_wrcompl_partial = n < sp->len;
	}
	c->zc_snk_peer_drop = 0;
	c->zc_pend_wrcompl = n;
	c->zc_wrcompl_due = 1;
	c->stats.zc_wr_tx_bytes += n;
	c->stats.bytes_sent += n;
	c->tx_queued_off += n;
	sdp_tx_flush_locked(c, 0);	/* RdmaWrCompl before the dereg */
	sdp_zcopy_dereg_locked(c, mr);
	return n;
}
