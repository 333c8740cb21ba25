/* SPDX-License-Identifier: MIT */
/*
 * sdpstat — list the SDP sockets of every process on this host, like ss(8)
 * or OFED's sdpnetstat: pid, program, descriptor, addresses, state,
 * transport, byte and message counters, credits, and why a socket that
 * could have used SDP is on TCP.
 *
 * Each process running libsdp publishes its sockets in
 * /dev/shm/libsdp-stat.<pid> (engine/stats_layout.h, the only libsdp
 * header this tool includes: it does not link libsdp).  sdpstat asks each
 * one for fresh numbers (a deadline in the file header and a datagram to
 * its wake socket), waits briefly for the refresh, and copies the records
 * under their seqlocks.  Files of processes that are gone (or that exec'd
 * a program without libsdp) are removed when permissions allow.
 *
 * Files are private to their owner (0600): a user sees their own
 * processes, root sees all.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stddef.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#include "engine/stats_layout.h"

#define REFRESH_WAIT_MS 300	/* how long to wait for publishers */

struct opts {
	int pid;		/* 0 = all */
	int listeners;		/* -l */
	int all;		/* -a */
	int json;
	double interval;	/* -i; 0 = once */
	int by_user;		/* -u */
	uid_t uid;
};

struct pub {
	char path[300];
	int pid;
	struct sdp_stat_hdr *hdr;
	size_t len;
	uint32_t reserved;	/* records backed by reserved pages */
	uid_t uid;		/* the file's owner: the publisher's user */
	int writable;
	uint64_t asked_ns;
};

struct row {
	int pid;
	uid_t uid;
	char program[64];
	struct sdp_stat_rec r;
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A user name or number. */
static int user_arg(const char *s, uid_t *uid)
{
	struct passwd *pw = getpwnam(s);
	char *end;
	unsigned long v;

	if (pw) {
		*uid = pw->pw_uid;
		return 0;
	}
	v = strtoul(s, &end, 10);
	if (!*s || *end || v > (uid_t)-2)
		return -1;
	*uid = (uid_t)v;
	return 0;
}

static const char *user_name(uid_t uid, char *buf, size_t len)
{
	struct passwd *pw = getpwuid(uid);

	if (pw)
		snprintf(buf, len, "%.31s", pw->pw_name);
	else
		snprintf(buf, len, "%u", (unsigned)uid);
	return buf;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sdpstat [-l | -a] [-p PID] [-u USER] [--json] [-i SECS]\n"
		"List the SDP sockets of all processes on this host (those\n"
		"you may see: your own, or all as root).\n"
		"\n"
		"  -p, --pid PID       only process PID\n"
		"  -u, --user USER     only the processes of USER (name or uid)\n"
		"  -l, --listening     only listening sockets\n"
		"  -a, --all           listening and connected sockets\n"
		"                      (default: connected only)\n"
		"  -j, --json          JSON array of objects instead of a table\n"
		"  -i, --interval SECS repeat every SECS seconds (live view)\n"
		"  -h, --help          this text\n"
		"\n"
		"Columns: USER owns the process (its statistics file).\n"
		"CREDITS is tx/peer: sends we may still make, and the\n"
		"receive buffers the peer last heard we had posted.  REASON says\n"
		"why a socket is on TCP, or why a connection was reset.\n");
}

/* ---- finding publishers -------------------------------------------------- */

/* The process still maps its file?  1 yes, 0 no, -1 cannot tell. */
static int maps_file(int pid, const char *name)
{
	char p[64], line[512];
	FILE *f;
	int found = 0;

	snprintf(p, sizeof(p), "/proc/%d/maps", pid);
	f = fopen(p, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, name)) {
			found = 1;
			break;
		}
	fclose(f);
	return found;
}

/* A publisher that is gone: its pid is dead, or alive but no longer maps
 * the file (it exec'd a program without libsdp, or the pid was reused). */
static int stale(int pid, const char *name, int initialised)
{
	if (kill(pid, 0) < 0 && errno == ESRCH)
		return 1;
	/* A file still being created has no magic and no mapping yet. */
	return initialised && maps_file(pid, name) == 0;
}

static void poke(int pid)
{
	struct sockaddr_un a;
	socklen_t alen;
	int fd;

	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	memset(&a, 0, sizeof(a));
	a.sun_family = AF_UNIX;
	snprintf(a.sun_path + 1, sizeof(a.sun_path) - 1, SDP_STAT_WAKE_FMT,
		 pid);
	alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
			   strlen(a.sun_path + 1));
	/* Best effort: a full queue already means a refresh is coming. */
	if (sendto(fd, "", 1, MSG_DONTWAIT, (struct sockaddr *)&a, alen) < 0) {
		/* no wake socket: the numbers may be older */
	}
	close(fd);
}

/*
 * Reads and writes of a publisher's mapping go through the kernel
 * (process_vm_readv/writev on ourselves): a page its owner truncated away,
 * or a hole tmpfs cannot fill, is then EFAULT rather than SIGBUS.  sdpstat
 * run by root maps every user's file, and a file's owner may do either.
 */
static int safe_read(void *dst, const void *src, size_t n)
{
	struct iovec l = { dst, n }, r = { (void *)src, n };

	return process_vm_readv(getpid(), &l, 1, &r, 1, 0) == (ssize_t)n ? 0 : -1;
}

static int safe_write(void *dst, const void *src, size_t n)
{
	struct iovec l = { (void *)src, n }, r = { dst, n };

	return process_vm_writev(getpid(), &l, 1, &r, 1, 0) == (ssize_t)n ?
		0 : -1;
}

static int open_pub(const char *name, const struct opts *o,
		    uint64_t want_ns, struct pub *p)
{
	struct stat st;
	char *end;
	long pid;
	void *m;
	struct sdp_stat_hdr h;
	int fd, ok;

	if (strncmp(name, SDP_STAT_PREFIX, strlen(SDP_STAT_PREFIX)))
		return -1;
	pid = strtol(name + strlen(SDP_STAT_PREFIX), &end, 10);
	if (*end || pid <= 0 || !isdigit((unsigned char)name[strlen(
			SDP_STAT_PREFIX)]))
		return -1;
	if (o->pid && pid != o->pid)
		return -1;
	snprintf(p->path, sizeof(p->path), "%s/%s", SDP_STAT_DIR, name);
	p->pid = (int)pid;
	p->writable = 1;
	fd = open(p->path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == EACCES) {
		p->writable = 0;
		fd = open(p->path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	}
	if (fd < 0)
		return -1;
	/* Only the pages the writer reserved are read: a load from a hole of
	 * a full tmpfs is SIGBUS (the writer reserves as it grows). */
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    (size_t)st.st_size < sizeof(struct sdp_stat_hdr) ||
	    (size_t)st.st_blocks * 512 < sizeof(struct sdp_stat_hdr)) {
		close(fd);
		return -1;
	}
	if (o->by_user && st.st_uid != o->uid) {
		close(fd);
		return -1;
	}
	p->uid = st.st_uid;
	p->len = (size_t)st.st_size;
	p->reserved = (uint32_t)(((size_t)st.st_blocks * 512 -
				  sizeof(struct sdp_stat_hdr)) /
				 sizeof(struct sdp_stat_rec));
	m = mmap(NULL, p->len, PROT_READ | (p->writable ? PROT_WRITE : 0),
		 MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return -1;
	p->hdr = m;
	ok = safe_read(&h, m, sizeof(h)) == 0 &&
	     h.magic == SDP_STAT_MAGIC &&
	     h.version == SDP_STAT_VERSION &&
	     h.rec_size == sizeof(struct sdp_stat_rec) &&
	     h.hdr_size == sizeof(struct sdp_stat_hdr) &&
	     h.pid == pid &&
	     p->len >= h.hdr_size + (size_t)h.nslots * h.rec_size;
	if (stale((int)pid, name, ok)) {
		unlink(p->path);	/* fails harmlessly if not ours */
		ok = 0;
	}
	if (!ok) {
		munmap(m, p->len);
		return -1;
	}
	p->asked_ns = mono_ns();
	if (p->writable) {
		if (h.want_until_ns < want_ns)
			safe_write(&p->hdr->want_until_ns, &want_ns,
				   sizeof(want_ns));
		poke((int)pid);
	}
	return 0;
}

static int cmp_pub(const void *a, const void *b)
{
	return ((const struct pub *)a)->pid - ((const struct pub *)b)->pid;
}

static size_t find_pubs(const struct opts *o, struct pub **out)
{
	uint64_t want = mono_ns() +
		(uint64_t)((o->interval > 0 ? 2 * o->interval + 1 : 1) * 1e9);
	struct pub *v = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;
	DIR *d = opendir(SDP_STAT_DIR);

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			struct pub *nv = realloc(v, ncap * sizeof(*v));

			if (!nv)
				break;
			v = nv;
			cap = ncap;
		}
		if (open_pub(e->d_name, o, want, &v[n]) == 0)
			n++;
	}
	closedir(d);
	if (n)
		qsort(v, n, sizeof(*v), cmp_pub);
	*out = v;
	return n;
}

/* Give the publishers we asked a moment to refresh. */
static void wait_refresh(struct pub *v, size_t n)
{
	uint64_t end = mono_ns() + REFRESH_WAIT_MS * 1000000ull;
	size_t i, pending;

	do {
		pending = 0;
		for (i = 0; i < n; i++) {
			uint64_t done = UINT64_MAX;

			if (v[i].writable &&
			    !safe_read(&done, &v[i].hdr->refreshed_ns,
				       sizeof(done)) &&
			    done < v[i].asked_ns)
				pending++;
		}
		if (!pending)
			return;
		usleep(2000);
	} while (mono_ns() < end);
}

/* Seqlock read of one record; 0 if consistent. */
static int read_rec(const struct sdp_stat_rec *src, struct sdp_stat_rec *dst)
{
	int tries;

	for (tries = 0; tries < 1000; tries++) {
		uint32_t s1;

		if (safe_read(dst, src, sizeof(*dst)))
			return -1;
		s1 = dst->seq;
		if (s1 & 1) {
			usleep(10);
			continue;
		}
		/* The copy is consistent if seq did not move meanwhile. */
		if (safe_read(&dst->seq, &src->seq, sizeof(dst->seq)))
			return -1;
		if (dst->seq == s1)
			return 0;
	}
	return -1;
}

static size_t collect(struct pub *v, size_t n, const struct opts *o,
		      struct row **out)
{
	struct row *rows = NULL;
	size_t nr = 0, cap = 0, i;
	uint32_t s, hw;

	for (i = 0; i < n; i++) {
		const struct sdp_stat_rec *recs = (const void *)
			((const char *)v[i].hdr + sizeof(struct sdp_stat_hdr));
		struct sdp_stat_hdr h;

		if (safe_read(&h, v[i].hdr, sizeof(h)))
			continue;
		hw = h.high_water;
		if (hw > h.nslots)
			hw = h.nslots;
		if (hw > v[i].reserved)
			hw = v[i].reserved;
		for (s = 0; s < hw; s++) {
			struct row r;
			int lsn;

			if (read_rec(&recs[s], &r.r) || !r.r.in_use)
				continue;
			lsn = !!(r.r.flags & SDP_STAT_F_LISTENER);
			if (!o->all && lsn != o->listeners)
				continue;
			if (nr == cap) {
				size_t ncap = cap ? cap * 2 : 64;
				struct row *nrows = realloc(rows,
							    ncap * sizeof(*rows));

				if (!nrows)
					break;
				rows = nrows;
				cap = ncap;
			}
			r.pid = v[i].pid;
			r.uid = v[i].uid;
			memcpy(r.program, h.program, sizeof(r.program));
			r.program[sizeof(r.program) - 1] = '\0';
			r.r.state[sizeof(r.r.state) - 1] = '\0';
			r.r.transport[sizeof(r.r.transport) - 1] = '\0';
			r.r.mode[sizeof(r.r.mode) - 1] = '\0';
			r.r.reason[sizeof(r.r.reason) - 1] = '\0';
			rows[nr++] = r;
		}
	}
	*out = rows;
	return nr;
}

/* ---- output ---------------------------------------------------------------- */

static const char *fmt_addr(const struct sdp_stat_addr *a, char *buf,
			    size_t len)
{
	char ip[INET6_ADDRSTRLEN];

	if (a->family == 4) {
		inet_ntop(AF_INET, a->addr, ip, sizeof(ip));
		snprintf(buf, len, "%s:%u", ip, a->port);
	} else if (a->family == 6) {
		inet_ntop(AF_INET6, a->addr, ip, sizeof(ip));
		snprintf(buf, len, "[%s]:%u", ip, a->port);
	} else {
		snprintf(buf, len, "*");
	}
	return buf;
}

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

static void print_json(const struct row *rows, size_t n)
{
	char la[64], ra[64], ub[40];
	size_t i;

	printf("[");
	for (i = 0; i < n; i++) {
		const struct sdp_stat_rec *r = &rows[i].r;

		printf("%s\n  {\"pid\": %d, \"user\": ", i ? "," : "",
		       rows[i].pid);
		json_str(user_name(rows[i].uid, ub, sizeof(ub)));
		printf(", \"program\": ");
		json_str(rows[i].program);
		printf(", \"fd\": %d, \"listener\": %s, \"orphan\": %s, "
		       "\"conn_id\": %u, \"local\": ", r->fd,
		       r->flags & SDP_STAT_F_LISTENER ? "true" : "false",
		       r->flags & SDP_STAT_F_ORPHAN ? "true" : "false",
		       r->conn_id);
		json_str(fmt_addr(&r->local, la, sizeof(la)));
		printf(", \"remote\": ");
		json_str(fmt_addr(&r->remote, ra, sizeof(ra)));
		printf(", \"state\": ");
		json_str(r->state);
		printf(", \"transport\": ");
		json_str(r->transport);
		printf(", \"mode\": ");
		json_str(r->mode);
		printf(", \"tx_bytes\": %" PRIu64 ", \"rx_bytes\": %" PRIu64
		       ", \"tx_msgs\": %" PRIu64 ", \"rx_msgs\": %" PRIu64
		       ", \"bcopy_tx\": %" PRIu64 ", \"zcopy_tx\": %" PRIu64
		       ", \"tx_queued\": %" PRIu64 ", \"rx_queued\": %" PRIu64
		       ", \"credit_stalls\": %" PRIu64
		       ", \"tx_credits\": %d, \"peer_credits\": %u"
		       ", \"posted\": %u, \"accepted\": %" PRIu64
		       ", \"refused\": %" PRIu64 ", \"backlog\": %u"
		       ", \"zc_read_tx\": %" PRIu64 ", \"zc_read_rx\": %" PRIu64
		       ", \"zc_write_tx\": %" PRIu64
		       ", \"zc_write_rx\": %" PRIu64
		       ", \"tx_mode\": %u, \"rx_mode\": %u, \"reason\": ",
		       r->tx_bytes, r->rx_bytes, r->tx_msgs, r->rx_msgs,
		       r->bcopy_tx, r->zcopy_tx, r->tx_queued, r->rx_queued,
		       r->credit_stalls, r->tx_credits, r->peer_credits,
		       r->posted, r->accepted, r->refused, r->backlog,
		       r->zc_rd_tx, r->zc_rd_rx, r->zc_wr_tx, r->zc_wr_rx,
		       r->tx_mode, r->rx_mode);
		json_str(r->reason);
		printf("}");
	}
	printf("%s]\n", n ? "\n" : "");
}

/* -l: listening sockets.  KIND is what clients may use (sdp, or both: SDP
 * and kernel TCP on one port); PENDING counts connections handshaken and
 * not yet accepted (a shared listener's requests wait in the kernel). */
#define LCOLS 11

static void print_listeners(const struct row *rows, size_t n)
{
	static const char *const head[LCOLS] = {
		"PID", "USER", "PROGRAM", "FD", "LOCAL", "KIND", "STATE",
		"BACKLOG", "PENDING", "ACCEPTED", "REFUSED",
	};
	char (*cell)[LCOLS][64];
	int w[LCOLS], c;
	size_t i;

	if (!n) {
		printf("No SDP listening sockets.\n");
		return;
	}
	cell = calloc(n, sizeof(*cell));
	if (!cell)
		return;
	for (c = 0; c < LCOLS; c++)
		w[c] = (int)strlen(head[c]);
	for (i = 0; i < n; i++) {
		const struct sdp_stat_rec *r = &rows[i].r;

		snprintf(cell[i][0], 64, "%d", rows[i].pid);
		user_name(rows[i].uid, cell[i][1], 64);
		snprintf(cell[i][2], 64, "%.40s", rows[i].program);
		snprintf(cell[i][3], 64, "%d", r->fd);
		fmt_addr(&r->local, cell[i][4], 64);
		snprintf(cell[i][5], 64, "%s", r->mode);
		snprintf(cell[i][6], 64, "%s", r->state);
		snprintf(cell[i][7], 64, "%u", r->backlog);
		snprintf(cell[i][8], 64, "%" PRIu64, r->rx_queued);
		snprintf(cell[i][9], 64, "%" PRIu64, r->accepted);
		snprintf(cell[i][10], 64, "%" PRIu64, r->refused);
		for (c = 0; c < LCOLS - 1; c++)
			if ((int)strlen(cell[i][c]) > w[c])
				w[c] = (int)strlen(cell[i][c]);
	}
	w[LCOLS - 1] = 0;
	for (c = 0; c < LCOLS; c++)
		printf("%-*s%s", w[c], head[c], c < LCOLS - 1 ? " " : "\n");
	for (i = 0; i < n; i++)
		for (c = 0; c < LCOLS; c++)
			printf("%-*s%s", w[c], cell[i][c],
			       c < LCOLS - 1 ? " " : "\n");
	free(cell);
}

#define NCOLS 12

static void print_table(const struct row *rows, size_t n)
{
	static const char *const head[NCOLS] = {
		"PID", "USER", "PROGRAM", "FD", "LOCAL", "REMOTE", "STATE",
		"TRANSPORT", "TX-BYTES", "RX-BYTES", "CREDITS", "REASON",
	};
	char (*cell)[NCOLS][128];
	int w[NCOLS], c;
	size_t i;

	if (!n) {
		printf("No SDP sockets.\n");
		return;
	}
	cell = calloc(n, sizeof(*cell));
	if (!cell)
		return;
	for (c = 0; c < NCOLS; c++)
		w[c] = (int)strlen(head[c]);
	for (i = 0; i < n; i++) {
		const struct sdp_stat_rec *r = &rows[i].r;

		snprintf(cell[i][0], 128, "%d", rows[i].pid);
		user_name(rows[i].uid, cell[i][1], 128);
		snprintf(cell[i][2], 128, "%.40s", rows[i].program);
		if (r->fd >= 0)
			snprintf(cell[i][3], 128, "%d", r->fd);
		else
			snprintf(cell[i][3], 128, "-");
		fmt_addr(&r->local, cell[i][4], 128);
		fmt_addr(&r->remote, cell[i][5], 128);
		snprintf(cell[i][6], 128, "%s%s", r->state,
			 r->flags & SDP_STAT_F_ORPHAN ? "(closed)" : "");
		snprintf(cell[i][7], 128, "%s", r->transport);
		snprintf(cell[i][8], 128, "%" PRIu64, r->tx_bytes);
		snprintf(cell[i][9], 128, "%" PRIu64, r->rx_bytes);
		if (r->flags & SDP_STAT_F_LISTENER)
			snprintf(cell[i][10], 128, "-");
		else
			snprintf(cell[i][10], 128, "%d/%u", r->tx_credits,
				 r->peer_credits);
		snprintf(cell[i][11], 128, "%s", r->reason[0] ? r->reason : "-");
		for (c = 0; c < NCOLS - 1; c++)
			if ((int)strlen(cell[i][c]) > w[c])
				w[c] = (int)strlen(cell[i][c]);
	}
	/* The last column is not padded: no trailing blanks. */
	w[NCOLS - 1] = 0;
	for (c = 0; c < NCOLS; c++)
		printf("%-*s%s", w[c], head[c], c < NCOLS - 1 ? " " : "\n");
	for (i = 0; i < n; i++)
		for (c = 0; c < NCOLS; c++)
			printf("%-*s%s", w[c], cell[i][c],
			       c < NCOLS - 1 ? " " : "\n");
	free(cell);
}

static void snapshot(const struct opts *o)
{
	struct pub *v = NULL;
	struct row *rows = NULL;
	size_t n, nr, i;

	n = find_pubs(o, &v);
	wait_refresh(v, n);
	nr = collect(v, n, o, &rows);
	if (o->json)
		print_json(rows, nr);
	else if (o->listeners && !o->all)
		print_listeners(rows, nr);
	else
		print_table(rows, nr);
	fflush(stdout);
	for (i = 0; i < n; i++)
		munmap(v[i].hdr, v[i].len);
	free(v);
	free(rows);
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "user", required_argument, NULL, 'u' },
		{ "listening", no_argument, NULL, 'l' },
		{ "all", no_argument, NULL, 'a' },
		{ "json", no_argument, NULL, 'j' },
		{ "interval", required_argument, NULL, 'i' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct opts o = { 0 };
	char *end;
	int ch;

	while ((ch = getopt_long(argc, argv, "p:u:laji:h", lopts, NULL)) != -1) {
		switch (ch) {
		case 'u':
			if (user_arg(optarg, &o.uid)) {
				fprintf(stderr, "sdpstat: no such user '%s'\n",
					optarg);
				return 2;
			}
			o.by_user = 1;
			break;
		case 'p':
			o.pid = (int)strtol(optarg, &end, 10);
			if (*end || o.pid <= 0) {
				fprintf(stderr, "sdpstat: bad pid '%s'\n",
					optarg);
				return 2;
			}
			break;
		case 'l':
			o.listeners = 1;
			break;
		case 'a':
			o.all = 1;
			break;
		case 'j':
			o.json = 1;
			break;
		case 'i':
			o.interval = strtod(optarg, &end);
			if (*end || !(o.interval > 0)) {
				fprintf(stderr, "sdpstat: bad interval '%s'\n",
					optarg);
				return 2;
			}
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "sdpstat: unexpected argument '%s'\n",
			argv[optind]);
		usage(stderr);
		return 2;
	}
	for (;;) {
		if (o.interval > 0 && !o.json) {
			time_t t = time(NULL);
			char ts[32];

			strftime(ts, sizeof(ts), "%H:%M:%S", localtime(&t));
			printf("--- %s ---\n", ts);
		}
		snapshot(&o);
		if (!(o.interval > 0))
			return 0;
		usleep((useconds_t)(o.interval * 1e6));
	}
}
