/* SPDX-License-Identifier: MIT */
/*
 * switch.c — the socket switch: an unmodified program's AF_INET/AF_INET6 TCP
 * sockets go over SDP where the policy (libsdp.conf) allows and the peer
 * speaks SDP, and over kernel TCP otherwise, with no visible difference.
 *
 * At socket() the program-level verdict decides:
 *   tcp  -> a plain kernel socket; the switch never sees it again;
 *   sdp  -> an SDP socket only;
 *   both -> an SDP socket plus a hidden kernel TCP socket (the shadow).
 * The address-level verdict then decides at listen() and connect():
 *   - a "both" listener accepts SDP and TCP clients on one port through one
 *     descriptor (the shadow listens on TCP, the progress thread mirrors its
 *     readiness into the descriptor);
 *   - a "both" client tries SDP and, when the peer has no SDP listener (a
 *     refusal, never a timeout), connects over TCP at once.
 * Falling back replaces the application's descriptor with the shadow by
 * dup3() onto the same number, so the program keeps its descriptor and from
 * then on talks to the kernel directly.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/atfork.h"
#include "base/config.h"
#include "engine/progress.h"
#include "base/real.h"
#include "engine/stats_shm.h"
#include "policy/destmemo.h"
#include "policy/policy.h"
#include "sdp/sdp.h"
#include "socket/sock.h"

static struct {
	pthread_once_t once;
	struct sdp_policy *policy;
	char program[64];
	int enabled;
} SW = { .once = PTHREAD_ONCE_INIT };

static void switch_init(void)
{
	sdp_config_init();
	sdp_destmemo_configure(sdp_cfg.short_conn, sdp_cfg.short_conn_ms,
			       sdp_cfg.refused_hold_ms);
	sdp_atfork_add(SDP_ATFORK_INNER, sdp_destmemo_fork_prepare,
		       sdp_destmemo_fork_parent, sdp_destmemo_fork_child);
	sdp_fdlimit_raise();
	sdp_policy_program_name(SW.program, sizeof(SW.program));
	SW.enabled = !sdp_cfg.switch_off;
	if (SW.enabled)
		SW.policy = sdp_policy_load(NULL, stderr);
	/* libsdp's simple mode: every TCP socket is SDP. */
	if (sdp_cfg.simple) {
		sdp_policy_free(SW.policy);
		SW.policy = sdp_policy_parse("use sdp all * *:*\n",
					     "SIMPLE_LIBSDP", stderr);
	}
}

/*
 * fork() and "both" listeners on a transport that cannot share a listener
 * across processes (lsnfd.c shares them where it can): the listener's accept
 * queue lives in the memory of the process that created it, so children
 * could not accept its SDP connections.  At fork() such a listener becomes
 * the plain kernel TCP listener in every process of the family: TCP clients
 * are served by whoever accepts, SDP clients are refused and fall back to
 * TCP.  Correct, not accelerated.
 */
void sdp_switch_listener_to_tcp(struct sdp_sock *s, int child)
{
	struct sdp_listen *l = s->lsn;
	struct sdp_sock *taken;
	int fd = s->lsn_fd, tcp, cloexec, fl;

	if (!l || l->tcp_fd < 0 || fd < 0)
		return;
	tcp = l->tcp_fd;
	cloexec = sdp_real.fcntl(fd, F_GETFD);
	fl = sdp_real.fcntl(tcp, F_GETFL);
	sdp_real.fcntl(tcp, F_SETFL, atomic_load(&s->nonblock) ?
		       (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK));
	if (sdp_real.dup3(tcp, fd, cloexec > 0 && (cloexec & FD_CLOEXEC) ?
			  O_CLOEXEC : 0) < 0)
		return;
	sdp_real.close(tcp);
	l->tcp_fd = -1;
	taken = sdp_fd_take(fd);
	if (taken) {
		atomic_fetch_sub(&taken->nfds, 1);
		atomic_fetch_sub(&taken->refs, 1);	/* the table's */
	}
	if (child) {
		/* Our copies only: the parent's queue is not ours to touch. */
		if (l->tl)
			sdp_bound_close(l->tl);
		l->tl = NULL;
	} else {
		sdp_listen_close(l);
	}
	s->lsn = NULL;
	s->kind = SDP_SK_NEW;
	s->lsn_tracked = 0;	/* the caller unlinks it */
	sdp_lsnfd_release(s);
	sdp_ready_release(&s->ready);
	sdp_log(SDP_LOG_INFO, "fd %d: listener over TCP only after fork()", fd);
}

/* Loaded by the dynamic linker: read the policy before main() may rename
 * itself (argv[0]) and before any socket exists. */
__attribute__((constructor)) static void switch_ctor(void)
{
	if (sdp_real_init() == 0)
		pthread_once(&SW.once, switch_init);
}

static const struct sdp_policy *policy(void)
{
	pthread_once(&SW.once, switch_init);
	return SW.policy;
}

static void log_decision(const char *what, enum sdp_policy_verdict v, int rule)
{
	char buf[160];

	if (sdp_cfg.log_level < SDP_LOG_INFO)
		return;
	sdp_policy_describe(policy(), v, rule, buf, sizeof(buf));
	sdp_log(SDP_LOG_INFO, "%s: %s", what, buf);
}

int sdp_switch_socket(int domain, int type, int protocol)
{
	int base = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
	enum sdp_policy_verdict v;
	struct sdp_sock *s;
	int rule, err = 0, fd, shadow = -1;

	pthread_once(&SW.once, switch_init);
	if (!SW.enabled || base != SOCK_STREAM ||
	    (protocol != 0 && protocol != IPPROTO_TCP))
		return sdp_real.socket(domain, type, protocol);
	v = sdp_policy_program_verdict(SW.policy, SW.program, &rule);
	log_decision("socket", v, rule);
	if (v == SDP_POLICY_TCP)
		return sdp_real.socket(domain, type, protocol);
	if (v == SDP_POLICY_BOTH && !sdp_conn_fd_budget_ok()) {
		/* Half the descriptor limit is SDP's already: this one goes
		 * TCP, so that the program never runs out because of us. */
		fd = sdp_real.socket(domain, type, protocol);
		if (fd >= 0)
			sdp_switch_record_tcp(fd, "descriptor budget: half of "
					      "RLIMIT_NOFILE in SDP use", NULL);
		return fd;
	}
	if (v == SDP_POLICY_BOTH) {
		shadow = sdp_real.socket(domain, SOCK_STREAM | SOCK_CLOEXEC,
					 protocol);
		if (shadow < 0)
			return -1;
	}
	s = sdp_sock_new(domain == AF_INET6 ? AF_INET6_SDP : AF_INET_SDP,
			 type & (SOCK_NONBLOCK | SOCK_CLOEXEC), &err);
	if (!s) {
		if (shadow >= 0)	/* SDP unavailable: plain TCP then */
			sdp_real.close(shadow);
		return sdp_real.socket(domain, type, protocol);
	}
	s->switched = 1;
	s->shadow = shadow;
	s->tcp_family = domain;
	s->sock_type = type;
	fd = s->ready.app_fd;
	if (sdp_fd_set(fd, s) < 0) {
		sdp_real.close(fd);
		sdp_ready_release(&s->ready);
		if (shadow >= 0)
			sdp_real.close(shadow);
		errno = EMFILE;
		return -1;
	}
	return fd;
}

/* Both mirrors hold the socket's lock: a connect that succeeds closes
 * the shadow (sdp_switch_connected), and its number may then be another
 * descriptor's. */
void sdp_switch_mirror_sockopt(struct sdp_sock *s, int level, int name,
			       const void *v, socklen_t len)
{
	int saved = errno;

	if (!s->switched)
		return;
	pthread_mutex_lock(&s->lock);
	if (s->shadow >= 0)
		sdp_real.setsockopt(s->shadow, level, name, v, len);
	pthread_mutex_unlock(&s->lock);
	errno = saved;
}

/* Only we set the shadow's status flags (it is created O_RDWR), so its
 * O_NONBLOCK is known: no F_GETFL, and no call when it already agrees. */
static void mirror_nonblock_locked(struct sdp_sock *s, int on)
{
	on = !!on;
	if (!s->switched || s->shadow < 0 ||
	    atomic_load(&s->shadow_nonblock) == on)
		return;
	if (sdp_real.fcntl(s->shadow, F_SETFL,
			   O_RDWR | (on ? O_NONBLOCK : 0)) == 0)
		atomic_store(&s->shadow_nonblock, on);
}

void sdp_switch_mirror_nonblock(struct sdp_sock *s, int on)
{
	if (!s->switched || atomic_load(&s->shadow_nonblock) == !!on)
		return;
	pthread_mutex_lock(&s->lock);
	mirror_nonblock_locked(s, on);
	pthread_mutex_unlock(&s->lock);
}

/*
 * sdpstat shows kernel TCP connections that could have been SDP, with the
 * reason.  Their descriptors leave the SDP table, so the records are kept
 * in a small descriptor-indexed table of their own, freed at close().
 */
#define TCP_REC_MAX 65536
static int *tcp_rec;	/* fd -> stats slot + 1, 0 = none */

void sdp_switch_record_tcp(int fd, const char *why,
			   const struct sockaddr *remote)
{
	int slot;

	if (fd < 0 || fd >= TCP_REC_MAX)
		return;
	if (!__atomic_load_n(&tcp_rec, __ATOMIC_ACQUIRE)) {
		int *t = calloc(TCP_REC_MAX, sizeof(int));
		int *expect = NULL;

		if (!t || !__atomic_compare_exchange_n(&tcp_rec, &expect, t, 0,
						       __ATOMIC_ACQ_REL,
						       __ATOMIC_ACQUIRE))
			free(t);
	}
	if (!__atomic_load_n(&tcp_rec, __ATOMIC_ACQUIRE))
		return;
	slot = sdp_stat_slot_alloc(fd, 0);
	if (slot < 0)
		return;
	sdp_stat_slot_set_transport(slot, "tcp");
	sdp_stat_slot_set_state(slot, "TCP");
	sdp_stat_slot_set_reason(slot, why);
	if (remote)
		sdp_stat_slot_set_addrs(slot, NULL, remote);
	slot = __atomic_exchange_n(&__atomic_load_n(&tcp_rec, __ATOMIC_ACQUIRE)[fd],
				   slot + 1, __ATOMIC_ACQ_REL);
	if (slot > 0)
		sdp_stat_slot_free(slot - 1);
}

void sdp_switch_forget_tcp(int fd)
{
	/* Any thread closes descriptors, while another may be creating the
	 * table (sdp_switch_record_tcp). */
	int *t = __atomic_load_n(&tcp_rec, __ATOMIC_ACQUIRE);
	int slot;

	if (!t || fd < 0 || fd >= TCP_REC_MAX)
		return;
	slot = __atomic_exchange_n(&t[fd], 0, __ATOMIC_ACQ_REL);
	if (slot > 0)
		sdp_stat_slot_free(slot - 1);
}

/*
 * Fall back: make `fd` the kernel TCP socket.  Called with s->lock held on a
 * socket with a shadow.  The descriptor number, its close-on-exec flag and
 * its O_NONBLOCK are kept; the SDP side is released.
 */
static int become_tcp(struct sdp_sock *s, int fd, const char *why,
		      const struct sockaddr *remote)
{
	int cloexec = sdp_real.fcntl(fd, F_GETFD);
	struct sdp_sock *taken;

	mirror_nonblock_locked(s, atomic_load(&s->nonblock));
	if (sdp_real.dup3(s->shadow, fd, cloexec > 0 && (cloexec & FD_CLOEXEC) ?
			  O_CLOEXEC : 0) < 0)
		return -errno;
	sdp_real.close(s->shadow);
	s->shadow = -1;
	sdp_log(SDP_LOG_INFO, "fd %d: over TCP: %s", fd, why);
	sdp_switch_record_tcp(fd, why, remote);
	/* The descriptor no longer names the SDP socket (its epoll sets are
	 * given the kernel socket by connect_over_tcp). */
	taken = sdp_fd_take(fd);
	if (s->bound) {
		sdp_bound_close(s->bound);
		s->bound = NULL;
	}
	sdp_ready_release(&s->ready);
	s->kind = SDP_SK_NEW;
	if (taken) {
		atomic_fetch_sub(&taken->nfds, 1);
		sdp_sock_put(taken);	/* the table's reference */
	}
	return 0;
}

/* The TCP address the shadow is bound to, for binding SDP to the same. */
static int shadow_addr(struct sdp_sock *s, struct sockaddr_storage *ss,
		       socklen_t *len)
{
	*len = sizeof(*ss);
	return sdp_real.getsockname(s->shadow, (struct sockaddr *)ss, len) < 0 ?
		-errno : 0;
}

/* SDP's side of a "both" or policy-"sdp" socket, at the port its TCP side
 * (the shadow) holds: the shadow is the proof of ownership a shm client
 * checks, so the transport takes no claim of its own. */
static int sdp_bind_locked(struct sdp_sock *s, const struct sockaddr *sa,
			   socklen_t len)
{
	return sdp_sock_bind_locked(s, sa, len, SDP_BIND_TCP_HELD);
}

int sdp_switch_bind(struct sdp_sock *s, int fd, const struct sockaddr *sa,
		    socklen_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	int r;

	pthread_mutex_lock(&s->lock);
	if (s->kind != SDP_SK_NEW) {
		r = -EINVAL;
		goto out;
	}
	if (s->shadow < 0) {	/* "sdp": no TCP side */
		struct sockaddr_storage a;
		socklen_t alen;

		r = sdp_sock_addr_in(s, sa, len, &a, &alen);
		if (r == 0)
			r = sdp_bind_locked(s, (struct sockaddr *)&a, alen);
		goto out;
	}
	/* "both": the TCP bind decides (errors as TCP's); SDP takes the same
	 * port, or the socket stays TCP-only. */
	if (sdp_real.bind(s->shadow, sa, len) < 0) {
		r = -errno;
		goto out;
	}
	s->shadow_bound = 1;
	r = shadow_addr(s, &ss, &sl);
	if (r == 0)
		r = sdp_bind_locked(s, (struct sockaddr *)&ss, sl);
	if (r < 0) {
		char why[96];

		snprintf(why, sizeof(why), "SDP port unavailable (%s)",
			 strerror(-r));
		r = become_tcp(s, fd, why, NULL);
	}
out:
	pthread_mutex_unlock(&s->lock);
	return r;
}

static void local_addr(struct sdp_sock *s, struct sockaddr_storage *ss,
		       socklen_t *len)
{
	if (s->kind == SDP_SK_BOUND) {
		*ss = s->local;
		*len = s->local_len;
		return;
	}
	memset(ss, 0, sizeof(*ss));
	ss->ss_family = (sa_family_t)s->tcp_family;
	*len = s->tcp_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
					   sizeof(struct sockaddr_in);
}

/* Bind an unbound "both" socket to a free port on both sides, as listen()
 * and TCP's autobind do. */
static int autobind_locked(struct sdp_sock *s, int fd)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	int r;

	local_addr(s, &ss, &sl);
	pthread_mutex_unlock(&s->lock);
	r = sdp_switch_bind(s, fd, (struct sockaddr *)&ss, sl);
	pthread_mutex_lock(&s->lock);
	return r;
}

int sdp_switch_listen(struct sdp_sock *s, int fd, int backlog)
{
	struct sockaddr_storage ss;
	enum sdp_policy_verdict v;
	socklen_t sl;
	int r = 0, rule;

	pthread_mutex_lock(&s->lock);
	if (s->kind == SDP_SK_LISTEN) {
		sdp_listen_set_backlog(s->lsn, backlog);
		if (s->lsn->tcp_fd >= 0)
			sdp_real.listen(s->lsn->tcp_fd, backlog);
		goto out;
	}
	if (s->kind == SDP_SK_NEW && s->shadow >= 0) {
		r = autobind_locked(s, fd);
		if (r < 0 || s->kind != SDP_SK_BOUND)
			goto tcp_listen;	/* fell back while binding */
	}
	local_addr(s, &ss, &sl);
	v = sdp_policy_match(policy(), SDP_ROLE_SERVER, SW.program,
			     (struct sockaddr *)&ss, &rule);
	log_decision("listen", v, rule);
	if (v == SDP_POLICY_TCP && s->shadow >= 0) {
		r = become_tcp(s, fd, "policy: tcp for this address", NULL);
		if (r == 0)
			goto tcp_listen;
		goto out;
	}
	if (s->kind == SDP_SK_NEW) {
		pthread_mutex_unlock(&s->lock);
		return -EAGAIN;	/* socket.c's plain SDP path binds and listens */
	}
	r = sdp_ready_pair(&s->ready);	/* its readiness is the token's */
	if (r < 0)
		goto out;
	sdp_ready_set(&s->ready, 0);
	/* The TCP side listens first: an SDP client checks that the SDP
	 * listener's user owns a TCP listener on the port (shm_owner.c). */
	if (v == SDP_POLICY_BOTH && s->shadow >= 0 &&
	    sdp_real.listen(s->shadow, backlog) < 0) {
		r = -errno;
		goto out;
	}
	if (v != SDP_POLICY_BOTH && s->shadow >= 0) {
		/* "sdp": SDP only; the TCP socket stays as the claim, if the
		 * transport keeps one, and TCP clients are reset. */
		r = sdp_bound_keep_claim(s->bound, s->shadow);
		s->shadow = -1;
		if (r < 0)
			goto out;
	}
	r = sdp_listen_create(s->bound, backlog, &s->ready, &s->lsn);
	if (r < 0 && s->shadow >= 0) {
		char why[96];

		snprintf(why, sizeof(why), "SDP listen failed (%s)",
			 strerror(-r));
		r = become_tcp(s, fd, why, NULL);
		if (r == 0)
			goto tcp_listen;
	}
	if (r < 0)
		goto out;
	s->bound = NULL;
	s->kind = SDP_SK_LISTEN;
	if (s->shadow >= 0) {
		/* The listener owns the TCP side from now on. */
		r = sdp_listen_add_tcp(s->lsn, s->shadow);
		if (r == 0)
			s->shadow = -1;
	}
	if (r == 0)
		r = sdp_lsnfd_install(s, fd);
out:
	pthread_mutex_unlock(&s->lock);
	return r;
tcp_listen:
	pthread_mutex_unlock(&s->lock);
	if (r < 0)
		return r;
	return sdp_real.listen(fd, backlog) < 0 ? -errno : 0;
}

/* The peer has no SDP listener (or cannot be reached over SDP). */
static int refused(int r)
{
	return r == -ECONNREFUSED || r == -ENETUNREACH || r == -EHOSTUNREACH ||
	       r == -EADDRNOTAVAIL || r == -ENOENT;
}

/* This process has no room for an SDP connection's descriptors or memory
 * (socket/fdlimit.c); the TCP socket it already holds still works. */
static int out_of_resources(int r)
{
	return r == -EMFILE || r == -ENFILE || r == -ENOMEM;
}

/* The descriptor becomes the kernel TCP socket, which connects. */
static int connect_over_tcp(struct sdp_sock *s, int fd,
			    const struct sockaddr *sa, socklen_t len,
			    const char *why)
{
	int r;

	pthread_mutex_lock(&s->lock);
	r = become_tcp(s, fd, why, sa);
	pthread_mutex_unlock(&s->lock);
	if (r < 0)
		return r;
	r = sdp_real.connect(fd, sa, len) < 0 ? -errno : 0;
	/* The epoll sets the application put the descriptor in must now
	 * watch the kernel socket: once it connects (a fresh socket polls
	 * as hung up), and without the socket's lock (epoll_wait takes the
	 * sets' lock, then sockets'). */
	sdp_epfast_fd_replaced(fd, s, 1);
	return r;
}

/*
 * connect() on a switched socket.  Returns 1 when the caller should run the
 * ordinary SDP connect, 0/-errno when the switch handled it (TCP).
 */
int sdp_switch_connect(struct sdp_sock *s, int fd, const struct sockaddr *sa,
		       socklen_t len)
{
	enum sdp_policy_verdict v;
	int rule;

	if (!sa || len < sizeof(sa_family_t))
		return 1;
	v = sdp_policy_match(policy(), SDP_ROLE_CLIENT, SW.program, sa, &rule);
	log_decision("connect", v, rule);
	/* "sdp" for this destination: no silent fallback to TCP. */
	s->may_fallback = v == SDP_POLICY_BOTH;
	if (v == SDP_POLICY_BOTH && s->shadow >= 0 &&
	    (sdp_cfg.short_conn || sdp_cfg.refused_hold_ms)) {
		char why[128];
		int r;

		if (sdp_destmemo_prefer_tcp(sa, len, sdp_now_ns(), why,
					    sizeof(why))) {
			r = connect_over_tcp(s, fd, sa, len, why);
			if (r == -ECONNREFUSED)	/* SDP only now? */
				sdp_destmemo_tcp_refused(sa, len);
			return r;
		}
		if (sdp_cfg.short_conn && len <= sizeof(s->sl_dst)) {
			memcpy(&s->sl_dst, sa, len);
			s->sl_dst_len = len;
			s->sl_t0_ns = sdp_now_ns();
		}
	}
	if (v != SDP_POLICY_TCP || s->shadow < 0)
		return 1;
	return connect_over_tcp(s, fd, sa, len,
				"policy: tcp for this destination");
}

static bool connected(int fd)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int saved = errno;
	bool ok = sdp_real.getpeername(fd, (struct sockaddr *)&ss, &sl) == 0;

	errno = saved;
	return ok;
}

/* Called by socket.c when the SDP connect of a "both" socket failed. */
int sdp_switch_fallback_connect(struct sdp_sock *s, int fd,
				const struct sockaddr *sa, socklen_t len,
				int sdp_err, enum sdp_reason reason)
{
	int timed_out = reason == SDP_REASON_CONNECT_TIMEOUT &&
			sdp_err == -ETIMEDOUT;
	char why[160];
	int r;

	if (!s->switched || s->shadow < 0 ||
	    !(refused(sdp_err) || out_of_resources(sdp_err) || timed_out))
		return sdp_err;
	if (timed_out)
		snprintf(why, sizeof(why), "the SDP listener did not answer "
			 "within %u ms (SDP_CONNECT_TIMEOUT_MS)",
			 sdp_cfg.connect_timeout_ms);
	else if (reason == SDP_REASON_LISTENER_REFUSED)
		snprintf(why, sizeof(why), "%s", sdp_reason_str(reason));
	else
		snprintf(why, sizeof(why), refused(sdp_err) ?
			 "no SDP listener at the peer (%s)" :
			 "no resources for SDP here (%s)", strerror(-sdp_err));
	r = connect_over_tcp(s, fd, sa, len, why);
	/* A TCP listener answered: remember that SDP is not there.  On
	 * loopback a non-blocking connect has its answer before it returns
	 * EINPROGRESS; elsewhere nothing is learnt (getpeername says
	 * ENOTCONN), and a connect refused over TCP teaches nothing either
	 * (a server that is still starting). */
	if (refused(sdp_err) && sdp_cfg.refused_hold_ms &&
	    (r == 0 || (r == -EINPROGRESS && connected(fd))))
		sdp_destmemo_refused(sa, len, sdp_now_ns());
	return r;
}

/* Nothing falls back once the SDP connect succeeded: the kernel socket
 * kept for it goes (a descriptor less per connection), unless it holds
 * the port the application bound, which kernel TCP must go on seeing
 * taken.  An unbound SDP client's port is in its own namespace
 * (transport/shm/shm_portspace.c), not the kernel's. */
void sdp_switch_connected(struct sdp_sock *s)
{
	int fd = -1;

	pthread_mutex_lock(&s->lock);
	if (s->switched && !s->shadow_bound && s->kind == SDP_SK_CONN) {
		fd = s->shadow;
		s->shadow = -1;
	}
	pthread_mutex_unlock(&s->lock);
	if (fd >= 0)
		sdp_real.close(fd);
}

void sdp_switch_conn_closing(struct sdp_sock *s)
{
	struct sdp_conn *c = s->conn;
	uint64_t now, bytes;
	bool done, tcp_too;

	if (!s->sl_dst_len || !c)
		return;
	pthread_mutex_lock(&c->lock);
	done = c->active_open_done;
	tcp_too = c->peer_takes_tcp;
	bytes = c->stats.bytes_sent + c->stats.bytes_rcvd;
	pthread_mutex_unlock(&c->lock);
	s->sl_dst_len = 0;
	if (!done)
		return;		/* never connected: nothing learnt */
	now = sdp_now_ns();
	if (sdp_destmemo_closed((struct sockaddr *)&s->sl_dst,
				sizeof(s->sl_dst), now - s->sl_t0_ns, bytes,
				tcp_too, now))
		sdp_log(SDP_LOG_INFO, "connections to this destination are "
			"short-lived: new ones go over TCP for %u ms "
			"(SDP_SHORT_CONN=0 keeps them on SDP)",
			SDP_SHORT_HOLD_MS);
}

void sdp_switch_release(struct sdp_sock *s)
{
	if (s->shadow >= 0) {
		sdp_real.close(s->shadow);
		s->shadow = -1;
	}
}
