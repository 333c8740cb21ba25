/* SPDX-License-Identifier: MIT */
/*
 * stats_layout.h — the layout of a process's socket statistics file,
 * /dev/shm/libsdp-stat.<pid>: the contract between the publisher inside
 * libsdp (engine/stats_shm.c) and tools/sdpstat.c, which does not link
 * libsdp and includes only this header.  Change anything here and bump
 * SDP_STAT_VERSION: sdpstat skips files of another version.
 *
 * The file is a header page followed by a fixed array of records.  It is
 * created sparse, so only the pages of records ever used take memory, and
 * readers look only at records below `high_water`.
 *
 * Consistency: each record has a seqlock word.  The (single, serialised)
 * writer makes `seq` odd, stores the fields, and makes it even again; a
 * reader copies the record and retries if `seq` was odd or changed.  No
 * system call on either side.
 *
 * Freshness: the publisher does not rewrite records on every send.  A
 * reader that wants fresh numbers stores a CLOCK_MONOTONIC deadline in
 * `want_until_ns` and sends one datagram to the abstract Unix socket
 * "\0libsdp-stat.<pid>" (SDP_STAT_WAKE_FMT) to wake the process's progress
 * thread; the thread refreshes at once, then every SDP_STAT_REFRESH_MS
 * until the deadline, and records when in `refreshed_ns`.  With nobody
 * asking, nothing runs.
 *
 * Permissions: the file is created 0600 by the process's effective uid,
 * so only that user and root see its connections (addresses and program
 * names are not for other users).  The wake socket's name is open to every
 * user: a datagram counts only from the file's user or root, and the work
 * datagrams cause is bounded (stats_shm.c).
 */
#ifndef SDP_STATS_LAYOUT_H
#define SDP_STATS_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#define SDP_STAT_DIR "/dev/shm"
#define SDP_STAT_PREFIX "libsdp-stat."	/* followed by the decimal pid */
#define SDP_STAT_WAKE_FMT "libsdp-stat.%d" /* abstract socket, after '\0' */
#define SDP_STAT_MAGIC 0x54534453u	/* "SDST" little-endian */
#define SDP_STAT_VERSION 3u
#define SDP_STAT_NSLOTS 16384u		/* records per file (sparse) */
#define SDP_STAT_REFRESH_MS 200u

struct sdp_stat_hdr {
	uint32_t magic;			/* SDP_STAT_MAGIC once initialised */
	uint32_t version;		/* SDP_STAT_VERSION */
	uint32_t hdr_size;		/* bytes before record 0 */
	uint32_t rec_size;		/* sizeof(struct sdp_stat_rec) */
	uint32_t nslots;		/* records in the file */
	uint32_t high_water;		/* records [0, high_water) may be used */
	int32_t pid;
	uint32_t uid;			/* effective uid of the publisher */
	char program[64];		/* short name, NUL-terminated */
	uint64_t want_until_ns;		/* reader: refresh until (MONOTONIC) */
	uint64_t refreshed_ns;		/* publisher: last full refresh */
	uint64_t created_ns;		/* CLOCK_REALTIME at creation */
	uint8_t reserved[4096 - 120];
};

#define SDP_STAT_F_LISTENER 0x1u	/* a listening socket */
#define SDP_STAT_F_ORPHAN 0x2u		/* closed by the app, close pending */

struct sdp_stat_addr {
	uint16_t family;		/* 0 unknown, 4 or 6 */
	uint16_t port;			/* host order */
	uint8_t addr[16];		/* 4 bytes used for IPv4 */
};

struct sdp_stat_rec {
	uint32_t seq;			/* seqlock: odd while being written */
	uint32_t in_use;		/* 1 from alloc to free */
	int32_t fd;			/* application descriptor, -1 unknown */
	uint32_t flags;			/* SDP_STAT_F_* */
	uint32_t conn_id;		/* engine connection id, 0 if none */
	uint32_t pad0;
	struct sdp_stat_addr local;
	struct sdp_stat_addr remote;
	char state[16];			/* "ESTABLISHED", "LISTEN", ... */
	char transport[8];		/* "shm", "verbs", "auto", "tcp" */
	char mode[8];			/* "bcopy" or "zcopy" */
	uint64_t tx_bytes, rx_bytes;	/* payload bytes sent / received */
	uint64_t tx_msgs, rx_msgs;	/* SDP messages, credit updates too */
	uint64_t bcopy_tx, zcopy_tx;	/* sends by mode */
	uint64_t tx_queued;		/* bytes accepted, not yet sent */
	uint64_t rx_queued;		/* bytes received, not yet read */
	uint64_t credit_stalls;		/* sends that found no credit */
	int32_t tx_credits;		/* peer receives we may still use */
	uint32_t peer_credits;		/* what the peer last heard from us */
	uint32_t posted;		/* our receives posted now */
	uint32_t pad1;
	uint64_t accepted, refused;	/* listeners */
	uint64_t updated_ns;		/* CLOCK_MONOTONIC of the last store */
	char reason[128];		/* why TCP / why it ended; "" = none */
	/* ZCopy bytes (version 2): Read ZCopy (SrcAvail + RDMA READ) and
	 * Write ZCopy (SinkAvail + RDMA WRITE) apart, each way. */
	uint64_t zc_rd_tx, zc_rd_rx;	/* read by the peer / read by us */
	uint64_t zc_wr_tx, zc_wr_rx;	/* written by us / written into us */
	uint8_t tx_mode, rx_mode;	/* 0 Buffered 1 Combined 2 Pipelined */
	uint8_t pad2[2];
	uint32_t backlog;		/* listeners */
	uint8_t reserved[512 - 376];
};

_Static_assert(sizeof(struct sdp_stat_hdr) == 4096,
	       "sdp_stat_hdr must stay one page: adjust reserved[]");
_Static_assert(offsetof(struct sdp_stat_hdr, reserved) == 120,
	       "sdp_stat_hdr fields moved: fix reserved[] and the version");
_Static_assert(offsetof(struct sdp_stat_rec, reserved) == 376,
	       "sdp_stat_rec fields moved: fix reserved[] and the version");
_Static_assert(sizeof(struct sdp_stat_rec) == 512,
	       "sdp_stat_rec must stay 512 bytes: adjust reserved[]");

#define SDP_STAT_FILE_SIZE \
	((size_t)4096 + (size_t)SDP_STAT_NSLOTS * sizeof(struct sdp_stat_rec))

#endif /* SDP_STATS_LAYOUT_H */
