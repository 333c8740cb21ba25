/* SPDX-License-Identifier: MIT */
/*
 * sdp_kill: the peer process dies (SIGKILL) mid-transfer.
 *
 * Part A: the child streams data to the parent and never reads.  The parent
 *   reads (and verifies) some, while a second parent thread fills the window
 *   towards the child until it blocks in send().  The parent then kills the
 *   child with SIGKILL: its recv() must return 0 or -1 ECONNRESET within a
 *   bounded time (after any data still in flight), and the blocked send()
 *   must fail with EPIPE or ECONNRESET instead of hanging.
 * Part B: the child connects and never reads; the parent blocks in send()
 *   with a full window; a parent thread kills the child: the send must fail
 *   with EPIPE or ECONNRESET.
 *
 * A 10 s watchdog per phase is only a hang detector.
 */
#include "itest_common.h"

#include <sys/syscall.h>

static unsigned char *pat;

static pid_t my_tid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

/* ---- part A ---- */

static int a_child(uint16_t port, void *arg)
{
	int fd = connect_to(port);
	prng_t r;
	prng_seed(&r, 7);
	uint64_t off = 0;
	for (;;) {
		size_t n = (size_t)prng_range(&r, 1, 65536);
		ssize_t w = send(fd, pattern_at(pat, off), n, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			/* the parent is supposed to kill us, not to close */
			die("part A child: send failed: %s", strerror(errno));
		}
		off += (uint64_t)w;
	}
	return 0;
}

typedef struct {
	int fd;
	pid_t tid;
	int filled; /* window full, about to block */
	int err;
	uint64_t sent;
	pthread_mutex_t mu;
	pthread_cond_t cv;
} filler_t;

static void *filler_thread(void *arg)
{
	filler_t *f = arg;
	static char buf[65536];
	memset(buf, 'k', sizeof buf);
	pthread_mutex_lock(&f->mu);
	f->tid = my_tid();
	pthread_mutex_unlock(&f->mu);
	/* fill with MSG_DONTWAIT until EAGAIN: the window is then full */
	for (;;) {
		ssize_t n = send(f->fd, buf, sizeof buf, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			f->sent += (uint64_t)n;
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n < 0 && errno == EINTR)
			continue;
		die("part A filler: send(MSG_DONTWAIT) failed before the kill: %s",
		    n < 0 ? strerror(errno) : "returned 0");
	}
	pthread_mutex_lock(&f->mu);
	f->filled = 1;
	pthread_cond_signal(&f->cv);
	pthread_mutex_unlock(&f->mu);
	/* now block */
	for (;;) {
		ssize_t n = send(f->fd, buf, sizeof buf, MSG_NOSIGNAL);
		if (n > 0) {
			f->sent += (uint64_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		f->err = n < 0 ? errno : -1;
		break;
	}
	return NULL;
}

static void part_a(void)
{
	child_t ch = spawn_connector(a_child, NULL);
	uint16_t port;
	int lfd = make_listener(&port, 4);
	child_go(&ch, port);
	watchdog_arm(10, "part A: accept / reading the first 4 MiB");
	int fd = accept_one(lfd);
	close(lfd);

	filler_t f = { .fd = fd };
	pthread_mutex_init(&f.mu, NULL);
	pthread_cond_init(&f.cv, NULL);
	pthread_t th;
	if (pthread_create(&th, NULL, filler_thread, &f))
		die("pthread_create");

	unsigned char *buf = malloc(65536);
	uint64_t off = 0;
	while (off < (4u << 20)) {
		ssize_t n = recv(fd, buf, 65536, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			die("part A: recv before the kill returned %zd (%s)", n, n < 0 ? strerror(errno) : "EOF");
		pattern_check(pat, off, buf, (size_t)n, "part A parent");
		off += (uint64_t)n;
	}
	watchdog_arm(10, "part A: filler thread never filled the window");
	pthread_mutex_lock(&f.mu);
	while (!f.filled)
		pthread_cond_wait(&f.cv, &f.mu);
	pid_t tid = f.tid;
	pthread_mutex_unlock(&f.mu);
	wait_blocked(tid, "part A: the filler thread blocked in send");

	if (kill(ch.pid, SIGKILL) < 0)
		DIE_ERRNO("kill(SIGKILL)");
	int st;
	while (waitpid(ch.pid, &st, 0) < 0)
		if (errno != EINTR)
			DIE_ERRNO("waitpid");
	if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL)
		die("part A: child did not die of SIGKILL (status 0x%x)", st);
	double t_kill = now_sec();

	/* recv must reach EOF or ECONNRESET; data still in flight is verified */
	watchdog_arm(10, "part A: recv did not report EOF/ECONNRESET after the peer was killed");
	const char *res = NULL;
	uint64_t after = 0;
	while (!res) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int k = poll(&p, 1, 10000);
		if (k < 0 && errno == EINTR)
			continue;
		if (k == 0)
			die("part A: no EOF/ECONNRESET 10 s after killing the peer");
		ssize_t n = recv(fd, buf, 65536, MSG_DONTWAIT);
		if (n > 0) {
			pattern_check(pat, off, buf, (size_t)n, "part A parent after kill");
			off += (uint64_t)n;
			after += (uint64_t)n;
		} else if (n == 0) {
			res = "EOF";
		} else if (errno == ECONNRESET) {
			res = "ECONNRESET";
		} else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
			die("part A: recv after kill failed with %s (errno %d), expected 0 or ECONNRESET",
			    strerror(errno), errno);
		}
	}
	double t_recv = now_sec() - t_kill;
	watchdog_arm(10, "part A: blocked send did not fail after the peer was killed");
	pthread_join(th, NULL);
	if (f.err != EPIPE && f.err != ECONNRESET)
		die("part A: blocked send ended with %s (%d), expected EPIPE or ECONNRESET",
		    f.err > 0 ? strerror(f.err) : "a 0 return", f.err);
	watchdog_disarm();
	close(fd);
	free(buf);
	info("ok: part A: recv -> %s %.3f s after SIGKILL (%" PRIu64 " bytes drained), "
	     "blocked send (after %" PRIu64 " bytes) -> %s",
	     res, t_recv, after, f.sent, strerror(f.err));
}

/* ---- part B ---- */

static int b_child(uint16_t port, void *arg)
{
	int fd = connect_to(port);
	write_full(fd, "r", 1, "part B ready byte");
	for (;;)
		pause(); /* never read; wait to be killed */
	return 0;
}

typedef struct {
	pid_t victim;
	pid_t tid;
} killer_t;

static void *killer_thread(void *arg)
{
	killer_t *k = arg;
	wait_blocked(k->tid, "part B: the victim blocked in its call");
	if (kill(k->victim, SIGKILL) < 0)
		DIE_ERRNO("kill(SIGKILL)");
	return NULL;
}

static void part_b(void)
{
	child_t ch = spawn_connector(b_child, NULL);
	uint16_t port;
	int lfd = make_listener(&port, 4);
	child_go(&ch, port);
	watchdog_arm(10, "part B: blocked send did not fail after the peer was killed");
	int fd = accept_one(lfd);
	close(lfd);
	char c;
	if (read_full(fd, &c, 1, "part B ready byte") != 1)
		die("part B: EOF instead of the ready byte");
	static char buf[65536];
	memset(buf, 'b', sizeof buf);
	uint64_t sent = 0;
	for (;;) { /* fill the window */
		ssize_t n = send(fd, buf, sizeof buf, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			sent += (uint64_t)n;
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n < 0 && errno == EINTR)
			continue;
		die("part B: send(MSG_DONTWAIT) failed before the kill: %s",
		    n < 0 ? strerror(errno) : "returned 0");
	}
	killer_t k = { ch.pid, my_tid() };
	pthread_t th;
	if (pthread_create(&th, NULL, killer_thread, &k))
		die("pthread_create");
	int err = 0;
	for (;;) {
		ssize_t n = send(fd, buf, sizeof buf, MSG_NOSIGNAL);
		if (n > 0) {
			sent += (uint64_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		err = n < 0 ? errno : -1;
		break;
	}
	pthread_join(th, NULL);
	int st;
	while (waitpid(ch.pid, &st, 0) < 0)
		if (errno != EINTR)
			DIE_ERRNO("waitpid");
	if (err != EPIPE && err != ECONNRESET)
		die("part B: blocked send ended with %s (%d), expected EPIPE or ECONNRESET",
		    err > 0 ? strerror(err) : "a 0 return", err);
	watchdog_disarm();
	close(fd);
	info("ok: part B: send blocked on a full window (after %" PRIu64 " bytes) -> %s", sent,
	     strerror(err));
}

int main(int argc, char **argv)
{
	g_prog = "sdp_kill";
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--family") && i + 1 < argc) {
			if (set_family(argv[++i]))
				die("bad family '%s'", argv[i]);
		} else {
			fprintf(stderr, "usage: sdp_kill %s\n", family_usage());
			return 2;
		}
	}
	pat = pattern_new(77);
	part_a();
	part_b();
	info("PASS");
	return 0;
}
