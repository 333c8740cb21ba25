/* SPDX-License-Identifier: MIT */
/*
 * libsdp public header: Sockets Direct Protocol sockets for ordinary programs.
 *
 * A program linked with -lsdp, or started with LD_PRELOAD=libsdp.so (sdp_run),
 * creates an SDP socket with socket(AF_INET_SDP, SOCK_STREAM, 0) (or
 * AF_INET6_SDP) and then uses the ordinary socket calls with ordinary
 * sockaddr_in / sockaddr_in6 addresses.
 */
#ifndef SDP_SDP_H
#define SDP_SDP_H

/* Address families of the classic Linux SDP stack (ib_sdp). */
#define AF_INET_SDP 27
#define PF_INET_SDP AF_INET_SDP
#define AF_INET6_SDP 28
#define PF_INET6_SDP AF_INET6_SDP

/* setsockopt/getsockopt(SOL_TCP, ...) options, numbered as in ib_sdp. */
#define SDP_ZCOPY_THRESH 80	/* int: 0 = ZCopy off, else smallest ZCopy size */
#define SDP_LAST_BIND_ERR 81	/* int, get only: last transport bind result */
/* get only, struct sdp_zcopy_stats: ZCopy counters of a connected socket
 * (ENOTCONN otherwise); a shorter optlen gets a prefix. */
#define SDP_ZCOPY_STATS 82
/* int, get only: which transport carries this socket: SDP_TRANSPORT_SHM,
 * _LOOP or _VERBS; a kernel TCP socket answers ENOPROTOOPT.  Lets tests and
 * tools tell whether the socket switch sent a connection over SDP. */
#define SDP_CONN_TRANSPORT 90
#define SDP_TRANSPORT_SHM 1
#define SDP_TRANSPORT_LOOP 2
#define SDP_TRANSPORT_VERBS 3

#include <stdint.h>

struct sdp_zcopy_stats {
	uint64_t tx_adverts;	/* SrcAvail sent (ZCopy sends started) */
	uint64_t tx_bytes;	/* bytes the peer RDMA-read from our buffers */
	uint64_t tx_declined;	/* SendSm: the peer declined / acked a cancel */
	uint64_t tx_cancels;	/* SrcAvailCancel sent (signal, timeout) */
	uint64_t rx_adverts;	/* SrcAvail received */
	uint64_t rx_bytes;	/* bytes RDMA-read into our recv buffers */
	uint64_t rx_declined;	/* SendSm sent */
	uint32_t thresh;	/* SDP_ZCOPY_THRESH in effect (0 = off) */
	uint32_t rdma;		/* 1 if the transport can RDMA on this conn */
	/* Write ZCopy (SinkAvail / RDMA WRITE), counted apart from the
	 * Read ZCopy above. */
	uint64_t wr_sink_adverts; /* SinkAvail sent: recv buffers advertised */
	uint64_t wr_rx_bytes;	/* bytes the peer RDMA-wrote into them */
	uint64_t wr_sink_cancels; /* SinkAvailCancel sent (signal, timeout) */
	uint64_t wr_sink_unused; /* our SinkAvails that ended with no bytes */
	uint64_t wr_src_adverts; /* peer SinkAvails accepted */
	uint64_t wr_tx_bytes;	/* bytes we RDMA-wrote into the peer's */
	uint64_t wr_src_unused;	/* peer SinkAvails dropped unused (stale,
				 * superseded by BCopy, cancelled) */
	uint64_t mode_changes;	/* ModeChange messages sent */
	uint32_t tx_mode;	/* our send half: 0 Buffered, 1 Combined, */
	uint32_t rx_mode;	/* 2 Pipelined; rx = the peer's send half */
	/* Several advertisements at once (Pipelined mode). */
	uint64_t tx_adverts_peak; /* most of our SrcAvails outstanding */
	uint64_t rx_adverts_peak; /* most peer SrcAvails held at once */
	uint32_t peer_max_adverts; /* MaxAdverts the peer announced */
	uint32_t max_adverts;	/* MaxAdverts we announced */
};

#ifdef __cplusplus
extern "C" {
#endif

/* Library version string, e.g. "0.1.0". */
const char *sdp_version(void);

#ifdef __cplusplus
}
#endif

#endif /* SDP_SDP_H */
