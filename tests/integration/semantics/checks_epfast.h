/* SPDX-License-Identifier: MIT */
/*
 * checks_epfast.h — epoll over SDP connections with user-space readiness
 * (src/socket/epfast.c): the same answers as the kernel gives for TCP,
 * including when the application sleeps and is woken, when a connection
 * leaves the fast path (poll, nesting), and no CPU while idle.  All of it
 * also holds over plain TCP (SDP_TEST_FAMILY=tcp), except the one check
 * that the kernel was not told.
 */

static int fast_on(void)
{
	const char *e = getenv("SDP_EPOLL_FAST");

	return is_sdp() && !(e && !strcmp(e, "0"));
}

/* Data reported from user space, level-triggered, never stale. */
static int t_epfast_level(void)
{
	int c, s;
	PAIR(c, s);
	set_nonblock(c, 1);
	int ep = epoll_create1(0);
	SYS(ep);
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 0xabc };
	SYS(epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev));
	struct epoll_event out;
	CHECK(ep_wait(ep, &out, 0) == 0, "event with nothing sent");
	WRITEN(s, "xy", 2);
	CHECK(ep_wait(ep, &out, 5000) == 1 && (out.events & EPOLLIN) &&
	      out.data.u64 == 0xabc, "no EPOLLIN with data");
	if (fast_on()) {
		/* The kernel's own answer, past the interposer: nothing, as
		 * no readiness byte was needed. */
		struct epoll_event k;
		int n = (int)syscall(SYS_epoll_pwait, ep, &k, 1, 0, NULL, 8);
		CHECK(n == 0, "data was mirrored into the kernel (%d): "
		      "user-space readiness not in use", n);
	}
	CHECK(ep_wait(ep, &out, 0) == 1 && (out.events & EPOLLIN),
	      "level-triggered EPOLLIN not repeated while data is unread");
	char b[4];
	CHECK(recv(c, b, 1, 0) == 1, "recv 1");
	CHECK(ep_wait(ep, &out, 0) == 1, "EPOLLIN gone with 1 byte unread");
	CHECK(recv(c, b, sizeof b, 0) == 1, "recv rest");
	CHECK(ep_wait(ep, &out, 0) == 0, "EPOLLIN after draining (stale)");
	CHECK(recv(c, b, sizeof b, 0) < 0 && errno == EAGAIN, "recv not EAGAIN");
	close(ep);
	close(c);
	close(s);
	return 0;
}

struct pp_arg {
	int *s;		/* peers' ends */
	int n, rounds, ack;
};

static void *pp_writer(void *p)
{
	struct pp_arg *a = p;
	char b;

	for (int r = 0; r < a->rounds; r++) {
		/* Bursts of one and of several: the woken wait must find the
		 * ones that came without a byte of their own. */
		int burst = r % 3 == 0 ? a->n : 1;

		for (int i = 0; i < burst; i++)
			if (t_write_n(a->s[(r + i) % a->n], "p", 1) < 0)
				return (void *)1;
		for (int i = 0; i < burst; i++)
			if (read(a->ack, &b, 1) != 1)
				return (void *)1;
	}
	return NULL;
}

/* A thread feeds several connections while the application waits in
 * epoll (often asleep): no wake-up is lost, level or edge-triggered. */
static int epfast_pingpong(uint32_t et)
{
	enum { N = 4, ROUNDS = 1500 };
	int c[N], s[N], ack[2];
	SYS(pipe(ack));
	int ep = epoll_create1(0);
	SYS(ep);
	for (int i = 0; i < N; i++) {
		PAIR(c[i], s[i]);
		set_nonblock(c[i], 1);
		/* One byte at a time with no reply on the same connection:
		 * without NODELAY SDP's Nagle holds each for SDP_NAGLE_US,
		 * which is not what this checks. */
		int one = 1;
		SYS(setsockopt(s[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one));
		struct epoll_event ev = { .events = EPOLLIN | et, .data.u32 = i };
		SYS(epoll_ctl(ep, EPOLL_CTL_ADD, c[i], &ev));
	}
	struct pp_arg a = { s, N, ROUNDS, ack[0] };
	pthread_t th;
	CHECK(pthread_create(&th, NULL, pp_writer, &a) == 0, "pthread_create");
	long got = 0, want = 0;
	for (int r = 0; r < ROUNDS; r++)
		want += r % 3 == 0 ? N : 1;
	while (got < want) {
		struct epoll_event out[N];
		int k = epoll_wait(ep, out, N, 5000);
		if (k < 0 && errno == EINTR)
			continue;
		CHECK(k > 0, "no event for 5 s after %ld of %ld bytes (lost wake-up)",
		      got, want);
		for (int j = 0; j < k; j++) {
			char b[16];
			ssize_t n;
			int any = 0;
			while ((n = recv(c[out[j].data.u32], b, sizeof b, 0)) > 0) {
				for (ssize_t x = 0; x < n; x++)
					CHECK(write(ack[1], "a", 1) == 1, "ack");
				got += n;
				any = 1;
			}
			CHECK(n < 0 && errno == EAGAIN, "recv: %zd %s", n, strerror(errno));
			/* Level-triggered: every report has data behind it.
			 * Edge-triggered may report an arrival already read. */
			CHECK(any || et, "readable event, then EAGAIN (stale)");
		}
	}
	void *rv;
	pthread_join(th, &rv);
	CHECK(rv == NULL, "writer failed");
	struct epoll_event out;
	CHECK(ep_wait(ep, &out, 0) == 0, "event after draining everything");
	for (int i = 0; i < N; i++) {
		close(c[i]);
		close(s[i]);
	}
	close(ep);
	close(ack[0]);
	close(ack[1]);
	return 0;
}

static int t_epfast_pingpong_level(void)
{
	return epfast_pingpong(0);
}

static int t_epfast_pingpong_edge(void)
{
	return epfast_pingpong(EPOLLET);
}

/* Apache's event MPM: a listener thread sleeps in epoll_wait on the
 * keep-alive connections; one that turns readable is taken out (DEL) and
 * handed to a worker thread, which answers and puts it back (ADD) while the
 * listener sleeps.  Each next request must wake that sleep: a connection
 * added behind it was once left quietly armed, and the request waited for
 * the sleep's timeout (2 s here). */
struct mpm {
	int ep, conn, to_worker[2];
	int requests;	/* handled by the worker */
};

static void *mpm_listener(void *arg)
{
	struct mpm *m = arg;
	struct epoll_event ev;

	for (;;) {
		int n = epoll_wait(m->ep, &ev, 1, 2000);

		if (n == 1) {
			char go = 1;

			epoll_ctl(m->ep, EPOLL_CTL_DEL, ev.data.fd, NULL);
			if (write(m->to_worker[1], &go, 1) != 1)
				return NULL;
		} else if (n < 0 && errno != EINTR) {
			return NULL;
		}
		if (__atomic_load_n(&m->requests, __ATOMIC_ACQUIRE) < 0)
			return NULL;
	}
}

static void *mpm_worker(void *arg)
{
	struct mpm *m = arg;
	char go, b;

	while (read(m->to_worker[0], &go, 1) == 1 && go) {
		struct epoll_event ev = { .events = EPOLLIN, .data.fd = m->conn };

		if (recv(m->conn, &b, 1, 0) != 1 || send(m->conn, &b, 1, 0) != 1)
			break;
		__atomic_add_fetch(&m->requests, 1, __ATOMIC_RELEASE);
		if (epoll_ctl(m->ep, EPOLL_CTL_ADD, m->conn, &ev) < 0)
			break;
	}
	return NULL;
}

static int t_epoll_add_while_asleep(void)
{
	enum { ROUNDS = 500 };
	struct mpm m = { 0 };
	pthread_t lt, wt;
	double slowest = 0;
	int c, s, i, stalled = 0;
	char b, stop = 0;

	PAIR(c, s);
	m.ep = epoll_create1(0);
	SYS(m.ep);
	SYS(pipe(m.to_worker));
	m.conn = s;
	{
		struct epoll_event ev = { .events = EPOLLIN, .data.fd = s };

		SYS(epoll_ctl(m.ep, EPOLL_CTL_ADD, s, &ev));
	}
	pthread_create(&lt, NULL, mpm_listener, &m);
	pthread_create(&wt, NULL, mpm_worker, &m);
	for (i = 0; i < ROUNDS && !stalled; i++) {
		double t0 = now_sec(), dt;

		b = (char)i;
		if (send(c, &b, 1, 0) != 1 || recv(c, &b, 1, MSG_WAITALL) != 1)
			break;
		dt = now_sec() - t0;
		if (dt > slowest)
			slowest = dt;
		stalled = dt >= 1.5;
	}
	__atomic_store_n(&m.requests, -1000000, __ATOMIC_RELEASE);
	if (write(m.to_worker[1], &stop, 1) != 1)
		return -1;
	pthread_join(wt, NULL);
	pthread_join(lt, NULL);
	close(m.to_worker[0]);
	close(m.to_worker[1]);
	close(m.ep);
	close(c);
	close(s);
	CHECK(i == ROUNDS && !stalled,
	      "%d of %d requests answered; the slowest took %.3f s (a request "
	      "that waits for the listener's 2 s timeout was not seen)",
	      i, ROUNDS, slowest);
	return 0;
}

/* poll() on a connection that epoll handled in user space sees the data,
 * and epoll goes on reporting it. */
static int t_epfast_poll_after_epoll(void)
{
	int c, s;
	PAIR(c, s);
	int ep = epoll_create1(0);
	SYS(ep);
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = c };
	SYS(epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev));
	struct epoll_event out;
	CHECK(ep_wait(ep, &out, 0) == 0, "event with nothing sent");
	WRITEN(s, "q", 1);
	CHECK(ep_wait(ep, &out, 5000) == 1, "no EPOLLIN");
	struct pollfd p = { .fd = c, .events = POLLIN };
	CHECK(poll(&p, 1, 5000) == 1 && (p.revents & POLLIN), "poll: no POLLIN");
	fd_set rd;
	FD_ZERO(&rd);
	FD_SET(c, &rd);
	struct timeval tv = { 5, 0 };
	CHECK(select(c + 1, &rd, NULL, NULL, &tv) == 1, "select: not readable");
	CHECK(ep_wait(ep, &out, 0) == 1, "EPOLLIN gone after poll");
	char b;
	CHECK(recv(c, &b, 1, 0) == 1, "recv");
	CHECK(poll(&p, 1, 0) == 0, "poll: POLLIN after draining");
	CHECK(ep_wait(ep, &out, 0) == 0, "EPOLLIN after draining");
	close(ep);
	close(c);
	close(s);
	return 0;
}

/* An epoll set inside another: the outer one sees the inner's data. */
static int t_epfast_nested(void)
{
	int c, s;
	PAIR(c, s);
	int in = epoll_create1(0), outer = epoll_create1(0);
	SYS(in);
	SYS(outer);
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = c };
	SYS(epoll_ctl(in, EPOLL_CTL_ADD, c, &ev));
	struct epoll_event out;
	CHECK(ep_wait(in, &out, 0) == 0, "event with nothing sent");
	ev.data.fd = in;
	SYS(epoll_ctl(outer, EPOLL_CTL_ADD, in, &ev));
	WRITEN(s, "n", 1);
	CHECK(ep_wait(outer, &out, 5000) == 1 && out.data.fd == in,
	      "outer set: inner set not readable");
	CHECK(ep_wait(in, &out, 0) == 1 && out.data.fd == c, "inner set: no EPOLLIN");
	close(outer);
	close(in);
	close(c);
	close(s);
	return 0;
}

struct ep_sleeper {
	int ep;
	_Atomic pid_t tid;
};

static void *ep_sleeper(void *p)
{
	struct ep_sleeper *a = p;
	struct epoll_event out;

	a->tid = my_tid();
	epoll_wait(a->ep, &out, 1, -1);	/* cancelled in there */
	return NULL;
}

/* A thread cancelled while its epoll_wait sleeps in the kernel (a
 * cancellation point) still ends the set's sleep: the set must not look
 * asleep for good, or every later message would be mirrored into the
 * kernel with a readiness byte (correct, but the cost user-space
 * readiness exists to avoid). */
static int t_epfast_cancelled(void)
{
	if (!fast_on())
		return 0;	/* kernel epoll: nothing of ours to undo */
#ifdef __SANITIZE_ADDRESS__
	/* GCC 12's ASan cannot follow a cancellation's unwinding out of an
	 * instrumented frame: its own stack bookkeeping CHECK fails in the
	 * cleanup (asan_thread.cpp, kCurrentStackFrameMagic), whichever
	 * form glibc's cleanup takes.  The plain build runs this check. */
	SKIP("ASan cannot follow a thread cancellation's unwinding");
#endif
	int c, s;
	PAIR(c, s);
	set_nonblock(c, 1);
	struct ep_sleeper a = { .ep = epoll_create1(0) };
	SYS(a.ep);
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = c }, out;
	SYS(epoll_ctl(a.ep, EPOLL_CTL_ADD, c, &ev));
	pthread_t th;
	void *rv;
	CHECK(pthread_create(&th, NULL, ep_sleeper, &a) == 0, "pthread_create");
	/* Past the user-space spin, asleep in the kernel (bounded wait). */
	double t0 = now_sec();
	while (!(a.tid && thread_waits_in(a.tid, "epoll_wait")) &&
	       now_sec() - t0 < 10)
		sched_yield();
	CHECK(a.tid && thread_waits_in(a.tid, "epoll_wait"),
	      "the thread never slept in the kernel's epoll_wait");
	CHECK(pthread_cancel(th) == 0, "pthread_cancel");
	CHECK(pthread_join(th, &rv) == 0 && rv == PTHREAD_CANCELED,
	      "the sleeper was not cancelled");
	WRITEN(s, "x", 1);
	struct epoll_event k;
	int n = (int)syscall(SYS_epoll_pwait, a.ep, &k, 1, 0, NULL, 8);
	CHECK(n == 0, "after the cancelled sleep the data was mirrored into "
	      "the kernel: the set still looks asleep");
	CHECK(ep_wait(a.ep, &out, 5000) == 1 && out.data.fd == c,
	      "no EPOLLIN after the cancelled sleep");
	char b;
	CHECK(recv(c, &b, 1, 0) == 1 && b == 'x', "recv");
	close(a.ep);
	close(c);
	close(s);
	return 0;
}

static double cpu_sec(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
	       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* A process waiting in epoll with nothing coming burns no CPU (no
 * busy-polling), right after traffic included. */
static int t_epfast_idle_cpu(void)
{
	int c, s;
	PAIR(c, s);
	set_nonblock(c, 1);
	int ep = epoll_create1(0);
	SYS(ep);
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = c }, out;
	SYS(epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev));
	char b[64];
	for (int i = 0; i < 200; i++) {
		WRITEN(s, "i", 1);
		CHECK(ep_wait(ep, &out, 5000) == 1, "no EPOLLIN");
		CHECK(recv(c, b, sizeof b, 0) == 1, "recv");
	}
	double t0 = now_sec(), cpu0 = cpu_sec();
	CHECK(ep_wait(ep, &out, 1500) == 0, "event with nothing sent");
	double wall = now_sec() - t0, cpu = cpu_sec() - cpu0;
	CHECK(wall >= 1.0, "epoll_wait returned early (%.3f s)", wall);
	CHECK(cpu < 0.1, "idle epoll_wait used %.3f s of CPU in %.3f s", cpu, wall);
	close(ep);
	close(c);
	close(s);
	return 0;
}
