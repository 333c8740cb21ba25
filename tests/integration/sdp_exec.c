/* SPDX-License-Identifier: MIT */
/*
 * sdp_exec — connections across exec() and daemon():
 *   a. a process execs with a connection open without FD_CLOEXEC; the new
 *      image (this program, --helper) finds a descriptor that fails at once:
 *      poll reports POLLHUP|POLLERR, recv ECONNRESET, send EPIPE (over SDP;
 *      over kernel TCP the connection survives and echoes checksummed data);
 *      the peer gets ECONNRESET or EOF, never a hang;
 *   b. the same with FD_CLOEXEC: the descriptor is gone (EBADF);
 *   c. execve/execv/execvp/execl/posix_spawn failing (no such program)
 *      leave the connection working: flags kept, checksummed echo;
 *   d. daemon(0, 0): the connection keeps working in the daemon
 *      (checksummed echo), then EOF;
 *   e. posix_spawn (no file actions), vfork+execv and fork+execv of a
 *      helper while the parent goes on using the connection (a client
 *      spawning a helper that inherits it by accident): the helper's copy
 *      fails cleanly, the parent's works (checksummed echo);
 *   f. posix_spawn with file actions that dup2 the connection onto the
 *      child's stdin (inetd-style) and close the original: the child's
 *      stdin fails cleanly, the parent's connection works;
 *   g. system() and popen()/pclose() running the helper through /bin/sh:
 *      the same, and the shell's exit status and output come back;
 *   h. inetd-style: a server forks, the child puts the accepted connection
 *      on its stdin and stdout and execs the helper, which serves there:
 *      checksummed echo, then half-closes both ways (its EOF reaches the
 *      peer while the peer's last bytes still reach it); the server closes
 *      its own copy at once, or only after the helper is done.
 * Usage: sdp_exec --family sdp|sdp6|tcp|tcp6
 *        sdp_exec --helper reset|gone|tcp|shared|inetd FD FAMILY (internal)
 */
#include "itest_common.h"

#include <spawn.h>

extern char **environ;

#define CHUNK 8192
#define ROUNDS 32

/* Ping-pong ROUNDS chunks of pseudo-random bytes through `echo_fd`'s peer:
 * `fd` sends, reads the echo back, and compares checksums. */
static void pingpong_client(int fd, uint64_t seed, const char *what)
{
	unsigned char out[CHUNK], in[CHUNK];
	csum_t cs_out, cs_in;
	prng_t r;
	int i;

	prng_seed(&r, seed);
	csum_init(&cs_out);
	csum_init(&cs_in);
	for (i = 0; i < ROUNDS; i++) {
		prng_fill(&r, out, sizeof(out));
		csum_update(&cs_out, out, sizeof(out));
		write_full(fd, out, sizeof(out), what);
		if (read_full(fd, in, sizeof(in), what) != sizeof(in))
			die("%s: EOF in the echo", what);
		csum_update(&cs_in, in, sizeof(in));
	}
	if (csum_final(&cs_out) != csum_final(&cs_in))
		die("%s: echo checksum mismatch", what);
}

/* Echo exactly ROUNDS chunks. */
static void pingpong_server(int fd, const char *what)
{
	unsigned char b[CHUNK];
	int i;

	for (i = 0; i < ROUNDS; i++) {
		if (read_full(fd, b, sizeof(b), what) != sizeof(b))
			die("%s: EOF before the last chunk", what);
		write_full(fd, b, sizeof(b), what);
	}
}

/* The peer of a connection whose holder went away: ECONNRESET or EOF. */
static void expect_gone(int s, const char *what)
{
	char b[16];
	ssize_t n;

	watchdog_arm(10, "%s: the peer never learned", what);
	do
		n = recv(s, b, sizeof(b), 0);
	while (n < 0 && errno == EINTR);
	watchdog_disarm();
	if (n > 0)
		die("%s: peer read %zd unexpected bytes", what, n);
	if (n < 0 && errno != ECONNRESET)
		die("%s: peer's recv failed with %s, expected ECONNRESET or EOF",
		    what, strerror(errno));
	info("%s: the peer sees %s", what, n == 0 ? "EOF" : "ECONNRESET");
}

/* ---- the exec'd image --------------------------------------------------- */

static int port_of(const struct sockaddr_storage *a)
{
	return ntohs(a->ss_family == AF_INET6 ?
		     ((const struct sockaddr_in6 *)a)->sin6_port :
		     ((const struct sockaddr_in *)a)->sin_port);
}

static int helper(const char *mode, int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN | POLLOUT };
	char b[16];
	ssize_t n;
	int r;

	alarm(10);	/* a hang is a failure (SIGALRM kills us) */
	if (!strcmp(mode, "gone")) {
		if (fcntl(fd, F_GETFD) != -1 || errno != EBADF)
			die("helper: fd %d still open after a close-on-exec exec",
			    fd);
		if (recv(fd, b, sizeof(b), 0) != -1 || errno != EBADF)
			die("helper: recv on fd %d: not EBADF", fd);
		info("helper: fd %d is gone (EBADF)", fd);
		return 0;
	}
	if (!strcmp(mode, "shared")) {	/* kernel TCP: a live shared copy */
		if (fcntl(fd, F_GETFD) < 0)
			DIE_ERRNO("helper: fcntl(F_GETFD)");
		return 0;
	}
	if (!strcmp(mode, "inetd")) {	/* serving on stdin/stdout */
		struct sockaddr_storage a;
		socklen_t al = sizeof(a);
		int one = 1, v = 0;
		socklen_t vl = sizeof(v);

		/* It answers as the TCP connection it carries: the peer's
		 * address (its port is `fd` here), TCP options. */
		if (getpeername(1, (struct sockaddr *)&a, &al) < 0)
			DIE_ERRNO("helper: getpeername(stdout)");
		if (a.ss_family != g_af || port_of(&a) != fd)
			die("helper: getpeername: family %d port %d, expected "
			    "the client's port %d", a.ss_family, port_of(&a),
			    fd);
		if (setsockopt(0, IPPROTO_TCP, TCP_NODELAY, &one,
			       sizeof(one)) < 0 ||
		    getsockopt(0, IPPROTO_TCP, TCP_NODELAY, &v, &vl) < 0 ||
		    !v)
			die("helper: TCP_NODELAY on stdin: %s", strerror(errno));
		pingpong_server(0, "helper: echo on stdin/stdout");
		write_full(1, "bye", 3, "helper: last words");
		if (shutdown(1, SHUT_WR) < 0)
			DIE_ERRNO("helper: shutdown(stdout)");
		if (read_full(0, b, 3, "helper: peer's last words") != 3 ||
		    memcmp(b, "end", 3))
			die("helper: the peer's last bytes did not come");
		if (read_full(0, b, 1, "helper: EOF") != 0)
			die("helper: no EOF after the peer's shutdown");
		return 0;	/* (info() would write to stdout: the socket) */
	}
	if (!strcmp(mode, "tcp")) {	/* kernel TCP survives exec */
		pingpong_client(fd, 77, "helper echo after exec");
		close(fd);
		info("helper: kernel TCP connection survived exec");
		return 0;
	}
	/* "reset": an SDP descriptor cannot survive the exec. */
	r = poll(&p, 1, 5000);
	if (r != 1)
		die("helper: poll on fd %d returned %d (expected it ready at "
		    "once)", fd, r);
	if (!(p.revents & (POLLHUP | POLLERR)))
		die("helper: poll revents 0x%x lack POLLHUP/POLLERR", p.revents);
	n = recv(fd, b, sizeof(b), 0);
	if (n != -1 || errno != ECONNRESET)
		die("helper: recv returned %zd (%s), expected ECONNRESET", n,
		    n < 0 ? strerror(errno) : "data");
	n = recv(fd, b, sizeof(b), 0);
	if (n != 0)
		die("helper: second recv returned %zd, expected EOF", n);
	n = send(fd, "x", 1, MSG_NOSIGNAL);
	if (n != -1 || (errno != EPIPE && errno != ECONNRESET))
		die("helper: send returned %zd (%s), expected EPIPE", n,
		    n < 0 ? strerror(errno) : "sent");
	if (fcntl(fd, F_GETFD) & FD_CLOEXEC)
		die("helper: fd %d gained FD_CLOEXEC", fd);
	info("helper: fd %d: poll 0x%x, recv ECONNRESET then EOF, send EPIPE",
	     fd, p.revents);
	return 0;
}

static void exec_helper(const char *mode, int fd)
{
	char num[16];

	snprintf(num, sizeof(num), "%d", fd);
	execl("/proc/self/exe", "sdp_exec", "--helper", mode, num,
	      g_family_name, (char *)NULL);
	DIE_ERRNO("execl(/proc/self/exe)");
}

/* ---- a/b: exec with an inherited connection ------------------------------ */

static void case_exec(int cloexec)
{
	const char *what = cloexec ? "case b (FD_CLOEXEC)" : "case a (exec)";
	uint16_t port;
	int l = make_listener(&port, 4), s, sdp;
	pid_t ch;

	ch = fork();
	if (ch < 0)
		DIE_ERRNO("fork");
	if (ch == 0) {
		int c, fd;

		close(l);
		c = connect_to(port);
		pingpong_client(c, 1, "child echo before exec");
		sdp = fd_over_sdp(c);
		fd = c;
		if (cloexec) {
			fd = dup3(c, 100, O_CLOEXEC);
			if (fd != 100)
				DIE_ERRNO("dup3");
			close(c);
		}
		exec_helper(cloexec ? "gone" : sdp ? "reset" : "tcp", fd);
	}
	s = accept_one(l);
	close(l);
	sdp = fd_over_sdp(s);
	pingpong_server(s, "peer echo before exec");
	if (!sdp && !cloexec) {
		pingpong_server(s, "peer echo after exec");
		if (read_full(s, (char[1]){ 0 }, 1, "peer") != 0)
			die("%s: no EOF after the helper closed", what);
	} else {
		expect_gone(s, what);
	}
	if (wait_child(ch, "exec'd helper"))
		die("%s: the helper failed", what);
	close(s);
	info("ok: %s: %s", what,
	     cloexec ? "descriptor gone in the new image" :
	     sdp ? "inherited SDP descriptor fails cleanly in the new image" :
		   "kernel TCP connection survived exec");
}

/* ---- c: exec failing ------------------------------------------------------ */

static void pair(int *c, int *s)
{
	uint16_t port;
	int l = make_listener(&port, 4);

	*c = connect_to(port);
	*s = accept_one(l);
	close(l);
}

static void check_flags(int fd, int nonblock, const char *what)
{
	int fl = fcntl(fd, F_GETFL), fdfl = fcntl(fd, F_GETFD);

	if (fl < 0 || fdfl < 0)
		die("%s: fd %d broken after a failed exec: %s", what, fd,
		    strerror(errno));
	if (!!(fl & O_NONBLOCK) != nonblock || (fdfl & FD_CLOEXEC))
		die("%s: flags changed by a failed exec (fl 0x%x fd 0x%x)",
		    what, fl, fdfl);
}

/* An echo server in a thread, so that one process can drive both ends. */
static void *echo_thread(void *arg)
{
	pingpong_server(*(int *)arg, "echo thread");
	return NULL;
}

static void case_exec_fails(void)
{
	static char *const argv[] = { "sdp-exec-no-such", NULL };
	const char *bad = "/nonexistent/sdp-exec-no-such";
	int c, s, sdp, err;
	pid_t pid;
	pthread_t th;
	char b;

	pair(&c, &s);
	sdp = fd_over_sdp(c);
	set_nonblock(c, 1);
	if (execve(bad, argv, environ) != -1 || errno != ENOENT)
		die("case c: execve did not fail with ENOENT");
	check_flags(c, 1, "case c: execve");
	check_flags(s, 0, "case c: execve (peer)");
	set_nonblock(c, 0);
	if (execv(bad, argv) != -1 || errno != ENOENT)
		die("case c: execv did not fail with ENOENT");
	if (execvp("sdp-exec-no-such", argv) != -1 || errno != ENOENT)
		die("case c: execvp did not fail with ENOENT");
	if (execl(bad, "x", (char *)NULL) != -1 || errno != ENOENT)
		die("case c: execl did not fail with ENOENT");
	if (execlp("sdp-exec-no-such", "x", (char *)NULL) != -1 ||
	    errno != ENOENT)
		die("case c: execlp did not fail with ENOENT");
	err = posix_spawn(&pid, bad, NULL, NULL, argv, environ);
	if (err == 0) {	/* older glibc reports it as exit status 127 */
		if (wait_child(pid, "spawned nonexistent program") != 127)
			die("case c: posix_spawn of a missing program");
	} else if (err != ENOENT) {
		die("case c: posix_spawn: %s", strerror(err));
	}
	check_flags(c, 0, "case c: all");
	if (fd_over_sdp(c) != sdp)
		die("case c: the socket changed transport");
	/* Nothing stray became readable. */
	{
		struct pollfd p[2] = { { .fd = c, .events = POLLIN },
				       { .fd = s, .events = POLLIN } };

		if (poll(p, 2, 0) != 0)
			die("case c: a socket is readable with nothing sent "
			    "(0x%x 0x%x)", p[0].revents, p[1].revents);
	}
	if (pthread_create(&th, NULL, echo_thread, &s))
		die("pthread_create");
	pingpong_client(c, 3, "case c: echo after failed execs");
	pthread_join(th, NULL);
	close(c);
	if (recv(s, &b, 1, 0) != 0)
		die("case c: no EOF after close");
	close(s);
	info("ok: case c: failed execs leave the connection working");
}

/* ---- d: daemon(3) ----------------------------------------------------------- */

static void case_daemon_run(void)
{
	uint16_t port;
	int l = make_listener(&port, 4), s;
	pid_t ch;
	char b;

	ch = fork();
	if (ch < 0)
		DIE_ERRNO("fork");
	if (ch == 0) {
		int c;

		close(l);
		c = connect_to(port);
		if (daemon(0, 0) < 0)
			_exit(3);
		/* Now in the daemon: its parent left with _exit() inside
		 * glibc's daemon(), skipping libsdp's exit handling. */
		alarm(30);	/* never outlive the test */
		pingpong_server(c, "daemon echo");
		if (recv(c, &b, 1, 0) != 0)
			_exit(4);
		close(c);
		exit(0);
	}
	s = accept_one(l);
	close(l);
	if (wait_child(ch, "daemon's parent"))
		die("case d: daemon() failed");
	watchdog_arm(20, "case d: the daemon's echo never came");
	pingpong_client(s, 4, "case d: echo through the daemon");
	shutdown(s, SHUT_WR);
	if (read_full(s, &b, 1, "case d: EOF") != 0)
		die("case d: no EOF from the daemon");
	watchdog_disarm();
	close(s);
	info("ok: case d: the connection kept working in the daemon");
}

/* ---- e: spawned / vforked helpers while the parent goes on --------------- */

static void case_spawn(void)
{
	char num[16], *argv[6];
	int c, s, sdp;
	pid_t pid;
	pthread_t th;

	pair(&c, &s);
	sdp = fd_over_sdp(c);
	snprintf(num, sizeof(num), "%d", c);
	argv[0] = "sdp_exec";
	argv[1] = "--helper";
	argv[2] = sdp ? "reset" : "shared";
	argv[3] = num;
	argv[4] = (char *)g_family_name;
	argv[5] = NULL;
	if (posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, environ))
		die("case e: posix_spawn failed");
	if (wait_child(pid, "spawned helper"))
		die("case e: the spawned helper failed");
	/* vfork, then fork: a child that execs while the parent goes on
	 * using the connection (a client spawning a helper). */
	for (int k = 0; k < 2; k++) {
		pid = k ? fork() : vfork();
		if (pid < 0)
			DIE_ERRNO(k ? "fork" : "vfork");
		if (pid == 0) {
			execv("/proc/self/exe", argv);
			_exit(127);
		}
		if (wait_child(pid, k ? "forked helper" : "vforked helper"))
			die("case e: the %s helper failed",
			    k ? "forked" : "vforked");
	}
	check_flags(c, 0, "case e");
	if (pthread_create(&th, NULL, echo_thread, &s))
		die("pthread_create");
	pingpong_client(c, 5, "case e: parent's echo after the helpers");
	pthread_join(th, NULL);
	close(c);
	close(s);
	info("ok: case e: posix_spawn, vfork+execv and fork+execv helpers saw "
	     "%s, the parent's connection works",
	     sdp ? "a reset" : "a live socket");
}

/* ---- f: posix_spawn with file actions ----------------------------------- */

/* The parent's connection still works: echo through a thread. */
static void parent_echo(int c, int s, uint64_t seed, const char *what)
{
	pthread_t th;

	check_flags(c, 0, what);
	if (pthread_create(&th, NULL, echo_thread, &s))
		die("pthread_create");
	pingpong_client(c, seed, what);
	pthread_join(th, NULL);
}

static void case_spawn_actions(void)
{
	posix_spawn_file_actions_t fa;
	char *argv[6];
	int c, s, sdp;
	pid_t pid;

	/* No thread may run here: with the caller's file actions the swap
	 * is made in the parent, and only for single-threaded programs. */
	pair(&c, &s);
	sdp = fd_over_sdp(c);
	argv[0] = "sdp_exec";
	argv[1] = "--helper";
	argv[2] = sdp ? "reset" : "shared";
	argv[3] = "0";
	argv[4] = (char *)g_family_name;
	argv[5] = NULL;
	if (posix_spawn_file_actions_init(&fa) ||
	    posix_spawn_file_actions_adddup2(&fa, c, 0) ||
	    posix_spawn_file_actions_addclose(&fa, c))
		die("case f: file actions");
	if (posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, environ))
		die("case f: posix_spawn failed");
	posix_spawn_file_actions_destroy(&fa);
	if (wait_child(pid, "spawned helper (stdin)"))
		die("case f: the helper spawned with file actions failed");
	parent_echo(c, s, 6, "case f: parent's echo after the helper");
	close(c);
	close(s);
	info("ok: case f: posix_spawn with file actions: the helper's stdin "
	     "saw %s, the parent's connection works",
	     sdp ? "a reset" : "a live socket");
}

/* ---- g: system() and popen() ---------------------------------------------- */

static void case_shell(void)
{
	char exe[4096], cmd[4400], line[256], last[256];
	int c, s, sdp, st, seen_reset = 0;
	ssize_t n;
	FILE *f;

	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		DIE_ERRNO("readlink(/proc/self/exe)");
	exe[n] = '\0';
	pair(&c, &s);
	sdp = fd_over_sdp(c);
	snprintf(cmd, sizeof(cmd), "exec '%s' --helper %s %d %s", exe,
		 sdp ? "reset" : "shared", c, g_family_name);
	st = system(cmd);
	if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		die("case g: system() helper failed (status 0x%x)", st);
	if (system("exit 3") == -1 || WEXITSTATUS(system("exit 3")) != 3)
		die("case g: system(\"exit 3\") did not return 3");
	parent_echo(c, s, 7, "case g: parent's echo after system()");

	snprintf(cmd, sizeof(cmd), "'%s' --helper %s %d %s && echo popen-ok",
		 exe, sdp ? "reset" : "shared", c, g_family_name);
	f = popen(cmd, "r");
	if (!f)
		DIE_ERRNO("case g: popen");
	/* The helper's report (stdout), then the shell's echo. */
	last[0] = '\0';
	while (fgets(line, sizeof(line), f)) {
		seen_reset |= strstr(line, "recv ECONNRESET") != NULL;
		snprintf(last, sizeof(last), "%s", line);
	}
	if (strcmp(last, "popen-ok\n") || (sdp && !seen_reset))
		die("case g: popen output wrong (last line \"%s\")", last);
	st = pclose(f);
	if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		die("case g: pclose status 0x%x", st);
	/* A "w" stream: the command sees our bytes and its exit status
	 * comes back through pclose. */
	f = popen("read x && test \"$x\" = sdp-popen-w", "w");
	if (!f)
		DIE_ERRNO("case g: popen w");
	fputs("sdp-popen-w\n", f);
	st = pclose(f);
	if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		die("case g: pclose (w) status 0x%x", st);
	parent_echo(c, s, 8, "case g: parent's echo after popen()");
	close(c);
	close(s);
	info("ok: case g: system() and popen() children saw %s, the "
	     "parent's connection works", sdp ? "a reset" : "a live socket");
}

/* ---- h: inetd-style exec on stdin/stdout -------------------------------- */

static void case_inetd(int server_keeps)
{
	const char *what = server_keeps ? "case h (server keeps its copy)" :
					  "case h (server closes at once)";
	uint16_t port;
	int l = make_listener(&port, 4), c, s;
	struct sockaddr_storage a;
	socklen_t al = sizeof(a);
	char b[4], cport[16];
	pid_t ch;

	c = connect_to(port);
	s = accept_one(l);
	close(l);
	if (getsockname(c, (struct sockaddr *)&a, &al) < 0)
		DIE_ERRNO("getsockname");
	snprintf(cport, sizeof(cport), "%d", port_of(&a));
	ch = fork();
	if (ch < 0)
		DIE_ERRNO("fork");
	if (ch == 0) {
		if (dup2(s, 0) != 0 || dup2(s, 1) != 1)
			DIE_ERRNO("dup2");
		close(s);
		execl("/proc/self/exe", "sdp_exec", "--helper", "inetd", cport,
		      g_family_name, (char *)NULL);
		DIE_ERRNO("execl(/proc/self/exe)");
	}
	if (!server_keeps)
		close(s);
	watchdog_arm(20, "%s: no echo through the exec'd helper", what);
	pingpong_client(c, 8, what);
	if (read_full(c, b, 3, what) != 3 || memcmp(b, "bye", 3))
		die("%s: the helper's last bytes did not come", what);
	if (read_full(c, b, 1, what) != 0)
		die("%s: no EOF after the helper's shutdown", what);
	write_full(c, "end", 3, what);
	if (shutdown(c, SHUT_WR) < 0)
		DIE_ERRNO("shutdown");
	if (wait_child(ch, "inetd helper"))
		die("%s: the helper failed", what);
	watchdog_disarm();
	if (server_keeps)
		close(s);
	close(c);
	info("ok: %s: the exec'd helper served the connection on "
	     "stdin/stdout, half-closes both ways", what);
}

int main(int argc, char **argv)
{
	g_prog = "sdp_exec";
	if (argc == 5 && !strcmp(argv[1], "--helper")) {
		g_prog = "sdp_exec-helper";
		if (set_family(argv[4]))
			return 2;
		return helper(argv[2], atoi(argv[3]));
	}
	if (argc != 3 || strcmp(argv[1], "--family") || set_family(argv[2])) {
		fprintf(stderr, "usage: sdp_exec %s\n", family_usage());
		return 2;
	}
	case_spawn_actions();	/* first, before the watchdog thread exists:
				 * see case f */
	case_exec(0);
	case_exec(1);
	case_exec_fails();
	case_shell();
	case_daemon_run();
	case_spawn();
	case_inetd(0);
	case_inetd(1);
	info("PASS");
	return 0;
}
