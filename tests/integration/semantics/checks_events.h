/* SPDX-License-Identifier: MIT */
/*
 * Checks: select/poll/ppoll/pselect, epoll (one-shot, edge-triggered), EINTR, SO_RCVTIMEO.
 *
 * Part of sdp_semantics.c (one program, one translation unit): it is
 * #included there, after semantics/harness.h.
 */
#ifndef SEMANTICS_CHECKS_EVENTS_H
#define SEMANTICS_CHECKS_EVENTS_H

static int t_multiplex(void)
{
	int c, s, tc, ts;
	PAIR(c, s);
	if (t_pair_on(AF_INET, AF_INET, &tc, &ts, NULL) < 0)
		return -1;
	int maxfd = (c > tc ? c : tc) + 1;
	for (int phase = 0; phase < 3; phase++) {
		/* phase 0: only the socket under test readable; 1: only TCP; 2: both */
		if (phase == 0)
			WRITEN(s, "1", 1);
		if (phase == 1) {
			char b;
			READN(c, &b, 1);
			WRITEN(ts, "2", 1);
		}
		if (phase == 2)
			WRITEN(s, "3", 1);
		int want_c = phase != 1, want_t = phase != 0;
		int nwant = want_c + want_t;
		/* wait for arrival through poll with a generous timeout */
		for (int i = 0; i < 5000; i++) {
			struct pollfd p[2] = { { c, POLLIN, 0 }, { tc, POLLIN, 0 } };
			int k = poll(p, 2, 0);
			if (k == nwant)
				break;
			msleep_poll(1);
		}
		/* select */
		fd_set rf, wf;
		FD_ZERO(&rf);
		FD_ZERO(&wf);
		FD_SET(c, &rf);
		FD_SET(tc, &rf);
		FD_SET(c, &wf);
		FD_SET(tc, &wf);
		struct timeval tv = { 5, 0 };
		int k = select(maxfd, &rf, &wf, NULL, &tv);
		CHECK(k == nwant + 2, "phase %d: select returned %d, expected %d", phase, k, nwant + 2);
		CHECK(!!FD_ISSET(c, &rf) == want_c && !!FD_ISSET(tc, &rf) == want_t,
		      "phase %d: select readable set wrong (sock %d, tcp %d)", phase, !!FD_ISSET(c, &rf),
		      !!FD_ISSET(tc, &rf));
		CHECK(FD_ISSET(c, &wf) && FD_ISSET(tc, &wf), "phase %d: select: not writable", phase);
		/* pselect, read set only */
		FD_ZERO(&rf);
		FD_SET(c, &rf);
		FD_SET(tc, &rf);
		struct timespec ts5 = { 5, 0 };
		sigset_t mask;
		sigemptyset(&mask);
		k = pselect(maxfd, &rf, NULL, NULL, &ts5, &mask);
		CHECK(k == nwant, "phase %d: pselect returned %d, expected %d", phase, k, nwant);
		CHECK(!!FD_ISSET(c, &rf) == want_c && !!FD_ISSET(tc, &rf) == want_t,
		      "phase %d: pselect readable set wrong", phase);
		/* poll */
		struct pollfd p[2] = { { c, POLLIN | POLLOUT, 0 }, { tc, POLLIN | POLLOUT, 0 } };
		k = poll(p, 2, 5000);
		CHECK(k == 2, "phase %d: poll returned %d", phase, k);
		CHECK(!!(p[0].revents & POLLIN) == want_c && !!(p[1].revents & POLLIN) == want_t &&
			      (p[0].revents & POLLOUT) && (p[1].revents & POLLOUT),
		      "phase %d: poll revents 0x%x 0x%x", phase, p[0].revents, p[1].revents);
		/* ppoll, POLLIN only */
		struct pollfd q[2] = { { c, POLLIN, 0 }, { tc, POLLIN, 0 } };
		k = ppoll(q, 2, &ts5, &mask);
		CHECK(k == nwant, "phase %d: ppoll returned %d, expected %d", phase, k, nwant);
		CHECK(!!(q[0].revents & POLLIN) == want_c && !!(q[1].revents & POLLIN) == want_t,
		      "phase %d: ppoll revents 0x%x 0x%x", phase, q[0].revents, q[1].revents);
	}
	/* a timeout with nothing readable */
	char b[2];
	READN(c, b, 1);
	READN(tc, b, 1);
	fd_set rf;
	FD_ZERO(&rf);
	FD_SET(c, &rf);
	FD_SET(tc, &rf);
	struct timeval tv = { 0, 20000 };
	int k = select(maxfd, &rf, NULL, NULL, &tv);
	CHECK(k == 0, "select with nothing readable returned %d", k);
	struct pollfd p[2] = { { c, POLLIN, 0 }, { tc, POLLIN, 0 } };
	k = poll(p, 2, 20);
	CHECK(k == 0, "poll with nothing readable returned %d", k);
	close(c);
	close(s);
	close(tc);
	close(ts);
	return 0;
}

static int ep_wait(int ep, struct epoll_event *ev, int ms)
{
	int k;
	do
		k = epoll_wait(ep, ev, 1, ms);
	while (k < 0 && errno == EINTR);
	return k;
}

static int t_epoll_oneshot(void)
{
	int c, s;
	PAIR(c, s);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	SYS(ep);
	struct epoll_event ev = { .events = EPOLLIN | EPOLLONESHOT, .data.u64 = 0xfeed };
	SYS(epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev));
	struct epoll_event out;
	CHECK(ep_wait(ep, &out, 0) == 0, "event reported with no data");
	WRITEN(s, "1", 1);
	int k = ep_wait(ep, &out, 5000);
	CHECK(k == 1 && (out.events & EPOLLIN) && out.data.u64 == 0xfeed, "no EPOLLIN event (k=%d)", k);
	WRITEN(s, "2", 1);
	k = ep_wait(ep, &out, 50);
	CHECK(k == 0, "EPOLLONESHOT: event reported again before re-arming");
	ev.data.u64 = 0xbeef;
	SYS(epoll_ctl(ep, EPOLL_CTL_MOD, c, &ev));
	k = ep_wait(ep, &out, 5000);
	CHECK(k == 1 && (out.events & EPOLLIN) && out.data.u64 == 0xbeef,
	      "no event after re-arming with EPOLL_CTL_MOD (k=%d)", k);
	k = ep_wait(ep, &out, 0);
	CHECK(k == 0, "EPOLLONESHOT: second event without re-arm");
	char b[2];
	READN(c, b, 2);
	CHECK(b[0] == '1' && b[1] == '2', "wrong data");
	SYS(epoll_ctl(ep, EPOLL_CTL_DEL, c, NULL));
	close(ep);
	close(c);
	close(s);
	return 0;
}

static int t_epoll_et(void)
{
	int c, s;
	PAIR(c, s);
	int ep = epoll_create1(0);
	SYS(ep);
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET, .data.fd = c };
	SYS(epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev));
	struct epoll_event out;
	WRITEN(s, "a", 1);
	int k = ep_wait(ep, &out, 5000);
	CHECK(k == 1 && (out.events & EPOLLIN) && out.data.fd == c, "no EPOLLIN edge (k=%d)", k);
	k = ep_wait(ep, &out, 50);
	CHECK(k == 0, "EPOLLET: event repeated without new data");
	WRITEN(s, "b", 1);
	k = ep_wait(ep, &out, 5000);
	CHECK(k == 1 && (out.events & EPOLLIN),
	      "EPOLLET: no new edge when more data arrived while earlier data was still unread (k=%d); "
	      "Linux reports one per arrival",
	      k);
	char b[2];
	set_nonblock(c, 1);
	size_t got = 0;
	while (got < 2) {
		ssize_t n = recv(c, b + got, 2 - got, 0);
		if (n > 0)
			got += (size_t)n;
		else if (n < 0 && errno == EAGAIN)
			ep_wait(ep, &out, 1000);
		else
			FAIL("recv: %zd %s", n, strerror(errno));
	}
	CHECK(ep_wait(ep, &out, 0) == 0, "event after draining");
	/* level-triggered EPOLLOUT on an idle connection */
	int ep2 = epoll_create1(0);
	struct epoll_event ev2 = { .events = EPOLLOUT, .data.fd = c };
	SYS(epoll_ctl(ep2, EPOLL_CTL_ADD, c, &ev2));
	CHECK(ep_wait(ep2, &out, 5000) == 1 && (out.events & EPOLLOUT), "no EPOLLOUT");
	CHECK(ep_wait(ep2, &out, 0) == 1 && (out.events & EPOLLOUT), "level-triggered EPOLLOUT not repeated");
	close(ep2);
	close(ep);
	close(c);
	close(s);
	return 0;
}

typedef struct {
	pthread_t target;
	int done;	/* atomic */
} sig_t_arg;

static void *signaller(void *arg)
{
	sig_t_arg *a = arg;
	for (int i = 0; i < 500 && !__atomic_load_n(&a->done, __ATOMIC_ACQUIRE); i++) {
		pthread_kill(a->target, SIGUSR1);
		msleep_poll(10);
	}
	return NULL;
}

static int t_eintr(void)
{
	int c, s;
	PAIR(c, s);
	struct sigaction sa, old;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_sigusr1;
	sa.sa_flags = 0; /* no SA_RESTART */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, &old);
	sig_t_arg a = { pthread_self(), 0 };
	pthread_t th;
	pthread_create(&th, NULL, signaller, &a);
	char b;
	errno = 0;
	ssize_t n = recv(c, &b, 1, 0);
	int e = errno;
	__atomic_store_n(&a.done, 1, __ATOMIC_RELEASE);
	pthread_join(th, NULL);
	sigaction(SIGUSR1, &old, NULL);
	CHECK(n < 0 && e == EINTR, "blocking recv interrupted by a signal returned %zd (%s), expected -1 EINTR",
	      n, n < 0 ? strerror(e) : "data");
	CHECK(sigusr1_count > 0, "handler did not run");
	/* the connection still works */
	WRITEN(s, "e", 1);
	READN(c, &b, 1);
	CHECK(b == 'e', "wrong data after EINTR");
	close(c);
	close(s);
	return 0;
}

static int t_rcvtimeo(void)
{
	int c, s;
	PAIR(c, s);
	struct timeval tv = { 0, 100000 };
	SYS(setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv));
	struct timeval g = { 0, 0 };
	socklen_t len = sizeof g;
	SYS(getsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &g, &len));
	CHECK(g.tv_sec == 0 && g.tv_usec >= 90000 && g.tv_usec <= 110000, "SO_RCVTIMEO reads back %ld.%06ld",
	      (long)g.tv_sec, (long)g.tv_usec);
	double t0 = now_sec();
	char b;
	EXPECT_ERR(recv(c, &b, 1, 0), EAGAIN);
	double dt = now_sec() - t0;
	CHECK(dt >= 0.08 && dt < 5, "SO_RCVTIMEO of 100 ms timed out after %.3f s", dt);
	close(c);
	close(s);
	return 0;
}


/*
 * A connection that only blocking calls have used yet: the first wait in
 * the kernel that names it (poll, select, epoll, SIGIO) must report what
 * arrived before it and what arrives while it sleeps.  (libsdp's peer
 * writes no readiness byte until such a wait has named the socket.)
 */
enum { FW_POLL0, FW_POLL, FW_SELECT, FW_EPOLL, FW_SIGIO, FW_DUP, FW_KINDS };
static const char *const fw_name[FW_KINDS] = {
	"poll(0) loop", "poll", "select", "epoll_wait", "SIGIO",
	"poll on a dup",
};

/* 1 if `fd` was reported readable within `ms`. */
static int fw_wait(int kind, int fd, int ms)
{
	if (kind == FW_POLL0) {
		double end = now_sec() + ms / 1000.0;

		do {
			struct pollfd p = { fd, POLLIN, 0 };

			if (poll(&p, 1, 0) == 1 && (p.revents & POLLIN))
				return 1;
			msleep_poll(1);
		} while (now_sec() < end);
		return 0;
	}
	if (kind == FW_POLL || kind == FW_DUP) {
		struct pollfd p = { fd, POLLIN, 0 };

		return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
	}
	if (kind == FW_SELECT) {
		fd_set rf;
		struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

		FD_ZERO(&rf);
		FD_SET(fd, &rf);
		return select(fd + 1, &rf, NULL, NULL, &tv) == 1;
	}
	if (kind == FW_EPOLL) {
		struct epoll_event ev = { .events = EPOLLIN }, out;
		int ep = epoll_create1(EPOLL_CLOEXEC), k;

		if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
			return 0;
		k = ep_wait(ep, &out, ms);
		close(ep);
		return k == 1 && (out.events & EPOLLIN);
	}
	/* SIGIO: blocked, taken with sigtimedwait (F_SETOWN, O_ASYNC set by
	 * the caller before the data was sent). */
	sigset_t io;
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	sigemptyset(&io);
	sigaddset(&io, SIGIO);
	return sigtimedwait(&io, NULL, &ts) == SIGIO;
}

struct fw_sender {
	int fd;
	char byte;
};

static void *fw_send_later(void *arg)
{
	struct fw_sender *w = arg;

	/* Most often after the waiter sleeps; either order must work. */
	msleep_poll(50);
	if (send(w->fd, &w->byte, 1, MSG_NOSIGNAL) != 1)
		w->byte = 0;
	return NULL;
}

static int t_first_wait_after_blocking_io(void)
{
	sigset_t io, old;

	sigemptyset(&io);
	sigaddset(&io, SIGIO);
	SYS(pthread_sigmask(SIG_BLOCK, &io, &old));
	for (int kind = 0; kind < FW_KINDS; kind++) {
		struct fw_sender w;
		pthread_t th;
		int c, s;
		char b;

		PAIR(c, s);
		/* Blocking traffic both ways first. */
		WRITEN(s, "a", 1);
		READN(c, &b, 1);
		WRITEN(c, "A", 1);
		READN(s, &b, 1);
		/* The wait names a second number of the same socket. */
		int wfd = kind == FW_DUP ? dup(c) : c;

		CHECK(wfd >= 0, "dup: %s", strerror(errno));
		if (kind == FW_SIGIO) {
			SYS(fcntl(c, F_SETOWN, getpid()));
			SYS(fcntl(c, F_SETFL, fcntl(c, F_GETFL) | O_ASYNC));
		} else {
			/* There before the wait: send() has returned. */
			WRITEN(s, "b", 1);
			CHECK(fw_wait(kind, wfd, 5000),
			      "%s: data that came before the first wait "
			      "not reported", fw_name[kind]);
			READN(c, &b, 1);
			CHECK(b == 'b', "%s: read %c, not b", fw_name[kind], b);
		}
		w.fd = s;
		w.byte = 'c';
		CHECK(pthread_create(&th, NULL, fw_send_later, &w) == 0,
		      "pthread_create");
		int got = fw_wait(kind, wfd, 5000);
		pthread_join(th, NULL);
		CHECK(w.byte == 'c', "%s: send failed", fw_name[kind]);
		CHECK(got, "%s: data that came during the wait not reported",
		      fw_name[kind]);
		READN(c, &b, 1);
		CHECK(b == 'c', "%s: read %c, not c", fw_name[kind], b);
		if (wfd != c)
			close(wfd);
		close(c);
		close(s);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return 0;
}

/*
 * The same, for states rather than data: what a connection that only
 * blocking calls have used has come to (its send side full, the peer's
 * EOF, a reset) is what the first poll reports, and the next change wakes
 * it.
 */
static int t_first_wait_sees_state(void)
{
	int c, s;
	char buf[4096];
	memset(buf, 'f', sizeof buf);

	/* Full: not writable, then writable once the peer reads. */
	PAIR(c, s);
	WRITEN(c, "a", 1);
	READN(s, buf, 1);
	size_t sent = 0;
	for (int i = 0; i < 1 << 16; i++) {
		ssize_t n = send(c, buf, sizeof buf, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0) {
			CHECK(errno == EAGAIN, "filling: %s", strerror(errno));
			break;
		}
		sent += (size_t)n;
	}
	CHECK(sent > 0, "nothing sent before EAGAIN");
	struct pollfd p = { c, POLLOUT, 0 };
	SYS(poll(&p, 1, 0));
	CHECK(!(p.revents & POLLOUT), "full send side: the first poll says writable");
	size_t got = 0;
	while (got < sent) {
		ssize_t n = recv(s, buf, sizeof buf, 0);
		CHECK(n > 0, "draining: %zd (%s)", n, strerror(errno));
		got += (size_t)n;
	}
	p.revents = 0;
	CHECK(poll(&p, 1, 5000) == 1 && (p.revents & POLLOUT),
	      "the peer read everything: not writable (revents 0x%x)", p.revents);
	close(c);
	close(s);

	/* The peer's EOF, there before the first wait. */
	PAIR(c, s);
	WRITEN(s, "a", 1);
	READN(c, buf, 1);
	close(s);
	p = (struct pollfd){ c, POLLIN | POLLRDHUP, 0 };
	CHECK(poll(&p, 1, 5000) == 1 && (p.revents & POLLIN) && (p.revents & POLLRDHUP),
	      "peer closed: first poll revents 0x%x, want POLLIN|POLLRDHUP", p.revents);
	CHECK(recv(c, buf, 1, 0) == 0, "after EOF: recv did not return 0");
	close(c);

	/* A reset, there before the first wait. */
	PAIR(c, s);
	WRITEN(s, "a", 1);
	READN(c, buf, 1);
	struct linger lg = { 1, 0 };
	SYS(setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof lg));
	close(s);
	p = (struct pollfd){ c, POLLIN, 0 };
	CHECK(poll(&p, 1, 5000) == 1 && (p.revents & (POLLERR | POLLHUP)),
	      "peer reset: first poll revents 0x%x, want POLLERR or POLLHUP", p.revents);
	close(c);
	return 0;
}

/*
 * A message that comes while no wait in the kernel names the socket is
 * announced to nobody (the application takes it when it calls in).  The
 * first wait must see it even where libsdp cannot yet hand the readiness
 * descriptor to the peer: a process that is not dumpable (a server that
 * changed its ids, as Apache's children do) must send it rather than offer
 * it by number, and a connection falls back to its progress doorbell until
 * then.  APR reads a new connection, meets EAGAIN, then polls it: the
 * request arrives between the two.
 */
static int t_first_wait_after_unannounced_arrival(void)
{
	int c, s, round;
	char b;

	/* libsdp reads its ids and dumpability at most once a second, and
	 * this process is left not dumpable if a check below fails: only in
	 * a process of its own. */
	if (g_no_fork)
		SKIP("needs a process of its own (without --no-fork)");
	SYS(prctl(PR_SET_DUMPABLE, 0));
	for (round = 0; round < 4; round++) {
		PAIR(c, s);
		SYS(fcntl(s, F_SETFL, fcntl(s, F_GETFL) | O_NONBLOCK));
		CHECK(recv(s, &b, 1, 0) < 0 && errno == EAGAIN,
		      "round %d: nothing sent, yet recv did not say EAGAIN", round);
		b = (char)('a' + round);
		WRITEN(c, &b, 1);
		struct pollfd p = { s, POLLIN, 0 };
		CHECK(poll(&p, 1, 3000) == 1 && (p.revents & POLLIN),
		      "round %d: a byte sent before the first poll, which did not see it in 3 s (revents 0x%x)",
		      round, p.revents);
		CHECK(recv(s, &b, 1, 0) == 1 && b == 'a' + round,
		      "round %d: the byte read back is not the one sent", round);
		/* And the answer, the same way round. */
		CHECK(recv(c, &b, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN,
		      "round %d: the client has data it was not sent", round);
		WRITEN(s, &b, 1);
		p = (struct pollfd){ c, POLLIN, 0 };
		CHECK(poll(&p, 1, 3000) == 1 && (p.revents & POLLIN),
		      "round %d: the answer was not seen by the client's first poll", round);
		close(c);
		close(s);
	}
	/* Two messages before the first poll: that poll takes both in, and
	 * the descriptor is sent at the next arm.  The peer's later credit
	 * updates (no readiness byte: nothing to read) must still ring the
	 * progress thread, or a send side the peer drained stays full. */
	char buf[4096];
	size_t sent = 0, got = 0;

	memset(buf, 'w', sizeof buf);
	PAIR(c, s);
	SYS(fcntl(s, F_SETFL, fcntl(s, F_GETFL) | O_NONBLOCK));
	CHECK(recv(s, &b, 1, 0) < 0 && errno == EAGAIN, "nothing sent, yet recv did not say EAGAIN");
	int one = 1;
	SYS(setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one));	/* two messages */
	WRITEN(c, "x", 1);
	WRITEN(c, "y", 1);
	struct pollfd p = { s, POLLIN, 0 };
	CHECK(poll(&p, 1, 3000) == 1 && (p.revents & POLLIN),
	      "two bytes sent before the first poll, which did not see them (revents 0x%x)", p.revents);
	while (got < 2) {
		ssize_t n = recv(s, buf, 2 - got, 0);
		if (n < 0 && errno == EAGAIN) {
			p = (struct pollfd){ s, POLLIN, 0 };
			CHECK(poll(&p, 1, 3000) == 1, "the second byte did not come");
			continue;
		}
		CHECK(n > 0, "reading the two bytes: %zd (%s)", n, strerror(errno));
		got += (size_t)n;
	}
	for (int i = 0; i < 1 << 16; i++) {
		ssize_t n = send(s, buf, sizeof buf, MSG_NOSIGNAL);
		if (n < 0) {
			CHECK(errno == EAGAIN, "filling: %s", strerror(errno));
			break;
		}
		sent += (size_t)n;
	}
	for (got = 0; got < sent;) {
		ssize_t n = recv(c, buf, sizeof buf, 0);
		CHECK(n > 0, "draining: %zd (%s)", n, strerror(errno));
		got += (size_t)n;
	}
	p = (struct pollfd){ s, POLLOUT, 0 };
	CHECK(poll(&p, 1, 3000) == 1 && (p.revents & POLLOUT),
	      "the peer read all %zu bytes, and the send side was still not writable after 3 s",
	      sent);
	close(c);
	close(s);
	prctl(PR_SET_DUMPABLE, 1);
	return 0;
}

/*
 * Out of descriptors when the first wait names a connection that only
 * blocking calls have used (libsdp makes its readiness pair then): the
 * wait fails with ENOMEM or answers correctly, never sleeps unwoken, and
 * once descriptors are free again the next wait sees the data.
 */
static int t_first_wait_out_of_descriptors(void)
{
	struct rlimit old, low;
	int c, s, fills[64], nfill = 0, k, e;
	char b;

	PAIR(c, s);
	WRITEN(s, "a", 1);
	READN(c, &b, 1);
	WRITEN(s, "b", 1);
	SYS(getrlimit(RLIMIT_NOFILE, &old));
	/* Every number below the new limit taken. */
	int top = c > s ? c : s;
	for (int fd = 0; fd <= top + 4; fd++)
		if (fcntl(fd, F_GETFD) >= 0 && fd > top)
			top = fd;
	low = old;
	low.rlim_cur = (rlim_t)top + 1;
	SYS(setrlimit(RLIMIT_NOFILE, &low));
	for (;;) {
		int f = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (f < 0)
			break;
		if (nfill == 64) {
			close(f);
			break;
		}
		fills[nfill++] = f;
	}
	struct pollfd p = { c, POLLIN, 0 };
	errno = 0;
	k = poll(&p, 1, 1000);
	e = errno;
	for (int i = 0; i < nfill; i++)
		close(fills[i]);
	SYS(setrlimit(RLIMIT_NOFILE, &old));
	CHECK((k < 0 && e == ENOMEM) || (k == 1 && (p.revents & POLLIN)),
	      "poll with no descriptor left: %d (%s), revents 0x%x", k,
	      k < 0 ? strerror(e) : "-", p.revents);
	p.revents = 0;
	CHECK(poll(&p, 1, 5000) == 1 && (p.revents & POLLIN),
	      "descriptors free again: data not reported (revents 0x%x)", p.revents);
	READN(c, &b, 1);
	CHECK(b == 'b', "read %c, not b", b);
	close(c);
	close(s);
	return 0;
}

struct pp_echo {
	int fd, n;
	pid_t tid;
	int err;
	int ep;		/* > 0: wait in epoll_wait on it before each recv */
};

static void *pp_echo_main(void *arg)
{
	struct pp_echo *e = arg;
	char b;

	__atomic_store_n(&e->tid, my_tid(), __ATOMIC_RELEASE);
	for (int i = 0; i < e->n; i++) {
		struct epoll_event ev;

		if ((e->ep > 0 && epoll_wait(e->ep, &ev, 1, -1) != 1) ||
		    recv(e->fd, &b, 1, MSG_WAITALL) != 1 ||
		    send(e->fd, &b, 1, MSG_NOSIGNAL) != 1) {
			e->err = errno ? errno : EIO;
			break;
		}
	}
	return NULL;
}

/*
 * A blocking ping-pong on connections no wait in the kernel has named
 * wakes only the two threads that take part: the peer wakes a sleeping
 * receiver on the connection itself, and nothing else in either process
 * (no readiness byte, no doorbell for the library's threads).  Counted,
 * not timed: the library's threads may wake for their own timers, never
 * once per message.
 */
static int t_blocking_pingpong_wakes_no_one_else(void)
{
	enum { ROUNDS = 2000 };
	struct pp_echo e = { 0 };
	pthread_t th;
	int c, s;
	char b = 'p';

	PAIR(c, s);
	e.fd = s;
	e.n = ROUNDS;
	CHECK(pthread_create(&th, NULL, pp_echo_main, &e) == 0, "pthread_create");
	/* A first exchange: every thread of the library has started. */
	WRITEN(c, &b, 1);
	READN(c, &b, 1);
	while (!__atomic_load_n(&e.tid, __ATOMIC_ACQUIRE))
		msleep_poll(1);
	long before = others_switches(my_tid(), e.tid);
	for (int i = 1; i < ROUNDS; i++) {
		WRITEN(c, &b, 1);
		READN(c, &b, 1);
	}
	long after = others_switches(my_tid(), e.tid);
	pthread_join(th, NULL);
	CHECK(e.err == 0, "echo thread: %s", strerror(e.err));
	CHECK(before >= 0 && after >= 0, "cannot read /proc/self/task");
	CHECK(after - before < ROUNDS / 10,
	      "%ld wake-ups of other threads in %d round trips", after - before,
	      ROUNDS - 1);
	close(c);
	close(s);
	return 0;
}

/* Round trips of one byte over c, echoed by a thread on s, for at most
 * `cap` seconds: seconds per round trip, or -1.  `ep`, `ep_s` > 0: each
 * side waits in epoll_wait on its set before each recv, as event loops
 * do.  Stopping early, the echo thread is ended by our half-close.  s is
 * then spent. */
static double pp_rounds(int c, int s, int n, int ep, int ep_s, double cap)
{
	struct pp_echo e = { .fd = s, .n = n, .ep = ep_s };
	struct epoll_event ev;
	pthread_t th;
	double t0, t;
	char b = 'q';
	int i;

	if (pthread_create(&th, NULL, pp_echo_main, &e) != 0)
		return -1;
	t0 = now_sec();
	for (i = 0; i < n && now_sec() - t0 < cap; i++) {
		if (send(c, &b, 1, MSG_NOSIGNAL) != 1)
			break;
		if (ep > 0 && epoll_wait(ep, &ev, 1, -1) != 1)
			break;
		if (recv(c, &b, 1, MSG_WAITALL) != 1)
			break;
	}
	t = now_sec() - t0;
	if (i < n)
		shutdown(c, SHUT_WR);
	pthread_join(th, NULL);
	return i && (i == n ? !e.err : e.err == EIO || !e.err) ? t / i : -1;
}

/*
 * Beside a program that keeps the CPU busy, a ping-pong is as fast as one
 * over a kernel socketpair, within a factor: a spin that waits for the
 * answer must not hand the CPU to the busy program for a whole scheduler
 * slice per message (it did: 4 ms a round trip against 17 us over TCP).
 * Everything runs on one CPU, with the busy process there too; the kernel
 * socketpair beside it is the yardstick, measured in the same run.
 */
static int t_pingpong_beside_a_busy_cpu(void)
{
	enum { ROUNDS = 400 };
	int c, s, c2, s2, u[2], ep, ep_s;
	struct epoll_event ev = { .events = EPOLLIN };
	double t_ref, t_blk, t_ep;
	pid_t hog = busy_cpu_start();

	CHECK(hog > 0, "a busy process on our CPU: %s", strerror(errno));
	PAIR(c, s);
	PAIR(c2, s2);
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, u) == 0, "socketpair");
	ep = epoll_create1(0);
	ep_s = epoll_create1(0);
	ev.data.fd = c2;
	CHECK(ep > 0 && epoll_ctl(ep, EPOLL_CTL_ADD, c2, &ev) == 0, "epoll");
	ev.data.fd = s2;
	CHECK(ep_s > 0 && epoll_ctl(ep_s, EPOLL_CTL_ADD, s2, &ev) == 0,
	      "epoll");
	/* A first exchange: every thread of the library has started. */
	CHECK(pp_rounds(c, s, 10, 0, 0, 5) >= 0, "warm-up ping-pong failed");
	t_ref = pp_rounds(u[0], u[1], ROUNDS, 0, 0, 2);
	t_blk = pp_rounds(c, s, ROUNDS, 0, 0, 2);
	t_ep = pp_rounds(c2, s2, ROUNDS, ep, ep_s, 2);
	busy_cpu_stop(hog);
	CHECK(t_ref > 0 && t_blk > 0 && t_ep > 0, "a ping-pong failed");
	/* 100 us of slack per round trip: the yardstick can be very fast. */
	CHECK(t_blk < 10 * t_ref + 100e-6 && t_ep < 10 * t_ref + 100e-6,
	      "round trips beside a busy CPU: %.0f us blocking, %.0f us "
	      "through epoll, against %.0f us over a kernel socketpair",
	      t_blk * 1e6, t_ep * 1e6, t_ref * 1e6);
	close(ep);
	close(ep_s);
	close(u[0]);
	close(u[1]);
	close(c);
	close(s);
	close(c2);
	close(s2);
	return 0;
}

#endif /* SEMANTICS_CHECKS_EVENTS_H */
