/* SPDX-License-Identifier: MIT */
/*
 * sdp_linkdown: the network under an established SDP connection goes away.
 *
 * A client thread streams a seeded byte stream to a server thread, which
 * checks every byte and streams back; once both directions have moved
 * --warm bytes the program runs --down (e.g. "ip link set veth-b down").
 * Both sides must then fail with ECONNRESET, ETIMEDOUT or EPIPE (or see EOF)
 * within --bound seconds, never hang; after both sockets are closed no QP of
 * this process may remain (--qps lists them, e.g. "rdma resource show qp";
 * lines naming "pid <ours>" count).  Finally --up restores the link.
 * Needs the two addresses of itest_common.h on two devices joined by the
 * link that goes down (the VM suite: rxe-a/veth-a <-> rxe-b/veth-b).
 */
#include "itest_common.h"

static const char *opt_down, *opt_up, *opt_qps;
static double opt_bound = 20;
static uint64_t opt_warm = 8 << 20;

struct side {
	int fd;
	const char *name;
	uint64_t seed_out, seed_in;
	_Atomic uint64_t sent, rcvd;
	_Atomic int err;	/* errno that ended it, -1: EOF */
	_Atomic int done;
	double t_end;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int acceptable(int e)
{
	return e == ECONNRESET || e == ETIMEDOUT || e == EPIPE || e == -1;
}

static void *writer(void *arg)
{
	struct side *s = arg;
	unsigned char buf[65536];
	prng_t r;

	prng_seed(&r, s->seed_out);
	for (;;) {
		prng_fill(&r, buf, sizeof(buf));
		size_t off = 0;

		while (off < sizeof(buf)) {
			ssize_t n = send(s->fd, buf + off, sizeof(buf) - off,
					 MSG_NOSIGNAL);

			if (n < 0) {
				if (errno == EINTR)
					continue;
				return (void *)(intptr_t)errno;
			}
			off += (size_t)n;
			s->sent += (uint64_t)n;
		}
	}
}

static void *reader(void *arg)
{
	struct side *s = arg;
	unsigned char buf[65536], want[65536];
	prng_t r;
	pthread_t w;
	void *wr;
	int e;

	if (pthread_create(&w, NULL, writer, s))
		die("pthread_create");
	prng_seed(&r, s->seed_in);
	for (;;) {
		ssize_t n = recv(s->fd, buf, sizeof(buf), 0);

		if (n == 0) {
			e = -1;
			break;
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			e = errno;
			break;
		}
		prng_fill(&r, want, (size_t)n);
		if (memcmp(buf, want, (size_t)n))
			die("%s: data differs at %" PRIu64, s->name, s->rcvd);
		s->rcvd += (uint64_t)n;
	}
	s->t_end = now_s();
	s->err = e;
	/* The writer is blocked or failing: shut it out. */
	shutdown(s->fd, SHUT_RDWR);
	pthread_join(w, &wr);
	if ((intptr_t)wr && !acceptable((int)(intptr_t)wr) &&
	    (intptr_t)wr != ENOTCONN && (intptr_t)wr != EBADF)
		die("%s: send failed with %s", s->name,
		    strerror((int)(intptr_t)wr));
	s->done = 1;
	return NULL;
}

static int count_qps(void)
{
	char line[512], pat[32];
	FILE *f = popen(opt_qps, "r");
	int n = 0;

	if (!f)
		DIE_ERRNO("popen");
	snprintf(pat, sizeof(pat), "pid %d ", (int)getpid());
	while (fgets(line, sizeof(line), f))
		n += strstr(line, pat) != NULL;
	pclose(f);
	return n;
}

int main(int argc, char **argv)
{
	struct side cl = { .name = "client", .seed_out = 1, .seed_in = 2 };
	struct side sv = { .name = "server", .seed_out = 2, .seed_in = 1 };
	pthread_t tc, ts;
	uint16_t port;
	double t0, deadline;
	int lfd, n;

	g_prog = "sdp_linkdown";
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--family") && v) {
			if (set_family(v))
				die("bad --family");
		} else if (!strcmp(a, "--down") && v) {
			opt_down = v;
		} else if (!strcmp(a, "--up") && v) {
			opt_up = v;
		} else if (!strcmp(a, "--qps") && v) {
			opt_qps = v;
		} else if (!strcmp(a, "--bound") && v) {
			opt_bound = atof(v);
		} else if (!strcmp(a, "--warm") && v) {
			opt_warm = parse_size(v);
		} else {
			fprintf(stderr, "usage: sdp_linkdown %s --down CMD --up CMD "
				"[--qps CMD] [--bound S] [--warm N]\n", family_usage());
			return 2;
		}
		i++;
	}
	if (!opt_down || !opt_up)
		die("--down and --up are required");
	signal(SIGPIPE, SIG_IGN);
	lfd = make_listener(&port, 4);
	cl.fd = connect_to(port);
	sv.fd = accept_one(lfd);
	close(lfd);
	if (pthread_create(&tc, NULL, reader, &cl) ||
	    pthread_create(&ts, NULL, reader, &sv))
		die("pthread_create");
	watchdog_arm(60, "streaming never reached the warm-up amount");
	while (cl.rcvd < opt_warm || sv.rcvd < opt_warm)
		poll(NULL, 0, 5);
	info("streaming: %" PRIu64 " / %" PRIu64 " bytes received; link down: %s",
	     cl.rcvd, sv.rcvd, opt_down);
	t0 = now_s();
	if (system(opt_down) != 0)
		die("'%s' failed", opt_down);
	/* The hang guard is well past the bound: the bound is checked below. */
	watchdog_arm(opt_bound * 3 + 10, "no error within %.0f s of link down",
		     opt_bound * 3 + 10);
	pthread_join(tc, NULL);
	pthread_join(ts, NULL);
	watchdog_disarm();
	for (int i = 0; i < 2; i++) {
		struct side *s = i ? &sv : &cl;
		double dt = s->t_end - t0;

		info("%s: %s after %.2f s (%" PRIu64 " bytes in, %" PRIu64 " out)",
		     s->name, s->err < 0 ? "EOF" : strerror(s->err), dt, s->rcvd,
		     s->sent);
		if (!acceptable(s->err))
			die("%s: ended with %s, expected ECONNRESET/ETIMEDOUT/EPIPE/EOF",
			    s->name, strerror(s->err));
		if (dt > opt_bound)
			die("%s: the error took %.2f s, bound %.0f s", s->name, dt,
			    opt_bound);
	}
	close(cl.fd);
	close(sv.fd);
	if (opt_qps) {
		/* Teardown runs on the progress thread: bounded wait. */
		deadline = now_s() + 10;
		while ((n = count_qps()) > 0 && now_s() < deadline)
			poll(NULL, 0, 50);
		if (n > 0)
			die("%d QPs of this process remain after close", n);
		info("no QP of this process remains (%s)", opt_qps);
	}
	if (system(opt_up) != 0)
		die("'%s' failed", opt_up);
	info("PASS");
	return 0;
}
