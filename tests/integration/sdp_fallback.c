/* SPDX-License-Identifier: MIT */
/*
 * sdp_fallback — the socket switch between a program with libsdp preloaded
 * and one without it, and the policy file's effect on that.
 *
 * Run it preloaded (tests/run.sh does): it re-executes itself as a server
 * and a client, each either WITH the preload (this process's LD_PRELOAD,
 * sanitizer runtime included) or WITHOUT it (LD_PRELOAD removed from its
 * environment), both using plain AF_INET TCP sockets:
 *
 *   a. plain TCP server, preloaded client: the client falls back to kernel
 *      TCP (SDP_CONN_TRANSPORT answers ENOPROTOOPT), at once (the connect
 *      takes well under a second), data checksummed;
 *   b. preloaded server, plain client: works; the accepted fd is TCP;
 *   c. both preloaded: both ends are SDP;
 *   d. client policy `use tcp client * 127.0.0.1:PORT` against a preloaded
 *      (SDP-capable) server: TCP, decided by the policy without trying SDP;
 *   e. client policy `use sdp client * *:*` against a plain TCP server:
 *      connect fails with ECONNREFUSED (no silent fallback);
 *   f. a policy file with a typo line: exactly one error line on stderr
 *      naming FILE:LINE; the program still runs and the other lines apply.
 *   g. a preloaded server whose process is stopped (SIGSTOP), so that its
 *      SDP listener cannot answer: a blocking preloaded client gives up
 *      after SDP_CONNECT_TIMEOUT_MS and falls back to TCP (the kernel
 *      answers for the stopped server), the log names the cause, and the
 *      bytes arrive once the server runs again;
 *   h. the same with a non-blocking connect waited for in epoll (the
 *      descriptor stays in the application's epoll set across the switch);
 *   i. the same with policy `use sdp`: connect fails with ETIMEDOUT.
 *
 * Output is TAP-like ("ok N - ...", "not ok N - ..."); exit 0 when all pass,
 * 77 (skip) when libsdp.so is not preloaded.
 *
 *   sdp_fallback [--bytes N] [--only a..f] [--known CASES]
 *
 * --known CASES lists cases whose failing checks are reported as
 * "not ok ... # TODO known failure" without failing the run (the list is
 * kept explicit in tests/run.sh).
 */
#include "itest_common.h"

#include <dirent.h>
#include <sys/epoll.h>
#include <sys/stat.h>

#ifndef SDP_CONN_TRANSPORT
#define SDP_CONN_TRANSPORT 90
#endif

extern char **environ;

static uint64_t opt_bytes = 8u << 20;
static char self_exe[4096];
static const char *preload_value; /* this process's LD_PRELOAD */
static char tmpdir[256];
static int ntest, nfail, nknown;
static const char *opt_known = ""; /* --known CASES: expected to fail */
static char cur_case;

static void check(int cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(int cond, const char *fmt, ...)
{
	va_list ap;
	char buf[512];

	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	ntest++;
	int known = cur_case && strchr(opt_known, cur_case);
	if (!cond && known)
		nknown++;
	else if (!cond)
		nfail++;
	printf("%sok %d - %s%s\n", cond ? "" : "not ", ntest, buf,
	       known ? (cond ? " # known failure passed (fixed?)" : " # TODO known failure") : "");
	fflush(stdout);
}

/* "shm", "tcp" (ENOPROTOOPT: a kernel socket), or "err:<errno>" */
static const char *transport_of(int fd, char *buf, size_t len)
{
	int v = -1;
	socklen_t l = sizeof v;

	if (getsockopt(fd, IPPROTO_TCP, SDP_CONN_TRANSPORT, &v, &l) == 0)
		snprintf(buf, len, "%s", v == 1 ? "shm" : v == 2 ? "loop" : v == 3 ? "verbs" : "sdp?");
	else if (errno == ENOPROTOOPT)
		snprintf(buf, len, "tcp");
	else
		snprintf(buf, len, "err:%d", errno);
	return buf;
}

/* ---- the two roles (child processes) ------------------------------------- */

/* server BYTES: listen on 127.0.0.1:0, print "port P", accept one, read to
 * EOF, send back the 8-byte checksum, print "server TRANSPORT CSUM N". */
static int role_server(void)
{
	g_prog = "sdp_fallback/server";
	int lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0)
		DIE_ERRNO("socket");
	int one = 1;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	sockaddr_any a;
	socklen_t len = make_loopback(&a, AF_INET, 0);
	if (bind(lfd, &a.sa, len) < 0)
		DIE_ERRNO("bind");
	if (listen(lfd, 8) < 0)
		DIE_ERRNO("listen");
	len = sizeof a;
	if (getsockname(lfd, &a.sa, &len) < 0)
		DIE_ERRNO("getsockname");
	printf("port %u\n", addr_port(&a));
	fflush(stdout);
	watchdog_arm(30, "server: accept/read");
	int fd = accept_one(lfd);
	char tr[32];
	transport_of(fd, tr, sizeof tr);
	static unsigned char buf[65536];
	csum_t cs;
	csum_init(&cs);
	for (;;) {
		ssize_t n = recv(fd, buf, sizeof buf, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			DIE_ERRNO("recv");
		if (n == 0)
			break;
		csum_update(&cs, buf, (size_t)n);
	}
	uint64_t h = csum_final(&cs);
	write_full(fd, &h, sizeof h, "checksum");
	close(fd);
	close(lfd);
	printf("server %s %016" PRIx64 " %" PRIu64 "\n", tr, h, cs.total);
	fflush(stdout);
	return 0;
}

/* A non-blocking connect as event loops do it: EINPROGRESS, the descriptor
 * added to an epoll set for EPOLLOUT, SO_ERROR once it fires; then back to
 * blocking.  0, or -1 with errno. */
static int connect_in_epoll(int fd, const struct sockaddr *sa, socklen_t len)
{
	int fl = fcntl(fd, F_GETFL), ep, err = 0;
	socklen_t el = sizeof err;
	struct epoll_event ev = { .events = EPOLLOUT, .data.u64 = 0x5d9 };

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		DIE_ERRNO("fcntl(O_NONBLOCK)");
	if (connect(fd, sa, len) < 0) {
		if (errno != EINPROGRESS)
			return -1;
		ep = epoll_create1(EPOLL_CLOEXEC);
		if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
			DIE_ERRNO("epoll");
		memset(&ev, 0, sizeof(ev));
		int n;
		do
			n = epoll_wait(ep, &ev, 1, 20000);
		while (n < 0 && errno == EINTR);
		if (n != 1 || ev.data.u64 != 0x5d9)
			die("client: epoll_wait gave %d events (data %#llx) for the connect", n,
			    (unsigned long long)ev.data.u64);
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
			DIE_ERRNO("getsockopt(SO_ERROR)");
		/* Connected: the socket must still be in the set, and say so
		 * (an event loop goes on waiting on it). */
		if (!err) {
			ev.events = EPOLLOUT;
			n = epoll_wait(ep, &ev, 1, 20000);
			if (n != 1 || ev.data.u64 != 0x5d9 || !(ev.events & EPOLLOUT))
				die("client: after the connect, epoll_wait gave %d events (%#x) for the "
				    "connected socket",
				    n, n == 1 ? ev.events : 0);
		}
		close(ep);
	}
	if (fcntl(fd, F_SETFL, fl) < 0)
		DIE_ERRNO("fcntl");
	errno = err;
	return err ? -1 : 0;
}

/* client PORT BYTES: connect to 127.0.0.1:PORT (timed), send BYTES of
 * pattern, SHUT_WR, read the server's checksum, print
 * "client TRANSPORT CONNECT_US SENT_CSUM ECHO_CSUM" or
 * "client connect-failed ERRNO CONNECT_US". */
static int role_client(uint16_t port)
{
	g_prog = "sdp_fallback/client";
	watchdog_arm(30, "client");
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		DIE_ERRNO("socket");
	sockaddr_any a;
	socklen_t len = make_loopback(&a, AF_INET, port);
	double t0 = now_sec();
	int r;
	if (getenv("SDP_TEST_NONBLOCK"))
		r = connect_in_epoll(fd, &a.sa, len);
	else
		do
			r = connect(fd, &a.sa, len);
		while (r < 0 && errno == EINTR);
	long us = (long)((now_sec() - t0) * 1e6);
	if (r < 0) {
		printf("client connect-failed %d %ld\n", errno, us);
		fflush(stdout);
		return 0;
	}
	char tr[32];
	transport_of(fd, tr, sizeof tr);
	if (getenv("SDP_TEST_ANNOUNCE")) {	/* the orchestrator waits for it */
		printf("connected %s %ld\n", tr, us);
		fflush(stdout);
	}
	unsigned char *pat = pattern_new(7);
	csum_t cs;
	csum_init(&cs);
	uint64_t off = 0;
	while (off < opt_bytes) {
		size_t n = opt_bytes - off < 65536 ? (size_t)(opt_bytes - off) : 65536;
		write_full(fd, pattern_at(pat, off), n, "data");
		csum_update(&cs, pattern_at(pat, off), n);
		off += n;
	}
	if (shutdown(fd, SHUT_WR) < 0)
		DIE_ERRNO("shutdown");
	uint64_t echo = 0;
	if (read_full(fd, &echo, sizeof echo, "checksum") != sizeof echo)
		die("short checksum reply");
	close(fd);
	printf("client %s %ld %016" PRIx64 " %016" PRIx64 "\n", tr, us, csum_final(&cs), echo);
	fflush(stdout);
	free(pat);
	return 0;
}

/* ---- orchestration --------------------------------------------------------- */

typedef struct {
	pid_t pid;
	FILE *out;		/* its stdout */
	char errpath[300];	/* its stderr, in a file */
} proc_t;

/* Start this program as ROLE with ARGS; preloaded or not; extra env
 * ("NAME=VALUE" strings, NULL-terminated). */
static proc_t spawn_role(const char *tag, int preloaded, const char *const *extra_env,
			 const char *role, const char *arg1)
{
	proc_t p;
	int pfd[2];

	memset(&p, 0, sizeof p);
	snprintf(p.errpath, sizeof p.errpath, "%s/%s.stderr", tmpdir, tag);
	if (pipe(pfd) < 0)
		DIE_ERRNO("pipe");
	char **envp = calloc(512, sizeof *envp);
	size_t ne = 0;
	for (char **e = environ; *e && ne < 480; e++) {
		if (!strncmp(*e, "LD_PRELOAD=", 11) || !strncmp(*e, "LIBSDP_CONFIG_FILE=", 19) ||
		    !strncmp(*e, "SDP_LOG=", 8) || !strncmp(*e, "SDP_SWITCH=", 11) ||
		    !strncmp(*e, "SIMPLE_LIBSDP=", 14) || !strncmp(*e, "ALWAYS_USE_SDP=", 15))
			continue;
		envp[ne++] = *e;
	}
	char pre[4200];
	if (preloaded) {
		snprintf(pre, sizeof pre, "LD_PRELOAD=%s", preload_value);
		envp[ne++] = pre;
	}
	/* without a policy file the built-in default applies (and not a
	 * host-wide /etc/libsdp.conf): point at an empty file */
	char nocfg[320];
	int has_cfg = 0;
	for (const char *const *x = extra_env; x && *x; x++)
		has_cfg |= !strncmp(*x, "LIBSDP_CONFIG_FILE=", 19);
	if (!has_cfg) {
		snprintf(nocfg, sizeof nocfg, "LIBSDP_CONFIG_FILE=%s/empty.conf", tmpdir);
		envp[ne++] = nocfg;
	}
	for (const char *const *x = extra_env; x && *x; x++)
		envp[ne++] = (char *)*x;
	envp[ne] = NULL;
	char bytes[32];
	snprintf(bytes, sizeof bytes, "%" PRIu64, opt_bytes);

	p.pid = fork();
	if (p.pid < 0)
		DIE_ERRNO("fork");
	if (p.pid == 0) {
		int efd = open(p.errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (efd < 0)
			_exit(120);
		dup2(pfd[1], 1);
		dup2(efd, 2);
		close(pfd[0]);
		close(pfd[1]);
		close(efd);
		char *argv[] = { self_exe, "--role", (char *)role, "--bytes", bytes,
				 (char *)arg1, NULL };
		execve(self_exe, argv, envp);
		_exit(121);
	}
	free(envp);
	close(pfd[1]);
	p.out = fdopen(pfd[0], "r");
	if (!p.out)
		DIE_ERRNO("fdopen");
	return p;
}

static int read_line(proc_t *p, char *buf, size_t len)
{
	if (!fgets(buf, (int)len, p->out)) {
		buf[0] = '\0';
		return -1;
	}
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

/* The whole of a child's stderr file (static buffer). */
static const char *stderr_of(proc_t *p)
{
	static char buf[8192];
	FILE *f = fopen(p->errpath, "r");
	size_t n = 0;
	if (f) {
		n = fread(buf, 1, sizeof buf - 1, f);
		fclose(f);
	}
	buf[n] = '\0';
	return buf;
}

static void show_stderr(proc_t *p, const char *who)
{
	const char *s = stderr_of(p);
	if (*s)
		printf("# %s stderr:\n# %s\n", who, s);
}

static int reap(proc_t *p, int kill_it)
{
	int st = 0;
	if (p->pid <= 0)
		return 0;
	if (kill_it)
		kill(p->pid, SIGKILL);
	waitpid(p->pid, &st, 0);
	if (p->out)
		fclose(p->out);
	p->pid = 0;
	return st;
}

struct result {
	char server_tr[32], client_tr[32];
	long connect_us;
	int connect_errno;	/* 0 = connected */
	uint64_t sent, echo, srv_csum, srv_bytes;
	int ok;			/* both lines parsed */
};

/* One exchange: server (preloaded or not) then client (preloaded or not,
 * with extra env).  cfg_for_port, if set, is called with the port to write
 * the client's config before it starts. */
static struct result run_case(const char *tag, int srv_pre, int cli_pre, const char *const *cli_env,
			      void (*cfg_for_port)(uint16_t), proc_t *cli_out)
{
	struct result r;
	char line[256], t1[64], t2[64];
	memset(&r, 0, sizeof r);

	watchdog_arm(60, "case %s", tag);
	proc_t srv = spawn_role(tag, srv_pre, NULL, "server", NULL);
	unsigned port = 0;
	if (read_line(&srv, line, sizeof line) < 0 || sscanf(line, "port %u", &port) != 1) {
		printf("# %s: server did not report its port ('%s')\n", tag, line);
		reap(&srv, 1);
		show_stderr(&srv, "server");
		return r;
	}
	if (cfg_for_port)
		cfg_for_port((uint16_t)port);
	char ctag[64], portstr[16];
	snprintf(ctag, sizeof ctag, "%s-client", tag);
	snprintf(portstr, sizeof portstr, "%u", port);
	proc_t cli = spawn_role(ctag, cli_pre, cli_env, "client", portstr);
	int cok = read_line(&cli, line, sizeof line) == 0;
	int st = reap(&cli, 0);
	if (cok && sscanf(line, "client connect-failed %d %ld", &r.connect_errno, &r.connect_us) == 2) {
		reap(&srv, 1);
		r.ok = 1;
	} else if (cok && sscanf(line, "client %31s %ld %63s %63s", r.client_tr, &r.connect_us, t1,
				 t2) == 4) {
		r.sent = strtoull(t1, NULL, 16);
		r.echo = strtoull(t2, NULL, 16);
		if (read_line(&srv, line, sizeof line) == 0 &&
		    sscanf(line, "server %31s %63s %" SCNu64, r.server_tr, t1, &r.srv_bytes) == 3) {
			r.srv_csum = strtoull(t1, NULL, 16);
			r.ok = 1;
		} else {
			printf("# %s: bad server line '%s'\n", tag, line);
		}
		int sst = reap(&srv, 0);
		if (sst)
			printf("# %s: server exit status 0x%x\n", tag, sst);
	} else {
		printf("# %s: bad client line '%s' (status 0x%x)\n", tag, line, st);
		reap(&srv, 1);
	}
	if (!r.ok) {
		show_stderr(&srv, "server");
		show_stderr(&cli, "client");
	}
	if (cli_out)
		*cli_out = cli;
	watchdog_disarm();
	return r;
}

static void check_data(const char *tag, const struct result *r)
{
	check(r->ok && r->connect_errno == 0 && r->sent == r->echo && r->srv_csum == r->sent &&
		      r->srv_bytes == opt_bytes,
	      "%s: %" PRIu64 " bytes, checksum %016" PRIx64 " sent, %016" PRIx64
	      " received (%" PRIu64 " bytes)",
	      tag, opt_bytes, r->sent, r->srv_csum, r->srv_bytes);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (!f || fputs(text, f) < 0 || fclose(f))
		die("cannot write %s", path);
}

static char cfg_path[300];
static void cfg_tcp_for_port(uint16_t port)
{
	char text[256];
	snprintf(text, sizeof text,
		 "# sdp_fallback case d\n"
		 "use tcp client * 127.0.0.1:%u\n"
		 "use both client * *:*\n",
		 port);
	write_file(cfg_path, text);
}

/* g, h, i: the server's process is stopped before the client starts, and
 * continued once the client's connect returned (its "connected" line), so
 * that the SDP listener cannot have answered in between.  connect_ms: what
 * the client's connect took. */
static struct result run_stalled(const char *tag, const char *const *cli_env, proc_t *cli_out)
{
	struct result r;
	char line[256], t1[64], t2[64], ctag[64], portstr[16];
	unsigned port = 0;

	memset(&r, 0, sizeof r);
	watchdog_arm(60, "case %s", tag);
	proc_t srv = spawn_role(tag, 1, NULL, "server", NULL);
	if (read_line(&srv, line, sizeof line) < 0 || sscanf(line, "port %u", &port) != 1) {
		printf("# %s: server did not report its port ('%s')\n", tag, line);
		reap(&srv, 1);
		return r;
	}
	if (kill(srv.pid, SIGSTOP) < 0)
		DIE_ERRNO("kill(SIGSTOP)");
	snprintf(ctag, sizeof ctag, "%s-client", tag);
	snprintf(portstr, sizeof portstr, "%u", port);
	proc_t cli = spawn_role(ctag, 1, cli_env, "client", portstr);
	int cok = read_line(&cli, line, sizeof line) == 0;
	kill(srv.pid, SIGCONT);
	if (cok && sscanf(line, "client connect-failed %d %ld", &r.connect_errno, &r.connect_us) ==
			   2) {
		r.ok = 1;
		reap(&cli, 0);
		reap(&srv, 1);
	} else if (cok && sscanf(line, "connected %31s %ld", r.client_tr, &r.connect_us) == 2 &&
		   read_line(&cli, line, sizeof line) == 0 &&
		   sscanf(line, "client %31s %*d %63s %63s", r.client_tr, t1, t2) == 3) {
		r.sent = strtoull(t1, NULL, 16);
		r.echo = strtoull(t2, NULL, 16);
		reap(&cli, 0);
		if (read_line(&srv, line, sizeof line) == 0 &&
		    sscanf(line, "server %31s %63s %" SCNu64, r.server_tr, t1, &r.srv_bytes) == 3) {
			r.srv_csum = strtoull(t1, NULL, 16);
			r.ok = 1;
		}
		reap(&srv, !r.ok);
	} else {
		printf("# %s: bad client line '%s'\n", tag, line);
		reap(&cli, 1);
		reap(&srv, 1);
	}
	if (!r.ok) {
		show_stderr(&srv, "server");
		show_stderr(&cli, "client");
	}
	*cli_out = cli;
	watchdog_disarm();
	return r;
}

static int selected(const char *only, char c)
{
	return !only || strchr(only, c);
}

int main(int argc, char **argv)
{
	const char *only = NULL;
	uint16_t cport = 0;
	const char *role = NULL;

	g_prog = "sdp_fallback";
	g_mixed_transports = 1;	/* each case checks its own (transport_of) */
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--bytes") && i + 1 < argc)
			opt_bytes = parse_size(argv[++i]);
		else if (!strcmp(argv[i], "--only") && i + 1 < argc)
			only = argv[++i];
		else if (!strcmp(argv[i], "--known") && i + 1 < argc)
			opt_known = argv[++i];
		else if (!strcmp(argv[i], "--role") && i + 1 < argc)
			role = argv[++i];
		else if (role && !strcmp(role, "client") && !cport)
			cport = (uint16_t)atoi(argv[i]);
		else {
			fprintf(stderr, "usage: sdp_fallback [--bytes N] [--only abcdefghi] [--known CASES]\n");
			return 2;
		}
	}
	if (role && !strcmp(role, "server"))
		return role_server();
	if (role && !strcmp(role, "client"))
		return role_client(cport);

	preload_value = getenv("LD_PRELOAD");
	if (!preload_value || !strstr(preload_value, "libsdp")) {
		printf("SKIP: run with LD_PRELOAD=.../libsdp.so (the test runs one side with it, "
		       "one without)\n");
		return 77;
	}
	ssize_t n = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
	if (n <= 0)
		DIE_ERRNO("readlink(/proc/self/exe)");
	self_exe[n] = '\0';
	snprintf(tmpdir, sizeof tmpdir, "%s/sdp_fallback.XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(tmpdir))
		DIE_ERRNO("mkdtemp");
	char empty[300];
	snprintf(empty, sizeof empty, "%s/empty.conf", tmpdir);
	write_file(empty, "# built-in default rules apply\nuse both server * *:*\nuse both client * *:*\n");
	const char *m = getenv("SDP_TEST_TIMEOUT_MULT");
	double mult = m && atof(m) >= 1 ? atof(m) : 1;
	/* "at once": a refusal, not a timeout.  A loopback TCP connect takes
	 * tens of microseconds; allow generously for loaded machines. */
	long limit_us = (long)(250000 * mult);
	static const char *const log2[] = { "SDP_LOG=2", NULL };
	struct result r;
	proc_t cli;

	if (selected(only, 'a')) {
		cur_case = 'a';
		r = run_case("a", 0, 1, log2, NULL, &cli);
		check_data("a (plain server, preloaded client)", &r);
		check(r.ok && !strcmp(r.client_tr, "tcp"),
		      "a: the client's socket is kernel TCP (SDP_CONN_TRANSPORT: %s)", r.client_tr);
		check(r.ok && !strcmp(r.server_tr, "tcp"), "a: the server's socket is TCP (%s)",
		      r.server_tr);
		check(r.ok && r.connect_errno == 0 && r.connect_us < limit_us,
		      "a: the fallback connect took %ld us (limit %ld us: a refusal, not a timeout)",
		      r.connect_us, limit_us);
		const char *e = stderr_of(&cli);
		check(strstr(e, "over TCP: no SDP listener") != NULL,
		      "a: SDP_LOG=2 names the fallback reason (\"over TCP: no SDP listener ...\")");
		if (nfail)
			show_stderr(&cli, "client");
	}
	if (selected(only, 'b')) {
		cur_case = 'b';
		r = run_case("b", 1, 0, NULL, NULL, NULL);
		check_data("b (preloaded server, plain client)", &r);
		check(r.ok && !strcmp(r.server_tr, "tcp"),
		      "b: the server's accepted socket is TCP (%s)", r.server_tr);
		check(r.ok && !strcmp(r.client_tr, "tcp"), "b: the client's socket is TCP (%s)",
		      r.client_tr);
	}
	if (selected(only, 'c')) {
		cur_case = 'c';
		r = run_case("c", 1, 1, NULL, NULL, NULL);
		check_data("c (both preloaded)", &r);
		check(r.ok && !strcmp(r.server_tr, "shm") && !strcmp(r.client_tr, "shm"),
		      "c: both ends are SDP (server %s, client %s)", r.server_tr, r.client_tr);
	}
	if (selected(only, 'd')) {
		cur_case = 'd';
		char envcfg[340];
		snprintf(cfg_path, sizeof cfg_path, "%s/d.conf", tmpdir);
		snprintf(envcfg, sizeof envcfg, "LIBSDP_CONFIG_FILE=%s", cfg_path);
		const char *const env[] = { envcfg, "SDP_LOG=2", NULL };
		r = run_case("d", 1, 1, env, cfg_tcp_for_port, &cli);
		check_data("d (policy tcp for the destination, SDP-capable server)", &r);
		check(r.ok && !strcmp(r.client_tr, "tcp") && !strcmp(r.server_tr, "tcp"),
		      "d: TCP at both ends although the server listens on SDP too (client %s, "
		      "server %s)",
		      r.client_tr, r.server_tr);
		const char *e = stderr_of(&cli);
		check(strstr(e, "over TCP: policy") != NULL && !strstr(e, "no SDP listener"),
		      "d: decided by the policy, SDP not tried (SDP_LOG=2)");
		if (nfail)
			show_stderr(&cli, "client");
	}
	if (selected(only, 'e')) {
		cur_case = 'e';
		char envcfg[340], path[300];
		snprintf(path, sizeof path, "%s/e.conf", tmpdir);
		write_file(path, "use sdp client * *:*\n");
		snprintf(envcfg, sizeof envcfg, "LIBSDP_CONFIG_FILE=%s", path);
		const char *const env[] = { envcfg, NULL };
		r = run_case("e", 0, 1, env, NULL, NULL);
		check(r.ok && r.connect_errno == ECONNREFUSED,
		      "e: policy sdp to a plain TCP server: connect fails with ECONNREFUSED (got %s)",
		      r.ok ? (r.connect_errno ? strerror(r.connect_errno) : "connected") : "no result");
		check(r.ok && r.connect_us < limit_us, "e: refused at once (%ld us)", r.connect_us);
	}
	if (selected(only, 'f')) {
		cur_case = 'f';
		char envcfg[340], path[300], want[340];
		snprintf(path, sizeof path, "%s/f.conf", tmpdir);
		/* line 3 is a typo: if it were guessed as `client`, the connection
		 * would be TCP; skipped, the next line makes it SDP */
		write_file(path, "# typo on line 3\n"
				 "use both server * *:*\n"
				 "use tcp clinet * *:*\n"
				 "use both client * *:*\n");
		snprintf(envcfg, sizeof envcfg, "LIBSDP_CONFIG_FILE=%s", path);
		const char *const env[] = { envcfg, NULL };
		r = run_case("f", 1, 1, env, NULL, &cli);
		check_data("f (config with a typo line)", &r);
		check(r.ok && !strcmp(r.client_tr, "shm"),
		      "f: the bad line is skipped, the others apply: client over SDP (%s)",
		      r.client_tr);
		const char *e = stderr_of(&cli);
		int lines = 0, named = 0;
		snprintf(want, sizeof want, "%s:3:", path);
		for (const char *p = e; *p;) {
			const char *nl = strchr(p, '\n');
			size_t l = nl ? (size_t)(nl - p) : strlen(p);
			if (l) {
				lines++;
				if (memmem(p, l, want, strlen(want)))
					named++;
			}
			p += l + (nl ? 1 : 0);
		}
		check(lines == 1 && named == 1,
		      "f: exactly one error line on stderr naming %s (%d lines, %d naming it)", want,
		      lines, named);
		printf("# f: client stderr: %s", e);
	}
	/* The handshake deadline of g, h and i, and what "after it" means. */
	static const char *const stalled_env[] = { "SDP_CONNECT_TIMEOUT_MS=400", "SDP_LOG=2",
						   "SDP_TEST_ANNOUNCE=1", NULL };
	static const char *const stalled_nb_env[] = { "SDP_CONNECT_TIMEOUT_MS=400", "SDP_LOG=2",
						      "SDP_TEST_ANNOUNCE=1", "SDP_TEST_NONBLOCK=1",
						      NULL };
	const char *why = "over TCP: the SDP listener did not answer within 400 ms";
	if (selected(only, 'g')) {
		cur_case = 'g';
		r = run_stalled("g", stalled_env, &cli);
		check_data("g (stopped SDP server, blocking connect)", &r);
		check(r.ok && !strcmp(r.client_tr, "tcp") && !strcmp(r.server_tr, "tcp"),
		      "g: TCP at both ends after the deadline (client %s, server %s)", r.client_tr,
		      r.server_tr);
		check(r.ok && r.connect_us >= 400000 && r.connect_us < 400000 + limit_us * 8,
		      "g: the connect returned after the 400 ms deadline (%ld us)", r.connect_us);
		check(strstr(stderr_of(&cli), why) != NULL, "g: SDP_LOG=2 names the cause (\"%s\")",
		      why);
		if (nfail)
			show_stderr(&cli, "client");
	}
	if (selected(only, 'h')) {
		cur_case = 'h';
		r = run_stalled("h", stalled_nb_env, &cli);
		check_data("h (stopped SDP server, non-blocking connect in epoll)", &r);
		check(r.ok && !strcmp(r.client_tr, "tcp") && !strcmp(r.server_tr, "tcp"),
		      "h: TCP at both ends after the deadline (client %s, server %s)", r.client_tr,
		      r.server_tr);
		check(strstr(stderr_of(&cli), why) != NULL, "h: SDP_LOG=2 names the cause");
		if (nfail)
			show_stderr(&cli, "client");
	}
	if (selected(only, 'i')) {
		cur_case = 'i';
		char envcfg[340], path[300];
		snprintf(path, sizeof path, "%s/i.conf", tmpdir);
		write_file(path, "use sdp client * *:*\n");
		snprintf(envcfg, sizeof envcfg, "LIBSDP_CONFIG_FILE=%s", path);
		const char *const env[] = { envcfg, "SDP_CONNECT_TIMEOUT_MS=400", "SDP_LOG=2",
					    "SDP_TEST_ANNOUNCE=1", NULL };
		r = run_stalled("i", env, &cli);
		check(r.ok && r.connect_errno == ETIMEDOUT,
		      "i: policy sdp to a stopped SDP server: connect fails with ETIMEDOUT (got %s)",
		      r.ok ? (r.connect_errno ? strerror(r.connect_errno) : "connected") : "no result");
		check(r.ok && r.connect_us >= 400000, "i: after the deadline (%ld us)", r.connect_us);
	}
	printf("%d tests, %d failed, %d known failures (--known %s)\n", ntest, nfail, nknown,
	       *opt_known ? opt_known : "none");
	if (!nfail) {
		/* keep the temporary files of a failed run for inspection */
		DIR *d = opendir(tmpdir);
		struct dirent *de;
		char f[600];
		while (d && (de = readdir(d))) {
			if (de->d_name[0] == '.')
				continue;
			snprintf(f, sizeof f, "%s/%s", tmpdir, de->d_name);
			unlink(f);
		}
		if (d)
			closedir(d);
		rmdir(tmpdir);
	} else {
		printf("# files kept in %s\n", tmpdir);
	}
	return nfail ? 1 : 0;
}
