/* SPDX-License-Identifier: MIT */
/*
 * sdp_sandbox — a child that serves a connection from inside a seccomp
 * sandbox, as OpenSSH's preauth child does: the server accepts, uses the
 * connection (so that its process drives it), forks, and keeps its copy;
 * the child installs a filter that allows little more than read, write and
 * poll (anything else kills it with SIGSYS), then reads the client's first
 * request on the inherited descriptor and answers it.  The client sent its
 * second request with the first, in one write: the child leaves it unread,
 * and the server, once the child is gone, finds it on its own descriptor
 * and answers it (one receive queue for every holder, as on TCP).  Every
 * answer is checksummed by the client.
 *   --filter prctl | seccomp: how the filter goes in (prctl(PR_SET_SECCOMP)
 *   as OpenSSH does, or the seccomp(2) system call); nofile: no filter, the
 *   child's descriptor limit goes to 0 instead (setrlimit), as vsftpd's
 *   unprivileged session child does: it can open nothing any more.
 * Usage: sdp_sandbox --family sdp|sdp6|tcp|tcp6 [--filter prctl|seccomp|nofile]
 */
#include "itest_common.h"

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#define REQ1 3000
#define REQ2 70000
#define ANS 100000

static int use_seccomp_call, use_nofile;

/* The allowed calls: what a preauth child does with its socket and its
 * memory.  Everything else: the process dies (SIGSYS). */
static void enter_sandbox(void)
{
#define ALLOW(nr) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), \
		  BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		ALLOW(SYS_read), ALLOW(SYS_write), ALLOW(SYS_readv), ALLOW(SYS_writev),
		ALLOW(SYS_recvfrom), ALLOW(SYS_sendto), ALLOW(SYS_poll), ALLOW(SYS_ppoll),
		ALLOW(SYS_futex), ALLOW(SYS_brk), ALLOW(SYS_mmap), ALLOW(SYS_munmap),
		ALLOW(SYS_mprotect), ALLOW(SYS_clock_gettime), ALLOW(SYS_getpid),
		ALLOW(SYS_rt_sigreturn), ALLOW(SYS_rt_sigprocmask), ALLOW(SYS_exit),
		ALLOW(SYS_exit_group),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
	};
	struct sock_fprog prog = { sizeof(f) / sizeof(f[0]), f };
	struct rlimit none = { 0, 0 };

	if (use_nofile) {
		if (setrlimit(RLIMIT_NOFILE, &none) < 0)
			DIE_ERRNO("setrlimit(RLIMIT_NOFILE, 0)");
		return;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		DIE_ERRNO("prctl(PR_SET_NO_NEW_PRIVS)");
	if (use_seccomp_call ?
	    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0 :
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) < 0)
		DIE_ERRNO("installing the seccomp filter");
}

/* Read a request of `len` pattern bytes (seed), answer its checksum and
 * `ANS` bytes of pattern (seed + 1). */
static void serve(int fd, size_t len, uint64_t seed, const char *who)
{
	static unsigned char buf[REQ2 > ANS ? REQ2 : ANS];
	prng_t r;
	uint64_t sum;

	if (read_full(fd, buf, len, who) != len)
		die("%s: EOF inside the request", who);
	sum = csum_buf(buf, len);
	prng_seed(&r, seed + 1);
	prng_fill(&r, buf, ANS);
	write_full(fd, &sum, sizeof(sum), who);
	write_full(fd, buf, ANS, who);
}

static int client(uint16_t port, void *arg)
{
	static unsigned char req[REQ1 + REQ2], ans[ANS], want[ANS];
	uint64_t sum, seeds[2] = { 11, 22 };
	size_t lens[2] = { REQ1, REQ2 };
	prng_t r;
	int fd, i;

	(void)arg;
	g_prog = "sdp_sandbox/client";
	watchdog_arm(60, "client");
	fd = connect_to(port);
	check_transport(fd, "client");
	/* A byte first: the server's process takes the connection on. */
	write_full(fd, "!", 1, "client: hello");
	if (read_full(fd, req, 1, "client: hello back") != 1)
		die("client: no hello back");
	prng_seed(&r, seeds[0]);
	prng_fill(&r, req, REQ1);
	prng_seed(&r, seeds[1]);
	prng_fill(&r, req + REQ1, REQ2);
	write_full(fd, req, sizeof(req), "client: both requests");
	for (i = 0; i < 2; i++) {
		if (read_full(fd, &sum, sizeof(sum), "client: checksum") != sizeof(sum))
			die("client: answer %d: EOF", i + 1);
		if (sum != csum_buf(req + (i ? REQ1 : 0), lens[i]))
			die("client: answer %d: the server read other bytes", i + 1);
		if (read_full(fd, ans, ANS, "client: answer") != ANS)
			die("client: answer %d: EOF inside", i + 1);
		prng_seed(&r, seeds[i] + 1);
		prng_fill(&r, want, ANS);
		if (memcmp(ans, want, ANS))
			die("client: answer %d corrupt", i + 1);
	}
	if (read_full(fd, ans, 1, "client: EOF") != 0)
		die("client: bytes after the last answer");
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	uint16_t port;
	child_t cl;
	int i, l, s, st;
	char c;
	pid_t ch;

	g_prog = "sdp_sandbox";
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--family") && i + 1 < argc) {
			if (set_family(argv[++i]))
				die("bad --family %s", argv[i]);
		} else if (!strcmp(argv[i], "--filter") && i + 1 < argc) {
			use_seccomp_call = !strcmp(argv[++i], "seccomp");
			use_nofile = !strcmp(argv[i], "nofile");
		} else {
			die("usage: sdp_sandbox %s [--filter prctl|seccomp|nofile]", family_usage());
		}
	}
	watchdog_arm(60, "sandbox test");
	cl = spawn_connector(client, NULL);
	l = make_listener(&port, 4);
	child_go(&cl, port);
	s = accept_one(l);
	check_transport(s, "accept");
	if (read_full(s, &c, 1, "server: hello") != 1)
		die("server: no hello");
	write_full(s, &c, 1, "server: hello back");
	fflush(NULL);
	ch = fork();
	if (ch < 0)
		DIE_ERRNO("fork");
	if (ch == 0) {
		g_prog = "sdp_sandbox/sandboxed child";
		close(l);
		enter_sandbox();
		serve(s, REQ1, 11, "sandboxed child");
		syscall(SYS_exit_group, 0);
	}
	if (waitpid(ch, &st, 0) != ch)
		DIE_ERRNO("waitpid(sandboxed child)");
	if (WIFSIGNALED(st))
		die("the sandboxed child was killed by signal %d%s", WTERMSIG(st),
		    WTERMSIG(st) == SIGSYS ? " (SIGSYS: a system call its filter forbids)" : "");
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		die("the sandboxed child failed (status %#x)", st);
	/* The second request waited in the queue all holders share. */
	serve(s, REQ2, 22, "server after the child");
	close(s);
	close(l);
	if (wait_child(cl.pid, "client"))
		die("the client failed");
	info("PASS: a sandboxed child served the connection it inherited "
	     "(%s); the server then served what the child left unread",
	     use_nofile ? "no descriptors left" : use_seccomp_call ?
	     "filter by seccomp(2)" : "filter by prctl");
	return 0;
}
