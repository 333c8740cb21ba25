/* SPDX-License-Identifier: MIT */
/*
 * The harness of sdp_semantics: TAP state, CHECK/SYS/EXPECT_ERR, connected pairs, waits, signal counters.
 *
 * Part of sdp_semantics.c (one program, one translation unit): it is
 * #included there, after semantics/harness.h.
 */
#ifndef SEMANTICS_HARNESS_H
#define SEMANTICS_HARNESS_H

static char detail[600];
static int t_num, t_fail, t_skip;
static int g_no_fork;	/* --no-fork: every check in this one process */
static const char *cur_name;

#define T_SKIP 77
#define FAIL(...)                                                  \
	do {                                                       \
		snprintf(detail, sizeof detail, __VA_ARGS__);      \
		return -1;                                         \
	} while (0)
#define SKIP(...)                                                  \
	do {                                                       \
		snprintf(detail, sizeof detail, __VA_ARGS__);      \
		return T_SKIP;                                     \
	} while (0)
#define CHECK(cond, ...)                    \
	do {                                \
		if (!(cond))                \
			FAIL(__VA_ARGS__);  \
	} while (0)
/* a call that must succeed */
#define SYS(expr)                                                                          \
	do {                                                                               \
		if ((expr) < 0)                                                            \
			FAIL("%s failed: %s (errno %d) [line %d]", #expr, strerror(errno), \
			     errno, __LINE__);                                             \
	} while (0)
/* a call that must fail with errno E */
#define EXPECT_ERR(expr, E)                                                                     \
	do {                                                                                    \
		errno = 0;                                                                      \
		long _r = (long)(expr);                                                         \
		if (_r >= 0 || errno != (E))                                                    \
			FAIL("%s returned %ld (%s), expected -1 %s [line %d]", #expr, _r,       \
			     _r < 0 ? strerror(errno) : "success", #E, __LINE__);               \
	} while (0)

static pid_t my_tid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

/* Is thread tid asleep in a kernel function whose name contains `fn`
 * (its wchan)?  More precise than task_sleeps(): a lock's futex is a
 * sleep too. */
static int thread_waits_in(pid_t tid, const char *fn)
{
	char path[64], w[64] = "";
	snprintf(path, sizeof path, "/proc/self/task/%d/wchan", (int)tid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	if (!fgets(w, sizeof w, f))
		w[0] = 0;
	fclose(f);
	return strstr(w, fn) != NULL;
}

/* Voluntary context switches of thread `tid` of this process (0 if it
 * ended): each is a sleep that something woke. */
static long task_switches(pid_t tid)
{
	char path[64], line[128];
	long n = 0;
	FILE *f;

	snprintf(path, sizeof path, "/proc/self/task/%d/status", (int)tid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, "voluntary_ctxt_switches:", 24))
			n = atol(line + 24);
	fclose(f);
	return n;
}

/* The same, summed over this process's threads other than the two named:
 * the library's own threads, in practice. */
static long others_switches(pid_t a, pid_t b)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	long sum = 0;

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		pid_t tid = (pid_t)atoi(e->d_name);

		if (tid > 0 && tid != a && tid != b)
			sum += task_switches(tid);
	}
	closedir(d);
	return sum;
}

static void msleep_poll(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* ---- socket helpers (non-fatal: return -1 and set detail) -------------- */

static int t_listen(int domain, int af, uint16_t *port, int backlog)
{
	int fd = socket(domain, SOCK_STREAM, 0);
	if (fd < 0)
		FAIL("socket(%d) failed: %s", domain, strerror(errno));
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	sockaddr_any a;
	/* Loopback, or the VM suite's server address (itest_common.h). */
	socklen_t len = make_env_addr(&a, af, 0, "SDP_TEST_SERVER_ADDR");
	if (bind(fd, &a.sa, len) < 0) {
		snprintf(detail, sizeof detail, "bind(loopback:0) failed: %s (errno %d)", strerror(errno), errno);
		close(fd);
		return -1;
	}
	if (listen(fd, backlog) < 0)
		FAIL("listen failed: %s", strerror(errno));
	len = sizeof a;
	if (getsockname(fd, &a.sa, &len) < 0)
		FAIL("getsockname(listener) failed: %s", strerror(errno));
	*port = addr_port(&a);
	return fd;
}

/* Bind a client to $SDP_TEST_CLIENT_ADDR if set (the VM suite: rxe-a). */
static int t_bind_client(int fd, int af)
{
	const char *src = getenv("SDP_TEST_CLIENT_ADDR");
	if (!src || !*src)
		return 0;
	sockaddr_any a;
	socklen_t len = make_env_addr(&a, af, 0, "SDP_TEST_CLIENT_ADDR");
	if (bind(fd, &a.sa, len) < 0)
		FAIL("bind(client, %s): %s", src, strerror(errno));
	return 0;
}

/* A connection of the family under test, made without t_pair_on(): it
 * must be carried as the run claims, like every other one. */
#define T_TRANSPORT(fd)                                                                 \
	do {                                                                            \
		if (!transport_ok(fd))                                                  \
			FAIL("fd %d over %s, expected %s [line %d]", (fd),              \
			     transport_name(fd_transport(fd)),                          \
			     transport_name(expected_transport()), __LINE__);            \
	} while (0)

typedef struct {
	int lfd, fd, err;
} acc_t;

static void *acc_thread(void *arg)
{
	acc_t *a = arg;
	do
		a->fd = accept(a->lfd, NULL, NULL);
	while (a->fd < 0 && errno == EINTR);
	a->err = a->fd < 0 ? errno : 0;
	return NULL;
}

/* connected pair over (domain, af): *c = connecting side, *s = accepted side.
 * accept runs in a thread so it does not matter whether connect completes
 * before accept is called. */
static int t_pair_on(int domain, int af, int *c, int *s, uint16_t *lport)
{
	uint16_t port;
	int lfd = t_listen(domain, af, &port, 4);
	if (lfd < 0)
		return -1;
	acc_t a = { lfd, -1, 0 };
	pthread_t th;
	if (pthread_create(&th, NULL, acc_thread, &a))
		FAIL("pthread_create failed");
	int fd = socket(domain, SOCK_STREAM, 0);
	if (fd < 0)
		FAIL("socket failed: %s", strerror(errno));
	sockaddr_any sa;
	socklen_t len;
	if (t_bind_client(fd, af) < 0)
		return -1;
	len = make_env_addr(&sa, af, port, "SDP_TEST_CONNECT_ADDR");
	int rc;
	do
		rc = connect(fd, &sa.sa, len);
	while (rc < 0 && errno == EINTR);
	int cerr = errno;
	if (rc < 0) {
		/* unblock the accept thread */
		shutdown(lfd, SHUT_RDWR);
		int w = socket(domain, SOCK_STREAM, 0);
		connect(w, &sa.sa, len);
		pthread_join(th, NULL);
		close(w);
		close(lfd);
		if (a.fd >= 0)
			close(a.fd);
		FAIL("connect to loopback:%u failed: %s (errno %d)", port, strerror(cerr), cerr);
	}
	pthread_join(th, NULL);
	close(lfd);
	if (a.fd < 0)
		FAIL("accept failed: %s (errno %d)", strerror(a.err), a.err);
	/* The family under test must be carried as the run claims (SDP under
	 * the switch, kernel TCP in a plain run); other pairs are references. */
	if (domain == g_domain && (!transport_ok(fd) || !transport_ok(a.fd))) {
		close(fd);
		close(a.fd);
		FAIL("pair over the wrong transport: connect side %s, accept side %s, expected %s",
		     transport_name(fd_transport(fd)), transport_name(fd_transport(a.fd)),
		     transport_name(expected_transport()));
	}
	*c = fd;
	*s = a.fd;
	if (lport)
		*lport = port;
	return 0;
}

static int t_pair(int *c, int *s)
{
	return t_pair_on(g_domain, g_af, c, s, NULL);
}

#define NEWSOCK(v)                                                                        \
	do {                                                                              \
		(v) = socket(g_domain, SOCK_STREAM, 0);                                   \
		if ((v) < 0)                                                              \
			FAIL("socket(%d, SOCK_STREAM, 0) failed: %s (errno %d)", g_domain, \
			     strerror(errno), errno);                                     \
	} while (0)

#define PAIR(c, s)                        \
	do {                              \
		if (t_pair(&(c), &(s)) < 0) \
			return -1;        \
	} while (0)

/* wait up to ms for events on fd; returns revents or 0 on timeout */
static int wait_ev(int fd, short ev, int ms)
{
	struct pollfd p = { .fd = fd, .events = ev };
	int k;
	do
		k = poll(&p, 1, ms);
	while (k < 0 && errno == EINTR);
	return k > 0 ? p.revents : 0;
}

/* blocking read of exactly n bytes (non-fatal) */
static int t_read_n(int fd, void *buf, size_t n)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = recv(fd, (char *)buf + got, n - got, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			FAIL("recv failed after %zu of %zu bytes: %s (errno %d)", got, n, strerror(errno), errno);
		if (r == 0)
			FAIL("unexpected EOF after %zu of %zu bytes", got, n);
		got += (size_t)r;
	}
	return 0;
}

static int t_write_n(int fd, const void *buf, size_t n)
{
	size_t done = 0;
	while (done < n) {
		ssize_t r = send(fd, (const char *)buf + done, n - done, MSG_NOSIGNAL);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			FAIL("send failed after %zu of %zu bytes: %s (errno %d)", done, n, strerror(errno), errno);
		done += (size_t)r;
	}
	return 0;
}

#define READN(fd, b, n)                         \
	do {                                    \
		if (t_read_n(fd, b, n) < 0)     \
			return -1;              \
	} while (0)
#define WRITEN(fd, b, n)                        \
	do {                                    \
		if (t_write_n(fd, b, n) < 0)    \
			return -1;              \
	} while (0)

static volatile sig_atomic_t sigpipe_count, sigusr1_count;
static void on_sigpipe(int s)
{
	sigpipe_count++;
}
static void on_sigusr1(int s)
{
	sigusr1_count++;
}

static int same_addr(const sockaddr_any *a, const sockaddr_any *b)
{
	if (a->sa.sa_family != b->sa.sa_family)
		return 0;
	if (a->sa.sa_family == AF_INET)
		return a->in.sin_port == b->in.sin_port && a->in.sin_addr.s_addr == b->in.sin_addr.s_addr;
	return a->in6.sin6_port == b->in6.sin6_port &&
	       !memcmp(&a->in6.sin6_addr, &b->in6.sin6_addr, sizeof a->in6.sin6_addr);
}

static int is_loopback(const sockaddr_any *a)
{
	if (a->sa.sa_family == AF_INET)
		return a->in.sin_addr.s_addr == htonl(INADDR_LOOPBACK);
	if (a->sa.sa_family == AF_INET6)
		return IN6_IS_ADDR_LOOPBACK(&a->in6.sin6_addr);
	return 0;
}


#endif /* SEMANTICS_HARNESS_H */
