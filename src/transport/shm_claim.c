// SPDX-License-Identifier: MIT
/*
 * shm_claim.c — who may answer for an address: an shm listener proves that
 * it holds the kernel TCP port it stands for.
 *
 * The rendezvous names of the shm port space are abstract AF_UNIX names:
 * anybody on the host may bind one, so a name alone proves nothing.  The
 * kernel's TCP port space is the authority users already trust (exclusive
 * ports, privileged ports, one user's port not taken by another), so every
 * shm listener holds a kernel TCP socket on its address and port -- its
 * claim -- and passes it (SCM_RIGHTS) to each client it answers, before the
 * Accept.  The client accepts the connection only if the descriptor it
 * received is a TCP socket bound to the address it dialled (or a wildcard
 * covering it) and to its port, which nobody else can hold at the same time:
 *   - a listening socket: the kernel lets no other socket listen on or bind
 *     a conflicting address (SO_REUSEPORT groups only share between sockets
 *     of one user);
 *   - or a bound socket without SO_REUSEADDR and SO_REUSEPORT, never
 *     connected: no other socket can bind a conflicting address while it
 *     exists.
 * It must also live in the client's network namespace: ports are owned per
 * namespace, and any user may create one of their own.
 * Holding such a descriptor is a capability: only its owner, or whomever
 * the owner handed it to, has it.  So a client reaches an SDP listener at
 * address:port only if that listener could also own the TCP port there, and
 * a squatter on the name is refused (docs/SECURITY.md).
 *
 * A "both" listener's claim is its own kernel TCP listener.  An SDP-only
 * listener listens on TCP too (with SO_REUSEADDR, as servers do, so that
 * connections of an earlier run in TIME_WAIT do not keep it from its
 * port), and resets every TCP client that arrives there
 * (sdp__shm_claim_drain).  Our own claims always listen; the client still
 * accepts a bound-only one on the terms above.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "engine/real.h"
#include "transport/fdhigh.h"
#include "transport/shm.h"

/* A kernel TCP socket bound to a's address and port (0: one the kernel
 * picks), or -errno. */
static int claim_socket(const struct shm_addr *a)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int off = 0, one = 1, s;

	/* The real entry points: this is a kernel TCP socket of libsdp's
	 * own, not one for the socket switch to take over. */
	if (sdp_real_init() < 0)
		return -ENOSYS;
	s = sdp_fd_high(sdp_real.socket(a->v6 ? AF_INET6 : AF_INET,
					SOCK_STREAM | SOCK_CLOEXEC |
					SOCK_NONBLOCK, IPPROTO_TCP));
	if (s < 0)
		return -errno;
	/* The IPv6 wildcard name covers IPv4 too (shm_portspace.c): so
	 * does its claim. */
	if (a->v6)
		sdp_real.setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &off,
				    sizeof(off));
	sdp_real.setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	sdp__shm_addr_to_sockaddr(a, a->v6, &ss, &len);
	if (sdp_real.bind(s, (struct sockaddr *)&ss, len)) {
		int err = -errno;

		sdp_real.close(s);
		return err;
	}
	return s;
}

int sdp__shm_claim_reserve(struct shm_addr *a)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	struct shm_addr got;
	int s = claim_socket(a), is6;

	if (s < 0)
		return s;
	if (getsockname(s, (struct sockaddr *)&ss, &len) ||
	    sdp__shm_addr_parse((struct sockaddr *)&ss, len, &got, &is6)) {
		sdp_real.close(s);
		return -EADDRNOTAVAIL;
	}
	a->port = got.port;
	return s;
}

int sdp__shm_claim_take(struct shm_listener *l, int tcp_claim)
{
	int s = l->claim;

	if (tcp_claim >= 0) {		/* "both": the listener's own */
		if (s >= 0)
			close(s);
		l->claim = -1;
		s = sdp_fd_high(fcntl(tcp_claim, F_DUPFD_CLOEXEC, 0));
		if (s < 0)
			return -errno;
		l->claim = s;
		l->claim_own = false;
		return 0;
	}
	if (s < 0) {		/* a port the application named */
		s = claim_socket(&l->addr);
		if (s < 0)
			return s;
		l->claim = s;
	}
	l->claim_own = true;
	return sdp_real.listen(s, SHM_CLAIM_BACKLOG) ? -errno : 0;
}

void sdp__shm_claim_drain(struct shm_listener *l)
{
	struct linger lg = { 1, 0 };

	if (!l->claim_own)
		return;		/* a "both" listener's: the engine's TCP side */
	for (;;) {
		int s = accept4(l->claim, NULL, NULL, SOCK_CLOEXEC);

		if (s < 0)
			return;
		setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		close(s);	/* a reset: nothing listens on TCP here */
	}
}

int sdp__shm_claim_send(int sock, int claim)
{
	struct shm_wire_msg m;
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = { &m, SHM_WIRE_HDR };
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = cbuf.buf, .msg_controllen = sizeof(cbuf.buf),
	};
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	ssize_t n;

	if (claim < 0)
		return -EADDRNOTAVAIL;
	memset(&m, 0, sizeof(m));
	m.magic = SHM_WIRE_MAGIC;
	m.version = SHM_VERSION;
	m.type = SHM_MSG_CLAIM;
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &claim, sizeof(int));
	n = sendmsg(sock, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (n < 0)
		return -errno;
	return (size_t)n == iov.iov_len ? 0 : -EPROTO;
}

/* The checks run on every connect: the real entry points, and no option
 * read that another one implies. */
static int sockopt_int(int fd, int level, int name, int *v)
{
	socklen_t len = sizeof(*v);

	*v = 0;
	return sdp_real.getsockopt(fd, level, name, v, &len) ? -errno : 0;
}

/* Is the claim a TCP socket whose bound address covers dst (same family:
 * equal or wildcard; an IPv6 wildcard also covers IPv4 when dual-stack)? */
static bool claim_covers(int fd, const struct shm_addr *dst)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	struct shm_addr a;
	int is6, v6only, proto;

	/* An AF_INET/AF_INET6 socket of protocol TCP is a stream socket. */
	if (sdp_real.getsockname(fd, (struct sockaddr *)&ss, &len) ||
	    (ss.ss_family != AF_INET && ss.ss_family != AF_INET6) ||
	    sockopt_int(fd, SOL_SOCKET, SO_PROTOCOL, &proto) ||
	    proto != IPPROTO_TCP ||
	    sdp__shm_addr_parse((struct sockaddr *)&ss, len, &a, &is6) ||
	    a.port != dst->port)
		return false;
	if (a.v6 == dst->v6)	/* v4-mapped claims parse as IPv4 */
		return sdp__shm_addr_is_any(&a) ||
		       !memcmp(a.a, dst->a, a.v6 ? 16 : 4);
	return a.v6 && !dst->v6 && sdp__shm_addr_is_any(&a) &&
	       !sockopt_int(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only) && !v6only;
}

/* Do two sockets live in one network namespace?  A port is only owned
 * within its namespace, and any user may make a namespace of their own
 * (unshare -Urn) where every port is theirs. */
static bool same_netns(int a, int b)
{
	uint64_t ca = 0, cb = 0;
	socklen_t la = sizeof(ca), lb = sizeof(cb);

	return !sdp_real.getsockopt(a, SOL_SOCKET, SO_NETNS_COOKIE, &ca, &la) &&
	       !sdp_real.getsockopt(b, SOL_SOCKET, SO_NETNS_COOKIE, &cb, &lb) &&
	       la == sizeof(ca) && ca == cb;
}

int sdp__shm_claim_verify(int fd, const struct shm_addr *dst, int here)
{
	struct sockaddr_storage peer;
	socklen_t plen = sizeof(peer);
	int listening, reuse, reuseport;

	if (sdp_real_init() < 0 || !claim_covers(fd, dst) ||
	    !same_netns(fd, here) ||
	    sockopt_int(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening))
		return -EACCES;
	if (listening)
		return 0;
	/* Bound only: exclusive only without the reuse options, and only
	 * while it is no connection's end (a connected socket's port was
	 * never claimed by bind). */
	if (sockopt_int(fd, SOL_SOCKET, SO_REUSEADDR, &reuse) ||
	    sockopt_int(fd, SOL_SOCKET, SO_REUSEPORT, &reuseport) ||
	    reuse || reuseport ||
	    sdp_real.getpeername(fd, (struct sockaddr *)&peer, &plen) == 0 ||
	    errno != ENOTCONN)
		return -EACCES;
	return 0;
}

bool sdp__shm_claim_overdue(struct shm_qp *qp, uint64_t now_ms)
{
	return !atomic_load(&qp->claim_ok) && qp->claim_deadline_ms &&
	       now_ms >= qp->claim_deadline_ms;
}
