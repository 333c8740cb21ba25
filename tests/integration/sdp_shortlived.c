/* SPDX-License-Identifier: MIT */
/*
 * sdp_shortlived — what the switch remembers about destinations
 * (policy/destmemo.h), end to end through the socket switch, with plain
 * AF_INET TCP sockets in one preloaded process:
 *
 *   --listen both (the built-in policy): a listener that takes SDP and TCP.
 *       The first SDP_SHORT_RUN (16) short connections are SDP; the next
 *       one is kernel TCP at both ends, at once, with no SDP attempt.
 *   --listen sdp (`use sdp server`): the listener takes no TCP, so every
 *       connection stays SDP however short (a TCP connect would be refused).
 *   --listen tcp (`use tcp server`): a plain TCP listener.  The first
 *       connect tries SDP, is refused and falls back; the others go over
 *       TCP at once, with no SDP attempt (the reasons logged say which).
 *
 * Every connection carries a random request whose checksum the server
 * returns; each is compared.  SDP_SHORT_CONN_MS and SDP_REFUSED_HOLD_MS
 * are set to 60 s so that "short" and the hold do not depend on the
 * machine's speed.  The test re-executes
 * itself once to set the environment and the policy file before the
 * library reads them.
 *
 *   sdp_shortlived --listen both|sdp|tcp [--conns N]
 *
 * Output is TAP-like; exit 0 when all pass, 77 when not preloaded.
 */
#include "itest_common.h"

#ifndef SDP_CONN_TRANSPORT
#define SDP_CONN_TRANSPORT 90
#endif

extern char **environ;

static int ntest, nfail;

static void check(int cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(int cond, const char *fmt, ...)
{
	va_list ap;
	char buf[512];

	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	ntest++;
	nfail += !cond;
	printf("%sok %d - %s\n", cond ? "" : "not ", ntest, buf);
	fflush(stdout);
}

/* 'S' for an SDP socket, 'T' for kernel TCP, '?' otherwise. */
static char transport_of(int fd)
{
	int v = -1;
	socklen_t l = sizeof v;

	if (getsockopt(fd, IPPROTO_TCP, SDP_CONN_TRANSPORT, &v, &l) == 0)
		return 'S';
	return errno == ENOPROTOOPT ? 'T' : '?';
}

#define MAX_CONNS 64

struct server {
	int lfd, n;
	char tr[MAX_CONNS + 1];	/* accepted sockets' transports */
	uint64_t csum[MAX_CONNS];
};

/* One request per connection: read to EOF, answer its checksum, close. */
static void *server_main(void *arg)
{
	struct server *s = arg;
	unsigned char buf[4096];

	for (int i = 0; i < s->n; i++) {
		int c = accept_one(s->lfd);
		csum_t cs;
		ssize_t r;
		uint64_t sum;

		s->tr[i] = transport_of(c);
		csum_init(&cs);
		while ((r = read(c, buf, sizeof buf)) > 0)
			csum_update(&cs, buf, (size_t)r);
		if (r < 0)
			DIE_ERRNO("server read");
		sum = csum_final(&cs);
		s->csum[i] = sum;
		write_full(c, &sum, sizeof sum, "server checksum");
		close(c);
	}
	return NULL;
}

static int run(const char *listen_mode, int nconns)
{
	struct server s = { .n = nconns };
	char ctr[MAX_CONNS + 1] = "";
	uint64_t sent[MAX_CONNS], got[MAX_CONNS];
	unsigned char req[1500];
	pthread_t th;
	prng_t rng;
	uint16_t port;
	int bad = 0;

	watchdog_arm(60, "sdp_shortlived --listen %s", listen_mode);
	s.lfd = make_listener(&port, 64);
	if (pthread_create(&th, NULL, server_main, &s))
		die("pthread_create");
	prng_seed(&rng, 42);
	for (int i = 0; i < nconns; i++) {
		int fd = connect_to(port);

		ctr[i] = transport_of(fd);
		prng_fill(&rng, req, sizeof req);
		sent[i] = csum_buf(req, sizeof req);
		write_full(fd, req, sizeof req, "request");
		shutdown(fd, SHUT_WR);
		read_full(fd, &got[i], sizeof got[i], "checksum");
		close(fd);
	}
	pthread_join(th, NULL);
	close(s.lfd);
	watchdog_disarm();
	for (int i = 0; i < nconns; i++)
		bad += sent[i] != got[i] || sent[i] != s.csum[i];
	check(!bad, "%d connections: every request's checksum came back (%d wrong)",
	      nconns, bad);
	printf("# client sockets: %s\n# server sockets: %s\n", ctr, s.tr);
	if (!strcmp(listen_mode, "both")) {
		int run_len = 16, sdp_first = 1;

		for (int i = 0; i < run_len && i < nconns; i++)
			sdp_first &= ctr[i] == 'S' && s.tr[i] == 'S';
		check(sdp_first, "the first %d connections are SDP at both ends", run_len);
		check(nconns > run_len && ctr[run_len] == 'T' && s.tr[run_len] == 'T',
		      "connection %d, after a run of %d short ones to a listener that takes "
		      "TCP too, is kernel TCP at both ends (client %c, server %c)",
		      run_len + 1, run_len, ctr[run_len], s.tr[run_len]);
	} else if (!strcmp(listen_mode, "sdp")) {
		check(!strchr(ctr, 'T') && !strchr(s.tr, 'T'),
		      "a listener that takes no TCP: all %d connections stay SDP", nconns);
	} else {
		check(!strchr(ctr, 'S') && !strchr(s.tr, 'S') && !strchr(ctr, '?'),
		      "a plain TCP listener: all %d connections are kernel TCP", nconns);
	}
	return nfail ? 1 : 0;
}

/* For --listen tcp, checks the library's log: the first connect fell back
 * after a refusal, the others went over TCP without asking SDP.  The log
 * is shown on stderr when a check fails. */
static int check_log(const char *path, int nconns)
{
	FILE *f = fopen(path, "r");
	int refused = 0, remembered = 0, before = nfail;
	char line[512];

	if (!f)
		DIE_ERRNO("reading the log");
	while (fgets(line, sizeof line, f)) {
		refused += strstr(line, "over TCP: no SDP listener at the peer (Connection refused)") != NULL;
		remembered += strstr(line, "over TCP: no SDP listener at the peer (a TCP one answered") != NULL;
	}
	check(refused == 1, "one connect asked SDP and fell back after the refusal (%d)",
	      refused);
	check(remembered == nconns - 1,
	      "the other %d went over TCP at once: no SDP listener there, a TCP one "
	      "answered (%d)", nconns - 1, remembered);
	rewind(f);
	while (nfail > before && fgets(line, sizeof line, f))
		fprintf(stderr, "# log: %s", line);
	fclose(f);
	return nfail ? 1 : 0;
}

int main(int argc, char **argv)
{
	const char *mode = NULL;
	int nconns = 24;

	g_prog = "sdp_shortlived";
	g_mixed_transports = 1;	/* each connection checked in run() */
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--listen") && i + 1 < argc)
			mode = argv[++i];
		else if (!strcmp(argv[i], "--conns") && i + 1 < argc)
			nconns = atoi(argv[++i]);
		else
			mode = NULL, i = argc;
	}
	if (!mode || (strcmp(mode, "both") && strcmp(mode, "sdp") && strcmp(mode, "tcp")) ||
	    nconns < 1 || nconns > MAX_CONNS) {
		fprintf(stderr, "usage: sdp_shortlived --listen both|sdp|tcp [--conns 1..%d]\n",
			MAX_CONNS);
		return 2;
	}
	set_family("tcp");
	const char *pre = getenv("LD_PRELOAD");
	if (!pre || !strstr(pre, "libsdp")) {
		printf("SKIP: run with LD_PRELOAD=.../libsdp.so\n");
		return 77;
	}
	if (!getenv("SDP_SHORTLIVED_CHILD")) {
		char dir[] = "/tmp/sdp_shortlived.XXXXXX", path[64];

		if (!mkdtemp(dir))
			DIE_ERRNO("mkdtemp");
		snprintf(path, sizeof path, "%s/libsdp.conf", dir);
		FILE *f = fopen(path, "w");
		if (!f || fprintf(f, "use %s server * *:*\nuse both client * *:*\n", mode) < 0 ||
		    fclose(f))
			DIE_ERRNO("writing the policy file");
		setenv("LIBSDP_CONFIG_FILE", path, 1);
		setenv("SDP_SHORT_CONN_MS", "60000", 1);
		setenv("SDP_REFUSED_HOLD_MS", "60000", 1);
		if (!strcmp(mode, "tcp"))
			setenv("SDP_LOG", "2", 1);	/* the reasons, checked */
		unsetenv("SDP_SHORT_CONN");
		setenv("SDP_SHORTLIVED_CHILD", dir, 1);
		execv("/proc/self/exe", argv);
		DIE_ERRNO("execv");
	}
	const char *dir = getenv("SDP_SHORTLIVED_CHILD");
	int tcp = !strcmp(mode, "tcp"), saved_err = -1, r;
	char path[64], log[64];

	/* --listen tcp: the library's log lines (SDP_LOG=2) go to a file,
	 * read back below.  A failure inside run() ends the process with
	 * its message there: the file is then kept, and named here first. */
	snprintf(log, sizeof log, "%s/stderr", dir);
	if (tcp) {
		int lfd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

		printf("# stderr goes to %s while the connections run\n", log);
		saved_err = dup(2);
		if (saved_err < 0 || lfd < 0 || dup2(lfd, 2) < 0)
			DIE_ERRNO("redirecting stderr");
		close(lfd);
	}
	r = run(mode, nconns);
	if (tcp) {
		dup2(saved_err, 2);
		close(saved_err);
		r |= check_log(log, nconns);
		unlink(log);
	}
	snprintf(path, sizeof path, "%s/libsdp.conf", dir);
	unlink(path);
	rmdir(dir);
	printf("%d tests, %d failed\n", ntest, nfail);
	return r;
}
