/* SPDX-License-Identifier: MIT */
/*
 * rx.c — the receive side of a connection: private receive buffers, message
 * validation and dispatch, the BCopy receive queue, out-of-band data, credit
 * updates, and recv() semantics (blocking, MSG_PEEK, MSG_WAITALL, MSG_OOB).
 *
 * A receive completion is decoded and checked against connection state
 * before anything changes: a malformed or out-of-state message resets the
 * connection (ECONNRESET to the application), never crashes it.
 * Data payload stays in its private buffer until the application copies it
 * out; the buffer is then reposted, which is what returns a credit.
 */
#include <errno.h>
#include <string.h>

#include "base/cancel.h"
#include "engine/appwake.h"
#include "base/config.h"
#include "engine/conn.h"
#include "engine/handover.h"
#include "base/owner.h"
#include "base/sigseen.h"
#include "base/spin.h"
#include "engine/progress.h"
#include "engine/zcopy.h"

static uint8_t *buf_addr(const struct sdp_conn *c, uint32_t idx)
{
	return (uint8_t *)c->rmr->addr + (size_t)idx * c->buf_size;
}

int sdp_rx_post_locked(struct sdp_conn *c, uint32_t idx)
{
	struct sdp_recv_wr wr = {
		.wr_id = idx,
		.sge = {
			.addr = (uint64_t)(uintptr_t)buf_addr(c, idx),
			.length = c->buf_size,
			.lkey = c->rmr->lkey,
		},
	};
	int r = sdp_post_recv(c->qp, &wr);

	if (r == 0)
		c->posted++;
	return r;
}

static void protocol_error(struct sdp_conn *c, const char *what, uint8_t mid)
{
	sdp_log(SDP_LOG_ERR, "conn %u: protocol error: %s (%s) in %s", c->id,
		what, sdp_mid_name(mid), sdp_state_name(c->state));
	c->abort_sent = 0;
	sdp_conn_reset_locked(c, -ECONNRESET, SDP_REASON_PROTOCOL);
}

/* The peer's flags and sequence numbers, validated; updates our credits. */
static int rx_account(struct sdp_conn *c, const struct sdp_bsdh *h)
{
	int32_t cr;

	if (h->mseq != c->rx_mseq + 1) {
		protocol_error(c, "message sequence gap", h->mid);
		return -EPROTO;
	}
	/* The peer cannot acknowledge a message we never sent. */
	if (sdp_seq_before(c->tx_next_mseq - 1, h->mseq_ack)) {
		protocol_error(c, "MSeqAck ahead of our MSeq", h->mid);
		return -EPROTO;
	}
	c->rx_mseq = h->mseq;
	cr = sdp_credits_from_peer(h->bufs, h->mseq_ack, c->tx_next_mseq);
	c->tx_credits = cr > 0 ? cr : 0;
	if (c->nagle_inflight && sdp_seq_after_eq(h->mseq_ack, c->nagle_mseq))
		c->nagle_inflight = 0;
	return 0;
}

static void rx_queue_data(struct sdp_conn *c, uint32_t idx, uint32_t off,
			  uint32_t len, int oob_pres)
{
	struct sdp_rx_seg *seg;

	if (oob_pres) {
		/* Annex: the urgent byte is the last payload byte. */
		uint8_t urg = buf_addr(c, idx)[off + len - 1];

		c->oob_byte = urg;
		c->oob_seen = 1;
		if (c->oob_inline) {
			c->oob_mark = c->rx_end + len - 1;
			c->oob_have = 1;
		} else {
			len--;	/* out of band: not part of the stream */
			c->oob_mark = c->rx_end + len;
			c->oob_have = 1;
		}
	}
	if (len == 0) {
		sdp_rx_post_locked(c, idx);
		return;
	}
	seg = &c->rxq[(c->rxq_head + c->rxq_count) % c->nbufs];
	seg->buf = idx;
	seg->off = off;
	seg->len = len;
	c->rxq_count++;
	c->rx_bytes += len;
	c->rx_end += len;
	c->rx_pulse = 1;
	c->stats.bytes_rcvd += len;
}

static int rx_disconn(struct sdp_conn *c)
{
	c->disconn_rcvd = 1;
	switch (c->state) {
	case SDP_ST_ESTABLISHED:
		return sdp_conn_set_state_locked(c, SDP_ST_CLOSE_WAIT);
	case SDP_ST_FIN_WAIT:
		if (c->disconn_sent)
			return sdp_conn_set_state_locked(c, SDP_ST_TIME_WAIT);
		return 0;	/* our DisConn still queued: stays FIN_WAIT */
	default:
		return -EPROTO;
	}
}

/* Dispatch one validated message.  Returns 1 if the buffer was kept (queued
 * data), 0 if it can be reposted, -errno on a fatal error. */
static int rx_dispatch(struct sdp_conn *c, uint32_t idx, const struct sdp_msg *m)
{
	uint32_t hdr = m->bsdh.len - m->payload_len;

	switch (m->bsdh.mid) {
	case SDP_MID_SRC_AVAIL:
		/* Mode rules (inline bytes in Combined, none in Pipelined),
		 * one at a time, Len above the inline part. */
		if (sdp_zcopy_rx_check_src_avail_locked(c, m) < 0)
			return -EPROTO;
		__attribute__((fallthrough));
	case SDP_MID_DATA:
	case SDP_MID_SINK_AVAIL:
		if (m->payload_len == 0 && m->bsdh.mid != SDP_MID_SRC_AVAIL) {
			/* Credit update, or a bare sink advertisement. */
			if (m->bsdh.mid == SDP_MID_SINK_AVAIL)
				return sdp_zcopy_rx_sink_avail_locked(c, m);
			return 0;
		}
		if (c->zc_rx.active && m->bsdh.mid != SDP_MID_SRC_AVAIL) {
			/* The source must hold data back (annex 5.3); more
			 * SrcAvails: counted by the check above. */
			protocol_error(c, "data while a SrcAvail is outstanding",
				       m->bsdh.mid);
			return -EPROTO;
		}
		if (c->disconn_rcvd) {
			protocol_error(c, "data after DisConn", m->bsdh.mid);
			return -EPROTO;
		}
		if (c->orphan && m->payload_len) {
			/* Like TCP: data for a closed socket resets it. */
			sdp_conn_reset_locked(c, -ECONNRESET,
					      SDP_REASON_DATA_AFTER_CLOSE);
			return -ECONNRESET;
		}
		/* Stream data: it ends our SinkAvail, if any (5.4). */
		sdp_zcopy_rx_data_msg_locked(c);
		if (m->payload_len)
			rx_queue_data(c, idx, hdr, m->payload_len,
				      m->bsdh.flags & SDP_FLAG_OOB_PRES);
		if (m->bsdh.mid == SDP_MID_SRC_AVAIL)
			sdp_zcopy_rx_advert_locked(c, m);
		if (m->bsdh.mid == SDP_MID_SINK_AVAIL &&
		    sdp_zcopy_rx_sink_avail_locked(c, m) < 0)
			return -EPROTO;	/* the queued payload goes with it */
		return m->payload_len ? 1 : 0;
	case SDP_MID_SEND_SM:
		return sdp_zcopy_rx_send_sm_locked(c, m);
	case SDP_MID_RDMA_RD_COMPL:
		return sdp_zcopy_rx_rd_compl_locked(c, m);
	case SDP_MID_SRC_AVAIL_CANCEL:
		return sdp_zcopy_rx_src_cancel_locked(c, m);
	case SDP_MID_RDMA_WR_COMPL:
		return sdp_zcopy_rx_wr_compl_locked(c, m);
	case SDP_MID_SINK_AVAIL_CANCEL:
		return sdp_zcopy_rx_sink_cancel_locked(c, m);
	case SDP_MID_SINK_CANCEL_ACK:
		return sdp_zcopy_rx_cancel_ack_locked(c, m);
	case SDP_MID_MODE_CHANGE:
		return sdp_zcopy_rx_mode_change_locked(c, m);
	case SDP_MID_DISCONN:
		if (c->disconn_rcvd || rx_disconn(c) < 0) {
			protocol_error(c, "unexpected DisConn", m->bsdh.mid);
			return -EPROTO;
		}
		sdp_zcopy_rx_disconn_locked(c);
		return 0;
	case SDP_MID_ABORT_CONN:
		sdp_conn_reset_locked(c, -ECONNRESET, SDP_REASON_PEER_ABORT);
		return -ECONNRESET;
	case SDP_MID_CH_RCV_BUF_ACK:
		return 0;	/* nothing outstanding that they refer to */
	case SDP_MID_CH_RCV_BUF:
		/* We keep our size; the ack tells the peer so (as gen1). */
		sdp_tx_post_ch_rcv_buf_ack_locked(c);
		return 0;
	default:
		protocol_error(c, "message not valid here", m->bsdh.mid);
		return -EPROTO;
	}
}

int sdp_rx_handle_wc_locked(struct sdp_conn *c, const struct sdp_wc *wc)
{
	uint32_t idx = (uint32_t)wc->wr_id;
	struct sdp_msg m;
	unsigned pulse;
	int r;

	if (idx >= c->nbufs)
		return -EIO;	/* transport bug: not a wr_id we posted */
	c->posted--;
	if (wc->status != SDP_WC_SUCCESS) {
		if (c->state == SDP_ST_TIME_WAIT || c->state == SDP_ST_RESET)
			return 0;	/* peer tore down after the close */
		if (wc->status == SDP_WC_WR_FLUSH_ERR && c->disconn_rcvd) {
			/* Peer finished (DisConn) then went away: reads see
			 * EOF, writes fail like after a TCP RST. */
			c->err = -EPIPE;
			sdp_conn_set_state_locked(c, SDP_ST_TIME_WAIT);
			return 0;
		}
		/* Gone without DisConn (killed, _exit, link down): unlike a
		 * TCP FIN from a dying process, we cannot know whether it had
		 * data still queued, so the reader is told: ECONNRESET. */
		sdp_conn_reset_locked(c, -ECONNRESET,
				      wc->status == SDP_WC_WR_FLUSH_ERR ?
				      SDP_REASON_PEER_GONE : SDP_REASON_TRANSPORT);
		return 0;
	}
	r = sdp_wire_decode(buf_addr(c, idx), wc->byte_len, &m);
	if (r < 0) {
		protocol_error(c, r == -EBADMSG ? "malformed message" :
			       "message not allowed", ((uint8_t *)buf_addr(c, idx))[0]);
		return 0;
	}
	if (rx_account(c, &m.bsdh) < 0)
		return 0;
	c->stats.msgs_rcvd++;
	sdp_zcopy_rx_flags_locked(c, m.bsdh.flags);
	pulse = c->rx_pulse;
	r = rx_dispatch(c, idx, &m);
	/* The sender's readiness byte already made the edge for it. */
	if (wc->flags & SDP_WC_APP_WOKEN)
		c->rx_pulse = pulse;
	if (r == 0 && c->state != SDP_ST_RESET)
		return sdp_rx_post_locked(c, idx);
	return r < 0 ? 0 : 0;
}

/* How many buffers the peer believes we have posted for it. */
static int32_t rx_peer_view(const struct sdp_conn *c)
{
	return (int32_t)c->adv_bufs - (int32_t)(c->rx_mseq - c->adv_mseq_ack);
}

int sdp_rx_maybe_credit_update_locked(struct sdp_conn *c)
{
	int32_t view;

	switch (c->state) {
	case SDP_ST_ESTABLISHED:
	case SDP_ST_FIN_WAIT:
	case SDP_ST_CLOSE_WAIT:
	case SDP_ST_LAST_ACK:
		break;
	default:
		return 0;
	}
	view = rx_peer_view(c);
	/* Annex 4.3: the last credit may carry only an update that grants
	 * more buffers; we update once the peer's view fell to half. */
	if ((int32_t)c->posted <= view || view > (int32_t)c->nbufs / 2 ||
	    c->tx_credits < 1)
		return 0;
	c->stats.credit_updates_sent++;
	return sdp_tx_post_ctrl_locked(c, SDP_MID_DATA);
}

uint64_t sdp_conn_rx_avail_locked(const struct sdp_conn *c)
{
	/* The unread part of the peer's SrcAvail follows the queue. */
	uint64_t avail = c->rx_bytes + sdp_zcopy_rx_pending(c);

	if (c->oob_seen && !c->oob_inline && c->rx_off < c->oob_mark &&
	    c->oob_mark - c->rx_off < avail)
		avail = c->oob_mark - c->rx_off;	/* recv stops at the mark */
	return avail;
}

int sdp_conn_at_mark_locked(const struct sdp_conn *c)
{
	return c->oob_seen && c->rx_off == c->oob_mark;
}

/* Copy up to `want` bytes from the receive queue into iov (skipping `skip`
 * bytes of iov already filled).  Consumes unless `peek`. */
static size_t rx_copy_out(struct sdp_conn *c, const struct iovec *iov,
			  int iovcnt, size_t skip, size_t want, int peek)
{
	uint32_t qi = 0;
	size_t done = 0, seg_off = 0;
	int vi = 0;
	size_t voff = skip;

	while (vi < iovcnt && voff >= iov[vi].iov_len) {
		voff -= iov[vi].iov_len;
		vi++;
	}
	while (done < want && qi < c->rxq_count && vi < iovcnt) {
		struct sdp_rx_seg *s = &c->rxq[(c->rxq_head + qi) % c->nbufs];
		size_t n = s->len - seg_off;

		if (n > want - done)
			n = want - done;
		if (n > iov[vi].iov_len - voff)
			n = iov[vi].iov_len - voff;
		memcpy((uint8_t *)iov[vi].iov_base + voff,
		       buf_addr(c, s->buf) + s->off + seg_off, n);
		done += n;
		voff += n;
		seg_off += n;
		if (voff == iov[vi].iov_len) {
			vi++;
			voff = 0;
		}
		if (seg_off == s->len) {
			qi++;
			seg_off = 0;
		}
		if (peek)
			continue;
	}
	if (peek)
		return done;
	/* Consume: drop whole segments, trim the partial one, repost. */
	{
		size_t left = done;

		while (left > 0) {
			struct sdp_rx_seg *s = &c->rxq[c->rxq_head];

			if (left >= s->len) {
				left -= s->len;
				c->rxq_head = (c->rxq_head + 1) % c->nbufs;
				c->rxq_count--;
				if (sdp_rx_post_locked(c, s->buf) < 0)
					sdp_conn_reset_locked(c, -ECONNRESET,
						SDP_REASON_TRANSPORT);
			} else {
				s->off += (uint32_t)left;
				s->len -= (uint32_t)left;
				left = 0;
			}
		}
		c->rx_bytes -= done;
		c->rx_off += done;
		if (c->oob_seen && c->rx_off > c->oob_mark)
			c->oob_seen = 0;
	}
	return done;
}

static ssize_t rx_recv_oob_locked(struct sdp_conn *c, const struct iovec *iov,
				  int iovcnt, int peek)
{
	int i;

	if (c->oob_inline)
		return -EINVAL;
	if (!c->oob_have)
		return c->disconn_rcvd ? 0 : -EINVAL;
	for (i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len) {
			*(uint8_t *)iov[i].iov_base = c->oob_byte;
			if (!peek)
				c->oob_have = 0;
			return 1;
		}
	}
	return 0;
}

/* Busy-poll for SDP_SPIN_US before a blocking recv sleeps: only there, as
 * that is where latency is waited for.  Send waits (credits, bulk) would
 * only burn the CPU the peer needs on a small host.  ZCopy waits go to the
 * transport's wait_rdma instead, which knows whether polling through an
 * RDMA pays (verbs: it does, yielding).  Yield rather than pause: when the
 * peer shares our CPU, pausing would hold it off for the whole spin; a
 * yield that lost the CPU to other work ends the spin (base/spin.h).  1 if
 * something changed. */
static int rx_spin(struct sdp_conn *c, uint32_t seq)
{
	uint64_t now = sdp_now_ns(), end = now + sdp_cfg.spin_us * 1000ull;

	if (!sdp_spin_allowed(now))
		return 0;
	do {
		if (SDP_TP(c->qp)->wait_seq(c->qp) != seq)
			return 1;
		if (!sdp_spin_yield(&now))
			break;
	} while (now < end);
	return SDP_TP(c->qp)->wait_seq(c->qp) != seq;
}

/* The transport's timeout for `deadline_ns` (0: none, -1); 0 when it
 * has passed. */
static int wait_tmo(uint64_t deadline_ns)
{
	uint64_t now;

	if (!deadline_ns)
		return -1;
	now = sdp_now_ns();
	if (now >= deadline_ns)
		return 0;
	return (int)((deadline_ns - now + 999999) / 1000000);
}

/* Sleep until something may have changed. */
int sdp_conn_wait(struct sdp_conn *c, uint32_t seq, uint64_t deadline_ns)
{
	int tmo = wait_tmo(deadline_ns);

	return tmo ? SDP_TP(c->qp)->wait(c->qp, seq, tmo) : -ETIMEDOUT;
}

int sdp_conn_wait_end_locked(struct sdp_conn *c, int r, uint64_t deadline_ns,
			     struct sdp_sig_mark *sig)
{
	if (r == -EINTR && !deadline_ns && sdp_sig_restart(*sig) &&
	    !sdp_cancel_woke()) {
		*sig = sdp_sig_mark();	/* SA_RESTART: go on */
		return 0;
	}
	if (r == -EINTR || r == -ETIMEDOUT) {
		/* The peer skipped the progress doorbell because we were
		 * waiting: look at what arrived before leaving. */
		sdp_conn_poll_locked(c);
		return r == -EINTR ? -EINTR : -EAGAIN;
	}
	return 0;
}

/* The same, for news an RDMA in flight since `since_ns` brings, expected
 * at `due_ns` (transport.h, wait_rdma). */
int sdp_conn_wait_rdma(struct sdp_conn *c, uint32_t seq, uint64_t deadline_ns,
		       uint64_t since_ns, uint64_t due_ns)
{
	int tmo = wait_tmo(deadline_ns);

	return tmo ? sdp_tp_wait_rdma(c->qp, seq, tmo, since_ns, due_ns) :
		     -ETIMEDOUT;
}

ssize_t sdp_conn_recv(struct sdp_conn *c, const struct iovec *iov, int iovcnt,
		      int msg_flags, int io_flags, int timeout_ms)
{
	size_t want = sdp_iov_total(iov, iovcnt), copied = 0, n, avail;
	int peek = !!(msg_flags & MSG_PEEK);
	uint64_t deadline = timeout_ms > 0 ?
		sdp_now_ns() + (uint64_t)timeout_ms * 1000000ull : 0;
	struct sdp_sig_mark sig = sdp_sig_mark();
	ssize_t ret;
	uint32_t seq;
	int r, zc_stop = 0, zc_tried = 0;

	pthread_mutex_lock(&c->lock);
	if (!sdp_owner_is_me(c->owner_slot)) {
		/* Handed over between the claim and this lock: ask again. */
		pthread_mutex_unlock(&c->lock);
		return -ERESTART;
	}
	c->zc_readers++;
	if (c->state == SDP_ST_CLOSED) {
		ret = -ENOTCONN;
		goto out;
	}
	for (;;) {
		seq = c->qp ? SDP_TP(c->qp)->wait_seq(c->qp) : 0;
		sdp_conn_poll_locked(c);
		if (msg_flags & MSG_OOB) {
			ret = rx_recv_oob_locked(c, iov, iovcnt, peek);
			if (ret != -EINVAL || c->state != SDP_ST_RESET)
				goto out;
			ret = c->err;
			goto out;
		}
		avail = sdp_conn_rx_avail_locked(c);
		if (avail > 0 && !c->rd_shut) {
			n = want - copied;
			if (n > avail)
				n = avail;
			n = rx_copy_out(c, iov, iovcnt, copied, n, peek);
			copied += n;
			if (c->zc_rx.active && copied < want) {
				/* Next in the stream: the peer's SrcAvail. */
				ssize_t z = sdp_zcopy_read_locked(c, iov, iovcnt,
						copied, want - copied, peek);

				if (z > 0)
					copied += (size_t)z;
				else if (!copied && !c->zc_rx.reading)
					continue;  /* declined or reset: look
						    * again (the rest comes by
						    * BCopy) */
			}
			if (!copied)
				goto wait;	/* another reader is at it */
			if (peek || copied == want || !(msg_flags & MSG_WAITALL))
				break;
			if (sdp_conn_at_mark_locked(c))
				break;
			continue;
		}
		if (want == 0 || c->rd_shut || c->disconn_rcvd)
			break;
		if (c->state == SDP_ST_RESET || c->err) {
			/* The reset is reported once; later reads see EOF. */
			ret = copied ? (ssize_t)copied : sdp_conn_take_err_locked(c);
			if (ret == -EPIPE)
				ret = 0;
			goto out;
		}
		if (c->orphan) {
			ret = copied ? (ssize_t)copied : -EBADF;
			goto out;
		}
		if ((io_flags & SDP_IO_NONBLOCK) || (msg_flags & MSG_DONTWAIT)) {
			ret = copied ? (ssize_t)copied : -EAGAIN;
			goto out;
		}
		if (c->state == SDP_ST_CONNECTING && !c->qp) {
			ret = -ENOTCONN;
			goto out;
		}
		if (zc_stop) {
			/* A cancelled SinkAvail ended: nothing else came. */
			ret = copied ? (ssize_t)copied : zc_stop;
			goto out;
		}
		if (!peek && !zc_tried &&
		    sdp_zcopy_sink_wanted_locked(c, iov, iovcnt, copied,
						 want - copied)) {
			/* Write ZCopy: the peer writes into this buffer. */
			ssize_t z = sdp_zcopy_sink_recv_locked(c, iov, iovcnt,
					copied, want - copied,
					!!(msg_flags & MSG_WAITALL), deadline,
					&zc_stop);

			if (z == -EAGAIN)
				zc_tried = 1;	/* could not advertise */
			if (z > 0) {
				copied += (size_t)z;
				if (copied == want || !(msg_flags & MSG_WAITALL))
					break;
			}
			continue;
		}
wait:
		if (sdp_cfg.spin_us && c->qp)
			sdp_appwake_spin_locked(c);
		pthread_mutex_unlock(&c->lock);
		/* A handler that ran since the call began (while it spun,
		 * or looked) interrupts it as it would the kernel's sleep. */
		r = sdp_cfg.spin_us && c->qp && rx_spin(c, seq) ? 0 :
			sdp_sig_interrupted(sig) ? -EINTR :
			sdp_conn_wait(c, seq, deadline);
		pthread_mutex_lock(&c->lock);
		if (!copied && !peek && sdp_owner_asked(c->owner_slot)) {
			/* Another process of the family wants the connection
			 * (it writes while we wait to read, say): it goes
			 * there, and this call asks for it back. */
			c->zc_readers--;
			sdp_conn_update_ready_locked(c);
			if (sdp_handover_yield_locked(c)) {
				pthread_mutex_unlock(&c->lock);
				return -ERESTART;
			}
			c->zc_readers++;
		}
		r = sdp_conn_wait_end_locked(c, r, deadline, &sig);
		if (r < 0) {
			ret = copied ? (ssize_t)copied : r;
			goto out;
		}
	}
	ret = (ssize_t)copied;
	if (!peek && copied)
		sdp_rx_maybe_credit_update_locked(c);
out:
	if (--c->zc_readers == 0 && c->zc_rx.active)
		sdp_zcopy_readers_gone_locked(c);
	sdp_conn_update_ready_locked(c);
	pthread_mutex_unlock(&c->lock);
	return ret;
}
