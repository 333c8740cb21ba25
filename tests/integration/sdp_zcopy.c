/* SPDX-License-Identifier: MIT */
/*
 * sdp_zcopy: ZCopy end to end between two processes (shm transport, RDMA by
 * cross-memory attach).  Both directions at once on one connection, large
 * blocking writes (--thresh .. 8 MiB) and large reads (64 KiB .. 4 MiB), the
 * data a function of its stream offset, verified byte for byte; the
 * threshold set small per socket with setsockopt(SOL_TCP, SDP_ZCOPY_THRESH)
 * and read back; at the end getsockopt(SDP_ZCOPY_STATS) must show that both
 * sides really moved data by RDMA (see --require) and released nothing
 * wrongly.
 *
 *   --require read|write|any   which ZCopy must show in the counters of
 *               both sides: Read ZCopy (SrcAvail; Write ZCopy off with
 *               SDP_ZCOPY_WRITE=0), Write ZCopy (SinkAvail: the readers'
 *               blocking recv()s advertise their buffers), or either.
 *   --writev    the writer sends each chunk with writev(): several
 *               elements of at least the threshold, sometimes short ones
 *               between them.  Each large element is its own SrcAvail and
 *               several are outstanding at once (Pipelined mode): the
 *               counters must show it (tx_adverts_peak >= 2 on both sides).
 *   --readv     the reader receives with readv() into up to four elements
 *               of at least the threshold: with Write ZCopy, each is its
 *               own SinkAvail.
 *   --signals   a thread interrupts the writer with SIGUSR1 (no SA_RESTART)
 *               every millisecond: blocked ZCopy sends are cancelled
 *               (SrcAvailCancel) and return partial counts or EINTR; the
 *               writer carries on from where it stopped.
 *
 * Exits 77 (skip) when the transport cannot RDMA on this machine (ptrace
 * restrictions): that is reported, not a failure.
 */
#include <sys/uio.h>

#include "itest_common.h"

#ifndef SDP_ZCOPY_THRESH
#define SDP_ZCOPY_THRESH 80
#endif
#define SDP_ZCOPY_STATS 82

struct zstats {			/* = struct sdp_zcopy_stats (sdp/sdp.h) */
	uint64_t tx_adverts, tx_bytes, tx_declined, tx_cancels;
	uint64_t rx_adverts, rx_bytes, rx_declined;
	uint32_t thresh, rdma;
	uint64_t wr_sink_adverts, wr_rx_bytes, wr_sink_cancels, wr_sink_unused;
	uint64_t wr_src_adverts, wr_tx_bytes, wr_src_unused, mode_changes;
	uint32_t tx_mode, rx_mode;
	uint64_t tx_adverts_peak, rx_adverts_peak;
	uint32_t peer_max_adverts, max_adverts;
};

static uint64_t opt_bytes = 256ull << 20;
static int opt_thresh = 4096;
static int opt_signals;
static int opt_writev;
static int opt_readv;
/* Which ZCopy must have happened, in both directions: "read" (SrcAvail +
 * RDMA READ; Write ZCopy switched off with SDP_ZCOPY_WRITE=0), "write"
 * (SinkAvail + RDMA WRITE), or "any" (one or the other). */
static const char *opt_require = "any";

static uint64_t mix(uint64_t z)
{
	z += 0x9E3779B97F4A7C15ull;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/* Byte o of stream `seed`, filled in bulk. */
static void gen(uint64_t seed, uint64_t o, unsigned char *p, size_t n)
{
	while (n) {
		uint64_t w = mix(seed ^ (o >> 3));
		unsigned b = (unsigned)(o & 7);

		for (; b < 8 && n; b++, n--, o++)
			*p++ = (unsigned char)(w >> (b * 8));
	}
}

struct side {
	int fd;
	const char *name;
	uint64_t seed_out, seed_in;
	pthread_t writer, reader;
	int writer_done, reader_done;	/* atomic */
	uint64_t eintr, partial;
};

static void on_usr1(int sig)
{
	(void)sig;
}

/* --writev: the chunk's elements (lengths), large ones of at least the
 * threshold, now and then a short one between them (one writer thread per
 * process). */
#define MAX_ELEMS 64
static size_t g_elem[MAX_ELEMS];
static int g_nelem;

static void cut_elements(prng_t *r, size_t n)
{
	size_t left = n;

	g_nelem = 0;
	while (left && g_nelem < MAX_ELEMS - 1) {
		size_t e;

		if (g_nelem && prng_range(r, 0, 3) == 0)
			e = (size_t)prng_range(r, 1, 300);	/* a header */
		else
			e = (size_t)prng_range(r, (uint64_t)opt_thresh, 1u << 20);
		if (e > left)
			e = left;
		g_elem[g_nelem++] = e;
		left -= e;
	}
	if (left)
		g_elem[g_nelem++] = left;
}

/* writev() of the chunk's elements from byte `done` on. */
static ssize_t send_elements(int fd, unsigned char *buf, size_t done)
{
	struct iovec iov[MAX_ELEMS];
	size_t off = 0;
	int n = 0;

	for (int i = 0; i < g_nelem; i++) {
		size_t e = g_elem[i];

		if (off + e > done) {
			size_t skip = done > off ? done - off : 0;

			iov[n].iov_base = buf + off + skip;
			iov[n++].iov_len = e - skip;
		}
		off += e;
	}
	return writev(fd, iov, n);
}

static void *writer_main(void *arg)
{
	struct side *s = arg;
	size_t cap = 8u << 20;
	unsigned char *buf = malloc(cap);
	prng_t r;
	uint64_t off = 0;

	if (!buf)
		die("malloc");
	prng_seed(&r, s->seed_out);
	while (off < opt_bytes) {
		size_t n = (size_t)prng_range(&r, (uint64_t)opt_thresh, cap);
		size_t done = 0;

		if (n > opt_bytes - off)
			n = (size_t)(opt_bytes - off);
		gen(s->seed_out, off, buf, n);
		if (opt_writev)
			cut_elements(&r, n);
		while (done < n) {
			ssize_t k = opt_writev ? send_elements(s->fd, buf, done) :
				send(s->fd, buf + done, n - done, MSG_NOSIGNAL);

			if (k < 0 && errno == EINTR) {
				s->eintr++;
				continue;
			}
			if (k <= 0)
				die("%s: send at %" PRIu64 ": %s", s->name, off + done,
				    strerror(errno));
			if ((size_t)k < n - done)
				s->partial++;
			done += (size_t)k;
		}
		off += n;
	}
	free(buf);
	if (shutdown(s->fd, SHUT_WR) < 0)
		DIE_ERRNO("shutdown");
	__atomic_store_n(&s->writer_done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* --readv: n bytes at p as up to four elements, the first ones of at
 * least the threshold. */
static ssize_t recv_elements(int fd, unsigned char *p, size_t n, prng_t *r)
{
	struct iovec iov[4];
	size_t t = (size_t)opt_thresh;
	int k = 0;

	while (k < 3 && n >= 2 * t) {
		size_t e = (size_t)prng_range(r, t, n - t);

		iov[k].iov_base = p;
		iov[k++].iov_len = e;
		p += e;
		n -= e;
	}
	iov[k].iov_base = p;
	iov[k++].iov_len = n;
	return readv(fd, iov, k);
}

static void *reader_main(void *arg)
{
	struct side *s = arg;
	size_t cap = 4u << 20;
	unsigned char *buf = malloc(cap), *want = malloc(cap);
	prng_t r;
	uint64_t off = 0;

	if (!buf || !want)
		die("malloc");
	prng_seed(&r, s->seed_in + 99);
	for (;;) {
		size_t n = (size_t)prng_range(&r, 64 * 1024, cap);
		ssize_t k = opt_readv ? recv_elements(s->fd, buf, n, &r) :
			recv(s->fd, buf, n, 0);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			die("%s: recv at %" PRIu64 ": %s", s->name, off, strerror(errno));
		if (k == 0)
			break;
		gen(s->seed_in, off, want, (size_t)k);
		if (memcmp(buf, want, (size_t)k)) {
			size_t i = 0;

			while (buf[i] == want[i])
				i++;
			die("%s: data differs at stream offset %" PRIu64, s->name,
			    off + i);
		}
		off += (uint64_t)k;
	}
	if (off != opt_bytes)
		die("%s: EOF after %" PRIu64 " of %" PRIu64 " bytes", s->name, off,
		    opt_bytes);
	__atomic_store_n(&s->reader_done, 1, __ATOMIC_RELEASE);
	free(buf);
	free(want);
	return NULL;
}

static void *signaller_main(void *arg)
{
	struct side *s = arg;
	struct timespec ts = { 0, 1000 * 1000 };

	/* Both threads: blocked ZCopy sends cancel their SrcAvail, blocked
	 * recvs their SinkAvail. */
	while (!__atomic_load_n(&s->writer_done, __ATOMIC_ACQUIRE) ||
	       !__atomic_load_n(&s->reader_done, __ATOMIC_ACQUIRE)) {
		if (!__atomic_load_n(&s->writer_done, __ATOMIC_ACQUIRE))
			pthread_kill(s->writer, SIGUSR1);
		if (!__atomic_load_n(&s->reader_done, __ATOMIC_ACQUIRE))
			pthread_kill(s->reader, SIGUSR1);
		nanosleep(&ts, NULL);
	}
	return NULL;
}

/* Returns 0, or 77 if RDMA is unavailable. */
static int run_side(int fd, const char *name, uint64_t seed_out, uint64_t seed_in)
{
	struct side s = { .fd = fd, .name = name, .seed_out = seed_out,
			  .seed_in = seed_in };
	pthread_t sg;
	struct zstats st;
	socklen_t sl = sizeof(int);
	int v = opt_thresh;
	double t0;

	if (setsockopt(fd, SOL_TCP, SDP_ZCOPY_THRESH, &v, sizeof(v)) < 0)
		DIE_ERRNO("setsockopt(SDP_ZCOPY_THRESH)");
	v = -2;
	if (getsockopt(fd, SOL_TCP, SDP_ZCOPY_THRESH, &v, &sl) < 0)
		DIE_ERRNO("getsockopt(SDP_ZCOPY_THRESH)");
	if (v != opt_thresh)
		die("%s: SDP_ZCOPY_THRESH reads back %d, set %d", name, v, opt_thresh);
	sl = sizeof(st);
	if (getsockopt(fd, SOL_TCP, SDP_ZCOPY_STATS, &st, &sl) < 0)
		DIE_ERRNO("getsockopt(SDP_ZCOPY_STATS)");
	if (!st.rdma) {
		info("%s: the transport cannot RDMA here: ZCopy not testable", name);
		close(fd);
		return 77;
	}
	t0 = now_sec();
	watchdog_arm(120, "%s: transfer", name);
	if (pthread_create(&s.writer, NULL, writer_main, &s) ||
	    pthread_create(&s.reader, NULL, reader_main, &s))
		die("pthread_create");
	if (opt_signals && pthread_create(&sg, NULL, signaller_main, &s))
		die("pthread_create");
	pthread_join(s.writer, NULL);
	pthread_join(s.reader, NULL);
	if (opt_signals)
		pthread_join(sg, NULL);
	watchdog_disarm();
	sl = sizeof(st);
	if (getsockopt(fd, SOL_TCP, SDP_ZCOPY_STATS, &st, &sl) < 0)
		DIE_ERRNO("getsockopt(SDP_ZCOPY_STATS)");
	info("%s: Write ZCopy: %" PRIu64 " sink adverts, %.1f MiB written into us, "
	     "%" PRIu64 " cancels, %" PRIu64 " unused; %" PRIu64 " peer adverts, "
	     "%.1f MiB written by us, %" PRIu64 " unused; modes tx %u rx %u, "
	     "%" PRIu64 " ModeChange sent",
	     name, st.wr_sink_adverts, (double)st.wr_rx_bytes / 1048576.0,
	     st.wr_sink_cancels, st.wr_sink_unused, st.wr_src_adverts,
	     (double)st.wr_tx_bytes / 1048576.0, st.wr_src_unused, st.tx_mode,
	     st.rx_mode, st.mode_changes);
	info("%s: %.1f MiB each way in %.2f s; ZCopy: %" PRIu64 " adverts, %.1f MiB "
	     "read by the peer, %" PRIu64 " declined, %" PRIu64 " cancels; read %.1f MiB "
	     "by RDMA of %" PRIu64 " adverts (%" PRIu64 " declined); send EINTR %" PRIu64
	     ", partial %" PRIu64,
	     name, (double)opt_bytes / 1048576.0, now_sec() - t0, st.tx_adverts,
	     (double)st.tx_bytes / 1048576.0, st.tx_declined, st.tx_cancels,
	     (double)st.rx_bytes / 1048576.0, st.rx_adverts, st.rx_declined, s.eintr,
	     s.partial);
	if (!strcmp(opt_require, "read") && (!st.rx_bytes || !st.tx_bytes))
		die("%s: no Read ZCopy happened", name);
	if (!strcmp(opt_require, "read") && (st.wr_rx_bytes || st.wr_tx_bytes))
		die("%s: Write ZCopy happened with SDP_ZCOPY_WRITE=0", name);
	if (!strcmp(opt_require, "write") && (!st.wr_rx_bytes || !st.wr_tx_bytes))
		die("%s: no Write ZCopy happened", name);
	info("%s: MaxAdverts ours %u, peer's %u; most SrcAvails out at once: "
	     "ours %" PRIu64 ", the peer's held %" PRIu64, name, st.max_adverts,
	     st.peer_max_adverts, st.tx_adverts_peak, st.rx_adverts_peak);
	if (opt_writev && st.tx_adverts_peak < 2)
		die("%s: --writev: never several SrcAvails outstanding", name);
	if (!st.rx_bytes + !st.wr_rx_bytes == 2 ||
	    !st.tx_bytes + !st.wr_tx_bytes == 2)
		die("%s: no ZCopy happened", name);
	if (close(fd) < 0)
		DIE_ERRNO("close");
	return 0;
}

static int client_main(uint16_t port, void *arg)
{
	(void)arg;
	return run_side(connect_to(port), "client", 1001, 2002);
}

int main(int argc, char **argv)
{
	struct sigaction sa;

	g_prog = "sdp_zcopy";
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--family") && v) {
			if (set_family(v))
				die("bad --family");
			i++;
		} else if (!strcmp(a, "--bytes") && v) {
			opt_bytes = parse_size(v);
			i++;
		} else if (!strcmp(a, "--thresh") && v) {
			opt_thresh = atoi(v);
			i++;
		} else if (!strcmp(a, "--signals")) {
			opt_signals = 1;
		} else if (!strcmp(a, "--writev")) {
			opt_writev = 1;
		} else if (!strcmp(a, "--readv")) {
			opt_readv = 1;
		} else if (!strcmp(a, "--require") && v &&
			   (!strcmp(v, "read") || !strcmp(v, "write") ||
			    !strcmp(v, "any"))) {
			opt_require = v;
			i++;
		} else {
			fprintf(stderr, "usage: sdp_zcopy %s [--bytes N] [--thresh N] "
				"[--signals] [--writev] [--readv] [--require read|write|any]\n",
				family_usage());
			return 2;
		}
	}
	/* The library reads its configuration when it loads: set
	 * SDP_ZCOPY_WRITE=0 for "read" by running ourselves again. */
	if (!strcmp(opt_require, "read") &&
	    !(getenv("SDP_ZCOPY_WRITE") && !strcmp(getenv("SDP_ZCOPY_WRITE"), "0"))) {
		setenv("SDP_ZCOPY_WRITE", "0", 1);
		execv("/proc/self/exe", argv);
		DIE_ERRNO("execv");
	}
	if (!is_sdp()) {
		info("ZCopy needs an SDP family: skipped");
		return 77;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;	/* no SA_RESTART: send() sees EINTR */
	sigaction(SIGUSR1, &sa, NULL);
	info("family %s, %" PRIu64 " bytes each way, threshold %d%s", g_family_name,
	     opt_bytes, opt_thresh, opt_signals ? ", SIGUSR1 storm" : "");

	child_t ch = spawn_connector(client_main, NULL);
	uint16_t port;
	int lfd = make_listener(&port, 4);

	child_go(&ch, port);
	int fd = accept_one(lfd);
	close(lfd);
	int rc = run_side(fd, "server", 2002, 1001);
	int crc = wait_child(ch.pid, "client");

	if (rc == 77 || crc == 77)
		return 77;
	if (crc)
		die("client failed");
	info("PASS");
	return 0;
}
