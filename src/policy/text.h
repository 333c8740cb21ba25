/* SPDX-License-Identifier: MIT */
/*
 * text.h — quoting untrusted text in messages.  A configuration file or an
 * environment value may hold anything (a binary named by mistake, escape
 * sequences that move a terminal's cursor); a message that quotes it stays one
 * readable line.
 */
#ifndef SDP_POLICY_TEXT_H
#define SDP_POLICY_TEXT_H

#include <stddef.h>

/* Copy the NUL-terminated `in` into `out` (always NUL-terminated, at most
 * outlen bytes): printable ASCII as is, a backslash as "\\", every other
 * byte as "\xNN".  Text that does not fit ends in "...".  Returns out. */
char *sdp_text_escape(char *out, size_t outlen, const char *in);

#endif
