/* SPDX-License-Identifier: MIT */
/*
 * sdp_halfclose: half-close semantics.
 *
 * Client (forked child): writes --bytes of data followed by an 8-byte
 * checksum, shutdown(SHUT_WR); checks send() now fails with EPIPE; then reads
 * the server's reply to EOF and verifies its checksum.
 * Server (parent): reads to EOF with a non-blocking socket driven by epoll
 * (EPOLLIN|EPOLLRDHUP) and checks that EPOLLRDHUP (and poll's POLLRDHUP) is
 * reported once the EOF has arrived; recv after EOF returns 0 repeatedly; then
 * sends a --reply-bytes reply (data + checksum) which the client reads after
 * its own SHUT_WR; then both close.
 */
#include "itest_common.h"

#include <sys/epoll.h>

static uint64_t opt_bytes = 16u << 20;
static uint64_t opt_reply = 32u << 20;
static unsigned char *pat_req, *pat_rep;

static void send_stream(int fd, const unsigned char *pat, uint64_t total, prng_t *r, const char *what)
{
	csum_t cs;
	csum_init(&cs);
	uint64_t off = 0;
	while (off < total) {
		size_t n = (size_t)prng_range(r, 1, 64 * 1024);
		if (n > total - off)
			n = (size_t)(total - off);
		const unsigned char *p = pattern_at(pat, off);
		write_full(fd, p, n, what);
		csum_update(&cs, p, n);
		off += n;
	}
	uint64_t h = csum_final(&cs);
	write_full(fd, &h, 8, what);
}

/* blocking receive of total+8 bytes then EOF; verifies data and checksum */
static void recv_stream(int fd, const unsigned char *pat, uint64_t total, const char *what)
{
	unsigned char *buf = malloc(65536);
	csum_t cs;
	csum_init(&cs);
	uint64_t off = 0;
	unsigned char tr[8];
	unsigned ntr = 0;
	for (;;) {
		ssize_t n = recv(fd, buf, 65536, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			die("%s: recv after %" PRIu64 " bytes failed: %s (errno %d)", what, off,
			    strerror(errno), errno);
		}
		if (n == 0)
			break;
		size_t d = (size_t)n;
		if (d > total - off)
			d = (size_t)(total - off);
		pattern_check(pat, off, buf, d, what);
		csum_update(&cs, buf, d);
		off += d;
		if ((size_t)n > d) {
			if (ntr + (size_t)n - d > 8)
				die("%s: extra data after trailer", what);
			memcpy(tr + ntr, buf + d, (size_t)n - d);
			ntr += (unsigned)((size_t)n - d);
		}
	}
	if (off != total || ntr != 8)
		die("%s: EOF after %" PRIu64 "+%u bytes, expected %" PRIu64 "+8", what, off, ntr, total);
	uint64_t h;
	memcpy(&h, tr, 8);
	if (h != csum_final(&cs))
		die("%s: checksum mismatch", what);
	free(buf);
}

static int client_main(uint16_t port, void *arg)
{
	watchdog_arm(60, "client");
	int fd = connect_to(port);
	prng_t r;
	prng_seed(&r, 42);
	send_stream(fd, pat_req, opt_bytes, &r, "client request");
	if (shutdown(fd, SHUT_WR) < 0)
		DIE_ERRNO("client shutdown(SHUT_WR)");
	/* writing after our own SHUT_WR must fail with EPIPE */
	ssize_t n = send(fd, "x", 1, MSG_NOSIGNAL);
	if (n >= 0 || errno != EPIPE)
		die("client: send after shutdown(SHUT_WR) returned %zd (%s), expected -1 EPIPE", n,
		    n < 0 ? strerror(errno) : "success");
	recv_stream(fd, pat_rep, opt_reply, "client reading reply");
	for (int i = 0; i < 3; i++) {
		char c;
		n = recv(fd, &c, 1, 0);
		if (n != 0)
			die("client: recv #%d after EOF returned %zd (%s), expected 0", i + 2, n,
			    n < 0 ? strerror(errno) : "data");
	}
	if (close(fd) < 0)
		DIE_ERRNO("client close");
	info("client: sent %" PRIu64 " bytes, SHUT_WR, EPIPE after SHUT_WR, reply of %" PRIu64
	     " bytes OK",
	     opt_bytes, opt_reply);
	return 0;
}

int main(int argc, char **argv)
{
	g_prog = "sdp_halfclose";
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--family") && i + 1 < argc) {
			if (set_family(argv[++i]))
				die("bad family '%s'", argv[i]);
		} else if (!strcmp(argv[i], "--bytes") && i + 1 < argc) {
			opt_bytes = parse_size(argv[++i]);
		} else if (!strcmp(argv[i], "--reply-bytes") && i + 1 < argc) {
			opt_reply = parse_size(argv[++i]);
		} else {
			fprintf(stderr, "usage: sdp_halfclose %s [--bytes N] [--reply-bytes N]\n",
				family_usage());
			return 2;
		}
	}
	pat_req = pattern_new(101);
	pat_rep = pattern_new(202);
	child_t ch = spawn_connector(client_main, NULL);
	uint16_t port;
	int lfd = make_listener(&port, 8);
	child_go(&ch, port);
	watchdog_arm(60, "server");
	int fd = accept_one(lfd);
	close(lfd);
	set_nonblock(fd, 1);

	int ep = epoll_create1(0);
	if (ep < 0)
		DIE_ERRNO("epoll_create1");
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP };
	if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
		DIE_ERRNO("epoll_ctl(ADD)");

	unsigned char *buf = malloc(65536);
	csum_t cs;
	csum_init(&cs);
	uint64_t off = 0;
	unsigned char tr[8];
	unsigned ntr = 0;
	int eof = 0, saw_rdhup_before_eof = 0;
	while (!eof) {
		struct epoll_event out;
		int k = epoll_wait(ep, &out, 1, 10000);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			DIE_ERRNO("epoll_wait");
		}
		if (k == 0)
			die("server: no epoll event for 10 s after %" PRIu64 " bytes", off);
		if (out.events & EPOLLRDHUP)
			saw_rdhup_before_eof = 1;
		for (;;) {
			ssize_t n = recv(fd, buf, 65536, 0);
			if (n < 0) {
				if (errno == EAGAIN || errno == EWOULDBLOCK)
					break;
				if (errno == EINTR)
					continue;
				die("server: recv after %" PRIu64 " bytes failed: %s (errno %d)", off,
				    strerror(errno), errno);
			}
			if (n == 0) {
				eof = 1;
				break;
			}
			size_t d = (size_t)n;
			if (d > opt_bytes - off)
				d = (size_t)(opt_bytes - off);
			pattern_check(pat_req, off, buf, d, "server reading request");
			csum_update(&cs, buf, d);
			off += d;
			if ((size_t)n > d) {
				if (ntr + (size_t)n - d > 8)
					die("server: extra data after trailer");
				memcpy(tr + ntr, buf + d, (size_t)n - d);
				ntr += (unsigned)((size_t)n - d);
			}
		}
	}
	if (off != opt_bytes || ntr != 8)
		die("server: EOF after %" PRIu64 "+%u bytes, expected %" PRIu64 "+8", off, ntr, opt_bytes);
	uint64_t h;
	memcpy(&h, tr, 8);
	if (h != csum_final(&cs))
		die("server: request checksum mismatch");

	/* After EOF: epoll must (still) report EPOLLIN|EPOLLRDHUP, poll POLLRDHUP. */
	struct epoll_event out;
	int k = epoll_wait(ep, &out, 1, 0);
	if (k != 1 || !(out.events & EPOLLRDHUP) || !(out.events & EPOLLIN))
		die("server: after EOF epoll_wait returned %d events=0x%x, expected EPOLLIN|EPOLLRDHUP", k,
		    k == 1 ? out.events : 0);
	if (out.events & EPOLLHUP)
		die("server: EPOLLHUP reported after a half-close (only the peer shut down writes)");
	struct pollfd pfd = { .fd = fd, .events = POLLIN | POLLRDHUP };
	k = poll(&pfd, 1, 0);
	if (k != 1 || !(pfd.revents & POLLRDHUP) || !(pfd.revents & POLLIN))
		die("server: after EOF poll returned %d revents=0x%x, expected POLLIN|POLLRDHUP", k,
		    pfd.revents);
	for (int i = 0; i < 3; i++) {
		ssize_t n = recv(fd, buf, 1, 0);
		if (n != 0)
			die("server: recv #%d after EOF returned %zd (%s), expected 0", i + 2, n,
			    n < 0 ? strerror(errno) : "data");
	}
	info("server: request of %" PRIu64 " bytes OK, EPOLLRDHUP %s, POLLRDHUP OK, recv after EOF = 0",
	     opt_bytes, saw_rdhup_before_eof ? "seen with the EOF" : "seen after EOF");

	/* Reply on the half-closed connection (blocking). */
	set_nonblock(fd, 0);
	prng_t r;
	prng_seed(&r, 43);
	send_stream(fd, pat_rep, opt_reply, &r, "server reply");
	if (close(fd) < 0)
		DIE_ERRNO("server close");
	close(ep);
	int rc = wait_child(ch.pid, "client");
	watchdog_disarm();
	if (rc)
		die("client failed (status %d)", rc);
	info("PASS");
	return 0;
}
