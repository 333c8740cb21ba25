// SPDX-License-Identifier: MIT
/*
 * shm_creds.c — cross-memory attach (process_vm_readv/writev) with no more
 * privilege than the peer's own.
 *
 * The kernel allows process_vm_* to a target when the caller's real uid
 * and gid equal all of the target's uids and gids and the target is
 * dumpable, or when the caller has CAP_SYS_PTRACE; it decides under the
 * target's exec lock, on the address space it then copies to
 * (PTRACE_MODE_ATTACH_REALCREDS).  An unprivileged caller is therefore
 * refused a peer that exec'd a setuid program or changed its credentials:
 * nothing to do.  A caller with CAP_SYS_PTRACE (root) would be allowed into
 * any image at that pid, so it makes the call with the peer's credentials:
 * the calling thread alone takes the peer's uid and gid as its real and
 * effective ids (raw syscalls: glibc's setresuid() would change every
 * thread), which drops its effective capabilities, and keeps its saved
 * uid and gid to come back.  The kernel's own check then decides, atomically
 * with respect to an exec of the peer: an image the peer's credentials could
 * not write (setuid, changed ids, not dumpable) is refused with EPERM.
 *
 * Supplementary groups are left alone: the kernel's check looks at the
 * uids, gids and capabilities only.
 *
 * Around the switch every signal is blocked, so no handler of the
 * application runs with the peer's credentials; SIGKILL and SIGSTOP cannot
 * be blocked, and the peer's user may send them to this thread while the
 * switch lasts (one copy).  If the credentials cannot be restored the
 * process aborts: it must never go on with the wrong ones.
 *
 * A change of the effective uid makes the kernel reset the process's
 * dumpable flag (to fs.suid_dumpable); the flag is put back once no thread
 * is switched, so that core dumps and /proc ownership stay as they were.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
#include <linux/capability.h>

#include "engine/atfork.h"
#include "transport/shm.h"

/* Has the calling thread CAP_SYS_PTRACE in its effective set? */
static int ptrace_capable(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];

	if (syscall(SYS_capget, &h, d))
		return -errno;
	return !!(d[CAP_TO_INDEX(CAP_SYS_PTRACE)].effective &
		  CAP_TO_MASK(CAP_SYS_PTRACE));
}

static pthread_mutex_t dump_lock = PTHREAD_MUTEX_INITIALIZER;
static int dump_switched;	/* threads with the peer's credentials */
static int dump_was;		/* PR_GET_DUMPABLE before the first */
static pthread_once_t dump_once = PTHREAD_ONCE_INIT;

static void dump_prepare(void)
{
	pthread_mutex_lock(&dump_lock);
}

static void dump_after(void)
{
	pthread_mutex_unlock(&dump_lock);
}

static void dump_init(void)
{
	sdp_atfork_add(SDP_ATFORK_INNER, dump_prepare, dump_after, dump_after);
}

static void dump_enter(void)
{
	pthread_once(&dump_once, dump_init);
	pthread_mutex_lock(&dump_lock);
	if (dump_switched++ == 0)
		dump_was = prctl(PR_GET_DUMPABLE);
	pthread_mutex_unlock(&dump_lock);
}

static void dump_leave(void)
{
	pthread_mutex_lock(&dump_lock);
	if (--dump_switched == 0 && dump_was == 1)
		prctl(PR_SET_DUMPABLE, 1);
	pthread_mutex_unlock(&dump_lock);
}

static ssize_t vm_call(const struct shm_qp *qp, bool write,
		       const struct iovec *l, unsigned long nl,
		       const struct iovec *r, unsigned long nr)
{
	ssize_t n = write ? process_vm_writev(qp->peer_pid, l, nl, r, nr, 0) :
			    process_vm_readv(qp->peer_pid, l, nl, r, nr, 0);

	return n < 0 ? -errno : n;
}

static void restore_or_die(long nr, unsigned r, unsigned e)
{
	if (syscall(nr, r, e, -1))
		abort();
}

/* The switch itself; signals are blocked. */
static ssize_t vm_as_peer(const struct shm_qp *qp, bool write,
			  const struct iovec *local, unsigned long nl,
			  const struct iovec *remote, unsigned long nr)
{
	uid_t ru, eu, su;
	gid_t rg, eg, sg;
	ssize_t n;
	int e;

	if (getresuid(&ru, &eu, &su) || getresgid(&rg, &eg, &sg))
		return -errno;
	/* Coming back needs the old ids among those we keep. */
	if ((ru != su && ru != qp->peer_uid) ||
	    (eu != su && eu != qp->peer_uid) ||
	    (rg != sg && rg != qp->peer_gid) ||
	    (eg != sg && eg != qp->peer_gid))
		return -EPERM;
	dump_enter();
	if (syscall(SYS_setresgid, qp->peer_gid, qp->peer_gid, -1)) {
		e = -errno;
		dump_leave();
		return e;
	}
	if (syscall(SYS_setresuid, qp->peer_uid, qp->peer_uid, -1)) {
		e = -errno;
		restore_or_die(SYS_setresgid, rg, eg);
		dump_leave();
		return e;
	}
	/* Without SECBIT_NO_SETUID_FIXUP the uid change dropped the
	 * effective capabilities; with it, it did not, and the call would
	 * be as privileged as before. */
	n = ptrace_capable() == 0 ? vm_call(qp, write, local, nl, remote, nr) :
				    -EPERM;
	restore_or_die(SYS_setresuid, ru, eu);
	restore_or_die(SYS_setresgid, rg, eg);
	dump_leave();
	return n;
}

ssize_t sdp__shm_vm_rw(const struct shm_qp *qp, bool write,
		       const struct iovec *local, unsigned long nl,
		       const struct iovec *remote, unsigned long nr)
{
	sigset_t all, old;
	ssize_t n;
	int cap = ptrace_capable();

	/* A root peer has every right we have: no switch. */
	if (cap == 0 || (cap > 0 && qp->peer_uid == 0))
		return vm_call(qp, write, local, nl, remote, nr);
	if (cap < 0)
		return cap;
	if (qp->peer_uid == (uid_t)-1 || qp->peer_gid == (gid_t)-1)
		return -EPERM;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	n = vm_as_peer(qp, write, local, nl, remote, nr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return n;
}
