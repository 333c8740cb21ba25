/* SPDX-License-Identifier: MIT */
/*
 * sdp_forkserver — a fork-per-connection server under load, the way inetd,
 * sshd, rsync and git daemons run: the parent accepts (blocking accept,
 * select, poll or epoll), forks a child per connection and closes its copy
 * at once, a little later, or never (until the end); the child reads one
 * request and answers it.  Several client processes connect at once and
 * send their request right after connect(), before the child exists.
 * Every request and answer carries a checksum; a lost, duplicated or
 * corrupt byte fails, and a hang is caught by the watchdog.
 *
 * With --exec the child execs this program on the connection, inetd-style
 * (sshd, git daemon): the socket on stdin and stdout, the original closed,
 * and the new image answers the request there.
 *
 * Usage: sdp_forkserver --family F [--accept block|select|poll|epoll]
 *          [--parent-close now|later|never] [--clients N] [--conns N]
 *          [--max-req BYTES] [--greeting] [--exec]
 *        sdp_forkserver --serve-stdio MAX_REQ GREETING   (internal)
 */
#include "itest_common.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/select.h>

enum { ACC_BLOCK, ACC_SELECT, ACC_POLL, ACC_EPOLL };
enum { CLOSE_NOW, CLOSE_LATER, CLOSE_NEVER };

static int acc_mode = ACC_EPOLL, close_mode = CLOSE_NOW;
static int nclients = 6;
static long nconns = 600;
static size_t max_req = 64 * 1024;
/* --greeting: the child writes a greeting before it reads the request, and
 * the client reads it after sending its own (rsync's daemon protocol: both
 * sides write first). */
static int greeting;
static int exec_mode;
static const char greet[8] = "@SDPD:1\n";

/* Request: u32 length, u64 seed, payload(length) generated from the seed.
 * Answer:  u64 checksum of the payload the child read, u32 length, then the
 * payload again, so both directions move verified bytes. */
struct req_hdr {
	uint32_t len;
	uint64_t seed;
} __attribute__((packed));

static void serve_child(int s, int out)
{
	struct req_hdr h;
	unsigned char *buf;
	uint64_t sum;
	prng_t r;

	if (greeting)
		write_full(out, greet, sizeof(greet), "child: greeting");
	if (read_full(s, &h, sizeof(h), "child: request header") != sizeof(h))
		die("child: EOF before the request header");
	if (h.len > max_req)
		die("child: request length %u", h.len);
	buf = malloc(h.len + 1);
	if (!buf)
		die("child: out of memory");
	if (read_full(s, buf, h.len, "child: request") != h.len)
		die("child: EOF inside a %u-byte request", h.len);
	/* Check what arrived against what the client generated. */
	{
		unsigned char *exp = malloc(h.len + 1);

		prng_seed(&r, h.seed);
		prng_fill(&r, exp, h.len);
		if (memcmp(exp, buf, h.len))
			die("child: request of %u bytes (seed %llu) corrupt",
			    h.len, (unsigned long long)h.seed);
		free(exp);
	}
	sum = csum_buf(buf, h.len);
	write_full(out, &sum, sizeof(sum), "child: answer checksum");
	write_full(out, &h.len, sizeof(h.len), "child: answer length");
	write_full(out, buf, h.len, "child: answer");
	free(buf);
	close(s);
	if (out != s)
		close(out);
}

/* --exec: the child becomes a new image serving on stdin/stdout. */
static void exec_child(int s)
{
	char req[32], gr[2] = { greeting ? '1' : '0', 0 };

	if (dup2(s, 0) != 0 || dup2(s, 1) != 1)
		DIE_ERRNO("child: dup2");
	if (s > 1)
		close(s);
	snprintf(req, sizeof(req), "%zu", max_req);
	execl("/proc/self/exe", "sdp_forkserver", "--serve-stdio", req, gr,
	      (char *)NULL);
	DIE_ERRNO("child: execl(/proc/self/exe)");
}

static void client_proc(uint16_t port, int idx, long n)
{
	unsigned char *req = malloc(sizeof(struct req_hdr) + max_req);
	unsigned char *ans = malloc(max_req + 1);
	prng_t sizes;
	long i;

	if (!req || !ans)
		die("client: out of memory");
	prng_seed(&sizes, 1000 + (uint64_t)idx);
	for (i = 0; i < n; i++) {
		struct req_hdr h;
		uint64_t sum;
		uint32_t len;
		prng_t r;
		int c;

		/* Mostly small requests, some large enough for ZCopy. */
		h.len = (uint32_t)(prng_range(&sizes, 0, 9) == 0 ?
				   prng_range(&sizes, 1, max_req) :
				   prng_range(&sizes, 1, 600));
		h.seed = (uint64_t)idx << 32 | (uint64_t)i;
		memcpy(req, &h, sizeof(h));
		prng_seed(&r, h.seed);
		prng_fill(&r, req + sizeof(h), h.len);
		c = connect_to(port);
		write_full(c, req, sizeof(h) + h.len, "client: request");
		if (greeting) {
			char g[sizeof(greet)];

			if (read_full(c, g, sizeof(g), "client: greeting") !=
			    sizeof(g) || memcmp(g, greet, sizeof(g)))
				die("client %d: connection %ld: no greeting",
				    idx, i);
		}
		if (read_full(c, &sum, sizeof(sum), "client: answer") != sizeof(sum) ||
		    read_full(c, &len, sizeof(len), "client: answer") != sizeof(len))
			die("client %d: connection %ld ended without an answer",
			    idx, i);
		if (len != h.len || sum != csum_buf(req + sizeof(h), h.len))
			die("client %d: connection %ld: the child read other "
			    "bytes than were sent", idx, i);
		if (read_full(c, ans, len, "client: answer") != len ||
		    memcmp(ans, req + sizeof(h), len))
			die("client %d: connection %ld: answer corrupt", idx, i);
		close(c);
	}
	_exit(0);
}

static int reap(int block)
{
	int st, n = 0;
	pid_t p;

	while ((p = waitpid(-1, &st, block ? 0 : WNOHANG)) > 0) {
		if (!WIFEXITED(st) || WEXITSTATUS(st))
			die("process %d failed (status 0x%x)", (int)p, st);
		n++;
		if (block)
			break;
	}
	return n;
}

/* Wait until the listener is readable (or a child exits: EINTR). */
static void wait_listener(int l, int ep)
{
	int n;

	if (acc_mode == ACC_SELECT) {
		fd_set rd;

		FD_ZERO(&rd);
		FD_SET(l, &rd);
		n = select(l + 1, &rd, NULL, NULL, &(struct timeval){ 0, 100000 });
	} else if (acc_mode == ACC_POLL) {
		struct pollfd p = { .fd = l, .events = POLLIN };

		n = poll(&p, 1, 100);
	} else if (acc_mode == ACC_EPOLL) {
		struct epoll_event ev;

		n = epoll_wait(ep, &ev, 1, 100);
	} else {
		return;
	}
	if (n < 0 && errno != EINTR)
		DIE_ERRNO("waiting for the listener");
}

int main(int argc, char **argv)
{
	long served = 0, clients_done = 0, held_n = 0, i;
	int *held, l, ep = -1, fam_set = 0;
	uint16_t port;

	g_prog = "sdp_forkserver";
	if (argc == 4 && !strcmp(argv[1], "--serve-stdio")) {
		g_prog = "sdp_forkserver (exec'd)";
		max_req = (size_t)atol(argv[2]);
		greeting = argv[3][0] == '1';
		serve_child(0, 1);
		return 0;
	}
	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--family") && v) {
			if (set_family(v))
				die("bad --family %s", v);
			fam_set = 1;
		} else if (!strcmp(a, "--accept") && v) {
			acc_mode = !strcmp(v, "block") ? ACC_BLOCK :
				   !strcmp(v, "select") ? ACC_SELECT :
				   !strcmp(v, "poll") ? ACC_POLL :
				   !strcmp(v, "epoll") ? ACC_EPOLL : -1;
			if (acc_mode < 0)
				die("bad --accept %s", v);
		} else if (!strcmp(a, "--parent-close") && v) {
			close_mode = !strcmp(v, "now") ? CLOSE_NOW :
				     !strcmp(v, "later") ? CLOSE_LATER :
				     !strcmp(v, "never") ? CLOSE_NEVER : -1;
			if (close_mode < 0)
				die("bad --parent-close %s", v);
		} else if (!strcmp(a, "--clients") && v) {
			nclients = atoi(v);
		} else if (!strcmp(a, "--conns") && v) {
			nconns = atol(v);
		} else if (!strcmp(a, "--greeting")) {
			greeting = 1;
			i--;
		} else if (!strcmp(a, "--exec")) {
			exec_mode = 1;
			i--;
		} else if (!strcmp(a, "--max-req") && v) {
			max_req = (size_t)parse_size(v);
		} else {
			die("usage: %s --family F [--accept block|select|poll|"
			    "epoll] [--parent-close now|later|never] "
			    "[--clients N] [--conns N] [--max-req BYTES] "
			    "[--greeting] [--exec]",
			    argv[0]);
		}
		i++;
	}
	if (!fam_set || nclients < 1 || nconns < nclients)
		die("need --family, and --conns >= --clients >= 1");
	held = calloc((size_t)nconns, sizeof(*held));
	if (!held)
		die("out of memory");
	l = make_listener(&port, 64);
	if (acc_mode != ACC_BLOCK)
		set_nonblock(l, 1);
	if (acc_mode == ACC_EPOLL) {
		struct epoll_event ev = { .events = EPOLLIN };

		ep = epoll_create1(EPOLL_CLOEXEC);
		if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev) < 0)
			DIE_ERRNO("epoll");
	}
	watchdog_arm(240, "%ld of %ld connections served (%s accept, parent "
		     "closes %s)", served, nconns,
		     argv[0], "its copy");
	for (i = 0; i < nclients; i++) {
		pid_t p = fork();

		if (p < 0)
			DIE_ERRNO("fork(client)");
		if (p == 0) {
			close(l);
			client_proc(port, (int)i,
				    nconns / nclients +
				    (i < nconns % nclients ? 1 : 0));
		}
	}
	while (served < nconns) {
		pid_t ch;
		int s;

		clients_done += reap(0);
		wait_listener(l, ep);
		s = accept(l, NULL, NULL);
		if (s < 0) {
			if (errno == EAGAIN || errno == EINTR ||
			    errno == ECONNABORTED)
				continue;
			DIE_ERRNO("accept");
		}
		check_transport(s, "accept");
		ch = fork();
		if (ch < 0)
			DIE_ERRNO("fork(child)");
		if (ch == 0) {
			close(l);
			if (ep >= 0)
				close(ep);
			for (i = 0; i < held_n; i++)
				close(held[i]);
			if (exec_mode)
				exec_child(s);
			serve_child(s, s);
			_exit(0);
		}
		served++;
		if (close_mode == CLOSE_NOW) {
			close(s);
		} else {
			held[held_n++] = s;
			/* "later": a few connections behind, so the child's
			 * first use and the parent's close race both ways. */
			if (close_mode == CLOSE_LATER && held_n > 4) {
				close(held[0]);
				memmove(held, held + 1,
					(size_t)--held_n * sizeof(*held));
			}
		}
		watchdog_arm(60, "%ld of %ld connections served; the last "
			     "one made no progress for 60 s", served, nconns);
	}
	/* Every child and every client must finish with status 0. */
	while (reap(1) > 0)
		watchdog_arm(60, "waiting for children and clients");
	for (i = 0; i < held_n; i++)
		close(held[i]);
	watchdog_disarm();
	info("ok: %ld connections served by forked children%s (%s accept, "
	     "parent closes %s, %d clients)", nconns,
	     exec_mode ? " that exec'd" : "",
	     acc_mode == ACC_BLOCK ? "blocking" : acc_mode == ACC_SELECT ?
	     "select" : acc_mode == ACC_POLL ? "poll" : "epoll",
	     close_mode == CLOSE_NOW ? "at once" : close_mode == CLOSE_LATER ?
	     "later" : "never", nclients);
	(void)clients_done;
	return 0;
}
