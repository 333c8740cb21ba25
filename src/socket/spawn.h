/* SPDX-License-Identifier: MIT */
/*
 * spawn.h — spawning children that must not inherit live SDP descriptors
 * (exec.c builds the file actions; spawn_shell.c uses them for system()
 * and popen()).
 */
#ifndef SDP_SOCKET_SPAWN_H
#define SDP_SOCKET_SPAWN_H

#include <spawn.h>
#include <sys/types.h>

/* File actions that dup2 a poisoned (reset-reporting) socket onto every SDP
 * descriptor without FD_CLOEXEC, plus the poisoned sockets they name,
 * which the parent holds until the spawn returned. */
struct sdp_spawn_poison {
	posix_spawn_file_actions_t fa;
	int *held;
	int n;
};

/* 0 with sp->fa initialised (callers may add their own actions after ours),
 * or -ENOMEM. */
int sdp_spawn_poison_init(struct sdp_spawn_poison *sp);
void sdp_spawn_poison_destroy(struct sdp_spawn_poison *sp);
/* glibc's posix_spawn, past our wrapper.  Returns 0 or an error number. */
int sdp_spawn_real(pid_t *pid, const char *path,
		   const posix_spawn_file_actions_t *fa,
		   const posix_spawnattr_t *attr, char *const argv[],
		   char *const envp[]);

#endif
