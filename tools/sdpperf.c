/* SPDX-License-Identifier: MIT */
/*
 * sdpperf: compare SDP (libsdp, AF_INET_SDP), kernel TCP on loopback and UNIX
 * domain sockets on the same workloads, in one run.
 *
 *   sdpperf [--workload stream|rr|crr|conns|all]
 *           [--transports sdp,tcp,unix,rsockets] [--size BYTES] [--conns N]
 *           [--idle K] [--time SEC] [--warmup SEC] [--repeat R]
 *           [--env KEY=VAL]... [--lib PATH] [--rs-lib PATH] [--busy B] [--json]
 *
 * Each measurement runs a server and a client process, both fork+exec of
 * sdpperf itself in a hidden "--role server|client" mode.  Only SDP runs get
 * LD_PRELOAD=<lib> (default <dir of sdpperf>/../lib/libsdp.so) and the --env
 * settings; rsockets runs (only when named: they need an RDMA device, and
 * without one rdma-core's preload library quietly uses kernel TCP) get
 * LD_PRELOAD=<librspreload.so> instead.  The client reports START (after warm-up) and END (with results)
 * over a pipe; the parent samples both processes' CPU time (/proc/PID/stat,
 * all threads) at START and END, so CPU figures cover exactly the measured
 * window.  Memory (conns) is VmRSS (RssAnon+RssFile+RssShmem) of both
 * processes plus the system-wide Slab (kernel socket memory) delta.
 *
 *   stream  the server sends S-byte writes on N connections, the client
 *           receives and counts: MB/s (1e6 B/s), Gbit/s, CPU, CPU-s per GB
 *   rr      S-byte ping-pong on N connections (one thread each): latency
 *           p50/p90/p99/p99.9 in us and transactions/s
 *   crr     connect + 1-byte request/response + close, back to back, by N
 *           client threads (--conns): conn/s
 *   conns   open K connections and keep them idle: memory per connection
 *
 * --busy B runs B processes that only keep a CPU busy beside every
 * measurement, as other work does on a loaded host.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef AF_INET_SDP
#define AF_INET_SDP 27
#endif

enum { T_SDP, T_TCP, T_UNIX, T_RS, NTRANS };
static const char *tname[NTRANS] = { "sdp", "tcp", "unix", "rsockets" };
static const char *tlabel[NTRANS] = { "SDP", "TCP", "UNIX", "rsockets" };
enum { W_STREAM, W_RR, W_CRR, W_CONNS, NWORK };
static const char *wname[NWORK] = { "stream", "rr", "crr", "conns" };

/* options (shared by all roles) */
static int o_work = -1; /* -1 = several (o_wsel) */
static int o_wsel[NWORK] = { 1, 1, 1, 1 };
static int o_trans[NTRANS] = { 1, 1, 1, 0 }; /* rsockets only when named */
static size_t o_size = 0; /* 0 = workload default */
static int o_conns = 1;
static int o_idle = 1000;
static int o_busy;
static double o_time = 3.0;
static double o_warmup = 0.5;
static int o_repeat = 1;
static int o_json;
static const char *o_lib;
/* rsockets: plain AF_INET sockets under rdma-core's preload library, which
 * carries them over RDMA (needs an RDMA device; used in the VM). */
static const char *o_rs_lib;
/* Where the server listens and the client connects (IPv4; loopback by
 * default), and the client's own address: across two local interfaces
 * (the VM's rxe-a and rxe-b) the path then leaves through the first. */
static struct in_addr o_srv_ip = { .s_addr = 0 }, o_cli_ip = { .s_addr = 0 };
static const char *o_srv_ip_s, *o_cli_ip_s;
static char *o_env[32];
static int o_nenv;
/* child roles */
static const char *o_role;
static int o_transport = T_TCP;
static int o_ctl = -1;
static const char *o_addr;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_sec(double s)
{
	struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* ================================ children ================================ */

static pthread_mutex_t ctl_mu = PTHREAD_MUTEX_INITIALIZER;

static void ctl(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void ctl(const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if (n > (int)sizeof buf - 2)
		n = (int)sizeof buf - 2;
	buf[n++] = '\n';
	pthread_mutex_lock(&ctl_mu);
	if (write(o_ctl, buf, (size_t)n) < 0) {
		/* parent gone */
	}
	pthread_mutex_unlock(&ctl_mu);
}

static void cfail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void cfail(const char *fmt, ...)
{
	char buf[900];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	ctl("ERROR %s: %s", o_role, buf);
	_exit(1);
}

#define CFAIL_ERRNO(what) cfail("%s failed: %s (errno %d)", (what), strerror(errno), errno)

static int domain_of(int t)
{
	return t == T_SDP ? AF_INET_SDP : t == T_UNIX ? AF_UNIX : AF_INET;
}

static int mksock(void)
{
	int fd = socket(domain_of(o_transport), SOCK_STREAM, 0);
	if (fd < 0)
		cfail("socket(%s, domain %d) failed: %s (errno %d)%s", tname[o_transport],
		      domain_of(o_transport), strerror(errno), errno,
		      o_transport == T_SDP ? " -- libsdp not preloaded or not working" : "");
	return fd;
}

static void tune(int fd)
{
	if (o_transport != T_UNIX) {
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one); /* best effort */
	}
}

static socklen_t mkaddr(struct sockaddr_storage *ss, const char *addr)
{
	memset(ss, 0, sizeof *ss);
	if (o_transport == T_UNIX) {
		struct sockaddr_un *u = (struct sockaddr_un *)ss;
		u->sun_family = AF_UNIX;
		size_t l = strlen(addr); /* "@name": abstract namespace */
		if (l > sizeof u->sun_path - 1)
			l = sizeof u->sun_path - 1;
		memcpy(u->sun_path, addr, l);
		u->sun_path[0] = 0;
		return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + l);
	}
	struct sockaddr_in *in = (struct sockaddr_in *)ss;
	in->sin_family = AF_INET;
	in->sin_addr.s_addr = o_srv_ip_s ? o_srv_ip.s_addr : htonl(INADDR_LOOPBACK);
	in->sin_port = htons((uint16_t)atoi(addr));
	return sizeof *in;
}

/* rdma-core installs the rsockets preload library beside librdmacm, in the
 * multiarch directory; the first of the usual places that has it. */
static const char *find_rs_lib(void)
{
	static const char *const where[] = {
		"/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so",
		"/usr/lib/aarch64-linux-gnu/rsocket/librspreload.so",
		"/usr/lib64/rsocket/librspreload.so",
		"/usr/lib/rsocket/librspreload.so",
	};
	for (size_t i = 0; i < sizeof where / sizeof where[0]; i++)
		if (access(where[i], R_OK) == 0)
			return where[i];
	return where[0];
}

/* As many descriptors as allowed; as root, up to fs.nr_open (an SDP
 * connection costs several descriptors: docs/DESIGN.md). */
static void raise_nofile(void)
{
	struct rlimit rl;
	unsigned long nr_open = 0;
	FILE *f;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return;
	if (geteuid() == 0 && (f = fopen("/proc/sys/fs/nr_open", "r"))) {
		if (fscanf(f, "%lu", &nr_open) == 1 && nr_open > rl.rlim_max) {
			struct rlimit big = { nr_open, nr_open };

			if (setrlimit(RLIMIT_NOFILE, &big) == 0)
				rl = big;
		}
		fclose(f);
	}
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static size_t wl_size(void)
{
	if (o_size)
		return o_size;
	return o_work == W_STREAM ? 65536 : 1;
}

static int send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int recv_all(int fd, char *p, size_t n)
{
	while (n) {
		ssize_t r = recv(fd, p, n, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* ---- server ---- */

static void *srv_stream_conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	size_t s = wl_size();
	char *buf = malloc(s);
	memset(buf, 'S', s);
	while (send_all(fd, buf, s) == 0)
		;
	close(fd);
	return NULL;
}

static void *srv_rr_conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	size_t s = wl_size();
	char *buf = malloc(s);
	while (recv_all(fd, buf, s) == 0 && send_all(fd, buf, s) == 0)
		;
	close(fd);
	return NULL;
}

static int server_main(void)
{
	raise_nofile();
	int lfd = mksock();
	struct sockaddr_storage ss;
	char name[64] = "0";
	if (o_transport == T_UNIX)
		snprintf(name, sizeof name, "@sdpperf.%d", (int)getpid());
	socklen_t len = mkaddr(&ss, name);
	int one = 1;
	if (o_transport != T_UNIX)
		setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(lfd, (struct sockaddr *)&ss, len) < 0)
		CFAIL_ERRNO("bind");
	if (listen(lfd, 4096) < 0)
		CFAIL_ERRNO("listen");
	if (o_transport != T_UNIX) {
		len = sizeof ss;
		if (getsockname(lfd, (struct sockaddr *)&ss, &len) < 0)
			CFAIL_ERRNO("getsockname");
		snprintf(name, sizeof name, "%u", ntohs(((struct sockaddr_in *)&ss)->sin_port));
	}
	ctl("READY %s", name);
	if (o_work == W_CRR) {
		char c;
		for (;;) {
			int fd = accept(lfd, NULL, NULL);
			if (fd < 0) {
				if (errno == EINTR || errno == ECONNABORTED)
					continue;
				CFAIL_ERRNO("accept");
			}
			tune(fd);
			if (recv_all(fd, &c, 1) == 0)
				send_all(fd, &c, 1);
			close(fd);
		}
	}
	if (o_work == W_CONNS) {
		long n = 0;
		for (;;) {
			int fd = accept(lfd, NULL, NULL);
			if (fd < 0) {
				if (errno == EINTR || errno == ECONNABORTED)
					continue;
				ctl("ACCEPTERR %ld %s", n, strerror(errno));
				pause();
			}
			n++;
			struct pollfd p = { lfd, POLLIN, 0 };
			if (poll(&p, 1, 0) == 0) /* batch: report when the queue is empty */
				ctl("A %ld", n);
		}
	}
	for (;;) { /* stream / rr: a thread per connection */
		int fd = accept(lfd, NULL, NULL);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			CFAIL_ERRNO("accept");
		}
		tune(fd);
		pthread_t th;
		if (pthread_create(&th, NULL, o_work == W_STREAM ? srv_stream_conn : srv_rr_conn,
				   (void *)(intptr_t)fd))
			cfail("pthread_create failed");
		pthread_detach(th);
	}
}

/* ---- client ---- */

static int cli_connect(void)
{
	int fd = mksock();
	struct sockaddr_storage ss;
	socklen_t len = mkaddr(&ss, o_addr);
	if (o_cli_ip_s && o_transport != T_UNIX) {
		struct sockaddr_in me = { .sin_family = AF_INET, .sin_addr = o_cli_ip };

		if (bind(fd, (struct sockaddr *)&me, sizeof me) < 0) {
			close(fd);
			return -1;
		}
	}
	while (connect(fd, (struct sockaddr *)&ss, len) < 0) {
		if (errno == EINTR)
			continue;
		close(fd);
		return -1;
	}
	tune(fd);
	return fd;
}

static atomic_int phase; /* 0 warm-up, 1 measuring, 2 stop */

typedef struct {
	pthread_t th;
	_Atomic uint64_t ops;
	atomic_int err;	/* errno of the first failure; the thread stops */
} crr_client_t;

/* crr: connect, 1-byte exchange, close, back to back until it fails. */
static void *cli_crr_loop(void *arg)
{
	crr_client_t *cc = arg;
	char c = 'c';

	for (;;) {
		int fd = cli_connect();
		if (fd < 0 || send_all(fd, &c, 1) || recv_all(fd, &c, 1)) {
			atomic_store(&cc->err, errno ? errno : EIO);
			if (fd >= 0)
				close(fd);
			return NULL;
		}
		close(fd);
		atomic_fetch_add(&cc->ops, 1);
	}
}

typedef struct {
	int fd;
	_Atomic uint64_t bytes;
	uint32_t *lat; /* rr: ns */
	size_t nlat, cap;
	uint64_t ops;
	int err;
	pthread_t th;
} cconn_t;

static void *cli_stream_conn(void *arg)
{
	cconn_t *c = arg;
	size_t s = wl_size() < 65536 ? 65536 : wl_size();
	char *buf = malloc(s);
	while (atomic_load_explicit(&phase, memory_order_relaxed) < 2) {
		ssize_t n = recv(c->fd, buf, s, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			c->err = n < 0 ? errno : EPIPE;
			break;
		}
		atomic_fetch_add_explicit(&c->bytes, (uint64_t)n, memory_order_relaxed);
	}
	free(buf);
	return NULL;
}

static void *cli_rr_conn(void *arg)
{
	cconn_t *c = arg;
	size_t s = wl_size();
	char *buf = malloc(s);
	memset(buf, 'r', s);
	int ph;
	while ((ph = atomic_load_explicit(&phase, memory_order_relaxed)) < 2) {
		double t0 = now();
		if (send_all(c->fd, buf, s) || recv_all(c->fd, buf, s)) {
			c->err = errno ? errno : EPIPE;
			break;
		}
		double dt = now() - t0;
		if (ph == 1) {
			c->ops++;
			if (c->nlat < c->cap)
				c->lat[c->nlat++] = (uint32_t)(dt * 1e9 > 4e9 ? 4e9 : dt * 1e9);
		}
	}
	free(buf);
	return NULL;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

static double pct(const uint32_t *v, size_t n, double p)
{
	if (!n)
		return NAN;
	size_t i = (size_t)ceil(p / 100.0 * (double)n);
	if (i > 0)
		i--;
	if (i >= n)
		i = n - 1;
	return v[i] / 1e3;
}

static int client_main(void)
{
	raise_nofile();
	if (o_work == W_CONNS) {
		int *fds = malloc(sizeof(int) * (size_t)o_idle);
		ctl("START");
		char g;
		if (read(0, &g, 1) != 1) /* parent has sampled the baseline */
			cfail("no go from the parent");
		double t0 = now();
		int n = 0;
		const char *err = "";
		for (; n < o_idle; n++) {
			fds[n] = cli_connect();
			if (fds[n] < 0) {
				err = strerror(errno);
				break;
			}
		}
		double dt = now() - t0;
		ctl("END opened=%d wanted=%d secs=%.6f err=%s", n, o_idle, dt, *err ? err : "-");
		pause(); /* keep them open until the parent has measured */
		return 0;
	}
	if (o_work == W_CRR) {
		/* --conns N clients, each a thread connecting back to back. */
		crr_client_t *cc = calloc((size_t)o_conns, sizeof *cc);
		if (!cc)
			cfail("calloc");
		for (int i = 0; i < o_conns; i++)
			if (pthread_create(&cc[i].th, NULL, cli_crr_loop, &cc[i]))
				cfail("pthread_create failed");
		sleep_sec(o_warmup);
		uint64_t o0 = 0, o1 = 0;
		for (int i = 0; i < o_conns; i++)
			o0 += atomic_load(&cc[i].ops);
		double t0 = now();
		ctl("START");
		sleep_sec(o_time);
		for (int i = 0; i < o_conns; i++)
			o1 += atomic_load(&cc[i].ops);
		double t1 = now();
		for (int i = 0; i < o_conns; i++)
			if (atomic_load(&cc[i].err))
				cfail("client %d failed after %" PRIu64 " connections: %s", i,
				      atomic_load(&cc[i].ops), strerror(atomic_load(&cc[i].err)));
		ctl("END ops=%" PRIu64 " secs=%.6f", o1 - o0, t1 - t0);
		_exit(0); /* the clients are still connecting: no join */
	}
	/* stream, rr */
	int n = o_conns;
	cconn_t *cs = calloc((size_t)n, sizeof *cs);
	for (int i = 0; i < n; i++) {
		cs[i].fd = cli_connect();
		if (cs[i].fd < 0)
			cfail("connect #%d failed: %s (errno %d)", i, strerror(errno), errno);
		if (o_work == W_RR) {
			cs[i].cap = (size_t)8 << 20 >> (n > 8 ? 3 : 0);
			cs[i].lat = malloc(cs[i].cap * sizeof(uint32_t));
			if (!cs[i].lat)
				cfail("malloc");
		}
	}
	for (int i = 0; i < n; i++)
		if (pthread_create(&cs[i].th, NULL, o_work == W_STREAM ? cli_stream_conn : cli_rr_conn, &cs[i]))
			cfail("pthread_create failed");
	sleep_sec(o_warmup);
	uint64_t b0 = 0;
	for (int i = 0; i < n; i++)
		b0 += atomic_load(&cs[i].bytes);
	double t0 = now();
	atomic_store(&phase, 1);
	ctl("START");
	sleep_sec(o_time);
	uint64_t b1 = 0;
	for (int i = 0; i < n; i++)
		b1 += atomic_load(&cs[i].bytes);
	double t1 = now();
	atomic_store(&phase, 2);
	for (int i = 0; i < n; i++)
		if (cs[i].err && cs[i].err != EINTR)
			cfail("connection %d failed: %s", i, strerror(cs[i].err));
	if (o_work == W_STREAM) {
		ctl("END bytes=%" PRIu64 " secs=%.6f", b1 - b0, t1 - t0);
		_exit(0); /* readers may be blocked in recv: no join */
	}
	/* rr: each thread finishes its current transaction */
	size_t tot = 0;
	uint64_t ops = 0;
	for (int i = 0; i < n; i++) {
		pthread_join(cs[i].th, NULL);
		if (cs[i].err)
			cfail("connection %d failed: %s", i, strerror(cs[i].err));
		tot += cs[i].nlat;
		ops += cs[i].ops;
	}
	uint32_t *all = malloc((tot ? tot : 1) * sizeof *all);
	size_t k = 0;
	for (int i = 0; i < n; i++) {
		memcpy(all + k, cs[i].lat, cs[i].nlat * sizeof *all);
		k += cs[i].nlat;
	}
	qsort(all, tot, sizeof *all, cmp_u32);
	ctl("END ops=%" PRIu64 " secs=%.6f p50=%.3f p90=%.3f p99=%.3f p999=%.3f", ops, t1 - t0,
	    pct(all, tot, 50), pct(all, tot, 90), pct(all, tot, 99), pct(all, tot, 99.9));
	_exit(0);
}

/* ================================ parent ================================== */

typedef struct {
	int ok;
	char err[600];
	/* metrics */
	double mbps, gbps, tps, p50, p90, p99, p999, rate, secs;
	double cpu_cli, cpu_srv; /* cores (cpu-seconds per wall second) */
	double cpu_per_gb;
	long opened, wanted;
	double mem_conn, kmem_conn, rss_conn; /* bytes per connection */
} result_t;

static char self_exe[PATH_MAX];
static long clk_tck;

static double proc_cpu(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return NAN;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return NAN;
	buf[n] = 0;
	char *p = strrchr(buf, ')');
	if (!p)
		return NAN;
	unsigned long ut = 0, st = 0;
	/* after ")": state(3) ppid pgrp session tty tpgid flags minflt cminflt
	 * majflt cmajflt utime(14) stime(15) */
	if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
		return NAN;
	return (double)(ut + st) / (double)clk_tck;
}

/* kB value of "Key:" in a /proc file, or -1 */
static long proc_kb(const char *path, const char *key)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	char line[256];
	size_t kl = strlen(key);
	long v = -1;
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, key, kl) && line[kl] == ':') {
			v = atol(line + kl + 1);
			break;
		}
	fclose(f);
	return v;
}

static long proc_rss(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	return proc_kb(path, "VmRSS");
}

typedef struct {
	pid_t pid;
	int ctl;  /* read end of its control pipe */
	int go;	  /* write end of its stdin pipe (client) */
	int errf; /* its stderr, a temp file */
	char buf[4096];
	size_t len;
} proc_t;

static int spawn(proc_t *p, int trans, const char *role, const char *addr)
{
	int cp[2], gp[2];
	if (pipe2(cp, O_CLOEXEC) < 0 || pipe2(gp, O_CLOEXEC) < 0)
		return -1;
	char tmpl[] = "/tmp/sdpperf-err.XXXXXX";
	p->errf = mkostemp(tmpl, O_CLOEXEC);
	if (p->errf >= 0)
		unlink(tmpl);
	char a_ctl[16], a_size[32], a_conns[16], a_idle[16], a_time[32], a_warm[32];
	snprintf(a_ctl, sizeof a_ctl, "%d", cp[1]);
	snprintf(a_size, sizeof a_size, "%zu", wl_size());
	snprintf(a_conns, sizeof a_conns, "%d", o_conns);
	snprintf(a_idle, sizeof a_idle, "%d", o_idle);
	snprintf(a_time, sizeof a_time, "%.3f", o_time);
	snprintf(a_warm, sizeof a_warm, "%.3f", o_warmup);
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		dup2(gp[0], 0);
		if (p->errf >= 0)
			dup2(p->errf, 2);
		fcntl(cp[1], F_SETFD, 0); /* the control pipe survives exec */
		if (trans == T_SDP) {
			setenv("LD_PRELOAD", o_lib, 1);
			for (int i = 0; i < o_nenv; i++)
				putenv(o_env[i]);
		} else if (trans == T_RS) {
			setenv("LD_PRELOAD", o_rs_lib, 1);
		} else {
			unsetenv("LD_PRELOAD");
		}
		const char *argv[32];
		int k = 0;
		argv[k++] = self_exe;
		argv[k++] = "--role";
		argv[k++] = role;
		argv[k++] = "--transport";
		argv[k++] = tname[trans];
		argv[k++] = "--workload";
		argv[k++] = wname[o_work];
		argv[k++] = "--ctl-fd";
		argv[k++] = a_ctl;
		argv[k++] = "--size";
		argv[k++] = a_size;
		argv[k++] = "--conns";
		argv[k++] = a_conns;
		argv[k++] = "--idle";
		argv[k++] = a_idle;
		argv[k++] = "--time";
		argv[k++] = a_time;
		argv[k++] = "--warmup";
		argv[k++] = a_warm;
		if (addr) {
			argv[k++] = "--addr";
			argv[k++] = addr;
		}
		if (o_srv_ip_s) {
			argv[k++] = "--server-ip";
			argv[k++] = o_srv_ip_s;
		}
		if (o_cli_ip_s) {
			argv[k++] = "--client-ip";
			argv[k++] = o_cli_ip_s;
		}
		argv[k] = NULL;
		execv(self_exe, (char *const *)argv);
		dprintf(cp[1], "ERROR exec %s: %s\n", self_exe, strerror(errno));
		_exit(127);
	}
	close(cp[1]);
	close(gp[0]);
	p->pid = pid;
	p->ctl = cp[0];
	p->go = gp[1];
	p->len = 0;
	return 0;
}

/* Next line from either process; returns 0 = line from a, 1 = from b,
 * -1 timeout, -2 EOF on a, -3 EOF on b. */
static int next_line(proc_t *a, proc_t *b, char *out, size_t outlen, double deadline)
{
	proc_t *ps[2] = { a, b };
	for (;;) {
		for (int i = 0; i < 2; i++) {
			proc_t *p = ps[i];
			if (!p || p->ctl < 0)
				continue;
			char *nl = memchr(p->buf, '\n', p->len);
			if (nl) {
				size_t l = (size_t)(nl - p->buf);
				snprintf(out, outlen, "%.*s", (int)l, p->buf);
				memmove(p->buf, nl + 1, p->len - l - 1);
				p->len -= l + 1;
				return i;
			}
		}
		struct pollfd pf[2];
		int np = 0, idx[2];
		for (int i = 0; i < 2; i++)
			if (ps[i] && ps[i]->ctl >= 0) {
				pf[np].fd = ps[i]->ctl;
				pf[np].events = POLLIN;
				idx[np++] = i;
			}
		double left = deadline - now();
		if (left <= 0 || np == 0)
			return -1;
		int k = poll(pf, (nfds_t)np, (int)(left * 1000) + 1);
		if (k < 0 && errno != EINTR)
			return -1;
		for (int j = 0; j < np && k > 0; j++) {
			if (!pf[j].revents)
				continue;
			proc_t *p = ps[idx[j]];
			ssize_t n = read(p->ctl, p->buf + p->len, sizeof p->buf - 1 - p->len);
			if (n <= 0) {
				close(p->ctl);
				p->ctl = -1;
				return idx[j] == 0 ? -2 : -3;
			}
			p->len += (size_t)n;
		}
	}
}

static double kv(const char *line, const char *key)
{
	char pat[32];
	snprintf(pat, sizeof pat, " %s=", key);
	const char *p = strstr(line, pat);
	return p ? strtod(p + strlen(pat), NULL) : NAN;
}

/* describe how a child ended, plus the first line of its stderr */
static void child_diag(proc_t *p, const char *who, int st, char *out, size_t len)
{
	char first[300] = "";
	if (p->errf >= 0) {
		ssize_t n = pread(p->errf, first, sizeof first - 1, 0);
		if (n > 0) {
			first[n] = 0;
			char *nl = strchr(first, '\n');
			if (nl)
				*nl = 0;
		} else {
			first[0] = 0;
		}
	}
	if (WIFSIGNALED(st))
		snprintf(out, len, "%s died of signal %d (%s)%s%s", who, WTERMSIG(st), strsignal(WTERMSIG(st)),
			 *first ? "; stderr: " : "", first);
	else
		snprintf(out, len, "%s exited with status %d%s%s", who, WEXITSTATUS(st), *first ? "; stderr: " : "",
			 first);
}

static void reap(proc_t *p, int *st)
{
	if (p->pid <= 0)
		return;
	kill(p->pid, SIGKILL);
	while (waitpid(p->pid, st, 0) < 0 && errno == EINTR)
		;
	if (p->ctl >= 0)
		close(p->ctl);
	if (p->go >= 0)
		close(p->go);
	if (p->errf >= 0)
		close(p->errf);
	p->pid = 0;
}

static void run_one(int trans, result_t *r)
{
	memset(r, 0, sizeof *r);
	proc_t srv = { .pid = 0, .ctl = -1, .go = -1, .errf = -1 };
	proc_t cli = { .pid = 0, .ctl = -1, .go = -1, .errf = -1 };
	int sst = 0, cst = 0;
	char line[1024];
	double guard = o_warmup + o_time + 30.0;
	if (spawn(&srv, trans, "server", NULL) < 0) {
		snprintf(r->err, sizeof r->err, "spawn server: %s", strerror(errno));
		return;
	}
	int k = next_line(&srv, NULL, line, sizeof line, now() + 15);
	if (k != 0 || strncmp(line, "READY ", 6)) {
		if (k == 0)
			snprintf(r->err, sizeof r->err, "%.590s", line + (strncmp(line, "ERROR ", 6) ? 0 : 6));
		reap(&srv, &sst);
		if (k != 0)
			child_diag(&srv, "server", sst, r->err, sizeof r->err);
		return;
	}
	char addr[64];
	snprintf(addr, sizeof addr, "%.60s", line + 6);
	if (spawn(&cli, trans, "client", addr) < 0) {
		snprintf(r->err, sizeof r->err, "spawn client: %s", strerror(errno));
		reap(&srv, &sst);
		return;
	}
	double c0s = 0, c0c = 0, t0 = 0, deadline = now() + guard;
	long rss0 = 0, slab0 = 0, accepted = 0;
	int got_end = 0;
	while (!got_end) {
		k = next_line(&cli, &srv, line, sizeof line, deadline);
		if (k == -1) {
			snprintf(r->err, sizeof r->err, "timed out after %.0f s", guard);
			break;
		}
		if (k == -2 || k == -3) {
			proc_t *p = k == -2 ? &cli : &srv;
			int st = 0;
			reap(p, &st);
			child_diag(p, k == -2 ? "client" : "server", st, r->err, sizeof r->err);
			break;
		}
		if (!strncmp(line, "ERROR ", 6)) {
			snprintf(r->err, sizeof r->err, "%.590s", line + 6);
			break;
		}
		if (k == 1) { /* server */
			if (!strncmp(line, "A ", 2))
				accepted = atol(line + 2);
			else if (!strncmp(line, "ACCEPTERR ", 10))
				snprintf(r->err, sizeof r->err, "server accept failed after %.500s", line + 10);
			continue;
		}
		if (!strcmp(line, "START")) {
			if (o_work == W_CONNS) {
				rss0 = proc_rss(srv.pid) + proc_rss(cli.pid);
				slab0 = proc_kb("/proc/meminfo", "Slab");
				if (write(cli.go, "g", 1) != 1) {
					snprintf(r->err, sizeof r->err, "client gone");
					break;
				}
			}
			c0s = proc_cpu(srv.pid);
			c0c = proc_cpu(cli.pid);
			t0 = now();
			continue;
		}
		if (!strncmp(line, "END ", 4)) {
			double c1s = proc_cpu(srv.pid), c1c = proc_cpu(cli.pid), wall = now() - t0;
			r->cpu_srv = (c1s - c0s) / wall;
			r->cpu_cli = (c1c - c0c) / wall;
			memmove(line + 1, line + 3, strlen(line + 3) + 1); /* keep a leading space */
			r->secs = kv(line, "secs");
			if (o_work == W_STREAM) {
				double b = kv(line, "bytes");
				r->mbps = b / r->secs / 1e6;
				r->gbps = b * 8 / r->secs / 1e9;
				r->cpu_per_gb = (c1s - c0s + c1c - c0c) / (b / 1e9);
			} else if (o_work == W_RR) {
				r->tps = kv(line, "ops") / r->secs;
				r->p50 = kv(line, "p50");
				r->p90 = kv(line, "p90");
				r->p99 = kv(line, "p99");
				r->p999 = kv(line, "p999");
			} else if (o_work == W_CRR) {
				r->rate = kv(line, "ops") / r->secs;
			} else {
				r->opened = (long)kv(line, "opened");
				r->wanted = (long)kv(line, "wanted");
				r->rate = r->opened / r->secs;
				/* wait (bounded) until the server has accepted them all */
				double d2 = now() + 10;
				while (accepted < r->opened && !r->err[0]) {
					int k2 = next_line(&srv, NULL, line, sizeof line, d2);
					if (k2 != 0)
						break;
					if (!strncmp(line, "A ", 2))
						accepted = atol(line + 2);
				}
				long rss1 = proc_rss(srv.pid) + proc_rss(cli.pid);
				long slab1 = proc_kb("/proc/meminfo", "Slab");
				double n = r->opened > 0 ? (double)r->opened : 1;
				r->rss_conn = (double)(rss1 - rss0) * 1024 / n;
				r->kmem_conn = (double)(slab1 - slab0) * 1024 / n;
				r->mem_conn = r->rss_conn + r->kmem_conn;
				char *e = strstr(line, "err=");
				if (r->opened < r->wanted)
					snprintf(r->err, sizeof r->err, "only %ld of %ld connections opened (%s)",
						 r->opened, r->wanted, e ? e + 4 : "?");
				else if (accepted < r->opened)
					snprintf(r->err, sizeof r->err, "server accepted only %ld of %ld", accepted,
						 r->opened);
			}
			got_end = 1;
		}
	}
	reap(&cli, &cst);
	reap(&srv, &sst);
	r->ok = got_end && !r->err[0];
}

/* ---- aggregation over repeats ---- */

typedef struct {
	double med, lo, hi;
} stat_t;

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static stat_t agg(result_t *rs, int n, size_t off)
{
	double v[64];
	int k = 0;
	for (int i = 0; i < n && k < 64; i++)
		if (rs[i].ok)
			v[k++] = *(double *)((char *)&rs[i] + off);
	stat_t s = { NAN, NAN, NAN };
	if (!k)
		return s;
	qsort(v, (size_t)k, sizeof *v, cmp_d);
	s.lo = v[0];
	s.hi = v[k - 1];
	s.med = k % 2 ? v[k / 2] : (v[k / 2 - 1] + v[k / 2]) / 2;
	return s;
}

#define AGG(rs, n, field) agg(rs, n, offsetof(result_t, field))

typedef struct {
	int ran, ok;
	char err[600];
	result_t rs[64];
	int n;
} cell_t;

static cell_t cells[NWORK][NTRANS];

static const char *fmt_stat(char *buf, size_t len, stat_t s, const char *f)
{
	char a[32], b[32], c[32];
	snprintf(a, sizeof a, f, s.med);
	if (o_repeat > 1) {
		snprintf(b, sizeof b, f, s.lo);
		snprintf(c, sizeof c, f, s.hi);
		snprintf(buf, len, "%.20s [%.20s-%.20s]", a, b, c);
	} else {
		snprintf(buf, len, "%s", a);
	}
	return buf;
}

static void print_ratio(int w, size_t off, const char *what, int higher_better)
{
	cell_t *s = &cells[w][T_SDP];
	if (!s->ran)
		return;
	printf("  %-24s", what);
	for (int t = T_TCP; t < NTRANS; t++) {
		cell_t *o = &cells[w][t];
		if (!o->ran)
			continue;
		stat_t a = agg(s->rs, s->n, off), b = agg(o->rs, o->n, off);
		if (s->ok && o->ok && b.med != 0 && !isnan(a.med) && !isnan(b.med))
			printf("  SDP/%s = %.2fx", tlabel[t], a.med / b.med);
		else
			printf("  SDP/%s = n/a", tlabel[t]);
	}
	printf("%s\n", higher_better ? "   (higher is better)" : "   (lower is better)");
}

static void print_table(int w)
{
	char b1[80], b6[80], b7[80];
	size_t sz = wl_size();
	switch (w) {
	case W_STREAM:
		printf("\nstream: %zu-byte writes, %d connection(s), %.1f s (+%.1f s warm-up), %d run(s)\n", sz,
		       o_conns, o_time, o_warmup, o_repeat);
		printf("  %-5s %-26s %-9s %-10s %-10s %-9s\n", "", "MB/s", "Gbit/s", "cpu cli", "cpu srv",
		       "cpu-s/GB");
		break;
	case W_RR:
		printf("\nrr: %zu-byte ping-pong, %d connection(s), %.1f s (+%.1f s warm-up), %d run(s); latency in us\n",
		       sz, o_conns, o_time, o_warmup, o_repeat);
		printf("  %-5s %-20s %-9s %-9s %-9s %-12s %-8s %-8s\n", "", "p50", "p90", "p99", "p99.9",
		       "trans/s", "cpu cli", "cpu srv");
		break;
	case W_CRR:
		printf("\ncrr: connect + 1-byte exchange + close, %d client(s), %.1f s (+%.1f s warm-up), %d run(s)\n",
		       o_conns, o_time, o_warmup, o_repeat);
		printf("  %-5s %-26s %-8s %-8s\n", "", "conn/s", "cpu cli", "cpu srv");
		break;
	default:
		printf("\nconns: %d idle connections, %d run(s); memory per connection in KiB "
		       "(rss = VmRSS both processes, kernel = system Slab)\n",
		       o_idle, o_repeat);
		printf("  %-5s %-10s %-22s %-10s %-10s %-12s %-8s %-8s\n", "", "opened", "total KiB/conn",
		       "rss", "kernel", "conn/s", "cpu cli", "cpu srv");
	}
	for (int t = 0; t < NTRANS; t++) {
		cell_t *c = &cells[w][t];
		if (!c->ran)
			continue;
		if (!c->ok) {
			printf("  %-5s ERROR: %s\n", tname[t], c->err);
			continue;
		}
		result_t *r = c->rs;
		int n = c->n;
		stat_t cc = AGG(r, n, cpu_cli), cs = AGG(r, n, cpu_srv);
		switch (w) {
		case W_STREAM:
			printf("  %-5s %-26s %-9.2f %-10.2f %-10.2f %-9.2f\n", tname[t],
			       fmt_stat(b1, sizeof b1, AGG(r, n, mbps), "%.0f"), AGG(r, n, gbps).med, cc.med,
			       cs.med, AGG(r, n, cpu_per_gb).med);
			break;
		case W_RR:
			printf("  %-5s %-20s %-9.2f %-9.2f %-9.1f %-12.0f %-8.2f %-8.2f\n", tname[t],
			       fmt_stat(b1, sizeof b1, AGG(r, n, p50), "%.2f"), AGG(r, n, p90).med,
			       AGG(r, n, p99).med, AGG(r, n, p999).med, AGG(r, n, tps).med, cc.med, cs.med);
			break;
		case W_CRR:
			printf("  %-5s %-26s %-8.2f %-8.2f\n", tname[t], fmt_stat(b1, sizeof b1, AGG(r, n, rate), "%.0f"),
			       cc.med, cs.med);
			break;
		default:
			snprintf(b6, sizeof b6, "%ld/%ld", r[0].opened, r[0].wanted);
			printf("  %-5s %-10s %-22s %-10.2f %-10.2f %-12.0f %-8.2f %-8.2f\n", tname[t], b6,
			       fmt_stat(b7, sizeof b7, (stat_t){ AGG(r, n, mem_conn).med / 1024,
							AGG(r, n, mem_conn).lo / 1024, AGG(r, n, mem_conn).hi / 1024 },
					"%.2f"),
			       AGG(r, n, rss_conn).med / 1024, AGG(r, n, kmem_conn).med / 1024, AGG(r, n, rate).med,
			       cc.med, cs.med);
		}
	}
	switch (w) {
	case W_STREAM:
		print_ratio(w, offsetof(result_t, mbps), "bandwidth", 1);
		print_ratio(w, offsetof(result_t, cpu_per_gb), "cpu-s/GB", 0);
		break;
	case W_RR:
		print_ratio(w, offsetof(result_t, p50), "p50 latency", 0);
		print_ratio(w, offsetof(result_t, p99), "p99 latency", 0);
		print_ratio(w, offsetof(result_t, tps), "transactions/s", 1);
		break;
	case W_CRR:
		print_ratio(w, offsetof(result_t, rate), "connections/s", 1);
		break;
	default:
		print_ratio(w, offsetof(result_t, mem_conn), "memory/conn", 0);
	}
}

static void json_num(const char *k, double v, int *first)
{
	printf("%s\"%s\": ", *first ? "" : ", ", k);
	*first = 0;
	if (isnan(v) || isinf(v))
		printf("null");
	else
		printf("%.6g", v);
}

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			printf("\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			printf("\\u%04x", *s);
		else
			putchar(*s);
	}
	putchar('"');
}

static void print_json(void)
{
	printf("{\"size\": %zu, \"conns\": %d, \"idle\": %d, \"time\": %g, \"repeat\": %d, \"results\": [",
	       o_size, o_conns, o_idle, o_time, o_repeat);
	int firstrow = 1;
	for (int w = 0; w < NWORK; w++)
		for (int t = 0; t < NTRANS; t++) {
			cell_t *c = &cells[w][t];
			if (!c->ran)
				continue;
			int saved = o_work;
			o_work = w;
			printf("%s\n {\"workload\": \"%s\", \"transport\": \"%s\", \"msg_size\": %zu, \"ok\": %s",
			       firstrow ? "" : ",", wname[w], tname[t], wl_size(), c->ok ? "true" : "false");
			o_work = saved;
			firstrow = 0;
			if (!c->ok) {
				printf(", \"error\": ");
				json_str(c->err);
				printf("}");
				continue;
			}
			static const struct {
				const char *k;
				size_t off;
			} f[] = {
				{ "mb_per_s", offsetof(result_t, mbps) },     { "gbit_per_s", offsetof(result_t, gbps) },
				{ "cpu_s_per_gb", offsetof(result_t, cpu_per_gb) },
				{ "p50_us", offsetof(result_t, p50) },	      { "p90_us", offsetof(result_t, p90) },
				{ "p99_us", offsetof(result_t, p99) },	      { "p999_us", offsetof(result_t, p999) },
				{ "trans_per_s", offsetof(result_t, tps) },    { "rate_per_s", offsetof(result_t, rate) },
				{ "mem_per_conn", offsetof(result_t, mem_conn) },
				{ "rss_per_conn", offsetof(result_t, rss_conn) },
				{ "kmem_per_conn", offsetof(result_t, kmem_conn) },
				{ "cpu_client", offsetof(result_t, cpu_cli) }, { "cpu_server", offsetof(result_t, cpu_srv) },
			};
			int first = 0;
			for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
				int useful = 0;
				for (int j = 0; j < c->n; j++)
					useful |= *(double *)((char *)&c->rs[j] + f[i].off) != 0;
				if (!useful)
					continue;
				stat_t s = agg(c->rs, c->n, f[i].off);
				char k[64];
				json_num(f[i].k, s.med, &first);
				snprintf(k, sizeof k, "%s_min", f[i].k);
				json_num(k, s.lo, &first);
				snprintf(k, sizeof k, "%s_max", f[i].k);
				json_num(k, s.hi, &first);
			}
			if (w == W_CONNS)
				printf(", \"opened\": %ld, \"wanted\": %ld", c->rs[0].opened, c->rs[0].wanted);
			printf("}");
		}
	printf("\n]}\n");
}

static void usage(int rc)
{
	fprintf(rc ? stderr : stdout,
		"usage: sdpperf [options]\n"
		"  --workload stream|rr|crr|conns|all   (or a comma list; default all)\n"
		"  --transports sdp,tcp,unix,rsockets   (default sdp,tcp,unix)\n"
		"  --size BYTES      message size (stream default 65536, rr 1)\n"
		"  --conns N         connections for stream and rr, clients for crr (default 1)\n"
		"  --idle K          connections opened by the conns workload (default 1000)\n"
		"  --time SEC        measured time per run (default 3)\n"
		"  --warmup SEC      warm-up before measuring (default 0.5)\n"
		"  --repeat R        repeat each measurement, report median [min-max]\n"
		"  --env KEY=VAL     environment for the SDP processes (repeatable)\n"
		"  --lib PATH        libsdp.so to preload (default <sdpperf dir>/../lib/libsdp.so)\n"
		"  --rs-lib PATH     rsockets preload library for the rsockets transport\n"
		"                    (default: rdma-core's librspreload.so)\n"
		"  --server-ip IP    IPv4 address the server listens on (default 127.0.0.1)\n"
		"  --client-ip IP    IPv4 address the client binds before it connects\n"
		"  --busy B          run B CPU-bound processes beside the measurements\n"
		"  --json            machine-readable output\n"
		"  --all             same as --workload all\n"
		"exit status: 0, 1 if any measurement failed (its row says why), 2 on bad options\n");
	exit(rc);
}

static size_t parse_size(const char *s)
{
	char *e;
	double v = strtod(s, &e);
	if (*e == 'k' || *e == 'K')
		v *= 1024;
	else if (*e == 'm' || *e == 'M')
		v *= 1024 * 1024;
	return (size_t)v;
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define ARG(name) (!strcmp(a, name) && v && (i++, 1))
		if (ARG("--workload") || ARG("--workloads")) {
			/* one name, "all", or a comma list (parent only) */
			o_work = -2;
			memset(o_wsel, 0, sizeof o_wsel);
			char tmp[128];
			snprintf(tmp, sizeof tmp, "%s", v);
			for (char *sv, *tok = strtok_r(tmp, ",", &sv); tok; tok = strtok_r(NULL, ",", &sv)) {
				int found = 0;
				for (int w = 0; w < NWORK; w++)
					if (!strcmp(tok, wname[w]) || !strcmp(tok, "all"))
						o_wsel[w] = found = 1;
				if (!found)
					usage(2);
			}
			int cnt = 0;
			for (int w = 0; w < NWORK; w++)
				if (o_wsel[w]) {
					cnt++;
					o_work = w;
				}
			if (cnt != 1)
				o_work = -1;
		} else if (!strcmp(a, "--all")) {
			o_work = -1;
			for (int w = 0; w < NWORK; w++)
				o_wsel[w] = 1;
		} else if (ARG("--transports") || ARG("--transport")) {
			int any = 0;
			for (int t = 0; t < NTRANS; t++) {
				o_trans[t] = 0;
				char *p = strstr(v, tname[t]);
				if (p && (p == v || p[-1] == ',') && (p[strlen(tname[t])] == 0 || p[strlen(tname[t])] == ','))
					o_trans[t] = any = 1;
			}
			if (!any)
				usage(2);
			for (int t = 0; t < NTRANS; t++)
				if (o_trans[t])
					o_transport = t;
		} else if (ARG("--size")) {
			o_size = parse_size(v);
		} else if (ARG("--conns")) {
			o_conns = atoi(v);
		} else if (ARG("--idle")) {
			o_idle = atoi(v);
		} else if (ARG("--busy")) {
			o_busy = atoi(v);
		} else if (ARG("--time")) {
			o_time = atof(v);
		} else if (ARG("--warmup")) {
			o_warmup = atof(v);
		} else if (ARG("--repeat")) {
			o_repeat = atoi(v);
		} else if (ARG("--env")) {
			if (o_nenv < 32 && strchr(v, '='))
				o_env[o_nenv++] = (char *)v;
			else
				usage(2);
		} else if (ARG("--lib")) {
			o_lib = v;
		} else if (ARG("--rs-lib")) {
			o_rs_lib = v;
		} else if (ARG("--server-ip") || ARG("--client-ip")) {
			int srv = !strcmp(a, "--server-ip");

			if (inet_pton(AF_INET, v, srv ? &o_srv_ip : &o_cli_ip) != 1) {
				fprintf(stderr, "sdpperf: %s: not an IPv4 address: '%s'\n", a, v);
				usage(2);
			}
			*(srv ? &o_srv_ip_s : &o_cli_ip_s) = v;
		} else if (!strcmp(a, "--json")) {
			o_json = 1;
		} else if (ARG("--role")) {
			o_role = v;
		} else if (ARG("--ctl-fd")) {
			o_ctl = atoi(v);
		} else if (ARG("--addr")) {
			o_addr = v;
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(0);
		} else {
			fprintf(stderr, "sdpperf: unknown or incomplete option '%s'\n", a);
			usage(2);
		}
	}
	if (o_conns < 1 || o_idle < 1 || o_busy < 0 || o_busy > 64 || o_time <= 0 || o_warmup < 0 || o_repeat < 1 || o_repeat > 64)
		usage(2);
	if (o_role) {
		signal(SIGPIPE, SIG_IGN);
		if (o_ctl < 0 || o_work < 0)
			return 2;
		if (!strcmp(o_role, "server"))
			return server_main();
		if (!strcmp(o_role, "client") && o_addr)
			return client_main();
		return 2;
	}

	clk_tck = sysconf(_SC_CLK_TCK);
	ssize_t n = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
	if (n <= 0) {
		perror("readlink /proc/self/exe");
		return 1;
	}
	self_exe[n] = 0;
	static char libbuf[PATH_MAX + 32];
	if (!o_lib) {
		char dir[PATH_MAX];
		snprintf(dir, sizeof dir, "%s", self_exe);
		char *s = strrchr(dir, '/');
		if (s)
			*s = 0;
		snprintf(libbuf, sizeof libbuf, "%s/../lib/libsdp.so", dir);
		char *rp = realpath(libbuf, NULL);
		if (rp) {
			snprintf(libbuf, sizeof libbuf, "%s", rp);
			free(rp);
		}
		o_lib = libbuf;
	} else if (strchr(o_lib, '/')) {
		char *rp = realpath(o_lib, NULL);
		if (rp) {
			snprintf(libbuf, sizeof libbuf, "%s", rp);
			free(rp);
			o_lib = libbuf;
		}
	}
	if (!o_rs_lib)
		o_rs_lib = find_rs_lib();
	signal(SIGPIPE, SIG_IGN);
	if (!o_json) {
		printf("sdpperf:");
		if (o_trans[T_SDP])
			printf(" sdp = AF_INET_SDP via LD_PRELOAD=%s%s;", o_lib, o_nenv ? " + --env settings" : "");
		if (o_trans[T_TCP])
			printf(" tcp = kernel TCP on %s;", o_srv_ip_s ? o_srv_ip_s : "127.0.0.1");
		if (o_cli_ip_s)
			printf(" clients bound to %s;", o_cli_ip_s);
		if (o_trans[T_UNIX])
			printf(" unix = AF_UNIX stream sockets;");
		if (o_trans[T_RS])
			printf(" rsockets = AF_INET via LD_PRELOAD=%s;", o_rs_lib);
		printf("\n");
	}
	for (int i = 0; i < o_nenv && !o_json; i++)
		printf("  SDP env: %s\n", o_env[i]);
	if (o_busy && !o_json)
		printf("  %d CPU-bound process%s beside every measurement\n", o_busy, o_busy > 1 ? "es" : "");
	pid_t busy[64], parent = getpid();
	for (int i = 0; i < o_busy; i++) {
		busy[i] = fork();
		if (busy[i] == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (getppid() != parent)
				_exit(0);	/* it died before the prctl */
			for (;;)
				__asm__ volatile("" ::: "memory");
		}
	}
	for (int w = 0; w < NWORK; w++) {
		if (!o_wsel[w])
			continue;
		int saved = o_work;
		o_work = w;
		for (int t = 0; t < NTRANS; t++) {
			if (!o_trans[t])
				continue;
			cell_t *c = &cells[w][t];
			c->ran = 1;
			c->ok = 1;
			for (int r = 0; r < o_repeat; r++) {
				if (!o_json && isatty(2)) {
					fprintf(stderr, "\r  running %-6s over %-4s (run %d/%d)...   ", wname[w], tname[t],
						r + 1, o_repeat);
					fflush(stderr);
				}
				if (t == T_SDP && access(o_lib, R_OK) != 0) {
					snprintf(c->rs[c->n].err, sizeof c->rs[c->n].err,
						 "libsdp not found at %.400s (build it, or pass --lib)", o_lib);
					c->rs[c->n].ok = 0;
				} else if (t == T_RS && access(o_rs_lib, R_OK) != 0) {
					snprintf(c->rs[c->n].err, sizeof c->rs[c->n].err,
						 "librspreload.so not found at %.400s (install librdmacm1, or pass --rs-lib)",
						 o_rs_lib);
					c->rs[c->n].ok = 0;
				} else {
					run_one(t, &c->rs[c->n]);
				}
				if (!c->rs[c->n].ok) {
					c->ok = 0;
					snprintf(c->err, sizeof c->err, "%s", c->rs[c->n].err);
					c->n++;
					break;
				}
				c->n++;
			}
		}
		if (!o_json) {
			if (isatty(2))
				fprintf(stderr, "\r%60s\r", "");
			print_table(w);
			fflush(stdout);
		}
		o_work = saved;
	}
	for (int i = 0; i < o_busy; i++)
		if (busy[i] > 0) {
			kill(busy[i], SIGKILL);
			waitpid(busy[i], NULL, 0);
		}
	if (o_json)
		print_json();
	/* A failed measurement is in the table; the caller (a script) must
	 * learn it from the status too. */
	for (int w = 0; w < NWORK; w++)
		for (int t = 0; t < NTRANS; t++)
			if (cells[w][t].ran && !cells[w][t].ok)
				return 1;
	return 0;
}
