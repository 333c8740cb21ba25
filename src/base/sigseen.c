/* SPDX-License-Identifier: MIT */
/*
 * sigseen.c — the per-thread handler counts (sigseen.h).  They live in the
 * engine, which reads them; socket/signals.c, where the library is
 * preloaded, is what moves them.
 */
#include "base/sigseen.h"

SDP_SIG_TLS unsigned sdp_sig_seen;
SDP_SIG_TLS unsigned sdp_sig_seen_norestart;
