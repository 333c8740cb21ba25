// SPDX-License-Identifier: MIT
/*
 * relayed.c — a relayed connection as the image that exec'd with it sees it
 * (engine/relay.h).
 *
 * The new image holds a plain AF_UNIX stream socket whose other end the
 * owner of the connection relays.  Read and write, poll and epoll, shutdown
 * and close work on it as they are.  What a program asks of the TCP
 * connection itself would not: getpeername() would give an unnamed AF_UNIX
 * address (sshd then logs and matches "from" rules against nothing), and
 * TCP or IP options would fail with EOPNOTSUPP.  So the exec'ing process
 * writes what each stream stands for into SDP_RELAYED, keyed by the
 * stream's inode (any descriptor number of it, after any dup), and an image
 * that runs with libsdp answers for it:
 *   - getsockname/getpeername: the connection's addresses;
 *   - SO_DOMAIN, SO_PROTOCOL: its family, IPPROTO_TCP;
 *   - IPPROTO_TCP, IPPROTO_IP, IPPROTO_IPV6 options: TCP_NODELAY and the
 *     TOS/traffic class are kept and read back, the rest accepted and read
 *     back as 0 (IP_OPTIONS as empty): they cannot reach the connection,
 *     which the owner drives.
 * The variable stays in the environment, so a further image that inherits
 * the stream (git daemon's upload-pack, sshd's re-exec) knows it too; an
 * entry whose inode no descriptor has is simply never matched.
 *
 * Format: entries separated by ',', each "INODE/LOCAL/PEER" with the two
 * socket addresses in hexadecimal, as getsockname() returned them.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "base/real.h"
#include "socket/sock.h"

struct relayed {
	uint64_t ino;
	struct sockaddr_storage local, peer;
	socklen_t local_len, peer_len;
	int nodelay, tos;
};

static struct relayed R[SDP_RELAYED_MAX];
static _Atomic int nrel;	/* entries are written before they count */
static pthread_mutex_t add_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t opt_lock = PTHREAD_MUTEX_INITIALIZER;

static int unhex(const char **p, void *out, socklen_t max, socklen_t *len)
{
	unsigned char *o = out;
	socklen_t n = 0;

	while (**p && **p != '/' && **p != ',') {
		int hi, lo;

		hi = (*p)[0];
		lo = (*p)[1];
		if (!lo || n == max)
			return -1;
		hi = hi <= '9' ? hi - '0' : (hi | 0x20) - 'a' + 10;
		lo = lo <= '9' ? lo - '0' : (lo | 0x20) - 'a' + 10;
		if (hi < 0 || hi > 15 || lo < 0 || lo > 15)
			return -1;
		o[n++] = (unsigned char)(hi << 4 | lo);
		*p += 2;
	}
	*len = n;
	return n >= sizeof(sa_family_t) ? 0 : -1;
}

__attribute__((constructor)) static void relayed_ctor(void)
{
	/* Not in a setuid program: its caller chose the environment. */
	const char *p = secure_getenv(SDP_RELAYED_ENV);

	while (p && *p && nrel < SDP_RELAYED_MAX) {
		struct relayed *e = &R[nrel];
		char *end;

		e->ino = strtoull(p, &end, 10);
		p = end;
		if (*p++ != '/' ||
		    unhex(&p, &e->local, sizeof(e->local), &e->local_len) ||
		    *p++ != '/' ||
		    unhex(&p, &e->peer, sizeof(e->peer), &e->peer_len))
			break;	/* malformed: keep what was read */
		nrel++;
		while (*p == ',')
			p++;
	}
}

void sdp_relayed_add(uint64_t ino, const struct sockaddr *local,
		     socklen_t local_len, const struct sockaddr *peer,
		     socklen_t peer_len)
{
	struct relayed *e;

	if (local_len > sizeof(e->local) || peer_len > sizeof(e->peer))
		return;
	pthread_mutex_lock(&add_lock);
	if (nrel < SDP_RELAYED_MAX) {
		e = &R[nrel];
		memset(e, 0, sizeof(*e));
		e->ino = ino;
		memcpy(&e->local, local, local_len);
		memcpy(&e->peer, peer, peer_len);
		e->local_len = local_len;
		e->peer_len = peer_len;
		nrel++;
	}
	pthread_mutex_unlock(&add_lock);
}

static struct relayed *find(int fd)
{
	struct stat st;
	int i;

	int v = 0;
	socklen_t l = sizeof(v);

	if (!nrel || fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode))
		return NULL;
	for (i = 0; i < nrel; i++)
		if (R[i].ino == (uint64_t)st.st_ino)
			break;
	if (i == nrel)
		return NULL;
	/* An inode number is reused once its socket is gone: the stream is
	 * an AF_UNIX one, never a real TCP socket that came to share it. */
	sdp_real_init();
	if (sdp_real.getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &l) < 0 ||
	    v != AF_UNIX)
		return NULL;
	return &R[i];
}

int sdp_relayed_name(int fd, int peer, struct sockaddr *sa, socklen_t *len)
{
	struct relayed *e = find(fd);
	socklen_t n;

	if (!e)
		return -ENOENT;
	if (!sa || !len)
		return -EFAULT;
	n = peer ? e->peer_len : e->local_len;
	memcpy(sa, peer ? &e->peer : &e->local, n < *len ? n : *len);
	*len = n;
	return 0;
}

static int is_ip_level(int level)
{
	return level == IPPROTO_TCP || level == IPPROTO_IP ||
	       level == IPPROTO_IPV6;
}

static int is_tos(int level, int name)
{
	return (level == IPPROTO_IP && name == IP_TOS) ||
	       (level == IPPROTO_IPV6 && name == IPV6_TCLASS);
}

int sdp_relayed_getsockopt(int fd, int level, int name, void *v,
			   socklen_t *len)
{
	struct relayed *e;
	int val = 0;

	if (!nrel || (level != SOL_SOCKET && !is_ip_level(level)))
		return -ENOENT;
	e = find(fd);
	if (!e)
		return -ENOENT;
	if (level == SOL_SOCKET) {
		if (name == SO_DOMAIN)
			return sdp_opt_put_int(v, len, e->local.ss_family);
		if (name == SO_PROTOCOL)
			return sdp_opt_put_int(v, len, IPPROTO_TCP);
		return -ENOENT;		/* the kernel's answer is right */
	}
	if (level == IPPROTO_IP && name == IP_OPTIONS) {
		if (!len)
			return -EFAULT;
		*len = 0;
		return 0;
	}
	pthread_mutex_lock(&opt_lock);
	if (level == IPPROTO_TCP && name == TCP_NODELAY)
		val = e->nodelay;
	else if (is_tos(level, name))
		val = e->tos;
	pthread_mutex_unlock(&opt_lock);
	return sdp_opt_put_int(v, len, val);
}

int sdp_relayed_setsockopt(int fd, int level, int name, const void *v,
			   socklen_t len)
{
	struct relayed *e;
	int val = 0;

	if (!nrel || !is_ip_level(level))
		return -ENOENT;
	e = find(fd);
	if (!e)
		return -ENOENT;
	if (len >= sizeof(int) && sdp_opt_get_int(v, len, &val) < 0)
		return -EFAULT;
	pthread_mutex_lock(&opt_lock);
	if (level == IPPROTO_TCP && name == TCP_NODELAY)
		e->nodelay = !!val;
	else if (is_tos(level, name))
		e->tos = val;
	pthread_mutex_unlock(&opt_lock);
	return 0;
}
