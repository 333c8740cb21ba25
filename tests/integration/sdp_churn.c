/* SPDX-License-Identifier: MIT */
/*
 * sdp_churn: N (default 100,000) connections opened and closed one after
 * the other, with checked bytes on each, and nothing left behind.
 *
 * The forked child connects, sends a checksummed message naming the
 * connection, reads the checksummed answer and closes; the parent accepts,
 * checks the message, answers, reads EOF and closes.  Each process takes a
 * census of itself from /proc (open descriptors, mappings, private memory)
 * after a warm-up and again at the end: a connection that leaks a
 * descriptor, a segment mapping or its buffers shows there long before N.
 * Closing finishes in the background (the progress thread ends each closed
 * connection's handshake), and idle caches age out in the background, so
 * the end census waits, bounded, for the descriptors, mappings and private
 * memory to come back to the warm-up's.
 */
#include <malloc.h>

#include "itest_common.h"

#define MSG_LEN 64
#define WARMUP 1000
/* Slack for what a process may legitimately grow by over a run: malloc's
 * arenas and caches, a descriptor or mapping opened once for good (a new
 * peer process's pidfd, a thread's stack), and the shm transport's kept
 * segment pairs (transport/shm/shm_keep.c: at most SHM_KEEP_PER_ROLE, 64,
 * per role, two mappings each, released when the pool is next used after
 * a second idle, not in the background; a busy host, whose listener
 * releases its side later, leaves more of them kept at the end).  A
 * mapping left per connection still shows 99,000 times over. */
#define SLACK_FDS 4
#define SLACK_MAPS (8 + 2 * 64 * 2)
#define SLACK_RSS_KIB 1024

/* AddressSanitizer's allocator maps fresh memory and keeps freed blocks in
 * quarantine: there mappings and resident memory say nothing about leaks
 * (its leak checker does), and only descriptors are compared. */
#if defined(__SANITIZE_ADDRESS__)
#define MEMORY_CENSUS 0
#else
#define MEMORY_CENSUS 1
#endif

static long opt_n = 100000;

struct census {
	long fds, maps, rss_kib;
};

static long count_lines(const char *path)
{
	FILE *f = fopen(path, "re");
	long n = 0;
	int c;

	if (!f)
		DIE_ERRNO("fopen");
	while ((c = getc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

/* Private anonymous memory (heap, stacks), where a leak of the library's
 * own memory grows.  Shared memory is left out: the connections' segments
 * are counted as mappings, and the family's owner slots (base/owner.c)
 * are handed out in turn across a fixed region, so their pages are touched
 * one after the other until it is all touched (20 bytes a connection). */
static long rss_kib(void)
{
	FILE *f = fopen("/proc/self/status", "re");
	char line[256];
	long v = -1;

	if (!f)
		DIE_ERRNO("fopen(/proc/self/status)");
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "RssAnon: %ld kB", &v) == 1)
			break;
	fclose(f);
	return v;
}

static struct census take_census(void)
{
	/* Freed memory goes back to the system first: what stays resident
	 * is what is still allocated, not the high-water mark of a moment
	 * when many closes were in flight. */
	malloc_trim(0);
	struct census c = { count_fds(), count_lines("/proc/self/maps"), rss_kib() };
	return c;
}

/* The end census, once descriptors, mappings and private memory are back
 * to the warm-up's (closes still finishing in the background; the verbs
 * transport's idle registered buffers released a second after their last
 * use), or after 10 s: then the last one, which fails the comparison. */
static struct census settled_census(const struct census *base)
{
	double until = now_sec() + 10;
	struct census c;

	for (;;) {
		c = take_census();
		if ((c.fds <= base->fds + SLACK_FDS &&
		     (!MEMORY_CENSUS || (c.maps <= base->maps + SLACK_MAPS &&
					 c.rss_kib <= base->rss_kib + SLACK_RSS_KIB))) ||
		    now_sec() > until)
			return c;
		usleep(10000);
	}
}

static void compare(const char *who, const struct census *a, const struct census *b)
{
	info("%s: after %d connections: %ld fds, %ld mappings, %ld KiB private; "
	     "after %ld: %ld fds, %ld mappings, %ld KiB private",
	     who, WARMUP, a->fds, a->maps, a->rss_kib, opt_n, b->fds, b->maps, b->rss_kib);
	if (b->fds > a->fds + SLACK_FDS)
		die("%s: %ld descriptors leaked over %ld connections", who, b->fds - a->fds,
		    opt_n - WARMUP);
	if (!MEMORY_CENSUS)
		return;
	if (b->maps > a->maps + SLACK_MAPS)
		die("%s: %ld mappings leaked over %ld connections", who, b->maps - a->maps,
		    opt_n - WARMUP);
	if (b->rss_kib > a->rss_kib + SLACK_RSS_KIB)
		die("%s: private memory grew by %ld KiB over %ld connections", who,
		    b->rss_kib - a->rss_kib, opt_n - WARMUP);
}

/* message: [0..7] connection number, [8..55] payload, [56..63] checksum */
static void make_msg(unsigned char *m, uint64_t idx, uint32_t salt)
{
	prng_t r;
	prng_seed(&r, idx * 0x9e3779b97f4a7c15ull ^ salt);
	memcpy(m, &idx, 8);
	prng_fill(&r, m + 8, 48);
	uint64_t h = csum_buf(m, 56);
	memcpy(m + 56, &h, 8);
}

static void check_msg(const unsigned char *m, uint64_t want, uint32_t salt, const char *what)
{
	unsigned char exp[MSG_LEN];

	make_msg(exp, want, salt);
	if (memcmp(exp, m, MSG_LEN)) {
		uint64_t got;
		memcpy(&got, m, 8);
		die("%s %llu: wrong message (names connection %llu)", what,
		    (unsigned long long)want, (unsigned long long)got);
	}
}

static int client_main(uint16_t port, void *arg)
{
	(void)arg;
	unsigned char m[MSG_LEN];
	struct census base = { 0 };
	double t0 = now_sec();

	for (long i = 0; i < opt_n; i++) {
		if (i == WARMUP)
			base = take_census();
		if (i % 1000 == 0)
			watchdog_arm(30, "client: connections %ld to %ld", i, i + 999);
		int fd = connect_to(port);
		make_msg(m, (uint64_t)i, 0x1111);
		write_full(fd, m, MSG_LEN, "client message");
		if (read_full(fd, m, MSG_LEN, "client answer") != MSG_LEN)
			die("client: EOF instead of the answer on connection %ld", i);
		check_msg(m, (uint64_t)i, 0x2222, "client: answer on connection");
		if (close(fd) < 0)
			DIE_ERRNO("client close");
	}
	double dt = now_sec() - t0;
	watchdog_arm(30, "client: end census");
	struct census end = settled_census(&base);
	watchdog_disarm();
	info("client: %ld connections in %.1f s = %.0f/s", opt_n, dt, opt_n / dt);
	compare("client", &base, &end);
	return 0;
}

int main(int argc, char **argv)
{
	g_prog = "sdp_churn";
	/* One malloc arena for every thread: a second one, made when two
	 * threads meet in malloc, would grow private memory by megabytes at
	 * a moment nobody chose, and look like a leak. */
	mallopt(M_ARENA_MAX, 1);
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--family") && i + 1 < argc) {
			if (set_family(argv[++i]))
				die("bad family '%s'", argv[i]);
		} else if (!strcmp(argv[i], "--conns") && i + 1 < argc) {
			opt_n = atol(argv[++i]);
		} else {
			fprintf(stderr, "usage: sdp_churn %s [--conns N]\n", family_usage());
			return 2;
		}
	}
	if (opt_n <= WARMUP)
		die("--conns must be more than %d (the warm-up)", WARMUP);
	child_t ch = spawn_connector(client_main, NULL);
	uint16_t port;
	int lfd = make_listener(&port, 128);
	child_go(&ch, port);

	unsigned char m[MSG_LEN];
	struct census base = { 0 };
	for (long i = 0; i < opt_n; i++) {
		if (i == WARMUP)
			base = take_census();
		if (i % 1000 == 0)
			watchdog_arm(30, "server: connections %ld to %ld", i, i + 999);
		int fd = accept_one(lfd);
		if (read_full(fd, m, MSG_LEN, "server message") != MSG_LEN)
			die("server: EOF instead of the message on connection %ld", i);
		check_msg(m, (uint64_t)i, 0x1111, "server: message on connection");
		make_msg(m, (uint64_t)i, 0x2222);
		write_full(fd, m, MSG_LEN, "server answer");
		char c;
		ssize_t n = recv(fd, &c, 1, 0);
		if (n != 0)
			die("server: connection %ld: expected EOF after the client closed, got %zd (%s)",
			    i, n, n < 0 ? strerror(errno) : "data");
		if (close(fd) < 0)
			DIE_ERRNO("server close");
	}
	watchdog_arm(30, "server: waiting for the client");
	int rc = wait_child(ch.pid, "client");
	if (rc)
		die("client failed (status %d)", rc);
	struct census end = settled_census(&base);
	watchdog_disarm();
	close(lfd);
	compare("server", &base, &end);
	info("PASS: %ld connections opened and closed, every message checked, nothing leaked", opt_n);
	return 0;
}
