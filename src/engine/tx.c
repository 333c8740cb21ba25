/* SPDX-License-Identifier: MIT */
/*
 * tx.c — the send side of a connection: message headers and credits, the
 * BCopy send queue, small-send coalescing (Nagle-like, off with TCP_NODELAY),
 * urgent data, DisConn, and send() semantics.
 *
 * Credits (annex 4.3, CA4-82): Data and control messages need at least two
 * credits, so the last one is always available for a credit update; a credit
 * update needs one and must grant the peer more buffers (rx.c decides).
 *
 * Fast path: with an empty send queue and credits in hand, send() posts the
 * application's bytes straight into the peer's receive buffer (an inline
 * SEND copies at post time), so BCopy costs one copy on each side, as TCP.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "base/cancel.h"
#include "engine/appwake.h"
#include "base/config.h"
#include "engine/conn.h"
#include "engine/handover.h"
#include "base/owner.h"
#include "base/sigseen.h"
#include "engine/progress.h"
#include "engine/zcopy.h"

#define SDP_DATA_MIN_CREDITS 2

static uint32_t max_payload(const struct sdp_conn *c)
{
	return c->peer_rcv_sz - SDP_BSDH_SIZE;
}

/* Hold a short message back?  TCP_CORK holds every partial message until
 * uncorked (bounded below, as Linux bounds it to 200 ms); otherwise the
 * Nagle-like rule holds one while an earlier short one is unacknowledged. */
static int hold_short(const struct sdp_conn *c)
{
	return c->cork || (!c->nodelay && c->nagle_inflight);
}

#define SDP_CORK_MAX_US 200000u

/* Fill the BSDH of message `m` (mid, flags and extended header already set)
 * and post it with the payload SGEs. */
static int tx_post_msg(struct sdp_conn *c, struct sdp_msg *m,
		       const struct sdp_sge *payload, int npayload, uint32_t plen)
{
	uint8_t hdr[64];
	struct sdp_sge sg[SDP_MAX_SGE];
	struct sdp_send_wr wr;
	int hlen, i, r;

	/* REQ_PIPE states our standing preference as a data sink (CA4-8). */
	if (c->zc_want_pipe)
		m->bsdh.flags |= SDP_FLAG_REQ_PIPE;
	m->bsdh.bufs = c->posted > 0xffff ? 0xffff : (uint16_t)c->posted;
	m->bsdh.mseq = c->tx_next_mseq;
	m->bsdh.mseq_ack = c->rx_mseq;
	m->bsdh.len = sdp_wire_hdr_size(m->bsdh.mid) + plen;
	m->payload_len = plen;
	hlen = sdp_wire_encode_hdr(m, hdr, sizeof(hdr));
	if (hlen < 0)
		return hlen;
	sg[0].addr = (uint64_t)(uintptr_t)hdr;
	sg[0].length = (uint32_t)hlen;
	sg[0].lkey = 0;
	for (i = 0; i < npayload; i++)
		sg[i + 1] = payload[i];
	memset(&wr, 0, sizeof(wr));
	wr.opcode = SDP_WR_SEND;
	wr.flags = SDP_SEND_INLINE;
	/* Data for the application: it may be woken directly (appwake).
	 * Not urgent data: POLLPRI needs the message processed, which only
	 * the progress thread does for an application that waits for it. */
	if (((m->bsdh.mid == SDP_MID_DATA && plen > 0) ||
	     m->bsdh.mid == SDP_MID_SRC_AVAIL) &&
	    !(m->bsdh.flags & (SDP_FLAG_OOB_PRES | SDP_FLAG_OOB_PEND)))
		wr.flags |= SDP_SEND_SOLICITED;
	wr.sg_list = sg;
	wr.num_sge = npayload + 1;
	r = sdp_post_send(c->qp, &wr);
	if (r < 0) {
		sdp_conn_reset_locked(c, -ECONNRESET, SDP_REASON_TRANSPORT);
		return r;
	}
	c->tx_next_mseq++;
	c->tx_credits--;
	sdp_zcopy_tx_data_msg_locked(c, m->bsdh.mid, plen);
	c->adv_bufs = m->bsdh.bufs;
	c->adv_mseq_ack = m->bsdh.mseq_ack;
	c->stats.msgs_sent++;
	c->stats.bytes_sent += plen;
	if (m->bsdh.mid == SDP_MID_DATA && plen > 0 && plen < max_payload(c)) {
		c->nagle_inflight = 1;
		c->nagle_mseq = m->bsdh.mseq;
	}
	return 0;
}

static int tx_post(struct sdp_conn *c, uint8_t mid, uint8_t flags,
		   const struct sdp_sge *payload, int npayload, uint32_t plen,
		   uint32_t ext_len)
{
	struct sdp_msg m;

	memset(&m, 0, sizeof(m));
	m.bsdh.mid = mid;
	m.bsdh.flags = flags;
	m.h.len = ext_len;	/* the 4-byte headers (ChRcvBufAck, ...) */
	return tx_post_msg(c, &m, payload, npayload, plen);
}

int sdp_tx_post_msg_locked(struct sdp_conn *c, struct sdp_msg *m,
			   const struct sdp_sge *payload, int npayload,
			   uint32_t plen)
{
	if (!c->qp || c->tx_credits < SDP_DATA_MIN_CREDITS)
		return -EAGAIN;
	return tx_post_msg(c, m, payload, npayload, plen);
}

int sdp_tx_post_msg_any_locked(struct sdp_conn *c, struct sdp_msg *m,
			       const struct sdp_sge *payload, int npayload,
			       uint32_t plen)
{
	if (!c->qp || c->tx_credits < 1)
		return -EAGAIN;
	return tx_post_msg(c, m, payload, npayload, plen);
}

int sdp_tx_post_ctrl_locked(struct sdp_conn *c, uint8_t mid)
{
	int need = mid == SDP_MID_DATA ? 1 : SDP_DATA_MIN_CREDITS;

	/* AbortConn may use the last credit: nothing can follow it. */
	if (mid == SDP_MID_ABORT_CONN)
		need = 1;
	if (!c->qp || c->tx_credits < need)
		return -EAGAIN;
	return tx_post(c, mid, 0, NULL, 0, 0, 0);
}

int sdp_tx_post_ch_rcv_buf_ack_locked(struct sdp_conn *c)
{
	if (!c->qp || c->tx_credits < SDP_DATA_MIN_CREDITS)
		return -EAGAIN;
	/* We keep our buffer size; the ack names it (as gen1, annex 4.6). */
	return tx_post(c, SDP_MID_CH_RCV_BUF_ACK, 0, NULL, 0, 0, c->buf_size);
}

static int tx_post_disconn(struct sdp_conn *c)
{
	int r;

	if (!c->qp || c->tx_credits < SDP_DATA_MIN_CREDITS)
		return -EAGAIN;
	sdp_appwake_stop_locked(c);
	r = sdp_tx_post_ctrl_locked(c, SDP_MID_DISCONN);

	if (r < 0)
		return r;
	c->disconn_sent = 1;
	if (c->state == SDP_ST_ESTABLISHED)
		return sdp_conn_set_state_locked(c, SDP_ST_FIN_WAIT);
	if (c->state == SDP_ST_CLOSE_WAIT) {
		r = sdp_conn_set_state_locked(c, SDP_ST_LAST_ACK);
		if (r == 0)	/* both DisConns exchanged */
			r = sdp_conn_set_state_locked(c, SDP_ST_TIME_WAIT);
		return r;
	}
	if (c->state == SDP_ST_FIN_WAIT && c->disconn_rcvd)
		return sdp_conn_set_state_locked(c, SDP_ST_TIME_WAIT);
	return 0;
}

static int tx_can_send_data(const struct sdp_conn *c)
{
	switch (c->state) {
	case SDP_ST_ESTABLISHED:
	case SDP_ST_CLOSE_WAIT:
	case SDP_ST_FIN_WAIT:	/* DisConn not yet sent: drain the queue */
		/* No Data nor DisConn while our SrcAvail is out (annex 5.3),
		 * nor ahead of the RdmaWrCompl of bytes already written. */
		return !c->disconn_sent && !c->zc_tx.active &&
		       !sdp_zcopy_tx_blocks_data(c);
	default:
		return 0;
	}
}

/* Take n sent bytes off the front of the queue.  An emptied queue starts
 * again at its first byte: with a rolling head, a server that queues each
 * response (nginx corks them) writes every response into lines of the
 * ring it has not touched for a long time, and with a thousand
 * connections' rings none are cached -- each enqueue paid its stores'
 * misses (at the unlock that drains them: 4% of nginx at wrk -c 1000). */
static void txq_consume(struct sdp_conn *c, uint32_t n)
{
	c->txq_len -= n;
	c->txq_head = c->txq_len ? (c->txq_head + n) % c->txq_cap : 0;
}

int sdp_tx_flush_locked(struct sdp_conn *c, int force)
{
	/* Another process drives it: our copy's queue is stale. */
	if (!sdp_owner_is_me(c->owner_slot))
		return 0;
	if (sdp_zcopy_ctl_pending(c))
		sdp_zcopy_flush_ctl_locked(c);
	while (c->txq_len > 0 && tx_can_send_data(c)) {
		uint32_t chunk = c->txq_len, first;
		uint64_t sent_off = c->tx_queued_off - c->txq_len;
		struct sdp_sge sg[2];
		uint8_t flags = 0;
		int n = 1;

		if (c->tx_credits < SDP_DATA_MIN_CREDITS) {
			c->stats.credit_stalls++;
			return 0;
		}
		if (chunk > max_payload(c))
			chunk = max_payload(c);
		if (c->tx_urg && c->tx_urg_off > sent_off &&
		    c->tx_urg_off - sent_off <= chunk) {
			/* End this message exactly at the urgent byte. */
			chunk = (uint32_t)(c->tx_urg_off - sent_off);
			flags = SDP_FLAG_OOB_PRES | SDP_FLAG_OOB_PEND;
		}
		if (!flags && !force && !c->wr_shut &&
		    chunk < max_payload(c) && hold_short(c)) {
			/* Coalesce: hold a short message while an earlier
			 * short one is unacknowledged, for a bounded time. */
			if (!c->nagle_deadline_ns) {
				c->stats.nagle_holds++;
				c->nagle_deadline_ns = sdp_now_ns() +
					(c->cork ? SDP_CORK_MAX_US :
					 sdp_cfg.nagle_us) * 1000ull;
				sdp_progress_arm_hold(c, c->nagle_deadline_ns);
			}
			return 0;
		}
		first = c->txq_cap - c->txq_head;
		if (first > chunk)
			first = chunk;
		sg[0].addr = (uint64_t)(uintptr_t)(c->txq + c->txq_head);
		sg[0].length = first;
		sg[0].lkey = 0;
		if (first < chunk) {
			sg[1].addr = (uint64_t)(uintptr_t)c->txq;
			sg[1].length = chunk - first;
			sg[1].lkey = 0;
			n = 2;
		}
		if (tx_post(c, SDP_MID_DATA, flags, sg, n, chunk, 0) < 0)
			return -ECONNRESET;
		txq_consume(c, chunk);
		if (flags)
			c->tx_urg = 0;
		c->nagle_deadline_ns = 0;
	}
	if (c->txq_len == 0 && c->wr_shut && !c->disconn_sent &&
	    tx_can_send_data(c))
		tx_post_disconn(c);
	return 0;
}

static int tx_ensure_queue(struct sdp_conn *c)
{
	uint32_t cap = c->sndbuf;

	if (c->txq && c->txq_cap >= cap)
		return 0;
	if (c->txq_len)	/* grow only when empty: keeps the ring simple */
		return c->txq ? 0 : -ENOMEM;
	free(c->txq);
	c->txq = malloc(cap);
	if (!c->txq) {
		c->txq_cap = 0;
		return -ENOMEM;
	}
	c->txq_cap = cap;
	c->txq_head = 0;
	return 0;
}

/* Copy from the iov cursor into the ring; returns bytes queued. */
static size_t tx_enqueue(struct sdp_conn *c, const struct iovec *iov, int iovcnt,
			 size_t skip, size_t len)
{
	size_t done = 0;
	int vi = 0;

	while (vi < iovcnt && skip >= iov[vi].iov_len)
		skip -= iov[vi++].iov_len;
	if (len > c->txq_cap - c->txq_len)
		len = c->txq_cap - c->txq_len;
	while (done < len && vi < iovcnt) {
		uint32_t tail = (c->txq_head + c->txq_len) % c->txq_cap;
		size_t n = len - done, room = c->txq_cap - tail;

		if (n > iov[vi].iov_len - skip)
			n = iov[vi].iov_len - skip;
		if (n > room)
			n = room;
		memcpy(c->txq + tail, (const uint8_t *)iov[vi].iov_base + skip, n);
		c->txq_len += (uint32_t)n;
		c->tx_queued_off += n;
		done += n;
		skip += n;
		if (skip == iov[vi].iov_len) {
			vi++;
			skip = 0;
		}
	}
	return done;
}

/* Post straight from the application's buffers while credits last.
 * Returns bytes sent. */
static size_t tx_direct(struct sdp_conn *c, const struct iovec *iov, int iovcnt,
			size_t skip, size_t len)
{
	size_t done = 0;
	int vi = 0;

	while (vi < iovcnt && skip >= iov[vi].iov_len)
		skip -= iov[vi++].iov_len;
	while (done < len && c->tx_credits >= SDP_DATA_MIN_CREDITS &&
	       tx_can_send_data(c)) {
		struct sdp_sge sg[SDP_MAX_SGE - 1];
		uint32_t chunk = 0, room = max_payload(c);
		int n = 0, v = vi;
		size_t off = skip;

		if (len - done < room && hold_short(c))
			break;	/* short: let the queue coalesce it */
		while (chunk < room && done + chunk < len && v < iovcnt &&
		       n < SDP_MAX_SGE - 1) {
			size_t take = iov[v].iov_len - off;

			if (take > room - chunk)
				take = room - chunk;
			if (take > len - done - chunk)
				take = len - done - chunk;
			sg[n].addr = (uint64_t)(uintptr_t)iov[v].iov_base + off;
			sg[n].length = (uint32_t)take;
			sg[n].lkey = 0;
			n++;
			chunk += (uint32_t)take;
			off += take;
			if (off == iov[v].iov_len) {
				v++;
				off = 0;
			}
		}
		if (tx_post(c, SDP_MID_DATA, 0, sg, n, chunk, 0) < 0)
			break;
		c->tx_queued_off += chunk;
		done += chunk;
		vi = v;
		skip = off;
	}
	return done;
}

/* Copy the first n queued bytes to dst (they stay queued). */
static void tx_peek_queued(const struct sdp_conn *c, uint8_t *dst, uint32_t n)
{
	uint32_t first = c->txq_cap - c->txq_head;

	if (first > n)
		first = n;
	memcpy(dst, c->txq + c->txq_head, first);
	memcpy(dst + first, c->txq, n - first);
}

/*
 * sendfile() without the bounce buffer.  Where the transport delivers into
 * memory we can write (send_slot: shm, the peer's posted receive buffer),
 * the file is read straight there and the message posted in place: each
 * byte is copied once on its way out, by the kernel's read, instead of
 * read into a buffer and copied again.  Bytes already queued (nginx's
 * corked headers) lead the first message, so the stream keeps its order.
 * The read runs under the connection's lock, as the kernel holds the
 * socket's lock while it copies: the caller's fill is a pread(), which
 * fails at once on a pipe or a socket rather than wait there.
 */
ssize_t sdp_conn_send_fill(struct sdp_conn *c, size_t len,
			   ssize_t (*fill)(void *ctx, void *dst, size_t n),
			   void *ctx)
{
	const uint32_t hlen = sdp_wire_hdr_size(SDP_MID_DATA);
	const struct sdp_transport_ops *tp;
	ssize_t ret = 0;
	size_t done = 0;

	pthread_mutex_lock(&c->lock);
	if (!sdp_owner_is_me(c->owner_slot)) {
		pthread_mutex_unlock(&c->lock);
		return 0;	/* moved meanwhile: the ordinary path asks */
	}
	sdp_conn_poll_locked(c);
	tp = c->qp ? SDP_TP(c->qp) : NULL;
	/* Anything but plain streaming (urgent data, ZCopy under way, a
	 * shutdown or error to report) takes the ordinary path. */
	if (!tp || c->state != SDP_ST_ESTABLISHED ||
	    c->err || c->wr_shut || c->tx_urg || c->zc_snk_peer.active ||
	    sdp_zcopy_ctl_pending(c) || !tx_can_send_data(c))
		goto out;
	while (done < len && c->tx_credits >= SDP_DATA_MIN_CREDITS) {
		uint32_t cap = 0, room, queued;
		uint8_t *slot = tp->send_slot(c->qp, &cap);
		struct sdp_sge sg;
		size_t want;
		ssize_t n;

		if (!slot || cap <= hlen)
			break;
		room = cap - hlen;
		if (room > max_payload(c))
			room = max_payload(c);
		queued = c->txq_len < room ? c->txq_len : room;
		want = len - done < room - queued ? len - done : room - queued;
		/* A short last message while corked (or behind an unacked
		 * short one): the queue holds it, as for any send. */
		if (want == 0 || (queued + want < room && hold_short(c)))
			break;
		n = fill(ctx, slot + hlen + queued, want);
		if (n <= 0) {
			ret = n;	/* end of file, or the read's error */
			break;
		}
		if (queued)
			tx_peek_queued(c, slot + hlen, queued);
		sg.addr = (uint64_t)(uintptr_t)(slot + hlen);
		sg.length = queued + (uint32_t)n;
		sg.lkey = 0;
		if (tx_post(c, SDP_MID_DATA, 0, &sg, 1, sg.length, 0) < 0) {
			ret = -ECONNRESET;
			break;
		}
		if (queued) {
			txq_consume(c, queued);
			c->nagle_deadline_ns = 0;
		}
		c->tx_queued_off += (uint64_t)n;
		done += (size_t)n;
		if ((size_t)n < want)
			break;	/* the file ended */
	}
	if (done)
		ret = (ssize_t)done;
out:
	sdp_conn_update_ready_locked(c);
	pthread_mutex_unlock(&c->lock);
	return ret;
}

/*
 * One ZCopy step of a blocking send (annex 5.3/5.4): the iovec elements
 * from stream offset *sent on, as long as each is at least the threshold.
 * Returns 1 after the advertisements ended (*sent advanced; *zc_ok cleared
 * if the sink declined: the rest of this send goes by BCopy), 0 to use
 * BCopy now (*zc_ok cleared) or to wait for credits (*zc_ok still set), 3
 * to queue by BCopy this round (data is queued already; ZCopy is tried
 * again once it drained), 2 to return *sent now (cancelled by a signal or
 * the send timeout), -errno to return that (the same with nothing sent).
 */
static int tx_zcopy(struct sdp_conn *c, const struct iovec *iov, int iovcnt,
		    size_t *sent, uint64_t deadline, int *zc_ok)
{
	enum sdp_zc_end end;
	int serr;
	ssize_t n;

	/* Unlike OFED we advertise even while holding the peer's SrcAvail:
	 * if nobody reads it, the hold time declines it (zcopy.c). */
	if (c->txq_len)	/* small data held for coalescing: push it first */
		sdp_tx_flush_locked(c, 1);
	if (c->txq_len)
		return 3;	/* a BCopy backlog: queue behind it this round */
	if (c->zc_tx.active || c->tx_credits < SDP_DATA_MIN_CREDITS ||
	    !tx_can_send_data(c))
		return 0;	/* wait: another advertisement, or credits */
	n = sdp_zcopy_send_locked(c, iov, iovcnt, *sent, deadline, &end, &serr);
	if (n == -EBUSY)
		return 0;	/* wait for credits */
	if (n < 0) {
		*zc_ok = 0;	/* could not register: BCopy */
		return 0;
	}
	*sent += (size_t)n;
	if (end == SDP_ZC_DECLINED)
		*zc_ok = 0;
	if (end == SDP_ZC_STOPPED && serr)
		return *sent ? 2 : serr;	/* signal / timeout: return */
	return 1;
}

/* How much of a blocking send to copy (BCopy) from stream offset `sent`
 * before trying ZCopy again: up to the next iovec element of at least the
 * threshold after the current one, which ZCopy advertises. */
static size_t tx_bcopy_span(struct sdp_conn *c, const struct iovec *iov,
			    int iovcnt, size_t sent, size_t total)
{
	uint32_t t = sdp_zcopy_thresh_locked(c);
	const uint8_t *p;
	size_t span, n;

	if (iovcnt == 1 || !t || !sdp_zcopy_rdma_ok_locked(c))
		return total - sent;
	span = sdp_zcopy_iov_piece(iov, iovcnt, sent, &p);
	while (sent + span < total) {
		n = sdp_zcopy_iov_piece(iov, iovcnt, sent + span, &p);
		if (n >= t)
			break;
		span += n;
	}
	return span;
}

size_t sdp_conn_send_room(struct sdp_conn *c)
{
	size_t room = 0;

	pthread_mutex_lock(&c->lock);
	sdp_conn_poll_locked(c);
	if (c->state == SDP_ST_ESTABLISHED && !c->wr_shut && !c->err) {
		/* What tx_direct() posts (a message per credit, the last
		 * credit kept), then what the queue takes. */
		if (c->txq_len == 0 && c->caps.max_inline >= c->peer_rcv_sz &&
		    c->tx_credits >= SDP_DATA_MIN_CREDITS)
			room = (size_t)(c->tx_credits - 1) * max_payload(c);
		room += c->sndbuf > c->txq_len ? c->sndbuf - c->txq_len : 0;
	}
	pthread_mutex_unlock(&c->lock);
	return room;
}

ssize_t sdp_conn_send(struct sdp_conn *c, const struct iovec *iov, int iovcnt,
		      int msg_flags, int io_flags, int timeout_ms)
{
	size_t total = sdp_iov_total(iov, iovcnt), sent = 0;
	int nonblock = (io_flags & SDP_IO_NONBLOCK) || (msg_flags & MSG_DONTWAIT);
	int oob = !!(msg_flags & MSG_OOB);
	uint64_t deadline = timeout_ms > 0 ?
		sdp_now_ns() + (uint64_t)timeout_ms * 1000000ull : 0;
	/* ZCopy: blocking sends only; each large iovec element apart. */
	int zc_ok = !nonblock && !oob;
	struct sdp_sig_mark sig = sdp_sig_mark();
	const uint8_t *zp = NULL;
	size_t zlen = 0, span, span_end;
	ssize_t ret;
	uint32_t seq;
	int r;

	pthread_mutex_lock(&c->lock);
	if (!sdp_owner_is_me(c->owner_slot)) {
		/* Handed over between the claim and this lock: ask again. */
		pthread_mutex_unlock(&c->lock);
		return -ERESTART;
	}
	for (;;) {
		size_t before = sent;

		seq = c->qp ? SDP_TP(c->qp)->wait_seq(c->qp) : 0;
		sdp_conn_poll_locked(c);
		if (c->state == SDP_ST_RESET || c->err) {
			ret = sent ? (ssize_t)sent : sdp_conn_take_err_locked(c);
			if (!ret)
				ret = -EPIPE;
			goto out;
		}
		if (c->wr_shut) {
			ret = sent ? (ssize_t)sent : -EPIPE;
			goto out;
		}
		if (c->state == SDP_ST_CLOSED) {
			ret = -ENOTCONN;
			goto out;
		}
		if (c->state != SDP_ST_CONNECTING) {
			if (tx_ensure_queue(c) < 0) {
				ret = sent ? (ssize_t)sent : -ENOMEM;
				goto out;
			}
			if (zc_ok)
				zlen = sdp_zcopy_iov_piece(iov, iovcnt, sent,
							   &zp);
			if (zc_ok && c->zc_snk_peer.active &&
			    sdp_zcopy_write_wanted_locked(c, zlen)) {
				/* Write ZCopy into the peer's waiting recv()
				 * buffer; not possible now: on as usual. */
				ssize_t w = sdp_zcopy_write_locked(c, zp, zlen);

				if (w > 0) {
					sent += (size_t)w;
					if (sent == total)
						break;
					continue;
				}
				if (c->state == SDP_ST_RESET)
					continue;
			}
			if (zc_ok && sdp_zcopy_tx_wanted(c, zlen)) {
				r = tx_zcopy(c, iov, iovcnt, &sent, deadline,
					     &zc_ok);
				if (r == 1)
					continue;	/* advertised: go on */
				if (r == 2)
					break;		/* cancelled: partial */
				if (r < 0) {
					ret = sent ? (ssize_t)sent : r;
					goto out;
				}
				if (r == 0 && zc_ok)
					goto wait;	/* for credits */
			}
			span = zc_ok ? tx_bcopy_span(c, iov, iovcnt, sent,
						     total) : total - sent;
			span_end = sent + span;
			if (!oob && c->txq_len == 0 && c->caps.max_inline >=
			    c->peer_rcv_sz)
				sent += tx_direct(c, iov, iovcnt, sent, span);
			if (c->state == SDP_ST_RESET)
				continue;	/* a post failed: report it, do
						 * not queue onto a dead conn */
			if (sent < total && sent < span_end)
				sent += tx_enqueue(c, iov, iovcnt, sent,
						   span_end - sent);
			if (oob && sent == total && total > 0) {
				c->tx_urg = 1;
				c->tx_urg_off = c->tx_queued_off;
			}
			sdp_tx_flush_locked(c, oob);
			if (sent == total)
				break;
			/* Room was made (the queue drained into credits we
			 * had): go round again rather than sleep, since no
			 * peer message need ever come to wake us. */
			if (sent != before && !nonblock)
				continue;
		}
		if (nonblock) {
			ret = sent ? (ssize_t)sent : -EAGAIN;
			goto out;
		}
wait:
		pthread_mutex_unlock(&c->lock);
		r = sdp_sig_interrupted(sig) ? -EINTR :
			sdp_conn_wait(c, seq, deadline);
		pthread_mutex_lock(&c->lock);
		if (sdp_owner_asked(c->owner_slot) && !c->zc_tx.active) {
			/* Another process of the family wants the connection
			 * (it reads while we wait for credits, say): what we
			 * queued goes with it; a blocking send reports what
			 * it took, or asks for the connection back. */
			sdp_conn_update_ready_locked(c);
			if (sdp_handover_yield_locked(c)) {
				pthread_mutex_unlock(&c->lock);
				return sent ? (ssize_t)sent : -ERESTART;
			}
		}
		r = sdp_conn_wait_end_locked(c, r, deadline, &sig);
		if (r < 0) {
			ret = sent ? (ssize_t)sent : r;
			goto out;
		}
	}
	ret = (ssize_t)sent;
out:
	sdp_conn_update_ready_locked(c);
	pthread_mutex_unlock(&c->lock);
	return ret;
}
