#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/security/stat-flood.sh BUILD — another user floods a libsdp
# process's sdpstat wake socket (libsdp-stat.PID, an abstract name anyone
# can address).  The victim, A's server with one open connection, must spend
# under 5% of a core on it; sdpstat run by A still reads the victim's
# records afterwards.
. "$(dirname "$0")/lib.sh"
SECS=5
bg server as sdpsec-a "${PRE[@]}" "${PY[@]}" "$TMP/echo.py" server "$TMP/a/port"
wait_line "$TMP/a/port" "" || { check start "the server starts" false; finish; }
read -r PORT SRV <"$TMP/a/port"
mkfifo "$TMP/a/go"
chown sdpsec-a "$TMP/a/go"
as sdpsec-a "${PRE[@]}" "${PY[@]}" "$TMP/echo.py" client "$PORT" 1000000 hold \
	<"$TMP/a/go" >"$TMP/held.out" 2>&1 &
HELD=$!
PIDS="$PIDS $HELD"
exec 7>"$TMP/a/go"
wait_line "$TMP/held.out" holding || { check held "the held client connects" false; finish; }
# An idle libsdp process settles before the measurement.
before=$(cpu_ticks "$SRV")
as sdpsec-b "${PY[@]}" "$TMP/flood.py" "$SRV" "$SECS" >"$TMP/flood.out" 2>&1
after=$(cpu_ticks "$SRV")
hz=$(getconf CLK_TCK)
note "$(cat "$TMP/flood.out"); victim: $((after - before)) ticks of $hz/s in $SECS s"
check flood-sent "the flood ran" grep -q '^sent [1-9]' "$TMP/flood.out"
check flood-cost "a $SECS s flood from another user costs the victim under 5% of a core" \
	test $(((after - before) * 100)) -lt $((5 * SECS * hz))
as sdpsec-a "$TMP/bin/sdpstat" -a -p "$SRV" >"$TMP/sdpstat.out" 2>&1
check sdpstat-after "sdpstat run by the victim's user still lists its connection" \
	grep -q ESTABLISHED "$TMP/sdpstat.out" || cat "$TMP/sdpstat.out"
echo >&7
wait "$HELD"
check held-intact "the victim's connection carries on, bytes intact" grep -qx "ok transport=1" "$TMP/held.out"
finish
