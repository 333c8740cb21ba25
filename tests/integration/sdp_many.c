/* SPDX-License-Identifier: MIT */
/*
 * sdp_many: N (default 1000) concurrent connections to one listener.
 *
 * The forked child connects N sockets (keeping all open); the parent accepts
 * all N.  The child then sends a small checksummed message on every
 * connection, the parent verifies each and replies with a checksummed answer
 * derived from it, the child verifies every reply, closes everything, and the
 * parent checks EOF on every connection.  Prints the connect+accept rate.
 * With --max-fds-per-conn K, each process also fails if the connections,
 * once they have carried their messages, hold more than K descriptors each
 * on average, besides a few the process opens once.
 */
#include "itest_common.h"

#define MSG_LEN 64

static int opt_n = 1000;
static int opt_max_fds;		/* 0: not checked */

/* What a process opens once, whatever its number of connections (the
 * progress thread's epoll set and wake-up, the wake page). */
#define PER_PROCESS_FDS 16

/* The connections' descriptors in this process, against the limit. */
static void check_fds(const char *who, long before)
{
	long n = count_fds() - before - PER_PROCESS_FDS;
	double per = (double)(n > 0 ? n : 0) / opt_n;

	info("%s: %.2f descriptors per connection", who, per);
	if (opt_max_fds && per > opt_max_fds)
		die("%s: %.2f descriptors per connection, more than %d", who,
		    per, opt_max_fds);
}

/* message: [0..3] conn number, [4..47] payload, [48..55] reserved,
 * [56..63] checksum of bytes 0..55 */
static void make_msg(unsigned char *m, uint32_t idx, uint32_t salt)
{
	prng_t r;
	prng_seed(&r, ((uint64_t)idx << 32) ^ salt);
	memcpy(m, &idx, 4);
	prng_fill(&r, m + 4, 52);
	uint64_t h = csum_buf(m, 56);
	memcpy(m + 56, &h, 8);
}

static uint32_t check_msg(const unsigned char *m, uint32_t salt, const char *what, int i)
{
	uint64_t h;
	memcpy(&h, m + 56, 8);
	if (h != csum_buf(m, 56))
		die("%s %d: message checksum mismatch", what, i);
	uint32_t idx;
	memcpy(&idx, m, 4);
	unsigned char exp[MSG_LEN];
	make_msg(exp, idx, salt);
	if (memcmp(exp, m, MSG_LEN))
		die("%s %d: message content mismatch (conn number %u)", what, i, idx);
	return idx;
}

static int client_main(uint16_t port, void *arg)
{
	int *fds = malloc(sizeof(int) * (size_t)opt_n);
	long fds_before = count_fds();
	watchdog_arm(60, "client: connecting %d sockets", opt_n);
	double t0 = now_sec();
	for (int i = 0; i < opt_n; i++)
		fds[i] = connect_to(port);
	double dt = now_sec() - t0;
	info("client: %d connects in %.3f s = %.0f connects/s", opt_n, dt, opt_n / dt);
	watchdog_arm(60, "client: message exchange");
	unsigned char m[MSG_LEN];
	for (int i = 0; i < opt_n; i++) {
		make_msg(m, (uint32_t)i, 0x1111);
		write_full(fds[i], m, MSG_LEN, "client message");
	}
	for (int i = 0; i < opt_n; i++) {
		if (read_full(fds[i], m, MSG_LEN, "client reply") != MSG_LEN)
			die("client: EOF instead of the reply on connection %d", i);
		uint32_t idx = check_msg(m, 0x2222, "client reply", i);
		if (idx != (uint32_t)i)
			die("client: connection %d got the reply meant for connection %u", i, idx);
	}
	check_fds("client", fds_before);
	for (int i = 0; i < opt_n; i++)
		if (close(fds[i]) < 0)
			DIE_ERRNO("client close");
	watchdog_disarm();
	free(fds);
	return 0;
}

int main(int argc, char **argv)
{
	g_prog = "sdp_many";
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--family") && i + 1 < argc) {
			if (set_family(argv[++i]))
				die("bad family '%s'", argv[i]);
		} else if (!strcmp(argv[i], "--conns") && i + 1 < argc) {
			opt_n = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--max-fds-per-conn") && i + 1 < argc) {
			opt_max_fds = atoi(argv[++i]);
		} else {
			fprintf(stderr, "usage: sdp_many %s [--conns N] [--max-fds-per-conn K]\n", family_usage());
			return 2;
		}
	}
	if (opt_n < 1)
		die("--conns must be >= 1");
	rlim_t need = (rlim_t)opt_n + 64;
	rlim_t have = raise_nofile(need);
	if (have < need) {
		fprintf(stderr, "sdp_many: SKIP: RLIMIT_NOFILE is %llu, need %llu (not root, hard limit too low)\n",
			(unsigned long long)have, (unsigned long long)need);
		return 77;
	}
	child_t ch = spawn_connector(client_main, NULL);
	uint16_t port;
	int backlog = opt_n < 4096 ? opt_n : 4096;
	long fds_before = count_fds();
	int lfd = make_listener(&port, backlog);
	double t0 = now_sec();
	child_go(&ch, port);
	watchdog_arm(60, "server: accepting %d connections", opt_n);
	int *fds = malloc(sizeof(int) * (size_t)opt_n);
	for (int i = 0; i < opt_n; i++)
		fds[i] = accept_one(lfd);
	double dt = now_sec() - t0;
	close(lfd);
	info("server: %d connections accepted in %.3f s = %.0f connect+accept/s", opt_n, dt, opt_n / dt);

	watchdog_arm(60, "server: message exchange");
	unsigned char m[MSG_LEN];
	int *seen = calloc((size_t)opt_n, sizeof *seen);
	for (int i = 0; i < opt_n; i++) {
		if (read_full(fds[i], m, MSG_LEN, "server message") != MSG_LEN)
			die("server: EOF instead of the message on accepted connection %d", i);
		uint32_t idx = check_msg(m, 0x1111, "server message", i);
		if (idx >= (uint32_t)opt_n || seen[idx]++)
			die("server: duplicate or bad connection number %u", idx);
		make_msg(m, idx, 0x2222);
		write_full(fds[i], m, MSG_LEN, "server reply");
	}
	check_fds("server", fds_before);
	for (int i = 0; i < opt_n; i++) {
		char c;
		ssize_t n = recv(fds[i], &c, 1, 0);
		if (n != 0)
			die("server: connection %d: expected EOF after the client closed, got %zd (%s)", i, n,
			    n < 0 ? strerror(errno) : "data");
		if (close(fds[i]) < 0)
			DIE_ERRNO("server close");
	}
	watchdog_disarm();
	free(seen);
	free(fds);
	int rc = wait_child(ch.pid, "client");
	if (rc)
		die("client failed (status %d)", rc);
	info("PASS: %d connections, all messages verified", opt_n);
	return 0;
}
