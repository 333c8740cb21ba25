/* SPDX-License-Identifier: MIT */
/*
 * sdp_sigwait: a signal handled while a blocking call waits interrupts it,
 * exactly as the kernel's own call would be, wherever the library happens
 * to be waiting (base/sigseen.h).
 *
 * The library waits partly in user space: epoll_wait spins on its set and
 * recv spins on its connection before they sleep in the kernel.  This
 * program stretches that part to seconds (it runs itself again with
 * SDP_SPIN_US=1000000) and sends its own thread a signal 200 ms into each
 * wait, so that the handler runs during the spin:
 *  1. epoll_wait(-1) on a set whose connection was just busy, handler
 *     without SA_RESTART: returns -1/EINTR (the kernel never restarts it);
 *  2. the same with SA_RESTART: still EINTR;
 *  3. blocking recv(), handler without SA_RESTART: -1/EINTR;
 *  4. blocking recv(), handler with SA_RESTART (installed by signal()):
 *     goes on waiting, and returns the bytes the peer sends once the
 *     handler has run.
 * Each wait has a hang guard: after 10 s a byte is sent to release it, and
 * the case fails.  The same program passes on kernel TCP (--family tcp),
 * which is the reference.
 */
#include "itest_common.h"

#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>

static pthread_t g_main;
static volatile sig_atomic_t g_hits;
static int g_peer;			/* the other end: the hang guard writes */

static void on_signal(int sig)
{
	(void)sig;
	g_hits++;
}

struct kicker {
	int sig;
	int then_send;		/* after the handler ran, send a byte */
	int guard_fired;
	pthread_t th;
};

static void ms_sleep(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* 200 ms into the wait (well inside the spin), signal the main thread; if
 * the wait is still blocked 10 s later, release it with a byte. */
static void *kicker_main(void *arg)
{
	struct kicker *k = arg;
	int before = g_hits;

	ms_sleep(200);
	pthread_kill(g_main, k->sig);
	for (int i = 0; i < 1000 && g_hits == before; i++)
		ms_sleep(10);
	if (k->then_send) {
		write_full(g_peer, "d", 1, "data after the handler");
		return NULL;
	}
	for (int i = 0; i < 1000; i++) {
		ms_sleep(10);
		if (__atomic_load_n(&k->guard_fired, __ATOMIC_ACQUIRE) < 0)
			return NULL;	/* the wait returned */
	}
	__atomic_store_n(&k->guard_fired, 1, __ATOMIC_RELEASE);
	write_full(g_peer, "g", 1, "hang guard");
	return NULL;
}

static void kick(struct kicker *k, int sig, int then_send)
{
	memset(k, 0, sizeof(*k));
	k->sig = sig;
	k->then_send = then_send;
	if (pthread_create(&k->th, NULL, kicker_main, k))
		die("pthread_create failed");
}

static void kicked(struct kicker *k)
{
	if (!__atomic_load_n(&k->guard_fired, __ATOMIC_ACQUIRE))
		__atomic_store_n(&k->guard_fired, -1, __ATOMIC_RELEASE);
	pthread_join(k->th, NULL);
}

static void install(int sig, int restart)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = restart ? SA_RESTART : 0;
	if (sigaction(sig, &sa, NULL) < 0)
		DIE_ERRNO("sigaction");
}

/* One byte from the peer, read: the set (or connection) was just busy,
 * which is when the library spins before sleeping. */
static void make_busy(int ep, int fd)
{
	struct epoll_event ev;
	char c;

	write_full(g_peer, "b", 1, "busy byte");
	if (ep >= 0 && epoll_wait(ep, &ev, 1, 10000) != 1)
		die("epoll_wait for the busy byte failed");
	read_full(fd, &c, 1, "busy byte");
}

static int check_epoll(int ep, int fd, int restart)
{
	struct epoll_event ev;
	struct kicker k;
	int r, e, hits = g_hits;

	install(SIGUSR1, restart);
	make_busy(ep, fd);
	kick(&k, SIGUSR1, 0);
	r = epoll_wait(ep, &ev, 1, -1);
	e = errno;
	kicked(&k);
	if (k.guard_fired > 0) {
		char c;

		read_full(fd, &c, 1, "guard byte");
		info("FAIL epoll_wait%s: slept through the handler (released "
		     "by the hang guard after 10 s)", restart ? " SA_RESTART" : "");
		return 1;
	}
	if (r != -1 || e != EINTR || g_hits != hits + 1) {
		info("FAIL epoll_wait%s: returned %d (%s), handler ran %d times",
		     restart ? " SA_RESTART" : "", r, strerror(e), g_hits - hits);
		return 1;
	}
	info("ok epoll_wait%s: EINTR", restart ? " SA_RESTART" : "");
	return 0;
}

static int check_recv_eintr(int fd)
{
	struct kicker k;
	char c;
	ssize_t r;
	int e, hits = g_hits;

	install(SIGUSR1, 0);
	make_busy(-1, fd);
	kick(&k, SIGUSR1, 0);
	r = recv(fd, &c, 1, 0);
	e = errno;
	kicked(&k);
	if (k.guard_fired > 0 || r != -1 || e != EINTR || g_hits != hits + 1) {
		if (r == 1 && k.guard_fired > 0)
			info("FAIL recv: slept through the handler (released "
			     "by the hang guard after 10 s)");
		else
			info("FAIL recv: returned %zd (%s), handler ran %d times",
			     r, strerror(e), g_hits - hits);
		return 1;
	}
	info("ok recv: EINTR");
	return 0;
}

static int check_recv_restart(int fd)
{
	struct kicker k;
	char c = 0;
	ssize_t r;
	int e, hits = g_hits;

	if (signal(SIGUSR2, on_signal) == SIG_ERR)	/* BSD: SA_RESTART */
		DIE_ERRNO("signal");
	make_busy(-1, fd);
	kick(&k, SIGUSR2, 1);
	r = recv(fd, &c, 1, 0);
	e = errno;
	kicked(&k);
	if (r != 1 || c != 'd' || g_hits != hits + 1) {
		info("FAIL recv SA_RESTART: returned %zd (%s) '%c', handler "
		     "ran %d times", r, r < 0 ? strerror(e) : "", c,
		     g_hits - hits);
		return 1;
	}
	info("ok recv SA_RESTART: restarted, got the byte sent after the "
	     "handler");
	return 0;
}

int main(int argc, char **argv)
{
	struct epoll_event ev = { .events = EPOLLIN };
	uint16_t port = 0;
	int lfd, fd, ep, fails = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--family") && i + 1 < argc) {
			if (set_family(argv[++i]))
				die("unknown family %s", argv[i]);
		}
	}
	g_prog = "sdp_sigwait";
	/* The spin must outlast the 200 ms to the signal: the library reads
	 * its settings once, so run again with them. */
	if (!getenv("SDP_SPIN_US")) {
		setenv("SDP_SPIN_US", "1000000", 1);
		execv("/proc/self/exe", argv);
		DIE_ERRNO("execv");
	}
	g_main = pthread_self();
	lfd = make_listener(&port, 4);
	g_peer = connect_to(port);
	fd = accept_one(lfd);
	ep = epoll_create1(0);
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
		DIE_ERRNO("epoll");
	fails += check_epoll(ep, fd, 0);
	fails += check_epoll(ep, fd, 1);
	if (epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL) < 0)
		DIE_ERRNO("epoll_ctl DEL");
	fails += check_recv_eintr(fd);
	fails += check_recv_restart(fd);
	close(ep);
	close(fd);
	close(g_peer);
	close(lfd);
	if (fails)
		die("%d of 4 checks failed", fails);
	info("all 4 checks passed (%s)", g_family_name);
	return 0;
}
