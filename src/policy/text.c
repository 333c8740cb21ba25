/* SPDX-License-Identifier: MIT */
#include "policy/text.h"

#include <stdio.h>
#include <string.h>

char *sdp_text_escape(char *out, size_t outlen, const char *in)
{
	const size_t room = outlen > 4 ? outlen - 4 : 0;	/* "..." + NUL */
	const unsigned char *s = (const unsigned char *)in;
	size_t n = 0;

	if (!outlen)
		return out;
	for (; *s; s++) {
		char one[5];
		size_t k;

		if (*s == '\\')
			k = (size_t)snprintf(one, sizeof(one), "\\\\");
		else if (*s >= 0x20 && *s < 0x7f)
			k = (size_t)snprintf(one, sizeof(one), "%c", *s);
		else
			k = (size_t)snprintf(one, sizeof(one), "\\x%02x", *s);
		if (n + k > room) {
			if (outlen > 4) {
				memcpy(out + n, "...", 3);
				n += 3;
			}
			break;
		}
		memcpy(out + n, one, k);
		n += k;
	}
	out[n] = '\0';
	return out;
}
