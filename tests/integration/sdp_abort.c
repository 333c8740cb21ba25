/* SPDX-License-Identifier: MIT */
/*
 * sdp_abort: abortive close.
 *
 * Case 1 (linger0): the client sets SO_LINGER {1, 0} and closes while the
 *   server is blocked in recv(): the server's recv must fail with ECONNRESET
 *   (as with TCP, not return 0).
 * Case 2 (unread): the server closes with unread data in its receive queue:
 *   the client's next recv/send must fail with ECONNRESET or EPIPE (sends use
 *   MSG_NOSIGNAL), as with TCP.
 * Case 3 (linger0-send): the client aborts while the server is blocked in
 *   send() with a full window: the send must fail with ECONNRESET/EPIPE.
 *
 * Parent = server (listen/accept), forked child = client.  Each case uses a
 * fresh connection; a 10 s watchdog detects hangs.
 */
#include "itest_common.h"


/* ---- case 1 ---- */

static int c1_client(uint16_t port, void *arg)
{
	watchdog_arm(10, "case 1 client");
	int fd = connect_to(port);
	char c;
	/* wait until the server says it is about to block in recv */
	if (read_full(fd, &c, 1, "case 1 client ready byte") != 1)
		die("case 1 client: EOF instead of the server's ready byte");
	/* send some data first so both sides have exchanged payload */
	write_full(fd, "hello", 5, "case 1 client");
	struct linger lg = { 1, 0 };
	if (setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg) < 0)
		DIE_ERRNO("setsockopt(SO_LINGER {1,0})");
	struct linger lg2;
	socklen_t len = sizeof lg2;
	if (getsockopt(fd, SOL_SOCKET, SO_LINGER, &lg2, &len) < 0)
		DIE_ERRNO("getsockopt(SO_LINGER)");
	if (!lg2.l_onoff || lg2.l_linger != 0)
		die("getsockopt(SO_LINGER) returned {%d,%d}, expected {1,0}", lg2.l_onoff, lg2.l_linger);
	if (close(fd) < 0)
		DIE_ERRNO("close (abortive)");
	return 0;
}

static void case1(void)
{
	child_t ch = spawn_connector(c1_client, NULL);
	uint16_t port;
	int lfd = make_listener(&port, 4);
	child_go(&ch, port);
	watchdog_arm(10, "case 1 server: recv did not return after the peer's abortive close");
	int fd = accept_one(lfd);
	close(lfd);
	write_full(fd, "R", 1, "case 1 server ready byte");
	char buf[16];
	size_t got = 0;
	for (;;) {
		ssize_t n = recv(fd, buf, sizeof buf, 0);
		if (n > 0) {
			got += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0)
			die("case 1: server recv returned 0 (orderly EOF) after the peer's SO_LINGER{1,0} "
			    "close; expected -1 ECONNRESET");
		if (errno != ECONNRESET)
			die("case 1: server recv failed with %s (errno %d), expected ECONNRESET",
			    strerror(errno), errno);
		break;
	}
	if (got != 5)
		info("case 1: note: received %zu of 5 data bytes before the reset", got);
	/* after the reset is reported the socket is dead: further recv gives 0 or
	 * an error, never blocks */
	set_nonblock(fd, 1);
	ssize_t n = recv(fd, buf, sizeof buf, 0);
	if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)))
		die("case 1: recv after ECONNRESET returned %zd (%s), expected 0 or a hard error", n,
		    n < 0 ? strerror(errno) : "data");
	close(fd);
	int rc = wait_child(ch.pid, "case 1 client");
	watchdog_disarm();
	if (rc)
		die("case 1 client failed");
	info("ok: case 1: recv in the server failed with ECONNRESET after the client's linger-0 close");
}

/* ---- case 2 ---- */

static int c2_client(uint16_t port, void *arg)
{
	watchdog_arm(10, "case 2 client: no error after the server closed with unread data");
	int fd = connect_to(port);
	char data[1000];
	memset(data, 'u', sizeof data);
	write_full(fd, data, sizeof data, "case 2 client");
	/* The server closes without reading; wait for the connection to go bad. */
	int err = 0;
	const char *how = "";
	for (int i = 0; i < 100000 && !err; i++) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int k = poll(&p, 1, 10000);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			die("case 2 client: poll %s", k == 0 ? "timed out (10 s)" : strerror(errno));
		char c;
		ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT);
		if (n < 0 && errno != EAGAIN && errno != EINTR) {
			err = errno;
			how = "recv";
			break;
		}
		if (n > 0)
			die("case 2 client: unexpected data from the server");
		if (n == 0) {
			/* EOF seen first; keep sending until the reset shows up */
			n = send(fd, data, sizeof data, MSG_NOSIGNAL | MSG_DONTWAIT);
			if (n < 0 && errno != EAGAIN && errno != EINTR) {
				err = errno;
				how = "send";
			}
		}
	}
	if (err != ECONNRESET && err != EPIPE)
		die("case 2 client: %s failed with %s (errno %d), expected ECONNRESET or EPIPE", how,
		    strerror(err), err);
	info("case 2 client: %s failed with %s", how, strerror(err));
	/* and a send now must fail too */
	ssize_t n = send(fd, data, 1, MSG_NOSIGNAL);
	if (n >= 0 || (errno != EPIPE && errno != ECONNRESET))
		die("case 2 client: send after the reset returned %zd (%s), expected EPIPE/ECONNRESET", n,
		    n < 0 ? strerror(errno) : "success");
	close(fd);
	return 0;
}

static void case2(void)
{
	child_t ch = spawn_connector(c2_client, NULL);
	uint16_t port;
	int lfd = make_listener(&port, 4);
	child_go(&ch, port);
	watchdog_arm(10, "case 2 server");
	int fd = accept_one(lfd);
	close(lfd);
	/* wait until the client's data is in our receive queue, then close
	 * without reading it */
	struct pollfd p = { .fd = fd, .events = POLLIN };
	for (;;) {
		int k = poll(&p, 1, 10000);
		if (k < 0 && errno == EINTR)
			continue;
		if (k != 1)
			die("case 2 server: data did not arrive: poll returned %d", k);
		break;
	}
	int avail = -1;
	if (ioctl_fionread_ok(fd, &avail) && avail <= 0)
		die("case 2 server: POLLIN but FIONREAD = %d", avail);
	if (close(fd) < 0)
		DIE_ERRNO("case 2 server close");
	int rc = wait_child(ch.pid, "case 2 client");
	watchdog_disarm();
	if (rc)
		die("case 2 client failed");
	info("ok: case 2: closing with unread data reset the connection");
}

/* ---- case 3 ---- */

static int c3_client(uint16_t port, void *arg)
{
	watchdog_arm(10, "case 3 client");
	int fd = connect_to(port);
	/* wait for the server's go byte (it is then filling the window) */
	char c;
	if (read_full(fd, &c, 1, "case 3 client go byte") != 1)
		die("case 3 client: EOF instead of the go byte");
	/* Wait until the server thread blocks in send: it reports nothing over
	 * the socket, so watch it through /proc (the server pid/tid is passed in
	 * arg) -- this is a condition poll, not a timing assumption. */
	pid_t tid = *(pid_t *)arg;
	wait_blocked(tid, "case 3: the server blocked in send on a full window");
	struct linger lg = { 1, 0 };
	if (setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg) < 0)
		DIE_ERRNO("setsockopt(SO_LINGER {1,0})");
	if (close(fd) < 0)
		DIE_ERRNO("close (abortive)");
	return 0;
}

static void case3(void)
{
	pid_t me = getpid();
	child_t ch = spawn_connector(c3_client, &me);
	uint16_t port;
	int lfd = make_listener(&port, 4);
	child_go(&ch, port);
	watchdog_arm(10, "case 3 server: send blocked on a full window did not fail after the peer's "
			 "abortive close");
	int fd = accept_one(lfd);
	close(lfd);
	write_full(fd, "G", 1, "case 3 go byte");
	static char big[1 << 16];
	memset(big, 'f', sizeof big);
	uint64_t sent = 0;
	int err = 0;
	for (;;) {
		ssize_t n = send(fd, big, sizeof big, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			err = errno;
			break;
		}
		sent += (uint64_t)n;
	}
	if (err != ECONNRESET && err != EPIPE)
		die("case 3: blocked send failed with %s (errno %d), expected ECONNRESET or EPIPE",
		    strerror(err), err);
	close(fd);
	int rc = wait_child(ch.pid, "case 3 client");
	watchdog_disarm();
	if (rc)
		die("case 3 client failed");
	info("ok: case 3: send blocked after %" PRIu64 " bytes failed with %s", sent, strerror(err));
}

int main(int argc, char **argv)
{
	g_prog = "sdp_abort";
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--family") && i + 1 < argc) {
			if (set_family(argv[++i]))
				die("bad family '%s'", argv[i]);
		} else {
			fprintf(stderr, "usage: sdp_abort %s\n", family_usage());
			return 2;
		}
	}
	case1();
	case2();
	case3();
	info("PASS");
	return 0;
}
