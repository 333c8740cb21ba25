/* SPDX-License-Identifier: MIT */
/*
 * sdp_stream: bidirectional bulk transfer over N connections.
 *
 * Both directions run at once on every connection.  Writes and reads use
 * random sizes (1 B .. --max-piece, deterministic PRNG seeded by --seed).  The
 * data is a pseudo-random pattern verified byte for byte at the receiver, and
 * an FNV-1a-64 checksum trailer (8 bytes) follows the data; the sender then
 * shuts down its write side and the receiver checks for a clean EOF.
 *
 *   --mode blocking   a reader and a writer thread per connection and end
 *   --mode epoll      non-blocking sockets, one thread per end drives every
 *                     connection in one epoll set (level-triggered; --edge for
 *                     EPOLLET)
 *
 * The parent process is the server (listen/accept), a forked child the client.
 */
#include "itest_common.h"

#include <sys/epoll.h>

static const char *opt_mode = "blocking";
static int opt_edge;
static int opt_conns = 1;
static uint64_t opt_bytes = 1ull << 30;
static uint64_t opt_seed = 1;
static size_t opt_max_piece = 256 * 1024;

/* Patterns for the two directions, created before fork (shared, read-only). */
static unsigned char *pat_c2s, *pat_s2c;

typedef struct {
	int fd;
	int idx;
	const char *side;
	/* sending */
	const unsigned char *pat_out;
	uint64_t base_out; /* pattern offset of this connection's stream */
	uint64_t sent;
	csum_t cs_out;
	unsigned char trailer_out[8];
	unsigned trailer_sent;
	int wr_done;
	prng_t wr_sizes;
	/* receiving */
	const unsigned char *pat_in;
	uint64_t base_in;
	uint64_t rcvd;
	csum_t cs_in;
	unsigned char trailer_in[8];
	unsigned trailer_rcvd;
	int eof;
	prng_t rd_sizes;
	unsigned char *rbuf;
	double t_done;
} conn_t;

static void conn_init(conn_t *c, int fd, int idx, int is_server)
{
	memset(c, 0, sizeof *c);
	c->fd = fd;
	c->idx = idx;
	c->side = is_server ? "server" : "client";
	c->pat_out = is_server ? pat_s2c : pat_c2s;
	c->pat_in = is_server ? pat_c2s : pat_s2c;
	/* Each connection's streams start at a pattern offset derived from the
	 * client's port (server: getpeername, client: getsockname), so that data
	 * crossing between connections is detected whatever the accept order. */
	sockaddr_any a;
	socklen_t alen = sizeof a;
	if ((is_server ? getpeername(fd, &a.sa, &alen) : getsockname(fd, &a.sa, &alen)) < 0)
		DIE_ERRNO(is_server ? "getpeername" : "getsockname");
	uint64_t port = addr_port(&a);
	c->base_out = port * 1000003u + (is_server ? 7777 : 0);
	c->base_in = port * 1000003u + (is_server ? 0 : 7777);
	csum_init(&c->cs_out);
	csum_init(&c->cs_in);
	prng_seed(&c->wr_sizes, opt_seed * 1000 + (uint64_t)idx * 4 + (is_server ? 1 : 0));
	prng_seed(&c->rd_sizes, opt_seed * 1000 + (uint64_t)idx * 4 + (is_server ? 3 : 2));
	c->rbuf = malloc(opt_max_piece);
	if (!c->rbuf)
		die("malloc");
}

/* Next piece to send: pointer and length (data, then trailer).  0 when done. */
static size_t next_piece(conn_t *c, const unsigned char **p, size_t *want)
{
	if (c->sent < opt_bytes) {
		if (*want == 0)
			*want = (size_t)prng_range(&c->wr_sizes, 1, opt_max_piece);
		size_t n = *want;
		if (n > opt_bytes - c->sent)
			n = (size_t)(opt_bytes - c->sent);
		*p = pattern_at(c->pat_out, c->base_out + c->sent);
		return n;
	}
	if (c->trailer_sent == 0 && c->cs_out.total == opt_bytes && c->sent == opt_bytes) {
		uint64_t h = csum_final(&c->cs_out);
		memcpy(c->trailer_out, &h, 8);
	}
	*p = c->trailer_out + c->trailer_sent;
	return 8 - c->trailer_sent;
}

static void account_sent(conn_t *c, const unsigned char *p, size_t n)
{
	if (c->sent < opt_bytes) {
		csum_update(&c->cs_out, p, n);
		c->sent += n;
	} else {
		c->trailer_sent += (unsigned)n;
	}
}

static void account_rcvd(conn_t *c, const unsigned char *buf, size_t n)
{
	if (c->rcvd < opt_bytes) {
		size_t d = n;
		if (d > opt_bytes - c->rcvd)
			d = (size_t)(opt_bytes - c->rcvd);
		char what[64];
		snprintf(what, sizeof what, "%s conn %d", c->side, c->idx);
		pattern_check(c->pat_in, c->base_in + c->rcvd, buf, d, what);
		csum_update(&c->cs_in, buf, d);
		c->rcvd += d;
		buf += d;
		n -= d;
	}
	if (n) {
		if (c->trailer_rcvd + n > 8)
			die("%s conn %d: %zu bytes of unexpected extra data after the trailer", c->side,
			    c->idx, c->trailer_rcvd + n - 8);
		memcpy(c->trailer_in + c->trailer_rcvd, buf, n);
		c->trailer_rcvd += (unsigned)n;
	}
}

static void check_eof(conn_t *c)
{
	if (c->rcvd != opt_bytes || c->trailer_rcvd != 8)
		die("%s conn %d: premature EOF after %" PRIu64 " of %" PRIu64 " data bytes (+%u trailer)",
		    c->side, c->idx, c->rcvd, opt_bytes, c->trailer_rcvd);
	uint64_t h, mine = csum_final(&c->cs_in);
	memcpy(&h, c->trailer_in, 8);
	if (h != mine)
		die("%s conn %d: checksum mismatch: peer sent %016" PRIx64 ", computed %016" PRIx64,
		    c->side, c->idx, h, mine);
	c->eof = 1;
}

/* ---- blocking mode --------------------------------------------------------- */

static void *writer_thread(void *arg)
{
	conn_t *c = arg;
	size_t want = 0;
	for (;;) {
		const unsigned char *p;
		size_t n = next_piece(c, &p, &want);
		if (n == 0)
			break;
		ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			die("%s conn %d: send(%zu) after %" PRIu64 " bytes failed: %s (errno %d)", c->side,
			    c->idx, n, c->sent, strerror(errno), errno);
		}
		if (w == 0)
			die("%s conn %d: send returned 0", c->side, c->idx);
		account_sent(c, p, (size_t)w);
		if (c->sent < opt_bytes && (size_t)w == n)
			want = 0;
		else if (c->sent < opt_bytes)
			want = n - (size_t)w;
	}
	if (shutdown(c->fd, SHUT_WR) < 0)
		die("%s conn %d: shutdown(SHUT_WR) failed: %s", c->side, c->idx, strerror(errno));
	c->wr_done = 1;
	return NULL;
}

static void *reader_thread(void *arg)
{
	conn_t *c = arg;
	for (;;) {
		size_t want = (size_t)prng_range(&c->rd_sizes, 1, opt_max_piece);
		ssize_t n = recv(c->fd, c->rbuf, want, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			die("%s conn %d: recv after %" PRIu64 " bytes failed: %s (errno %d)", c->side, c->idx,
			    c->rcvd, strerror(errno), errno);
		}
		if (n == 0)
			break;
		account_rcvd(c, c->rbuf, (size_t)n);
	}
	check_eof(c);
	c->t_done = now_sec();
	return NULL;
}

static void run_blocking(conn_t *cs, int n)
{
	pthread_t *th = calloc((size_t)n * 2, sizeof *th);
	for (int i = 0; i < n; i++) {
		if (pthread_create(&th[2 * i], NULL, writer_thread, &cs[i]) ||
		    pthread_create(&th[2 * i + 1], NULL, reader_thread, &cs[i]))
			die("pthread_create failed");
	}
	for (int i = 0; i < 2 * n; i++)
		pthread_join(th[i], NULL);
	free(th);
}

/* ---- epoll mode ------------------------------------------------------------ */

typedef struct {
	size_t want;
} wstate_t;

/* returns 1 if progress possible again (sent something), 0 on EAGAIN/done */
static int do_send(conn_t *c, size_t *want)
{
	const unsigned char *p;
	size_t n = next_piece(c, &p, want);
	if (n == 0) {
		if (!c->wr_done) {
			if (shutdown(c->fd, SHUT_WR) < 0)
				die("%s conn %d: shutdown(SHUT_WR) failed: %s", c->side, c->idx,
				    strerror(errno));
			c->wr_done = 1;
		}
		return 0;
	}
	ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL);
	if (w < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
			return 0;
		die("%s conn %d: send(%zu) after %" PRIu64 " bytes failed: %s (errno %d)", c->side, c->idx,
		    n, c->sent, strerror(errno), errno);
	}
	if (w == 0)
		die("%s conn %d: non-blocking send returned 0", c->side, c->idx);
	account_sent(c, p, (size_t)w);
	if (c->sent < opt_bytes)
		*want = (size_t)w == n ? 0 : n - (size_t)w;
	return 1;
}

static int do_recv(conn_t *c)
{
	size_t want = (size_t)prng_range(&c->rd_sizes, 1, opt_max_piece);
	ssize_t n = recv(c->fd, c->rbuf, want, 0);
	if (n < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
			return 0;
		die("%s conn %d: recv after %" PRIu64 " bytes failed: %s (errno %d)", c->side, c->idx,
		    c->rcvd, strerror(errno), errno);
	}
	if (n == 0) {
		check_eof(c);
		c->t_done = now_sec();
		return 0;
	}
	account_rcvd(c, c->rbuf, (size_t)n);
	return 1;
}

static void run_epoll(conn_t *cs, int n)
{
	int ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		DIE_ERRNO("epoll_create1");
	size_t *want = calloc((size_t)n, sizeof *want);
	for (int i = 0; i < n; i++) {
		set_nonblock(cs[i].fd, 1);
		struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP, .data.u32 = (uint32_t)i };
		if (opt_edge)
			ev.events |= EPOLLET;
		if (epoll_ctl(ep, EPOLL_CTL_ADD, cs[i].fd, &ev) < 0)
			DIE_ERRNO("epoll_ctl(ADD)");
	}
	int remaining = n;
	struct epoll_event evs[64];
	unsigned long idle_waits = 0; /* consecutive idle seconds */
	while (remaining > 0) {
		int k = epoll_wait(ep, evs, 64, 1000);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			DIE_ERRNO("epoll_wait");
		}
		if (k == 0) {
			/* level-triggered: a ready socket is reported every time; edge:
			 * we drained to EAGAIN so silence means the peer is slow. */
			if (++idle_waits % 10 == 0) {
				/* show each unfinished connection and what poll() says
				 * about it: readiness that epoll does not report is a bug */
				fprintf(stderr, "%s: epoll_wait idle for %lu s (%d conns unfinished)%s\n",
					cs[0].side, idle_waits, remaining, opt_edge ? " [EPOLLET]" : "");
				for (int i = 0; i < n; i++) {
					conn_t *c = &cs[i];
					if (c->eof && c->wr_done)
						continue;
					struct pollfd p = { .fd = c->fd, .events = POLLIN | POLLOUT | POLLRDHUP };
					int pk = poll(&p, 1, 0);
					fprintf(stderr,
						"  conn %d: sent %" PRIu64 "+%u rcvd %" PRIu64 "+%u wr_done %d eof %d; "
						"poll() = %d revents 0x%x%s\n",
						i, c->sent, c->trailer_sent, c->rcvd, c->trailer_rcvd, c->wr_done, c->eof, pk,
						p.revents,
						pk > 0 && (p.revents & (POLLIN | (c->wr_done ? 0 : POLLOUT)))
							? (opt_edge ? "" : "  <-- ready but epoll (level-triggered) reports nothing")
							: "");
				}
				if (idle_waits >= 30)
					die("%s: no progress for %lu s", cs[0].side, idle_waits);
			}
			continue;
		}
		idle_waits = 0;
		for (int e = 0; e < k; e++) {
			conn_t *c = &cs[evs[e].data.u32];
			uint32_t ev = evs[e].events;
			int was_done = c->eof && c->wr_done;
			if (was_done)
				continue;
			if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLERR | EPOLLHUP)) {
				if (opt_edge) {
					while (!c->eof && do_recv(c))
						;
				} else if (!c->eof) {
					do_recv(c);
				}
			}
			if (ev & (EPOLLOUT | EPOLLERR | EPOLLHUP)) {
				size_t *w = &want[evs[e].data.u32];
				if (opt_edge) {
					while (!c->wr_done && do_send(c, w))
						;
					if (!c->wr_done && c->sent == opt_bytes && c->trailer_sent == 8)
						do_send(c, w);
				} else if (!c->wr_done) {
					do_send(c, w);
					if (c->wr_done) {
						/* nothing more to write: stop EPOLLOUT */
						struct epoll_event mev = { .events = EPOLLIN | EPOLLRDHUP,
									   .data.u32 = evs[e].data.u32 };
						if (epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &mev) < 0)
							DIE_ERRNO("epoll_ctl(MOD)");
					}
				}
			}
			if (c->eof && c->wr_done) {
				if (epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL) < 0)
					DIE_ERRNO("epoll_ctl(DEL)");
				remaining--;
			} else if ((ev & (EPOLLERR | EPOLLHUP)) && c->eof && !c->wr_done) {
				die("%s conn %d: EPOLLERR/EPOLLHUP before all data was sent", c->side, c->idx);
			}
		}
	}
	free(want);
	close(ep);
}

/* ---- ends -------------------------------------------------------------------- */

static void run_end(conn_t *cs, int n, const char *side)
{
	double t0 = now_sec();
	if (!strcmp(opt_mode, "blocking"))
		run_blocking(cs, n);
	else
		run_epoll(cs, n);
	double dt = now_sec() - t0;
	uint64_t tot = 0;
	for (int i = 0; i < n; i++) {
		tot += cs[i].sent + cs[i].rcvd;
		if (close(cs[i].fd) < 0)
			DIE_ERRNO("close");
		free(cs[i].rbuf);
	}
	info("%s: %d conn(s), %s%s: %.1f MiB sent + received in %.3f s = %.1f MB/s total "
	     "(%.2f Gbit/s), checksums OK",
	     side, n, opt_mode, opt_edge ? "+EPOLLET" : "", (double)tot / 1048576.0, dt,
	     (double)tot / dt / 1e6, (double)tot * 8 / dt / 1e9);
}

static int client_main(uint16_t port, void *arg)
{
	conn_t *cs = calloc((size_t)opt_conns, sizeof *cs);
	watchdog_arm(60, "client connecting %d connections", opt_conns);
	for (int i = 0; i < opt_conns; i++) {
		int fd = connect_to(port);
		conn_init(&cs[i], fd, i, 0);
	}
	watchdog_disarm();
	run_end(cs, opt_conns, "client");
	free(cs);
	return 0;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: sdp_stream %s [--mode blocking|epoll] [--edge] [--conns N]\n"
		"                  [--bytes N[K|M|G]] [--seed S] [--max-piece N]\n"
		"  default --bytes: $SDP_TEST_STREAM_BYTES or 1G (per direction per connection)\n",
		family_usage());
	exit(2);
}

int main(int argc, char **argv)
{
	g_prog = "sdp_stream";
	setvbuf(stdout, NULL, _IOLBF, 0);
	const char *env = getenv("SDP_TEST_STREAM_BYTES");
	if (env && *env)
		opt_bytes = parse_size(env);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--family") && v) {
			if (set_family(v))
				usage();
			i++;
		} else if (!strcmp(a, "--mode") && v) {
			opt_mode = v;
			i++;
		} else if (!strcmp(a, "--edge")) {
			opt_edge = 1;
		} else if (!strcmp(a, "--conns") && v) {
			opt_conns = atoi(v);
			i++;
		} else if (!strcmp(a, "--bytes") && v) {
			opt_bytes = parse_size(v);
			i++;
		} else if (!strcmp(a, "--seed") && v) {
			opt_seed = strtoull(v, NULL, 0);
			i++;
		} else if (!strcmp(a, "--max-piece") && v) {
			opt_max_piece = (size_t)parse_size(v);
			i++;
		} else {
			usage();
		}
	}
	if (strcmp(opt_mode, "blocking") && strcmp(opt_mode, "epoll"))
		usage();
	if (opt_edge && strcmp(opt_mode, "epoll"))
		die("--edge requires --mode epoll");
	if (opt_conns < 1 || opt_max_piece < 1 || opt_max_piece > PATTERN_MAXPIECE)
		usage();
	raise_nofile((rlim_t)opt_conns * 2 + 64);
	pat_c2s = pattern_new(opt_seed * 2 + 11);
	pat_s2c = pattern_new(opt_seed * 2 + 12);
	info("family %s, mode %s%s, %d conn(s), %" PRIu64 " bytes each way per conn, seed %" PRIu64,
	     g_family_name, opt_mode, opt_edge ? " (EPOLLET)" : "", opt_conns, opt_bytes, opt_seed);

	child_t ch = spawn_connector(client_main, NULL);
	uint16_t port;
	int lfd = make_listener(&port, opt_conns + 16);
	child_go(&ch, port);
	conn_t *cs = calloc((size_t)opt_conns, sizeof *cs);
	watchdog_arm(60, "server accepting %d connections", opt_conns);
	for (int i = 0; i < opt_conns; i++)
		conn_init(&cs[i], accept_one(lfd), i, 1);
	watchdog_disarm();
	close(lfd);
	run_end(cs, opt_conns, "server");
	free(cs);
	int rc = wait_child(ch.pid, "client");
	if (rc)
		die("client process failed (status %d)", rc);
	info("PASS");
	return 0;
}
