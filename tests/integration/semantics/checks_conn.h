/* SPDX-License-Identifier: MIT */
/*
 * Checks: socket creation, connect/accept, names, non-blocking connect and recv, MSG_* flags, peer close, EPIPE and SIGPIPE.
 *
 * Part of sdp_semantics.c (one program, one translation unit): it is
 * #included there, after semantics/harness.h.
 */
#ifndef SEMANTICS_CHECKS_CONN_H
#define SEMANTICS_CHECKS_CONN_H

/* =========================== the checks =================================== */

static int t_socket_type(void)
{
	int fd = socket(g_domain, SOCK_STREAM, 0);
	if (fd < 0)
		FAIL("socket(%d, SOCK_STREAM, 0) failed: %s (errno %d)", g_domain, strerror(errno), errno);
	int v = -1;
	socklen_t len = sizeof v;
	SYS(getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &len));
	CHECK(v == SOCK_STREAM, "SO_TYPE = %d, expected SOCK_STREAM", v);
	EXPECT_ERR(getpeername(fd, (struct sockaddr *)&(struct sockaddr_storage){ 0 },
			       &(socklen_t){ sizeof(struct sockaddr_storage) }),
		   ENOTCONN);
	char c;
	EXPECT_ERR(send(fd, "x", 1, MSG_NOSIGNAL), EPIPE);
	EXPECT_ERR(recv(fd, &c, 1, MSG_DONTWAIT), ENOTCONN);
	close(fd);
	return 0;
}

static int t_econnrefused(void)
{
	/* reserve a port (bound, not listening) so nothing can listen on it */
	int r;
	NEWSOCK(r);
	sockaddr_any a;
	socklen_t len = make_loopback(&a, g_af, 0);
	SYS(bind(r, &a.sa, len));
	len = sizeof a;
	SYS(getsockname(r, &a.sa, &len));
	int fd;
	NEWSOCK(fd);
	EXPECT_ERR(connect(fd, &a.sa, len), ECONNREFUSED);
	close(fd);
	/* non-blocking: EINPROGRESS then SO_ERROR = ECONNREFUSED, or immediate */
	NEWSOCK(fd);
	set_nonblock(fd, 1);
	int rc = connect(fd, &a.sa, len);
	if (rc < 0 && errno == EINPROGRESS) {
		int ev = wait_ev(fd, POLLOUT, 5000);
		CHECK(ev, "non-blocking connect to a closed port: no POLLOUT/POLLERR within 5 s");
		int err = -1;
		socklen_t el = sizeof err;
		SYS(getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el));
		CHECK(err == ECONNREFUSED, "non-blocking connect: SO_ERROR = %d (%s), expected ECONNREFUSED",
		      err, strerror(err));
	} else {
		CHECK(rc < 0 && errno == ECONNREFUSED,
		      "non-blocking connect to a closed port returned %d (%s)", rc,
		      rc < 0 ? strerror(errno) : "success");
	}
	close(fd);
	close(r);
	return 0;
}

static int t_eaddrinuse(void)
{
	uint16_t port;
	int l = t_listen(g_domain, g_af, &port, 4);
	if (l < 0)
		return -1;
	int fd;
	NEWSOCK(fd);
	sockaddr_any a;
	socklen_t len = make_loopback(&a, g_af, port);
	EXPECT_ERR(bind(fd, &a.sa, len), EADDRINUSE);
	close(fd);
	/* also with SO_REUSEADDR on the second socket: a listener holds the port */
	NEWSOCK(fd);
	int one = 1;
	SYS(setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one));
	EXPECT_ERR(bind(fd, &a.sa, len), EADDRINUSE);
	close(fd);
	close(l);
	return 0;
}

/* The IPv4 and IPv6 socket domains of the family under test. */
static void family_domains(int *d4, int *d6)
{
	*d4 = g_domain == AF_INET6 ? AF_INET :
	      g_domain == AF_INET6_SDP ? AF_INET_SDP : g_domain;
	*d6 = *d4 == AF_INET ? AF_INET6 : AF_INET6_SDP;
}

/* A socket of `domain` connects to the loopback address of `af` at port,
 * listener l accepts it, and a byte crosses, both ends carried as the run
 * claims. */
static int t_one_connection(int l, int domain, int af, uint16_t port)
{
	sockaddr_any a;
	socklen_t len = make_loopback(&a, af, port);
	int c = socket(domain, SOCK_STREAM, 0), s;
	char b = 0;

	CHECK(c >= 0, "socket(%d): %s", domain, strerror(errno));
	SYS(connect(c, &a.sa, len));
	s = accept(l, NULL, NULL);
	CHECK(s >= 0, "accept: %s", strerror(errno));
	T_TRANSPORT(c);
	T_TRANSPORT(s);
	WRITEN(c, "x", 1);
	READN(s, &b, 1);
	CHECK(b == 'x', "wrong byte");
	close(c);
	close(s);
	return 0;
}

/*
 * A listener on the port an SDP connection uses as its source.  The kernel
 * picks a listener's port (bind to port 0) among ports no kernel socket
 * holds, and an SDP client's source port is not one; so a server could get
 * it, and its SDP side then failed to bind: the listener stayed TCP only,
 * silently.  Kernel TCP refuses the bind itself (the client's socket holds
 * the port); over SDP it succeeds and the listener takes SDP clients.
 */
static int t_listen_on_client_port(void)
{
	int c, s, l, one = 1;
	sockaddr_any a;
	socklen_t len = sizeof a;

	PAIR(c, s);
	SYS(getsockname(c, &a.sa, &len));
	uint16_t port = addr_port(&a);
	NEWSOCK(l);
	SYS(setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one));
	len = make_loopback(&a, g_af, port);
	if (bind(l, &a.sa, len) < 0) {
		CHECK(errno == EADDRINUSE && !expect_sdp(),
		      "bind to the port of an SDP connection's source: %s",
		      strerror(errno));
	} else {
		SYS(listen(l, 4));
		if (t_one_connection(l, g_domain, g_af, port) < 0)
			return -1;
	}
	close(l);
	close(c);
	close(s);
	return 0;
}

/* A server with one IPv4 and one IPv6-only listener on the same port
 * (sshd, nginx): both listen, and each family's client reaches its own,
 * carried as the run claims. */
static int t_dual_stack_v6only(void)
{
	int d4, d6, one = 1, l4, l6;
	sockaddr_any a;
	socklen_t len;

	family_domains(&d4, &d6);
	l4 = socket(d4, SOCK_STREAM, 0);
	l6 = socket(d6, SOCK_STREAM, 0);
	CHECK(l4 >= 0 && l6 >= 0, "socket: %s", strerror(errno));
	SYS(setsockopt(l6, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one));
	len = make_loopback(&a, AF_INET, 0);
	memset(&a.in.sin_addr, 0, sizeof a.in.sin_addr);	/* 0.0.0.0 */
	SYS(bind(l4, &a.sa, len));
	SYS(listen(l4, 4));
	len = sizeof a;
	SYS(getsockname(l4, &a.sa, &len));
	uint16_t port = addr_port(&a);
	len = make_loopback(&a, AF_INET6, port);
	memset(&a.in6.sin6_addr, 0, sizeof a.in6.sin6_addr);	/* :: */
	SYS(bind(l6, &a.sa, len));
	SYS(listen(l6, 4));
	if (t_one_connection(l4, d4, AF_INET, port) ||
	    t_one_connection(l6, d6, AF_INET6, port))
		return -1;
	close(l4);
	close(l6);
	return 0;
}

/*
 * Addresses of the other family.  Kernel TCP: an IPv4 socket refuses an
 * IPv6 address (EAFNOSUPPORT).  An explicit SDP socket takes both, as the
 * OFED SDP stack did (programs for it turn any getaddrinfo() result into an
 * SDP socket by changing only the family): AF_INET_SDP bound to "::" is a
 * dual-stack IPv6 listener that IPv4 clients reach; an IPv4 address given
 * to an IPv6 SDP socket is its v4-mapped form.
 */
static int t_other_family_address(void)
{
	const int explicit_sdp = g_domain == AF_INET_SDP || g_domain == AF_INET6_SDP;
	int d4, d6, l;
	sockaddr_any a;
	socklen_t len;

	family_domains(&d4, &d6);
	l = socket(d4, SOCK_STREAM, 0);
	CHECK(l >= 0, "socket: %s", strerror(errno));
	len = make_loopback(&a, AF_INET6, 0);
	memset(&a.in6.sin6_addr, 0, sizeof a.in6.sin6_addr);	/* :: */
	if (!explicit_sdp) {
		EXPECT_ERR(bind(l, &a.sa, len), EAFNOSUPPORT);
		close(l);
		return 0;
	}
	SYS(bind(l, &a.sa, len));
	SYS(listen(l, 4));
	len = sizeof a;
	SYS(getsockname(l, &a.sa, &len));
	CHECK(a.sa.sa_family == AF_INET6, "getsockname family %d, expected AF_INET6",
	      a.sa.sa_family);
	uint16_t port = addr_port(&a);
	/* An IPv4 client, then an IPv6 SDP socket given an IPv4 address. */
	if (t_one_connection(l, d4, AF_INET, port) ||
	    t_one_connection(l, d6, AF_INET, port))
		return -1;
	close(l);
	return 0;
}

static int t_ephemeral(void)
{
	int fd;
	NEWSOCK(fd);
	sockaddr_any a;
	socklen_t len = make_loopback(&a, g_af, 0);
	SYS(bind(fd, &a.sa, len));
	memset(&a, 0, sizeof a);
	len = sizeof a;
	SYS(getsockname(fd, &a.sa, &len));
	CHECK(a.sa.sa_family == g_af, "getsockname family %d, expected %d", a.sa.sa_family, g_af);
	CHECK(addr_port(&a) != 0, "bind to port 0 left port 0 in getsockname");
	CHECK(is_loopback(&a), "getsockname address is not loopback");
	close(fd);
	return 0;
}

static int t_names(void)
{
	int c, s;
	uint16_t lport;
	if (t_pair_on(g_domain, g_af, &c, &s, &lport) < 0)
		return -1;
	sockaddr_any cs, cp, ss, sp;
	socklen_t l1 = sizeof cs, l2 = sizeof cp, l3 = sizeof ss, l4 = sizeof sp;
	SYS(getsockname(c, &cs.sa, &l1));
	SYS(getpeername(c, &cp.sa, &l2));
	SYS(getsockname(s, &ss.sa, &l3));
	SYS(getpeername(s, &sp.sa, &l4));
	char b1[80], b2[80];
	socklen_t want = g_af == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
	CHECK(l1 == want && l2 == want && l3 == want && l4 == want, "address lengths %u %u %u %u, expected %u",
	      l1, l2, l3, l4, want);
	CHECK(same_addr(&cs, &sp), "client getsockname %s != server getpeername %s",
	      addr_str(&cs, b1, sizeof b1), addr_str(&sp, b2, sizeof b2));
	CHECK(same_addr(&ss, &cp), "server getsockname %s != client getpeername %s",
	      addr_str(&ss, b1, sizeof b1), addr_str(&cp, b2, sizeof b2));
	CHECK(addr_port(&ss) == lport, "server getsockname port %u != listening port %u", addr_port(&ss), lport);
	CHECK(addr_port(&cs) != 0 && addr_port(&cs) != lport, "client port %u", addr_port(&cs));
	CHECK(is_loopback(&cs) && is_loopback(&ss), "addresses are not loopback: %s %s",
	      addr_str(&cs, b1, sizeof b1), addr_str(&ss, b2, sizeof b2));
	close(c);
	close(s);
	return 0;
}

/* This process's threads asleep in epoll_wait now, other than the caller:
 * the library's progress thread (a sanitizer's threads sleep elsewhere). */
static int epoll_sleepers(pid_t *tids, int max)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)) && n < max) {
		pid_t tid = (pid_t)atoi(e->d_name);

		if (tid > 0 && tid != my_tid() && thread_waits_in(tid, "epoll_wait"))
			tids[n++] = tid;
	}
	closedir(d);
	return n;
}

/* Voluntary context switches of the threads named, once none has slept
 * again for `ms` (at most `looks` looks): a thread's switch counts when it
 * sleeps again, after whatever woke it. */
static long settled_switches(const pid_t *tids, int n, int ms, int looks)
{
	long was = -1;

	for (int i = 0; i < looks; i++) {
		long sum = 0;

		for (int k = 0; k < n; k++)
			sum += task_switches(tids[k]);
		if (sum == was)
			break;
		was = sum;
		msleep_poll(ms);
	}
	return was;
}

/* Signal `sig` 200 ms from now (a blocking call is asleep by then) to
 * process `pid`, or with pid 0 to thread `th`. */
struct later_signal {
	pid_t pid;
	pthread_t th;
	int sig;
};

static void *signal_later(void *arg)
{
	const struct later_signal *l = arg;

	msleep_poll(200);
	if (l->pid)
		kill(l->pid, l->sig);
	else
		pthread_kill(l->th, l->sig);
	return NULL;
}

/* A listener in a child process: its pid, and *port.  It takes
 * connections one at a time, echoes one byte on each, and exits once go[1]
 * (ours) is closed.  The listener's progress thread answers a connect
 * whatever the child is doing.  -1 on failure. */
static pid_t listener_child(uint16_t *port, int go[2])
{
	int ready[2];
	char b;

	if (pipe(ready) < 0 || pipe(go) < 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		close(go[1]);
		close(ready[0]);
		int l = t_listen(g_domain, g_af, port, 8);
		if (l < 0 || write(ready[1], port, sizeof *port) != sizeof *port)
			_exit(1);
		for (;;) {
			struct pollfd p[2] = { { l, POLLIN, 0 }, { go[0], POLLIN, 0 } };
			if (poll(p, 2, -1) < 0 || p[1].revents)
				_exit(0);
			int a = accept(l, NULL, NULL);
			if (a < 0)
				_exit(1);
			p[0].fd = a;
			if (poll(p, 2, -1) < 0 || p[1].revents)
				_exit(0);
			if (read(a, &b, 1) == 1 && write(a, &b, 1) != 1)
				_exit(1);
		}
	}
	close(ready[1]);
	close(go[0]);
	if (pid < 0 || read(ready[0], port, sizeof *port) != sizeof *port) {
		close(ready[0]);
		return -1;
	}
	close(ready[0]);
	return pid;
}

/*
 * A blocking connect() to a listener on this host is answered by waking
 * the caller alone: the process's progress thread does not wake for the
 * answer.  The listener's process is stopped until
 * the connect is surely asleep, so the answer cannot come before the wait.
 */
static int t_blocking_connect_wakes_caller_alone(void)
{
	int go[2], c0, c1;
	uint16_t port = 0;

	if (expected_transport() == 0 || expected_transport() == 3 ||
	    getenv("SDP_TEST_SERVER_ADDR"))
		SKIP("shm only: the answer is a message on this host");
	pid_t srv = listener_child(&port, go);
	CHECK(srv > 0, "a listener in a process of its own");
	sockaddr_any a;
	socklen_t len = make_loopback(&a, g_af, port);
	/* A first connection starts the progress thread. */
	NEWSOCK(c0);
	SYS(connect(c0, &a.sa, len));
	if (fd_transport(c0) != 1) {
		kill(srv, SIGKILL);
		waitpid(srv, NULL, 0);
		SKIP("the connection is not over shm");
	}
	/* Then quiet: the threads asleep in epoll_wait (the progress
	 * thread) did not wake for 100 ms. */
	pid_t tids[16];
	int ntids = 0;
	for (int i = 0; i < 50 && !(ntids = epoll_sleepers(tids, 16)); i++)
		msleep_poll(100);
	CHECK(ntids > 0, "no thread of this process sleeps in epoll_wait: no progress thread?");
	long before = settled_switches(tids, ntids, 100, 50);
	SYS(kill(srv, SIGSTOP));
	SYS(waitpid(srv, NULL, WUNTRACED));
	struct later_signal cont = { .pid = srv, .sig = SIGCONT };
	pthread_t th;
	CHECK(pthread_create(&th, NULL, signal_later, &cont) == 0, "pthread_create");
	NEWSOCK(c1);
	int rc = connect(c1, &a.sa, len);
	int e = errno;
	long after = settled_switches(tids, ntids, 50, 20);
	pthread_join(th, NULL);
	close(go[1]);
	close(c0);
	close(c1);
	waitpid(srv, NULL, 0);
	CHECK(rc == 0, "connect to a stopped, then continued listener: %s", strerror(e));
	CHECK(after == before,
	      "the answer to a blocking connect woke the progress thread %ld times",
	      after - before);
	return 0;
}

/*
 * A signal interrupts a blocking connect() as it does TCP's: EINTR, the
 * attempt goes on, and the socket becomes writable once the listener
 * answers (SO_ERROR 0), with bytes both ways.
 */
static int t_blocking_connect_interrupted(void)
{
	int go[2], c;
	uint16_t port = 0;
	struct later_signal usr1 = { .th = pthread_self(), .sig = SIGUSR1 };
	struct sigaction sa = { .sa_handler = on_sigusr1 }, old;
	pthread_t th;
	char b = 'i';

	if (expected_transport() == 0)
		SKIP("kernel TCP answers for a stopped listener itself");
	if (getenv("SDP_TEST_SERVER_ADDR"))
		SKIP("needs the listener on this host");
	pid_t srv = listener_child(&port, go);
	CHECK(srv > 0, "a listener in a process of its own");
	sockaddr_any a;
	socklen_t len = make_loopback(&a, g_af, port);
	SYS(kill(srv, SIGSTOP));
	SYS(waitpid(srv, NULL, WUNTRACED));
	SYS(sigaction(SIGUSR1, &sa, &old));	/* no SA_RESTART */
	NEWSOCK(c);
	CHECK(pthread_create(&th, NULL, signal_later, &usr1) == 0, "pthread_create");
	int rc = connect(c, &a.sa, len);
	int e = errno;
	pthread_join(th, NULL);
	sigaction(SIGUSR1, &old, NULL);
	kill(srv, SIGCONT);
	CHECK(rc < 0 && e == EINTR,
	      "connect to a stopped listener, interrupted: returned %d (%s), not EINTR",
	      rc, rc < 0 ? strerror(e) : "success");
	struct pollfd p = { c, POLLOUT, 0 };
	CHECK(poll(&p, 1, 5000) == 1 && (p.revents & POLLOUT),
	      "the interrupted attempt did not complete once the listener ran (revents 0x%x)",
	      p.revents);
	int err = -1;
	socklen_t el = sizeof err;
	SYS(getsockopt(c, SOL_SOCKET, SO_ERROR, &err, &el));
	CHECK(err == 0, "SO_ERROR %d (%s) after the interrupted connect", err, strerror(err));
	EXPECT_ERR(connect(c, &a.sa, len), EISCONN);
	WRITEN(c, &b, 1);
	b = 0;
	READN(c, &b, 1);
	CHECK(b == 'i', "echo: read %c, not i", b);
	close(go[1]);
	close(c);
	waitpid(srv, NULL, 0);
	return 0;
}

static int t_nonblock_connect(void)
{
	uint16_t port;
	int l = t_listen(g_domain, g_af, &port, 4);
	if (l < 0)
		return -1;
	acc_t a = { l, -1, 0 };
	pthread_t th;
	pthread_create(&th, NULL, acc_thread, &a);
	int fd;
	NEWSOCK(fd);
	set_nonblock(fd, 1);
	sockaddr_any sa;
	socklen_t len = make_loopback(&sa, g_af, port);
	int rc = connect(fd, &sa.sa, len);
	CHECK(rc == 0 || errno == EINPROGRESS, "non-blocking connect returned %d errno %s", rc, strerror(errno));
	int ev = wait_ev(fd, POLLOUT, 5000);
	CHECK(ev & POLLOUT, "no POLLOUT within 5 s of a non-blocking connect (revents 0x%x)", ev);
	CHECK(!(ev & (POLLERR | POLLHUP)), "POLLERR/POLLHUP after non-blocking connect (revents 0x%x)", ev);
	int err = -1;
	socklen_t el = sizeof err;
	SYS(getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el));
	CHECK(err == 0, "SO_ERROR = %d (%s) after a successful connect", err, strerror(err));
	pthread_join(th, NULL);
	CHECK(a.fd >= 0, "accept failed: %s", strerror(a.err));
	T_TRANSPORT(fd);
	T_TRANSPORT(a.fd);
	/* connect again: Linux reports the completed non-blocking connect once
	 * more with 0, after that EISCONN */
	rc = connect(fd, &sa.sa, len);
	CHECK(rc == 0 || errno == EISCONN, "second connect returned %d (%s), expected 0 or EISCONN", rc,
	      rc < 0 ? strerror(errno) : "");
	EXPECT_ERR(connect(fd, &sa.sa, len), EISCONN);
	WRITEN(fd, "n", 1);
	char c;
	READN(a.fd, &c, 1);
	CHECK(c == 'n', "wrong byte");
	close(fd);
	close(a.fd);
	close(l);
	return 0;
}

/*
 * connect() on a connected socket is EISCONN, whatever has changed since:
 * here the switch has learnt meanwhile that the destination (now a plain
 * TCP listener on the same port) takes TCP only.  The socket stays the
 * same connection, carried as before.
 */
static int t_connect_again_after_change(void)
{
	uint16_t port;
	int x, s;
	if (t_pair_on(g_domain, g_af, &x, &s, &port) < 0)
		return -1;	/* also checks the transport; closes the listener */
	sockaddr_any sa;
	socklen_t len = make_env_addr(&sa, g_af, port, "SDP_TEST_CONNECT_ADDR");
	/* A kernel TCP listener on the port now (the system call: not the
	 * library's socket()), and a client that finds it. */
	int raw = (int)syscall(SYS_socket, g_af, SOCK_STREAM, 0), one = 1;
	CHECK(raw >= 0, "socket: %s", strerror(errno));
	setsockopt(raw, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	SYS(bind(raw, &sa.sa, len));
	SYS(listen(raw, 4));
	int y;
	NEWSOCK(y);
	(void)connect(y, &sa.sa, len);	/* SDP refused, TCP answers */
	EXPECT_ERR(connect(x, &sa.sa, len), EISCONN);
	T_TRANSPORT(x);
	WRITEN(x, "k", 1);
	char c = 0;
	READN(s, &c, 1);
	CHECK(c == 'k', "the byte did not reach the accepted side");
	close(y);
	close(raw);
	close(x);
	close(s);
	return 0;
}

static int t_nonblock_recv(void)
{
	int c, s;
	PAIR(c, s);
	set_nonblock(c, 1);
	char buf[8];
	EXPECT_ERR(recv(c, buf, sizeof buf, 0), EAGAIN);
	EXPECT_ERR(read(c, buf, sizeof buf), EAGAIN);
	close(c);
	close(s);
	return 0;
}

static int t_msg_peek(void)
{
	int c, s;
	PAIR(c, s);
	const char msg[] = "peek-a-boo 0123456789";
	WRITEN(s, msg, sizeof msg);
	CHECK(wait_ev(c, POLLIN, 5000) & POLLIN, "no POLLIN within 5 s");
	char b1[64] = { 0 }, b2[64] = { 0 }, b3[64] = { 0 };
	ssize_t n1, n2, n3;
	for (int i = 0; i < 5000; i++) { /* wait until everything is queued */
		n1 = recv(c, b1, sizeof b1, MSG_PEEK);
		if (n1 == (ssize_t)sizeof msg)
			break;
		msleep_poll(1);
	}
	CHECK(n1 == (ssize_t)sizeof msg, "recv(MSG_PEEK) returned %zd, expected %zu", n1, sizeof msg);
	n2 = recv(c, b2, sizeof b2, MSG_PEEK);
	CHECK(n2 == n1 && !memcmp(b1, b2, (size_t)n1), "second MSG_PEEK differs");
	n3 = read(c, b3, sizeof b3);
	CHECK(n3 == n1 && !memcmp(b1, b3, (size_t)n1), "read after MSG_PEEK returned %zd/different bytes", n3);
	CHECK(!memcmp(b3, msg, sizeof msg), "wrong content");
	set_nonblock(c, 1);
	EXPECT_ERR(recv(c, b1, sizeof b1, MSG_PEEK), EAGAIN);
	close(c);
	close(s);
	return 0;
}

typedef struct {
	int fd;
	pid_t reader_tid;
	int err;
} wa_t;

static void *waitall_writer(void *arg)
{
	wa_t *w = arg;
	char piece[1000];
	for (int i = 0; i < 4; i++) {
		memset(piece, 'A' + i, sizeof piece);
		wait_blocked(w->reader_tid, "MSG_WAITALL: the reader waits for more");
		if (send(w->fd, piece, sizeof piece, MSG_NOSIGNAL) != (ssize_t)sizeof piece) {
			w->err = errno ? errno : -1;
			return NULL;
		}
	}
	return NULL;
}

static int t_msg_waitall(void)
{
	int c, s;
	PAIR(c, s);
	wa_t w = { s, my_tid(), 0 };
	pthread_t th;
	pthread_create(&th, NULL, waitall_writer, &w);
	char buf[4000];
	ssize_t n;
	do
		n = recv(c, buf, sizeof buf, MSG_WAITALL);
	while (n < 0 && errno == EINTR);
	pthread_join(th, NULL);
	CHECK(w.err == 0, "writer send failed: %s", strerror(w.err));
	CHECK(n == 4000, "recv(4000, MSG_WAITALL) returned %zd (%s)", n, n < 0 ? strerror(errno) : "short");
	for (int i = 0; i < 4000; i++)
		CHECK(buf[i] == 'A' + i / 1000, "wrong byte at %d", i);
	/* MSG_WAITALL stops early at EOF */
	WRITEN(s, "xyz", 3);
	close(s);
	n = recv(c, buf, 100, MSG_WAITALL);
	CHECK(n == 3, "recv(MSG_WAITALL) over EOF returned %zd, expected 3", n);
	close(c);
	return 0;
}

static int t_msg_dontwait(void)
{
	int c, s;
	PAIR(c, s);
	char buf[64];
	EXPECT_ERR(recv(c, buf, sizeof buf, MSG_DONTWAIT), EAGAIN);
	int fl = fcntl(c, F_GETFL);
	CHECK(!(fl & O_NONBLOCK), "MSG_DONTWAIT changed the file flags");
	WRITEN(s, "dw", 2);
	CHECK(wait_ev(c, POLLIN, 5000) & POLLIN, "no POLLIN");
	ssize_t n = recv(c, buf, sizeof buf, MSG_DONTWAIT);
	CHECK(n == 2 && !memcmp(buf, "dw", 2), "recv(MSG_DONTWAIT) returned %zd", n);
	/* send(MSG_DONTWAIT) on a blocking socket never blocks: fill to EAGAIN */
	static char big[65536];
	size_t total = 0;
	for (;;) {
		n = send(c, big, sizeof big, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0)
			break;
		total += (size_t)n;
		CHECK(total < (512u << 20), "send(MSG_DONTWAIT) accepted 512 MiB without EAGAIN");
	}
	CHECK(errno == EAGAIN, "send(MSG_DONTWAIT) failed with %s, expected EAGAIN", strerror(errno));
	CHECK(total > 0, "send(MSG_DONTWAIT) could not send anything");
	close(c);
	close(s);
	return 0;
}

static int t_recv_after_close(void)
{
	int c, s;
	PAIR(c, s);
	WRITEN(s, "bye", 3);
	close(s);
	char buf[8];
	READN(c, buf, 3);
	CHECK(!memcmp(buf, "bye", 3), "wrong data");
	for (int i = 0; i < 3; i++) {
		ssize_t n = recv(c, buf, sizeof buf, 0);
		CHECK(n == 0, "recv #%d after the peer closed returned %zd (%s), expected 0", i + 1, n,
		      n < 0 ? strerror(errno) : "data");
	}
	int ev = wait_ev(c, POLLIN, 0);
	CHECK(ev & POLLIN, "POLLIN not reported at EOF (revents 0x%x)", ev);
	close(c);
	return 0;
}

/* A program that closes its descriptor with syscall(SYS_close), as
 * Node.js (libuv) does: the connection ends (the peer reads EOF), and the
 * number's next owner, a plain pipe, carries its own bytes. */
static int t_raw_syscall_close(void)
{
	int c, s, p[2], w, ev;
	char b[4];

	PAIR(c, s);
	CHECK(pipe(p) == 0, "pipe: %s", strerror(errno));
	CHECK(syscall(SYS_close, c) == 0, "syscall(SYS_close): %s", strerror(errno));
	/* The pipe's write end on the freed number (the lowest free >= it). */
	w = fcntl(p[1], F_DUPFD, c);
	CHECK(w == c, "F_DUPFD gave %d, not the freed %d", w, c);
	CHECK(write(w, "abc", 3) == 3, "write to the pipe: %s", strerror(errno));
	CHECK(read(p[0], b, 3) == 3 && !memcmp(b, "abc", 3), "the pipe did not carry its bytes");
	close(w);
	ev = wait_ev(s, POLLIN, 5000);
	CHECK(ev & POLLIN, "the peer saw no end of the connection in 5 s (revents 0x%x)", ev);
	CHECK(recv(s, b, sizeof b, 0) == 0, "the peer read no EOF");
	close(p[0]);
	close(p[1]);
	close(s);
	return 0;
}

/* send on a connection whose peer has closed until it fails; returns the
 * errno (EPIPE expected) */
static int send_until_error(int fd, int flags)
{
	for (int i = 0; i < 300; i++) { /* <= ~3 s */
		ssize_t n = send(fd, "z", 1, flags);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == ECONNRESET) /* tolerated: EPIPE must follow */
				continue;
			return errno;
		}
		wait_ev(fd, 0, 10); /* up to 10 ms for the reset (POLLERR/POLLHUP) */
	}
	return 0;
}

static int t_epipe_nosignal(void)
{
	int c, s;
	PAIR(c, s);
	close(s);
	CHECK(wait_ev(c, POLLIN, 5000) & POLLIN, "EOF not seen within 5 s");
	sig_atomic_t before = sigpipe_count;
	int err = send_until_error(c, MSG_NOSIGNAL);
	CHECK(err == EPIPE, "send(MSG_NOSIGNAL) after the peer closed: %s, expected EPIPE",
	      err ? strerror(err) : "never failed");
	CHECK(sigpipe_count == before, "SIGPIPE delivered despite MSG_NOSIGNAL");
	close(c);
	return 0;
}

static int t_sigpipe(void)
{
	int c, s;
	PAIR(c, s);
	close(s);
	CHECK(wait_ev(c, POLLIN, 5000) & POLLIN, "EOF not seen within 5 s");
	sig_atomic_t before = sigpipe_count;
	int err = send_until_error(c, 0);
	CHECK(err == EPIPE, "send after the peer closed: %s, expected EPIPE", err ? strerror(err) : "never failed");
	CHECK(sigpipe_count > before, "SIGPIPE handler did not run on EPIPE without MSG_NOSIGNAL");
	before = sigpipe_count;
	ssize_t n = write(c, "w", 1);
	CHECK(n < 0 && errno == EPIPE, "write() returned %zd (%s), expected EPIPE", n,
	      n < 0 ? strerror(errno) : "success");
	CHECK(sigpipe_count > before, "SIGPIPE not delivered for write()");
	close(c);
	return 0;
}


#endif /* SEMANTICS_CHECKS_CONN_H */
