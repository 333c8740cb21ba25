/* SPDX-License-Identifier: MIT */
/*
 * exec.c — SDP descriptors across exec().
 *
 * An SDP connection lives in this process image (engine state, QP mappings,
 * progress thread); the descriptor the application holds is only the
 * socketpair end whose readiness the library steers.  A new image cannot
 * use it: it would hold a quiet AF_UNIX socket whose other end another
 * process may still hold (a fork() parent, or the peer's appwake copy), so
 * a read could hang forever or return a stray readiness byte as data.
 *
 * So right before the real exec, every SDP application descriptor without
 * FD_CLOEXEC is replaced, on the same number and with the same file status
 * flags.  Where the ancestor that drives the connection takes it on
 * (engine/relay.h: the image gets it as stdio, or the ancestor no longer
 * holds it), by a stream that ancestor relays, and the new image's
 * environment names it (SDP_RELAYED, relayed.c).  Otherwise by a
 * *poisoned* socket: one end of a fresh AF_UNIX socketpair
 * whose other end was closed while holding an unread byte.  The kernel then
 * reports what a TCP program sees after a reset: recv() fails once with
 * ECONNRESET and returns EOF after that, write()/send() fail with EPIPE,
 * poll() reports POLLIN|POLLHUP|POLLERR at once.  If the exec fails, the
 * originals (kept as close-on-exec duplicates) are put back, so the caller
 * carries on with working connections.  On success the kernel closes the
 * duplicates and every library descriptor (all close-on-exec) at the exec
 * itself; that is how the peer learns, exactly when the image goes away:
 * if this image held the last copy, the shm transport sees the rendezvous
 * socket hang up and the peer gets ECONNRESET, as after kill -9.  We do not
 * run the engine's close path here: it takes locks and allocates, which is
 * unsafe after vfork() or in the child of a threaded fork(), and a failed
 * exec must leave the connection intact.
 *
 * Async-signal safety: exec may be called after vfork() (sharing the
 * parent's memory, whose other threads still run) or in a fork() child of a
 * threaded program (locks possibly held by threads that do not exist).  The
 * exec path therefore uses only system calls, the stack and, for many
 * descriptors, one mmap(); it walks the descriptor table without its lock
 * (sdp_fd_scan_next) and never dereferences a socket.  A stale table entry
 * (descriptor closed behind our back and reused) is recognised by what the
 * kernel says the descriptor is: only AF_UNIX stream sockets and anonymous
 * inodes (a listener's epoll set, lsnfd.c) are poisoned.
 * In a threaded program that execs without forking, other threads (the
 * progress thread included) may touch a descriptor between the poisoning
 * and the exec: they see a reset for that instant, as they would with any
 * descriptor a thread replaces while others use it.  If the exec then
 * fails, a readiness change the library made in that instant went to the
 * poisoned socket and is lost (at worst a stale POLLIN/POLLOUT until the
 * next transition); recv/send themselves do not use the descriptor.
 *
 * posix_spawn()/posix_spawnp(): glibc runs the exec inside the library
 * (clone + an internal execve), so the wrappers above are never reached.
 * With no file actions, we pass our own, which dup2 a poisoned socket onto
 * each such descriptor in the child.  The caller's file actions are
 * opaque and cannot be prepended to: see spawn_common for what is done.
 * system() and popen() spawn inside glibc, out of our reach: spawn_shell.c
 * replaces them by the same algorithm on top of spawn with our actions.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/config.h"
#include "base/libthreads.h"
#include "engine/conn.h"
#include "engine/progress.h"
#include "engine/relay.h"
#include "socket/sock.h"
#include "socket/spawn.h"

typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*fexecve_fn)(int, char *const[], char *const[]);
typedef int (*execveat_fn)(int, const char *, char *const[], char *const[],
			   int);
typedef int (*spawn_fn)(pid_t *, const char *,
			const posix_spawn_file_actions_t *,
			const posix_spawnattr_t *, char *const[],
			char *const[]);

static struct {
	execve_fn execve, execvpe;
	fexecve_fn fexecve;
	execveat_fn execveat;
	spawn_fn posix_spawn, posix_spawnp;
} R;

/* dlsym is not async-signal-safe: resolve while the library loads. */
__attribute__((constructor)) static void exec_ctor(void)
{
	*(void **)&R.execve = dlsym(RTLD_NEXT, "execve");
	*(void **)&R.execvpe = dlsym(RTLD_NEXT, "execvpe");
	*(void **)&R.fexecve = dlsym(RTLD_NEXT, "fexecve");
	*(void **)&R.execveat = dlsym(RTLD_NEXT, "execveat");
	*(void **)&R.posix_spawn = dlsym(RTLD_NEXT, "posix_spawn");
	*(void **)&R.posix_spawnp = dlsym(RTLD_NEXT, "posix_spawnp");
}

/* Raw system calls: fcntl, dup3, getsockopt and close are interposed by
 * this library, and its versions take locks. */
static long sys_fcntl(int fd, int cmd, long arg)
{
	return syscall(SYS_fcntl, fd, cmd, arg);
}

static void sys_close(int fd)
{
	syscall(SYS_close, fd);
}

/* Is `fd` what an SDP descriptor is (see the file comment)? */
static int looks_sdp(int fd)
{
	int v = 0;
	socklen_t l = sizeof(v);
	struct stat st;

	if (syscall(SYS_getsockopt, fd, SOL_SOCKET, SO_DOMAIN, &v, &l) == 0) {
		if (v != AF_UNIX)
			return 0;
		l = sizeof(v);
		return syscall(SYS_getsockopt, fd, SOL_SOCKET, SO_TYPE, &v,
			       &l) == 0 && v == SOCK_STREAM;
	}
	return errno == ENOTSOCK && fstat(fd, &st) == 0 &&
	       (st.st_mode & S_IFMT) == 0;	/* anon inode: epoll set */
}

/*
 * A socket that reports a reset: write a byte into b's receive queue, then
 * close b; Linux flags ECONNRESET on a when an AF_UNIX stream socket is
 * closed with unread data (as readiness.c does for an SDP reset).  `fl` is
 * the file status flags to copy (O_NONBLOCK).  Returns a close-on-exec
 * descriptor or -errno.
 */
static int poisoned(int fl)
{
	int sp[2];
	char b = 0;

	if (syscall(SYS_socketpair, AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0,
		    sp) < 0)
		return -errno;
	if (syscall(SYS_write, sp[0], &b, 1) != 1) {
		int e = errno;

		sys_close(sp[0]);
		sys_close(sp[1]);
		return -e;
	}
	sys_close(sp[1]);
	if (fl >= 0)
		sys_fcntl(sp[0], F_SETFL, fl & O_NONBLOCK);
	return sp[0];
}

struct exec_slot {
	int fd;		/* the application's descriptor number */
	int saved;	/* close-on-exec duplicate of the original, or -1 */
	int cloexec;	/* fallback used: FD_CLOEXEC set on fd itself */
	int relayed;	/* fd is now the relay stream (relay.h) */
};

#define EXEC_STACK_SLOTS 32
#define EXEC_RELAYS 32

struct exec_relay {
	struct sdp_conn *conn;
	int fd;		/* close-on-exec: the stream the new image gets */
	uint64_t ino;	/* its inode: names it in SDP_RELAYED (relayed.c) */
	struct sdp_tp_addr addr;
};

struct exec_guard {
	struct exec_slot *v;
	int n;
	size_t map_len;		/* mmap()ed slots, or 0 */
	int may_relay;		/* this process may ask for relays */
	int nrelay;
	void *env_map;		/* the new image's environment, or NULL */
	size_t env_len;
	struct exec_relay relay[EXEC_RELAYS];
	struct exec_slot stack[EXEC_STACK_SLOTS];
};

/*
 * The stream the owner of fd's connection relays for the new image
 * (relay.h), one per connection however many numbers name it; -errno if
 * none (a reset then).  Only in a process of its own (not a vfork child)
 * whose application runs one thread: the socket is read without the
 * table's lock, and the wait for the owner blocks this thread.
 */
static int relayed(struct exec_guard *g, int fd, int fl)
{
	struct exec_relay *rl;
	struct sdp_sock *s;
	struct stat a;
	int i, r;

	if (!g->may_relay)
		return -ENOTSUP;
	s = sdp_fd_peek(fd);
	if (!s || s->kind != SDP_SK_CONN || !s->conn)
		return -ENOTSUP;
	/* A stale entry (closed behind our back, reused) names some other
	 * socket: the request must go through the connection's own pair. */
	if (fstat(fd, &a) < 0 || !s->ready.app_ino ||
	    (uint64_t)a.st_ino != s->ready.app_ino)
		return -ENOTSUP;
	for (i = 0; i < g->nrelay; i++)
		if (g->relay[i].conn == s->conn)
			return g->relay[i].fd;
	if (g->nrelay == EXEC_RELAYS)
		return -ENOSPC;
	/* Numbers come in ascending order: the first of a connection is its
	 * lowest, stdio if any is. */
	r = sdp_relay_ask(s->conn, fd, fl >= 0 && (fl & O_NONBLOCK), fd <= 2);
	if (r < 0)
		return r;
	rl = &g->relay[g->nrelay++];
	rl->conn = s->conn;
	rl->fd = r;
	rl->ino = fstat(r, &a) == 0 ? (uint64_t)a.st_ino : 0;
	/* No lock (exec may follow a fork whose lock was held): this
	 * process never drove the connection, its copy does not change. */
	rl->addr = s->conn->addr;
	return r;
}

static char *put_hex(char *p, const void *v, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *b = v;

	while (n--) {
		*p++ = hex[*b >> 4];
		*p++ = hex[*b++ & 15];
	}
	return p;
}

static char *put_u64(char *p, uint64_t v)
{
	char t[24];
	int n = 0;

	do
		t[n++] = (char)('0' + v % 10);
	while ((v /= 10));
	while (n)
		*p++ = t[--n];
	return p;
}

/*
 * The environment of the new image: `envp` with SDP_RELAYED naming the
 * streams relayed for it (socket/relayed.c), ahead of those this image
 * was given itself.  `envp` as it is when nothing was relayed, or if no
 * memory can be had (the image then sees plain AF_UNIX sockets).
 */
static char *const *guard_env(struct exec_guard *g, char *const *envp)
{
	static const char key[] = SDP_RELAYED_ENV "=";
	const size_t klen = sizeof(key) - 1;
	const char *old = NULL;
	size_t n, i, k, len;
	char **v, *p;

	if (!g->nrelay)
		return envp;
	for (n = 0; envp && envp[n]; n++)
		if (!strncmp(envp[n], key, klen))
			old = envp[n] + klen;
	len = (n + 2) * sizeof(char *) + klen + 1 + (old ? strlen(old) : 0) +
	      (size_t)g->nrelay * (24 + 4 * sizeof(struct sockaddr_storage));
	v = mmap(NULL, len, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (v == MAP_FAILED)
		return envp;
	g->env_map = v;
	g->env_len = len;
	p = (char *)(v + n + 2);
	for (i = k = 0; i < n; i++)
		if (strncmp(envp[i], key, klen))
			v[k++] = envp[i];
	v[k++] = p;
	v[k] = NULL;
	memcpy(p, key, klen);
	p += klen;
	for (i = 0; i < (size_t)g->nrelay; i++) {
		const struct exec_relay *rl = &g->relay[i];

		if (i)
			*p++ = ',';
		p = put_u64(p, rl->ino);
		*p++ = '/';
		p = put_hex(p, &rl->addr.local, rl->addr.local_len);
		*p++ = '/';
		p = put_hex(p, &rl->addr.peer, rl->addr.peer_len);
	}
	if (old && *old) {
		*p++ = ',';
		p = stpcpy(p, old);
	}
	*p = '\0';
	return v;
}

/* Descriptors to poison: in the table, open, without FD_CLOEXEC. */
static int candidate(int fd)
{
	long fl = sys_fcntl(fd, F_GETFD, 0);

	return fl >= 0 && !(fl & FD_CLOEXEC) && looks_sdp(fd);
}

static void guard_poison(struct exec_guard *g, int exec)
{
	int fd, cap = EXEC_STACK_SLOTS, n = 0;

	g->v = g->stack;
	g->n = 0;
	g->map_len = 0;
	g->nrelay = 0;
	g->env_map = NULL;
	/* Not for posix_spawn: its swap is undone in this process after the
	 * spawn, which would keep the stream in place of its connection. */
	g->may_relay = exec && !sdp_in_memory_sharing_child() &&
		       sdp_app_single_threaded();
	for (fd = sdp_fd_scan_next(0); fd >= 0; fd = sdp_fd_scan_next(fd + 1))
		n += candidate(fd);
	if (n == 0)
		return;
	if (n > cap) {
		size_t len = (size_t)n * sizeof(struct exec_slot);
		void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p != MAP_FAILED) {
			g->v = p;
			g->map_len = len;
			cap = n;
		}
	}
	for (fd = sdp_fd_scan_next(0); fd >= 0; fd = sdp_fd_scan_next(fd + 1)) {
		struct exec_slot *sl;
		int p, fl;

		if (!candidate(fd))
			continue;
		if (g->n == cap) {
			/* No room to remember more: those are just marked
			 * close-on-exec below (EBADF in the new image) and
			 * left so if the exec fails. */
			sys_fcntl(fd, F_SETFD, FD_CLOEXEC);
			continue;
		}
		sl = &g->v[g->n++];
		sl->fd = fd;
		sl->saved = -1;
		sl->cloexec = 0;
		sl->relayed = 0;
		fl = (int)sys_fcntl(fd, F_GETFL, 0);
		p = relayed(g, fd, fl);
		if (p >= 0) {
			sl->relayed = 1;
		} else {
			sdp_log(SDP_LOG_DEBUG, "exec: fd %d: not relayed (%s): "
				"the connection resets", fd, strerror(-p));
			p = poisoned(fl);
		}
		if (p >= 0) {
			sl->saved = (int)sys_fcntl(fd, F_DUPFD_CLOEXEC, 0);
			if (sl->saved >= 0 &&
			    syscall(SYS_dup3, p, fd, 0) == fd) {
				if (!sl->relayed)
					sys_close(p);
				continue;
			}
			if (!sl->relayed)
				sys_close(p);
			sl->relayed = 0;
			if (sl->saved >= 0)
				sys_close(sl->saved);
			sl->saved = -1;
		}
		/* Out of descriptors: the new image gets EBADF instead, still
		 * a clean error and never a hang. */
		sl->cloexec = sys_fcntl(fd, F_SETFD, FD_CLOEXEC) == 0;
	}
}

/* The exec failed: give the caller its descriptors back, flags and all.
 * A relayed connection cannot come back (its owner relays it for good):
 * the caller keeps the stream, now a plain socket to this library. */
static void guard_restore(struct exec_guard *g)
{
	int i, e = errno;

	for (i = 0; i < g->n; i++) {
		struct exec_slot *sl = &g->v[i];

		if (sl->relayed) {
			sys_close(sl->saved);
			/* Our copy of the connection is never used again:
			 * its reference is left behind with the entry. */
			(void)sdp_fd_take(sl->fd);
		} else if (sl->saved >= 0) {
			syscall(SYS_dup3, sl->saved, sl->fd, 0);
			sys_close(sl->saved);
		} else if (sl->cloexec) {
			sys_fcntl(sl->fd, F_SETFD, 0);
		}
	}
	for (i = 0; i < g->nrelay; i++)
		sys_close(g->relay[i].fd);
	if (g->env_map)
		munmap(g->env_map, g->env_len);
	if (g->map_len)
		munmap(g->v, g->map_len);
	errno = e;
}

SDP_EXPORT int execve(const char *path, char *const argv[],
		      char *const envp[])
{
	struct exec_guard g;
	int r;

	guard_poison(&g, 1);
	envp = guard_env(&g, envp);
	r = R.execve ? R.execve(path, argv, envp) :
		       (int)syscall(SYS_execve, path, argv, envp);
	guard_restore(&g);
	return r;
}

SDP_EXPORT int execvpe(const char *file, char *const argv[],
		       char *const envp[])
{
	struct exec_guard g;
	int r;

	if (!R.execvpe) {
		errno = ENOSYS;
		return -1;
	}
	guard_poison(&g, 1);
	envp = guard_env(&g, envp);
	r = R.execvpe(file, argv, envp);
	guard_restore(&g);
	return r;
}

SDP_EXPORT int execv(const char *path, char *const argv[])
{
	return execve(path, argv, environ);
}

SDP_EXPORT int execvp(const char *file, char *const argv[])
{
	return execvpe(file, argv, environ);
}

SDP_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	struct exec_guard g;
	int r;

	if (!R.fexecve) {
		errno = ENOSYS;
		return -1;
	}
	guard_poison(&g, 1);
	envp = guard_env(&g, envp);
	r = R.fexecve(fd, argv, envp);
	guard_restore(&g);
	return r;
}

SDP_EXPORT int execveat(int dirfd, const char *path, char *const argv[],
			char *const envp[], int flags)
{
	struct exec_guard g;
	int r;

	guard_poison(&g, 1);
	envp = guard_env(&g, envp);
	r = R.execveat ? R.execveat(dirfd, path, argv, envp, flags) :
			 (int)syscall(SYS_execveat, dirfd, path, argv, envp,
				      flags);
	guard_restore(&g);
	return r;
}

/*
 * execl family: the argument list becomes an array on the stack (no malloc:
 * these may run after vfork()), as glibc does.
 */
#define COUNT_ARGS(ap, n)                                              \
	do {                                                                 \
		va_list cp;                                                  \
		va_copy(cp, ap);                                             \
		for ((n) = 1; va_arg(cp, char *); (n)++)                     \
			;                                                    \
		va_end(cp);                                                  \
	} while (0)

static int execl_common(const char *path, const char *arg0, va_list ap,
			int search, int with_env)
{
	ptrdiff_t n, i;

	n = 0;
	if (arg0)
		COUNT_ARGS(ap, n);
	{
		char *argv[n + 1];
		char *const *envp = environ;

		argv[0] = (char *)arg0;
		for (i = 1; i <= n; i++)
			argv[i] = va_arg(ap, char *);	/* ends with NULL */
		if (with_env)
			envp = va_arg(ap, char *const *);
		return search ? execvpe(path, argv, envp) :
				execve(path, argv, envp);
	}
}

SDP_EXPORT int execl(const char *path, const char *arg, ...)
{
	va_list ap;
	int r;

	va_start(ap, arg);
	r = execl_common(path, arg, ap, 0, 0);
	va_end(ap);
	return r;
}

SDP_EXPORT int execlp(const char *file, const char *arg, ...)
{
	va_list ap;
	int r;

	va_start(ap, arg);
	r = execl_common(file, arg, ap, 1, 0);
	va_end(ap);
	return r;
}

SDP_EXPORT int execle(const char *path, const char *arg, ...)
{
	va_list ap;
	int r;

	va_start(ap, arg);
	r = execl_common(path, arg, ap, 0, 1);
	va_end(ap);
	return r;
}

/*
 * posix_spawn: an ordinary call in the parent (malloc is fine here).
 *
 * With no caller file actions, the child dup2()s a poisoned socket onto
 * each SDP descriptor it would inherit; the parent's descriptors are never
 * touched.  The same actions, followed by their own, serve system() and
 * popen() (spawn_shell.c).
 *
 * The caller's file actions are opaque: they cannot be read, copied or
 * prepended to.  There the swap is made in the parent for the length of
 * the spawn instead (guard_poison, as for exec, then guard_restore): glibc
 * returns from posix_spawn only after the child has exec'd or failed, and
 * the caller's actions then see (and may dup2 onto stdin, inetd-style) the
 * poisoned socket.  That is safe only when no other application thread can
 * look at the descriptors meanwhile, so it is done only when the
 * application is single-threaded (library threads do not touch the
 * application's descriptor numbers); otherwise the child inherits the bare
 * socketpair end as before (README: exec).
 */
#define SPAWN_MAX_POISON 1024

int sdp_spawn_poison_init(struct sdp_spawn_poison *sp)
{
	int fd, n = 0;

	sp->held = NULL;
	sp->n = 0;
	if (posix_spawn_file_actions_init(&sp->fa) != 0)
		return -ENOMEM;
	for (fd = sdp_fd_scan_next(0); fd >= 0; fd = sdp_fd_scan_next(fd + 1))
		n += candidate(fd);
	if (n == 0)
		return 0;
	if (n > SPAWN_MAX_POISON)
		n = SPAWN_MAX_POISON;
	sp->held = calloc((size_t)n, sizeof(*sp->held));
	if (!sp->held) {
		posix_spawn_file_actions_destroy(&sp->fa);
		return -ENOMEM;
	}
	for (fd = sdp_fd_scan_next(0); fd >= 0 && sp->n < n;
	     fd = sdp_fd_scan_next(fd + 1)) {
		int p;

		if (!candidate(fd))
			continue;
		p = poisoned((int)sys_fcntl(fd, F_GETFL, 0));
		if (p < 0)
			break;
		/* Our poisoned end is close-on-exec; dup2 onto fd in the
		 * child gives fd a copy without it, as the original. */
		if (posix_spawn_file_actions_adddup2(&sp->fa, p, fd) != 0) {
			sys_close(p);
			break;
		}
		sp->held[sp->n++] = p;
	}
	return 0;
}

void sdp_spawn_poison_destroy(struct sdp_spawn_poison *sp)
{
	while (sp->n > 0)
		sys_close(sp->held[--sp->n]);
	free(sp->held);
	sp->held = NULL;
	posix_spawn_file_actions_destroy(&sp->fa);
}

int sdp_spawn_real(pid_t *pid, const char *path,
		   const posix_spawn_file_actions_t *fa,
		   const posix_spawnattr_t *attr, char *const argv[],
		   char *const envp[])
{
	return R.posix_spawn ? R.posix_spawn(pid, path, fa, attr, argv, envp)
			     : ENOSYS;
}

/* Any descriptor a spawned child would inherit that must be poisoned? */
static int any_candidate(void)
{
	int fd;

	for (fd = sdp_fd_scan_next(0); fd >= 0; fd = sdp_fd_scan_next(fd + 1))
		if (candidate(fd))
			return 1;
	return 0;
}

static int spawn_common(spawn_fn real, pid_t *pid, const char *path,
			const posix_spawn_file_actions_t *fa,
			const posix_spawnattr_t *attr, char *const argv[],
			char *const envp[])
{
	struct sdp_spawn_poison sp;
	int r;

	if (!real)
		return ENOSYS;
	if (sdp_fd_scan_next(0) < 0 || !any_candidate())
		return real(pid, path, fa, attr, argv, envp);
	if (fa) {
		struct exec_guard g;

		if (!sdp_app_single_threaded())
			return real(pid, path, fa, attr, argv, envp);
		guard_poison(&g, 0);
		r = real(pid, path, fa, attr, argv, envp);
		guard_restore(&g);
		return r;
	}
	if (sdp_spawn_poison_init(&sp) < 0)
		return real(pid, path, fa, attr, argv, envp);
	r = real(pid, path, &sp.fa, attr, argv, envp);
	sdp_spawn_poison_destroy(&sp);
	return r;
}

SDP_EXPORT int posix_spawn(pid_t *pid, const char *path,
			   const posix_spawn_file_actions_t *fa,
			   const posix_spawnattr_t *attr, char *const argv[],
			   char *const envp[])
{
	return spawn_common(R.posix_spawn, pid, path, fa, attr, argv, envp);
}

SDP_EXPORT int posix_spawnp(pid_t *pid, const char *file,
			    const posix_spawn_file_actions_t *fa,
			    const posix_spawnattr_t *attr, char *const argv[],
			    char *const envp[])
{
	return spawn_common(R.posix_spawnp, pid, file, fa, attr, argv, envp);
}

/*
 * _exit(2) and _Exit(3): the kernel sends what a TCP socket still queues
 * after its process is gone; an SDP connection's queue lives in the
 * process.  So _exit does what exit() does for connections (the
 * bounded flush, and leaving those that another process holds to it):
 * fork-per-connection children commonly close and _exit().
 */
SDP_EXPORT __attribute__((noreturn)) void _exit(int status)
{
	sdp_progress_exit_flush_try();
	for (;;)
		syscall(SYS_exit_group, status);
}

SDP_EXPORT __attribute__((noreturn)) void _Exit(int status)
{
	_exit(status);
}

/*
 * daemon(3): glibc's parent leaves with _exit() right after fork(), which
 * skips libsdp's exit handling, so the connections stayed owned by a dying
 * process and the daemon's first use of one raced with that death (EBADFD,
 * and the peer saw a reset).  Here the parent hands every connection over
 * (sdp_progress_hand_over, as exit() would) and only then lets the child
 * return from daemon(): a pipe whose write end the parent holds.
 */
SDP_EXPORT int daemon(int nochdir, int noclose)
{
	int p[2], fd;
	pid_t pid;
	char b;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	pid = fork();
	if (pid < 0) {
		sys_close(p[0]);
		sys_close(p[1]);
		return -1;
	}
	if (pid > 0) {
		sys_close(p[0]);
		sdp_progress_hand_over();
		_exit(0);	/* p[1] closes: the child goes on */
	}
	sys_close(p[1]);
	while (read(p[0], &b, 1) < 0 && errno == EINTR)
		;
	sys_close(p[0]);
	if (setsid() < 0)
		return -1;
	if (!nochdir && chdir("/") < 0)
		return -1;
	if (!noclose) {
		struct stat st;

		fd = open("/dev/null", O_RDWR);
		if (fd < 0)
			return -1;
		/* As glibc: only if it really is the null device. */
		if (fstat(fd, &st) < 0 || !S_ISCHR(st.st_mode)) {
			sys_close(fd);
			errno = ENODEV;
			return -1;
		}
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		if (fd > 2)
			close(fd);
	}
	return 0;
}
