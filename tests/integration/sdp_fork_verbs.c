/* SPDX-License-Identifier: MIT */
/*
 * sdp_fork_verbs — fork() after the parent used the verbs transport (RDMA
 * resources do not follow fork()):
 *   1. the child opens its own connection to the parent's listener and
 *      moves checksummed data both ways (the child re-opens the transport);
 *   2. the child touches a connection it inherited while the parent owns
 *      it: EBADFD, and the parent's stream goes on unharmed;
 *   3. the parent closes its copy, the child (now the only holder) uses the
 *      inherited connection: a clean ECONNRESET/EPIPE/EBADFD or EOF within a
 *      bounded time, never a hang or a crash; the peer sees the end too;
 *   4. the parent exits without closing (a daemonizing fork): the child's
 *      inherited connection fails the same way;
 *   5. afterwards the parent's connections made before those forks still
 *      carry data both ways: the children destroyed nothing of the parent's;
 *   6. a pre-forking server on the socket switch's "both" listener (plain
 *      AF_INET under sdp_run): a verbs listener cannot be shared, so fork()
 *      turns it into a TCP listener in parent and children.  fork() must
 *      return (it once deadlocked in the parent: the switch ran inside a
 *      fork handler while the stats lock was held), two workers accept, and
 *      clients that try SDP first get their checksummed echo over TCP.
 * Over shm (a transport that shares QPs across fork) cases 3 and 4 would
 * work instead, so this program runs only with SDP_TRANSPORT=verbs (exit 77
 * otherwise).  Usage: sdp_fork_verbs --family sdp|sdp6
 */
#include "itest_common.h"

static uint16_t lport;
static int lfd;

static void pair(int *c, int *s)
{
	*c = connect_to(lport);
	*s = accept_one(lfd);
}

/* n bytes of a seeded stream over a -> b, checked at b; in 32 KiB steps
 * (one thread: each step fits in the connection's buffers). */
static void carry(int a, int b, size_t n, uint64_t seed, const char *what)
{
	unsigned char out[32768], in[32768];
	size_t k;
	prng_t r;

	prng_seed(&r, seed);
	for (; n; n -= k) {
		k = n < sizeof(out) ? n : sizeof(out);
		prng_fill(&r, out, k);
		write_full(a, out, k, what);
		read_full(b, in, k, what);
		if (memcmp(out, in, k))
			die("%s: data differs", what);
	}
}

/* The inherited connection must fail cleanly: an error or EOF, no data. */
static int fails_cleanly(int fd, const char *what)
{
	char b[16];
	ssize_t n;

	n = send(fd, "x", 1, MSG_NOSIGNAL);
	if (n == 1) {
		/* Accepted into the send queue: the read must show the end. */
		n = recv(fd, b, sizeof(b), 0);
		if (n > 0) {
			fprintf(stderr, "%s: recv got %zd bytes\n", what, n);
			return 0;
		}
	}
	if (n < 0 && errno != ECONNRESET && errno != EPIPE &&
	    errno != EBADFD && errno != ENOTCONN) {
		fprintf(stderr, "%s: %s\n", what, strerror(errno));
		return 0;
	}
	n = recv(fd, b, sizeof(b), 0);
	if (n > 0 || (n < 0 && errno != ECONNRESET && errno != EPIPE &&
		      errno != EBADFD && errno != ENOTCONN)) {
		fprintf(stderr, "%s: second recv %zd (%s)\n", what, n,
			n < 0 ? strerror(errno) : "data");
		return 0;
	}
	return close(fd) == 0 || errno == ECONNRESET;
}

static void case_child_connects(void)
{
	pid_t ch = fork();
	int st, s, c;

	if (ch < 0)
		DIE_ERRNO("fork");
	if (ch == 0) {
		alarm(20);	/* hang guard (no watchdog thread after fork) */
		c = connect_to(lport);
		write_full(c, "C", 1, "child hello");
		{
			unsigned char in[1 << 16];
			prng_t r;
			unsigned char out[1 << 16];

			read_full(c, in, sizeof(in), "child read");
			prng_seed(&r, 11);
			prng_fill(&r, out, sizeof(out));
			if (memcmp(in, out, sizeof(in)))
				_exit(6);
			write_full(c, in, sizeof(in), "child echo");
		}
		close(c);
		_exit(0);
	}
	s = accept_one(lfd);
	{
		unsigned char out[1 << 16], in[1 << 16], h;
		prng_t r;

		read_full(s, &h, 1, "parent read hello");
		if (h != 'C')
			die("case 1: hello '%c'", h);
		prng_seed(&r, 11);
		prng_fill(&r, out, sizeof(out));
		write_full(s, out, sizeof(out), "parent write");
		read_full(s, in, sizeof(in), "parent read echo");
		if (memcmp(in, out, sizeof(in)))
			die("case 1: echo differs");
	}
	if (waitpid(ch, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
		die("case 1: child failed (status 0x%x)", st);
	close(s);
	info("ok: case 1: a child opened its own verbs connection (64 KiB echoed)");
}

static void case_second_user(int c, int s)
{
	pid_t ch = fork();
	int st;

	if (ch < 0)
		DIE_ERRNO("fork");
	if (ch == 0) {
		ssize_t n = send(c, "c", 1, MSG_NOSIGNAL);

		_exit(n < 0 && errno == EBADFD ? 0 : 4);
	}
	if (waitpid(ch, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
		die("case 2: child's send: status 0x%x (must fail with EBADFD)", st);
	carry(c, s, 1 << 20, 21, "case 2: parent -> peer after the child");
	carry(s, c, 1 << 20, 22, "case 2: peer -> parent after the child");
	info("ok: case 2: a second user gets EBADFD, the owner's stream goes on");
}

static void case_parent_closes(void)
{
	int c, s, st, p[2];
	pid_t ch;
	char b;

	pair(&c, &s);
	carry(c, s, 4096, 31, "case 3: before fork");
	if (pipe(p) < 0)
		DIE_ERRNO("pipe");
	ch = fork();
	if (ch < 0)
		DIE_ERRNO("fork");
	if (ch == 0) {
		close(p[1]);
		close(s);
		if (read(p[0], &b, 1) != 1)	/* the parent closed c */
			_exit(7);
		alarm(10);	/* hang guard: SIGALRM fails the case */
		_exit(fails_cleanly(c, "case 3 child") ? 0 : 5);
	}
	close(p[0]);
	close(c);	/* the child is the only holder now */
	if (write(p[1], "g", 1) != 1)
		DIE_ERRNO("write pipe");
	close(p[1]);
	watchdog_arm(20, "case 3: child or peer hung");
	if (waitpid(ch, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
		die("case 3: child: status 0x%x (must fail cleanly)", st);
	/* The peer learns that the connection is gone. */
	if (!fails_cleanly(s, "case 3 peer"))
		die("case 3: the peer did not see the end");
	watchdog_disarm();
	info("ok: case 3: inherited connection fails cleanly in the child");
}

/* A daemonizing process: it makes a connection, forks and exits without
 * closing; the grandchild inherits a connection whose QP died with it. */
static void case_parent_exits(void)
{
	int st, s, p[2];
	pid_t mid;
	char v = 0, in[4096];

	if (pipe(p) < 0)
		DIE_ERRNO("pipe");
	mid = fork();
	if (mid < 0)
		DIE_ERRNO("fork");
	if (mid == 0) {
		pid_t me = getpid();
		int c;

		alarm(20);
		close(lfd);
		close(p[0]);
		c = connect_to(lport);
		memset(in, 'm', sizeof(in));
		write_full(c, in, sizeof(in), "case 4: middle write");
		if (fork() == 0) {
			while (kill(me, 0) == 0)	/* until it is reaped */
				poll(NULL, 0, 1);
			alarm(10);
			v = fails_cleanly(c, "case 4 grandchild") ? 'y' : 'n';
			_exit(write(p[1], &v, 1) == 1 ? 0 : 1);
		}
		exit(0);	/* without closing c; libsdp's exit runs */
	}
	close(p[1]);
	s = accept_one(lfd);
	read_full(s, in, sizeof(in), "case 4: peer read");
	if (in[0] != 'm' || in[sizeof(in) - 1] != 'm')
		die("case 4: wrong data from the middle process");
	if (waitpid(mid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
		die("case 4: middle process failed (status 0x%x)", st);
	/* The grandchild's verdict (only init can reap it): EOF = it died. */
	watchdog_arm(20, "case 4: the grandchild or the peer hung");
	if (read(p[0], &v, 1) != 1 || v != 'y')
		die("case 4: the grandchild's inherited connection did not fail "
		    "cleanly (%c)", v ? v : '-');
	close(p[0]);
	if (!fails_cleanly(s, "case 4 peer"))
		die("case 4: the peer did not see the end");
	watchdog_disarm();
	info("ok: case 4: daemonized child's inherited connection fails cleanly");
}

/* Case 6: workers on an inherited "both" listener (see the header). */
static void case_prefork_both(void)
{
	enum { WORKERS = 2, BYTES = 1 << 16 };
	int saved_domain = g_domain, saved_af = g_af;
	pid_t w[WORKERS];
	uint16_t port;
	int l, i, st;

	if (set_family(g_af == AF_INET6 ? "tcp6" : "tcp"))
		die("case 6: no plain family");
	/* A verbs listener cannot be shared across processes: at fork() it
	 * becomes the plain TCP listener (socket/switch.c), so every
	 * connection of this case is kernel TCP, checked below. */
	g_mixed_transports = 1;
	l = make_listener(&port, 16);
	watchdog_arm(60, "case 6: fork() or a worker hung");
	for (i = 0; i < WORKERS; i++) {
		w[i] = fork();
		if (w[i] < 0)
			DIE_ERRNO("fork");
		if (w[i] == 0) {
			unsigned char buf[BYTES];
			int s;

			alarm(40);	/* no watchdog thread after fork */
			s = accept_one(l);
			if (read_full(s, buf, sizeof(buf), "case 6 worker "
				      "read") != sizeof(buf))
				_exit(5);
			write_full(s, buf, sizeof(buf), "case 6 worker echo");
			close(s);
			_exit(0);
		}
	}
	close(l);	/* the workers' now */
	for (i = 0; i < WORKERS; i++) {
		unsigned char out[BYTES], in[BYTES];
		prng_t r;
		int c = connect_to(port);

		if (fd_transport(c) != 0)
			die("case 6: client %d is over %s, expected kernel TCP "
			    "(the listener is TCP only after fork)", i,
			    transport_name(fd_transport(c)));
		prng_seed(&r, 60 + (uint64_t)i);
		prng_fill(&r, out, sizeof(out));
		write_full(c, out, sizeof(out), "case 6 client write");
		if (read_full(c, in, sizeof(in), "case 6 client read") !=
		    sizeof(in) || memcmp(in, out, sizeof(in)))
			die("case 6: echo %d differs", i);
		close(c);
	}
	for (i = 0; i < WORKERS; i++)
		if (waitpid(w[i], &st, 0) < 0 || !WIFEXITED(st) ||
		    WEXITSTATUS(st))
			die("case 6: worker %d failed (status 0x%x)", i, st);
	watchdog_disarm();
	g_mixed_transports = 0;
	g_domain = saved_domain;
	g_af = saved_af;
	info("ok: case 6: pre-forked workers on a \"both\" listener served "
	     "%d clients (64 KiB echoed each)", WORKERS);
}

int main(int argc, char **argv)
{
	const char *tp = getenv("SDP_TRANSPORT");
	int c, s;

	g_prog = "sdp_fork_verbs";
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--family") && i + 1 < argc) {
			if (set_family(argv[++i]))
				die("bad family '%s'", argv[i]);
		} else {
			fprintf(stderr, "usage: sdp_fork_verbs %s\n", family_usage());
			return 2;
		}
	}
	if (!is_sdp() || !tp || strcmp(tp, "verbs")) {
		info("needs SDP_TRANSPORT=verbs and an SDP family: skipped");
		return 77;
	}
	signal(SIGPIPE, SIG_IGN);
	lfd = make_listener(&lport, 16);
	pair(&c, &s);		/* the parent's own, used throughout */
	carry(c, s, 1 << 16, 1, "warm-up");
	case_child_connects();
	case_second_user(c, s);
	case_parent_closes();
	case_parent_exits();
	carry(c, s, 4 << 20, 51, "case 5: parent -> peer");
	carry(s, c, 4 << 20, 52, "case 5: peer -> parent");
	info("ok: case 5: the parent's connection still carries 4 MiB each way");
	case_prefork_both();
	close(c);
	close(s);
	close(lfd);
	info("PASS");
	return 0;
}
