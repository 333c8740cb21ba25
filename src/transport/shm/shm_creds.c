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
 * any image at that pid, so the calling thread alone (capabilities are per
 * thread; the raw system call) makes the call without CAP_SYS_PTRACE in its
 * effective set, and takes it back right after.  The kernel's own check
 * then decides, atomically with respect to an exec of the peer: only a
 * peer running as our own user, still dumpable (not setuid, ids unchanged),
 * is reached.  A root process and a peer of another user thus exchange
 * data by copies, never by RDMA (the probe refuses a peer of other ids,
 * shm_rdma.c).
 *
 * A root peer too: it may have changed its ids since its Hello (a daemon
 * that drops privileges), and the kernel then compares them, as it should;
 * a root peer that has not is reached as before (same uid, capabilities
 * within our permitted set).
 *
 * Nothing else changes for the thread: its ids stay, so no other user may
 * signal it meanwhile, and the capability it gives up for one copy is only
 * ever used by the ptrace check.  Every signal is blocked meanwhile (the
 * raw system call: glibc keeps its own set-id signal out of a mask, and a
 * setuid() in another thread, which runs in every thread, would clear the
 * permitted set under us).  If the capability cannot be taken back the
 * process aborts: it must not go on with capabilities other than its own.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
#include <linux/capability.h>

#include "transport/shm/shm.h"

static ssize_t vm_call(const struct shm_qp *qp, bool write,
		       const struct iovec *l, unsigned long nl,
		       const struct iovec *r, unsigned long nr)
{
	ssize_t n = write ? process_vm_writev(qp->peer_pid, l, nl, r, nr, 0) :
			    process_vm_readv(qp->peer_pid, l, nl, r, nr, 0);

	return n < 0 ? -errno : n;
}

ssize_t sdp__shm_vm_rw(const struct shm_qp *qp, bool write,
		       const struct iovec *local, unsigned long nl,
		       const struct iovec *remote, unsigned long nr)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
	const unsigned idx = CAP_TO_INDEX(CAP_SYS_PTRACE);
	const uint32_t bit = CAP_TO_MASK(CAP_SYS_PTRACE);
	uint64_t all = ~0ull, old;
	ssize_t n;

	if (syscall(SYS_capget, &h, d))
		return -errno;
	if (!(d[idx].effective & bit))
		return vm_call(qp, write, local, nl, remote, nr);
	if (syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, &old, sizeof(all)))
		return -errno;
	/* Read again with signals blocked: a set-id change in between. */
	if (syscall(SYS_capget, &h, d) || !(d[idx].effective & bit)) {
		n = vm_call(qp, write, local, nl, remote, nr);
		goto out;
	}
	d[idx].effective &= ~bit;
	if (syscall(SYS_capset, &h, d)) {
		n = -errno;
		goto out;
	}
	n = vm_call(qp, write, local, nl, remote, nr);
	d[idx].effective |= bit;
	if (syscall(SYS_capset, &h, d))
		abort();
out:
	syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, sizeof(old));
	return n;
}
