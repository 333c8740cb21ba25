/* SPDX-License-Identifier: MIT */
/*
 * Shared helpers for the libsdp integration programs.  Header-only so that
 * every integration test program stays a single self-contained program (they are
 * plain POSIX socket programs; they never include libsdp headers).
 *
 * --family sdp|sdp6|tcp|tcp6 selects the socket() domain; the address
 * structures are always ordinary sockaddr_in / sockaddr_in6.
 *
 * Addresses (optional environment; default: loopback for everything):
 *   SDP_TEST_SERVER_ADDR   address make_listener() binds to
 *   SDP_TEST_CONNECT_ADDR  address connect_to() connects to
 *   SDP_TEST_CLIENT_ADDR   address connect_to() binds its socket to (port 0)
 *                          before connecting; unset: no bind
 * Each must be a numeric address of the --family's IP version.  They let the
 * programs run across two hosts/devices (e.g. rxe-a -> rxe-b in the VM suite),
 * which loopback cannot exercise.
 */
#ifndef ITEST_COMMON_H
#define ITEST_COMMON_H

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef AF_INET_SDP
#define AF_INET_SDP 27
#endif
#ifndef AF_INET6_SDP
#define AF_INET6_SDP 28
#endif

#define UNUSED_FN __attribute__((unused))

static const char *g_prog = "itest";
static int g_domain = AF_INET_SDP; /* socket() domain */
static int g_af = AF_INET;	   /* sockaddr family */
static const char *g_family_name = "sdp";

/* ---- failure reporting ------------------------------------------------- */

static UNUSED_FN void die(const char *fmt, ...)
	__attribute__((format(printf, 1, 2), noreturn));
static UNUSED_FN void die(const char *fmt, ...)
{
	va_list ap;
	char buf[512];
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s[%d] (%s): FAIL: %s\n", g_prog, (int)getpid(), g_family_name, buf);
	fflush(NULL);
	_exit(1);
}

/* die with "call: strerror(errno)" */
#define DIE_ERRNO(call) die("%s failed: %s (errno %d) at %s:%d", (call), strerror(errno), errno, \
			    __FILE__, __LINE__)

static UNUSED_FN void info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static UNUSED_FN void info(const char *fmt, ...)
{
	va_list ap;
	char buf[512];
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	printf("%s[%d]: %s\n", g_prog, (int)getpid(), buf);
	fflush(stdout);
}

/* ---- family selection --------------------------------------------------- */

static UNUSED_FN int set_family(const char *name)
{
	if (!strcmp(name, "sdp")) {
		g_domain = AF_INET_SDP;
		g_af = AF_INET;
	} else if (!strcmp(name, "sdp6")) {
		g_domain = AF_INET6_SDP;
		g_af = AF_INET6;
	} else if (!strcmp(name, "tcp")) {
		g_domain = AF_INET;
		g_af = AF_INET;
	} else if (!strcmp(name, "tcp6")) {
		g_domain = AF_INET6;
		g_af = AF_INET6;
	} else {
		return -1;
	}
	g_family_name = name;
	return 0;
}

static UNUSED_FN int is_sdp(void)
{
	return g_domain == AF_INET_SDP || g_domain == AF_INET6_SDP;
}

/* ---- which transport carries the connections under test -----------------
 * A connected socket is SDP when libsdp's SDP_CONN_TRANSPORT option (90 at
 * IPPROTO_TCP) answers, with the SDP transport that carries it (1 shm, 3
 * verbs); kernel TCP refuses it with ENOPROTOOPT.  The runner says what
 * every connection must be with SDP_TEST_TRANSPORT: sdp (any SDP transport),
 * shm, verbs, or tcp.  Left unset it is sdp for the SDP families and tcp for
 * a plain run, and a TCP family run under the libsdp preload must say it
 * (switch tests exist to prove SDP, fallback tests to prove TCP). */

#define ITEST_SDP_CONN_TRANSPORT 90

/* The SDP transport carrying fd (1 shm, 2 loop, 3 verbs), 0 for kernel TCP. */
static UNUSED_FN int fd_transport(int fd)
{
	int v = 0;
	socklen_t l = sizeof v;
	if (getsockopt(fd, IPPROTO_TCP, ITEST_SDP_CONN_TRANSPORT, &v, &l) < 0)
		return 0;
	return v > 0 ? v : -1;
}

static UNUSED_FN int fd_over_sdp(int fd)
{
	return fd_transport(fd) != 0;
}

/* Set by the tests whose subject is the choice of transport (fallback,
 * short-lived connections): they check each connection's transport against
 * their own expectation, so connect_to() and accept_one() do not. */
static int g_mixed_transports;

/* The expected fd_transport(): 0 kernel TCP, 1 shm, 3 verbs, -1 any SDP. */
static UNUSED_FN int expected_transport(void)
{
	const char *t = getenv("SDP_TEST_TRANSPORT");
	const char *pre = getenv("LD_PRELOAD");
	if (t && *t) {
		if (!strcmp(t, "sdp"))
			return -1;
		if (!strcmp(t, "shm"))
			return 1;
		if (!strcmp(t, "verbs"))
			return 3;
		if (!strcmp(t, "tcp"))
			return 0;
		die("SDP_TEST_TRANSPORT='%s': must be sdp, shm, verbs or tcp", t);
	}
	if (g_domain == AF_INET_SDP || g_domain == AF_INET6_SDP)
		return -1;
	if (pre && strstr(pre, "libsdp"))
		die("--family %s under the libsdp preload: set SDP_TEST_TRANSPORT=sdp "
		    "(the switch must carry it) or tcp (it must fall back)", g_family_name);
	return 0;
}

/* 1: every connection must be SDP; 0: every one must be kernel TCP. */
static UNUSED_FN int expect_sdp(void)
{
	return expected_transport() != 0;
}

static UNUSED_FN const char *transport_name(int t)
{
	return t == 0 ? "kernel TCP" : t == 1 ? "SDP/shm" : t == 2 ? "SDP/loop" : t == 3 ? "SDP/verbs"
							   : "SDP";
}

/* Does fd's transport match what the run expects? */
static UNUSED_FN int transport_ok(int fd)
{
	int have = fd_transport(fd), want = expected_transport();
	return want < 0 ? have != 0 : have == want;
}

/* Die unless the connected socket fd is carried by the expected transport. */
static UNUSED_FN void check_transport(int fd, const char *what)
{
	if (g_mixed_transports || transport_ok(fd))
		return;
	die("%s: fd %d is over %s, expected %s (SDP_TEST_TRANSPORT=%s)", what, fd,
	    transport_name(fd_transport(fd)), transport_name(expected_transport()),
	    getenv("SDP_TEST_TRANSPORT") ? getenv("SDP_TEST_TRANSPORT") : "unset");
}

/* the IPv6 socket() domain of the selected transport */
static UNUSED_FN int domain6(void)
{
	return is_sdp() ? AF_INET6_SDP : AF_INET6;
}

static UNUSED_FN unsigned long long parse_size(const char *s)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || end == s)
		die("bad size '%s'", s);
	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	case 'g': case 'G': v <<= 30; end++; break;
	default: break;
	}
	if (*end == 'i' || *end == 'B')
		end++;
	if (*end == 'B')
		end++;
	if (*end)
		die("bad size suffix in '%s'", s);
	return v;
}

/* ---- addresses and sockets ---------------------------------------------- */

typedef union {
	struct sockaddr sa;
	struct sockaddr_in in;
	struct sockaddr_in6 in6;
	struct sockaddr_storage ss;
} sockaddr_any;

static UNUSED_FN socklen_t make_loopback(sockaddr_any *a, int af, uint16_t port)
{
	memset(a, 0, sizeof *a);
	if (af == AF_INET6) {
		a->in6.sin6_family = AF_INET6;
		a->in6.sin6_addr = in6addr_loopback;
		a->in6.sin6_port = htons(port);
		return sizeof a->in6;
	}
	a->in.sin_family = AF_INET;
	a->in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a->in.sin_port = htons(port);
	return sizeof a->in;
}

/* make_loopback(), unless environment variable `env` is set: then that
 * numeric address (which must be of family af). */
static UNUSED_FN socklen_t make_env_addr(sockaddr_any *a, int af, uint16_t port, const char *env)
{
	socklen_t len = make_loopback(a, af, port);
	const char *s = getenv(env);
	if (!s || !*s)
		return len;
	void *dst = af == AF_INET6 ? (void *)&a->in6.sin6_addr : (void *)&a->in.sin_addr;
	if (inet_pton(af, s, dst) != 1)
		die("%s='%s' is not a numeric IPv%d address", env, s, af == AF_INET6 ? 6 : 4);
	return len;
}

static UNUSED_FN uint16_t addr_port(const sockaddr_any *a)
{
	return ntohs(a->sa.sa_family == AF_INET6 ? a->in6.sin6_port : a->in.sin_port);
}

static UNUSED_FN const char *addr_str(const sockaddr_any *a, char *buf, size_t len)
{
	char ip[INET6_ADDRSTRLEN] = "?";
	if (a->sa.sa_family == AF_INET6) {
		inet_ntop(AF_INET6, &a->in6.sin6_addr, ip, sizeof ip);
		snprintf(buf, len, "[%s]:%u", ip, addr_port(a));
	} else if (a->sa.sa_family == AF_INET) {
		inet_ntop(AF_INET, &a->in.sin_addr, ip, sizeof ip);
		snprintf(buf, len, "%s:%u", ip, addr_port(a));
	} else {
		snprintf(buf, len, "<family %d>", a->sa.sa_family);
	}
	return buf;
}

static UNUSED_FN int new_socket(void)
{
	int fd = socket(g_domain, SOCK_STREAM, 0);
	if (fd < 0)
		die("socket(domain %d, SOCK_STREAM) failed: %s (errno %d)%s", g_domain, strerror(errno),
		    errno, is_sdp() ? " -- is libsdp.so LD_PRELOADed?" : "");
	return fd;
}

/* listener on loopback (or $SDP_TEST_SERVER_ADDR), ephemeral port; returns
 * fd, stores port */
static UNUSED_FN int make_listener(uint16_t *port, int backlog)
{
	int fd = new_socket();
	int one = 1;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0)
		DIE_ERRNO("setsockopt(SO_REUSEADDR)");
	sockaddr_any a;
	socklen_t len = make_env_addr(&a, g_af, 0, "SDP_TEST_SERVER_ADDR");
	if (bind(fd, &a.sa, len) < 0)
		DIE_ERRNO("bind(listener)");
	if (listen(fd, backlog) < 0)
		DIE_ERRNO("listen");
	len = sizeof a;
	if (getsockname(fd, &a.sa, &len) < 0)
		DIE_ERRNO("getsockname(listener)");
	*port = addr_port(&a);
	if (*port == 0)
		die("listener got port 0 from getsockname");
	return fd;
}

/* connect to loopback (or $SDP_TEST_CONNECT_ADDR) port `port`, from
 * $SDP_TEST_CLIENT_ADDR if set */
static UNUSED_FN int connect_to(uint16_t port)
{
	int fd = new_socket();
	sockaddr_any a;
	socklen_t len;
	const char *src = getenv("SDP_TEST_CLIENT_ADDR");
	if (src && *src) {
		len = make_env_addr(&a, g_af, 0, "SDP_TEST_CLIENT_ADDR");
		if (bind(fd, &a.sa, len) < 0)
			DIE_ERRNO("bind(client, $SDP_TEST_CLIENT_ADDR)");
	}
	len = make_env_addr(&a, g_af, port, "SDP_TEST_CONNECT_ADDR");
	while (connect(fd, &a.sa, len) < 0) {
		if (errno == EINTR)
			continue;
		die("connect(port %u) failed: %s (errno %d)", port, strerror(errno), errno);
	}
	check_transport(fd, "connect_to");
	return fd;
}

static UNUSED_FN int accept_one(int lfd)
{
	for (;;) {
		int fd = accept(lfd, NULL, NULL);
		if (fd >= 0) {
			check_transport(fd, "accept_one");
			return fd;
		}
		if (errno != EINTR)
			DIE_ERRNO("accept");
	}
}

static UNUSED_FN void set_nonblock(int fd, int on)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0)
		DIE_ERRNO("fcntl(F_GETFL)");
	fl = on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK);
	if (fcntl(fd, F_SETFL, fl) < 0)
		DIE_ERRNO("fcntl(F_SETFL)");
}

/* FIONREAD; returns 1 on success */
static UNUSED_FN int ioctl_fionread_ok(int fd, int *avail)
{
	return ioctl(fd, FIONREAD, avail) == 0;
}

/* blocking full write / read; die on error.  read_full returns bytes read
 * (short only at EOF). */
static UNUSED_FN void write_full(int fd, const void *buf, size_t len, const char *what)
{
	const char *p = buf;
	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			die("send(%s) failed: %s (errno %d)", what, strerror(errno), errno);
		}
		p += n;
		len -= (size_t)n;
	}
}

static UNUSED_FN size_t read_full(int fd, void *buf, size_t len, const char *what)
{
	char *p = buf;
	size_t got = 0;
	while (got < len) {
		ssize_t n = recv(fd, p + got, len - got, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			die("recv(%s) failed: %s (errno %d)", what, strerror(errno), errno);
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return got;
}

/* ---- time ---------------------------------------------------------------- */

/* The descriptors this process has open. */
static UNUSED_FN long count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	long n = 0;

	if (!d)
		DIE_ERRNO("opendir(/proc/self/fd)");
	while (readdir(d))
		n++;
	closedir(d);
	return n - 3; /* ".", ".." and the directory's own descriptor */
}

static UNUSED_FN double now_sec(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- deterministic PRNG (splitmix64 seeding + xorshift64*) --------------- */

typedef struct {
	uint64_t s;
} prng_t;

static UNUSED_FN void prng_seed(prng_t *r, uint64_t seed)
{
	uint64_t z = seed + 0x9E3779B97F4A7C15ull;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	z ^= z >> 31;
	r->s = z ? z : 0x1234567887654321ull;
}

static UNUSED_FN uint64_t prng_next(prng_t *r)
{
	uint64_t x = r->s;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	r->s = x;
	return x * 0x2545F4914F6CDD1Dull;
}

/* uniform in [lo, hi] */
static UNUSED_FN uint64_t prng_range(prng_t *r, uint64_t lo, uint64_t hi)
{
	return lo + prng_next(r) % (hi - lo + 1);
}

static UNUSED_FN void prng_fill(prng_t *r, void *buf, size_t len)
{
	unsigned char *p = buf;
	while (len >= 8) {
		uint64_t v = prng_next(r);
		memcpy(p, &v, 8);
		p += 8;
		len -= 8;
	}
	if (len) {
		uint64_t v = prng_next(r);
		memcpy(p, &v, len);
	}
}

/* ---- checksum: FNV-1a 64 over little-endian 64-bit words ---------------
 * Streaming, independent of how the stream is split into pieces. */

typedef struct {
	uint64_t h;
	uint64_t total;
	unsigned char carry[8];
	unsigned ncarry;
} csum_t;

#define FNV64_OFFSET 0xcbf29ce484222325ull
#define FNV64_PRIME 0x100000001b3ull

static UNUSED_FN void csum_init(csum_t *c)
{
	memset(c, 0, sizeof *c);
	c->h = FNV64_OFFSET;
}

static UNUSED_FN void csum_update(csum_t *c, const void *data, size_t len)
{
	const unsigned char *p = data;
	uint64_t h = c->h, w;
	c->total += len;
	if (c->ncarry) {
		while (c->ncarry < 8 && len) {
			c->carry[c->ncarry++] = *p++;
			len--;
		}
		if (c->ncarry < 8) {
			return;
		}
		memcpy(&w, c->carry, 8);
		h = (h ^ w) * FNV64_PRIME;
		c->ncarry = 0;
	}
	while (len >= 8) {
		memcpy(&w, p, 8);
		h = (h ^ w) * FNV64_PRIME;
		p += 8;
		len -= 8;
	}
	memcpy(c->carry, p, len);
	c->ncarry = (unsigned)len;
	c->h = h;
}

static UNUSED_FN uint64_t csum_final(const csum_t *c)
{
	uint64_t h = c->h;
	for (unsigned i = 0; i < c->ncarry; i++)
		h = (h ^ c->carry[i]) * FNV64_PRIME;
	h = (h ^ c->total) * FNV64_PRIME;
	return h;
}

static UNUSED_FN uint64_t csum_buf(const void *data, size_t len)
{
	csum_t c;
	csum_init(&c);
	csum_update(&c, data, len);
	return csum_final(&c);
}

/* ---- pattern: a pseudo-random byte ring of odd length, doubled at the end
 * so any piece up to PATTERN_MAXPIECE bytes is contiguous.  The byte at stream
 * offset o is pattern[o % PATTERN_LEN]. */

#define PATTERN_LEN (4u * 1024 * 1024 + 13) /* odd, not a power-of-2 multiple */
#define PATTERN_MAXPIECE (256u * 1024)

static UNUSED_FN unsigned char *pattern_new(uint64_t seed)
{
	unsigned char *p = malloc(PATTERN_LEN + PATTERN_MAXPIECE);
	if (!p)
		die("malloc(pattern) failed");
	prng_t r;
	prng_seed(&r, seed);
	prng_fill(&r, p, PATTERN_LEN);
	memcpy(p + PATTERN_LEN, p, PATTERN_MAXPIECE);
	return p;
}

static UNUSED_FN const unsigned char *pattern_at(const unsigned char *pat, uint64_t off)
{
	return pat + (off % PATTERN_LEN);
}

/* Verify received bytes against the pattern; die naming the first bad offset. */
static UNUSED_FN void pattern_check(const unsigned char *pat, uint64_t off, const unsigned char *buf,
				    size_t len, const char *what)
{
	while (len) {
		size_t n = len < PATTERN_MAXPIECE ? len : PATTERN_MAXPIECE;
		const unsigned char *exp = pattern_at(pat, off);
		if (memcmp(exp, buf, n)) {
			size_t i = 0;
			while (exp[i] == buf[i])
				i++;
			die("%s: data corruption at stream offset %" PRIu64
			    ": got 0x%02x expected 0x%02x",
			    what, off + i, buf[i], exp[i]);
		}
		off += n;
		buf += n;
		len -= n;
	}
}

/* ---- hang guard ----------------------------------------------------------
 * A watchdog thread: if not disarmed within the deadline, print the message
 * and _exit(2).  Used purely as a hang detector, never for synchronisation.
 * fork() copies its state but not its thread, and the thread may hold its
 * mutex at that moment (it takes it as it starts and at every wake-up): a
 * child that then armed its own guard waited for that mutex forever (a
 * forked client stuck before it connected, about one run in a thousand).
 * So a fork waits for the mutex, and the child starts from a fresh
 * state; its first arm starts a thread of its own. */

static pthread_mutex_t wd_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wd_cv;
static int wd_armed;
static int wd_gen;
static struct timespec wd_deadline;
static char wd_msg[256];
static int wd_started;
static int wd_atfork_set;

static UNUSED_FN void wd_cv_init(void)
{
	pthread_condattr_t ca;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&wd_cv, &ca);
	pthread_condattr_destroy(&ca);
}

static UNUSED_FN void wd_before_fork(void)
{
	pthread_mutex_lock(&wd_mu);
}

static UNUSED_FN void wd_after_fork_parent(void)
{
	pthread_mutex_unlock(&wd_mu);
}

static UNUSED_FN void wd_after_fork_child(void)
{
	wd_cv_init();		/* its waiter, the thread, is not here */
	wd_started = 0;
	wd_armed = 0;
	pthread_mutex_unlock(&wd_mu);
}

static UNUSED_FN void *wd_thread(void *arg)
{
	pthread_mutex_lock(&wd_mu);
	for (;;) {
		if (!wd_armed) {
			pthread_cond_wait(&wd_cv, &wd_mu);
			continue;
		}
		int gen = wd_gen;
		int rc = pthread_cond_timedwait(&wd_cv, &wd_mu, &wd_deadline);
		if (rc == ETIMEDOUT && wd_armed && gen == wd_gen) {
			fprintf(stderr, "%s[%d] (%s): FAIL: hang detected: %s\n", g_prog, (int)getpid(),
				g_family_name, wd_msg);
			fflush(NULL);
			_exit(2);
		}
	}
	return NULL;
}

static UNUSED_FN void watchdog_arm(double seconds, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static UNUSED_FN void watchdog_arm(double seconds, const char *fmt, ...)
{
	pthread_mutex_lock(&wd_mu);
	if (!wd_atfork_set) {
		pthread_atfork(wd_before_fork, wd_after_fork_parent,
			       wd_after_fork_child);
		wd_atfork_set = 1;
	}
	if (!wd_started) {
		wd_cv_init();
		pthread_t t;
		if (pthread_create(&t, NULL, wd_thread, NULL))
			die("pthread_create(watchdog) failed");
		pthread_detach(t);
		wd_started = 1;
	}
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(wd_msg, sizeof wd_msg, fmt, ap);
	va_end(ap);
	clock_gettime(CLOCK_MONOTONIC, &wd_deadline);
	double mult = 1.0;
	const char *m = getenv("SDP_TEST_TIMEOUT_MULT");
	if (m && atof(m) > 0)
		mult = atof(m);
	seconds *= mult;
	wd_deadline.tv_sec += (time_t)seconds;
	wd_deadline.tv_nsec += (long)((seconds - (double)(time_t)seconds) * 1e9);
	if (wd_deadline.tv_nsec >= 1000000000L) {
		wd_deadline.tv_sec++;
		wd_deadline.tv_nsec -= 1000000000L;
	}
	wd_armed = 1;
	wd_gen++;
	pthread_cond_signal(&wd_cv);
	pthread_mutex_unlock(&wd_mu);
}

static UNUSED_FN void watchdog_disarm(void)
{
	pthread_mutex_lock(&wd_mu);
	wd_armed = 0;
	wd_gen++;
	if (wd_started)
		pthread_cond_signal(&wd_cv);
	pthread_mutex_unlock(&wd_mu);
}

/* ---- scenario waits ------------------------------------------------------
 * A test that needs a thread (of this or another process) asleep in a call
 * before it acts -- a send blocked on a full window, a recv waiting for
 * more -- polls /proc for that state.  If the thread never gets there the
 * scenario was not reached and the test fails: going on would test an
 * easier path and pass for the wrong reason. */

/* 1 if task tid sleeps in the kernel (state S or D), else 0. */
static UNUSED_FN int task_sleeps(pid_t tid)
{
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)tid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	char *p = strrchr(buf, ')');
	return p && p[1] == ' ' && (p[2] == 'S' || p[2] == 'D');
}

/* Wait until task tid sleeps; die naming `what` after 5 s (scaled by
 * SDP_TEST_TIMEOUT_MULT). */
static UNUSED_FN void wait_blocked(pid_t tid, const char *what)
{
	double mult = 1.0;
	const char *m = getenv("SDP_TEST_TIMEOUT_MULT");
	if (m && atof(m) > 0)
		mult = atof(m);
	double deadline = now_sec() + 5.0 * mult;
	while (!task_sleeps(tid)) {
		if (now_sec() > deadline)
			die("%s: thread %d never blocked within %.0f s: the scenario was not reached",
			    what, (int)tid, 5.0 * mult);
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
	}
}

/* Wait for a child; returns 0 if it exited 0, else dies/returns status. */
static UNUSED_FN int wait_child(pid_t pid, const char *what)
{
	int st;
	while (waitpid(pid, &st, 0) < 0) {
		if (errno != EINTR)
			DIE_ERRNO("waitpid");
	}
	if (WIFEXITED(st)) {
		if (WEXITSTATUS(st) != 0)
			fprintf(stderr, "%s: %s (pid %d) exited with status %d\n", g_prog, what, (int)pid,
				WEXITSTATUS(st));
		return WEXITSTATUS(st);
	}
	if (WIFSIGNALED(st))
		fprintf(stderr, "%s: %s (pid %d) killed by signal %d (%s)\n", g_prog, what, (int)pid,
			WTERMSIG(st), strsignal(WTERMSIG(st)));
	return 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* Raise RLIMIT_NOFILE to at least `need` if possible; returns the soft limit. */
static UNUSED_FN rlim_t raise_nofile(rlim_t need)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		DIE_ERRNO("getrlimit(RLIMIT_NOFILE)");
	if (rl.rlim_cur >= need)
		return rl.rlim_cur;
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need && geteuid() == 0) {
		struct rlimit r2 = { need, need };
		if (setrlimit(RLIMIT_NOFILE, &r2) == 0)
			return need;
	}
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		DIE_ERRNO("setrlimit(RLIMIT_NOFILE)");
	return rl.rlim_cur;
}

static UNUSED_FN const char *family_usage(void)
{
	return "--family sdp|sdp6|tcp|tcp6";
}

/* Fork a child that will connect: the parent creates the listener after the
 * fork and hands the port over a pipe (set-up only; all test traffic goes over
 * the socket under test), so no SDP socket is ever inherited across fork.
 * child_fn(port, arg) runs in the child; its return value is the exit code. */
typedef struct {
	pid_t pid;
	int wfd;
} child_t;

static UNUSED_FN child_t spawn_connector(int (*child_fn)(uint16_t port, void *arg), void *arg)
{
	int p[2];
	if (pipe(p) < 0)
		DIE_ERRNO("pipe");
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		DIE_ERRNO("fork");
	if (pid == 0) {
		close(p[1]);
		uint16_t port;
		ssize_t n;
		do
			n = read(p[0], &port, sizeof port);
		while (n < 0 && errno == EINTR);
		if (n != (ssize_t)sizeof port)
			_exit(3); /* parent died before handing the port over */
		close(p[0]);
		int rc = child_fn(port, arg);
		fflush(NULL);
		_exit(rc);
	}
	close(p[0]);
	child_t c = { pid, p[1] };
	return c;
}

static UNUSED_FN void child_go(child_t *c, uint16_t port)
{
	if (write(c->wfd, &port, sizeof port) != (ssize_t)sizeof port)
		DIE_ERRNO("write(port pipe)");
	close(c->wfd);
	c->wfd = -1;
}

#endif /* ITEST_COMMON_H */
