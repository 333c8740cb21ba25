// SPDX-License-Identifier: MIT
/*
 * shm_portspace.c — SDP's own port space for the shm transport, and the
 * passive side of the rendezvous.
 *
 * A bound SDP address is an AF_UNIX SOCK_SEQPACKET socket bound to an
 * abstract name, "libsdp/v1/4/127.0.0.1/5000" or "libsdp/v1/6/any/5000".
 * Abstract names are scoped by network namespace, need no files and vanish
 * with the last fd, so a crashed process never leaks a port.  Binding a name
 * that exists fails with EADDRINUSE, which gives us exclusive ports for free.
 *
 * A client that did not bind takes a name of its own kind,
 * "libsdp/v1/c4/127.0.0.1/41234": its port comes from no kernel socket, so
 * in the listeners' names it could take the port the kernel next gives a
 * listener (bind to port 0), whose SDP side would then fail to bind.  Its
 * names need no conflict probes either: clients only have to differ from
 * each other.
 *
 * Wildcard and specific bindings of one port must also exclude each other
 * (as for TCP).  There is no atomic way to do that with names, so after
 * binding our own name we probe the conflicting names by binding them
 * briefly.  Because each binder holds its own name before probing, two
 * racing conflicting binds cannot both succeed (at worst both fail); a probe
 * can make an unrelated bind of the probed name fail transiently.  Specific
 * IPv4 loopback addresses other than 127.0.0.1 are not probed for a
 * wildcard bind.
 *
 * A name carries no permissions: anybody can bind any.  What makes a
 * listener trustworthy is the kernel TCP port it holds at the same address
 * (a "both" listener's TCP side, or the claim an SDP-only listener takes
 * here), which clients check before they speak (shm_owner.c).  So binding
 * an SDP port fails as binding the TCP port would (EADDRINUSE, EACCES for a
 * privileged port), and an ephemeral port comes from the kernel's TCP port
 * space.
 *
 * Passive side: listener_fd() is an epoll fd over the listening socket and
 * the accepted connections whose Hello has not arrived yet, so get_request()
 * never blocks on a slow or silent client; those are dropped after
 * SHM_PENDING_TMO_MS (checked whenever get_request() runs).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/fdhigh.h"
#include "transport/shm/shm.h"
#include "base/real.h"

/*
 * A descriptor kept in reserve, so that a listener out of descriptors can
 * still refuse: it gives the reserve up for an instant, accepts the
 * waiting rendezvous connection and closes it at once.  The client's
 * connect then fails (a "both" client goes over TCP) instead of waiting
 * for ever in the rendezvous queue.  One for the process, taken when the
 * first listener starts.
 */
static pthread_mutex_t spare_lock = PTHREAD_MUTEX_INITIALIZER;
static int spare_fd = -1;

static void spare_keep(void)
{
	pthread_mutex_lock(&spare_lock);
	if (spare_fd < 0)
		spare_fd = sdp_fd_high(open("/dev/null", O_RDONLY | O_CLOEXEC));
	pthread_mutex_unlock(&spare_lock);
}

/* accept4 failed with `err`: refuse one waiting client if it is for want
 * of descriptors.  1 if one was refused. */
static int refuse_for_want_of_fds(int lsock, int err)
{
	int s, refused = 0;

	if (err != EMFILE && err != ENFILE)
		return 0;
	pthread_mutex_lock(&spare_lock);
	if (spare_fd >= 0) {
		sdp_close(spare_fd);
		s = sdp_real.accept4(lsock, NULL, NULL,
				     SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (s >= 0) {
			sdp_close(s);
			refused = 1;
		}
		spare_fd = sdp_fd_high(open("/dev/null",
					    O_RDONLY | O_CLOEXEC));
	}
	pthread_mutex_unlock(&spare_lock);
	return refused;
}

#define SHM_NAME_PREFIX "libsdp/v1/"

struct shm_pending {
	int sock;
	uint64_t deadline_ms;
	bool ready;		/* epoll said readable, or not asked yet */
	bool watched;		/* in an epoll set of the listener's: not
				 * until a read finds no Hello yet, which
				 * usually comes with the connection */
	bool retried;		/* answered RETRY once (shm_keep.c) */
	struct shm_pending *next;
};

/* What the listener's epoll set reports, besides its pending connections
 * (whose entries carry the struct shm_pending). */
#define LSN_EV_SOCK	1u
#define LSN_EV_CLAIM	2u

/* ---- addresses ----------------------------------------------------------- */

static const uint8_t v4mapped_prefix[12] = { [10] = 0xff, [11] = 0xff };

int sdp__shm_addr_parse(const struct sockaddr *sa, socklen_t len,
			struct shm_addr *a, int *is_v6_socket)
{
	memset(a, 0, sizeof(*a));
	if (!sa)
		return -EINVAL;
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *sin = (const void *)sa;

		if (len < sizeof(*sin))
			return -EINVAL;
		memcpy(a->a, &sin->sin_addr, 4);
		a->port = ntohs(sin->sin_port);
		*is_v6_socket = 0;
		return 0;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *sin6 = (const void *)sa;

		if (len < sizeof(*sin6))
			return -EINVAL;
		*is_v6_socket = 1;
		a->port = ntohs(sin6->sin6_port);
		if (!memcmp(&sin6->sin6_addr, v4mapped_prefix, 12)) {
			memcpy(a->a, sin6->sin6_addr.s6_addr + 12, 4);
			return 0;
		}
		a->v6 = 1;
		memcpy(a->a, &sin6->sin6_addr, 16);
		return 0;
	}
	return -EAFNOSUPPORT;
}

void sdp__shm_addr_to_sockaddr(const struct shm_addr *a, int want_v6,
			       struct sockaddr_storage *ss, socklen_t *len)
{
	memset(ss, 0, sizeof(*ss));
	if (want_v6 || a->v6) {
		struct sockaddr_in6 *sin6 = (void *)ss;

		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(a->port);
		if (a->v6) {
			memcpy(&sin6->sin6_addr, a->a, 16);
		} else {
			memcpy(&sin6->sin6_addr, v4mapped_prefix, 12);
			memcpy(sin6->sin6_addr.s6_addr + 12, a->a, 4);
		}
		*len = sizeof(*sin6);
	} else {
		struct sockaddr_in *sin = (void *)ss;

		sin->sin_family = AF_INET;
		sin->sin_port = htons(a->port);
		memcpy(&sin->sin_addr, a->a, 4);
		*len = sizeof(*sin);
	}
}

bool sdp__shm_addr_is_any(const struct shm_addr *a)
{
	static const uint8_t zero[16];

	return !memcmp(a->a, zero, a->v6 ? 16 : 4);
}

void sdp__shm_addr_dial(struct shm_addr *a)
{
	if (!sdp__shm_addr_is_any(a))
		return;
	memset(a->a, 0, sizeof(a->a));
	if (a->v6)
		a->a[15] = 1;
	else
		memcpy(a->a, "\x7f\0\0\x01", 4);
}

static bool addr_is_loopback(const struct shm_addr *a)
{
	static const uint8_t lo6[16] = { [15] = 1 };

	return a->v6 ? !memcmp(a->a, lo6, 16) : a->a[0] == 127;
}

/* Addresses of this host's interfaces of one family (best effort). */
static int local_addrs(int v6, struct shm_addr *out, int max)
{
	struct ifaddrs *ifa, *i;
	int n = 0;

	if (getifaddrs(&ifa))
		return 0;
	for (i = ifa; i && n < max; i = i->ifa_next) {
		int is6;

		if (!i->ifa_addr || (i->ifa_addr->sa_family != AF_INET &&
				     i->ifa_addr->sa_family != AF_INET6))
			continue;
		if (sdp__shm_addr_parse(i->ifa_addr,
					i->ifa_addr->sa_family == AF_INET ?
					sizeof(struct sockaddr_in) :
					sizeof(struct sockaddr_in6),
					&out[n], &is6))
			continue;
		if (out[n].v6 == v6)
			n++;
	}
	freeifaddrs(ifa);
	return n;
}

int sdp__shm_addr_is_local(const struct shm_addr *a)
{
	struct shm_addr list[64];
	int n;

	if (addr_is_loopback(a) || sdp__shm_addr_is_any(a))
		return 1;
	n = local_addrs(a->v6, list, 64);
	for (int i = 0; i < n; i++)
		if (!memcmp(list[i].a, a->a, a->v6 ? 16 : 4))
			return 1;
	return 0;
}

/* ---- names --------------------------------------------------------------- */

/* Which name of an address: its own, its family's wildcard, or the IPv6
 * wildcard of a listener that takes no IPv4 (IPV6_V6ONLY: a name of its
 * own, so that it shares its port with an IPv4 wildcard as over TCP). */
enum name_kind { NAME_EXACT, NAME_ANY, NAME_ANY_V6ONLY, NAME_CLIENT };

#define NAME_V6ONLY "any-v6only"

static socklen_t name_make(const struct shm_addr *a, enum name_kind kind,
			   struct sockaddr_un *sun)
{
	char ip[INET6_ADDRSTRLEN];
	int n;

	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	if (kind == NAME_ANY_V6ONLY)
		strcpy(ip, NAME_V6ONLY);
	else if (kind == NAME_ANY || sdp__shm_addr_is_any(a))
		strcpy(ip, "any");
	else
		inet_ntop(a->v6 ? AF_INET6 : AF_INET, a->a, ip, sizeof(ip));
	n = snprintf(sun->sun_path + 1, sizeof(sun->sun_path) - 1,
		     SHM_NAME_PREFIX "%s%c/%s/%u", kind == NAME_CLIENT ? "c" : "",
		     a->v6 ? '6' : '4', ip, a->port);
	return offsetof(struct sockaddr_un, sun_path) + 1 + n;
}

int sdp__shm_name_parse(const char *path, size_t len, struct shm_addr *a)
{
	char buf[108], *fam, *ip, *port, *end;
	unsigned long p;

	memset(a, 0, sizeof(*a));
	if (len < 2 || len > sizeof(buf) - 1 || path[0] != '\0')
		return -EINVAL;
	memcpy(buf, path + 1, len - 1);
	buf[len - 1] = '\0';
	if (strncmp(buf, SHM_NAME_PREFIX, strlen(SHM_NAME_PREFIX)))
		return -EINVAL;
	fam = buf + strlen(SHM_NAME_PREFIX);
	if (fam[0] == 'c')	/* a client's name */
		fam++;
	if ((fam[0] != '4' && fam[0] != '6') || fam[1] != '/')
		return -EINVAL;
	a->v6 = fam[0] == '6';
	ip = fam + 2;
	port = strrchr(ip, '/');
	if (!port)
		return -EINVAL;
	*port++ = '\0';
	p = strtoul(port, &end, 10);
	if (*end || end == port || p > 65535)
		return -EINVAL;
	a->port = (uint16_t)p;
	if (!strcmp(ip, "any") || (a->v6 && !strcmp(ip, NAME_V6ONLY)))
		return 0;
	return inet_pton(a->v6 ? AF_INET6 : AF_INET, ip, a->a) == 1 ? 0 : -EINVAL;
}

static int unix_socket(void)
{
	int s = sdp_fd_high(sdp_real.socket(AF_UNIX,
					    SOCK_SEQPACKET | SOCK_NONBLOCK |
					  SOCK_CLOEXEC, 0));

	return s < 0 ? -errno : s;
}

/* 1 if someone holds that name of `a`, else 0. */
static int name_taken(const struct shm_addr *a, enum name_kind kind)
{
	struct sockaddr_un sun;
	socklen_t len = name_make(a, kind, &sun);
	int s = unix_socket(), taken;

	if (s < 0)
		return 0;
	taken = sdp_real.bind(s, (struct sockaddr *)&sun,
			      len) && errno == EADDRINUSE;
	sdp_close(s);
	return taken;
}

/*
 * Does a bound name conflict with ours, as TCP binds would?  A specific
 * address conflicts with its family's wildcards and, for IPv4, with a
 * dual-stack IPv6 wildcard; a wildcard with every specific address of its
 * families and with the other family's dual-stack (or, being one, every)
 * wildcard.  An IPv6-only wildcard leaves IPv4 alone.
 */
static bool conflicts(const struct shm_addr *a, bool v6only)
{
	struct shm_addr other = *a, list[64];
	int n;

	if (!sdp__shm_addr_is_any(a)) {
		if (name_taken(a, NAME_ANY))
			return true;
		if (a->v6)
			return name_taken(a, NAME_ANY_V6ONLY);
		other.v6 = 1;	/* the dual-stack IPv6 wildcard */
		return name_taken(&other, NAME_ANY);
	}
	if (a->v6 && name_taken(a, v6only ? NAME_ANY : NAME_ANY_V6ONLY))
		return true;
	if (!(a->v6 && v6only)) {
		other.v6 = !a->v6;
		if (name_taken(&other, NAME_ANY))
			return true;
	}
	for (int fam = a->v6 && v6only ? 1 : 0; fam <= a->v6; fam++) {
		n = local_addrs(fam, list, 64);
		for (int i = 0; i < n; i++) {
			list[i].port = a->port;
			if (name_taken(&list[i], NAME_EXACT))
				return true;
		}
	}
	return false;
}

/* A new socket bound to the name of kind `kind` of `a` (port != 0), or
 * -errno. */
static int bind_name(const struct shm_addr *a, enum name_kind kind)
{
	struct sockaddr_un sun;
	socklen_t len = name_make(a, kind, &sun);
	int s = unix_socket();

	if (s < 0)
		return s;
	if (sdp_real.bind(s, (struct sockaddr *)&sun, len)) {
		int err = errno == EADDRINUSE ? -EADDRINUSE : -errno;

		sdp_close(s);
		return err;
	}
	return s;
}

/* A new socket bound to the listener name of `a` (port != 0), or -errno. */
static int bind_exact(const struct shm_addr *a, bool v6only)
{
	int s = bind_name(a, v6only && a->v6 && sdp__shm_addr_is_any(a) ?
			     NAME_ANY_V6ONLY : NAME_EXACT);

	if (s < 0)
		return s;
	if (conflicts(a, v6only)) {
		sdp_close(s);
		return -EADDRINUSE;
	}
	return s;
}

static unsigned range_lo = 32768, range_hi = 60999;
static pthread_once_t range_once = PTHREAD_ONCE_INIT;

/* Read once: connection setup must not cost a file open per connect. */
static void range_load(void)
{
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "re");
	unsigned lo, hi;

	if (!f)
		return;
	if (fscanf(f, "%u %u", &lo, &hi) == 2 && lo && lo <= hi && hi <= 65535) {
		range_lo = lo;
		range_hi = hi;
	}
	fclose(f);
}

static void ephemeral_range(unsigned *lo, unsigned *hi)
{
	pthread_once(&range_once, range_load);
	*lo = range_lo;
	*hi = range_hi;
}

/* Where to start looking for a free port: random per process (getrandom
 * once), then a cheap generator. */
static unsigned ephemeral_start(void)
{
	static _Thread_local unsigned x;

	if (!x && getrandom(&x, sizeof(x), GRND_NONBLOCK) != sizeof(x))
		x = (unsigned)getpid() * 2654435761u;
	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	return x ? x : (x = 1);
}

/* A free port of the ephemeral range, in listener names or (`client`) in
 * clients' names. */
static int bind_ephemeral(struct shm_addr *a, bool client)
{
	unsigned lo, hi, start = 0, span;

	ephemeral_range(&lo, &hi);
	span = hi - lo + 1;
	start = ephemeral_start();
	for (unsigned i = 0; i < span; i++) {
		int s;

		a->port = (uint16_t)(lo + (start + i) % span);
		s = client ? bind_name(a, NAME_CLIENT) : bind_exact(a, false);
		if (s != -EADDRINUSE)
			return s;
	}
	a->port = 0;
	return -EADDRNOTAVAIL;
}

/*
 * The claim: a kernel TCP socket bound to the listener's address and port,
 * listening once the listener listens.  It is what shm_owner.c checks, and
 * the kernel's rules for TCP ports (exclusive between users, privileged
 * ports) become SDP's.  TCP clients that reach it are reset: the port serves
 * SDP only.  Its bind fails as a TCP server's would.
 */
static int claim_take(struct shm_addr *a, bool v6only)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fam = a->v6 ? AF_INET6 : AF_INET, one = 1, only = v6only, s, err;

	/* The system call itself: socket() is the switch's, which would make
	 * this an SDP socket in turn. */
	s = sdp_fd_high((int)syscall(SYS_socket, fam, SOCK_STREAM |
				     SOCK_NONBLOCK | SOCK_CLOEXEC,
				     IPPROTO_TCP));
	if (s < 0)
		return -errno;
	sdp_real.setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (a->v6)	/* a wildcard takes IPv4 too, as its name says */
		sdp_real.setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &only,
				    sizeof(only));
	sdp__shm_addr_to_sockaddr(a, a->v6, &ss, &len);
	if (sdp_real.bind(s, (struct sockaddr *)&ss, len))
		goto fail;
	len = sizeof(ss);
	if (sdp_real.getsockname(s, (struct sockaddr *)&ss, &len))
		goto fail;
	a->port = ntohs(ss.ss_family == AF_INET6 ?
			((struct sockaddr_in6 *)&ss)->sin6_port :
			((struct sockaddr_in *)&ss)->sin_port);
	return s;
fail:
	err = -errno;
	sdp_close(s);
	return err;
}

/* The port from the kernel's TCP port space, then its name; a few tries
 * when the name of a free TCP port is taken (by a squatter: it cannot be
 * a listener, which would hold the TCP port). */
static int bind_claimed(struct shm_addr *a, bool v6only, int *claim)
{
	uint16_t want = a->port;
	int s = -EADDRINUSE;

	for (int tries = 0; tries < 16 && s == -EADDRINUSE; tries++) {
		a->port = want;
		*claim = claim_take(a, v6only);
		if (*claim < 0)
			return *claim;
		s = bind_exact(a, v6only);
		if (s < 0) {
			sdp_close(*claim);
			*claim = -1;
		}
		if (want)
			break;
	}
	return s;
}

static struct shm_listener *listener_new(const struct shm_addr *a,
					 int is_v6_socket)
{
	struct shm_listener *l = calloc(1, sizeof(*l));

	if (!l)
		return NULL;
	l->obj.ops = &sdp__shm_ops;
	l->addr = *a;
	l->is_v6_socket = is_v6_socket;
	l->epfd = -1;
	l->share_ep = -1;
	l->claim = -1;
	return l;
}

int sdp__shm_bind_addr(const struct shm_addr *a, int is_v6_socket,
		       unsigned flags, struct shm_listener **out)
{
	const bool v6only = flags & SDP_BIND_V6ONLY;
	struct shm_listener *l = listener_new(a, is_v6_socket);
	int s;

	if (!l)
		return -ENOMEM;
	l->v6only = v6only && a->v6;
	if (!(flags & SDP_BIND_TCP_HELD))
		s = bind_claimed(&l->addr, v6only, &l->claim);
	else
		s = a->port ? bind_exact(&l->addr, v6only) :
			      bind_ephemeral(&l->addr, false);
	if (s < 0) {
		free(l);
		return s;
	}
	l->sock = s;
	*out = l;
	return 0;
}

int sdp__shm_bind_client(const struct shm_addr *a, int is_v6_socket,
			 struct shm_listener **out)
{
	struct shm_listener *l = listener_new(a, is_v6_socket);
	int s;

	if (!l)
		return -ENOMEM;
	s = bind_ephemeral(&l->addr, true);
	if (s < 0) {
		free(l);
		return s;
	}
	l->sock = s;
	*out = l;
	return 0;
}

/* TCP clients of an SDP-only port: reset, as a closed port would. */
void sdp__shm_claim_reset_clients(struct shm_listener *l)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };
	int s;

	if (l->claim < 0)
		return;
	while ((s = sdp_real.accept4(l->claim, NULL, NULL,
				     SOCK_CLOEXEC)) >= 0) {
		sdp_real.setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		sdp_close(s);
	}
}

/* The listener's backlog is full: wait up to a second for it to drain, as a
 * SYN retransmission would, then give up with -ETIMEDOUT.  SO_SNDTIMEO
 * bounds a unix connect only on a blocking socket. */
static int connect_blocking(int sock, const struct sockaddr_un *sun,
			    socklen_t len)
{
	struct timeval tv = { .tv_sec = 1 };
	int fl = sdp_real.fcntl(sock, F_GETFL), err = 0;

	if (fl < 0 || sdp_real.fcntl(sock, F_SETFL, fl & ~O_NONBLOCK))
		return -errno;
	sdp_real.setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (sdp_real.connect(sock, (const struct sockaddr *)sun, len))
		err = errno == EAGAIN ? -ETIMEDOUT :
		      errno == ENOENT ? -ECONNREFUSED : -errno;
	tv.tv_sec = 0;
	sdp_real.setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	sdp_real.fcntl(sock, F_SETFL, fl);
	return err;
}

/* Replace a socket connected to an impostor with a fresh one bound to the
 * same name (a connected socket cannot connect again). */
static int renew_socket(int *sock)
{
	struct sockaddr_un sun;
	socklen_t len = sizeof(sun);
	int s, one = 1;

	if (sdp_real.getsockname(*sock, (struct sockaddr *)&sun, &len))
		return -errno;
	s = unix_socket();
	if (s < 0)
		return s;
	sdp_close(*sock);
	*sock = s;
	/* Lost to someone else meanwhile: no owner was reached. */
	if (len > offsetof(struct sockaddr_un, sun_path) &&
	    sdp_real.bind(s, (struct sockaddr *)&sun, len))
		return -ECONNREFUSED;
	if (sdp_real.setsockopt(s, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)))
		return -errno;
	return 0;
}

/*
 * Connect *sock to the listener for `dst`: the exact name, the family
 * wildcard, then for IPv4 the dual-stack IPv6 wildcard and for IPv6 the
 * IPv6-only one, skipping any whose
 * listener does not own the TCP port (shm_owner.c).  An impostor costs one
 * connect and one kernel query, never a wait.  -ECONNREFUSED if no owner
 * listens.
 */
int sdp__shm_name_connect(int *sock, const struct shm_addr *dst)
{
	static const enum name_kind kind[3] = { NAME_EXACT, NAME_ANY, NAME_ANY };
	struct shm_addr cand[3] = { *dst, *dst, *dst };
	int err;

	cand[2].v6 = 1;
	for (int i = 0; i < 3; i++) {
		struct sockaddr_un sun;
		socklen_t len = name_make(&cand[i], dst->v6 && i == 2 ?
					  NAME_ANY_V6ONLY : kind[i], &sun);

		if (!sdp_real.connect(*sock, (struct sockaddr *)&sun, len)) {
			err = sdp__shm_peer_owns_port(*sock, dst);
			if (err == 1)
				return 0;
			err = renew_socket(sock);
			if (err)
				return err;
			continue;
		}
		if (errno == ECONNREFUSED || errno == ENOENT)
			continue;
		if (errno != EAGAIN)
			return -errno;
		/* Full: worth waiting for if its listener owns the port. */
		if (sdp__shm_name_owns_port(*sock, &sun, len, dst) != 1)
			continue;
		/* The owner's backlog is full: wait a little for it, like a
		 * SYN retransmission would, then give up. */
		err = connect_blocking(*sock, &sun, len);
		return err ? err : sdp__shm_peer_owns_port(*sock, dst) == 1 ?
				   0 : -ECONNREFUSED;
	}
	return -ECONNREFUSED;
}

/* ---- listener ops -------------------------------------------------------- */

int sdp__shm_bind_flags(const struct sockaddr *sa, socklen_t len,
			unsigned flags, struct sdp_listener **out)
{
	struct shm_listener *l;
	struct shm_addr a;
	int is_v6, err;

	err = sdp__shm_addr_parse(sa, len, &a, &is_v6);
	if (err)
		return err;
	if (!sdp__shm_addr_is_local(&a))
		return -EADDRNOTAVAIL;
	err = sdp__shm_bind_addr(&a, is_v6, flags, &l);
	if (err)
		return err;
	*out = (struct sdp_listener *)l;
	return 0;
}

int sdp__shm_bind(const struct sockaddr *sa, socklen_t len,
		  struct sdp_listener **out)
{
	return sdp__shm_bind_flags(sa, len, 0, out);
}

int sdp__shm_set_tcp_claim(struct sdp_listener *sl, int fd)
{
	struct shm_listener *l = SHM_L(sl);

	if (l->claim >= 0 || l->listening) {
		sdp_close(fd);
		return -EINVAL;
	}
	sdp_real.fcntl(fd, F_SETFL, sdp_real.fcntl(fd, F_GETFL) | O_NONBLOCK);
	l->claim = fd;
	return 0;
}

int sdp__shm_bound_addr(struct sdp_listener *sl, struct sockaddr_storage *ss,
			socklen_t *len)
{
	struct shm_listener *l = SHM_L(sl);

	sdp__shm_addr_to_sockaddr(&l->addr, l->is_v6_socket, ss, len);
	return 0;
}

int sdp__shm_listen(struct sdp_listener *sl, int backlog)
{
	struct shm_listener *l = SHM_L(sl);
	struct epoll_event ev = { .events = EPOLLIN };
	int one = 1;

	if (l->sock < 0)
		return -EINVAL;
	/* Every socket accepted from it inherits SO_PASSCRED (af_unix), so
	 * the client's Hello is read with the credentials the kernel
	 * stamped on it: one call here, not one per connection. */
	if (sdp_real.setsockopt(l->sock, SOL_SOCKET, SO_PASSCRED, &one,
				sizeof(one)) ||
	    sdp_real.listen(l->sock, backlog > 0 ? backlog : 1))
		return -errno;
	if (l->claim >= 0 && sdp_real.listen(l->claim, 16))
		return -errno;
	if (l->epfd < 0) {
		l->epfd = sdp_fd_high(sdp_real.epoll_create1(EPOLL_CLOEXEC));
		if (l->epfd < 0)
			return -errno;
		ev.data.u64 = LSN_EV_SOCK;
		if (sdp_real.epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->sock, &ev) ||
		    (l->claim >= 0 &&
		     sdp_real.epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->claim,
					&(struct epoll_event){
						.events = EPOLLIN,
						.data.u64 = LSN_EV_CLAIM }))) {
			int err = -errno;

			sdp_close(l->epfd);
			l->epfd = -1;
			return err;
		}
	}
	l->listening = true;
	spare_keep();	/* while there are descriptors to keep */
	return 0;
}

int sdp__shm_listener_fd(struct sdp_listener *sl)
{
	struct shm_listener *l = SHM_L(sl);

	return l->epfd >= 0 ? l->epfd : -EINVAL;
}

/* A pending connection out of the epoll set it was put in, if any: the
 * listener's own, or once shared the family's (shm_share.c). */
static void pending_unwatch(struct shm_listener *l,
			    const struct shm_pending *p)
{
	int ep = l->epfd >= 0 ? l->epfd : l->share_ep;

	if (p->watched && ep >= 0)
		sdp_real.epoll_ctl(ep, EPOLL_CTL_DEL, p->sock, NULL);
}

static void pending_drop(struct shm_listener *l, struct shm_pending **pp)
{
	struct shm_pending *p = *pp;

	pending_unwatch(l, p);
	sdp_close(p->sock);
	*pp = p->next;
	free(p);
	l->npending--;
}

static void accept_pending(struct shm_listener *l)
{
	uint64_t deadline = sdp__shm_now_ms() + SHM_PENDING_TMO_MS;

	for (;;) {
		struct shm_pending *p;
		int s = sdp_fd_high(sdp_real.accept4(l->sock, NULL, NULL,
						     SOCK_NONBLOCK |
						     SOCK_CLOEXEC));

		if (s < 0) {
			if (refuse_for_want_of_fds(l->sock, errno))
				continue;
			return;
		}
		/* Watched only once a read finds no Hello (pending_scan,
		 * which reads every new one at once). */
		p = l->npending < SHM_MAX_PENDING ? calloc(1, sizeof(*p)) : NULL;
		if (!p) {
			sdp_close(s);
			continue;
		}
		p->sock = s;
		p->deadline_ms = deadline;
		p->ready = true;	/* its Hello often came with it */
		p->next = l->pending;
		l->pending = p;
		l->npending++;
	}
}

void sdp__shm_pending_watch(struct shm_listener *l, int ep)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP };

	for (struct shm_pending *p = l->pending; p; p = p->next) {
		sdp_real.epoll_ctl(ep, EPOLL_CTL_ADD, p->sock, &ev);
		p->watched = true;
	}
}

void sdp__shm_pending_park(struct shm_listener *l, int sock, bool retried,
			   int max)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP };
	struct shm_pending *p, **pp;

	/* Newest first: the oldest is the last. */
	while (l->npending >= max && l->pending) {
		for (pp = &l->pending; (*pp)->next; pp = &(*pp)->next)
			;
		pending_drop(l, pp);
	}
	p = calloc(1, sizeof(*p));
	/* Its Hello, or its hang-up, makes the listener readable. */
	if (!p || (l->share_ep >= 0 &&
		   sdp_real.epoll_ctl(l->share_ep, EPOLL_CTL_ADD, sock, &ev))) {
		free(p);
		sdp_close(sock);
		return;
	}
	p->sock = sock;
	p->deadline_ms = sdp__shm_now_ms() + SHM_PENDING_TMO_MS;
	p->ready = true;
	p->watched = l->share_ep >= 0;
	p->retried = retried;
	p->next = l->pending;
	l->pending = p;
	l->npending++;
}

int sdp__shm_hello_check(uint16_t type, const struct shm_hello *h)
{
	if (type != SHM_MSG_HELLO)
		return -EPROTO;
	/* A segment of its own, or both of a kept pair named. */
	return h->memfd >= 0 || (h->pair && h->pair_client) ? 0 : -EPROTO;
}

/* Turn a pending connection whose Hello arrived into a request; -ESTALE
 * if it names a pair this process does not keep (shm_keep.c). */
int sdp__shm_request_build(struct shm_listener *l, int sock,
			   const struct shm_hello *h,
			   struct shm_conn_req **out)
{
	const struct shm_addr *hdst = &h->dst;
	struct sockaddr_un sun;
	socklen_t slen = sizeof(sun);
	struct shm_conn_req *r;
	int err;

	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	if (sdp_real.getpeername(sock, (struct sockaddr *)&sun, &slen) ||
	    slen <= offsetof(struct sockaddr_un, sun_path) ||
	    sdp__shm_name_parse(sun.sun_path,
				slen - offsetof(struct sockaddr_un, sun_path),
				&r->src)) {
		err = -EPROTO;
		goto err_free;
	}
	/* Our address: the listener's, or for a wildcard listener the one
	 * the client says it dialled (same family as the client's only). */
	r->dst = l->addr;
	if (sdp__shm_addr_is_any(&l->addr)) {
		r->dst = hdst->v6 == r->src.v6 ? *hdst : r->src;
		r->dst.port = l->addr.port;
		if (sdp__shm_addr_is_any(&r->dst))
			r->dst = r->src, r->dst.port = l->addr.port;
	}
	if (sdp__shm_addr_is_any(&r->src)) {
		memcpy(r->src.a, r->dst.a, sizeof(r->src.a));
		r->src.v6 = r->dst.v6;
	}
	if (h->memfd < 0) {
		/* Both segments kept: a pair we keep for this client, or
		 * RETRY. */
		err = sdp__shm_keep_take(r, h) ? 0 : -ESTALE;
	} else {
		err = sdp__shm_map_peer(h->memfd, &r->peer);
		if (!err && h->pair)
			sdp__shm_keep_take(r, h);
	}
	if (err)
		goto err_free;
	r->sock = sock;
	r->peer_pid = h->cred.pid;
	r->peer_uid = h->cred.uid;
	r->peer_gid = h->cred.gid;
	r->peer_base = h->base;
	r->is_v6_socket = l->is_v6_socket;
	*out = r;
	return 0;

err_free:
	free(r);
	return err;
}

/* A pending connection whose Hello has not come: its Hello, or its
 * hang-up, makes the listener's epoll set readable from now on (added
 * readable, it is reported at once).  False if it cannot be watched. */
static bool pending_watch_one(struct shm_listener *l, struct shm_pending *p)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP,
				  .data.ptr = p };

	if (p->watched || l->epfd < 0)
		return true;
	if (sdp_real.epoll_ctl(l->epfd, EPOLL_CTL_ADD, p->sock, &ev))
		return false;
	p->watched = true;
	return true;
}

/* A pending connection whose Hello arrived, as a request; -EAGAIN if none.
 * Silent clients are dropped once their deadline passed. */
int sdp__shm_pending_scan(struct shm_listener *l, struct sdp_conn_req **out,
			  void *priv, uint32_t *priv_len)
{
	uint8_t buf[SDP_CM_PRIV_MAX];
	struct shm_pending **pp;
	uint64_t now = sdp__shm_now_ms();

	for (pp = &l->pending; *pp;) {
		struct shm_pending *p = *pp;
		struct shm_conn_req *r;
		struct shm_hello h = { .memfd = -1 };
		uint16_t type;
		uint32_t len;
		int err;

		/* Once shared there is no epoll set to ask: read them all. */
		if (!p->ready && l->epfd >= 0)
			err = -EAGAIN;
		else
			err = sdp__shm_recv_msg(p->sock, &type, buf, &len, &h,
						NULL);
		if (err == -EAGAIN) {
			p->ready = false;
			if (now >= p->deadline_ms || !pending_watch_one(l, p))
				pending_drop(l, pp);
			else
				pp = &p->next;
			continue;
		}
		if (!err)
			err = sdp__shm_hello_check(type, &h);
		if (!err)
			err = sdp__shm_request_build(l, p->sock, &h, &r);
		if (h.memfd >= 0)
			sdp_close(h.memfd);
		/* Answered RETRY: the Hello sent again makes the set
		 * readable. */
		if (err == -ESTALE && !p->retried &&
		    !sdp__shm_send_msg(p->sock, SHM_MSG_RETRY, NULL, NULL,
				       NULL, 0) && pending_watch_one(l, p)) {
			p->retried = true;
			pp = &p->next;
			continue;
		}
		if (err) {
			pending_drop(l, pp);
			continue;
		}
		/* The request owns the socket now. */
		pending_unwatch(l, p);
		*pp = p->next;
		free(p);
		l->npending--;
		memcpy(priv, buf, len);
		*priv_len = len;
		*out = (struct sdp_conn_req *)r;
		return 0;
	}
	return -EAGAIN;
}

int sdp__shm_get_request(struct sdp_listener *sl, struct sdp_conn_req **out,
			 void *priv, uint32_t *priv_len)
{
	struct shm_listener *l = SHM_L(sl);
	struct epoll_event ev[64];
	bool sock_ready = false, claim_ready = false;
	int n;

	if (!l->listening || l->shared)
		return -EINVAL;
	/* Ask the set what is readable rather than every socket in turn: a
	 * burst of connects leaves hundreds pending, and a scan of them all
	 * for each request was quadratic in system calls. */
	n = sdp_real.epoll_wait(l->epfd, ev, 64, 0);
	if (n < 0) {
		sock_ready = claim_ready = true;
		for (struct shm_pending *p = l->pending; p; p = p->next)
			p->ready = true;
	}
	for (int i = 0; i < n; i++) {
		if (ev[i].data.u64 == LSN_EV_SOCK)
			sock_ready = true;
		else if (ev[i].data.u64 == LSN_EV_CLAIM)
			claim_ready = true;
		else
			((struct shm_pending *)ev[i].data.ptr)->ready = true;
	}
	if (claim_ready)
		sdp__shm_claim_reset_clients(l);
	if (sock_ready)
		accept_pending(l);
	return sdp__shm_pending_scan(l, out, priv, priv_len);
}

void sdp__shm_reject(struct sdp_conn_req *sr)
{
	struct shm_conn_req *r = (struct shm_conn_req *)sr;

	sdp__shm_send_msg(r->sock, SHM_MSG_REJECT, NULL, NULL, NULL, 0);
	sdp__shm_wake_owner_seg(r->peer.ctrl, -1, -1, NULL, 0);
	sdp__shm_seg_unmap(&r->peer);
	sdp__shm_seg_unmap(&r->kept_me);
	sdp_close(r->sock);
	free(r);
}

void sdp__shm_listener_free(struct shm_listener *l)
{
	while (l->pending)
		pending_drop(l, &l->pending);
	if (l->epfd >= 0)
		sdp_close(l->epfd);
	if (l->share_ep >= 0)
		sdp_close(l->share_ep);
	if (l->sock >= 0)
		sdp_close(l->sock);
	if (l->claim >= 0)
		sdp_close(l->claim);
	free(l);
}

void sdp__shm_close_listener(struct sdp_listener *sl)
{
	sdp__shm_listener_free(SHM_L(sl));
}
