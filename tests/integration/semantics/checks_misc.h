/* SPDX-License-Identifier: MIT */
/*
 * Checks: out-of-band data, IPv6, backlog, accept4, shutdown, threads, dup, fork.
 *
 * Part of sdp_semantics.c (one program, one translation unit): it is
 * #included there, after semantics/harness.h.
 */
#ifndef SEMANTICS_CHECKS_MISC_H
#define SEMANTICS_CHECKS_MISC_H

static int t_oob(void)
{
	int c, s;
	PAIR(c, s);
	WRITEN(s, "abc", 3);
	ssize_t n = send(s, "X", 1, MSG_OOB | MSG_NOSIGNAL);
	CHECK(n == 1, "send(MSG_OOB) returned %zd (%s)", n, n < 0 ? strerror(errno) : "");
	int ev = wait_ev(c, POLLPRI, 5000);
	CHECK(ev & POLLPRI, "POLLPRI not reported for urgent data (revents 0x%x)", ev);
	fd_set ef;
	FD_ZERO(&ef);
	FD_SET(c, &ef);
	struct timeval tv = { 5, 0 };
	CHECK(select(c + 1, NULL, NULL, &ef, &tv) == 1 && FD_ISSET(c, &ef), "select exceptfds not set");
	int mark = -1;
	SYS(ioctl(c, SIOCATMARK, &mark));
	CHECK(mark == 0, "SIOCATMARK = %d before the normal data was read", mark);
	char buf[16];
	size_t got = 0;
	while (got < 3) {
		n = recv(c, buf + got, sizeof buf - got, 0);
		CHECK(n > 0, "recv returned %zd (%s)", n, n < 0 ? strerror(errno) : "EOF");
		got += (size_t)n;
	}
	CHECK(got == 3 && !memcmp(buf, "abc", 3), "normal read crossed the mark: got %zu bytes", got);
	SYS(ioctl(c, SIOCATMARK, &mark));
	CHECK(mark == 1, "SIOCATMARK = %d at the mark", mark);
	char o = 0;
	n = recv(c, &o, 1, MSG_OOB);
	CHECK(n == 1 && o == 'X', "recv(MSG_OOB) returned %zd byte 0x%02x (%s)", n, (unsigned char)o,
	      n < 0 ? strerror(errno) : "");
	WRITEN(s, "def", 3);
	READN(c, buf, 3);
	CHECK(!memcmp(buf, "def", 3), "data after OOB wrong");
	close(c);
	close(s);
	return 0;
}

static int t_oob_inline(void)
{
	int c, s, one = 1, v;
	PAIR(c, s);
	SYS(setsockopt(c, SOL_SOCKET, SO_OOBINLINE, &one, sizeof one));
	SYS(getint(c, SOL_SOCKET, SO_OOBINLINE, &v));
	CHECK(v == 1, "SO_OOBINLINE = %d", v);
	WRITEN(s, "abc", 3);
	ssize_t n = send(s, "X", 1, MSG_OOB | MSG_NOSIGNAL);
	CHECK(n == 1, "send(MSG_OOB) returned %zd", n);
	WRITEN(s, "def", 3);
	char buf[8] = { 0 };
	READN(c, buf, 7);
	CHECK(!memcmp(buf, "abcXdef", 7), "SO_OOBINLINE stream is '%.7s', expected 'abcXdef'", buf);
	close(c);
	close(s);
	return 0;
}

static int t_ipv6(void)
{
	int probe = socket(AF_INET6, SOCK_DGRAM, 0);
	sockaddr_any a;
	socklen_t len = make_loopback(&a, AF_INET6, 0);
	if (probe < 0 || bind(probe, &a.sa, len) < 0) {
		if (probe >= 0)
			close(probe);
		SKIP("no IPv6 loopback on this machine");
	}
	close(probe);
	int c, s;
	if (t_pair_on(domain6(), AF_INET6, &c, &s, NULL) < 0)
		return -1;
	sockaddr_any p;
	len = sizeof p;
	SYS(getpeername(s, &p.sa, &len));
	char b1[80];
	CHECK(p.sa.sa_family == AF_INET6 && len == sizeof(struct sockaddr_in6) &&
		      IN6_IS_ADDR_LOOPBACK(&p.in6.sin6_addr),
	      "peer of a [::1] connection is %s", addr_str(&p, b1, sizeof b1));
	WRITEN(c, "v6", 2);
	char b[2];
	READN(s, b, 2);
	CHECK(!memcmp(b, "v6", 2), "wrong data");
	close(c);
	close(s);
	return 0;
}

/* n non-blocking connects to sa, none accepted yet. */
static int connect_nonblocking(int *cl, int n, const sockaddr_any *sa, socklen_t len)
{
	for (int i = 0; i < n; i++) {
		NEWSOCK(cl[i]);
		set_nonblock(cl[i], 1);
		int rc = connect(cl[i], &sa->sa, len);
		CHECK(rc == 0 || errno == EINPROGRESS, "connect #%d: %s", i, strerror(errno));
	}
	return 0;
}

/* The non-blocking connect of client i completed without error. */
static int connect_completed(int fd, int i)
{
	int ev = wait_ev(fd, POLLOUT, 5000);
	CHECK(ev & POLLOUT, "client %d: connect did not complete (revents 0x%x)", i, ev);
	int err = -1;
	socklen_t el = sizeof err;
	SYS(getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el));
	CHECK(err == 0, "client %d: SO_ERROR %s", i, strerror(err));
	return 0;
}

static int t_backlog(void)
{
	enum { N = 5 };
	uint16_t port;
	int l = t_listen(g_domain, g_af, &port, 8);
	if (l < 0)
		return -1;
	int cl[N], sv[N];
	uint16_t cport[N];
	sockaddr_any sa;
	socklen_t len = make_loopback(&sa, g_af, port);
	if (connect_nonblocking(cl, N, &sa, len) < 0)
		return -1;
	for (int i = 0; i < N; i++) {
		sockaddr_any pa;
		socklen_t pl = sizeof pa;
		sv[i] = accept(l, &pa.sa, &pl);
		CHECK(sv[i] >= 0, "accept #%d: %s", i, strerror(errno));
		CHECK(pa.sa.sa_family == g_af && is_loopback(&pa), "accept #%d returned a bad address", i);
	}
	for (int i = 0; i < N; i++) {
		if (connect_completed(cl[i], i) < 0)
			return -1;
		sockaddr_any me;
		socklen_t ml = sizeof me;
		SYS(getsockname(cl[i], &me.sa, &ml));
		cport[i] = addr_port(&me);
		set_nonblock(cl[i], 0);
	}
	/* every accepted socket talks to exactly one client */
	for (int i = 0; i < N; i++) {
		sockaddr_any pa;
		socklen_t pl = sizeof pa;
		SYS(getpeername(sv[i], &pa.sa, &pl));
		int j = 0;
		while (j < N && cport[j] != addr_port(&pa))
			j++;
		CHECK(j < N, "accepted socket %d has unknown peer port %u", i, addr_port(&pa));
		char m = (char)('0' + j), r;
		WRITEN(cl[j], &m, 1);
		READN(sv[i], &r, 1);
		CHECK(r == m, "pair %d/%d: got '%c' expected '%c'", i, j, r, m);
	}
	for (int i = 0; i < N; i++) {
		close(cl[i]);
		close(sv[i]);
	}
	close(l);
	return 0;
}

/* Blocking connect to the listener behind `sa`: the descriptor, or -1. */
static int connect_blocking(const sockaddr_any *sa, socklen_t len)
{
	int fd = socket(g_domain, SOCK_STREAM, 0);
	int rc;

	if (fd < 0 || t_bind_client(fd, g_af) < 0)
		FAIL("socket: %s", strerror(errno));
	do
		rc = connect(fd, &sa->sa, len);
	while (rc < 0 && errno == EINTR);
	if (rc < 0)
		FAIL("connect: %s (errno %d)", strerror(errno), errno);
	return fd;
}

/* poll(listener, timeout) reports POLLIN exactly as `want` says. */
static int listener_polls(int l, int timeout_ms, int want, const char *when)
{
	struct pollfd p = { .fd = l, .events = POLLIN };
	int n = poll(&p, 1, timeout_ms);

	CHECK(n >= 0, "poll(listener) %s: %s", when, strerror(errno));
	CHECK((n > 0 && (p.revents & POLLIN)) == !!want,
	      "poll(listener) %s: %s, expected %s", when,
	      n > 0 ? "readable" : "nothing", want ? "readable" : "nothing");
	return 0;
}

/*
 * A listener served by blocking accept() alone is watched by nobody in the
 * kernel until a wait names it: the first poll or epoll_wait must still see
 * the connections queued before it, the last accept must leave it
 * unreadable, and a connect during a wait must wake it.
 */
static int t_listener_first_wait(void)
{
	enum { N = 3 };
	uint16_t port;
	int l = t_listen(g_domain, g_af, &port, 8);
	int cl[N + 1], sv[N + 1], ep;
	struct epoll_event ev = { .events = EPOLLIN }, out;
	sockaddr_any sa;
	socklen_t len;

	if (l < 0)
		return -1;
	len = make_env_addr(&sa, g_af, port, "SDP_TEST_CONNECT_ADDR");
	for (int i = 0; i < N; i++)
		if ((cl[i] = connect_blocking(&sa, len)) < 0)
			return -1;
	sv[0] = accept(l, NULL, NULL);	/* blocking, nothing named it */
	CHECK(sv[0] >= 0, "accept: %s", strerror(errno));
	if (listener_polls(l, 0, 1, "with two queued") < 0)
		return -1;
	ep = epoll_create1(EPOLL_CLOEXEC);
	SYS(ep);
	SYS(epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev));
	CHECK(epoll_wait(ep, &out, 1, 0) == 1, "epoll_wait(listener) with two queued: nothing");
	for (int i = 1; i < N; i++) {
		sv[i] = accept(l, NULL, NULL);
		CHECK(sv[i] >= 0, "accept #%d: %s", i, strerror(errno));
	}
	if (listener_polls(l, 0, 0, "with none queued") < 0)
		return -1;
	CHECK(epoll_wait(ep, &out, 1, 0) == 0, "epoll_wait(listener) with none queued: readable");
	if ((cl[N] = connect_blocking(&sa, len)) < 0)
		return -1;
	if (listener_polls(l, 5000, 1, "after a connect") < 0)
		return -1;
	sv[N] = accept(l, NULL, NULL);
	CHECK(sv[N] >= 0, "accept: %s", strerror(errno));
	for (int i = 0; i <= N; i++) {
		char m = (char)('a' + i), r;

		WRITEN(cl[i], &m, 1);
		READN(sv[i], &r, 1);
		CHECK(r == m, "connection %d carried '%c', expected '%c'", i, r, m);
		close(cl[i]);
		close(sv[i]);
	}
	close(ep);
	close(l);
	return 0;
}

/*
 * More clients than the backlog, all at once, before anyone accepts: every
 * connect must complete once the server accepts, none may be refused.  Over
 * 256 of them (the shm transport used to close half-open connections past
 * 256), against a backlog of 4.  Linux TCP drops the SYNs past the backlog
 * and its clients retry after 1, 3, 7... seconds: not run on kernel TCP,
 * only on SDP (its own family, or TCP switched by the preloaded library).
 */
static int t_connect_burst(void)
{
	enum { N = 300 };
	const char *pre = getenv("LD_PRELOAD");
	if ((g_domain == AF_INET || g_domain == AF_INET6) && !(pre && strstr(pre, "libsdp")))
		SKIP("kernel TCP drops SYNs past the backlog; its retries take seconds");
	struct rlimit rl;
	SYS(getrlimit(RLIMIT_NOFILE, &rl));
	if (rl.rlim_cur < 16 * N) {
		rl.rlim_cur = rl.rlim_max < 16 * N ? rl.rlim_max : 16 * N;
		SYS(setrlimit(RLIMIT_NOFILE, &rl));
		if (rl.rlim_cur < 16 * N)
			SKIP("RLIMIT_NOFILE hard limit %lu is below %d", (unsigned long)rl.rlim_max, 16 * N);
	}
	uint16_t port;
	int l = t_listen(g_domain, g_af, &port, 4);
	if (l < 0)
		return -1;
	static int cl[N], sv[N];
	sockaddr_any sa;
	socklen_t len = make_loopback(&sa, g_af, port);
	if (connect_nonblocking(cl, N, &sa, len) < 0)
		return -1;
	for (int i = 0; i < N; i++) {
		sv[i] = accept(l, NULL, NULL);
		CHECK(sv[i] >= 0, "accept #%d: %s", i, strerror(errno));
	}
	for (int i = 0; i < N; i++) {
		if (connect_completed(cl[i], i) < 0)
			return -1;
		set_nonblock(cl[i], 0);
		uint16_t m = (uint16_t)i;
		WRITEN(cl[i], &m, sizeof m);
	}
	/* Each accepted socket got one client's number, each number once. */
	static unsigned char seen[N];
	for (int i = 0; i < N; i++) {
		uint16_t m;
		READN(sv[i], &m, sizeof m);
		CHECK(m < N && !seen[m], "server %d: got client number %u twice or out of range", i, m);
		seen[m] = 1;
		WRITEN(sv[i], &m, sizeof m);
	}
	for (int i = 0; i < N; i++) {
		uint16_t m;
		READN(cl[i], &m, sizeof m);
		CHECK(m == (uint16_t)i, "client %d: echo %u", i, m);
		close(cl[i]);
		close(sv[i]);
	}
	close(l);
	return 0;
}

/*
 * A listener whose process has run out of descriptors.  SDP's handshake
 * needs a few in the server (TCP's is done by the kernel into the
 * backlog), so the server refuses what it cannot take: every connect ends
 * (done or refused) and none waits for ever, as the rendezvous queue once
 * made it.  A switched ("both") client falls back to TCP instead.  Not on
 * kernel TCP alone.
 */
static int t_listener_out_of_fds(void)
{
	enum { N = 12 };
	const char *pre = getenv("LD_PRELOAD");
	int tcp = g_domain == AF_INET || g_domain == AF_INET6;
	if (tcp && !(pre && strstr(pre, "libsdp")))
		SKIP("kernel TCP completes handshakes without the server process");
	int up[2], down[2];
	SYS(pipe(up));
	SYS(pipe(down));
	pid_t srv = fork();
	if (srv < 0)
		return -1;
	if (srv == 0) {	/* the server: a small limit, used up */
		struct rlimit rl = { 64, 64 };
		uint16_t port;
		int l;
		char b;

		prctl(PR_SET_PDEATHSIG, SIGKILL);	/* gone with the check */
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			_exit(1);
		l = t_listen(g_domain, g_af, &port, 64);
		if (l < 0)
			_exit(1);
		while (open("/dev/null", O_RDONLY) >= 0)
			;
		if (write(up[1], &port, sizeof port) != sizeof port)
			_exit(1);
		while (read(down[0], &b, 1) < 0 && errno == EINTR)
			;
		_exit(0);
	}
	close(up[1]);
	close(down[0]);
	uint16_t port;
	CHECK(read(up[0], &port, sizeof port) == sizeof port, "the server did not start");
	sockaddr_any sa;
	socklen_t len = make_loopback(&sa, g_af, port);
	int refused = 0;
	for (int i = 0; i < N; i++) {
		int fd;
		NEWSOCK(fd);
		if (connect(fd, &sa.sa, len) < 0) {
			CHECK(errno == ECONNREFUSED || errno == ECONNRESET,
			      "connect #%d: %s, expected success or a refusal", i, strerror(errno));
			refused++;
		}
		close(fd);
	}
	close(down[1]);
	close(up[0]);
	kill(srv, SIGKILL);
	waitpid(srv, NULL, 0);
	/* A switched ("both") client goes over TCP instead: no refusal. */
	CHECK(tcp || refused > 0, "no connect was refused by a server out of descriptors");
	return 0;
}

static int t_accept4(void)
{
	uint16_t port;
	int l = t_listen(g_domain, g_af, &port, 4);
	if (l < 0)
		return -1;
	int c;
	NEWSOCK(c);
	set_nonblock(c, 1);
	sockaddr_any sa;
	socklen_t len = make_loopback(&sa, g_af, port);
	int rc = connect(c, &sa.sa, len);
	CHECK(rc == 0 || errno == EINPROGRESS, "connect: %s", strerror(errno));
	sockaddr_any pa;
	socklen_t pl = sizeof pa;
	int s = accept4(l, &pa.sa, &pl, SOCK_NONBLOCK | SOCK_CLOEXEC);
	CHECK(s >= 0, "accept4 failed: %s (errno %d)", strerror(errno), errno);
	CHECK(fcntl(s, F_GETFL) & O_NONBLOCK, "accept4(SOCK_NONBLOCK): O_NONBLOCK not set");
	CHECK(fcntl(s, F_GETFD) & FD_CLOEXEC, "accept4(SOCK_CLOEXEC): FD_CLOEXEC not set");
	CHECK(!(fcntl(l, F_GETFL) & O_NONBLOCK), "listener became non-blocking");
	CHECK(wait_ev(c, POLLOUT, 5000) & POLLOUT, "connect did not complete");
	sockaddr_any me;
	socklen_t ml = sizeof me;
	SYS(getsockname(c, &me.sa, &ml));
	CHECK(same_addr(&me, &pa), "accept4 address differs from the client's getsockname");
	char b;
	EXPECT_ERR(recv(s, &b, 1, 0), EAGAIN);
	/* plain accept on a non-blocking listener with nothing pending: EAGAIN */
	set_nonblock(l, 1);
	EXPECT_ERR(accept(l, NULL, NULL), EAGAIN);
	close(c);
	close(s);
	close(l);
	return 0;
}

static int t_shutdown_rd(void)
{
	int c, s;
	PAIR(c, s);
	SYS(shutdown(c, SHUT_RD));
	char b;
	ssize_t n = recv(c, &b, 1, 0);
	CHECK(n == 0, "recv after shutdown(SHUT_RD) returned %zd (%s), expected 0", n,
	      n < 0 ? strerror(errno) : "data");
	n = recv(c, &b, 1, MSG_DONTWAIT);
	CHECK(n == 0, "non-blocking recv after shutdown(SHUT_RD) returned %zd, expected 0", n);
	/* the other direction still works */
	WRITEN(c, "w", 1);
	READN(s, &b, 1);
	CHECK(b == 'w', "wrong data");
	close(c);
	close(s);
	return 0;
}

static int t_shutdown_rdwr(void)
{
	int c, s;
	PAIR(c, s);
	SYS(shutdown(c, SHUT_RDWR));
	char b;
	ssize_t n = recv(s, &b, 1, 0);
	CHECK(n == 0, "peer recv after shutdown(SHUT_RDWR) returned %zd (%s), expected EOF", n,
	      n < 0 ? strerror(errno) : "data");
	EXPECT_ERR(send(c, "x", 1, MSG_NOSIGNAL), EPIPE);
	n = recv(c, &b, 1, 0);
	CHECK(n == 0, "recv after own shutdown(SHUT_RDWR) returned %zd", n);
	int ev = wait_ev(c, POLLIN | POLLOUT, 0);
	CHECK(ev & POLLIN, "POLLIN not reported after shutdown(SHUT_RDWR) (0x%x)", ev);
	int u;
	NEWSOCK(u);
	EXPECT_ERR(shutdown(u, SHUT_RDWR), ENOTCONN);
	close(u);
	close(c);
	close(s);
	return 0;
}

typedef struct {
	int fd;
	uint64_t bytes;
	const unsigned char *pat;
	int err;
	char msg[200];
} tt_t;

static void *tt_writer(void *arg)
{
	tt_t *t = arg;
	prng_t r;
	prng_seed(&r, 9);
	uint64_t off = 0;
	while (off < t->bytes) {
		size_t n = (size_t)prng_range(&r, 1, 100000);
		if (n > t->bytes - off)
			n = (size_t)(t->bytes - off);
		ssize_t w = send(t->fd, pattern_at(t->pat, off), n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			t->err = 1;
			snprintf(t->msg, sizeof t->msg, "writer: send: %s", strerror(errno));
			return NULL;
		}
		off += (uint64_t)w;
	}
	return NULL;
}

static void *tt_echo(void *arg)
{
	tt_t *t = arg;
	static char buf[65536];
	for (;;) {
		ssize_t n = recv(t->fd, buf, sizeof buf, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n < 0) {
				t->err = 1;
				snprintf(t->msg, sizeof t->msg, "echo: recv: %s", strerror(errno));
			}
			break;
		}
		ssize_t off = 0;
		while (off < n) {
			ssize_t w = send(t->fd, buf + off, (size_t)(n - off), MSG_NOSIGNAL);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				t->err = 1;
				snprintf(t->msg, sizeof t->msg, "echo: send: %s", strerror(errno));
				return NULL;
			}
			off += w;
		}
	}
	shutdown(t->fd, SHUT_WR);
	return NULL;
}

static int t_two_threads(void)
{
	int c, s;
	PAIR(c, s);
	static unsigned char *pat;
	if (!pat)
		pat = pattern_new(99);
	const uint64_t total = 16u << 20;
	tt_t w = { c, total, pat, 0, "" }, e = { s, total, pat, 0, "" };
	pthread_t tw, te;
	pthread_create(&te, NULL, tt_echo, &e);
	pthread_create(&tw, NULL, tt_writer, &w);
	unsigned char *buf = malloc(65536);
	uint64_t off = 0;
	csum_t cs;
	csum_init(&cs);
	int bad = 0;
	while (off < total) {
		ssize_t n = recv(c, buf, 65536, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			bad = 1;
			snprintf(detail, sizeof detail, "reader: recv returned %zd (%s) after %" PRIu64 " bytes", n,
				 n < 0 ? strerror(errno) : "EOF", off);
			break;
		}
		if (memcmp(buf, pattern_at(pat, off), (size_t)n)) {
			bad = 1;
			snprintf(detail, sizeof detail, "reader: data mismatch near offset %" PRIu64, off);
			break;
		}
		csum_update(&cs, buf, (size_t)n);
		off += (uint64_t)n;
	}
	free(buf);
	pthread_join(tw, NULL);
	shutdown(c, SHUT_WR);
	pthread_join(te, NULL);
	if (bad)
		return -1;
	CHECK(!w.err, "%s", w.msg);
	CHECK(!e.err, "%s", e.msg);
	csum_t ref;
	csum_init(&ref);
	for (uint64_t o = 0; o < total; o += 65536)
		csum_update(&ref, pattern_at(pat, o), (size_t)(total - o < 65536 ? total - o : 65536));
	CHECK(csum_final(&ref) == csum_final(&cs), "checksum mismatch");
	char b;
	CHECK(recv(c, &b, 1, 0) == 0, "no EOF after echo finished");
	close(c);
	close(s);
	return 0;
}

static int t_dup(void)
{
	int c, s;
	PAIR(c, s);
	int d = dup(c);
	SYS(d);
	WRITEN(d, "d1", 2);
	char b[2];
	READN(s, b, 2);
	close(c);
	/* the duplicate keeps the connection open */
	WRITEN(s, "d2", 2);
	READN(d, b, 2);
	CHECK(!memcmp(b, "d2", 2), "wrong data through dup");
	int e = dup2(d, 200);
	CHECK(e == 200, "dup2 returned %d", e);
	close(d);
	WRITEN(200, "d3", 2);
	READN(s, b, 2);
	CHECK(!memcmp(b, "d3", 2), "wrong data through dup2");
	close(200);
	ssize_t n = recv(s, b, 1, 0);
	CHECK(n == 0, "no EOF after the last duplicate was closed (%zd)", n);
	close(s);
	return 0;
}

static int t_fork_inherit(void)
{
#ifdef __SANITIZE_THREAD__
	SKIP("TSan cannot start threads in the child of a threaded process");
#endif
	int c, s;
	PAIR(c, s);
	fflush(NULL);
	pid_t pid = fork();
	SYS(pid);
	if (pid == 0) {
		close(s);
		const char m[] = "from-child";
		ssize_t n = send(c, m, sizeof m, MSG_NOSIGNAL);
		char r[4];
		ssize_t k = recv(c, r, sizeof r, MSG_WAITALL);
		_exit(n == (ssize_t)sizeof m && k == 4 && !memcmp(r, "ack!", 4) ? 0 : 1);
	}
	close(c);
	char buf[16];
	READN(s, buf, 11);
	CHECK(!memcmp(buf, "from-child", 11), "wrong data from the child");
	WRITEN(s, "ack!", 4);
	int st;
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child failed (status 0x%x)", st);
	ssize_t n = recv(s, buf, 1, 0);
	/* TCP gives EOF (the kernel FINs for the dead child).  Over SDP a
	 * peer that vanishes without closing (_exit skips libsdp's exit
	 * flush) is reported as ECONNRESET: whether it had unsent data
	 * cannot be known, so the reader is told (docs/DESIGN.md). */
	int v;
	socklen_t vl = sizeof v;
	int over_sdp = getsockopt(s, IPPROTO_TCP, 90 /* SDP_CONN_TRANSPORT */,
				  &v, &vl) == 0;
	CHECK(n == 0 || (n < 0 && errno == ECONNRESET && over_sdp),
	      "no EOF after the child exited (%zd)", n);
	close(s);
	return 0;
}


/* 1 MiB from w to r in 64 KiB steps, every byte checked. */
static int t_stream_mib(int w, int r, unsigned seed)
{
	static char out[65536], in[65536];
	prng_t g;
	prng_seed(&g, seed);
	for (int i = 0; i < 16; i++) {
		prng_fill(&g, out, sizeof out);
		WRITEN(w, out, sizeof out);
		READN(r, in, sizeof in);
		CHECK(!memcmp(in, out, sizeof in), "stream chunk %d differs", i);
	}
	return 0;
}

/* Programs close "every descriptor but mine" (daemons, servers before they
 * drop privileges): one by one, with closefrom() or close_range().  The
 * library's own descriptors must survive that (they are not the
 * program's), and a socket closed by range must be forgotten, or the next
 * descriptor of its number would be taken for it. */
static int t_close_everything(void)
{
#ifdef __SANITIZE_THREAD__
	/* TSan's close() sits above the library's and marks the descriptor
	 * closed before the library refuses it (EBADF): the progress thread's
	 * next use of its own descriptor is then reported as a race. */
	SKIP("TSan takes a refused close of a library descriptor for a close");
#endif
	int c, s;
	PAIR(c, s);
	int fds[4096], n = 0;
	DIR *d = opendir("/proc/self/fd");
	CHECK(d != NULL, "opendir /proc/self/fd");
	struct dirent *e;
	while ((e = readdir(d)) && n < 4096)
		if (e->d_name[0] != '.')
			fds[n++] = atoi(e->d_name);
	closedir(d);
	int keep_max = c > s ? c : s;
	for (int i = 0; i < n; i++) {
		struct stat st;
		if (fds[i] <= 2 || fds[i] == c || fds[i] == s)
			continue;
		if (fstat(fds[i], &st) == 0 && S_ISFIFO(st.st_mode)) {
			if (fds[i] > keep_max)	/* the driver's result pipe */
				keep_max = fds[i];
			continue;
		}
		close(fds[i]);
	}
	if (t_stream_mib(c, s, 11) < 0)
		return -1;
	/* Each socket of a second pair by a range of its own (a range from
	 * one to the other could hold c or s), then a descriptor on the
	 * first one's number: it must be the file, not the forgotten socket. */
	int c2, s2;
	PAIR(c2, s2);
	SYS(close_range((unsigned)c2, (unsigned)c2, 0));
	SYS(close_range((unsigned)s2, (unsigned)s2, 0));
	int f = open("/dev/null", O_RDWR);
	SYS(f);
	int g = fcntl(f, F_DUPFD, c2);	/* c2's number, unless taken again */
	SYS(g);
	char b = 'x';
	CHECK(write(g, &b, 1) == 1 && read(g, &b, 1) == 0,
	      "descriptor %d (after close_range of %d) is not /dev/null", g, c2);
	close(g);
	close(f);
	closefrom(keep_max + 1);
	if (t_stream_mib(s, c, 12) < 0)
		return -1;
	close(c);
	close(s);
	return 0;
}

/* A vfork() child runs in its parent's memory until it execs: what it
 * closes or dup2s before (Python's subprocess calls close_range there)
 * must leave the parent's sockets alone. */
static int t_vfork_child_closes(void)
{
#ifdef __SANITIZE_THREAD__
	SKIP("TSan cannot run a vfork child");
#endif
	int c, s;
	PAIR(c, s);
	pid_t p = vfork();
	if (p == 0) {
		close(c);
		dup2(s, 100);
		close_range(3, ~0u, 0);
		execl("/bin/true", "true", (char *)NULL);
		_exit(127);
	}
	CHECK(p > 0, "vfork: %s", strerror(errno));
	int st;
	CHECK(waitpid(p, &st, 0) == p && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "the vfork child failed (status %#x)", st);
	if (t_stream_mib(c, s, 13) < 0 || t_stream_mib(s, c, 14) < 0)
		return -1;
	close(c);
	close(s);
	return 0;
}

/* vsftpd forks its session child with syscall(SYS_clone, CLONE_NEWIPC |
 * SIGCHLD, NULL) (CLONE_NEWPID too where it may), not fork(): the child
 * puts the accepted connection on 0, 1 and 2, asks getpeername() and
 * talks FTP on it while the listening parent closes its copy.  The same
 * here, plain and, where this process may, in a new IPC namespace. */
static int raw_clone_child(int c, int s, long extra)
{
	fflush(NULL);
	long pid = syscall(SYS_clone, SIGCHLD | extra, NULL, NULL, NULL, 0L);
	if (pid < 0 && extra && (errno == EPERM || errno == EINVAL))
		return 1;	/* not allowed here: nothing to check */
	SYS(pid);
	if (pid == 0) {
		struct sockaddr_storage peer;
		socklen_t pl = sizeof peer;
		char r[4];

		close(s);
		if (dup2(c, 0) != 0 || dup2(c, 1) != 1)
			_exit(2);
		close(c);
		if (getpeername(0, (struct sockaddr *)&peer, &pl) < 0)
			_exit(3);
		if (write(1, "220 ready\r\n", 11) != 11)
			_exit(4);
		if (recv(0, r, sizeof r, MSG_WAITALL) != 4 || memcmp(r, "QUIT", 4))
			_exit(5);
		_exit(write(1, "221\r\n", 5) == 5 ? 0 : 6);
	}
	close(c);	/* the listening parent's copy */
	char buf[16];
	READN(s, buf, 11);
	CHECK(!memcmp(buf, "220 ready\r\n", 11), "wrong greeting from the child");
	WRITEN(s, "QUIT", 4);
	READN(s, buf, 5);
	CHECK(!memcmp(buf, "221\r\n", 5), "wrong answer from the child");
	int st;
	CHECK(waitpid((pid_t)pid, &st, 0) == pid, "waitpid: %s", strerror(errno));
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "the clone child failed (status %#x)", st);
	close(s);
	return 0;
}

static int t_raw_clone_child(void)
{
#ifdef __SANITIZE_THREAD__
	SKIP("TSan cannot start threads in the child of a threaded process");
#endif
	int c, s, r;

	PAIR(c, s);
	r = raw_clone_child(c, s, 0);
	if (r < 0)
		return r;
	PAIR(c, s);
	r = raw_clone_child(c, s, CLONE_NEWIPC);
	if (r == 1) {
		close(c);
		close(s);
	}
	return r < 0 ? r : 0;
}

/* A process passes a connection to another one over a unix socket
 * (SCM_RIGHTS), as vsftpd's privileged parent hands each data connection
 * to its session process, or a dispatcher to its workers: the receiver,
 * which never had the connection's state, reads and writes it with plain
 * system calls (sendfile too); the sender closes its copy.  Every byte is
 * checked both ways, then the receiver's close reaches the peer as EOF. */
static int send_fd(int via, int fd)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} u;
	char one = 'F';
	struct iovec iov = { &one, 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = u.b, .msg_controllen = sizeof u.b };
	struct cmsghdr *cm;

	memset(&u, 0, sizeof u);
	cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof fd);
	return sendmsg(via, &mh, 0) == 1 ? 0 : -1;
}

static int recv_fd(int via)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} u;
	char one;
	struct iovec iov = { &one, 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = u.b, .msg_controllen = sizeof u.b };
	struct cmsghdr *cm;
	int fd = -1;

	if (recvmsg(via, &mh, 0) != 1)
		return -1;
	cm = CMSG_FIRSTHDR(&mh);
	if (cm && cm->cmsg_type == SCM_RIGHTS)
		memcpy(&fd, CMSG_DATA(cm), sizeof fd);
	return fd;
}

/* The receiving worker: 1 MiB in (checked), the same 1 MiB back, half of
 * it through sendfile() from a file, then close. */
static int passed_fd_worker(int via)
{
	static char in[65536], out[65536];
	char path[] = "/tmp/sdp-passed-XXXXXX";
	int fd = recv_fd(via), tmp;
	prng_t g;

	if (fd < 0)
		return 2;
	prng_seed(&g, 41);
	for (int i = 0; i < 16; i++) {
		prng_fill(&g, out, sizeof out);
		if (t_read_n(fd, in, sizeof in) < 0 || memcmp(in, out, sizeof in))
			return 3;
	}
	prng_seed(&g, 42);
	for (int i = 0; i < 8; i++) {
		prng_fill(&g, out, sizeof out);
		if (t_write_n(fd, out, sizeof out) < 0)
			return 4;
	}
	tmp = mkstemp(path);
	if (tmp < 0)
		return 5;
	unlink(path);
	for (int i = 0; i < 8; i++) {
		prng_fill(&g, out, sizeof out);
		if (write(tmp, out, sizeof out) != (ssize_t)sizeof out)
			return 6;
	}
	off_t off = 0;
	while (off < 8 * 65536) {
		ssize_t n = sendfile(fd, tmp, &off, (size_t)(8 * 65536 - off));
		if (n <= 0)
			return 7;
	}
	close(tmp);
	return close(fd) == 0 ? 0 : 8;
}

static int t_passed_to_another_process(void)
{
#ifdef __SANITIZE_THREAD__
	SKIP("TSan cannot start threads in the child of a threaded process");
#endif
	static char in[65536], out[65536];
	int via[2], c, s, st;
	prng_t g;

	SYS(socketpair(AF_UNIX, SOCK_STREAM, 0, via));
	fflush(NULL);
	pid_t pid = fork();	/* before the connection: it never had it */
	SYS(pid);
	if (pid == 0) {
		close(via[0]);
		_exit(passed_fd_worker(via[1]));
	}
	close(via[1]);
	PAIR(c, s);
	/* Something in flight before the hand-off goes with it. */
	prng_seed(&g, 41);
	prng_fill(&g, out, sizeof out);
	WRITEN(c, out, sizeof out);
	CHECK(send_fd(via[0], s) == 0, "sendmsg(SCM_RIGHTS): %s", strerror(errno));
	close(s);
	for (int i = 1; i < 16; i++) {
		prng_fill(&g, out, sizeof out);
		WRITEN(c, out, sizeof out);
	}
	prng_seed(&g, 42);
	for (int i = 0; i < 16; i++) {
		prng_fill(&g, out, sizeof out);
		READN(c, in, sizeof in);
		CHECK(!memcmp(in, out, sizeof in), "chunk %d from the worker differs", i);
	}
	CHECK(waitpid(pid, &st, 0) == pid, "waitpid: %s", strerror(errno));
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "the worker failed (status %#x)", st);
	ssize_t n = recv(c, in, 1, 0);
	CHECK(n == 0, "no EOF after the worker closed (%zd, %s)", n,
	      n < 0 ? strerror(errno) : "data");
	/* An SDP socket that is not a connection carries nothing another
	 * process could use: refused, not handed over broken. */
	int v;
	socklen_t vl = sizeof v;
	if (getsockopt(c, IPPROTO_TCP, 90 /* SDP_CONN_TRANSPORT */, &v, &vl) == 0) {
		int u = socket(g_domain, SOCK_STREAM, 0);
		SYS(u);
		errno = 0;
		CHECK(send_fd(via[0], u) < 0 && errno == EOPNOTSUPP,
		      "an unconnected SDP socket was passed on (%s)", strerror(errno));
		close(u);
	}
	close(c);
	close(via[0]);
	return 0;
}

#endif /* SEMANTICS_CHECKS_MISC_H */
