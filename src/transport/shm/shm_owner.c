// SPDX-License-Identifier: MIT
/*
 * shm_owner.c — who may answer for an address: the shm port space trusts the
 * kernel's TCP port space.
 *
 * A rendezvous name ("libsdp/v1/4/127.0.0.1/5000") is an abstract AF_UNIX
 * name, which any local user can bind.  So a name proves nothing; what a
 * client checks instead, after connecting to one, is that the process that
 * listens on it (SO_PEERCRED: its credentials when it called listen(), set by
 * the kernel) runs as the user who owns the kernel TCP listener a TCP
 * connection to the same destination would reach.  The kernel finds that
 * listener itself (NETLINK_SOCK_DIAG, an exact lookup: its own listener hash,
 * with its rules for wildcards, dual-stack IPv6, devices and SO_REUSEPORT,
 * in O(1) however many sockets other users open), keeps such listeners
 * exclusive between users, applies its privileged-port rule, and answers
 * for the client's own network namespace.  Every libsdp listener holds one:
 * a "both" listener its TCP side, an SDP-only one a claim
 * (shm_portspace.c).
 *
 * A socket in LISTEN state only: a merely bound one proves nothing, since
 * SO_REUSEADDR lets a bound socket and another user's listener share a port.
 *
 * In a user namespace of its own, a client sees every user its namespace
 * does not map as the overflow uid: two such users look the same, so that
 * uid proves nothing there.
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
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/atfork.h"
#include "base/fdhigh.h"
#include "transport/shm/shm.h"
#include "base/real.h"

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
static uint64_t diag_netns;	/* SO_NETNS_COOKIE of diag_fd, 0 unknown */
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

static uint64_t netns_cookie(int fd)
{
	uint64_t c = 0;
	socklen_t len = sizeof(c);

	if (sdp_real.getsockopt(fd, SOL_SOCKET, SO_NETNS_COOKIE, &c, &len))
		return 0;
	return c;
}

/* The socket, in the network namespace of `like` (the client's socket: the
 * process may have changed namespaces since the last query). */
static int diag_socket_locked(int like)
{
	uint64_t want = netns_cookie(like);
	pid_t me = getpid();

	if (diag_fd >= 0 && diag_pid == me && want && want == diag_netns)
		return diag_fd;
	if (diag_fd >= 0)
		sdp_close(diag_fd);		/* the parent's, or another namespace's */
	diag_fd = sdp_fd_high(sdp_real.socket(AF_NETLINK,
					      SOCK_DGRAM | SOCK_CLOEXEC,
					      NETLINK_SOCK_DIAG));
	diag_pid = me;
	diag_netns = diag_fd >= 0 ? netns_cookie(diag_fd) : 0;
	return diag_fd < 0 ? -errno : diag_fd;
}

/* After an error the socket may hold the rest of a reply: start afresh. */
static void diag_reset_locked(void)
{
	if (diag_fd >= 0)
		sdp_close(diag_fd);
	diag_fd = -1;
}

/*
 * Send a request from the namespace of socket `like` and read its replies:
 * fn(msg, arg) for each until one returns non-zero, which is the result.
 * A dump is read to its end (the rest dropped, so that the next query
 * starts clean); an exact request has one reply, or an error.  0 if no hit.
 */
static int diag_query(int like, struct nlmsghdr *req,
		      int (*fn)(const struct nlmsghdr *, void *), void *arg)
{
	const bool dump = req->nlmsg_flags & NLM_F_DUMP;
	struct sockaddr_nl nl = { .nl_family = AF_NETLINK };
	union {
		char buf[DIAG_BUF];
		struct nlmsghdr align;
	} u;
	int s, result = 0;

	pthread_once(&diag_once, diag_init);
	pthread_mutex_lock(&diag_lock);
	s = diag_socket_locked(like);
	if (s < 0)
		goto out;
	req->nlmsg_seq = ++diag_seq;
	if (sdp_real.sendto(s, req, req->nlmsg_len, 0, (struct sockaddr *)&nl,
			    sizeof(nl)) < 0) {
		result = -errno;
		goto fail;
	}
	for (;;) {
		ssize_t n = sdp_real.recv(s, u.buf, sizeof(u.buf), 0);
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
			if (!dump)
				goto out;
		}
	}
fail:
	diag_reset_locked();
out:
	pthread_mutex_unlock(&diag_lock);
	return s < 0 ? s : result;
}

/* ---- TCP listeners ---------------------------------------------------- */

static unsigned lo_index(void)
{
	static unsigned lo;
	unsigned v = __atomic_load_n(&lo, __ATOMIC_RELAXED);

	if (!v) {
		v = if_nametoindex("lo");
		v = v ? v : 1;
		__atomic_store_n(&lo, v, __ATOMIC_RELAXED);
	}
	return v;
}

/* An answer: the listener's uid, 1; a socket in another state (no
 * listener), 2. */
static int listener_uid(const struct nlmsghdr *h, void *arg)
{
	const struct inet_diag_msg *m = NLMSG_DATA(h);

	if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY ||
	    h->nlmsg_len < NLMSG_LENGTH(sizeof(*m)))
		return -EPROTO;
	if (m->idiag_state != TCP_LISTEN)
		return 2;
	*(uid_t *)arg = m->idiag_uid;
	return 1;
}

/* The uid that owns the TCP listener a connection from this host to dst
 * reaches: 0, -ENOENT if none, or -errno. */
static int port_owner(int like, const struct shm_addr *dst, uid_t *uid)
{
	struct {
		struct nlmsghdr nlh;
		struct inet_diag_req_v2 r;
	} req;
	int r;

	memset(&req, 0, sizeof(req));
	req.nlh.nlmsg_len = sizeof(req);
	req.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	req.nlh.nlmsg_flags = NLM_F_REQUEST;
	req.r.sdiag_family = dst->v6 ? AF_INET6 : AF_INET;
	req.r.sdiag_protocol = IPPROTO_TCP;
	req.r.idiag_states = ~0u;
	/* As a packet from this host to dst would be looked up: the
	 * listener's side is "src"; the remote end is unknown (0); a local
	 * packet comes in through lo. */
	req.r.id.idiag_sport = htons(dst->port);
	memcpy(req.r.id.idiag_src, dst->a, dst->v6 ? 16 : 4);
	req.r.id.idiag_if = lo_index();
	req.r.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
	req.r.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
	r = diag_query(like, &req.nlh, listener_uid, uid);
	return r == 1 ? 0 : r == 2 || r == 0 ? -ENOENT : r;
}

static unsigned overflow_uid(void)
{
	static unsigned cached;
	unsigned v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
	FILE *f;

	if (v)
		return v;
	v = 65534;
	f = fopen("/proc/sys/kernel/overflowuid", "re");
	if (f) {
		if (fscanf(f, "%u", &v) != 1 || !v)
			v = 65534;
		fclose(f);
	}
	__atomic_store_n(&cached, v, __ATOMIC_RELAXED);
	return v;
}

/* Is uid the overflow uid of a user namespace that does not map it?  The
 * map is read only for that uid, which is rare. */
static bool unmapped_here(uid_t uid)
{
	char map[64] = "";
	bool initial;
	FILE *f;

	if (uid != overflow_uid())
		return false;
	f = fopen("/proc/self/uid_map", "re");
	if (!f)
		return true;
	initial = fgets(map, sizeof(map), f) &&
		  !strcmp(map, "         0          0 4294967295\n") &&
		  !fgets(map, sizeof(map), f);
	fclose(f);
	return !initial;
}

static int owns_port(int like, uid_t uid, const struct shm_addr *dst)
{
	uid_t owner = (uid_t)-1;
	int r = port_owner(like, dst, &owner);

	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	return owner == uid && !unmapped_here(uid);
}

int sdp__shm_peer_owns_port(int sock, const struct shm_addr *dst)
{
	struct ucred uc;
	socklen_t len = sizeof(uc);

	if (sdp_real.getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &uc, &len))
		return -errno;
	return owns_port(sock, uc.uid, dst);
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

/* The owner of the listener bound to an abstract name (a dump of the
 * namespace's listening unix sockets: only for a name whose backlog is
 * full, which a connect cannot ask). */
static int name_owner(int like, const struct sockaddr_un *sun, socklen_t len,
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
	r = diag_query(like, &req.nlh, unix_one, &w);
	if (r == 1)
		*uid = w.uid;
	return r == 1 ? 0 : r == 0 ? -ENOENT : r;
}

int sdp__shm_name_owns_port(int like, const struct sockaddr_un *sun,
			    socklen_t len, const struct shm_addr *dst)
{
	uid_t uid = (uid_t)-1;
	int r = name_owner(like, sun, len, &uid);

	if (r == -ENOENT)
		return 0;
	return r < 0 ? r : owns_port(like, uid, dst);
}
