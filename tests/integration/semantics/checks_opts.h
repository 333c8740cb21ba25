/* SPDX-License-Identifier: MIT */
/*
 * Checks: socket options, ioctls, fcntl, vectored I/O.
 *
 * Part of sdp_semantics.c (one program, one translation unit): it is
 * #included there, after semantics/harness.h.
 */
#ifndef SEMANTICS_CHECKS_OPTS_H
#define SEMANTICS_CHECKS_OPTS_H

static int t_so_bufs(void)
{
	int c, s;
	PAIR(c, s);
	int opts[2] = { SO_RCVBUF, SO_SNDBUF };
	const char *names[2] = { "SO_RCVBUF", "SO_SNDBUF" };
	for (int i = 0; i < 2; i++) {
		int v = 0;
		socklen_t len = sizeof v;
		SYS(getsockopt(c, SOL_SOCKET, opts[i], &v, &len));
		CHECK(v > 0 && len == sizeof v, "%s default = %d", names[i], v);
		int want = 65536;
		SYS(setsockopt(c, SOL_SOCKET, opts[i], &want, sizeof want));
		len = sizeof v;
		SYS(getsockopt(c, SOL_SOCKET, opts[i], &v, &len));
		CHECK(v >= want, "%s = %d after setting %d", names[i], v, want);
	}
	/* data still flows after resizing */
	WRITEN(c, "buf", 3);
	char b[3];
	READN(s, b, 3);
	close(c);
	close(s);
	return 0;
}

static int getint(int fd, int level, int opt, int *v)
{
	socklen_t len = sizeof *v;
	*v = -1;
	return getsockopt(fd, level, opt, v, &len);
}

static int t_so_reuseaddr(void)
{
	int fd;
	NEWSOCK(fd);
	int v, one = 1;
	SYS(getint(fd, SOL_SOCKET, SO_REUSEADDR, &v));
	CHECK(v == 0, "SO_REUSEADDR default %d", v);
	SYS(setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one));
	SYS(getint(fd, SOL_SOCKET, SO_REUSEADDR, &v));
	CHECK(v == 1, "SO_REUSEADDR = %d after setting 1", v);
	close(fd);
	/* functional: after the server side actively closes (TIME_WAIT on the
	 * listening port), a new listener with SO_REUSEADDR can bind the port */
	int c, s;
	uint16_t port;
	if (t_pair_on(g_domain, g_af, &c, &s, &port) < 0)
		return -1;
	close(s);
	char b;
	CHECK(recv(c, &b, 1, 0) == 0, "no EOF");
	close(c);
	NEWSOCK(fd);
	SYS(setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one));
	sockaddr_any a;
	socklen_t len = make_loopback(&a, g_af, port);
	SYS(bind(fd, &a.sa, len));
	SYS(listen(fd, 4));
	close(fd);
	return 0;
}

static int t_so_keepalive(void)
{
	int c, s, v, one = 1, zero = 0;
	PAIR(c, s);
	SYS(getint(c, SOL_SOCKET, SO_KEEPALIVE, &v));
	CHECK(v == 0, "SO_KEEPALIVE default %d", v);
	SYS(setsockopt(c, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one));
	SYS(getint(c, SOL_SOCKET, SO_KEEPALIVE, &v));
	CHECK(v == 1, "SO_KEEPALIVE = %d after setting 1", v);
	SYS(setsockopt(c, SOL_SOCKET, SO_KEEPALIVE, &zero, sizeof zero));
	SYS(getint(c, SOL_SOCKET, SO_KEEPALIVE, &v));
	CHECK(v == 0, "SO_KEEPALIVE = %d after setting 0", v);
	close(c);
	close(s);
	return 0;
}

/* SO_BINDTODEVICE read back on a socket bound to no device: an empty
 * name (sshd asks it for its "rdomain" and logged an error on SDP). */
static int t_so_bindtodevice(void)
{
	int c, s;
	char dev[32];
	socklen_t l = sizeof(dev);

	PAIR(c, s);
	SYS(getsockopt(c, SOL_SOCKET, SO_BINDTODEVICE, dev, &l));
	CHECK(l == 0, "SO_BINDTODEVICE gave %u bytes, not an empty name", (unsigned)l);
	close(c);
	close(s);
	return 0;
}

static int t_tcp_nodelay(void)
{
	int c, s, v, one = 1, zero = 0;
	PAIR(c, s);
	SYS(getint(c, IPPROTO_TCP, TCP_NODELAY, &v));
	CHECK(v == 0, "TCP_NODELAY default %d", v);
	SYS(setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one));
	SYS(getint(c, IPPROTO_TCP, TCP_NODELAY, &v));
	CHECK(v == 1, "TCP_NODELAY = %d after setting 1", v);
	SYS(setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &zero, sizeof zero));
	SYS(getint(c, IPPROTO_TCP, TCP_NODELAY, &v));
	CHECK(v == 0, "TCP_NODELAY = %d after setting 0", v);
	close(c);
	close(s);
	return 0;
}

/* TCP_CORK: reads back; data written while corked arrives whole once
 * uncorked (uncorking pushes; SDP holds short messages while corked). */
static int t_tcp_cork(void)
{
	int c, s, v, one = 1, zero = 0;
	char out[300], in[300];

	PAIR(c, s);
	for (int i = 0; i < (int)sizeof out; i++)
		out[i] = (char)(i * 7 + 3);
	SYS(getint(s, IPPROTO_TCP, TCP_CORK, &v));
	CHECK(v == 0, "TCP_CORK default %d", v);
	SYS(setsockopt(s, IPPROTO_TCP, TCP_CORK, &one, sizeof one));
	SYS(getint(s, IPPROTO_TCP, TCP_CORK, &v));
	CHECK(v == 1, "TCP_CORK = %d after setting 1", v);
	WRITEN(s, out, 100);
	WRITEN(s, out + 100, 100);
	WRITEN(s, out + 200, 100);
	SYS(setsockopt(s, IPPROTO_TCP, TCP_CORK, &zero, sizeof zero));
	SYS(getint(s, IPPROTO_TCP, TCP_CORK, &v));
	CHECK(v == 0, "TCP_CORK = %d after setting 0", v);
	READN(c, in, sizeof in);
	CHECK(memcmp(in, out, sizeof in) == 0, "corked bytes differ");
	close(c);
	close(s);
	return 0;
}

static int t_fionread(void)
{
	int c, s, v = -1;
	PAIR(c, s);
	SYS(ioctl(c, FIONREAD, &v));
	CHECK(v == 0, "FIONREAD = %d on an idle socket", v);
	char buf[600];
	memset(buf, 'f', sizeof buf);
	WRITEN(s, buf, 100);
	WRITEN(s, buf, 200);
	WRITEN(s, buf, 300);
	for (int i = 0; i < 5000; i++) { /* arrival is asynchronous */
		SYS(ioctl(c, FIONREAD, &v));
		if (v == 600)
			break;
		msleep_poll(1);
	}
	CHECK(v == 600, "FIONREAD = %d after 600 bytes were written", v);
	SYS(ioctl(c, SIOCINQ, &v));
	CHECK(v == 600, "SIOCINQ = %d", v);
	READN(c, buf, 250);
	SYS(ioctl(c, FIONREAD, &v));
	CHECK(v == 350, "FIONREAD = %d after reading 250 of 600", v);
	READN(c, buf, 350);
	SYS(ioctl(c, FIONREAD, &v));
	CHECK(v == 0, "FIONREAD = %d after reading everything", v);
	close(c);
	close(s);
	return 0;
}

static int t_fionbio(void)
{
	int c, s, on = 1, off = 0;
	PAIR(c, s);
	SYS(ioctl(c, FIONBIO, &on));
	CHECK(fcntl(c, F_GETFL) & O_NONBLOCK, "FIONBIO 1 did not set O_NONBLOCK");
	char b;
	EXPECT_ERR(recv(c, &b, 1, 0), EAGAIN);
	SYS(ioctl(c, FIONBIO, &off));
	CHECK(!(fcntl(c, F_GETFL) & O_NONBLOCK), "FIONBIO 0 did not clear O_NONBLOCK");
	WRITEN(s, "b", 1);
	READN(c, &b, 1);
	close(c);
	close(s);
	return 0;
}

static int t_fcntl(void)
{
	int c, s;
	PAIR(c, s);
	int fl = fcntl(c, F_GETFL);
	SYS(fl);
	CHECK(!(fl & O_NONBLOCK), "new socket is non-blocking");
	CHECK((fl & O_ACCMODE) == O_RDWR, "F_GETFL access mode 0%o, expected O_RDWR", fl & O_ACCMODE);
	SYS(fcntl(c, F_SETFL, fl | O_NONBLOCK));
	CHECK(fcntl(c, F_GETFL) & O_NONBLOCK, "O_NONBLOCK not set");
	char b;
	EXPECT_ERR(recv(c, &b, 1, 0), EAGAIN);
	SYS(fcntl(c, F_SETFL, fl));
	CHECK(!(fcntl(c, F_GETFL) & O_NONBLOCK), "O_NONBLOCK not cleared");
	SYS(fcntl(c, F_SETFD, FD_CLOEXEC));
	CHECK(fcntl(c, F_GETFD) & FD_CLOEXEC, "FD_CLOEXEC not set");
	SYS(fcntl(c, F_SETFD, 0));
	CHECK(!(fcntl(c, F_GETFD) & FD_CLOEXEC), "FD_CLOEXEC not cleared");
	close(c);
	close(s);
	return 0;
}

/*
 * sendfile() on a non-blocking socket, 3 MiB: with the file position
 * (offset NULL: it must advance by exactly what was sent, also on partial
 * sends) and with an explicit offset (the position must not move).  The
 * receiver drains whenever the sender would block; every byte checked.
 */
static int sendfile_drain(int s, const unsigned char *want, size_t *got, size_t total)
{
	unsigned char buf[65536];
	for (;;) {
		ssize_t n = recv(s, buf, sizeof buf, MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		CHECK(n > 0, "recv: %s", n < 0 ? strerror(errno) : "EOF");
		CHECK(*got + (size_t)n <= total && !memcmp(buf, want + *got, (size_t)n),
		      "received bytes %zu..%zu differ from the file", *got, *got + (size_t)n);
		*got += (size_t)n;
	}
}

/* An unlinked temporary file of len random bytes (seeded), also left in
 * data; its descriptor, or -1 after reporting why. */
static int random_file(unsigned char *data, size_t len, uint32_t seed)
{
	char path[] = "/tmp/sdp-sendfile-XXXXXX";
	prng_t r;
	prng_seed(&r, seed);
	prng_fill(&r, data, len);
	int fd = mkstemp(path);
	CHECK(fd >= 0, "mkstemp: %s", strerror(errno));
	unlink(path);
	CHECK(write(fd, data, len) == (ssize_t)len, "writing the file failed");
	return fd;
}

static int t_sendfile(void)
{
	enum { LEN = 3 << 20 };
	static unsigned char data[LEN];
	int fd = random_file(data, LEN, 11);
	if (fd < 0)
		return -1;
	for (int explicit_off = 0; explicit_off < 2; explicit_off++) {
		int c, s;
		PAIR(c, s);
		set_nonblock(c, 1);
		SYS(lseek(fd, 0, SEEK_SET));
		off_t off = 0;
		size_t sent = 0, got = 0;
		while (sent < LEN) {
			ssize_t n = sendfile(c, fd, explicit_off ? &off : NULL, LEN - sent);
			if (n < 0 && errno == EAGAIN) {
				if (sendfile_drain(s, data, &got, LEN) < 0)
					return -1;
				if (wait_ev(c, POLLOUT, 5000) & POLLOUT)
					continue;
				/* still full: the peer must read more */
				if (wait_ev(s, POLLIN, 5000) & POLLIN)
					continue;
				FAIL("sendfile: EAGAIN and nothing to read at %zu", sent);
			}
			CHECK(n > 0, "sendfile returned %zd (%s) after %zu bytes", n,
			      n < 0 ? strerror(errno) : "", sent);
			sent += (size_t)n;
			off_t pos = lseek(fd, 0, SEEK_CUR);
			if (explicit_off)
				CHECK(off == (off_t)sent && pos == 0,
				      "explicit offset: *offset %lld (want %zu), file position %lld (want 0)",
				      (long long)off, sent, (long long)pos);
			else
				CHECK(pos == (off_t)sent, "file position %lld after %zu bytes sent",
				      (long long)pos, sent);
		}
		while (got < LEN) {
			CHECK(wait_ev(s, POLLIN, 5000) & POLLIN, "receiver starved at %zu of %d", got, LEN);
			if (sendfile_drain(s, data, &got, LEN) < 0)
				return -1;
		}
		close(c);
		close(s);
	}
	close(fd);
	return 0;
}

/*
 * nginx's pattern on keep-alive requests: TCP_CORK on, the header by
 * write(), the body by sendfile() with an explicit offset (from the middle
 * of a file, an odd length), TCP_CORK off; five responses back to back on
 * a non-blocking socket.  Under the library the corked header is still
 * queued when the file is read straight into the peer's buffers, and must
 * lead them; every byte of the stream is checked.  Then sendfile() with an
 * offset from a pipe: ESPIPE, as the kernel says, and nothing sent.
 */
static int t_sendfile_corked(void)
{
	enum { FLEN = 300 << 10, HLEN = 321, BODY = FLEN - 1000 - 77, ROUNDS = 5 };
	enum { RESP = HLEN + BODY, TOTAL = ROUNDS * RESP };
	static unsigned char file[FLEN], want[TOTAL];
	int on = 1, off0 = 0, c, s, p[2];
	size_t got = 0;
	prng_t r;

	prng_seed(&r, 12);
	int fd = random_file(file, FLEN, 13);
	if (fd < 0)
		return -1;
	PAIR(c, s);
	set_nonblock(c, 1);
	for (int i = 0; i < ROUNDS; i++) {
		unsigned char *hdr = want + (size_t)i * RESP;
		off_t off = 1000 + i * 17;	/* differs per round */
		size_t sent = 0;

		prng_fill(&r, hdr, HLEN);
		memcpy(hdr + HLEN, file + off, BODY);
		SYS(setsockopt(c, IPPROTO_TCP, TCP_CORK, &on, sizeof on));
		CHECK(write(c, hdr, HLEN) == HLEN, "header write: %s", strerror(errno));
		while (sent < BODY) {
			ssize_t n = sendfile(c, fd, &off, BODY - sent);
			if (n < 0 && errno == EAGAIN) {
				if (sendfile_drain(s, want, &got, TOTAL) < 0)
					return -1;
				if (!(wait_ev(c, POLLOUT, 5000) & POLLOUT))
					CHECK(wait_ev(s, POLLIN, 5000) & POLLIN,
					      "sendfile: EAGAIN and nothing to read");
				continue;
			}
			CHECK(n > 0, "sendfile returned %zd (%s) at %zu of round %d", n,
			      n < 0 ? strerror(errno) : "", sent, i);
			sent += (size_t)n;
			CHECK(off == 1000 + i * 17 + (off_t)sent, "*offset %lld after %zu bytes",
			      (long long)off, sent);
		}
		SYS(setsockopt(c, IPPROTO_TCP, TCP_CORK, &off0, sizeof off0));
	}
	while (got < TOTAL) {
		CHECK(wait_ev(s, POLLIN, 5000) & POLLIN, "receiver starved at %zu of %d",
		      got, TOTAL);
		if (sendfile_drain(s, want, &got, TOTAL) < 0)
			return -1;
	}
	SYS(pipe(p));
	CHECK(write(p[1], "pipe", 4) == 4, "pipe write failed");
	off_t poff = 0;
	EXPECT_ERR(sendfile(c, p[0], &poff, 4), ESPIPE);
	char b;
	CHECK(recv(s, &b, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN,
	      "bytes arrived after a failed sendfile");
	close(p[0]);
	close(p[1]);
	close(c);
	close(s);
	close(fd);
	return 0;
}

static int t_readv_writev(void)
{
	int c, s;
	PAIR(c, s);
	char a[10], b[1000], d[5];
	memset(a, 'a', sizeof a);
	prng_t r;
	prng_seed(&r, 5);
	prng_fill(&r, b, sizeof b);
	memset(d, 'd', sizeof d);
	struct iovec wv[3] = { { a, sizeof a }, { b, sizeof b }, { d, sizeof d } };
	ssize_t n = writev(s, wv, 3);
	CHECK(n == 1015, "writev returned %zd (%s)", n, n < 0 ? strerror(errno) : "short");
	char x[7], y[8], z[1000];
	size_t got = 0;
	while (got < 1015) {
		/* readv into the remaining part of the three buffers */
		struct iovec rv[3];
		int cnt = 0;
		size_t off = got;
		char *bufs[3] = { x, y, z };
		size_t lens[3] = { sizeof x, sizeof y, sizeof z };
		for (int i = 0; i < 3; i++) {
			if (off >= lens[i]) {
				off -= lens[i];
				continue;
			}
			rv[cnt].iov_base = bufs[i] + off;
			rv[cnt].iov_len = lens[i] - off;
			cnt++;
			off = 0;
		}
		n = readv(c, rv, cnt);
		CHECK(n > 0, "readv returned %zd (%s)", n, n < 0 ? strerror(errno) : "EOF");
		got += (size_t)n;
	}
	char all_in[1015], all_out[1015];
	memcpy(all_in, a, 10);
	memcpy(all_in + 10, b, 1000);
	memcpy(all_in + 1010, d, 5);
	memcpy(all_out, x, 7);
	memcpy(all_out + 7, y, 8);
	memcpy(all_out + 15, z, 1000);
	CHECK(!memcmp(all_in, all_out, 1015), "readv/writev data mismatch");
	close(c);
	close(s);
	return 0;
}

static int t_sendmsg_recvmsg(void)
{
	int c, s;
	PAIR(c, s);
	char src[4][300];
	prng_t r;
	prng_seed(&r, 6);
	prng_fill(&r, src, sizeof src);
	struct iovec wv[4] = { { src[0], 1 }, { src[1], 300 }, { src[2], 17 }, { src[3], 250 } };
	struct msghdr mh = { .msg_iov = wv, .msg_iovlen = 4 };
	ssize_t n = sendmsg(s, &mh, MSG_NOSIGNAL);
	CHECK(n == 568, "sendmsg returned %zd (%s)", n, n < 0 ? strerror(errno) : "short");
	char exp[568];
	size_t o = 0;
	for (int i = 0; i < 4; i++) {
		memcpy(exp + o, wv[i].iov_base, wv[i].iov_len);
		o += wv[i].iov_len;
	}
	char out[568];
	size_t got = 0;
	while (got < 568) {
		size_t rem = 568 - got;
		size_t l0 = rem < 100 ? rem : 100;
		size_t l1 = rem - l0 < 3 ? rem - l0 : 3;
		struct iovec rv[3] = { { out + got, l0 }, { out + got + l0, l1 }, { out + got + l0 + l1, rem - l0 - l1 } };
		struct msghdr rh = { .msg_iov = rv, .msg_iovlen = 3 };
		n = recvmsg(c, &rh, 0);
		CHECK(n > 0, "recvmsg returned %zd (%s)", n, n < 0 ? strerror(errno) : "EOF");
		CHECK(!(rh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)), "recvmsg msg_flags 0x%x", rh.msg_flags);
		got += (size_t)n;
	}
	CHECK(!memcmp(out, exp, 568), "sendmsg/recvmsg data mismatch");
	close(c);
	close(s);
	return 0;
}

/* sendmmsg/recvmmsg on a stream: every entry's bytes, in order; the
 * counts and msg_len as the kernel reports them; MSG_WAITFORONE; EAGAIN
 * with nothing to read.  glibc calls the system call directly, so without
 * its own interposition a program's sendmmsg bypassed the library. */
static int t_mmsg(void)
{
	int c, s;
	PAIR(c, s);
	enum { N = 3, TOTAL = 1 + 4000 + 70000 };
	static char src[TOTAL], out[TOTAL];
	prng_t r;
	prng_seed(&r, 7);
	prng_fill(&r, src, sizeof src);
	size_t lens[N] = { 1, 4000, 70000 }, o = 0;
	struct iovec wv[N];
	struct mmsghdr wm[N];
	memset(wm, 0, sizeof wm);
	for (int i = 0; i < N; i++) {
		wv[i] = (struct iovec){ src + o, lens[i] };
		wm[i].msg_hdr.msg_iov = &wv[i];
		wm[i].msg_hdr.msg_iovlen = 1;
		o += lens[i];
	}
	char b;
	struct iovec one = { &b, 1 };
	struct mmsghdr rm1 = { .msg_hdr = { .msg_iov = &one, .msg_iovlen = 1 } };
	EXPECT_ERR(recvmmsg(c, &rm1, 1, MSG_DONTWAIT, NULL), EAGAIN);
	int n = sendmmsg(s, wm, N, MSG_NOSIGNAL);
	CHECK(n == N, "sendmmsg returned %d (%s)", n, n < 0 ? strerror(errno) : "short");
	for (int i = 0; i < N; i++)
		CHECK(wm[i].msg_len == lens[i], "sendmmsg entry %d: msg_len %u, sent %zu",
		      i, wm[i].msg_len, lens[i]);
	size_t got = 0;
	while (got < TOTAL) {
		/* Four entries of uneven sizes; the first may block, the
		 * others not (MSG_WAITFORONE). */
		struct iovec rv[4];
		struct mmsghdr rm[4];
		size_t want[4] = { 3, 1000, 9000, 65536 }, at = got;
		memset(rm, 0, sizeof rm);
		for (int i = 0; i < 4; i++) {
			size_t l = TOTAL - at < want[i] ? TOTAL - at : want[i];
			rv[i] = (struct iovec){ out + at, l };
			rm[i].msg_hdr.msg_iov = &rv[i];
			rm[i].msg_hdr.msg_iovlen = 1;
			at += l;
		}
		n = recvmmsg(c, rm, 4, MSG_WAITFORONE, NULL);
		CHECK(n >= 1, "recvmmsg returned %d (%s)", n, n < 0 ? strerror(errno) : "none");
		/* Entries are filled in order; only the last may be short. */
		for (int i = 0; i < n; i++) {
			CHECK(rm[i].msg_len <= rv[i].iov_len, "recvmmsg entry %d: msg_len %u", i,
			      rm[i].msg_len);
			CHECK(rv[i].iov_base == out + got, "recvmmsg entry %d is not where the "
			      "stream goes on", i);
			got += rm[i].msg_len;
			if (rm[i].msg_len < rv[i].iov_len)
				break;
		}
	}
	CHECK(!memcmp(out, src, TOTAL), "sendmmsg/recvmmsg data mismatch");
	close(c);
	close(s);
	return 0;
}

/* stdio on a socket: fdopen + fprintf/fgets, dprintf, fileno, fclose.
 * glibc's streams write with internal calls that bypass any preload, so
 * without the library's own fdopen the lines went to the descriptor's
 * kernel object instead of the connection (and the reader hung). */
static int t_stdio(void)
{
	int c, s;
	PAIR(c, s);
	FILE *w = fdopen(c, "w"), *r = fdopen(s, "r");
	CHECK(w && r, "fdopen: %s", strerror(errno));
	CHECK(fileno(w) == c && fileno(r) == s, "fileno %d/%d, descriptors %d/%d",
	      fileno(w), fileno(r), c, s);
	for (int i = 0; i < 500; i++)
		CHECK(fprintf(w, "line %d of the stream %08x\n", i, i * 2654435761u) > 0,
		      "fprintf: %s", strerror(errno));
	CHECK(fflush(w) == 0, "fflush: %s", strerror(errno));
	char line[128], want[128];
	for (int i = 0; i < 500; i++) {
		CHECK(fgets(line, sizeof line, r), "fgets of line %d: %s", i,
		      feof(r) ? "EOF" : strerror(errno));
		snprintf(want, sizeof want, "line %d of the stream %08x\n", i, i * 2654435761u);
		CHECK(!strcmp(line, want), "line %d reads '%s'", i, line);
	}
	CHECK(dprintf(c, "dprintf %d\n", 7) == 10, "dprintf: %s", strerror(errno));
	CHECK(fgets(line, sizeof line, r) && !strcmp(line, "dprintf 7\n"), "dprintf's line");
	CHECK(fclose(w) == 0, "fclose: %s", strerror(errno));
	CHECK(fgetc(r) == EOF && feof(r), "no EOF after the writer's fclose");
	fclose(r);
	return 0;
}

/* select/pselect/poll/ppoll with the socket under test and a kernel TCP
 * socket in the same set */

#endif /* SEMANTICS_CHECKS_OPTS_H */
