/* SPDX-License-Identifier: MIT */
/*
 * sdp_semantics: a battery of single-behaviour socket checks, written against
 * Linux TCP semantics, reported as TAP ("ok N - name" / "not ok N - name:
 * detail").  Exit status 0 only if every check passed.
 *
 *   sdp_semantics --family sdp|sdp6|tcp|tcp6 [--list] [--only REGEX-SUBSTRING]
 *
 * Every check has a 10 s hang guard (a hang fails that check and ends the
 * run).  Peers run in the same process (threads) unless stated otherwise.
 */
#include "itest_common.h"

#include <dirent.h>
#include <regex.h>
#include <sys/stat.h>
#include <sys/epoll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <linux/sockios.h>

#include "../busy_cpu.h"
#include "semantics/harness.h"
#include "semantics/checks_conn.h"
#include "semantics/checks_opts.h"
#include "semantics/checks_events.h"
#include "semantics/checks_misc.h"
#include "semantics/checks_epfast.h"
#include "semantics/checks_cancel.h"

/* ============================ driver ====================================== */

/* Run one check in a forked child so that a crash or hang fails only that
 * check; the detail string comes back through a pipe. */
static int run_forked(int (*fn)(void))
{
	int p[2];
	if (pipe(p) < 0)
		DIE_ERRNO("pipe");
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		DIE_ERRNO("fork");
	if (pid == 0) {
		close(p[0]);
		int rc = fn();
		size_t len = strlen(detail);
		if (write(p[1], detail, len) != (ssize_t)len)
			_exit(3);
		fflush(NULL);
		_exit(rc == 0 ? 0 : rc == T_SKIP ? T_SKIP : 1);
	}
	close(p[1]);
	double mult = 1.0;
	const char *m = getenv("SDP_TEST_TIMEOUT_MULT");
	if (m && atof(m) > 0)
		mult = atof(m);
	double deadline = now_sec() + 10.0 * mult;
	size_t got = 0;
	int hung = 0;
	char buf[sizeof detail];
	for (;;) {
		double left = deadline - now_sec();
		if (left <= 0) {
			hung = 1;
			break;
		}
		struct pollfd pf = { .fd = p[0], .events = POLLIN };
		int k = poll(&pf, 1, (int)(left * 1000) + 1);
		if (k < 0 && errno == EINTR)
			continue;
		if (k == 0)
			continue;
		ssize_t n = read(p[0], buf + got, sizeof buf - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
		if (got == sizeof buf - 1)
			break;
	}
	buf[got] = 0;
	close(p[0]);
	if (hung)
		kill(pid, SIGKILL);
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (hung) {
		snprintf(detail, sizeof detail, "hung for %.0f s (killed)", 10.0 * mult);
		return -1;
	}
	memcpy(detail, buf, got + 1);
	if (WIFSIGNALED(st)) {
		snprintf(detail, sizeof detail, "crashed with signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
		return -1;
	}
	if (WEXITSTATUS(st) == 0)
		return 0;
	if (WEXITSTATUS(st) == T_SKIP)
		return T_SKIP;
	if (!detail[0])
		snprintf(detail, sizeof detail, "exited with status %d", WEXITSTATUS(st));
	return -1;
}

static const struct {
	const char *name;
	int (*fn)(void);
} tests[] = {
	{ "socket_type_and_unconnected_errors", t_socket_type },
	{ "econnrefused", t_econnrefused },
	{ "eaddrinuse_double_bind", t_eaddrinuse },
	{ "listen_on_client_port", t_listen_on_client_port },
	{ "dual_stack_v6only", t_dual_stack_v6only },
	{ "other_family_address", t_other_family_address },
	{ "ephemeral_port", t_ephemeral },
	{ "getsockname_getpeername", t_names },
	{ "nonblocking_connect", t_nonblock_connect },
	{ "blocking_connect_wakes_caller_alone", t_blocking_connect_wakes_caller_alone },
	{ "blocking_connect_interrupted", t_blocking_connect_interrupted },
	{ "connect_again_after_change", t_connect_again_after_change },
	{ "nonblocking_recv_eagain", t_nonblock_recv },
	{ "msg_peek", t_msg_peek },
	{ "msg_waitall", t_msg_waitall },
	{ "msg_dontwait", t_msg_dontwait },
	{ "recv_after_peer_close", t_recv_after_close },
	{ "raw_syscall_close", t_raw_syscall_close },
	{ "epipe_with_msg_nosignal", t_epipe_nosignal },
	{ "sigpipe_without_msg_nosignal", t_sigpipe },
	{ "so_rcvbuf_so_sndbuf", t_so_bufs },
	{ "so_reuseaddr", t_so_reuseaddr },
	{ "so_keepalive", t_so_keepalive },
	{ "listener_out_of_descriptors", t_listener_out_of_fds },
	{ "so_bindtodevice_unbound", t_so_bindtodevice },
	{ "tcp_nodelay", t_tcp_nodelay },
	{ "tcp_cork", t_tcp_cork },
	{ "fionread", t_fionread },
	{ "fionbio", t_fionbio },
	{ "fcntl_nonblock_cloexec", t_fcntl },
	{ "readv_writev", t_readv_writev },
	{ "sendfile_nonblocking_offsets", t_sendfile },
	{ "sendfile_corked_header_keepalive", t_sendfile_corked },
	{ "sendmsg_recvmsg_iovecs", t_sendmsg_recvmsg },
	{ "sendmmsg_recvmmsg", t_mmsg },
	{ "stdio_fdopen_dprintf", t_stdio },
	{ "select_pselect_poll_ppoll_mixed_with_tcp", t_multiplex },
	{ "first_wait_after_blocking_io", t_first_wait_after_blocking_io },
	{ "first_wait_sees_state", t_first_wait_sees_state },
	{ "first_wait_after_unannounced_arrival", t_first_wait_after_unannounced_arrival },
	{ "first_wait_out_of_descriptors", t_first_wait_out_of_descriptors },
	{ "blocking_pingpong_wakes_no_one_else", t_blocking_pingpong_wakes_no_one_else },
	{ "pingpong_beside_a_busy_cpu", t_pingpong_beside_a_busy_cpu },
	{ "epoll_oneshot_rearm", t_epoll_oneshot },
	{ "epoll_edge_triggered", t_epoll_et },
	{ "epfast_level_triggered", t_epfast_level },
	{ "epfast_pingpong_level", t_epfast_pingpong_level },
	{ "epfast_pingpong_edge", t_epfast_pingpong_edge },
	{ "epfast_poll_after_epoll", t_epfast_poll_after_epoll },
	{ "epfast_nested", t_epfast_nested },
	{ "epoll_add_while_another_thread_sleeps", t_epoll_add_while_asleep },
	{ "epfast_idle_cpu", t_epfast_idle_cpu },
	{ "epfast_cancelled_sleep", t_epfast_cancelled },
	{ "cancel_blocked_calls", t_cancel_blocked },
	{ "listener_shutdown_wakes_accept", t_listener_shutdown },
	{ "recv_eintr", t_eintr },
	{ "so_rcvtimeo", t_rcvtimeo },
	{ "oob_urgent_data", t_oob },
	{ "oob_inline", t_oob_inline },
	{ "ipv6_loopback", t_ipv6 },
	{ "listen_backlog_pending_connects", t_backlog },
	{ "listener_first_wait_sees_queue", t_listener_first_wait },
	{ "connect_burst_past_backlog", t_connect_burst },
	{ "accept4_nonblock_cloexec", t_accept4 },
	{ "shutdown_rd", t_shutdown_rd },
	{ "shutdown_rdwr", t_shutdown_rdwr },
	{ "two_threads_read_write", t_two_threads },
	{ "dup_dup2", t_dup },
	{ "close_everything_but_mine", t_close_everything },
	{ "vfork_child_closes", t_vfork_child_closes },
	{ "fork_inherit_connected", t_fork_inherit },
	{ "raw_clone_child_serves", t_raw_clone_child },
	{ "passed_to_another_process", t_passed_to_another_process },
};

int main(int argc, char **argv)
{
	g_prog = "sdp_semantics";
	setvbuf(stdout, NULL, _IOLBF, 0);
	const char *only = NULL, *skip = NULL;
	int list = 0, no_fork = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--family") && i + 1 < argc) {
			if (set_family(argv[++i]))
				die("bad family '%s'", argv[i]);
		} else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
			only = argv[++i];
		} else if (!strcmp(argv[i], "--skip") && i + 1 < argc) {
			skip = argv[++i];
		} else if (!strcmp(argv[i], "--no-fork")) {
			no_fork = g_no_fork = 1;
		} else if (!strcmp(argv[i], "--list")) {
			list = 1;
		} else {
			fprintf(stderr, "usage: sdp_semantics %s [--only REGEX] [--skip REGEX] [--list] [--no-fork]\n", family_usage());
			return 2;
		}
	}
	size_t ntests = sizeof tests / sizeof tests[0];
	if (list) {
		for (size_t i = 0; i < ntests; i++)
			printf("%s\n", tests[i].name);
		return 0;
	}
	regex_t re;
	regex_t skip_re;
	if (only && regcomp(&re, only, REG_EXTENDED | REG_NOSUB))
		die("bad --only regex");
	if (skip && regcomp(&skip_re, skip, REG_EXTENDED | REG_NOSUB))
		die("bad --skip regex");
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_sigpipe;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGPIPE, &sa, NULL);

	size_t planned = 0;
	for (size_t i = 0; i < ntests; i++)
		if (!only || !regexec(&re, tests[i].name, 0, NULL, 0))
			planned++;
	printf("# sdp_semantics, family %s (socket domain %d)\n", g_family_name, g_domain);
	printf("1..%zu\n", planned);
	for (size_t i = 0; i < ntests; i++) {
		if (only && regexec(&re, tests[i].name, 0, NULL, 0))
			continue;
		cur_name = tests[i].name;
		detail[0] = 0;
		t_num++;
		if (skip && !regexec(&skip_re, tests[i].name, 0, NULL, 0)) {
			printf("ok %d - %s # SKIP excluded by --skip\n", t_num, cur_name);
			t_skip++;
			continue;
		}
		int rc;
		if (no_fork) {
			watchdog_arm(10, "not ok %d - %s: hung for 10 s", t_num, cur_name);
			rc = tests[i].fn();
			watchdog_disarm();
		} else {
			rc = run_forked(tests[i].fn);
		}
		if (rc == 0) {
			printf("ok %d - %s\n", t_num, cur_name);
		} else if (rc == T_SKIP) {
			printf("ok %d - %s # SKIP %s\n", t_num, cur_name, detail);
			t_skip++;
		} else {
			printf("not ok %d - %s: %s\n", t_num, cur_name, detail);
			t_fail++;
		}
	}
	printf("# %d tests, %d failed, %d skipped\n", t_num, t_fail, t_skip);
	return t_fail ? 1 : 0;
}
