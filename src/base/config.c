/* SPDX-License-Identifier: MIT */
/*
 * config.c — tunables from the environment, parsed once.  A malformed value is
 * reported on stderr (naming the variable) and the default is kept: a typo
 * must never silently change behaviour nor stop the program.
 */
#include "base/config.h"
#include "policy/text.h"
#include "policy/destmemo.h"	/* defaults */
#include "base/real.h"

#include <errno.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { recv_bufs_default = 16, recv_buf_size_default = 32768 + 16 };

struct sdp_config sdp_cfg = {
	.recv_bufs = recv_bufs_default,
	.recv_buf_size = recv_buf_size_default,
	.sndbuf = 128 * 1024,
	.rcvbuf = 256 * 1024,
	.spin_us = 10,		/* measured: docs/BENCHMARKS.md */
	.nagle_us = 5000,
	.close_timeout_ms = 60000,
	.connect_timeout_ms = 10000,
	.close_flush_ms = 1000,
	.fork_claim_ms = 1000,
	.zcopy_thresh = 1048576,	/* measured crossover: docs/BENCHMARKS.md */
	.zcopy_adv_timeout_ms = 1000,	/* OFED SDP_SRCAVAIL_ADV_TIMEOUT */
	.zcopy_adverts = 8,		/* SDP_ZC_WINDOW */
	.zcopy_split = 0,
	.zcopy_write = 1,
	.appwake = 1,
	.short_conn = SDP_SHORT_RUN,
	.short_conn_ms = SDP_SHORT_LIFE_MS,
	.refused_hold_ms = SDP_REFUSED_HOLD_MS,
	.transport = "auto",
	.log_level = 0,
	.nofile = 65536,
	.epoll_fast = 1,
	.epoll_word = 1,
	.stat = 1,
	.verbs_ack_timeout = 16,	/* 268 ms per try */
	.verbs_rearm_ms = 10,		/* longer than a scheduler time slice */
	.verbs_spin_us = 200,
	.verbs_rdma_spin_us = 20000,
};

static pthread_once_t config_once = PTHREAD_ONCE_INIT;

/* Returns 1 if the variable was set and taken. */
int sdp_env_u32(const char *name, uint32_t *out, uint32_t min, uint32_t max)
{
	const char *s = getenv(name);
	char *end;
	unsigned long long v;

	if (!s || !*s)
		return 0;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *end || v < min || v > max) {
		char shown[128];

		fprintf(stderr, "libsdp: ignoring %s=\"%s\": expected an integer "
			"in [%u, %u]\n", name,
			sdp_text_escape(shown, sizeof(shown), s), min, max);
		return 0;
	}
	*out = (uint32_t)v;
	return 1;
}

/* Each is legal alone; together they size one connection's receive region,
 * which a transport maps whole. */
static void recv_region_check(void)
{
	uint64_t bytes = (uint64_t)sdp_cfg.recv_bufs * sdp_cfg.recv_buf_size;

	if (bytes <= SDP_RECV_REGION_MAX)
		return;
	fprintf(stderr, "libsdp: ignoring SDP_RECV_BUFS=%u and "
		"SDP_RECV_BUF_SIZE=%u: together they ask for %llu MiB of "
		"receive buffers per connection, more than %u MiB\n",
		sdp_cfg.recv_bufs, sdp_cfg.recv_buf_size,
		(unsigned long long)(bytes >> 20), SDP_RECV_REGION_MAX >> 20);
	sdp_cfg.recv_bufs = recv_bufs_default;
	sdp_cfg.recv_buf_size = recv_buf_size_default;
	sdp_cfg.recv_bufs_set = sdp_cfg.recv_buf_size_set = 0;
}

static void config_load(void)
{
	uint32_t lvl = 0;
	const char *t;

	sdp_cfg.recv_bufs_set =
		sdp_env_u32("SDP_RECV_BUFS", &sdp_cfg.recv_bufs, 4, 1024);
	sdp_cfg.recv_buf_size_set =
		sdp_env_u32("SDP_RECV_BUF_SIZE", &sdp_cfg.recv_buf_size, 1024,
			1u << 24);
	recv_region_check();
	sdp_env_u32("SDP_SNDBUF", &sdp_cfg.sndbuf, 4096, 1u << 30);
	sdp_env_u32("SDP_RCVBUF", &sdp_cfg.rcvbuf, 4096, 1u << 30);
	sdp_env_u32("SDP_SPIN_US", &sdp_cfg.spin_us, 0, 1000000);
	sdp_env_u32("SDP_NAGLE_US", &sdp_cfg.nagle_us, 0, 1000000);
	sdp_env_u32("SDP_CLOSE_TIMEOUT_MS", &sdp_cfg.close_timeout_ms, 1, 3600000);
	sdp_env_u32("SDP_CONNECT_TIMEOUT_MS", &sdp_cfg.connect_timeout_ms, 1,
		    3600000);
	sdp_env_u32("SDP_CLOSE_FLUSH_MS", &sdp_cfg.close_flush_ms, 0, 60000);
	sdp_env_u32("SDP_FORK_CLAIM_MS", &sdp_cfg.fork_claim_ms, 0, 60000);
	sdp_env_u32("SDP_ZCOPY_THRESH", &sdp_cfg.zcopy_thresh, 0, 0x7fffffff);
	sdp_env_u32("SDP_ZCOPY_ADV_TIMEOUT_MS", &sdp_cfg.zcopy_adv_timeout_ms, 1,
		3600000);
	sdp_env_u32("SDP_ZCOPY_ADVERTS", &sdp_cfg.zcopy_adverts, 1, 8);
	sdp_env_u32("SDP_ZCOPY_SPLIT", &sdp_cfg.zcopy_split, 0, 1u << 30);
	sdp_env_u32("SDP_ZCOPY_WRITE", &sdp_cfg.zcopy_write, 0, 1);
	sdp_env_u32("SDP_APPWAKE", &sdp_cfg.appwake, 0, 1);
	sdp_env_u32("SDP_SHORT_CONN", &sdp_cfg.short_conn, 0, 1000000);
	sdp_env_u32("SDP_SHORT_CONN_MS", &sdp_cfg.short_conn_ms, 1, 3600000);
	sdp_env_u32("SDP_REFUSED_HOLD_MS", &sdp_cfg.refused_hold_ms, 0, 3600000);
	sdp_env_u32("SDP_NOFILE", &sdp_cfg.nofile, 0, 1u << 30);
	sdp_env_u32("SDP_EPOLL_FAST", &sdp_cfg.epoll_fast, 0, 1);
	sdp_env_u32("SDP_EPOLL_WORD", &sdp_cfg.epoll_word, 0, 1);
	sdp_env_u32("SDP_STAT", &sdp_cfg.stat, 0, 1);
	sdp_env_u32("SDP_VERBS_ACK_TIMEOUT", &sdp_cfg.verbs_ack_timeout, 1, 31);
	sdp_env_u32("SDP_VERBS_REARM_MS", &sdp_cfg.verbs_rearm_ms, 0, 10000);
	sdp_env_u32("SDP_VERBS_SPIN_US", &sdp_cfg.verbs_spin_us, 0, 1000000);
	sdp_env_u32("SDP_VERBS_RDMA_SPIN_US", &sdp_cfg.verbs_rdma_spin_us, 0,
		    1000000);
	t = getenv("SDP_SWITCH");
	sdp_cfg.switch_off = t && (!strcmp(t, "0") || !strcmp(t, "off"));
	sdp_cfg.simple = getenv("SIMPLE_LIBSDP") || getenv("ALWAYS_USE_SDP");
	sdp_env_u32("SDP_LOG", &lvl, 0, 3);
	sdp_cfg.log_level = (int)lvl;
	t = getenv("SDP_TRANSPORT");
	if (t && *t) {
		/* One of ours, not the environment's string: a later
		 * setenv() may free that. */
		if (!strcmp(t, "shm"))
			sdp_cfg.transport = "shm";
		else if (!strcmp(t, "verbs"))
			sdp_cfg.transport = "verbs";
		else if (!strcmp(t, "auto"))
			sdp_cfg.transport = "auto";
		else
			fprintf(stderr, "libsdp: ignoring SDP_TRANSPORT=\"%s\": "
				"expected auto, shm or verbs\n", t);
	}
}

void sdp_config_init(void)
{
	pthread_once(&config_once, config_load);
}

static int (*_Atomic stderr_check)(void);

void sdp_log_set_stderr_check(int (*stderr_is_connection)(void))
{
	atomic_store(&stderr_check, stderr_is_connection);
}

void sdp_log(int level, const char *fmt, ...)
{
	int (*is_connection)(void);
	char buf[512];
	va_list ap;
	int n, saved = errno;

	if (level > sdp_cfg.log_level)
		goto out;
	is_connection = atomic_load(&stderr_check);
	if (is_connection && is_connection())
		goto out;
	n = snprintf(buf, sizeof(buf), "libsdp[%d]: ", (int)getpid());
	va_start(ap, fmt);
	n += vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	/* write(2) directly: never recurse into interposed stdio paths. */
	if (sdp_real.write(2, buf, (size_t)n) < 0) {
		/* nothing sensible to do */
	}
out:
	errno = saved;
}
