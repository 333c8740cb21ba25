/* SPDX-License-Identifier: MIT */
/*
 * sdp_fork — connections across fork(), as programs use them:
 *   1. daemonizing: the process that made the connection forks and exits
 *      (exit() runs libsdp's exit flush), the grandchild goes on writing;
 *      the peer gets every byte, checksummed, then EOF;
 *   2. fork-per-connection server: the parent accepts, forks, closes its
 *      copy; the child serves the connection (request -> response);
 *   3. both processes use one connection, one after the other: the
 *      parent writes, its child writes, the parent writes again; the peer
 *      reads the three in that order (over SDP the connection is handed
 *      over between the processes each time);
 *   4. posix_spawn and vfork+exec with a connection open;
 *   6. a child writes a stream into a connection while its parent reads
 *      the other direction from it, at once (rsync's daemon);
 *   7. a child blocked in poll(POLLOUT) on a full connection, its parent
 *      still holding a copy, learns at once when the peer's process dies
 *      (kill -9): POLLOUT, then send fails (ECONNRESET or EPIPE), as
 *      with TCP;
 *   5. pre-forked server: 3 workers accept from one listener inherited
 *      across fork (epoll, non-blocking: thundering herd, EAGAIN for the
 *      losers), then 2 workers in blocking accept(); many clients at once,
 *      checksummed echo, and every accepted connection is over SDP when the
 *      client's is (SDP_CONN_TRANSPORT).
 * Usage: sdp_fork --family sdp|sdp6|tcp|tcp6
 */
#include "itest_common.h"

#include <spawn.h>
#include <sys/epoll.h>

extern char **environ;

static const char msg[] = "hello from the grandchild, after its parent exited";

static void pair(int *c, int *s)
{
	uint16_t port;
	int l = make_listener(&port, 4);

	*c = connect_to(port);
	*s = accept_one(l);
	close(l);
}

static void case_daemonize(void)
{
	int c, s;
	pid_t mid;
	char buf[256];
	size_t got = 0;
	ssize_t n;

	pair(&c, &s);
	mid = fork();
	if (mid < 0)
		DIE_ERRNO("fork");
	if (mid == 0) {
		close(s);
		if (fork() == 0) {
			/* Wait until the middle process is gone. */
			while (getppid() != 1)
				poll(NULL, 0, 1);
			n = write(c, msg, sizeof(msg));
			close(c);
			_exit(n == (ssize_t)sizeof(msg) ? 0 : 3);
		}
		exit(0);	/* libsdp's exit flush must leave c alone */
	}
	close(c);
	if (wait_child(mid, "middle process"))
		die("case 1: middle process failed");
	watchdog_arm(10, "case 1: daemon's data or EOF never came");
	while ((n = read(s, buf + got, sizeof(buf) - got)) > 0)
		got += (size_t)n;
	watchdog_disarm();
	if (n < 0)
		DIE_ERRNO("case 1: read");
	if (got != sizeof(msg) || memcmp(buf, msg, sizeof(msg)))
		die("case 1: got %zu bytes, expected the %zu-byte message", got,
		    sizeof(msg));
	close(s);
	info("ok: case 1: daemonized grandchild's data arrived, then EOF");
}

static void case_fork_per_connection(void)
{
	int c, s, st;
	pid_t ch;
	char req[4], rsp[8];

	pair(&c, &s);
	ch = fork();
	if (ch < 0)
		DIE_ERRNO("fork");
	if (ch == 0) {
		close(c);
		read_full(s, req, sizeof(req), "child read");
		write_full(s, "response", 8, "child write");
		close(s);
		exit(0);
	}
	close(s);	/* the parent gives the connection to the child */
	write_full(c, "req!", 4, "client write");
	read_full(c, rsp, sizeof(rsp), "client read");
	if (memcmp(rsp, "response", 8))
		die("case 2: wrong response");
	if (waitpid(ch, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
		die("case 2: child failed (status 0x%x)", st);
	close(c);
	info("ok: case 2: fork-per-connection served by the child");
}

static void case_both_use(void)
{
	int c, s, st;
	pid_t ch;
	char b[3];

	pair(&c, &s);
	write_full(c, "p", 1, "parent write");	/* the parent uses it */
	ch = fork();
	if (ch < 0)
		DIE_ERRNO("fork");
	if (ch == 0) {
		int one = 1;
		ssize_t n;

		/* An option set by the child moves the connection to it
		 * first, as its send would (the option reaches the engine's
		 * live state, not a stale copy). */
		if (setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)))
			_exit(3);
		n = send(c, "c", 1, MSG_NOSIGNAL);
		_exit(n == 1 ? 0 : 4);
	}
	if (waitpid(ch, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
		die("case 3: child's send failed (status 0x%x)", st);
	write_full(c, "q", 1, "parent write");	/* and the parent again */
	if (read_full(s, b, 3, "server read") != 3 || memcmp(b, "pcq", 3))
		die("case 3: the server read \"%.3s\", expected \"pcq\"", b);
	close(c);
	close(s);
	info("ok: case 3: two processes write one connection in turn");
}

/* Case 6: one connection, two processes at once: a forked child writes a
 * stream into it while the parent reads the other direction from it (the
 * way rsync's daemon splits a connection), both sides checked against the
 * pattern.  The server end, in this process, echoes nothing: one thread
 * sends its stream, the main thread checks what the child wrote. */
#define RW_BYTES (8u << 20)

struct rw_arg {
	int fd;
	const unsigned char *pat;
	int read;	/* else write */
};

static void *rw_thread(void *p)
{
	struct rw_arg *a = p;
	unsigned char buf[65536];
	uint64_t off = 0;

	while (off < RW_BYTES) {
		size_t n = RW_BYTES - off < sizeof(buf) ? RW_BYTES - off :
			   sizeof(buf);

		if (a->read) {
			n = read_full(a->fd, buf, n, "rw read");
			if (!n)
				die("case 6: EOF after %llu bytes",
				    (unsigned long long)off);
			pattern_check(a->pat, off, buf, n, "case 6");
		} else {
			write_full(a->fd, pattern_at(a->pat, off), n,
				   "rw write");
		}
		off += n;
	}
	return NULL;
}

static void case_reader_writer(void)
{
	unsigned char *pat_up = pattern_new(61), *pat_down = pattern_new(62);
	struct rw_arg srv_tx, srv_rx, cli_rx;
	pthread_t t_srv_tx, t_cli_rx;
	int c, s;
	pid_t ch;

	pair(&c, &s);
	ch = fork();
	if (ch < 0)
		DIE_ERRNO("fork");
	if (ch == 0) {	/* the writer */
		struct rw_arg w = { c, pat_up, 0 };

		close(s);
		rw_thread(&w);
		_exit(0);
	}
	srv_tx = (struct rw_arg){ s, pat_down, 0 };
	cli_rx = (struct rw_arg){ c, pat_down, 1 };
	srv_rx = (struct rw_arg){ s, pat_up, 1 };
	if (pthread_create(&t_srv_tx, NULL, rw_thread, &srv_tx) ||
	    pthread_create(&t_cli_rx, NULL, rw_thread, &cli_rx))
		die("pthread_create failed");
	rw_thread(&srv_rx);	/* what the child wrote, in order */
	pthread_join(t_srv_tx, NULL);
	pthread_join(t_cli_rx, NULL);	/* what the server sent, in order */
	wait_child(ch, "case 6 writer");
	close(c);
	close(s);
	free(pat_up);
	free(pat_down);
	info("ok: case 6: a child writes while its parent reads one connection");
}

static void case_writer_peer_dies(void)
{
	uint16_t port;
	int l = make_listener(&port, 4), c, p[2];
	pid_t peer, w;
	char b;

	if (pipe(p) < 0)
		DIE_ERRNO("pipe");
	peer = fork();
	if (peer < 0)
		DIE_ERRNO("fork");
	if (peer == 0) {	/* accepts, never reads, dies by SIGKILL */
		int s = accept_one(l);

		for (;;)
			pause();
		(void)s;
	}
	close(l);
	c = connect_to(port);
	w = fork();
	if (w < 0)
		DIE_ERRNO("fork");
	if (w == 0) {	/* the writer; the parent keeps its copy of c */
		static char buf[65536];
		struct pollfd pf = { .fd = c, .events = POLLOUT };
		ssize_t n;

		set_nonblock(c, 1);
		while ((n = send(c, buf, sizeof(buf), MSG_NOSIGNAL)) > 0)
			;
		if (errno != EAGAIN)
			DIE_ERRNO("case 7: filling the connection");
		if (write(p[1], "r", 1) != 1)
			DIE_ERRNO("case 7: pipe");
		if (poll(&pf, 1, 10000) != 1)
			die("case 7: the writer was not woken by the peer's death");
		/* TCP: POLLOUT|POLLERR|POLLHUP at once.  SDP: POLLOUT and
		 * POLLHUP (POLLERR once the last copy goes), possibly the
		 * first an instant before the other: writable is the point. */
		if (!(pf.revents & POLLOUT))
			die("case 7: poll revents 0x%x lack POLLOUT",
			    pf.revents);
		n = send(c, "x", 1, MSG_NOSIGNAL);
		if (n != -1 || (errno != ECONNRESET && errno != EPIPE))
			die("case 7: send after the peer died returned %zd (%s)",
			    n, n < 0 ? strerror(errno) : "sent");
		_exit(0);
	}
	if (read(p[0], &b, 1) != 1)
		die("case 7: the writer never filled the connection");
	kill(peer, SIGKILL);
	waitpid(peer, NULL, 0);
	if (wait_child(w, "case 7 writer"))
		die("case 7: the writer failed");
	close(c);
	close(p[0]);
	close(p[1]);
	info("ok: case 7: a forked writer blocked on a full connection is "
	     "woken when the peer dies");
}

/* posix_spawn (clone + exec) and vfork while a connection is open: the
 * child execs a program that knows nothing of it; the parent carries on. */
static void case_spawn(void)
{
	char *argv[] = { "true", NULL };
	int c, s, st;
	pid_t ch;
	char b[4];

	pair(&c, &s);
	if (posix_spawnp(&ch, "true", NULL, NULL, argv, environ) != 0)
		die("case 4: posix_spawnp failed");
	if (waitpid(ch, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
		die("case 4: spawned child failed (status 0x%x)", st);
	ch = vfork();
	if (ch < 0)
		DIE_ERRNO("vfork");
	if (ch == 0) {
		execlp("true", "true", (char *)NULL);
		_exit(127);
	}
	if (waitpid(ch, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
		die("case 4: vforked child failed (status 0x%x)", st);
	write_full(c, "ping", 4, "case 4: client write");
	read_full(s, b, 4, "case 4: server read");
	write_full(s, b, 4, "case 4: server write");
	read_full(c, b, 4, "case 4: client read");
	if (memcmp(b, "ping", 4))
		die("case 4: wrong echo");
	close(c);
	if (read(s, b, 1) != 0)
		die("case 4: no EOF after the client closed");
	close(s);
	info("ok: case 4: posix_spawn and vfork+exec leave the connection working");
}

/* ---- case 5: pre-forked workers on one inherited listener ----------------- */

#define PF_CLIENTS 48
#define PF_THREADS 8
#define PF_MAXLEN 65536

/* One connection: [u32 length][bytes] in, the same bytes back; the worker
 * then reports its index and the connection's transport on the pipe. */
static void pf_serve(int c, int idx, int report)
{
	static unsigned char buf[PF_MAXLEN];
	uint32_t n;
	char rec[2];

	read_full(c, &n, sizeof(n), "worker read length");
	if (n > PF_MAXLEN)
		die("case 5: worker %d: length %u", idx, n);
	read_full(c, buf, n, "worker read");
	write_full(c, buf, n, "worker write");
	rec[0] = (char)('0' + idx);
	rec[1] = fd_over_sdp(c) ? 'S' : 'T';
	if (write(report, rec, 2) != 2)
		DIE_ERRNO("worker report");
	close(c);
}

static void pf_worker_epoll(int l, int idx, int report)
{
	struct epoll_event ev = { .events = EPOLLIN }, out;
	int ep = epoll_create1(EPOLL_CLOEXEC);

	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev) < 0)
		DIE_ERRNO("worker epoll");
	for (;;) {
		int n = epoll_wait(ep, &out, 1, -1), c;

		if (n < 0 && errno == EINTR)
			continue;
		if (n != 1)
			DIE_ERRNO("worker epoll_wait");
		/* Like nginx: accept until EAGAIN; other workers may have
		 * taken the connection that woke us. */
		while ((c = accept(l, NULL, NULL)) >= 0) {
			set_nonblock(c, 0);
			pf_serve(c, idx, report);
		}
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			DIE_ERRNO("worker accept");
	}
}

static void pf_worker_blocking(int l, int idx, int report)
{
	for (;;) {
		int c = accept(l, NULL, NULL);

		if (c < 0 && errno == EINTR)
			continue;
		if (c < 0)
			DIE_ERRNO("worker blocking accept");
		pf_serve(c, idx, report);
	}
}

struct pf_client {
	uint16_t port;
	int first, count;
	int sdp;	/* out: connections that were SDP */
};

static void *pf_client_thread(void *arg)
{
	struct pf_client *a = arg;
	static __thread unsigned char out[PF_MAXLEN], back[PF_MAXLEN];

	for (int i = a->first; i < a->first + a->count; i++) {
		prng_t r;
		uint32_t n;
		int c = connect_to(a->port);

		prng_seed(&r, 5000 + (uint64_t)i);
		n = (uint32_t)prng_range(&r, 1, PF_MAXLEN);
		prng_fill(&r, out, n);
		a->sdp += fd_over_sdp(c);
		write_full(c, &n, sizeof(n), "client write length");
		write_full(c, out, n, "client write");
		read_full(c, back, n, "client read");
		if (csum_buf(back, n) != csum_buf(out, n))
			die("case 5: connection %d: echo checksum differs", i);
		close(c);
	}
	return NULL;
}

static void pf_run(int nworkers, int blocking)
{
	struct pf_client cl[PF_THREADS];
	pthread_t th[PF_THREADS];
	pid_t w[4];
	int p[2], served[4] = { 0 }, nsdp = 0, csdp = 0, l, i;
	uint16_t port;
	char rec[2];

	l = make_listener(&port, 64);
	if (!blocking)
		set_nonblock(l, 1);
	if (pipe(p) < 0)
		DIE_ERRNO("pipe");
	for (i = 0; i < nworkers; i++) {
		w[i] = fork();
		if (w[i] < 0)
			DIE_ERRNO("fork");
		if (w[i] == 0) {
			close(p[0]);
			if (blocking)
				pf_worker_blocking(l, i, p[1]);
			pf_worker_epoll(l, i, p[1]);
		}
	}
	close(p[1]);
	close(l);	/* the workers hold it: the master only forks */
	watchdog_arm(60, "case 5: pre-forked workers stalled");
	for (i = 0; i < PF_THREADS; i++) {
		cl[i] = (struct pf_client){ port, i * (PF_CLIENTS / PF_THREADS),
					    PF_CLIENTS / PF_THREADS, 0 };
		if (pthread_create(&th[i], NULL, pf_client_thread, &cl[i]))
			die("case 5: pthread_create");
	}
	for (i = 0; i < PF_THREADS; i++) {
		pthread_join(th[i], NULL);
		csdp += cl[i].sdp;
	}
	for (i = 0; i < PF_CLIENTS; i++) {
		if (read(p[0], rec, 2) != 2)	/* pipe writes of 2 are atomic */
			DIE_ERRNO("read worker reports");
		if (rec[0] < '0' || rec[0] >= '0' + nworkers)
			die("case 5: bad report");
		served[rec[0] - '0']++;
		nsdp += rec[1] == 'S';
	}
	watchdog_disarm();
	for (i = 0; i < nworkers; i++) {
		kill(w[i], SIGKILL);
		waitpid(w[i], NULL, 0);
	}
	close(p[0]);
	if (nsdp != csdp)
		die("case 5: %d of %d client connections were SDP but the "
		    "workers accepted %d over SDP", csdp, PF_CLIENTS, nsdp);
	if (nsdp != (expect_sdp() ? PF_CLIENTS : 0))
		die("case 5: %d of %d connections over SDP, expected %s", nsdp,
		    PF_CLIENTS, expect_sdp() ? "all" : "none");
	info("ok: case 5: %d %s workers served %d checksummed echoes "
	     "(%d/%d/%d/%d each), %d over SDP", nworkers,
	     blocking ? "blocking" : "epoll", PF_CLIENTS, served[0], served[1],
	     served[2], served[3], nsdp);
}

int main(int argc, char **argv)
{
	g_prog = "sdp_fork";
	if (argc != 3 || strcmp(argv[1], "--family") || set_family(argv[2])) {
		fprintf(stderr, "usage: sdp_fork %s\n", family_usage());
		return 2;
	}
	case_daemonize();
	case_fork_per_connection();
	case_both_use();
	watchdog_arm(120, "case 6: two processes on one connection");
	case_reader_writer();
	watchdog_disarm();
	watchdog_arm(60, "case 7: a writer and a dying peer");
	case_writer_peer_dies();
	watchdog_disarm();
	case_spawn();
	pf_run(3, 0);
	pf_run(2, 1);
	info("PASS");
	return 0;
}
