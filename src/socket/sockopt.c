/* SPDX-License-Identifier: MIT */
/*
 * sockopt.c — getsockopt, setsockopt, fcntl and ioctl for SDP sockets.
 *
 * Options that have an SDP meaning are honoured (TCP_NODELAY, SO_LINGER,
 * SO_OOBINLINE, SO_RCVTIMEO/SO_SNDTIMEO, SO_SNDBUF, SO_ERROR, ...); options
 * programs commonly set that have no SDP effect are stored and read back, as
 * README.md lists.  Unknown options fail with ENOPROTOOPT, never silently.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/time.h>

#include "base/config.h"
#include "base/real.h"
#include "engine/zcopy.h"
#include "sdp/sdp.h"
#include "socket/sock.h"

int sdp_opt_get_int(const void *v, socklen_t len, int *out)
{
	if (!v)
		return -EFAULT;
	if (len < sizeof(int))
		return -EINVAL;
	memcpy(out, v, sizeof(int));
	return 0;
}

int sdp_opt_put_int(void *v, socklen_t *len, int val)
{
	if (!v || !len)
		return -EFAULT;
	if (*len < sizeof(int))
		return -EINVAL;
	memcpy(v, &val, sizeof(int));
	*len = sizeof(int);
	return 0;
}

static int tv_to_ms(const void *v, socklen_t len, int *ms)
{
	struct timeval tv;

	if (!v)
		return -EFAULT;
	if (len < sizeof(tv))
		return -EINVAL;
	memcpy(&tv, v, sizeof(tv));
	if (tv.tv_usec < 0 || tv.tv_usec >= 1000000)
		return -EDOM;
	if (tv.tv_sec < 0)
		tv.tv_sec = tv.tv_usec = 0;	/* as Linux: no timeout */
	if (tv.tv_sec > 2000000)
		tv.tv_sec = 2000000;
	*ms = (int)(tv.tv_sec * 1000 + (tv.tv_usec + 999) / 1000);
	return 0;
}

static int ms_to_tv(void *v, socklen_t *len, int ms)
{
	struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };

	if (!v || !len)
		return -EFAULT;
	if (*len < sizeof(tv))
		return -EINVAL;
	memcpy(v, &tv, sizeof(tv));
	*len = sizeof(tv);
	return 0;
}

/* The socket's connection, made ours first (an option is set on the
 * connection every process of the family shares, as with TCP: the process
 * that sets it drives it from then on, engine/handover.h).  NULL if none,
 * or if another process cannot let go; then end_conn() after use. */
static struct sdp_conn *own_conn(struct sdp_sock *s)
{
	struct sdp_conn *c;

	pthread_mutex_lock(&s->lock);
	c = s->kind == SDP_SK_CONN ? s->conn : NULL;
	if (c)
		sdp_conn_get(c);
	pthread_mutex_unlock(&s->lock);
	if (!c)
		return NULL;
	sdp_conn_call_begin(c);
	if (sdp_conn_claim(c) == 0)
		return c;
	sdp_conn_call_end(c);
	sdp_conn_put(c);
	return NULL;
}

static void end_conn(struct sdp_conn *c)
{
	sdp_conn_call_end(c);
	sdp_conn_put(c);
}

/* Push options with a connection-level effect down to the engine. */
static void sync_conn(struct sdp_sock *s)
{
	struct sdp_conn *c = own_conn(s);

	pthread_mutex_lock(&s->lock);
	if (c && s->kind == SDP_SK_CONN && s->conn == c) {
		pthread_mutex_lock(&c->lock);
		c->oob_inline = !!s->oobinline;
		if (c->nodelay != !!s->nodelay) {
			c->nodelay = !!s->nodelay;
			if (c->nodelay)	/* as TCP: setting it pushes */
				sdp_tx_flush_locked(c, 1);
		}
		if (c->cork != !!s->cork) {
			c->cork = !!s->cork;
			if (!c->cork)	/* as TCP: uncorking pushes */
				sdp_tx_flush_locked(c, 1);
		}
		c->sndbuf = (uint32_t)s->sndbuf;
		c->rcvbuf = (uint32_t)s->rcvbuf;
		sdp_conn_update_ready_locked(c);
		pthread_mutex_unlock(&c->lock);
	}
	pthread_mutex_unlock(&s->lock);
	if (c)
		end_conn(c);
}

static int set_sol_socket(struct sdp_sock *s, int name, const void *v,
			  socklen_t len)
{
	int val = 0, r;

	switch (name) {
	case SO_RCVTIMEO:
		return tv_to_ms(v, len, &s->rcvtimeo_ms);
	case SO_SNDTIMEO:
		return tv_to_ms(v, len, &s->sndtimeo_ms);
	case SO_LINGER:
		if (!v)
			return -EFAULT;
		if (len < sizeof(struct linger))
			return -EINVAL;
		memcpy(&s->linger, v, sizeof(struct linger));
		return 0;
	default:
		break;
	}
	r = sdp_opt_get_int(v, len, &val);
	if (r < 0)
		return r;
	switch (name) {
	case SO_REUSEADDR: s->reuseaddr = !!val; return 0;
	case SO_REUSEPORT: s->reuseport = !!val; return 0;
	case SO_KEEPALIVE: s->keepalive = !!val; return 0;
	case SO_OOBINLINE: s->oobinline = !!val; break;
	case SO_RCVLOWAT: s->rcvlowat = val < 1 ? 1 : val; return 0;
	case SO_SNDBUF:
	case SO_SNDBUFFORCE:
		/* As Linux: the kernel doubles the request for overhead. */
		val = val < 2048 ? 2048 : (val > (1 << 29) ? (1 << 29) : val);
		s->sndbuf = val * 2;
		break;
	case SO_RCVBUF:
	case SO_RCVBUFFORCE:
		val = val < 1024 ? 1024 : (val > (1 << 29) ? (1 << 29) : val);
		s->rcvbuf = val * 2;
		break;
	case SO_PRIORITY:
	case SO_BROADCAST:
	case SO_DONTROUTE:
	case SO_BUSY_POLL:
	case SO_ZEROCOPY:
		return 0;	/* accepted; no SDP meaning */
	default:
		return -ENOPROTOOPT;
	}
	sync_conn(s);
	return 0;
}

/* SDP_ZCOPY_THRESH to the connection (it also gets it at connect/accept). */
static void zcopy_push(struct sdp_sock *s)
{
	struct sdp_conn *c = own_conn(s);

	if (!c)
		return;
	pthread_mutex_lock(&s->lock);
	pthread_mutex_lock(&c->lock);
	sdp_zcopy_set_thresh_locked(c, s->zcopy_thresh);
	pthread_mutex_unlock(&c->lock);
	pthread_mutex_unlock(&s->lock);
	end_conn(c);
}

/* getsockopt(SDP_ZCOPY_THRESH): the value in effect. */
static int zcopy_thresh_get(struct sdp_sock *s)
{
	struct sdp_conn *c;
	int v;

	pthread_mutex_lock(&s->lock);
	c = s->kind == SDP_SK_CONN ? s->conn : NULL;
	if (c) {
		pthread_mutex_lock(&c->lock);
		v = (int)sdp_zcopy_thresh_locked(c);
		pthread_mutex_unlock(&c->lock);
	} else {
		v = s->zcopy_thresh < 0 ? (int)sdp_cfg.zcopy_thresh :
			s->zcopy_thresh;
	}
	pthread_mutex_unlock(&s->lock);
	return v;
}

/* getsockopt(SDP_ZCOPY_STATS). */
static int zcopy_stats_get(struct sdp_sock *s, void *v, socklen_t *len)
{
	struct sdp_zcopy_stats st;
	struct sdp_conn *c;

	if (!v || !len)
		return -EFAULT;
	memset(&st, 0, sizeof(st));
	pthread_mutex_lock(&s->lock);
	c = s->kind == SDP_SK_CONN ? s->conn : NULL;
	if (c) {
		pthread_mutex_lock(&c->lock);
		st.tx_adverts = c->stats.zc_tx_adverts;
		st.tx_bytes = c->stats.zc_tx_bytes;
		st.tx_declined = c->stats.zc_tx_declined;
		st.tx_cancels = c->stats.zc_tx_cancels;
		st.rx_adverts = c->stats.zc_rx_adverts;
		st.rx_bytes = c->stats.zc_rx_bytes;
		st.rx_declined = c->stats.zc_rx_declined;
		st.thresh = sdp_zcopy_thresh_locked(c);
		st.rdma = (uint32_t)sdp_zcopy_rdma_ok_locked(c);
		st.wr_sink_adverts = c->stats.zc_wr_sink_adverts;
		st.wr_rx_bytes = c->stats.zc_wr_rx_bytes;
		st.wr_sink_cancels = c->stats.zc_wr_sink_cancels;
		st.wr_sink_unused = c->stats.zc_wr_sink_unused;
		st.wr_src_adverts = c->stats.zc_wr_src_adverts;
		st.wr_tx_bytes = c->stats.zc_wr_tx_bytes;
		st.wr_src_unused = c->stats.zc_wr_src_unused;
		st.mode_changes = c->stats.zc_mode_changes;
		st.tx_mode = c->zc_mode_tx;
		st.rx_mode = c->zc_mode_rx;
		st.tx_adverts_peak = c->stats.zc_tx_peak;
		st.rx_adverts_peak = c->stats.zc_rx_peak;
		st.peer_max_adverts = c->zc_peer_max_adverts;
		st.max_adverts = SDP_ZC_MAX_ADVERTS;
		pthread_mutex_unlock(&c->lock);
	}
	pthread_mutex_unlock(&s->lock);
	if (!c)
		return -ENOTCONN;
	if (*len > sizeof(st))
		*len = sizeof(st);
	memcpy(v, &st, *len);
	return 0;
}

static int set_tcp(struct sdp_sock *s, int name, const void *v, socklen_t len)
{
	int val = 0, r = sdp_opt_get_int(v, len, &val);

	if (r < 0)
		return r;
	switch (name) {
	case TCP_NODELAY: s->nodelay = !!val; break;
	case TCP_CORK: s->cork = !!val; break;
	case TCP_KEEPIDLE:
		if (val < 1 || val > 32767)
			return -EINVAL;
		s->keepidle = val;
		return 0;
	case TCP_KEEPINTVL: s->keepintvl = val; return 0;
	case TCP_KEEPCNT: s->keepcnt = val; return 0;
	case TCP_CONGESTION:
	case TCP_QUICKACK:
	case TCP_DEFER_ACCEPT:
	case TCP_USER_TIMEOUT:
	case TCP_FASTOPEN:
		return 0;	/* no SDP equivalent; accepted */
	case SDP_ZCOPY_THRESH:
		/* 0: ZCopy off; else the smallest send/recv that goes ZCopy
		 * (1 .. INT_MAX, taken as given); -1: the system default. */
		if (val < -1)
			return -EINVAL;
		s->zcopy_thresh = val;
		zcopy_push(s);
		return 0;
	default:
		return -ENOPROTOOPT;
	}
	sync_conn(s);
	return 0;
}

SDP_EXPORT int setsockopt(int fd, int level, int name, const void *v,
			  socklen_t len)
{
	struct sdp_sock *s = sdp_fd_get(fd);
	int r, val;

	if (!s) {
		r = sdp_relayed_setsockopt(fd, level, name, v, len);
		if (r != -ENOENT)
			return sdp_ret(r);
		sdp_real_init();
		return sdp_real.setsockopt(fd, level, name, v, len);
	}
	sdp_switch_mirror_sockopt(s, level, name, v, len);
	if (level == SOL_SOCKET || level == AF_INET_SDP)
		r = set_sol_socket(s, name, v, len);
	else if (level == IPPROTO_TCP)
		r = set_tcp(s, name, v, len);
	else if (level == IPPROTO_IPV6 && name == IPV6_V6ONLY)
		r = sdp_opt_get_int(v, len, &val) ?: (s->v6only = !!val, 0);
	else if ((level == IPPROTO_IP && (name == IP_TOS || name == IP_TTL)) ||
		 (level == IPPROTO_IPV6 && name == IPV6_TCLASS))
		r = sdp_opt_get_int(v, len, &s->tos);
	else
		r = -ENOPROTOOPT;
	sdp_sock_put(s);
	return sdp_ret(r);
}

static int take_so_error(struct sdp_sock *s)
{
	struct sdp_conn *c;
	int e = 0;

	pthread_mutex_lock(&s->lock);
	c = s->kind == SDP_SK_CONN ? s->conn : NULL;
	if (c) {
		pthread_mutex_lock(&c->lock);
		sdp_conn_progress_locked(c);
		e = c->so_error;
		c->so_error = 0;
		pthread_mutex_unlock(&c->lock);
	}
	pthread_mutex_unlock(&s->lock);
	return -e;
}

static int get_sol_socket(struct sdp_sock *s, int name, void *v, socklen_t *len)
{
	switch (name) {
	case SO_TYPE: return sdp_opt_put_int(v, len, SOCK_STREAM);
	case SO_DOMAIN:
		/* A switched socket stays what the program asked for. */
		return sdp_opt_put_int(v, len, s->switched ? s->tcp_family : s->domain);
	case SO_PROTOCOL: return sdp_opt_put_int(v, len, IPPROTO_TCP);
	case SO_ACCEPTCONN: return sdp_opt_put_int(v, len, s->kind == SDP_SK_LISTEN);
	case SO_ERROR: return sdp_opt_put_int(v, len, take_so_error(s));
	case SO_REUSEADDR: return sdp_opt_put_int(v, len, s->reuseaddr);
	case SO_REUSEPORT: return sdp_opt_put_int(v, len, s->reuseport);
	case SO_KEEPALIVE: return sdp_opt_put_int(v, len, s->keepalive);
	case SO_OOBINLINE: return sdp_opt_put_int(v, len, s->oobinline);
	case SO_RCVLOWAT: return sdp_opt_put_int(v, len, s->rcvlowat ? s->rcvlowat : 1);
	case SO_SNDBUF: return sdp_opt_put_int(v, len, s->sndbuf);
	case SO_RCVBUF: return sdp_opt_put_int(v, len, s->rcvbuf);
	case SO_RCVTIMEO: return ms_to_tv(v, len, s->rcvtimeo_ms);
	case SO_SNDTIMEO: return ms_to_tv(v, len, s->sndtimeo_ms);
	case SO_LINGER:
		if (!v || !len)
			return -EFAULT;
		if (*len < sizeof(struct linger))
			return -EINVAL;
		memcpy(v, &s->linger, sizeof(struct linger));
		*len = sizeof(struct linger);
		return 0;
	case SO_BINDTODEVICE:
		/* Bound to no device, as a TCP socket that was not (sshd asks,
		 * for its VRF "rdomain"). */
		if (!len)
			return -EFAULT;
		*len = 0;
		return 0;
	default:
		return -ENOPROTOOPT;
	}
}

static int max_seg(struct sdp_sock *s)
{
	int mss = 536;

	pthread_mutex_lock(&s->lock);
	if (s->kind == SDP_SK_CONN && s->conn->peer_rcv_sz > SDP_BSDH_SIZE)
		mss = (int)(s->conn->peer_rcv_sz - SDP_BSDH_SIZE);
	pthread_mutex_unlock(&s->lock);
	return mss;
}

static int conn_transport(struct sdp_sock *s)
{
	const char *name = "";

	pthread_mutex_lock(&s->lock);
	if (s->kind == SDP_SK_CONN)
		name = s->conn->caps.name;
	pthread_mutex_unlock(&s->lock);
	if (!strcmp(name, "verbs"))
		return SDP_TRANSPORT_VERBS;
	if (!strcmp(name, "loop"))
		return SDP_TRANSPORT_LOOP;
	return SDP_TRANSPORT_SHM;
}

/* TCP_INFO answered sensibly: state and MSS; no retransmissions
 * (the RDMA transport is reliable), no congestion window. */
static int tcp_info_get(struct sdp_sock *s, void *v, socklen_t *len)
{
	struct tcp_info ti;
	struct sdp_conn *c;

	if (!v || !len)
		return -EFAULT;
	memset(&ti, 0, sizeof(ti));
	ti.tcpi_state = TCP_CLOSE;
	pthread_mutex_lock(&s->lock);
	c = s->kind == SDP_SK_CONN ? s->conn : NULL;
	if (s->kind == SDP_SK_LISTEN)
		ti.tcpi_state = TCP_LISTEN;
	if (c) {
		static const unsigned char map[SDP_ST_COUNT] = {
			[SDP_ST_CLOSED] = TCP_CLOSE,
			[SDP_ST_CONNECTING] = TCP_SYN_SENT,
			[SDP_ST_ESTABLISHED] = TCP_ESTABLISHED,
			[SDP_ST_FIN_WAIT] = TCP_FIN_WAIT1,
			[SDP_ST_CLOSE_WAIT] = TCP_CLOSE_WAIT,
			[SDP_ST_LAST_ACK] = TCP_LAST_ACK,
			[SDP_ST_TIME_WAIT] = TCP_TIME_WAIT,
			[SDP_ST_RESET] = TCP_CLOSE,
		};

		pthread_mutex_lock(&c->lock);
		ti.tcpi_state = map[c->state];
		if (c->peer_rcv_sz > SDP_BSDH_SIZE)
			ti.tcpi_snd_mss = c->peer_rcv_sz - SDP_BSDH_SIZE;
		ti.tcpi_rcv_mss = c->buf_size - SDP_BSDH_SIZE;
		ti.tcpi_snd_cwnd = (uint32_t)(c->tx_credits > 0 ? c->tx_credits : 0);
		pthread_mutex_unlock(&c->lock);
	}
	pthread_mutex_unlock(&s->lock);
	if (*len > sizeof(ti))
		*len = sizeof(ti);
	memcpy(v, &ti, *len);
	return 0;
}

static int get_tcp(struct sdp_sock *s, int name, void *v, socklen_t *len)
{
	switch (name) {
	case TCP_NODELAY: return sdp_opt_put_int(v, len, s->nodelay);
	case TCP_CORK: return sdp_opt_put_int(v, len, s->cork);
	case TCP_KEEPIDLE: return sdp_opt_put_int(v, len, s->keepidle ? s->keepidle : 7200);
	case TCP_KEEPINTVL: return sdp_opt_put_int(v, len, s->keepintvl ? s->keepintvl : 75);
	case TCP_KEEPCNT: return sdp_opt_put_int(v, len, s->keepcnt ? s->keepcnt : 9);
	case TCP_MAXSEG: return sdp_opt_put_int(v, len, max_seg(s));
	case SDP_ZCOPY_THRESH: return sdp_opt_put_int(v, len, zcopy_thresh_get(s));
	case TCP_INFO: return tcp_info_get(s, v, len);
	case TCP_CONGESTION: {
		/* No congestion control: credits.  Programs just print it. */
		static const char cc[16] = "sdp";

		if (!v || !len)
			return -EFAULT;
		if (*len > sizeof(cc))
			*len = sizeof(cc);
		memcpy(v, cc, *len);
		return 0;
	}
	case SDP_ZCOPY_STATS: return zcopy_stats_get(s, v, len);
	case SDP_LAST_BIND_ERR: return sdp_opt_put_int(v, len, s->last_bind_err);
	case SDP_CONN_TRANSPORT: return sdp_opt_put_int(v, len, conn_transport(s));
	default:
		return -ENOPROTOOPT;
	}
}

SDP_EXPORT int getsockopt(int fd, int level, int name, void *v, socklen_t *len)
{
	struct sdp_sock *s = sdp_fd_get(fd);
	int r;

	if (!s) {
		r = sdp_relayed_getsockopt(fd, level, name, v, len);
		if (r != -ENOENT)
			return sdp_ret(r);
		sdp_real_init();
		return sdp_real.getsockopt(fd, level, name, v, len);
	}
	if (level == SOL_SOCKET && name == SO_ERROR) {
		int e;

		if (sdp_sock_late_fallback(s, fd, &e)) {
			sdp_sock_put(s);
			return sdp_ret(sdp_opt_put_int(v, len, e));
		}
	}
	if (level == SOL_SOCKET || level == AF_INET_SDP)
		r = get_sol_socket(s, name, v, len);
	else if (level == IPPROTO_TCP)
		r = get_tcp(s, name, v, len);
	else if (level == IPPROTO_IPV6 && name == IPV6_V6ONLY)
		r = sdp_opt_put_int(v, len, s->v6only);
	else if ((level == IPPROTO_IP && (name == IP_TOS || name == IP_TTL)) ||
		 (level == IPPROTO_IPV6 && name == IPV6_TCLASS))
		r = sdp_opt_put_int(v, len, s->tos);
	else
		r = -ENOPROTOOPT;
	sdp_sock_put(s);
	return sdp_ret(r);
}

static long conn_query(struct sdp_sock *s, unsigned long req, int *out)
{
	struct sdp_conn *c;
	long r = 0;

	pthread_mutex_lock(&s->lock);
	c = s->kind == SDP_SK_CONN ? s->conn : NULL;
	if (!c) {
		pthread_mutex_unlock(&s->lock);
		return s->kind == SDP_SK_LISTEN ? -EINVAL : (*out = 0, 0);
	}
	pthread_mutex_lock(&c->lock);
	sdp_conn_progress_locked(c);
	switch (req) {
	case FIONREAD:
		*out = (int)(c->rx_bytes > INT32_MAX ? INT32_MAX : c->rx_bytes);
		break;
	case SIOCOUTQ:
		*out = (int)c->txq_len;
		break;
	case SIOCATMARK:
		*out = sdp_conn_at_mark_locked(c);
		break;
	default:
		r = -ENOTTY;
	}
	pthread_mutex_unlock(&c->lock);
	pthread_mutex_unlock(&s->lock);
	return r;
}

SDP_EXPORT int ioctl(int fd, unsigned long req, ...)
{
	struct sdp_sock *s;
	va_list ap;
	void *arg;
	int val = 0;
	long r;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	s = sdp_fd_get(fd);
	if (!s) {
		sdp_real_init();
		return sdp_real.ioctl(fd, req, arg);
	}
	switch (req) {
	case FIONBIO:
		if (!arg) {
			r = -EFAULT;
			break;
		}
		/* Going non-blocking: poll or epoll names it next (paired
		 * then at the latest, and that call fails if it cannot). */
		if (*(int *)arg)
			sdp_sock_pair(s);
		atomic_store(&s->nonblock, !!*(int *)arg);
		sdp_switch_mirror_nonblock(s, !!*(int *)arg);
		r = sdp_real.ioctl(fd, req, arg) < 0 ? -errno : 0;
		break;
	case FIONREAD:	/* == SIOCINQ */
	case SIOCOUTQ:
	case SIOCATMARK:
		if (!arg) {
			r = -EFAULT;
			break;
		}
		r = conn_query(s, req, &val);
		if (r == 0)
			*(int *)arg = val;
		break;
	case FIOASYNC:	/* SIGIO comes from the kernel's readiness */
		r = sdp_sock_kernel_watch(s);
		if (r == 0)
			r = sdp_real.ioctl(fd, req, arg) < 0 ? -errno : 0;
		break;
	case FIOSETOWN:
	case SIOCSPGRP:	/* kept by the file: the pair's, not the lone one */
		r = sdp_sock_pair(s);
		if (r == 0)
			r = sdp_real.ioctl(fd, req, arg) < 0 ? -errno : 0;
		break;
	default:
		/* FIOCLEX, ... act on the descriptor itself. */
		r = sdp_real.ioctl(fd, req, arg) < 0 ? -errno : 0;
		break;
	}
	sdp_sock_put(s);
	return sdp_ret((int)r);
}

static int do_fcntl(int fd, int cmd, void *arg)
{
	struct sdp_sock *s = sdp_fd_get(fd);
	int r;

	if (!s)
		return sdp_real.fcntl(fd, cmd, arg);
	r = 0;
	if (cmd == F_SETFL && ((long)arg & O_ASYNC))
		r = sdp_sock_kernel_watch(s);	/* SIGIO: kernel readiness */
	else if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC ||
		 cmd == F_SETOWN || cmd == F_SETOWN_EX || cmd == F_SETSIG)
		r = sdp_sock_pair(s);	/* the file is shared or kept */
	else if (cmd == F_SETFL && ((long)arg & O_NONBLOCK))
		sdp_sock_pair(s);	/* poll or epoll names it next (and
					 * fails if it still cannot pair) */
	if (r < 0) {
		sdp_sock_put(s);
		errno = -r;
		return -1;
	}
	r = sdp_real.fcntl(fd, cmd, arg);
	if (r >= 0) {
		if (cmd == F_SETFL) {
			atomic_store(&s->nonblock,
				     !!((long)arg & O_NONBLOCK));
			sdp_switch_mirror_nonblock(s, !!((long)arg & O_NONBLOCK));
		}
		if ((cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) &&
		    sdp_fd_set(r, s) < 0) {
			sdp_real.close(r);
			r = -1;
			errno = EMFILE;
		}
	}
	sdp_sock_put(s);
	return r;
}

SDP_EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	sdp_real_init();
	return do_fcntl(fd, cmd, arg);
}

SDP_EXPORT int fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	sdp_real_init();
	return do_fcntl(fd, cmd, arg);
}
