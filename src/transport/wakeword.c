/* SPDX-License-Identifier: MIT */
/*
 * wakeword.c — this process's page of set wake words, and the peers' pages
 * mapped here (wakeword.h).
 */
#include "transport/wakeword.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/atfork.h"
#include "base/fdhigh.h"
#include "base/real.h"

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif

/* ---- this process's page --------------------------------------------------- */

static pthread_mutex_t own_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint64_t *own_page;	/* NULL until the first set */
static int own_fd = -1;
static uint64_t own_dev, own_ino;	/* its file, as peers check it */
static bool own_failed;			/* no page to be had: don't retry */
static uint64_t own_used[SDP_WAKEWORD_SLOTS / 64];
/* Bumped by fork in the child: a handle names its process's page. */
static unsigned own_gen;

#define HANDLE_SLOT(h)	((unsigned)(h) % SDP_WAKEWORD_SLOTS)
#define HANDLE_GEN(h)	((unsigned)(h) / SDP_WAKEWORD_SLOTS)
#define GEN_MAX		((unsigned)INT32_MAX / SDP_WAKEWORD_SLOTS)

static int own_create_locked(void)
{
	const int seals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE |
			  F_SEAL_SEAL;
	struct stat st;
	void *p;
	int fd;

	fd = memfd_create("libsdp-wake", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	fd = sdp_fd_high(fd);
	if (ftruncate(fd, SDP_WAKEWORD_BYTES) < 0)
		goto fail;
	/* Mapped writable before the seal: FUTURE_WRITE forbids only new
	 * writable mappings, i.e. the peers'. */
	p = mmap(NULL, SDP_WAKEWORD_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED,
		 fd, 0);
	if (p == MAP_FAILED)
		goto fail;
	if (sdp_real.fcntl(fd, F_ADD_SEALS, seals) < 0 || fstat(fd, &st) < 0) {
		munmap(p, SDP_WAKEWORD_BYTES);
		goto fail;
	}
	own_dev = (uint64_t)st.st_dev;
	own_ino = (uint64_t)st.st_ino;
	own_page = p;
	own_fd = fd;
	return 0;
fail:
	sdp_close(fd);
	return -EINVAL;
}

int sdp_wakeword_alloc(void)
{
	int h = -1;

	pthread_mutex_lock(&own_lock);
	if (!own_page && !own_failed && own_create_locked() < 0)
		own_failed = true;
	for (int w = 0; own_page && w < SDP_WAKEWORD_SLOTS / 64 && h < 0; w++) {
		if (own_used[w] == ~0ull)
			continue;
		int b = __builtin_ctzll(~own_used[w]);

		own_used[w] |= 1ull << b;
		h = (int)(own_gen * SDP_WAKEWORD_SLOTS + (unsigned)(w * 64 + b));
		/* A fresh set: no sleeper; the generation goes on. */
		atomic_fetch_and(&own_page[HANDLE_SLOT(h) * SDP_WAKEWORD_STRIDE],
				 ~(uint64_t)SDP_WAKEWORD_SLEEPERS);
	}
	pthread_mutex_unlock(&own_lock);
	return h;
}

/* The word of a handle of this process, or NULL (another process's). */
static _Atomic uint64_t *own_word(int h)
{
	if (h < 0 || HANDLE_GEN(h) != own_gen || !own_page)
		return NULL;
	return &own_page[HANDLE_SLOT(h) * SDP_WAKEWORD_STRIDE];
}

void sdp_wakeword_free(int h)
{
	unsigned s = HANDLE_SLOT(h);

	pthread_mutex_lock(&own_lock);
	if (own_word(h))
		own_used[s / 64] &= ~(1ull << (s % 64));
	pthread_mutex_unlock(&own_lock);
}

void sdp_wakeword_sleep(int h, int delta)
{
	_Atomic uint64_t *w = own_word(h);

	if (!w)
		return;
	if (delta > 0) {
		/* One more sleeper, and a new generation. */
		atomic_fetch_add(w, (uint64_t)SDP_WAKEWORD_SLEEPERS + 2);
		atomic_thread_fence(memory_order_seq_cst);
	} else {
		atomic_fetch_sub(w, 1);
	}
}

bool sdp_wakeword_sleeping(int h)
{
	_Atomic uint64_t *w = own_word(h);

	return w && (atomic_load(w) & SDP_WAKEWORD_SLEEPERS);
}

int sdp_wakeword_share(int *gen, uint64_t *dev, uint64_t *ino)
{
	int fd;

	pthread_mutex_lock(&own_lock);
	if (!own_page && !own_failed && own_create_locked() < 0)
		own_failed = true;
	fd = own_fd;
	*gen = (int)own_gen;
	if (dev)
		*dev = fd >= 0 ? own_dev : 0;
	if (ino)
		*ino = fd >= 0 ? own_ino : 0;
	pthread_mutex_unlock(&own_lock);
	return fd;
}

bool sdp_wakeword_of_gen(int h, int gen)
{
	return h >= 0 && gen >= 0 && HANDLE_GEN(h) == (unsigned)gen;
}

/* ---- peers' pages ------------------------------------------------------------ */

/* A page whose last connection closed stays mapped, idle, for the next
 * connection with the same peer: a connection per request would otherwise
 * map and unmap it each time, and each unmap of a threaded process is a
 * TLB shootdown.  While mapped, the inode cannot be freed, so its number
 * names the same page when it comes back.  The idle ones are bounded;
 * the longest idle goes first. */
#define PEER_IDLE_MAX 8

struct peer_page {
	dev_t dev;
	ino_t ino;
	const _Atomic uint64_t *page;
	unsigned refs;
	uint64_t idle_since;		/* idle_clock when refs fell to 0 */
};

static pthread_mutex_t peer_lock = PTHREAD_MUTEX_INITIALIZER;
static struct peer_page *peers;
static size_t npeers, peers_cap, npeers_idle;
static uint64_t idle_clock;

/* A reference to the mapped page of file (dev, ino), or NULL. */
static const _Atomic uint64_t *peer_ref_locked(uint64_t dev, uint64_t ino)
{
	for (size_t i = 0; i < npeers; i++) {
		if ((uint64_t)peers[i].dev == dev &&
		    (uint64_t)peers[i].ino == ino) {
			if (peers[i].refs++ == 0)
				npeers_idle--;
			return peers[i].page;
		}
	}
	return NULL;
}

const _Atomic uint64_t *sdp_wakeword_map_peer(int fd)
{
	const int need = F_SEAL_SHRINK | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL;
	const _Atomic uint64_t *page = NULL;
	struct stat st;
	int seals;
	void *p;

	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_size != SDP_WAKEWORD_BYTES)
		return NULL;
	pthread_mutex_lock(&peer_lock);
	/* Checked when it was mapped: seals never come off. */
	page = peer_ref_locked((uint64_t)st.st_dev, (uint64_t)st.st_ino);
	if (page)
		goto out;
	seals = sdp_real.fcntl(fd, F_GET_SEALS);
	if (seals < 0 || (seals & need) != need)
		goto out;	/* it could shrink under us: SIGBUS */
	if (npeers == peers_cap) {
		size_t cap = peers_cap ? peers_cap * 2 : 8;
		struct peer_page *n = realloc(peers, cap * sizeof(*n));

		if (!n)
			goto out;
		peers = n;
		peers_cap = cap;
	}
	p = mmap(NULL, SDP_WAKEWORD_BYTES, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		goto out;
	page = p;
	peers[npeers++] = (struct peer_page){ st.st_dev, st.st_ino, page, 1, 0 };
out:
	pthread_mutex_unlock(&peer_lock);
	return page;
}

const _Atomic uint64_t *sdp_wakeword_peer_mapped(uint64_t dev, uint64_t ino)
{
	const _Atomic uint64_t *page = NULL;

	if (!ino)
		return NULL;
	pthread_mutex_lock(&peer_lock);
	page = peer_ref_locked(dev, ino);
	pthread_mutex_unlock(&peer_lock);
	return page;
}

void sdp_wakeword_unmap_peer(const _Atomic uint64_t *page)
{
	if (!page)
		return;
	pthread_mutex_lock(&peer_lock);
	for (size_t i = 0; i < npeers; i++) {
		if (peers[i].page != page)
			continue;
		if (--peers[i].refs == 0) {
			peers[i].idle_since = ++idle_clock;
			npeers_idle++;
		}
		break;
	}
	if (npeers_idle > PEER_IDLE_MAX) {
		size_t old = npeers;

		for (size_t i = 0; i < npeers; i++)
			if (!peers[i].refs && (old == npeers ||
			    peers[i].idle_since < peers[old].idle_since))
				old = i;
		munmap((void *)peers[old].page, SDP_WAKEWORD_BYTES);
		peers[old] = peers[--npeers];
		npeers_idle--;
	}
	pthread_mutex_unlock(&peer_lock);
}

/* ---- fork ------------------------------------------------------------------- */

/* The child has one thread: nobody holds these locks there any more.  Its
 * sets get a page of their own; the peers' pages stay mapped for the
 * connections it inherited. */
static void wakeword_atfork_child(void)
{
	pthread_mutex_init(&own_lock, NULL);
	pthread_mutex_init(&peer_lock, NULL);
	if (own_page)
		munmap((void *)own_page, SDP_WAKEWORD_BYTES);
	if (own_fd >= 0)
		sdp_close(own_fd);
	own_page = NULL;
	own_fd = -1;
	own_failed = false;
	memset(own_used, 0, sizeof(own_used));
	own_gen = own_gen + 1 > GEN_MAX ? 0 : own_gen + 1;
}

__attribute__((constructor)) static void wakeword_ctor(void)
{
	/* The library's table, not pthread_atfork(): a raw clone() runs
	 * only the library's handlers (base/atfork.h). */
	sdp_atfork_add(SDP_ATFORK_INNER, NULL, NULL, wakeword_atfork_child);
}
