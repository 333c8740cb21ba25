/* SPDX-License-Identifier: MIT */
/*
 * socket.c — the socket switch's connection-management entry points:
 * socket, bind, listen, accept, accept4, connect, shutdown, close,
 * getsockname, getpeername, dup, dup2, dup3.
 *
 * Each interposed function maps the descriptor; anything that is not an SDP
 * socket goes straight to the C library.  SDP sockets never silently turn
 * into TCP here (that is the policy layer's job).
 */
#include <errno.h>
#include <limits.h>
#include <linux/close_range.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <fcntl.h>
#include <poll.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cancel.h"
#include "base/config.h"
#include "base/real.h"
#include "engine/appwake.h"
#include "engine/stats_shm.h"
#include "engine/zcopy.h"
#include "sdp/sdp.h"
#include "engine/relay.h"
#include "socket/sock.h"
#include "base/fdhigh.h"

SDP_EXPORT const char *sdp_version(void)
{
	return "0.1.0";
}

static int sdp_domain(int domain)
{
	return domain == AF_INET_SDP || domain == AF_INET6_SDP;
}

struct sdp_sock *sdp_sock_new(int domain, int flags, int *err)
{
	struct sdp_sock *s = calloc(1, sizeof(*s));
	int r;

	if (!s) {
		*err = -ENOMEM;
		return NULL;
	}
	r = sdp_ready_init(&s->ready, flags);
	if (r < 0) {
		free(s);
		*err = r;
		return NULL;
	}
	atomic_init(&s->refs, 0);
	atomic_init(&s->nfds, 0);
	pthread_mutex_init(&s->lock, NULL);
	s->domain = domain;
	s->family = domain == AF_INET6_SDP ? AF_INET6 : AF_INET;
	atomic_init(&s->nonblock, !!(flags & SOCK_NONBLOCK));
	s->sndbuf = (int)sdp_cfg.sndbuf;
	s->rcvbuf = (int)sdp_cfg.rcvbuf;
	s->zcopy_thresh = -1;	/* the system default (SDP_ZCOPY_THRESH) */
	s->shadow = -1;
	s->lsn_fd = -1;
	s->lsn_ep = -1;
	return s;
}

void sdp_sock_put(struct sdp_sock *s)
{
	if (atomic_fetch_sub(&s->refs, 1) == 1) {
		pthread_mutex_destroy(&s->lock);
		free(s);
	}
}

/*
 * After fork() another process may still hold the descriptor: then closing
 * it here must not end the connection (as with TCP, where the kernel socket
 * lives until its last descriptor closes).  The application's end of the
 * socketpair tells: our end sees a hang-up only once every copy is closed.
 */
static int others_hold(const struct sdp_sock *s)
{
	struct sdp_conn *c = s->conn;
	struct pollfd p = { .fd = -1, .events = POLLRDHUP };
	int held;

	/* A reset closes our end under the connection's lock (engine/
	 * readiness.c): looked at under it, the number is still ours and
	 * not a descriptor that reused it. */
	pthread_mutex_lock(&c->lock);
	p.fd = s->ready.lib_fd;
	held = p.fd >= 0 && sdp_real.poll(&p, 1, 0) >= 0 &&
	       !(p.revents & (POLLRDHUP | POLLHUP | POLLERR));
	pthread_mutex_unlock(&c->lock);
	if (held)
		return 1;
	/* A process that has the connection relayed for its new image
	 * (relay.h) drops its copies only once the relay is accepted: asked
	 * after the hang-up, this cannot miss it. */
	return sdp_relay_active(c);
}

int sdp_sock_went_plain(int fd, struct sdp_sock *s)
{
	struct sdp_sock *taken;
	struct sdp_conn *c;
	struct stat st;

	pthread_mutex_lock(&s->lock);
	c = s->kind == SDP_SK_CONN ? s->conn : NULL;
	if (c && sdp_relay_in_place(c))
		sdp_conn_get(c);
	else
		c = NULL;
	pthread_mutex_unlock(&s->lock);
	if (!c)
		return 0;
	/* One thread takes the entry and does the rest; another that met
	 * it at the same time just finds it gone. */
	taken = sdp_fd_take(fd);
	if (taken == s) {
		if (fstat(fd, &st) == 0)
			sdp_relayed_add((uint64_t)st.st_ino,
					(struct sockaddr *)&c->addr.local,
					c->addr.local_len,
					(struct sockaddr *)&c->addr.peer,
					c->addr.peer_len);
		/* epoll sets keep the descriptor (the same file) in the
		 * kernel; the user-space readiness forgets it. */
		sdp_epfast_fd_replaced(fd, s, 0);
		if (atomic_fetch_sub(&taken->nfds, 1) == 1)
			sdp_sock_release(taken);
		sdp_sock_put(taken);
	} else if (taken) {
		/* Not ours to take: back, with the table's reference. */
		if (sdp_fd_set(fd, taken) == 0)
			atomic_fetch_sub(&taken->nfds, 1);
		sdp_sock_put(taken);
	}
	sdp_conn_put(c);
	return 1;
}

void sdp_sock_release(struct sdp_sock *s)
{
	sdp_epfast_conns_changed();
	pthread_mutex_lock(&s->lock);
	if (s->conn && sdp_relay_in_place(s->conn)) {
		sdp_relay_forget_in_place(s->conn);	/* drops our ref */
		s->conn = NULL;
	} else if (s->conn && others_hold(s)) {
		sdp_conn_detach(s->conn, &s->ready);	/* drops our ref */
		s->conn = NULL;
	} else if (s->conn) {
		int abort = s->linger.l_onoff && s->linger.l_linger == 0;

		sdp_switch_conn_closing(s);
		sdp_conn_close(s->conn, abort);	/* drops our reference */
		s->conn = NULL;
	}
	sdp_lsnfd_release(s);
	if (s->lsn) {
		sdp_listen_close(s->lsn);
		s->lsn = NULL;
	}
	if (s->bound) {
		sdp_bound_close(s->bound);
		s->bound = NULL;
	}
	sdp_ready_release(&s->ready);
	sdp_switch_release(s);
	pthread_mutex_unlock(&s->lock);
}

static int sock_install(struct sdp_sock *s)
{
	int r = sdp_fd_set(s->ready.app_fd, s);

	if (r < 0) {
		sdp_real.close(s->ready.app_fd);
		sdp_ready_release(&s->ready);
		pthread_mutex_destroy(&s->lock);
		free(s);
		return r;
	}
	return s->ready.app_fd;
}

SDP_EXPORT int socket(int domain, int type, int protocol)
{
	int base = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
	struct sdp_sock *s;
	int err = 0;

	if (sdp_real_init() < 0 || !sdp_domain(domain)) {
		if (!sdp_real.socket) {
			errno = ENOSYS;
			return -1;
		}
		if (domain == AF_INET || domain == AF_INET6)
			return sdp_switch_socket(domain, type, protocol);
		return sdp_real.socket(domain, type, protocol);
	}
	sdp_config_init();
	if (base != SOCK_STREAM)
		return sdp_ret(-ESOCKTNOSUPPORT);
	if (protocol != 0 && protocol != IPPROTO_TCP)
		return sdp_ret(-EPROTONOSUPPORT);
	s = sdp_sock_new(domain, type & (SOCK_NONBLOCK | SOCK_CLOEXEC), &err);
	if (!s)
		return sdp_ret(err);
	return sdp_ret(sock_install(s));
}

int sdp_sock_addr_in(const struct sdp_sock *s, const struct sockaddr *sa,
		     socklen_t len, struct sockaddr_storage *out,
		     socklen_t *outlen)
{
	int fam;

	if (!sa)
		return -EFAULT;
	if (len < sizeof(sa_family_t))
		return -EINVAL;
	fam = sa->sa_family;
	if (fam == AF_INET_SDP)
		fam = AF_INET;
	else if (fam == AF_INET6_SDP)
		fam = AF_INET6;
	memset(out, 0, sizeof(*out));
	if (fam == AF_INET && s->family == AF_INET) {
		if (len < sizeof(struct sockaddr_in))
			return -EINVAL;
		memcpy(out, sa, sizeof(struct sockaddr_in));
		*outlen = sizeof(struct sockaddr_in);
	} else if (fam == AF_INET6 && s->family == AF_INET6) {
		if (len < sizeof(struct sockaddr_in6))
			return -EINVAL;
		memcpy(out, sa, sizeof(struct sockaddr_in6));
		*outlen = sizeof(struct sockaddr_in6);
	} else if (fam == AF_INET6 && !s->switched) {
		/* An IPv4 SDP socket given an IPv6 address (sdp_sock_ofed_family
		 * made it IPv6 unless the address is v4-mapped): its IPv4 one. */
		const struct sockaddr_in6 *sin6 = (const void *)sa;
		struct sockaddr_in *sin = (void *)out;

		if (len < sizeof(*sin6) ||
		    !IN6_IS_ADDR_V4MAPPED(&sin6->sin6_addr))
			return -EAFNOSUPPORT;
		sin->sin_port = sin6->sin6_port;
		memcpy(&sin->sin_addr, sin6->sin6_addr.s6_addr + 12, 4);
		*outlen = sizeof(*sin);
		fam = AF_INET;
	} else if (fam == AF_INET && !s->switched && !s->v6only) {
		/* An IPv6 SDP socket given an IPv4 address: its v4-mapped
		 * form, as the OFED SDP stack took it. */
		const struct sockaddr_in *sin = (const void *)sa;
		struct sockaddr_in6 *sin6 = (void *)out;

		if (len < sizeof(*sin))
			return -EINVAL;
		sin6->sin6_port = sin->sin_port;
		sin6->sin6_addr.s6_addr[10] = sin6->sin6_addr.s6_addr[11] = 0xff;
		memcpy(sin6->sin6_addr.s6_addr + 12, &sin->sin_addr, 4);
		*outlen = sizeof(*sin6);
		fam = AF_INET6;
	} else {
		return -EAFNOSUPPORT;
	}
	out->ss_family = (sa_family_t)fam;
	return 0;
}

/*
 * The OFED SDP stack let an AF_INET_SDP socket take IPv6 addresses as well,
 * so programs written for it make any getaddrinfo() result an SDP socket by
 * changing only the family.  Given a (not v4-mapped) IPv6 address before it
 * is bound or connected, an explicit IPv4 SDP socket becomes an IPv6 one,
 * dual-stack, as if created with AF_INET6_SDP.  Sockets of the switch keep
 * the kernel's rules.
 */
static void sdp_sock_ofed_family(struct sdp_sock *s, const struct sockaddr *sa,
				 socklen_t len)
{
	const struct sockaddr_in6 *sin6 = (const void *)sa;

	if (s->switched || !sa || len < sizeof(*sin6) ||
	    (sa->sa_family != AF_INET6 && sa->sa_family != AF_INET6_SDP) ||
	    IN6_IS_ADDR_V4MAPPED(&sin6->sin6_addr))
		return;
	pthread_mutex_lock(&s->lock);
	if (s->kind == SDP_SK_NEW && s->family == AF_INET)
		s->family = AF_INET6;
	pthread_mutex_unlock(&s->lock);
}

int sdp_sock_bind_locked(struct sdp_sock *s, const struct sockaddr *a,
			 socklen_t len, unsigned flags)
{
	struct sdp_listener *l = NULL;
	int r;

	if (s->kind != SDP_SK_NEW)
		return -EINVAL;
	flags |= s->v6only ? SDP_BIND_V6ONLY : 0;
	r = sdp_bound_create(a, len, flags, &l, &s->local, &s->local_len);
	s->last_bind_err = r;
	if (r < 0)
		return r;
	s->bound = l;
	s->kind = SDP_SK_BOUND;
	return 0;
}

SDP_EXPORT int bind(int fd, const struct sockaddr *sa, socklen_t len)
{
	struct sdp_sock *s = sdp_fd_get(fd);
	struct sockaddr_storage a;
	socklen_t alen;
	int r;

	if (!s) {
		sdp_real_init();
		return sdp_real.bind(fd, sa, len);
	}
	if (s->switched) {
		r = sdp_switch_bind(s, fd, sa, len);
		sdp_sock_put(s);
		return sdp_ret(r);
	}
	sdp_sock_ofed_family(s, sa, len);
	r = sdp_sock_addr_in(s, sa, len, &a, &alen);
	if (r == 0) {
		pthread_mutex_lock(&s->lock);
		r = sdp_sock_bind_locked(s, (struct sockaddr *)&a, alen, 0);
		pthread_mutex_unlock(&s->lock);
	}
	sdp_sock_put(s);
	return sdp_ret(r);
}

static void wildcard(const struct sdp_sock *s, struct sockaddr_storage *a,
		     socklen_t *len)
{
	memset(a, 0, sizeof(*a));
	a->ss_family = (sa_family_t)s->family;
	*len = s->family == AF_INET ? sizeof(struct sockaddr_in) :
				      sizeof(struct sockaddr_in6);
}

SDP_EXPORT int listen(int fd, int backlog)
{
	struct sdp_sock *s = sdp_fd_get(fd);
	struct sockaddr_storage a;
	socklen_t alen;
	int r = 0;

	if (!s) {
		sdp_real_init();
		return sdp_real.listen(fd, backlog);
	}
	if (s->switched) {
		r = sdp_switch_listen(s, fd, backlog);
		if (r != -EAGAIN) {
			sdp_sock_put(s);
			return sdp_ret(r);
		}
		r = 0;	/* SDP only and unbound: the plain path below */
	}
	pthread_mutex_lock(&s->lock);
	if (s->kind == SDP_SK_LISTEN) {
		pthread_mutex_lock(&s->lsn->lock);
		if (s->lsn->closed)
			r = -EINVAL;	/* shut down (listener_shutdown) */
		else
			sdp_listen_set_backlog(s->lsn, backlog);
		pthread_mutex_unlock(&s->lsn->lock);
		goto out;
	}
	if (s->kind == SDP_SK_NEW) {
		wildcard(s, &a, &alen);	/* as TCP: autobind a free port */
		r = sdp_sock_bind_locked(s, (struct sockaddr *)&a, alen, 0);
		if (r < 0)
			goto out;
	}
	if (s->kind != SDP_SK_BOUND) {
		r = -EINVAL;
		goto out;
	}
	r = sdp_ready_pair(&s->ready);	/* its readiness is the token's */
	if (r < 0)
		goto out;
	sdp_ready_set(&s->ready, 0);	/* nothing to accept yet */
	r = sdp_listen_create(s->bound, backlog, &s->ready, &s->lsn);
	if (r < 0)
		goto out;
	s->bound = NULL;
	s->kind = SDP_SK_LISTEN;
	r = sdp_lsnfd_install(s, fd);
out:
	pthread_mutex_unlock(&s->lock);
	sdp_sock_put(s);
	return sdp_ret(r);
}

static void copy_addr(const struct sockaddr_storage *src, socklen_t srclen,
		      struct sockaddr *dst, socklen_t *dstlen)
{
	socklen_t n;

	if (!dst || !dstlen)
		return;
	n = *dstlen < srclen ? *dstlen : srclen;
	memcpy(dst, src, n);
	*dstlen = srclen;	/* the real size, as the kernel reports */
}

static void conn_apply_options(struct sdp_conn *c, const struct sdp_sock *s)
{
	c->nodelay = !!s->nodelay;
	c->oob_inline = !!s->oobinline;
	c->sndbuf = (uint32_t)s->sndbuf;
	c->rcvbuf = (uint32_t)s->rcvbuf;
	sdp_zcopy_set_thresh_locked(c, s->zcopy_thresh);
}

/* A thread cancelled in accept()'s poll: release what do_accept() holds. */
struct accept_held {
	struct sdp_sock *s;
	struct sdp_listen *l;
};

static void accept_cancelled(void *arg)
{
	struct accept_held *h = arg;

	sdp_listen_put(h->l);
	sdp_sock_put(h->s);
}

/* How long a blocking accept() waits for a real connection after ones that
 * were not (see accept_any). */
#define SDP_ACCEPT_ABORT_MS 1000

static int64_t now_ms(void)
{
	return (int64_t)(sdp_now_ns() / 1000000u);
}

/* poll() is one of glibc's cancellation points: a pthread_cancel acts in
 * it, and the handler drops what the call holds.  -EINTR, 0 or 1. */
static int accept_poll(struct pollfd *p, int ms, struct accept_held *held)
{
	int r;

	if (sdp_cancel_kernel_wait_begin())
		return -EINTR;
	pthread_cleanup_push(accept_cancelled, held);
	r = poll(p, 1, ms);
	pthread_cleanup_pop(0);
	sdp_cancel_kernel_wait_end();
	return r < 0 && errno == EINTR ? -EINTR : r;
}

/*
 * Wait for an SDP connection or, on a "both" listener, a kernel TCP one.
 * Returns 0 with *c set, a TCP descriptor (> 0), or -errno.
 */
static int accept_any(struct sdp_sock *s, int fd, struct sdp_listen *l,
		      int flags, struct sdp_conn **c, struct sockaddr *sa,
		      socklen_t *len)
{
	int nonblock = atomic_load(&s->nonblock), r, tmo;
	struct accept_held held = { s, l };
	int64_t abort_by = -1;
	bool aborted;

	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };

		if (l->tcp_fd < 0 && !l->shared) {
			/* Private SDP-only listener: sleep on its queue. */
			r = sdp_listen_accept(l, nonblock, s->rcvtimeo_ms, c);
			/* Shared meanwhile (another thread forked): wait
			 * on the descriptor from now on. */
			if (r != -EAGAIN || nonblock || !l->shared)
				return r;
			continue;
		}
		r = sdp_listen_accept(l, 1, 0, c);
		/* A shared listener's readiness was connections that did
		 * not become one (silent, held for a late Hello, or bad). */
		aborted = r == -ECONNABORTED;
		if (r != -EAGAIN && !aborted)
			return r;
		r = sdp_listen_accept_tcp(l, flags);
		if (r >= 0) {
			struct sockaddr_storage peer;
			socklen_t pl = sizeof(peer);

			if (sdp_real.getpeername(r, (struct sockaddr *)&peer,
						 &pl) < 0)
				pl = 0;
			if (sa && len) {
				memcpy(sa, &peer, *len < pl ? *len : pl);
				*len = pl;
			}
			sdp_switch_record_tcp(r, "the client is not using SDP",
					      pl ? (struct sockaddr *)&peer : NULL);
			return r;
		}
		if (r != -EAGAIN || nonblock)
			return r;
		/* TCP's accept() never blocks for long after a readiness
		 * that a connection made, and a program that sleeps in
		 * select() with its signals blocked between two (the
		 * PostgreSQL postmaster) relies on it.  After connections
		 * that were none (silent ones, held for a late Hello, or bad)
		 * a blocking accept() waits for a real one up to
		 * SDP_ACCEPT_ABORT_MS, then says the connection was aborted,
		 * as POSIX allows.  A held connection makes the descriptor
		 * readable once its Hello comes (shm_share.c). */
		if (aborted && abort_by < 0)
			abort_by = now_ms() + SDP_ACCEPT_ABORT_MS;
		tmo = s->rcvtimeo_ms ? s->rcvtimeo_ms : -1;
		if (abort_by >= 0) {
			int64_t left = abort_by - now_ms();

			if (left <= 0)
				return -ECONNABORTED;
			if (tmo < 0 || left < tmo)
				tmo = (int)left;
		}
		/* The descriptor is an epoll set over every queue (lsnfd.c);
		 * after a wake-up another process may win the race: then we
		 * find nothing and sleep again, as TCP's accept does. */
		r = accept_poll(&p, tmo, &held);
		if (r == -EINTR)
			return -EINTR;
		if (r == 0)
			return abort_by >= 0 && now_ms() >= abort_by ?
			       -ECONNABORTED : -EAGAIN;
	}
}

static int do_accept(int fd, struct sockaddr *sa, socklen_t *len, int flags)
{
	struct sdp_sock *s = sdp_fd_get(fd), *ns;
	struct sdp_listen *l;
	struct sdp_conn *c;
	int r, err = 0, nfd;

	if (!s) {
		/* -errno: the caller converts once (EAGAIN must stay EAGAIN). */
		sdp_real_init();
		r = sdp_real.accept4(fd, sa, len, flags);
		return r < 0 ? -errno : r;
	}
	sdp_cancel_enter();	/* base/cancel.h */
	if (flags & ~(SOCK_NONBLOCK | SOCK_CLOEXEC)) {
		r = -EINVAL;
		goto out;
	}
	pthread_mutex_lock(&s->lock);
	l = s->kind == SDP_SK_LISTEN ? s->lsn : NULL;
	if (l)
		sdp_listen_get(l);	/* close() may run meanwhile */
	pthread_mutex_unlock(&s->lock);
	if (!l) {
		r = -EINVAL;
		goto out;
	}
	r = accept_any(s, fd, l, flags, &c, sa, len);
	if (r != 0) {
		sdp_listen_put(l);
		goto out;	/* error, or a kernel TCP connection (r = fd) */
	}
	ns = sdp_sock_new(s->domain, flags, &err);
	if (!ns) {
		/* EMFILE and the like: as TCP, the connection stays queued
		 * for a later accept(). */
		sdp_listen_requeue(l, c);
		sdp_listen_put(l);
		r = err;
		goto out;
	}
	sdp_listen_put(l);
	/* Options set on the listener are inherited, as with TCP. */
	ns->nodelay = s->nodelay;
	ns->oobinline = s->oobinline;
	ns->keepalive = s->keepalive;
	ns->sndbuf = s->sndbuf;
	ns->rcvbuf = s->rcvbuf;
	ns->linger = s->linger;
	ns->zcopy_thresh = s->zcopy_thresh;
	ns->kind = SDP_SK_CONN;
	ns->conn = c;
	pthread_mutex_lock(&c->lock);
	conn_apply_options(c, ns);
	c->ready = &ns->ready;
	sdp_conn_progress_locked(c);	/* also mirrors readiness */
	if (c->state != SDP_ST_CONNECTING)
		copy_addr(&c->addr.peer, c->addr.peer_len, sa, len);
	pthread_mutex_unlock(&c->lock);
	nfd = sock_install(ns);
	if (nfd >= 0)
		sdp_stat_slot_set_fd(sdp_stat_conn_slot(c), nfd);	/* sdpstat */
	r = nfd;
out:
	sdp_sock_put(s);
	sdp_cancel_leave(r, 1);
	return r;
}

SDP_EXPORT int accept(int fd, struct sockaddr *sa, socklen_t *len)
{
	return sdp_ret(do_accept(fd, sa, len, 0));
}

SDP_EXPORT int accept4(int fd, struct sockaddr *sa, socklen_t *len, int flags)
{
	return sdp_ret(do_accept(fd, sa, len, flags));
}

/* An attempt that failed before the handshake completed. */
static int never_connected(const struct sdp_conn *c)
{
	return c->reason == SDP_REASON_REFUSED ||
	       c->reason == SDP_REASON_LISTENER_REFUSED ||
	       c->reason == SDP_REASON_CONNECT_TIMEOUT;
}

static int still_connecting(struct sdp_conn *c);
static int switch_fallback(struct sdp_sock *s, int fd, const struct sockaddr *sa,
			   socklen_t len, int err);

/* Start an active open.  Called with s->lock held.  `waits`: the caller
 * waits for the answer (a blocking connect) and lists the connection with
 * the progress thread by that wait (sdp_conn_wait_connected). */
static int sock_connect_start(struct sdp_sock *s,
			      const struct sockaddr_storage *a, socklen_t alen,
			      int waits)
{
	struct sdp_conn *c;
	int r;

	r = sdp_conn_alloc(&c);
	if (r < 0)
		return r;
	conn_apply_options(c, s);
	c->ready = &s->ready;
	c->connect_waits = !!waits;
	sdp_ready_set(&s->ready, 0);	/* not writable until connected */
	r = sdp_conn_connect(c, s->bound, (const struct sockaddr *)a, alen);
	s->bound = NULL;	/* consumed, success or not */
	if (r < 0) {
		pthread_mutex_lock(&c->lock);
		c->ready = NULL;
		pthread_mutex_unlock(&c->lock);
		sdp_ready_set(&s->ready, SDP_READY_OUT);
		sdp_conn_put(c);
		s->kind = SDP_SK_NEW;
		return r;
	}
	s->conn = c;
	s->kind = SDP_SK_CONN;
	sdp_stat_slot_set_fd(sdp_stat_conn_slot(c), s->ready.app_fd);
	return 0;
}

int sdp_sock_pair(struct sdp_sock *s)
{
	struct sdp_conn *c = NULL;
	int r = 0;

	if (!atomic_load(&s->ready.lone))	/* cleared once, under the
						 * locks below */
		return 0;
	pthread_mutex_lock(&s->lock);
	if (s->kind == SDP_SK_CONN && s->conn) {
		c = s->conn;
		pthread_mutex_lock(&c->lock);
	}
	/* A close on another thread takes the number out of the table
	 * first (and, with a connection, out of ready.app_fd under its
	 * lock): the pair never lands on a number reused meanwhile. */
	if (atomic_load(&s->ready.lone) && s->ready.app_fd >= 0 &&
	    sdp_fd_peek(s->ready.app_fd) == s) {
		r = sdp_ready_pair(&s->ready);
		if (r < 0)
			sdp_log(SDP_LOG_ERR, "fd %d: no readiness pair (%s): "
				"poll, select and epoll cannot watch it",
				s->ready.app_fd, strerror(-r));
		/* The mirror was not kept while lone: make it now. */
		if (r == 0 && c && c->ready == &s->ready)
			sdp_conn_update_ready_locked(c);
	}
	if (c)
		pthread_mutex_unlock(&c->lock);
	pthread_mutex_unlock(&s->lock);
	return r;
}

int sdp_sock_kernel_watch(struct sdp_sock *s)
{
	struct sdp_listen *l = NULL;
	struct sdp_conn *c = NULL;
	int r;

	/* Watched but still lone: its pairing failed at a fork (no
	 * descriptor left); it is tried again here. */
	if (atomic_load_explicit(&s->ready.kwatched, memory_order_relaxed) &&
	    !atomic_load(&s->ready.lone))
		return 0;
	r = sdp_sock_pair(s);
	if (r < 0)
		return r;
	pthread_mutex_lock(&s->lock);
	if (s->kind == SDP_SK_CONN && s->conn) {
		c = s->conn;
		sdp_conn_get(c);
	} else {
		/* A connection made later reads it at its first arm. */
		atomic_store(&s->ready.kwatched, true);
		if (s->kind == SDP_SK_LISTEN && s->lsn) {
			l = s->lsn;
			sdp_listen_get(l);
		}
	}
	pthread_mutex_unlock(&s->lock);
	if (l) {
		/* Not under s->lock: a fork holds every listener's lock, and
		 * the child would inherit the socket's locked. */
		sdp_listen_kernel_watch(l);
		sdp_listen_put(l);
	}
	if (!c)
		return 0;
	/* Armed quietly until now: armed loudly, with our descriptor handed
	 * to the peer, before that wait can sleep. */
	pthread_mutex_lock(&c->lock);
	if (c->ready == &s->ready && sdp_appwake_kernel_watch_locked(c))
		sdp_conn_update_ready_locked(c);
	else
		atomic_store(&s->ready.kwatched, true);
	pthread_mutex_unlock(&c->lock);
	sdp_conn_put(c);
	return 0;
}

static bool sock_is_conn(struct sdp_sock *s)
{
	bool conn;

	pthread_mutex_lock(&s->lock);
	conn = s->kind == SDP_SK_CONN;
	pthread_mutex_unlock(&s->lock);
	return conn;
}

SDP_EXPORT int connect(int fd, const struct sockaddr *sa, socklen_t len)
{
	struct sdp_sock *s = sdp_fd_get(fd);
	struct sockaddr_storage a;
	struct sdp_conn *c = NULL;
	socklen_t alen;
	int r, nonblock;

	if (!s) {
		sdp_real_init();
		return sdp_real.connect(fd, sa, len);
	}
	sdp_cancel_enter();	/* base/cancel.h */
	/* Read once: a connect that lists its connection with the progress
	 * thread only when its own wait ends must make that wait. */
	nonblock = atomic_load(&s->nonblock);
	/* The choice of transport is made once, on an unconnected socket: a
	 * connect() on one that is connecting or connected only reports
	 * (EALREADY, EISCONN), as the kernel's does, whatever the switch has
	 * learnt about the destination since. */
	if (s->switched && !sock_is_conn(s)) {
		r = sdp_switch_connect(s, fd, sa, len);
		if (r != 1)
			goto out;	/* the policy sent it to TCP */
		s->fb_dst_len = 0;
		if (s->may_fallback && len <= sizeof(s->fb_dst)) {
			memcpy(&s->fb_dst, sa, len);
			s->fb_dst_len = len;
		}
	}
	sdp_sock_ofed_family(s, sa, len);
	r = sdp_sock_addr_in(s, sa, len, &a, &alen);
	if (r < 0)
		goto out;
	pthread_mutex_lock(&s->lock);
	if (s->kind == SDP_SK_LISTEN) {
		r = -EINVAL;
	} else if (s->kind == SDP_SK_CONN) {
		c = s->conn;
		pthread_mutex_lock(&c->lock);
		sdp_conn_progress_locked(c);
		if (c->state == SDP_ST_CONNECTING)
			r = -EALREADY;
		else if (c->state == SDP_ST_RESET && c->so_error) {
			r = c->so_error;	/* report a failed attempt once */
			c->so_error = 0;
		} else
			r = -EISCONN;
		pthread_mutex_unlock(&c->lock);
		c = NULL;
	} else {
		r = sock_connect_start(s, &a, alen, !nonblock);
		if (r == 0) {
			c = s->conn;
			sdp_conn_get(c);
			sdp_epfast_conns_changed();
		}
	}
	pthread_mutex_unlock(&s->lock);
	if (r < 0 && s->switched && s->shadow >= 0 && s->may_fallback && !c &&
	    r != -EALREADY && r != -EISCONN && r != -EINVAL) {
		r = switch_fallback(s, fd, sa, len, r);
		goto out;
	}
	if (r < 0 || !c)
		goto out;
	if (nonblock) {
		pthread_mutex_lock(&c->lock);
		sdp_conn_progress_locked(c);
		if (c->state == SDP_ST_ESTABLISHED)
			r = 0;
		else if (c->state == SDP_ST_RESET && s->switched)
			r = c->err;	/* refused at once: maybe fall back */
		else
			r = -EINPROGRESS;
		pthread_mutex_unlock(&c->lock);
	} else {
		r = sdp_conn_wait_connected(c, s->sndtimeo_ms ? s->sndtimeo_ms : -1);
		if (r == -ETIMEDOUT && still_connecting(c))
			r = -EINPROGRESS;	/* as TCP with SO_SNDTIMEO */
	}
	sdp_conn_put(c);
	if (r < 0 && r != -EINPROGRESS && r != -EINTR && s->switched &&
	    s->shadow >= 0 && s->may_fallback)
		r = switch_fallback(s, fd, sa, len, r);
	else if (r == 0 && s->switched)
		sdp_switch_connected(s);
out:
	sdp_sock_put(s);
	sdp_cancel_leave(r, 1);
	return sdp_ret(r);
}

/* SO_SNDTIMEO ran out, not the handshake's own deadline. */
static int still_connecting(struct sdp_conn *c)
{
	int r;

	pthread_mutex_lock(&c->lock);
	r = c->state == SDP_ST_CONNECTING;
	pthread_mutex_unlock(&c->lock);
	return r;
}

/* The SDP attempt of a "both" socket failed: drop it, maybe go TCP. */
static int switch_fallback(struct sdp_sock *s, int fd, const struct sockaddr *sa,
			   socklen_t len, int err)
{
	enum sdp_reason why = SDP_REASON_NONE;
	struct sdp_conn *c;

	pthread_mutex_lock(&s->lock);
	c = s->conn;
	s->conn = NULL;
	s->kind = SDP_SK_NEW;
	pthread_mutex_unlock(&s->lock);
	sdp_epfast_conns_changed();
	if (c) {
		pthread_mutex_lock(&c->lock);
		why = c->reason;
		pthread_mutex_unlock(&c->lock);
		sdp_conn_close(c, 1);
	}
	return sdp_switch_fallback_connect(s, fd, sa, len, err, why);
}

/*
 * getsockopt(SO_ERROR) on a "both" socket whose non-blocking SDP attempt
 * failed after connect() returned (no answer in time, or refused): the
 * descriptor becomes the TCP socket, connecting to the same destination,
 * and stays in the application's epoll sets (become_tcp).  Event loops
 * read SO_ERROR when the descriptor turns writable, and this is that
 * moment.  1 if it handled the call, with the error to report in
 * *so_error (the kernel socket's once it switched).
 */
int sdp_sock_late_fallback(struct sdp_sock *s, int fd, int *so_error)
{
	struct sdp_conn *c;
	int err = 0, r, up = 0;
	socklen_t l = sizeof(*so_error);

	if (!s->switched || s->shadow < 0 || !s->may_fallback ||
	    !s->fb_dst_len)
		return 0;
	pthread_mutex_lock(&s->lock);
	c = s->kind == SDP_SK_CONN ? s->conn : NULL;
	if (c) {
		pthread_mutex_lock(&c->lock);
		sdp_conn_progress_locked(c);
		if (c->state == SDP_ST_RESET && never_connected(c))
			err = c->so_error;
		up = c->active_open_done;
		pthread_mutex_unlock(&c->lock);
	}
	pthread_mutex_unlock(&s->lock);
	if (up)
		sdp_switch_connected(s);
	if (!err)
		return 0;
	r = switch_fallback(s, fd, (struct sockaddr *)&s->fb_dst,
			    s->fb_dst_len, err);
	*so_error = -err;	/* not switched: the SDP attempt's error */
	if (sdp_fd_peek(fd) == s)
		return 1;
	if (r != 0 && r != -EINPROGRESS) {
		*so_error = -r;	/* the TCP connect failed at once */
		return 1;
	}
	if (r == -EINPROGRESS) {
		/* Loopback or a LAN answers within this wait; past it the
		 * application sees EAGAIN, then EPOLLOUT, as on any
		 * connecting TCP socket. */
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		struct timespec ts = { 1, 0 };

		syscall(SYS_ppoll, &p, 1, &ts, NULL, 0);
	}
	if (sdp_real.getsockopt(fd, SOL_SOCKET, SO_ERROR, so_error, &l) < 0)
		*so_error = errno;
	return 1;
}

/* shutdown(SHUT_RD or SHUT_RDWR) of a listener, as Linux does for TCP:
 * it stops listening, and every accept() blocked in it returns EINVAL
 * (the way programs stop their accept threads); polls on it see it
 * readable.  Unlike TCP, listen() cannot start it again (EINVAL). */
static int listener_shutdown(struct sdp_sock *s)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct sdp_listen *l;
	int stopped;

	pthread_mutex_lock(&s->lock);
	l = s->kind == SDP_SK_LISTEN ? s->lsn : NULL;
	if (l)
		sdp_listen_get(l);
	pthread_mutex_unlock(&s->lock);
	if (!l)
		return -ENOTCONN;
	stopped = sdp_listen_stop(l, 1);
	pthread_mutex_lock(&s->lock);
	if (stopped && s->kind == SDP_SK_LISTEN && s->lsn == l) {
		/* Wake pollers and "both" accepts in poll: the token, put
		 * back into the descriptor's set if sharing took it out. */
		ev.data.fd = s->ready.app_fd;
		if (s->lsn_ep >= 0)
			sdp_real.epoll_ctl(s->lsn_ep, EPOLL_CTL_ADD,
					   s->ready.app_fd, &ev);
		sdp_ready_set(&s->ready, SDP_READY_IN);
	}
	pthread_mutex_unlock(&s->lock);
	sdp_listen_put(l);
	return stopped ? 0 : -ENOTCONN;	/* a second time: as Linux */
}

SDP_EXPORT int shutdown(int fd, int how)
{
	struct sdp_sock *s = sdp_fd_get(fd);
	int r;

	if (!s) {
		sdp_real_init();
		return sdp_real.shutdown(fd, how);
	}
	if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR)
		r = -EINVAL;
	else if (s->kind == SDP_SK_CONN)
		r = sdp_conn_shutdown(s->conn, how);
	else if (s->kind == SDP_SK_LISTEN)
		r = how == SHUT_WR ? 0 : listener_shutdown(s);
	else
		r = -ENOTCONN;
	sdp_sock_put(s);
	return sdp_ret(r);
}

/*
 * The application closes `fd`, or puts another file on its number.  The
 * number may be reused at once, by anything, a thread of this library
 * included (a relay's stream arrives with the lowest free number,
 * engine/relay.h): the readiness mirror, which reads and writes the
 * application's end, must not name it any more.  Another number of the
 * same socket takes its place, or none (every use then fails with EBADF,
 * harmlessly: the socket is on its way out).  Returns the number it had.
 */
static int app_fd_going(struct sdp_sock *s, int fd)
{
	struct sdp_conn *c = s->conn;
	int other = -1, n;

	if (s->kind != SDP_SK_CONN || !c || s->ready.app_fd != fd)
		return -1;
	if (atomic_load(&s->nfds) > 1)
		for (n = sdp_fd_scan_next(0); n >= 0 && other < 0;
		     n = sdp_fd_scan_next(n + 1))
			if (n != fd && sdp_fd_peek(n) == s)
				other = n;
	pthread_mutex_lock(&c->lock);
	s->ready.app_fd = other;
	pthread_mutex_unlock(&c->lock);
	return fd;
}

static void app_fd_back(struct sdp_sock *s, int fd)
{
	if (fd < 0)
		return;
	pthread_mutex_lock(&s->conn->lock);
	s->ready.app_fd = fd;
	pthread_mutex_unlock(&s->conn->lock);
}

SDP_EXPORT int close(int fd)
{
	struct sdp_sock *s;
	int r;

	if (sdp_real_init() < 0)
		return -1;
	/* The application never opened the library's descriptors: closing
	 * "everything but mine" in a loop must not take them (fdhigh.h).
	 * The library closes its own with sdp_close(), never through here. */
	if (sdp_fd_is_internal(fd)) {
		errno = EBADF;
		return -1;
	}
	/* After vfork(), before its exec: the descriptor is the child's to
	 * close, the socket is the parent's (exec.c handles the exec). */
	if (sdp_fd_mapped(fd) && sdp_in_memory_sharing_child())
		return sdp_real.close(fd);
	s = sdp_fd_take(fd);
	sdp_switch_forget_tcp(fd);
	/* Not a cancellation point here (its leave says 0): the descriptor
	 * is gone already, and the release must run whole
	 * (base/cancel.h). */
	if (s) {
		sdp_cancel_enter();
		app_fd_going(s, fd);
	}
	r = sdp_real.close(fd);
	if (s) {
		if (atomic_fetch_sub(&s->nfds, 1) == 1)
			sdp_sock_release(s);
		sdp_sock_put(s);
		sdp_cancel_leave(0, 0);
	}
	return r;
}

/* close_range(2) and closefrom(3) close by number, in the kernel: the
 * library's table would keep naming the SDP sockets among them (a later
 * descriptor of the same number would be taken for one), and its own
 * descriptors in the range would go.  So SDP sockets are closed through
 * close() first, and the kernel gets the range minus the library's own. */
SDP_EXPORT int close_range(unsigned int first, unsigned int last, int flags)
{
	unsigned int from = first;
	int fd, r = 0;

	if (first > last ||
	    (flags & ~(CLOSE_RANGE_CLOEXEC | CLOSE_RANGE_UNSHARE))) {
		errno = EINVAL;
		return -1;
	}
	if (last > INT_MAX)
		last = INT_MAX;
	/* After vfork() (Python's subprocess child calls this before its
	 * exec): no table, no engine, as exec.c; the parent's state is in
	 * our memory. */
	if (!(flags & CLOSE_RANGE_CLOEXEC) && !sdp_in_memory_sharing_child()) {
		for (fd = sdp_fd_scan_next((int)first);
		     fd >= 0 && (unsigned int)fd <= last;
		     fd = sdp_fd_scan_next(fd + 1))
			close(fd);
	}
	while (from <= last && r == 0) {
		int own = sdp_fd_next_internal((int)from, (int)last);
		unsigned int to = own < 0 ? last : (unsigned int)own - 1;

		if (own < 0 || (unsigned int)own > from)
			r = (int)syscall(SYS_close_range, from, to, flags);
		if (own < 0)
			break;
		from = (unsigned int)own + 1;
	}
	return r;
}

SDP_EXPORT void closefrom(int lowfd)
{
	struct rlimit rl;

	if (lowfd < 0)
		lowfd = 0;
	if (close_range((unsigned int)lowfd, ~0u, 0) == 0)
		return;
	/* No close_range(2) (seccomp): one by one, as glibc falls back to,
	 * past the library's own. */
	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur > INT_MAX)
		rl.rlim_cur = 65536;
	for (int fd = lowfd; fd < (int)rl.rlim_cur; fd++)
		if (!sdp_fd_is_internal(fd))
			close(fd);
}

SDP_EXPORT int getsockname(int fd, struct sockaddr *sa, socklen_t *len)
{
	struct sdp_sock *s = sdp_fd_get(fd);
	struct sockaddr_storage a;
	socklen_t alen;

	if (!s) {
		int r = sdp_relayed_name(fd, 0, sa, len);

		if (r != -ENOENT)
			return sdp_ret(r);
		sdp_real_init();
		return sdp_real.getsockname(fd, sa, len);
	}
	if (!sa || !len) {
		sdp_sock_put(s);
		return sdp_ret(-EFAULT);
	}
	pthread_mutex_lock(&s->lock);
	alen = 0;
	if (s->kind == SDP_SK_CONN) {
		/* The progress thread fills the addresses in as the
		 * connection is established: read them under its lock. */
		struct sdp_conn *c = s->conn;

		pthread_mutex_lock(&c->lock);
		if (c->addr.local_len) {
			a = c->addr.local;
			alen = c->addr.local_len;
		}
		pthread_mutex_unlock(&c->lock);
	} else if (s->kind == SDP_SK_BOUND || s->kind == SDP_SK_LISTEN) {
		a = s->local;
		alen = s->local_len;
	}
	if (!alen)
		wildcard(s, &a, &alen);
	pthread_mutex_unlock(&s->lock);
	copy_addr(&a, alen, sa, len);
	sdp_sock_put(s);
	return 0;
}

SDP_EXPORT int getpeername(int fd, struct sockaddr *sa, socklen_t *len)
{
	struct sdp_sock *s = sdp_fd_get(fd);
	int r = 0;

	if (!s) {
		r = sdp_relayed_name(fd, 1, sa, len);
		if (r != -ENOENT)
			return sdp_ret(r);
		sdp_real_init();
		return sdp_real.getpeername(fd, sa, len);
	}
	if (!sa || !len) {
		r = -EFAULT;
	} else if (s->kind != SDP_SK_CONN) {
		r = -ENOTCONN;
	} else {
		struct sdp_conn *c = s->conn;

		pthread_mutex_lock(&c->lock);
		if (c->state == SDP_ST_CONNECTING || c->state == SDP_ST_CLOSED ||
		    !c->addr.peer_len || (c->state == SDP_ST_RESET &&
					   never_connected(c)))
			r = -ENOTCONN;
		else
			copy_addr(&c->addr.peer, c->addr.peer_len, sa, len);
		pthread_mutex_unlock(&c->lock);
	}
	sdp_sock_put(s);
	return sdp_ret(r);
}

/* dup family: the new number names the same file, so the pair must be in
 * place first (a lone socket is replaced under one number only).  0, or
 * -1/errno. */
static int pair_before_dup(int fd)
{
	struct sdp_sock *s = sdp_fd_get(fd);
	int r;

	if (!s)
		return 0;
	r = sdp_sock_pair(s);
	sdp_sock_put(s);
	return sdp_ret(r);
}

/* dup family: the new descriptor aliases the same SDP socket. */
static int alias(int oldfd, int newfd)
{
	struct sdp_sock *s = sdp_fd_get(oldfd);
	int r;

	if (!s)
		return newfd;
	r = sdp_fd_set(newfd, s);
	sdp_sock_put(s);
	if (r < 0) {
		sdp_real.close(newfd);
		return r;
	}
	return newfd;
}

SDP_EXPORT int dup(int fd)
{
	int nfd;

	sdp_real_init();
	if (pair_before_dup(fd) < 0)
		return -1;
	nfd = sdp_real.dup(fd);
	return nfd < 0 ? nfd : sdp_ret(alias(fd, nfd));
}

static int dup_onto(int oldfd, int newfd, int flags, int use3)
{
	struct sdp_sock *old;
	int r, was;

	sdp_real_init();
	if ((oldfd == newfd && !use3) ||
	    ((sdp_fd_mapped(oldfd) || sdp_fd_mapped(newfd)) &&
	     sdp_in_memory_sharing_child()))	/* after vfork: see close() */
		return use3 ? sdp_real.dup3(oldfd, newfd, flags) :
			      sdp_real.dup2(oldfd, newfd);
	if (pair_before_dup(oldfd) < 0)
		return -1;
	/* newfd is closed implicitly: release its SDP socket if any. */
	old = sdp_fd_take(newfd);
	was = old ? app_fd_going(old, newfd) : -1;
	r = use3 ? sdp_real.dup3(oldfd, newfd, flags) :
		   sdp_real.dup2(oldfd, newfd);
	if (old) {
		if (r < 0) {
			app_fd_back(old, was);
			sdp_fd_set(newfd, old);	/* nothing happened */
			atomic_fetch_sub(&old->nfds, 1);
		} else if (atomic_fetch_sub(&old->nfds, 1) == 1) {
			sdp_sock_release(old);
		}
		sdp_sock_put(old);
	}
	return r < 0 ? r : sdp_ret(alias(oldfd, r));
}

SDP_EXPORT int dup2(int oldfd, int newfd)
{
	return dup_onto(oldfd, newfd, 0, 0);
}

SDP_EXPORT int dup3(int oldfd, int newfd, int flags)
{
	return dup_onto(oldfd, newfd, flags, 1);
}
