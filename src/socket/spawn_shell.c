/* SPDX-License-Identifier: MIT */
/*
 * spawn_shell.c — system(), popen() and pclose() with SDP descriptors open.
 *
 * glibc runs these through its internal posix_spawn, which our wrapper
 * (exec.c) never sees, so a shell and whatever it runs would inherit the
 * bare socketpair end behind each SDP descriptor without FD_CLOEXEC: a read
 * there could hang forever or return a stray readiness byte as data.  They
 * are re-implemented here with glibc's own algorithm on top of the real
 * posix_spawn, with the poisoning file actions of exec.c in front: the
 * child sees a reset socket on those numbers, the parent's connections are
 * untouched.
 *
 * system(): as glibc, SIGINT and SIGQUIT are ignored and SIGCHLD blocked in
 * the caller while the command runs (counted, so concurrent calls from
 * several threads restore them only when the last one returns); the child
 * gets the caller's signal mask and default SIGINT/SIGQUIT back; a spawn
 * failure returns the status of `exit 127`.  With nothing to poison, the
 * real system() runs.
 *
 * popen()/pclose(): always ours, because POSIX requires the child of a
 * popen() to close the streams of earlier popen()s still open in the parent
 * (a writer's child that kept another pipe open would keep that reader's
 * command from ever seeing EOF), and only one list can know them all.
 * pclose() of a stream we did not open goes to glibc.  Modes "r", "w", with
 * "e" for close-on-exec, as glibc.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "socket/sock.h"
#include "socket/spawn.h"

extern char **environ;

#define SHELL_PATH "/bin/sh"

static struct {
	int (*system)(const char *);
	int (*pclose)(FILE *);
} R;

__attribute__((constructor)) static void spawn_shell_ctor(void)
{
	*(void **)&R.system = dlsym(RTLD_NEXT, "system");
	*(void **)&R.pclose = dlsym(RTLD_NEXT, "pclose");
}

/* `sh -c -- LINE` through the real posix_spawn, our poisoning actions first
 * and then `extra` (called on the actions to add its own; may be NULL).
 * Returns 0 or an error number, as posix_spawn. */
static int spawn_shell(pid_t *pid, const char *line,
		       const posix_spawnattr_t *attr,
		       int (*extra)(posix_spawn_file_actions_t *, void *),
		       void *arg)
{
	char *argv[] = { "sh", "-c", "--", (char *)line, NULL };
	struct sdp_spawn_poison sp;
	int r = sdp_spawn_poison_init(&sp);

	if (r < 0)
		return -r;
	r = extra ? extra(&sp.fa, arg) : 0;
	if (r == 0)
		r = sdp_spawn_real(pid, SHELL_PATH, &sp.fa, attr, argv,
				   environ);
	sdp_spawn_poison_destroy(&sp);
	return r;
}

/* Any SDP descriptor that a child would inherit? */
static int sdp_descriptors_open(void)
{
	return sdp_fd_scan_next(0) >= 0;
}

/* ---- system() --------------------------------------------------------------- */

static struct {
	pthread_mutex_t lock;
	int users;			/* system() calls in progress */
	struct sigaction intr, quit;	/* the caller's, to restore */
} S = { .lock = PTHREAD_MUTEX_INITIALIZER };

SDP_EXPORT int system(const char *line)
{
	struct sigaction ign = { .sa_handler = SIG_IGN };
	sigset_t chld, omask, reset;
	posix_spawnattr_t attr;
	int status = -1, r;
	pid_t pid;

	if (!R.system)
		return errno = ENOSYS, -1;
	if (!line || !sdp_descriptors_open())
		return R.system(line);
	sigemptyset(&ign.sa_mask);
	pthread_mutex_lock(&S.lock);
	if (S.users++ == 0) {
		sigaction(SIGINT, &ign, &S.intr);
		sigaction(SIGQUIT, &ign, &S.quit);
	}
	sigemptyset(&reset);
	if (S.intr.sa_handler != SIG_IGN)
		sigaddset(&reset, SIGINT);
	if (S.quit.sa_handler != SIG_IGN)
		sigaddset(&reset, SIGQUIT);
	pthread_mutex_unlock(&S.lock);
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, &omask);

	posix_spawnattr_init(&attr);
	posix_spawnattr_setsigmask(&attr, &omask);
	posix_spawnattr_setsigdefault(&attr, &reset);
	posix_spawnattr_setflags(&attr,
				 POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
	r = spawn_shell(&pid, line, &attr, NULL, NULL);
	posix_spawnattr_destroy(&attr);
	if (r == 0) {
		while (waitpid(pid, &status, 0) < 0) {
			if (errno != EINTR) {
				status = -1;
				break;
			}
		}
	} else {
		status = 127 << 8;	/* as if the shell had run `exit 127` */
	}

	pthread_mutex_lock(&S.lock);
	if (--S.users == 0) {
		sigaction(SIGINT, &S.intr, NULL);
		sigaction(SIGQUIT, &S.quit, NULL);
	}
	pthread_mutex_unlock(&S.lock);
	sigprocmask(SIG_SETMASK, &omask, NULL);
	if (r != 0)
		errno = r;
	return status;
}

/* ---- popen() / pclose() ----------------------------------------------------- */

struct popen_stream {
	FILE *fp;
	pid_t pid;
	struct popen_stream *next;
};

static struct {
	pthread_mutex_t lock;
	struct popen_stream *head;
} P = { .lock = PTHREAD_MUTEX_INITIALIZER };

struct popen_child {
	int end;	/* our pipe end that becomes the child's std */
	int std;	/* 0 ("w") or 1 ("r") */
};

/* Caller holds P.lock: the child's pipe end onto its stdin/stdout, and the
 * streams of earlier popen()s closed in the child (POSIX). */
static int popen_actions(posix_spawn_file_actions_t *fa, void *arg)
{
	const struct popen_child *ch = arg;
	struct popen_stream *s;
	int r = posix_spawn_file_actions_adddup2(fa, ch->end, ch->std);

	for (s = P.head; r == 0 && s; s = s->next) {
		int fd = fileno(s->fp);

		if (fd >= 0 && fd != ch->std)
			r = posix_spawn_file_actions_addclose(fa, fd);
	}
	return r;
}

/* "r" or "w", then any of "e" (close-on-exec); glibc also ignores other
 * trailing letters.  1 for read, 0 for write, -1 when invalid. */
static int popen_mode(const char *mode, int *cloexec)
{
	const char *m;

	if (!mode || (mode[0] != 'r' && mode[0] != 'w'))
		return -1;
	*cloexec = 0;
	for (m = mode + 1; *m; m++)
		if (*m == 'e')
			*cloexec = 1;
	return mode[0] == 'r';
}

SDP_EXPORT FILE *popen(const char *command, const char *mode)
{
	struct popen_stream *s;
	struct popen_child ch;
	int pfd[2], reading, cloexec, parent, r;

	reading = popen_mode(mode, &cloexec);
	if (reading < 0 || !command)
		return errno = EINVAL, NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	if (pipe2(pfd, O_CLOEXEC) < 0) {
		free(s);
		return NULL;
	}
	parent = reading ? pfd[0] : pfd[1];
	ch.end = reading ? pfd[1] : pfd[0];
	ch.std = reading ? 1 : 0;
	if (ch.end == ch.std) {
		/* dup2(fd, fd) would leave it close-on-exec: move it. */
		int moved = fcntl(ch.end, F_DUPFD_CLOEXEC, 3);

		if (moved < 0) {
			r = errno;
			close(pfd[0]);
			close(pfd[1]);
			free(s);
			return errno = r, NULL;
		}
		close(ch.end);
		ch.end = moved;
	}
	pthread_mutex_lock(&P.lock);
	r = spawn_shell(&s->pid, command, NULL, popen_actions, &ch);
	close(ch.end);
	if (r == 0 && !cloexec)
		fcntl(parent, F_SETFD, 0);
	if (r == 0)
		s->fp = fdopen(parent, reading ? "r" : "w");
	if (r == 0 && !s->fp) {
		/* The child runs already: give it EOF/EPIPE and reap it. */
		r = errno;
		close(parent);
		while (waitpid(s->pid, NULL, 0) < 0 && errno == EINTR)
			;
		parent = -1;
	}
	if (r == 0) {
		s->next = P.head;
		P.head = s;
	}
	pthread_mutex_unlock(&P.lock);
	if (r != 0) {
		if (parent >= 0)
			close(parent);
		free(s);
		return errno = r, NULL;
	}
	return s->fp;
}

SDP_EXPORT int pclose(FILE *fp)
{
	struct popen_stream **pp, *s = NULL;
	int status;
	pid_t pid;

	pthread_mutex_lock(&P.lock);
	for (pp = &P.head; *pp; pp = &(*pp)->next) {
		if ((*pp)->fp == fp) {
			s = *pp;
			*pp = s->next;
			break;
		}
	}
	pthread_mutex_unlock(&P.lock);
	if (!s)
		return R.pclose ? R.pclose(fp) : (errno = ENOSYS, -1);
	pid = s->pid;
	free(s);
	fclose(fp);
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR)
			return -1;
	}
	return status;
}
