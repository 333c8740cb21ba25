// SPDX-License-Identifier: MIT
/*
 * appwake.c — when the peer may wake our application directly (appwake.h).
 */
#include "engine/appwake.h"

#include <errno.h>
#include <string.h>

#include "base/config.h"
#include "engine/conn.h"
#include "engine/progress.h"
#include "engine/readiness.h"
#include "transport/multi.h"
#include "transport/transport.h"
#include "transport/wakeword.h"

/* The connection's transport's application wake-up, or NULL. */
static const struct sdp_app_wake_ops *appwake_ops(const struct sdp_conn *c)
{
	return c->qp ? SDP_TP(c->qp)->app_wake : NULL;
}

__thread uint64_t sdp_appwake_sleep_id;

int sdp_appwake_set_sleeps_locked(const struct sdp_conn *c)
{
	return (c->ready && c->ready->user.sleepers) ||
	       (c->wake_word >= 0 && sdp_wakeword_sleeping(c->wake_word));
}

int sdp_appwake_user_locked(const struct sdp_conn *c)
{
	return c->ready && c->ready->user.on &&
	       !sdp_appwake_set_sleeps_locked(c);
}

/* The transport's quiet arm is keyed to the set's word (or not). */
static void armed_word(struct sdp_conn *c, int quiet)
{
	int w = quiet ? c->wake_word : -1;

	if (atomic_load_explicit(&c->armed_word, memory_order_relaxed) != w)
		atomic_store_explicit(&c->armed_word, w, memory_order_relaxed);
}

int sdp_appwake_armed_word(const struct sdp_conn *c)
{
	return atomic_load_explicit(&c->armed_word, memory_order_relaxed);
}

int sdp_appwake_word_locked(struct sdp_conn *c, int handle)
{
	const struct sdp_app_wake_ops *tp = appwake_ops(c);

	/* The peer gets our wake page with our readiness descriptor: not
	 * shared yet, ask again at the next look. */
	if (c->wake_word_of == handle || !c->app_fd_shared)
		return 0;
	c->wake_word_of = handle;
	c->wake_word = tp && tp->app_word(c->qp, handle) ? handle : -1;
	c->app_quiet = 0;	/* re-made with the word by the next update */
	return 1;
}

int sdp_appwake_disarm_locked(struct sdp_conn *c)
{
	const struct sdp_app_wake_ops *tp = appwake_ops(c);

	if (!c->app_armed || !tp)
		return 0;
	c->app_armed = 0;
	c->app_quiet = 0;
	armed_word(c, 0);
	if (tp->app_arm(c->qp, 0) != 1)
		return 0;
	if (c->ready)
		sdp_ready_peer_token(c->ready);
	return 1;
}

int sdp_appwake_kernel_watch_locked(struct sdp_conn *c)
{
	if (!c->ready || atomic_load(&c->ready->kwatched))
		return 0;
	atomic_store(&c->ready->kwatched, true);
	return 1;
}

/* No wait in the kernel has named the descriptor yet: the application
 * learns of news only by calling in (a blocking call sleeps on the QP, not
 * on the descriptor).  The arm is then quiet for every message (an EOF or
 * a reset, too, is read by that call) and our descriptor stays ours: a
 * connection per request saves handing it over (a message with
 * SCM_RIGHTS, whose receipt wakes the peer's progress thread) and the
 * bytes the peer would write, and the peer does not ring the progress
 * thread for messages the application takes by itself. */
static int kernel_unwatched(const struct sdp_conn *c)
{
	return !atomic_load_explicit(&c->ready->kwatched,
				     memory_order_relaxed) &&
	       !c->held_elsewhere;
}

/* The peer rings the progress doorbell instead of writing our readiness
 * byte.  The arm this replaces may have been quiet or alone, under which a
 * message is announced to nobody: one already there is reported, as
 * app_arm() reports a message already in the ring, and the caller takes it
 * in (an application that polls now would otherwise sleep beside it).
 * req_notify() then left the doorbell unarmed, and the caller's next round
 * may not come back here: the progress thread services the connection at
 * its next turn, which arms it again (as when its own loop stops at its
 * cap). */
static int doorbell_instead(struct sdp_conn *c)
{
	if (SDP_TP(c->qp)->req_notify(c->qp) <= 0)
		return 0;
	sdp_progress_arm_timer(c);
	return 1;
}

int sdp_appwake_arm_locked(struct sdp_conn *c, unsigned mask)
{
	const struct sdp_app_wake_ops *tp = appwake_ops(c);
	int unwatched, quiet;

	/* A lone socket (readiness.h) has no library end yet, and needs
	 * none to be armed alone; a paired one without it is reset. */
	if (!tp || !sdp_cfg.appwake || !c->ready ||
	    (c->ready->lib_fd < 0 && !atomic_load(&c->ready->lone)) ||
	    c->ready->eof ||
	    c->app_armed || c->orphan || c->detached || c->appwake_off)
		return 0;
	if (c->state != SDP_ST_ESTABLISHED && c->state != SDP_ST_FIN_WAIT)
		return 0;
	unwatched = kernel_unwatched(c);
	quiet = unwatched || sdp_appwake_user_locked(c);
	/* Something to read, or work only the progress thread would do when
	 * the next message comes: leave that message to the doorbell. */
	/* Quiet, unread data is no reason not to arm: the application
	 * comes back for it by itself, and a further message then needs no
	 * one either. */
	if ((mask & (quiet ? 0 : SDP_READY_IN)) ||
	    (mask & (SDP_READY_EOF | SDP_READY_ERR)) ||
	    c->txq_len || (c->wr_shut && !c->disconn_sent))
		return 0;
	if (!c->app_fd_shared && !unwatched) {
		int r = tp->share_app_fd(c->qp, c->ready->lib_fd);

		/* -ENOTCONN, -EAGAIN: not yet, try on the next update. */
		if (r < 0 && r != -ENOTCONN && r != -EAGAIN) {
			sdp_log(SDP_LOG_INFO, "conn %u: direct wake-up off: %s",
				c->id, strerror(-r));
			c->appwake_off = 1;	/* stay on the doorbell */
		}
		if (r < 0)
			return doorbell_instead(c);
		sdp_log(SDP_LOG_DEBUG, "conn %u: direct wake-up on", c->id);
		c->app_fd_shared = 1;
	}
	c->app_armed = 1;
	c->app_quiet = quiet;
	armed_word(c, quiet);
	if (!quiet)
		tp->app_sleep_id(c->qp, sdp_appwake_sleep_id);
	return tp->app_arm(c->qp, unwatched ? SDP_APP_ARM_ALONE :
				  quiet ? SDP_APP_ARM_QUIET : 1) == 1;
}

void sdp_appwake_arm_queued_locked(struct sdp_conn *c)
{
	const struct sdp_app_wake_ops *tp = appwake_ops(c);

	if (!tp || !sdp_cfg.appwake || c->app_armed || c->ready)
		return;
	c->app_armed = 1;
	c->app_quiet = 1;
	tp->app_arm(c->qp, SDP_APP_ARM_ALONE);	/* accept looks anyway */
}

void sdp_appwake_stop_locked(struct sdp_conn *c)
{
	const struct sdp_app_wake_ops *tp = appwake_ops(c);

	if (tp)
		tp->drop_peer_app_fd(c->qp);
}

void sdp_appwake_spin_locked(struct sdp_conn *c)
{
	const struct sdp_app_wake_ops *tp = appwake_ops(c);

	if (!tp || !c->app_armed || c->app_quiet)
		return;
	if (sdp_appwake_disarm_locked(c))
		return;		/* a byte came: accounted, stay unarmed */
	c->app_armed = 1;
	c->app_quiet = 1;
	armed_word(c, 1);
	tp->app_arm(c->qp, SDP_APP_ARM_QUIET);
}

int sdp_appwake_capable_locked(const struct sdp_conn *c)
{
	return appwake_ops(c) != NULL;
}

const _Atomic uint32_t *sdp_appwake_arrivals_locked(struct sdp_conn *c)
{
	const struct sdp_app_wake_ops *tp = appwake_ops(c);

	return tp ? tp->app_arrivals(c->qp) : NULL;
}

int sdp_appwake_quiet_idle_locked(struct sdp_conn *c)
{
	return c->app_armed && c->app_quiet &&
	       appwake_ops(c)->app_arm(c->qp, SDP_APP_ARM_QUIET) == 0;
}

int sdp_appwake_sleep_begin(void)
{
	return sdp_tp_app_sleep_begin();
}

void sdp_appwake_sleep_end(int token)
{
	sdp_tp_app_sleep_end(token);
}

void sdp_appwake_look(void)
{
	sdp_tp_app_look();
}

int sdp_appwake_set_word_alloc(void)
{
	return sdp_wakeword_alloc();
}

void sdp_appwake_set_word_free(int handle)
{
	sdp_wakeword_free(handle);
}

void sdp_appwake_set_word_sleep(int handle, int delta)
{
	sdp_wakeword_sleep(handle, delta);
}
