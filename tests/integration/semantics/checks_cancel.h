/* SPDX-License-Identifier: MIT */
/* The two ways programs stop a thread blocked in a socket call.
 * pthread_cancel: the thread must be cancelled (the kernel's calls are
 * cancellation points), leave the socket working for the other threads,
 * lose no byte, and honour PTHREAD_CANCEL_DISABLE.  shutdown() of the
 * listener a thread is blocked in accept() on: accept returns EINVAL.
 * Included by sdp_semantics.c only. */
#ifndef SEMANTICS_CHECKS_CANCEL_H
#define SEMANTICS_CHECKS_CANCEL_H

#include <dlfcn.h>

struct blocked_call {
	int fd, disable;
	_Atomic pid_t tid;
	_Atomic long sent;	/* send: bytes the returned calls reported */
	ssize_t n;
	char b;
};

/* A handler that holds until the main thread lets it go. */
/* Atomic: the handler runs on another thread than the one that waits. */
static _Atomic int hold_in, hold_release;

static void on_hold_signal(int sig)
{
	(void)sig;
	hold_in = 1;
	while (!hold_release)
		sched_yield();
}

/* Byte k of the send stream: any byte lost, duplicated or reordered shows. */
static unsigned char stream_byte(long k)
{
	return (unsigned char)(k * 7 + 3);
}

static void *blocked_recv(void *p)
{
	struct blocked_call *a = p;
	int old;

	if (a->disable)
		pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
	a->tid = my_tid();
	a->n = recv(a->fd, &a->b, 1, 0);
	if (a->disable) {
		pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, &old);
		pthread_testcancel();	/* the pending cancel acts here */
	}
	return NULL;
}

static void *blocked_accept(void *p)
{
	struct blocked_call *a = p;

	a->tid = my_tid();
	a->n = accept(a->fd, NULL, NULL);
	return NULL;
}

static void *blocked_send(void *p)
{
	struct blocked_call *a = p;
	static unsigned char buf[65536];

	a->tid = my_tid();
	for (;;) {
		long pos = a->sent;
		for (size_t i = 0; i < sizeof buf; i++)
			buf[i] = stream_byte(pos + (long)i);
		ssize_t n = send(a->fd, buf, sizeof buf, MSG_NOSIGNAL);
		if (n < 0)
			return (void *)1;
		a->sent += n;
	}
}

/* Until the thread has started and sleeps in its call (bounded). */
static void wait_in_call(struct blocked_call *a)
{
	for (int i = 0; i < 2000 && !a->tid; i++)
		msleep_poll(1);
	wait_blocked(a->tid, "cancel: the thread blocked in its call");
}

/* pthread_join, for at most 10 s: 0 if joined. */
static int join_10s(pthread_t th, void **rv)
{
	struct timespec dl;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += 10;
	return pthread_timedjoin_np(th, rv, &dl);
}

/* Cancel the thread once it sleeps in its call; joined within 10 s. */
static int cancel_and_join(pthread_t th, struct blocked_call *a, void **rv)
{
	wait_in_call(a);
	CHECK(task_sleeps(a->tid), "the thread never blocked in its call");
	CHECK(pthread_cancel(th) == 0, "pthread_cancel");
	CHECK(join_10s(th, rv) == 0, "the cancelled thread did not end within 10 s");
	return 0;
}

static int t_cancel_blocked(void)
{
#ifdef __SANITIZE_ADDRESS__
	SKIP("ASan cannot follow a thread cancellation's unwinding");
#endif
#ifdef __SANITIZE_THREAD__
	/* A thread cancelled inside an intercepted blocking call unwinds
	 * with TSan still inside its interceptor: the locks its key
	 * destructors take are not seen, and their writes show as races. */
	SKIP("TSan cannot follow a cancellation out of a blocking call");
#endif
	int under_sdp = dlsym(RTLD_DEFAULT, "sdp_version") != NULL;
	pthread_t th;
	void *rv;
	char b;
	int c, s;
	PAIR(c, s);

	/* 1. recv: cancelled; the connection goes on for this thread. */
	struct blocked_call r = { .fd = c };
	CHECK(pthread_create(&th, NULL, blocked_recv, &r) == 0, "pthread_create");
	if (cancel_and_join(th, &r, &rv) < 0)
		return -1;
	CHECK(rv == PTHREAD_CANCELED, "recv: the thread was not cancelled");
	WRITEN(s, "y", 1);
	READN(c, &b, 1);
	CHECK(b == 'y', "recv after the cancelled one got '%c'", b);

	/* 2. A thread that disabled cancellation is not interrupted: its
	 * recv returns the byte, and the cancel acts when it enables. */
	struct blocked_call d = { .fd = c, .disable = 1 };
	CHECK(pthread_create(&th, NULL, blocked_recv, &d) == 0, "pthread_create");
	wait_in_call(&d);
	CHECK(pthread_cancel(th) == 0, "pthread_cancel");
	WRITEN(s, "z", 1);
	CHECK(join_10s(th, &rv) == 0,
	      "a thread with cancellation disabled never returned from recv");
	CHECK(d.n == 1 && d.b == 'z',
	      "cancellation disabled, yet recv returned %zd (%s)", d.n,
	      d.n < 0 ? strerror(errno) : "");
	CHECK(rv == PTHREAD_CANCELED, "the cancel did not act once enabled");

	/* 2b. A cancel that comes while an SA_RESTART handler runs on the
	 * blocked thread: the restart after the handler must not swallow
	 * it (the handler holds until the cancel has been sent). */
	struct sigaction hold, old;
	memset(&hold, 0, sizeof hold);
	hold.sa_handler = on_hold_signal;
	hold.sa_flags = SA_RESTART;
	sigemptyset(&hold.sa_mask);
	SYS(sigaction(SIGUSR2, &hold, &old));
	struct blocked_call h = { .fd = c };
	hold_in = hold_release = 0;
	CHECK(pthread_create(&th, NULL, blocked_recv, &h) == 0, "pthread_create");
	wait_in_call(&h);
	CHECK(pthread_kill(th, SIGUSR2) == 0, "pthread_kill");
	for (int i = 0; i < 5000 && !hold_in; i++)
		msleep_poll(1);
	CHECK(hold_in, "the handler never ran");
	CHECK(pthread_cancel(th) == 0, "pthread_cancel");
	hold_release = 1;
	CHECK(join_10s(th, &rv) == 0,
	      "a cancel sent while an SA_RESTART handler ran was lost");
	CHECK(rv == PTHREAD_CANCELED, "recv (SA_RESTART): not cancelled");
	sigaction(SIGUSR2, &old, NULL);

	/* 3. send into a full connection: cancelled, and the peer reads the
	 * stream whole, at least every byte a returned call reported (over
	 * SDP exactly those: a call that moved bytes returns them). */
	struct blocked_call w = { .fd = c };
	CHECK(pthread_create(&th, NULL, blocked_send, &w) == 0, "pthread_create");
	if (cancel_and_join(th, &w, &rv) < 0)
		return -1;
	CHECK(rv == PTHREAD_CANCELED, "send: the thread was not cancelled");
	SYS(shutdown(c, SHUT_WR));
	long got = 0;
	static unsigned char in[65536];
	for (;;) {
		ssize_t n = recv(s, in, sizeof in, 0);
		if (n < 0 && errno == EINTR)
			continue;
		CHECK(n >= 0, "recv of the sent stream: %s", strerror(errno));
		if (n == 0)
			break;
		for (ssize_t i = 0; i < n; i++)
			CHECK(in[i] == stream_byte(got + i),
			      "stream byte %ld is wrong", got + (long)i);
		got += n;
	}
	CHECK(got >= w.sent, "the peer read %ld bytes, the sends reported %ld",
	      got, (long)w.sent);
	CHECK(!under_sdp || got == w.sent,
	      "the peer read %ld bytes, the sends reported %ld: a cancelled "
	      "call moved bytes it did not report", got, (long)w.sent);
	close(c);
	close(s);

	/* 4. accept: cancelled; the listener still accepts. */
	uint16_t port;
	int l = t_listen(g_domain, g_af, &port, 8);
	if (l < 0)
		return -1;
	struct blocked_call a = { .fd = l };
	CHECK(pthread_create(&th, NULL, blocked_accept, &a) == 0, "pthread_create");
	if (cancel_and_join(th, &a, &rv) < 0)
		return -1;
	CHECK(rv == PTHREAD_CANCELED, "accept: the thread was not cancelled");
	NEWSOCK(c);
	if (t_bind_client(c, g_af) < 0)
		return -1;
	sockaddr_any sa;
	socklen_t len = make_env_addr(&sa, g_af, port, "SDP_TEST_CONNECT_ADDR");
	SYS(connect(c, &sa.sa, len));
	s = accept(l, NULL, NULL);
	CHECK(s >= 0, "accept after the cancelled one: %s", strerror(errno));
	WRITEN(c, "a", 1);
	READN(s, &b, 1);
	CHECK(b == 'a', "data after the cancelled accept");
	close(c);
	close(s);
	close(l);
	return 0;
}

/* shutdown(SHUT_RDWR) of a listener wakes the thread blocked in accept()
 * (EINVAL, as Linux TCP), wakes pollers, and refuses new
 * connections. */
static int t_listener_shutdown(void)
{
	uint16_t port;
	int l = t_listen(g_domain, g_af, &port, 8);
	if (l < 0)
		return -1;
	struct blocked_call a = { .fd = l };
	pthread_t th;
	CHECK(pthread_create(&th, NULL, blocked_accept, &a) == 0, "pthread_create");
	wait_in_call(&a);
	SYS(shutdown(l, SHUT_RDWR));
	CHECK(join_10s(th, NULL) == 0,
	      "accept() still blocked 10 s after shutdown() of its listener");
	CHECK(a.n < 0, "accept() after shutdown returned %zd", a.n);
	struct pollfd p = { .fd = l, .events = POLLIN };
	/* Linux: POLLHUP; the library: POLLIN.  Either wakes a poller. */
	CHECK(poll(&p, 1, 5000) == 1 && (p.revents & (POLLIN | POLLHUP)),
	      "the shut-down listener does not wake a poller (revents %#x)",
	      p.revents);
	EXPECT_ERR(accept(l, NULL, NULL), EINVAL);
	int c;
	NEWSOCK(c);
	if (t_bind_client(c, g_af) < 0)
		return -1;
	sockaddr_any sa;
	socklen_t len = make_env_addr(&sa, g_af, port, "SDP_TEST_CONNECT_ADDR");
	EXPECT_ERR(connect(c, &sa.sa, len), ECONNREFUSED);
	close(c);
	close(l);
	return 0;
}

#endif /* SEMANTICS_CHECKS_CANCEL_H */
