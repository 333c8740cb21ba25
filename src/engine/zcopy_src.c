/* SPDX-License-Identifier: MIT */
/*
 * zcopy_src.c — Read ZCopy, the data source: the SrcAvails of a blocking
 * send(), their accounting (RdmaRdCompl, SendSm) and SrcAvailCancel.
 *
 * The thread blocked in send() owns its advertisements.  Each one is a
 * registration (REMOTE_READ) of one piece of the application's buffers,
 * made for this send only — no registration cache, so a buffer unmapped or
 * reallocated between sends can never be read through a stale translation
 * — and is deregistered before send() returns.
 *
 * How many at once (annex 5.1):
 *  - Combined mode: one, with SDP_ZC_INLINE bytes inline;
 *  - Pipelined mode: no inline bytes, and a window of several: as many as
 *    the peer's MaxAdverts allows (less our own SinkAvail outstanding
 *    there, which it counts too), at most SDP_ZC_WINDOW and
 *    SDP_ZCOPY_ADVERTS.  Every iovec element of at least the threshold is
 *    its own piece, so a writev of several large elements has them all
 *    advertised at once; SDP_ZCOPY_SPLIT cuts one large buffer into
 *    several pieces.  The window slides: when the oldest advertisement
 *    ends, the next piece is advertised, so the sink finds the next one
 *    waiting instead of a round trip.
 *
 * Accounting with several outstanding (PROTOCOL.md, deviation 4):
 *  - the sink consumes them strictly in stream order, so the bytes of an
 *    RdmaRdCompl fill the oldest live advertisement first, then the next;
 *    more than the live ones the sink had seen (MSeq <= its MSeqAck) hold
 *    is a protocol error;
 *  - a SendSm ends every live advertisement the sink had seen.  A sink that
 *    declines drops all it holds and declines the later ones that crossed
 *    its SendSm as they arrive (zcopy.c), answering each batch with one
 *    SendSm; after a SendSm no more RdmaRdCompl bytes may come for this
 *    send (they would be out of order);
 *  - ended advertisements are therefore always the oldest ones: send()
 *    took the inline and read bytes of those up to the first declined
 *    one, and sends the rest by BCopy once nothing is outstanding.
 *
 * A signal, the send timeout or SDP_ZCOPY_ADV_TIMEOUT_MS without any sign
 * of the sink reading cancel them all (one SrcAvailCancel), then wait for
 * the acknowledgement: SendSm, or RdmaRdCompl covering everything.
 *
 * Every function here is called with c->lock held.
 */
#include <errno.h>
#include <string.h>

#include "base/config.h"
#include "engine/conn.h"
#include "engine/zcopy.h"

#define ZC_MIN_CREDITS 2

static struct sdp_zc_adv *adv_at(struct sdp_zc_tx *zt, uint32_t i)
{
	return &zt->adv[(zt->head + i) % SDP_ZC_WINDOW];
}

/* The oldest advertisement not yet ended (zt->live > 0). */
static struct sdp_zc_adv *first_live(struct sdp_zc_tx *zt)
{
	return adv_at(zt, zt->n - zt->live);
}

/* Bytes of `a` the sink has yet to read. */
static uint32_t zc_unread(const struct sdp_zc_adv *a)
{
	return a->len - a->inl - a->rd_done;
}

/* How many SrcAvails may be outstanding now. */
static uint32_t zc_window(const struct sdp_conn *c)
{
	uint32_t w = c->zc_peer_max_adverts;

	if (c->zc_mode_tx != SDP_MODE_PIPELINED)
		return 1;	/* Combined: at most one (annex 5.1) */
	/* The peer's MaxAdverts counts our SinkAvails there too. */
	w = w > sdp_zcopy_snk_out(c) ? w - sdp_zcopy_snk_out(c) : 1;
	if (w > sdp_cfg.zcopy_adverts)
		w = sdp_cfg.zcopy_adverts;
	if (w > SDP_ZC_WINDOW)
		w = SDP_ZC_WINDOW;
	return w ? w : 1;
}

/* The next piece to advertise at stream offset `skip`: the rest of one
 * iovec element, at most SDP_ZC_MAX_ADVERT (or SDP_ZCOPY_SPLIT in
 * Pipelined mode); 0 when that rest is below the threshold. */
static uint32_t zc_piece(const struct sdp_conn *c, const struct iovec *iov,
			 int iovcnt, size_t skip, const uint8_t **p, int pipe)
{
	uint32_t t = sdp_zcopy_thresh_locked(c), split = sdp_cfg.zcopy_split;
	size_t n = sdp_zcopy_iov_piece(iov, iovcnt, skip, p);

	if (!t || n < t || n < 2)
		return 0;
	if (n > SDP_ZC_MAX_ADVERT)
		n = SDP_ZC_MAX_ADVERT;
	/* Split only where the remainder can still go ZCopy. */
	if (split && pipe && split >= t &&
	    n > split && n - split >= t)
		n = split;
	return (uint32_t)n;
}

static uint32_t zc_next_piece(const struct sdp_conn *c, const struct iovec *iov,
			      int iovcnt, size_t skip, const uint8_t **p)
{
	return zc_piece(c, iov, iovcnt, skip, p,
			c->zc_mode_tx == SDP_MODE_PIPELINED);
}

/* Several pieces to advertise from `skip` on (as in Pipelined mode)? */
static int zc_several(const struct sdp_conn *c, const struct iovec *iov,
		      int iovcnt, size_t skip)
{
	const uint8_t *p;
	uint32_t first = zc_piece(c, iov, iovcnt, skip, &p, 1);

	return first && zc_piece(c, iov, iovcnt, skip + first, &p, 1);
}

/* Register [p, p+len) and post its SrcAvail at the tail of the window. */
static int zc_post_advert(struct sdp_conn *c, const uint8_t *p, uint32_t len)
{
	struct sdp_zc_tx *zt = &c->zc_tx;
	uint32_t inl, room = c->peer_rcv_sz - sdp_wire_hdr_size(SDP_MID_SRC_AVAIL);
	struct sdp_zc_adv *a;
	struct sdp_mr *mr = NULL;
	struct sdp_sge sg;
	struct sdp_msg m;
	int r;

	/* Combined mode: at least one byte inline; Pipelined: none (5.1). */
	inl = c->zc_mode_tx == SDP_MODE_PIPELINED ? 0 : SDP_ZC_INLINE;
	if (inl > room)
		inl = room;
	if (inl > len - 1)
		inl = len - 1;
	r = SDP_TP(c->qp)->reg_mr(c->qp, (void *)(uintptr_t)p, len,
				  SDP_ACCESS_REMOTE_READ, &mr);
	if (r < 0)
		return r;
	atomic_fetch_add(&sdp_zcopy_live_mrs, 1);
	memset(&m, 0, sizeof(m));
	m.bsdh.mid = SDP_MID_SRC_AVAIL;
	m.h.srcah.len = len;
	m.h.srcah.rkey = mr->rkey;
	m.h.srcah.vaddr = mr->remote_addr;
	sg.addr = (uint64_t)(uintptr_t)p;
	sg.length = inl;
	sg.lkey = 0;
	r = sdp_tx_post_msg_locked(c, &m, inl ? &sg : NULL, inl ? 1 : 0, inl);
	if (r < 0) {
		sdp_zcopy_dereg_locked(c, mr);
		return r;
	}
	a = adv_at(zt, zt->n);
	memset(a, 0, sizeof(*a));
	a->mseq = c->tx_next_mseq - 1;
	a->len = len;
	a->inl = inl;
	a->mr = mr;
	zt->n++;
	zt->live++;
	if (zt->live > c->stats.zc_tx_peak)
		c->stats.zc_tx_peak = zt->live;
	c->zc_last_tx_mseq = a->mseq;
	c->zc_ever_tx = 1;
	c->stats.zc_tx_adverts++;
	return 0;
}

/* Retire the oldest advertisement (ended, or the connection is gone):
 * deregister it and return the bytes the peer took of it. */
static uint32_t zc_retire(struct sdp_conn *c)
{
	struct sdp_zc_tx *zt = &c->zc_tx;
	struct sdp_zc_adv *a = adv_at(zt, 0);
	uint32_t taken = a->inl + a->rd_done;

	if (!a->ended)
		zt->live--;
	c->stats.zc_tx_bytes += a->rd_done;
	c->stats.bytes_sent += a->rd_done;
	sdp_zcopy_dereg_locked(c, a->mr);
	memset(a, 0, sizeof(*a));
	zt->head = (zt->head + 1) % SDP_ZC_WINDOW;
	zt->n--;
	return taken;
}

static void zc_request_cancel(struct sdp_conn *c)
{
	if (c->zc_tx.cancel_want || !c->zc_tx.live)
		return;
	c->zc_tx.cancel_want = 1;
	sdp_tx_flush_locked(c, 0);
}

ssize_t sdp_zcopy_send_locked(struct sdp_conn *c, const struct iovec *iov,
			      int iovcnt, size_t skip, uint64_t deadline_ns,
			      enum sdp_zc_end *end, int *stop_err)
{
	const uint64_t adv_ns = sdp_cfg.zcopy_adv_timeout_ms * 1000000ull;
	struct sdp_zc_tx *zt = &c->zc_tx;
	uint64_t cancel_dl = 0;
	size_t next = skip, taken = 0;
	const uint8_t *p = NULL;
	int stop = 0, more = 1, declined = 0, r;
	uint32_t len, due_bytes = 0;
	uint64_t since = 0;
	int waited = -1;		/* wait_rdma's last result */

	*end = SDP_ZC_DONE;
	*stop_err = 0;
	if (zt->active || c->txq_len || c->tx_credits < ZC_MIN_CREDITS ||
	    sdp_zcopy_tx_blocks_data(c) ||
	    c->zc_mode_tx == SDP_MODE_BUFFERED || !c->qp ||
	    c->peer_rcv_sz <= sdp_wire_hdr_size(SDP_MID_SRC_AVAIL))
		return -EAGAIN;
	/* Several pieces: Pipelined mode lets them all be out at once.  The
	 * ModeChange goes first if a credit allows; else one at a time. */
	if (c->zc_mode_tx == SDP_MODE_COMBINED &&
	    zc_several(c, iov, iovcnt, skip))
		sdp_zcopy_mode_pipelined_self_locked(c);
	if (c->tx_credits < ZC_MIN_CREDITS)
		return -EBUSY;	/* the ModeChange took the credit: wait */
	len = zc_next_piece(c, iov, iovcnt, next, &p);
	if (!len)
		return -EAGAIN;
	memset(zt, 0, sizeof(*zt));
	r = zc_post_advert(c, p, len);
	if (r < 0)
		return r;
	next += len;
	zt->active = 1;
	zt->progress_ns = sdp_now_ns();
	c->zc_sendsm_grace = 0;

	for (;;) {
		uint32_t seq = SDP_TP(c->qp)->wait_seq(c->qp);
		uint64_t now, dl;

		sdp_conn_progress_locked(c);
		/* The sink's progress ended our last wait: learn its pace. */
		if (waited >= 0 && zt->progress_ns != since) {
			sdp_zc_pace_learn(&c->zc_pace[SDP_ZC_PACE_SOURCE],
					  zt->progress_ns - since, due_bytes,
					  waited);
			waited = -1;
		}
		/* Ended advertisements are the oldest ones (in-order
		 * consumption): take them off the window. */
		while (zt->n && adv_at(zt, 0)->ended) {
			/* (After a decline nothing later was read: RdmaRdCompl
			 * bytes fill the oldest live one.) */
			declined |= adv_at(zt, 0)->declined;
			taken += zc_retire(c);
		}
		if (c->state == SDP_ST_RESET)
			break;
		/* Slide the window: the next piece goes out while the sink
		 * reads the earlier ones. */
		while (more && !zt->declined && !zt->cancel_want && !stop &&
		       zt->n < zc_window(c) &&
		       c->tx_credits >= ZC_MIN_CREDITS &&
		       !sdp_zcopy_tx_blocks_data(c)) {
			len = zc_next_piece(c, iov, iovcnt, next, &p);
			if (!len || zc_post_advert(c, p, len) < 0) {
				more = 0;	/* the rest by BCopy */
				break;
			}
			next += len;
		}
		if (!zt->n || c->state == SDP_ST_RESET)
			break;
		now = sdp_now_ns();
		if (!zt->cancel_want && now - zt->progress_ns >= adv_ns) {
			/* The sink shows no sign of reading (busy, or blocked
			 * itself): take the buffers back, send by BCopy. */
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
		/* The sink's RdmaRdCompl is due once it reads: wait_rdma,
		 * at the pace the sink has read the earlier ones. */
		since = zt->progress_ns;
		due_bytes = zt->live ? zc_unread(first_live(zt)) : 0;
		pthread_mutex_unlock(&c->lock);
		r = sdp_conn_wait_rdma(c, seq, dl, since,
				       sdp_zc_due(c->zc_pace[SDP_ZC_PACE_SOURCE],
						  since, due_bytes));
		pthread_mutex_lock(&c->lock);
		waited = r;
		if (r == -EINTR && !stop) {
			stop = -EINTR;
			zc_request_cancel(c);
		} else if (r == -ETIMEDOUT && !stop && deadline_ns &&
			   sdp_now_ns() >= deadline_ns) {
			stop = -EAGAIN;
			zc_request_cancel(c);
		}
	}

	if (zt->n) {
		/* Reset: the QP is gone, nothing reads these any more. */
		*end = SDP_ZC_STOPPED;
		while (zt->n)
			taken += zc_retire(c);
	} else if (stop) {
		*end = SDP_ZC_STOPPED;
		*stop_err = stop;
	} else if (declined || zt->declined) {
		*end = SDP_ZC_DECLINED;
	}
	if (zt->cancel_sent && !zt->declined)
		c->zc_sendsm_grace = 1;	/* full read crossed our cancel */
	c->tx_queued_off += (uint64_t)taken;
	memset(zt, 0, sizeof(*zt));
	/* BCopy data held back behind the advertisements may go now. */
	sdp_tx_flush_locked(c, 0);
	return (ssize_t)taken;
}

int sdp_zcopy_rx_rd_compl_locked(struct sdp_conn *c, const struct sdp_msg *m)
{
	struct sdp_zc_tx *zt = &c->zc_tx;
	uint32_t left = m->h.len, room = 0, i;

	if (!zt->live || sdp_seq_before(m->bsdh.mseq_ack, first_live(zt)->mseq)) {
		if (c->zc_ever_tx &&
		    sdp_seq_before(m->bsdh.mseq_ack, c->zc_last_tx_mseq))
			return 0;	/* older than our SrcAvail: ignored */
		sdp_zcopy_protocol_error_locked(c, "RdmaRdCompl with nothing "
						"outstanding", m->bsdh.mid);
		return -EPROTO;
	}
	if (zt->declined && left) {
		/* The sink declined an earlier advertisement: reading a
		 * later one now would put its bytes out of order. */
		sdp_zcopy_protocol_error_locked(c, "RdmaRdCompl after SendSm",
						m->bsdh.mid);
		return -EPROTO;
	}
	for (i = zt->n - zt->live; i < zt->n; i++) {
		struct sdp_zc_adv *a = adv_at(zt, i);

		if (sdp_seq_before(m->bsdh.mseq_ack, a->mseq))
			break;	/* the sink had not seen it */
		room += a->len - a->inl - a->rd_done;
	}
	if (left > room) {
		sdp_zcopy_protocol_error_locked(c, "RdmaRdCompl beyond the "
						"advertisements", m->bsdh.mid);
		return -EPROTO;
	}
	/* In stream order: the oldest live advertisement first. */
	while (left) {
		struct sdp_zc_adv *a = first_live(zt);
		uint32_t rest = zc_unread(a);
		uint32_t k = left < rest ? left : rest;

		a->rd_done += k;
		left -= k;
		if (a->rd_done == a->len - a->inl) {
			a->ended = 1;
			zt->live--;
		}
	}
	zt->progress_ns = sdp_now_ns();
	return 0;
}

int sdp_zcopy_rx_send_sm_locked(struct sdp_conn *c, const struct sdp_msg *m)
{
	struct sdp_zc_tx *zt = &c->zc_tx;

	if (zt->live && !sdp_seq_before(m->bsdh.mseq_ack, first_live(zt)->mseq)) {
		/* It ends every advertisement the sink had seen; those that
		 * crossed it get their own SendSm when they arrive. */
		while (zt->live &&
		       !sdp_seq_before(m->bsdh.mseq_ack, first_live(zt)->mseq)) {
			struct sdp_zc_adv *a = first_live(zt);

			a->ended = 1;
			a->declined = 1;
			zt->live--;
		}
		zt->declined = 1;
		c->stats.zc_tx_declined++;
		return 0;
	}
	if ((zt->active && zt->cancel_sent) || c->zc_sendsm_grace) {
		/* Our cancel crossed a complete read; the sink may ack it. */
		c->zc_sendsm_grace = 0;
		return 0;
	}
	if (c->zc_ever_tx &&
	    sdp_seq_before(m->bsdh.mseq_ack, c->zc_last_tx_mseq))
		return 0;	/* older than our SrcAvail: ignored */
	sdp_zcopy_protocol_error_locked(c, "SendSm with no SrcAvail outstanding",
					m->bsdh.mid);
	return -EPROTO;
}
