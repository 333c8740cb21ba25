/* SPDX-License-Identifier: MIT */
/*
 * sdp_stat: sdpstat sees live SDP connections and forgets closed ones.
 *
 * A forked server (listens, accepts one connection, reads a checksummed
 * stream, answers with its checksum) and a forked client (connects, sends,
 * checks the answer) keep their connection open while the parent runs
 * build/bin/sdpstat --json -p PID for each of them.  The connection must
 * appear in both, ESTABLISHED, over shm, with the client's TX and the
 * server's RX byte counters at least the bytes sent, and each side's ports
 * the mirror of the other's.  Then the client closes, the server reads EOF
 * and closes, and both processes (still alive) must stop listing it.
 *
 * Listening sockets: the parent listens (backlog 7), two clients connect
 * without being accepted; `sdpstat -l` must list the listener with its fd,
 * port, kind, backlog and 2 pending, then 1 pending and 1 accepted after an
 * accept(), and forget it once closed.
 *
 * sdpstat is found next to this program: dirname(/proc/self/exe)/../bin.
 * It runs without the preload (it is a plain tool).
 */
#include "itest_common.h"

#include <spawn.h>

extern char **environ;

#define NBYTES (4u * 1024 * 1024 + 5)

static char g_sdpstat[4096 + 32];

/* One byte on a pipe: a step of the script.  0 on EOF. */
static void step_send(int fd, char c)
{
	if (write(fd, &c, 1) != 1)
		DIE_ERRNO("write(pipe)");
}

static char step_wait(int fd, const char *what)
{
	char c;
	ssize_t n;

	do {
		n = read(fd, &c, 1);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		DIE_ERRNO("read(pipe)");
	if (n == 0)
		die("%s: the other side went away", what);
	return c;
}

static void fill(unsigned char *buf, size_t len)
{
	prng_t r;

	prng_seed(&r, 42);
	prng_fill(&r, buf, len);
}

/* ---- server child: listen, accept, read, answer, wait for EOF ------------ */

static void server_main(int up, int down)
{
	unsigned char *buf = malloc(NBYTES);
	uint16_t port;
	uint64_t sum;
	int lfd, fd;

	watchdog_arm(60, "server");
	lfd = make_listener(&port, 4);
	if (write(up, &port, sizeof(port)) != sizeof(port))
		DIE_ERRNO("write(port)");
	fd = accept_one(lfd);
	close(lfd);
	if (read_full(fd, buf, NBYTES, "server data") != NBYTES)
		die("server: short stream");
	sum = csum_buf(buf, NBYTES);
	write_full(fd, &sum, sizeof(sum), "server checksum");
	step_send(up, 'R');			/* data exchanged */
	if (read_full(fd, buf, 1, "server eof") != 0)
		die("server: expected EOF after the client's close");
	if (close(fd) < 0)
		DIE_ERRNO("server close");
	step_send(up, 'C');			/* closed */
	step_wait(down, "server");		/* exit when told */
	free(buf);
	_exit(0);
}

/* ---- client child: connect, send, check, close when told ----------------- */

static void client_main(uint16_t port, int up, int down)
{
	unsigned char *buf = malloc(NBYTES);
	uint64_t sum;
	int fd;

	watchdog_arm(60, "client");
	fill(buf, NBYTES);
	fd = connect_to(port);
	write_full(fd, buf, NBYTES, "client data");
	if (read_full(fd, &sum, sizeof(sum), "client checksum") != sizeof(sum))
		die("client: no checksum");
	if (sum != csum_buf(buf, NBYTES))
		die("client: checksum mismatch");
	if (write(up, &fd, sizeof(fd)) != sizeof(fd))
		DIE_ERRNO("write(fd)");
	step_wait(down, "client");		/* close now */
	if (close(fd) < 0)
		DIE_ERRNO("client close");
	step_send(up, 'C');
	step_wait(down, "client");		/* exit when told */
	free(buf);
	_exit(0);
}

/* ---- running sdpstat ----------------------------------------------------- */

/* Output of `sdpstat --json -p pid` (malloc'd); dies unless it exits 0. */
static char *run_sdpstat_opt(pid_t pid, const char *opt)
{
	char pidarg[16], *out = NULL;
	size_t len = 0, cap = 0;
	int p[2], st;
	pid_t c;

	snprintf(pidarg, sizeof(pidarg), "%d", (int)pid);
	if (pipe(p) < 0)
		DIE_ERRNO("pipe");
	/* posix_spawn, not fork(): fork() would make our listeners shared
	 * (lsnfd.c), and a shared listener completes handshakes only in
	 * accept(), so check_listeners()'s own connects would wait. */
	{
		char *argv[6] = { "sdpstat", opt ? (char *)opt : "--json", "-p",
				  pidarg, NULL }, **envp;
		posix_spawn_file_actions_t fa;
		size_t ne = 0, k = 0;

		while (environ[ne])
			ne++;
		envp = calloc(ne + 1, sizeof(*envp));
		if (!envp)
			die("out of memory");
		for (size_t i = 0; i < ne; i++)
			if (strncmp(environ[i], "LD_PRELOAD=", 11))
				envp[k++] = environ[i];
		posix_spawn_file_actions_init(&fa);
		posix_spawn_file_actions_adddup2(&fa, p[1], 1);
		posix_spawn_file_actions_addclose(&fa, p[0]);
		if (posix_spawn(&c, g_sdpstat, &fa, NULL, argv, envp))
			die("posix_spawn(sdpstat) failed");
		posix_spawn_file_actions_destroy(&fa);
		free(envp);
	}
	close(p[1]);
	for (;;) {
		ssize_t n;

		if (len + 4096 + 1 > cap) {
			cap = cap ? cap * 2 : 16384;
			out = realloc(out, cap);
			if (!out)
				die("out of memory");
		}
		n = read(p[0], out + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	out[len] = '\0';
	close(p[0]);
	if (waitpid(c, &st, 0) < 0)
		DIE_ERRNO("waitpid(sdpstat)");
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		die("sdpstat %s -p %d failed (status 0x%x), output:\n%s",
		    opt ? opt : "--json", (int)pid, st, out);
	return out;
}

static char *run_sdpstat(pid_t pid)
{
	return run_sdpstat_opt(pid, NULL);
}

/* Number field of a JSON object line, or -1. */
static long long json_num(const char *obj, const char *key)
{
	char k[64];
	const char *p;

	snprintf(k, sizeof(k), "\"%s\": ", key);
	p = strstr(obj, k);
	return p ? strtoll(p + strlen(k), NULL, 10) : -1;
}

/* String field (into buf), or "". */
static const char *json_str(const char *obj, const char *key, char *buf,
			    size_t len)
{
	char k[64];
	const char *p, *e;

	snprintf(k, sizeof(k), "\"%s\": \"", key);
	buf[0] = '\0';
	p = strstr(obj, k);
	if (!p)
		return buf;
	p += strlen(k);
	e = strchr(p, '"');
	if (e && (size_t)(e - p) < len) {
		memcpy(buf, p, (size_t)(e - p));
		buf[e - p] = '\0';
	}
	return buf;
}

static int port_of(const char *addr)
{
	const char *c = strrchr(addr, ':');

	return c ? atoi(c + 1) : -1;
}

/*
 * Find the record of the connection whose remote port is `rport` in the
 * output (one object per line).  Copies that line to `line`; 1 if found.
 */
static int find_conn(const char *out, int rport, char *line, size_t len)
{
	const char *p = out;
	char remote[80];

	while ((p = strstr(p, "\n  {"))) {
		const char *e = strchr(p + 1, '\n');
		size_t n = e ? (size_t)(e - p - 1) : strlen(p + 1);

		if (n >= len)
			n = len - 1;
		memcpy(line, p + 1, n);
		line[n] = '\0';
		json_str(line, "remote", remote, sizeof(remote));
		if (port_of(remote) == rport)
			return 1;
		p += 1;
	}
	return 0;
}

static void check_conn(pid_t pid, const char *who, int lport, int rport,
		       int fd, const char *bytes_key, unsigned long long min)
{
	char *out = run_sdpstat(pid), line[2048], buf[80];
	long long v;

	if (!find_conn(out, rport, line, sizeof(line)))
		die("%s (pid %d): no connection to port %d in sdpstat:\n%s",
		    who, (int)pid, rport, out);
	info("%s: %s", who, line);
	if (strcmp(json_str(line, "state", buf, sizeof(buf)), "ESTABLISHED"))
		die("%s: state '%s', expected ESTABLISHED", who, buf);
	if (strcmp(json_str(line, "transport", buf, sizeof(buf)), "shm"))
		die("%s: transport '%s', expected shm", who, buf);
	if (port_of(json_str(line, "local", buf, sizeof(buf))) != lport)
		die("%s: local address %s, expected port %d", who, buf, lport);
	v = json_num(line, bytes_key);
	if (v < 0 || (unsigned long long)v < min)
		die("%s: %s = %lld, expected >= %llu", who, bytes_key, v, min);
	/* Descriptors are filled in by the socket switch; when they are,
	 * they must be the application's. */
	v = json_num(line, "fd");
	if (fd >= 0 && v >= 0 && v != fd)
		die("%s: fd %lld, expected %d", who, v, fd);
	free(out);
}

/* Wait (bounded) until pid lists no connection to rport. */
static void check_gone(pid_t pid, const char *who, int rport)
{
	double end = now_sec() + 10 * (getenv("SDP_TEST_TIMEOUT_MULT") ?
				       atoi(getenv("SDP_TEST_TIMEOUT_MULT")) : 1);
	char line[2048];

	for (;;) {
		char *out = run_sdpstat(pid);
		int found = find_conn(out, rport, line, sizeof(line));

		if (!found) {
			free(out);
			return;
		}
		if (now_sec() > end)
			die("%s: closed connection still listed:\n%s", who, out);
		free(out);
		usleep(50000);
	}
}

static void find_sdpstat(void)
{
	char exe[4096], *slash;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n <= 0)
		DIE_ERRNO("readlink(/proc/self/exe)");
	exe[n] = '\0';
	slash = strrchr(exe, '/');
	if (slash)
		*slash = '\0';
	snprintf(g_sdpstat, sizeof(g_sdpstat), "%s/../bin/sdpstat", exe);
	if (access(g_sdpstat, X_OK) < 0)
		die("%s: not found or not executable (build the tools)",
		    g_sdpstat);
}

/* ---- listening sockets: sdpstat -l ---------------------------------------- */

/* The `sdpstat -l` table row of our listener on `port`: 1 if found, with
 * the columns after LOCAL. */
static int listener_row(uint16_t port, int fd, char *kind, char *state,
			unsigned *backlog, unsigned *pending, unsigned *acc)
{
	char *out = run_sdpstat_opt(getpid(), "-l"), *line, *save = NULL;
	char want[32];
	int found = 0;

	snprintf(want, sizeof(want), ":%u", port);
	for (line = strtok_r(out, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char prog[64], local[80];
		int pid, rfd;
		unsigned ref;

		if (sscanf(line, "%d %*s %63s %d %79s %15s %15s %u %u %u %u",
			   &pid, prog, &rfd, local, kind, state, backlog,
			   pending, acc, &ref) != 10)
			continue;
		if (rfd == fd && strstr(local, want)) {
			found = 1;
			break;
		}
	}
	free(out);
	return found;
}

/* Wait (bounded) until the row shows `pending` and `acc`: the progress
 * thread queues a connection just after the client's connect returns. */
static void expect_listener(uint16_t port, int fd, unsigned backlog,
			    unsigned pending, unsigned acc)
{
	char kind[16], state[16];
	unsigned b = 0, p = 0, a = 0;

	for (int i = 0; i < 200; i++) {
		if (listener_row(port, fd, kind, state, &b, &p, &a) &&
		    !strcmp(kind, "sdp") && !strncmp(state, "LISTEN", 6) &&
		    b == backlog && p == pending && a == acc)
			return;
		poll(NULL, 0, 10);
	}
	die("sdpstat -l: listener fd %d port %u: want kind sdp, backlog %u, "
	    "pending %u, accepted %u; last seen backlog %u pending %u "
	    "accepted %u", fd, port, backlog, pending, acc, b, p, a);
}

/* -u USER: our own user's listener is listed, with its USER column; for
 * another user, nothing. */
static void check_user_filter(uint16_t port, int fd)
{
	char opt[32], want[32], *out;

	snprintf(want, sizeof(want), ":%u", port);
	snprintf(opt, sizeof(opt), "-lu%u", (unsigned)getuid());
	out = run_sdpstat_opt(getpid(), opt);
	if (!strstr(out, want) || !strstr(out, "USER"))
		die("sdpstat %s: the listener (fd %d, port %u) is not listed "
		    "with a USER column:\n%s", opt, fd, port, out);
	free(out);
	snprintf(opt, sizeof(opt), "-lu%u", (unsigned)getuid() + 1);
	out = run_sdpstat_opt(getpid(), opt);
	if (strstr(out, want))
		die("sdpstat %s: another user's filter lists our listener:\n%s",
		    opt, out);
	free(out);
	info("sdpstat -u: our listener under our user only");
}

static void check_listeners(void)
{
	char kind[16], state[16];
	unsigned b, p, a;
	uint16_t port;
	int l = make_listener(&port, 7), c1, c2, s1;

	expect_listener(port, l, 7, 0, 0);
	check_user_filter(port, l);
	c1 = connect_to(port);
	c2 = connect_to(port);
	expect_listener(port, l, 7, 2, 0);
	s1 = accept_one(l);
	expect_listener(port, l, 7, 1, 1);
	close(l);
	if (listener_row(port, l, kind, state, &b, &p, &a))
		die("sdpstat -l: closed listener still listed");
	close(s1);
	close(c1);
	close(c2);
	info("sdpstat -l: listener listed (fd, port, kind, backlog, pending, "
	     "accepted), then gone after close");
}

/* The file reserves its records in steps as sockets come (a full /dev/shm
 * must cost a socket its record, never the process a SIGBUS): hundreds of
 * listeners are all listed. */
#define MANY_LISTENERS 300
static void check_many_listeners(void)
{
	int fds[MANY_LISTENERS], listed = 0, i;
	char *out, *line, *save = NULL;
	uint16_t port;

	for (i = 0; i < MANY_LISTENERS; i++)
		fds[i] = make_listener(&port, 1);
	out = run_sdpstat_opt(getpid(), "-l");
	for (line = strtok_r(out, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		int pid, rfd;

		if (sscanf(line, "%d %*s %*s %d", &pid, &rfd) == 2 &&
		    pid == getpid())
			listed++;
	}
	free(out);
	for (i = 0; i < MANY_LISTENERS; i++)
		close(fds[i]);
	if (listed != MANY_LISTENERS)
		die("sdpstat -l: %d of %d listeners listed", listed,
		    MANY_LISTENERS);
	info("sdpstat -l: all %d listeners of one process listed",
	     MANY_LISTENERS);
}

int main(int argc, char **argv)
{
	int sup[2], sdown[2], cup[2], cdown[2], cfd;
	pid_t spid, cpid;
	uint16_t port;
	int cport;
	char *out, line[2048], buf[80];

	g_prog = "sdp_stat";
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--family") && i + 1 < argc) {
			if (set_family(argv[++i]))
				die("bad family '%s'", argv[i]);
		} else {
			fprintf(stderr, "usage: sdp_stat %s\n", family_usage());
			return 2;
		}
	}
	if (!is_sdp()) {
		printf("sdp_stat: SKIP: sdpstat lists SDP sockets only\n");
		return 77;
	}
	find_sdpstat();
	signal(SIGPIPE, SIG_IGN);
	check_listeners();
	check_many_listeners();
	if (pipe(sup) || pipe(sdown) || pipe(cup) || pipe(cdown))
		DIE_ERRNO("pipe");
	spid = fork();
	if (spid < 0)
		DIE_ERRNO("fork");
	if (spid == 0)
		server_main(sup[1], sdown[0]);
	if (read(sup[0], &port, sizeof(port)) != sizeof(port))
		die("server did not report its port");
	cpid = fork();
	if (cpid < 0)
		DIE_ERRNO("fork");
	if (cpid == 0)
		client_main(port, cup[1], cdown[0]);
	watchdog_arm(60, "parent");
	if (read(cup[0], &cfd, sizeof(cfd)) != sizeof(cfd))
		die("client failed before the exchange completed");
	if (step_wait(sup[0], "server") != 'R')
		die("server: unexpected step");
	info("exchanged %u bytes; server pid %d port %u, client pid %d fd %d",
	     NBYTES, (int)spid, port, (int)cpid, cfd);

	/* The client's port: from its own record (the one to our port). */
	out = run_sdpstat(cpid);
	if (!find_conn(out, port, line, sizeof(line)))
		die("client (pid %d): connection to port %u not listed:\n%s",
		    (int)cpid, port, out);
	cport = port_of(json_str(line, "local", buf, sizeof(buf)));
	free(out);
	check_conn(cpid, "client", cport, port, cfd, "tx_bytes", NBYTES);
	check_conn(spid, "server", port, cport, -1, "rx_bytes", NBYTES);

	step_send(cdown[1], 'c');		/* client: close */
	if (step_wait(cup[0], "client") != 'C' ||
	    step_wait(sup[0], "server") != 'C')
		die("unexpected step after close");
	check_gone(cpid, "client", port);
	check_gone(spid, "server", cport);
	info("closed connection gone from both processes");

	step_send(cdown[1], 'x');
	step_send(sdown[1], 'x');
	if (wait_child(cpid, "client") || wait_child(spid, "server"))
		die("a child failed");
	watchdog_disarm();
	info("PASS");
	return 0;
}
