/* SPDX-License-Identifier: MIT */
/*
 * sdp_fork — connections across fork(), as programs use them:
 *   1. daemonizing: the process that made the connection forks and exits
 *      (exit() runs libsdp's exit flush), the grandchild goes on writing;
 *      the peer gets every byte, checksummed, then EOF;
 *   2. fork-per-connection server: the parent accepts, forks, closes its
 *      copy; the child serves the connection (request -> response);
 *   3. both processes use one connection: over TCP the kernel interleaves
 *      their bytes; over SDP the second user gets EBADFD (an error, never
 *      corrupt data) while the owner carries on.
 * Usage: sdp_fork --family sdp|sdp6|tcp|tcp6
 */
#include "itest_common.h"

#include <spawn.h>

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

/* Over SDP, explicitly or through the socket switch (libsdp's
 * SDP_CONN_TRANSPORT option answers only on SDP sockets). */
static int over_sdp(int fd)
{
	int v;
	socklen_t l = sizeof(v);

	return getsockopt(fd, IPPROTO_TCP, 90, &v, &l) == 0;
}

static void case_both_use(void)
{
	int c, s, st, sdp;
	pid_t ch;
	char b[2];

	pair(&c, &s);
	sdp = over_sdp(c);
	write_full(c, "p", 1, "parent write");	/* the parent uses it */
	ch = fork();
	if (ch < 0)
		DIE_ERRNO("fork");
	if (ch == 0) {
		ssize_t n = send(c, "c", 1, MSG_NOSIGNAL);

		if (sdp)
			_exit(n < 0 && errno == EBADFD ? 0 : 4);
		_exit(n == 1 ? 0 : 5);
	}
	if (waitpid(ch, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
		die("case 3: child's send: status 0x%x (over SDP it must fail "
		    "with EBADFD)", st);
	write_full(c, "q", 1, "parent write");	/* the owner still works */
	read_full(s, b, 1, "server read");
	if (b[0] != 'p')
		die("case 3: first byte '%c'", b[0]);
	read_full(s, b, 1, "server read");
	if (!sdp && b[0] == 'c')
		read_full(s, b, 1, "server read");
	if (b[0] != 'q')
		die("case 3: second byte '%c', expected 'q'", b[0]);
	close(c);
	close(s);
	info("ok: case 3: a second user of one connection gets an error");
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
	case_spawn();
	info("PASS");
	return 0;
}
