// SPDX-License-Identifier: MIT
/*
 * exec-setuid.c — the processes of tests/security/exec-setuid.sh; built
 * non-PIE so that `buf` has the same address in every image of it.
 *
 *   server PORTFILE GOFILE BYTES
 *	(root, preloaded) accept one connection, send "hello", wait for
 *	GOFILE, send BYTES (byte i = pat(i)) and read to EOF; prints
 *	"server: sent N sum S" or "server: send failed after N: ERROR"
 *	(a send that waits 3 s fails),
 *	then "server: received N sum S" and "server: rdma R written W
 *	read D" (SDP_ZCOPY_STATS).
 *   client PORT BYTES
 *	(a user, preloaded) the legitimate peer: recv "hello", then BYTES
 *	into buf with blocking recv()s of the whole rest (Write ZCopy), send
 *	them back (Read ZCopy); prints "client: received N sum S".
 *   hostile PORT TARGET CHECKFILE
 *	(a user, preloaded) recv "hello", then a thread's blocking recv()
 *	of all of buf advertises it (SinkAvail); a forked child keeps the
 *	connection, and this process execs TARGET (setuid root, a copy of
 *	this program) in target mode.
 *   euid
 *	prints the effective uid (is the setuid bit honoured here?).
 *   target CHECKFILE
 *	fills buf with 'T', prints "target: ready uid U euid E buf ADDR",
 *	waits for CHECKFILE (20 s at most) and prints whether buf is intact.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <unistd.h>

#include "sdp/sdp.h"

#define BUF_BYTES (4u << 20)

static unsigned char buf[BUF_BYTES];
static int sock;

/*
 * A peer that claims it can RDMA.  An honest library of another user than
 * the server's cannot read the server's memory, so its probe fails and it
 * never advertises a buffer; a hostile one simply claims success.  Here
 * the executable's own mmap and process_vm_readv (exported: -rdynamic) do
 * that for libsdp: the last shared mapping that arrives with the shm
 * segment magic is the peer's segment, and an 8-byte read (the probe of
 * the peer's nonce) answers from it.
 */
static int fake_probe;
static const unsigned char *peer_seg;

void *mmap(void *a, size_t len, int prot, int flags, int fd, off_t off)
{
	void *p = (void *)syscall(SYS_mmap, a, len, prot, flags, fd, off);

	if (fake_probe && p != MAP_FAILED && (flags & MAP_SHARED) && fd >= 0 &&
	    len >= 4096 && !memcmp(p, "LSDPSHM1", 8))
		peer_seg = p;
	return p;
}

ssize_t process_vm_readv(pid_t pid, const struct iovec *l, unsigned long nl,
			 const struct iovec *r, unsigned long nr,
			 unsigned long flags)
{
	if (fake_probe && peer_seg && nl == 1 && nr == 1 &&
	    r->iov_len == 8 && l->iov_len == 8) {
		memcpy(l->iov_base,
		       peer_seg + ((uintptr_t)r->iov_base & 4095), 8);
		return 8;
	}
	return syscall(SYS_process_vm_readv, pid, l, nl, r, nr, flags);
}

static unsigned char pat(size_t i)
{
	return (unsigned char)(i * 131 + (i >> 12) + 7);
}

static uint32_t sum(uint32_t s, const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		s = (s ^ p[i]) * 16777619u;	/* FNV-1a */
	return s;
}

static int wait_file(const char *path, int secs)
{
	struct stat st;

	for (int i = 0; i < secs * 20; i++) {
		if (!stat(path, &st))
			return 0;
		usleep(50000);
	}
	return -1;
}

static int dial(const char *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	int s = socket(AF_INET, SOCK_STREAM, 0);

	a.sin_port = htons((uint16_t)atoi(port));
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof(a))) {
		perror("connect");
		exit(1);
	}
	return s;
}

static size_t recv_hello(void)
{
	struct timeval tv = { 0, 200000 }, no = { 0, 0 };
	char h[5];
	ssize_t n;

	if (recv(sock, h, sizeof(h), MSG_WAITALL) != (ssize_t)sizeof(h) ||
	    memcmp(h, "hello", 5)) {
		fprintf(stderr, "no hello\n");
		exit(1);
	}
	/* A large recv() asks the source for Pipelined mode, which a Write
	 * ZCopy advertisement needs; this one ends empty after 0.2 s, the
	 * next one advertises. */
	setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	n = recv(sock, buf, BUF_BYTES, 0);
	setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &no, sizeof(no));
	return n > 0 ? (size_t)n : 0;
}

static void print_zstats(void)
{
	struct sdp_zcopy_stats z;
	socklen_t zl = sizeof(z);

	memset(&z, 0, sizeof(z));
	if (getsockopt(sock, IPPROTO_TCP, SDP_ZCOPY_STATS, &z, &zl))
		printf("server: no SDP_ZCOPY_STATS: %s\n", strerror(errno));
	else
		printf("server: rdma %u written %llu read %llu\n", z.rdma,
		       (unsigned long long)z.wr_tx_bytes,
		       (unsigned long long)z.rx_bytes);
	fflush(stdout);
}

/* Until the peer's next recv buffer is advertised (5 s at most): the send
 * then fills it by RDMA WRITE rather than advertising its own buffer. */
static void wait_sink_avail(void)
{
	static uint64_t seen;
	struct sdp_zcopy_stats z;
	socklen_t zl = sizeof(z);
	char c;

	for (int i = 0; i < 5000; i++) {
		if (getsockopt(sock, IPPROTO_TCP, SDP_ZCOPY_STATS, &z, &zl))
			return;
		if (z.wr_src_adverts > seen) {
			seen = z.wr_src_adverts;
			return;
		}
		recv(sock, &c, 1, MSG_PEEK | MSG_DONTWAIT);
		usleep(1000);
	}
}

static int server(char **av)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t alen = sizeof(a);
	size_t total = strtoul(av[3], NULL, 0), off = 0;
	uint32_t s = 2166136261u;
	char tmp[256];
	FILE *f;
	int l, one = 1;
	ssize_t n;

	if (total > BUF_BYTES)
		return 2;
	for (size_t i = 0; i < total; i++)
		buf[i] = pat(i);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	l = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 4) ||
	    getsockname(l, (struct sockaddr *)&a, &alen)) {
		perror("listen");
		return 1;
	}
	snprintf(tmp, sizeof(tmp), "%s.tmp", av[1]);
	f = fopen(tmp, "w");
	fprintf(f, "%d %d\n", ntohs(a.sin_port), (int)getpid());
	fclose(f);
	rename(tmp, av[1]);
	sock = accept(l, NULL, NULL);
	if (sock < 0 || send(sock, "hello", 5, 0) != 5) {
		perror("accept/hello");
		return 1;
	}
	if (wait_file(av[2], 30)) {
		fprintf(stderr, "server: no go file\n");
		return 1;
	}
	/* A peer that holds the connection without reading (case 1) ends
	 * the send after a while: its bytes went by copy, nowhere else. */
	setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO,
		   &(struct timeval){ .tv_sec = 3 }, sizeof(struct timeval));
	while (off < total) {
		wait_sink_avail();
		n = send(sock, buf + off, total - off, MSG_NOSIGNAL);
		if (n <= 0) {
			printf("server: send failed after %zu: %s\n", off,
			       n < 0 ? strerror(errno) : "returned 0");
			print_zstats();
			return 0;
		}
		off += (size_t)n;
	}
	printf("server: sent %zu sum %08x\n", total, sum(s, buf, total));
	fflush(stdout);
	shutdown(sock, SHUT_WR);
	memset(buf, 0, total);
	off = 0;
	while (off < BUF_BYTES && (n = recv(sock, buf + off, BUF_BYTES - off,
					    MSG_WAITALL)) > 0)
		off += (size_t)n;
	printf("server: received %zu sum %08x\n", off, sum(s, buf, off));
	print_zstats();
	return 0;
}

static int client(char **av)
{
	size_t total = strtoul(av[2], NULL, 0), off = 0;
	ssize_t n;

	if (total > BUF_BYTES)
		return 2;
	sock = dial(av[1]);
	off = recv_hello();
	/* One large recv() at a time, each of the whole rest: the sink
	 * advertises buf and the source RDMA-writes into it. */
	while (off < total && (n = recv(sock, buf + off, total - off, 0)) > 0)
		off += (size_t)n;
	printf("client: received %zu sum %08x\n", off,
	       sum(2166136261u, buf, off));
	fflush(stdout);
	if (send(sock, buf, off, 0) != (ssize_t)off)
		perror("client: send");
	close(sock);
	return 0;
}

static void *advertise(void *arg)
{
	(void)arg;
	recv(sock, buf, BUF_BYTES, 0);	/* never returns: exec comes first */
	return NULL;
}

static int hostile(char **av)
{
	pthread_t t;
	pid_t kid;

	sock = dial(av[1]);
	recv_hello();
	pthread_create(&t, NULL, advertise, NULL);
	/* Time for the SinkAvail to go out; the test does not depend on it
	 * (with it not out, the server's send would go by copy). */
	usleep(300000);
	kid = fork();
	if (kid == 0) {
		sleep(10);	/* keeps the connection (and segment) open */
		_exit(0);
	}
	printf("hostile: buf %p, exec %s\n", (void *)buf, av[2]);
	fflush(stdout);
	execl(av[2], av[2], "target", av[3], (char *)NULL);
	perror("exec");
	return 1;
}

static int target(char **av)
{
	size_t bad = 0;

	memset(buf, 'T', sizeof(buf));
	printf("target: ready uid %d euid %d buf %p\n", (int)getuid(),
	       (int)geteuid(), (void *)buf);
	fflush(stdout);
	if (wait_file(av[1], 20))
		printf("target: no check file\n");
	for (size_t i = 0; i < sizeof(buf); i++)
		bad += buf[i] != 'T';
	if (bad)
		printf("target: buf OVERWRITTEN (%zu bytes changed)\n", bad);
	else
		printf("target: buf intact\n");
	return 0;
}

int main(int ac, char **av)
{
	if (ac == 5 && !strcmp(av[1], "server"))
		return server(av + 1);
	fake_probe = ac >= 2 && (!strcmp(av[1], "client") ||
				 !strcmp(av[1], "hostile"));
	if (ac == 4 && !strcmp(av[1], "client"))
		return client(av + 1);
	if (ac == 5 && !strcmp(av[1], "hostile"))
		return hostile(av + 1);
	if (ac == 2 && !strcmp(av[1], "euid"))
		return printf("%d\n", (int)geteuid()) < 0;
	if (ac == 3 && !strcmp(av[1], "target"))
		return target(av + 1);
	fprintf(stderr, "usage: see exec-setuid.c\n");
	return 2;
}
