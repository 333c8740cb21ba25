// SPDX-License-Identifier: MIT
/*
 * shm_owner.c — who may answer for an address: the shm port space trusts the
 * kernel's TCP port space.
 *
 * A rendezvous name ("libsdp/v1/4/127.0.0.1/5000") is an abstract AF_UNIX
 * name, which any local user can bind.  So a name proves nothing; what a
 * client checks instead, after connecting to one, is that the process that
 * listens on it (SO_PEERCRED: its credentials when it called listen(), set by
 * the kernel) runs as the user who owns a kernel TCP socket in LISTEN state
 * for the same port, bound where a TCP connection to the destination would
 * land: the destination address itself or a wildcard (an IPv6 wildcard only
 * if it takes IPv4 too), on no device or the loopback device.  The kernel
 * keeps such listening sockets exclusive between users (a second bind fails;
 * SO_REUSEPORT needs the same user), applies its privileged-port rule, and
 * scopes them to the network namespace, which NETLINK_SOCK_DIAG queries from
 * the client's own.  Every libsdp listener holds one: a "both" listener its
 * TCP side, an SDP-only one a claim (shm_portspace.c).
 *
 * Sockets in LISTEN state only: a merely bound socket proves nothing, since
 * SO_REUSEADDR lets a bound socket and another user's listener share a port.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <net/if.h>
#include <pthread.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "engine/atfork.h"
#include "transport/fdhigh.h"
#include "transport/shm.h"

#define DIAG_BUF 16384

/*
 * One query at a time on one netlink socket per process, kept open: a query
 * is on every connect's path, and the socket's creation would cost as much
 * as the query.  A fork child opens its own (replies would otherwise go to
 * whichever process reads first).
 */
static pthread_mutex_t diag_lock = PTHREAD_MUTEX_INITIALIZER;
static int diag_fd = -1;
static pid_t diag_pid;
static uint32_t diag_seq;

static pthread_once_t diag_once = PTHREAD_ONCE_INIT;

static void diag_prepare(void)
{
	pthread_mutex_lock(&diag_lock);
}

static void diag_after(void)
{
	pthread_mutex_unlock(&diag_lock);
}

static void diag_init(void)
{
	sdp_atfork_add(SDP_ATFORK_INNER, diag_prepare, diag_after, diag_after);
}

static int diag_socket_locked(void)
{
	pid_t me = getpid();

	if (diag_fd >= 0 && diag_pid == me)
		return diag_fd;
	if (diag_fd >= 0)
		close(diag_fd);		/* the parent's */
	diag_fd = sdp_fd_high(socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC,
				     NETLINK_SOCK_DIAG));
	diag_pid = me;
	return diag_fd < 0 ? -errno : diag_fd;
}

/* After an error the socket may hold the rest of a reply: start afresh. */
static void diag_reset_locked(void)
{
	if (diag_fd >= 0)
		close(diag_fd);
	diag_fd = -1;
}

/*
 * Send a dump request and walk its replies to the end: fn(msg, arg) for
 * each until one returns non-zero, which is the result (the rest is read
 * and dropped, so that the next query starts clean).  0 if no hit.
 */
static int diag_query(struct nlmsghdr *req,
		      int (*fn)(const struct nlmsghdr *, void *), void *arg)
{
	struct sockaddr_nl nl = { .nl_family = AF_NETLINK };
	union {
		char buf[DIAG_BUF];
		struct nlmsghdr align;
	} u;
	int s, result = 0;

	pthread_once(&diag_once, diag_init);
	pthread_mutex_lock(&diag_lock);
	s = diag_socket_locked();
	if (s < 0)
		goto out;
	req->nlmsg_seq = ++diag_seq;
	if (sendto(s, req, req->nlmsg_len, 0, (struct sockaddr *)&nl,
		   sizeof(nl)) < 0) {
		result = -errno;
		goto fail;
	}
	for (;;) {
		ssize_t n = recv(s, u.buf, sizeof(u.buf), 0);
		const struct nlmsghdr *h = &u.align;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			result = n < 0 ? -errno : -EPROTO;
			goto fail;
		}
		for (; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_seq != diag_seq)
				continue;	/* a stale reply */
			if (h->nlmsg_type == NLMSG_DONE)
				goto out;
			if (h->nlmsg_type == NLMSG_ERROR) {
				const struct nlmsgerr *e = NLMSG_DATA(h);

				result = e->error ? e->error : -EPROTO;
				goto out;
			}
			if (!result)
				result = fn(h, arg);
		}
	}
fail:
	diag_reset_locked();
out:
	pthread_mutex_unlock(&diag_lock);
	return s < 0 ? s : result;
}

/* ---- TCP listeners ---------------------------------------------------- */

struct tcp_want {
	const struct shm_addr *dst;
	uid_t uid;
	int family;
	unsigned lo_index;
};

static bool v6only_of(const struct nlmsghdr *h, const struct inet_diag_msg *m)
{
	size_t len = h->nlmsg_len - NLMSG_LENGTH(sizeof(*m));
	const struct rtattr *a = (const void *)(m + 1);

	for (; RTA_OK(a, len); a = RTA_NEXT(a, len))
		if (a->rta_type == INET_DIAG_SKV6ONLY &&
		    RTA_PAYLOAD(a) >= 1)
			return *(const uint8_t *)RTA_DATA(a) != 0;
	return false;	/* no attribute: an old kernel's dual-stack default */
}

/* Would a TCP connection to dst from this host land on this listener? */
static bool lands_on(const struct tcp_want *w, const struct nlmsghdr *h,
		     const struct inet_diag_msg *m)
{
	static const uint8_t zero[16];
	static const uint8_t mapped[12] = { [10] = 0xff, [11] = 0xff };
	const uint8_t *src = (const uint8_t *)m->id.idiag_src;
	const struct shm_addr *d = w->dst;

	if (m->idiag_state != TCP_LISTEN || ntohs(m->id.idiag_sport) != d->port)
		return false;
	if (m->id.idiag_if && m->id.idiag_if != w->lo_index)
		return false;	/* bound to a device a local connection
				 * does not come in through */
	if (m->idiag_family == AF_INET)
		return !d->v6 && (!memcmp(src, zero, 4) || !memcmp(src, d->a, 4));
	if (!d->v6) {
		if (v6only_of(h, m))
			return false;
		return !memcmp(src, zero, 16) ||
		       (!memcmp(src, mapped, 12) && !memcmp(src + 12, d->a, 4));
	}
	return !memcmp(src, zero, 16) || !memcmp(src, d->a, 16);
}

static int tcp_one(const struct nlmsghdr *h, void *arg)
{
	const struct tcp_want *w = arg;
	const struct inet_diag_msg *m = NLMSG_DATA(h);

	if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY ||
	    h->nlmsg_len < NLMSG_LENGTH(sizeof(*m)))
		return 0;
	return m->idiag_uid == w->uid && lands_on(w, h, m) ? 1 : 0;
}

/* One family's TCP listeners on dst's port: 1 if `uid` owns one dst would
 * reach, 0 if not, -errno if the kernel cannot say. */
static int tcp_owner_in(struct tcp_want *w)
{
	struct {
		struct nlmsghdr nlh;
		struct inet_diag_req_v2 r;
		struct nlattr bc_hdr;
		struct inet_diag_bc_op bc[2];
	} req;

	memset(&req, 0, sizeof(req));
	req.nlh.nlmsg_len = sizeof(req);
	req.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	req.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	req.r.sdiag_family = (uint8_t)w->family;
	req.r.sdiag_protocol = IPPROTO_TCP;
	req.r.idiag_states = 1u << TCP_LISTEN;
	/* The kernel filters on the port: local port == dst's, else skip
	 * (a jump past the end rejects). */
	req.bc_hdr.nla_len = sizeof(req.bc_hdr) + sizeof(req.bc);
	req.bc_hdr.nla_type = INET_DIAG_REQ_BYTECODE;
	req.bc[0].code = INET_DIAG_BC_S_EQ;
	req.bc[0].yes = sizeof(req.bc);
	req.bc[0].no = sizeof(req.bc) + 4;
	req.bc[1].no = w->dst->port;
	return diag_query(&req.nlh, tcp_one, w);
}

int sdp__shm_uid_owns_port(uid_t uid, const struct shm_addr *dst)
{
	static unsigned lo_index;
	struct tcp_want w = { .dst = dst, .uid = uid };
	int r;

	unsigned lo = __atomic_load_n(&lo_index, __ATOMIC_RELAXED);

	if (!lo) {
		lo = if_nametoindex("lo");
		lo = lo ? lo : 1;
		__atomic_store_n(&lo_index, lo, __ATOMIC_RELAXED);
	}
	w.lo_index = lo;
	w.family = dst->v6 ? AF_INET6 : AF_INET;
	r = tcp_owner_in(&w);
	if (r == 0 && !dst->v6) {	/* a dual-stack IPv6 listener */
		w.family = AF_INET6;
		r = tcp_owner_in(&w);
	}
	return r;
}

int sdp__shm_peer_owns_port(int sock, const struct shm_addr *dst)
{
	struct ucred uc;
	socklen_t len = sizeof(uc);

	if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &uc, &len))
		return -errno;
	return sdp__shm_uid_owns_port(uc.uid, dst);
}

/* ---- the owner of a unix listening name ------------------------------ */

struct unix_want {
	const struct sockaddr_un *sun;
	socklen_t len;
	uid_t uid;
};

static int unix_one(const struct nlmsghdr *h, void *arg)
{
	struct unix_want *w = arg;
	const struct unix_diag_msg *m = NLMSG_DATA(h);
	size_t len, plen = w->len - offsetof(struct sockaddr_un, sun_path);
	const struct rtattr *a;
	bool named = false, have_uid = false;
	uid_t uid = 0;

	if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY ||
	    h->nlmsg_len < NLMSG_LENGTH(sizeof(*m)))
		return 0;
	len = h->nlmsg_len - NLMSG_LENGTH(sizeof(*m));
	for (a = (const void *)(m + 1); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
		if (a->rta_type == UNIX_DIAG_NAME)
			named = RTA_PAYLOAD(a) == plen &&
				!memcmp(RTA_DATA(a), w->sun->sun_path, plen);
		else if (a->rta_type == UNIX_DIAG_UID &&
			 RTA_PAYLOAD(a) >= sizeof(uint32_t)) {
			memcpy(&uid, RTA_DATA(a), sizeof(uint32_t));
			have_uid = true;
		}
	}
	if (!named)
		return 0;
	if (!have_uid)
		return -EOPNOTSUPP;
	w->uid = uid;
	return 1;
}

int sdp__shm_name_owner_uid(const struct sockaddr_un *sun, socklen_t len,
			    uid_t *uid)
{
	struct {
		struct nlmsghdr nlh;
		struct unix_diag_req r;
	} req;
	struct unix_want w = { .sun = sun, .len = len };
	int r;

	memset(&req, 0, sizeof(req));
	req.nlh.nlmsg_len = sizeof(req);
	req.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	req.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	req.r.sdiag_family = AF_UNIX;
	req.r.udiag_states = 1u << TCP_LISTEN;
	req.r.udiag_show = UDIAG_SHOW_NAME | UDIAG_SHOW_UID;
	r = diag_query(&req.nlh, unix_one, &w);
	if (r == 1)
		*uid = w.uid;
	return r == 1 ? 0 : r == 0 ? -ENOENT : r;
}
