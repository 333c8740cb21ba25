/* SPDX-License-Identifier: MIT */
/*
 * config.h — process-wide tunables, read once from the environment.
 * Every variable is documented in README.md ("Environment variables").
 */
#ifndef SDP_BASE_CONFIG_H
#define SDP_BASE_CONFIG_H

#include <stdint.h>

/* Most bytes of private receive buffers one connection may ask for (the shm
 * transport's region limit): SDP_RECV_BUFS x SDP_RECV_BUF_SIZE beyond it is
 * refused at start, naming both. */
#define SDP_RECV_REGION_MAX	(1u << 30)

struct sdp_config {
	uint32_t recv_bufs;	/* SDP_RECV_BUFS: private receive buffers per conn */
	uint32_t recv_buf_size;	/* SDP_RECV_BUF_SIZE: bytes per buffer, BSDH incl. */
	/* Set by the environment: then they override the transport's own
	 * preference (transport.h recv_bufs_pref). */
	uint8_t recv_bufs_set, recv_buf_size_set;
	/* recv_bufs * recv_buf_size stays within SDP_RECV_REGION_MAX. */
	uint32_t sndbuf;	/* SDP_SNDBUF: default send queue bytes */
	uint32_t rcvbuf;	/* SDP_RCVBUF: reported SO_RCVBUF default */
	uint32_t spin_us;	/* SDP_SPIN_US: busy-poll before sleeping */
	uint32_t nagle_us;	/* SDP_NAGLE_US: max hold time of a small send */
	uint32_t close_timeout_ms; /* SDP_CLOSE_TIMEOUT_MS: orphan FIN_WAIT limit */
	uint32_t connect_timeout_ms; /* SDP_CONNECT_TIMEOUT_MS: handshake limit */
	uint32_t close_flush_ms; /* SDP_CLOSE_FLUSH_MS: close() waits for the queue */
	uint32_t fork_claim_ms;	/* SDP_FORK_CLAIM_MS: how long a process waits
				 * for a busy owner to hand a connection over */
	uint32_t zcopy_thresh;	/* SDP_ZCOPY_THRESH: default ZCopy threshold, 0 off */
	uint32_t zcopy_adv_timeout_ms; /* SDP_ZCOPY_ADV_TIMEOUT_MS: cancel an
				 * unanswered SrcAvail after this long */
	uint32_t zcopy_adverts;	/* SDP_ZCOPY_ADVERTS: most SrcAvails one send()
				 * keeps outstanding in Pipelined mode (1..8) */
	uint32_t zcopy_split;	/* SDP_ZCOPY_SPLIT: advertise a large buffer in
				 * pieces of this many bytes (0 = whole) */
	uint32_t zcopy_write;	/* SDP_ZCOPY_WRITE: 1 = a large blocking recv
				 * may advertise SinkAvail (Write ZCopy) */
	uint32_t appwake;	/* SDP_APPWAKE: 1 = the peer may wake an
				 * epoll-driven application directly */
	uint32_t short_conn;	/* SDP_SHORT_CONN: this many short-lived
				 * connections in a row to a destination that
				 * takes TCP too send the next ones over TCP
				 * for a while (policy/destmemo.h); 0 off */
	uint32_t short_conn_ms;	/* SDP_SHORT_CONN_MS: "short-lived" */
	uint32_t refused_hold_ms; /* SDP_REFUSED_HOLD_MS: a destination
				 * with no SDP listener but a TCP one gets
				 * TCP connects this long (policy/destmemo.h);
				 * 0 off */
	const char *transport;	/* SDP_TRANSPORT: "auto" (default), "shm", "verbs" */
	int log_level;		/* SDP_LOG: 0 silent .. 3 debug */
	uint32_t nofile;	/* SDP_NOFILE: raise RLIMIT_NOFILE's soft limit
				 * to this (0 = leave it), socket/fdlimit.c */
	uint32_t epoll_fast;	/* SDP_EPOLL_FAST: epoll looks at SDP
				 * connections in user space first */
	uint32_t epoll_word;	/* SDP_EPOLL_WORD: a sleeping epoll set tells
				 * its peers with one shared word */
	uint32_t stat;		/* SDP_STAT: publish sockets for sdpstat */
	uint8_t switch_off;	/* SDP_SWITCH=off or 0: TCP sockets stay TCP */
	uint8_t simple;		/* SIMPLE_LIBSDP or ALWAYS_USE_SDP: every TCP
				 * socket is SDP */
	/* The verbs transport (transport/verbs/verbs_dev.c). */
	uint32_t verbs_ack_timeout;	/* SDP_VERBS_ACK_TIMEOUT: the QP's local
					 * ACK timeout exponent */
	uint32_t verbs_rearm_ms;	/* SDP_VERBS_REARM_MS: the shared CQ stays
					 * unarmed after an application poll */
	uint32_t verbs_spin_us;		/* SDP_VERBS_SPIN_US: poll before sleeping */
	uint32_t verbs_rdma_spin_us;	/* SDP_VERBS_RDMA_SPIN_US: wait_rdma()'s
					 * poll per transfer at most */
};

extern struct sdp_config sdp_cfg;

/* Idempotent, thread-safe. */
void sdp_config_init(void);

/* `name` from the environment into *out when it is an integer in
 * [min, max] (1); unset or empty: 0, *out untouched; anything else is
 * reported on stderr, naming the variable, and *out is left alone (0). */
int sdp_env_u32(const char *name, uint32_t *out, uint32_t min, uint32_t max);

/* A line on stderr, "libsdp[PID]: ...", when `level` is enabled (SDP_LOG),
 * unless stderr is a network connection (below). */
void sdp_log(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Set by the socket layer: true when descriptor 2 is a connection to a
 * peer (inetd-style servers, vsftpd's session child), where a log line
 * would be read by the client as protocol bytes.  Such lines are dropped. */
void sdp_log_set_stderr_check(int (*stderr_is_connection)(void));

#define SDP_LOG_ERR 1
#define SDP_LOG_INFO 2
#define SDP_LOG_DEBUG 3

#endif
