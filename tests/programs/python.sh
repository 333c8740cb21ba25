#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Debian's python3 under sdp_run: asyncio streams (server and client moving
# 16 MiB, sha256 echoed back), http.server with urllib fetching an 8 MiB
# file (sha256), then fallback both ways; 150 connections under a soft
# descriptor limit of 256, 50 under a hard one.
# Evidence: getsockopt(IPPROTO_TCP, SDP_CONN_TRANSPORT=90) from Python on
# each socket (1 = shm; ENOPROTOOPT = kernel TCP), and SDP_LOG=3 for
# http.server.
KNOWN_FAILURES=""
. "$(dirname "$0")/common.sh"
need_pkg python3 /usr/bin/python3
PY=/usr/bin/python3 # Debian's, not a pyenv or venv shim

cat >"$TMP/common.py" <<'EOF'
import errno, socket
def transport(sock):
    try:
        v = sock.getsockopt(socket.IPPROTO_TCP, 90)
        return {1: "shm", 2: "loop", 3: "verbs"}.get(v, "sdp?%d" % v)
    except OSError as e:
        return "tcp" if e.errno == errno.ENOPROTOOPT else "err:%d" % e.errno
EOF
cat >"$TMP/aserver.py" <<'EOF'
import asyncio, hashlib, sys
sys.path.insert(0, sys.argv[2])
from common import transport
async def handle(reader, writer):
    h = hashlib.sha256()
    n = 0
    while True:
        b = await reader.read(65536)
        if not b:
            break
        h.update(b)
        n += len(b)
    tr = transport(writer.get_extra_info("socket"))
    writer.write(("%s %d %s\n" % (h.hexdigest(), n, tr)).encode())
    await writer.drain()
    writer.close()
    await writer.wait_closed()
    print("server", tr, n, h.hexdigest(), flush=True)
async def main():
    srv = await asyncio.start_server(handle, "127.0.0.1", int(sys.argv[1]))
    print("listening", flush=True)
    async with srv:
        await srv.serve_forever()
asyncio.run(main())
EOF
cat >"$TMP/aclient.py" <<'EOF'
import asyncio, hashlib, os, sys
sys.path.insert(0, sys.argv[2])
from common import transport
async def main():
    reader, writer = await asyncio.open_connection("127.0.0.1", int(sys.argv[1]))
    tr = transport(writer.get_extra_info("socket"))
    h = hashlib.sha256()
    total = 16 << 20
    sent = 0
    while sent < total:
        b = os.urandom(min(1 << 20, total - sent))
        h.update(b)
        writer.write(b)
        await writer.drain()
        sent += len(b)
    writer.write_eof()
    line = (await reader.readline()).decode().split()
    writer.close()
    ok = line[0] == h.hexdigest() and int(line[1]) == total
    print("client", tr, "server", line[2], "sha256", "match" if ok else "MISMATCH", flush=True)
asyncio.run(main())
EOF
cat >"$TMP/fetch.py" <<'EOF'
import hashlib, sys, urllib.request
sys.path.insert(0, sys.argv[2])
from common import transport
with urllib.request.urlopen(sys.argv[1], timeout=20) as r:
    try:
        tr = transport(r.fp.raw._sock)
    except Exception as e:
        tr = "unknown(%s)" % e
    data = r.read()
print(hashlib.sha256(data).hexdigest(), len(data), tr)
EOF

# asyncio SRVWRAP CLIWRAP TAG: one exchange; prints the client line.
asyncio_case() {
	local sw=$1 cw=$2 tag=$3 port srv line
	port=$(rand_port)
	if [ "$sw" = sdp ]; then
		bg "$tag-srv" "$SDP_RUN" -d $PY "$TMP/aserver.py" "$port" "$TMP"
	else
		bg "$tag-srv" $PY "$TMP/aserver.py" "$port" "$TMP"
	fi
	srv=$BG_PID
	wait_listen "$port" || true
	if [ "$cw" = sdp ]; then
		tmo 60 "$SDP_RUN" -d $PY "$TMP/aclient.py" "$port" "$TMP" >"$TMP/$tag-cli.out" 2>"$TMP/$tag-cli.err"
	else
		tmo 60 $PY "$TMP/aclient.py" "$port" "$TMP" >"$TMP/$tag-cli.out" 2>"$TMP/$tag-cli.err"
	fi
	line=$(cat "$TMP/$tag-cli.out")
	local want_c=tcp want_s=tcp
	[ "$sw" = sdp ] && [ "$cw" = sdp ] && want_c=shm want_s=shm
	check "asyncio-$tag" "asyncio streams, $sw server / $cw client: 16 MiB, sha256 match ($line)" \
		file_has "$TMP/$tag-cli.out" "sha256 match"
	check "asyncio-$tag-transport" "transports: client $want_c, server $want_s" \
		file_has "$TMP/$tag-cli.out" "^client $want_c server $want_s "
	[ "$NFAIL" -gt 0 ] && show "$TMP/$tag-cli.err" "$TMP/$tag-srv.err"
	stop "$srv"
}

asyncio_case sdp sdp sdp
asyncio_case plain sdp fallback-client
check "asyncio-fallback-client-log" "client SDP_LOG: over TCP: no SDP listener" \
	file_has "$TMP/fallback-client-cli.err" "over TCP: no SDP listener"
asyncio_case sdp plain fallback-server

# ---- http.server + urllib ------------------------------------------------------
mkdir -p "$TMP/www"
head -c 8388608 /dev/urandom >"$TMP/www/blob.bin"
WANT=$(sha256sum <"$TMP/www/blob.bin" | cut -d' ' -f1)

http_case() { # SRVWRAP CLIWRAP TAG
	local sw=$1 cw=$2 tag=$3 port srv got
	port=$(rand_port)
	if [ "$sw" = sdp ]; then
		bg "$tag-http" "$SDP_RUN" -d $PY -m http.server "$port" --bind 127.0.0.1 --directory "$TMP/www"
	else
		bg "$tag-http" $PY -m http.server "$port" --bind 127.0.0.1 --directory "$TMP/www"
	fi
	srv=$BG_PID
	wait_listen "$port" || true
	local url="http://127.0.0.1:$port/blob.bin"
	if [ "$cw" = sdp ]; then
		tmo 30 "$SDP_RUN" -d $PY "$TMP/fetch.py" "$url" "$TMP" >"$TMP/$tag-fetch.out" 2>"$TMP/$tag-fetch.err"
	else
		tmo 30 $PY "$TMP/fetch.py" "$url" "$TMP" >"$TMP/$tag-fetch.out" 2>"$TMP/$tag-fetch.err"
	fi
	got=$(cut -d' ' -f1 "$TMP/$tag-fetch.out")
	check "http-$tag" "http.server ($sw) + urllib ($cw): 8 MiB, sha256 ${got:0:16}.. (want ${WANT:0:16}..)" \
		eq "$got" "$WANT"
	local want=tcp
	[ "$sw" = sdp ] && [ "$cw" = sdp ] && want=shm
	check "http-$tag-transport" "urllib's socket is $want ($(cut -s -d' ' -f3 "$TMP/$tag-fetch.out"))" \
		eq "$(cut -s -d' ' -f3 "$TMP/$tag-fetch.out")" "$want"
	if [ "$sw" = sdp ]; then
		if [ "$want" = shm ]; then
			check "http-$tag-server" "http.server's SDP_LOG shows an SDP connection" \
				ge "$(log_sdp_established "$TMP/$tag-http.err")" 1
		else
			check "http-$tag-server" "http.server's SDP_LOG shows no SDP connection" \
				eq "$(log_sdp_established "$TMP/$tag-http.err")" 0
		fi
	fi
	[ "$NFAIL" -gt 0 ] && show "$TMP/$tag-fetch.err" "$TMP/$tag-http.err"
	stop "$srv"
}
http_case sdp sdp sdp
http_case plain sdp fallback-client
http_case sdp plain fallback-server

# ---- many connections under a low soft RLIMIT_NOFILE ---------------------------
# An SDP connection costs its process 4 descriptors where TCP costs one;
# libsdp raises the soft limit at load (socket/fdlimit.c), so 150
# connection pairs in one process fit under `ulimit -S -n 256` as with TCP.
cat >"$TMP/many.py" <<'EOF'
import hashlib, resource, socket, sys
sys.path.insert(0, sys.argv[1])
from common import transport
N = int(sys.argv[2])
l = socket.socket()
l.bind(("127.0.0.1", 0))
l.listen(N)
pairs = []
for i in range(N):
    c = socket.create_connection(l.getsockname())
    s, _ = l.accept()
    pairs.append((c, s))
bad = 0
for i, (c, s) in enumerate(pairs):
    msg = hashlib.sha256(b"%d" % i).digest() * 64
    c.sendall(msg)
    got = b""
    while len(got) < len(msg):
        got += s.recv(len(msg) - len(got))
    s.sendall(hashlib.sha256(got).digest())
    bad += c.recv(32) != hashlib.sha256(msg).digest()
kinds = sorted(set(transport(x) for p in pairs for x in p))
print("pairs", N, "bad", bad, "transports", ",".join(kinds),
      "soft", resource.getrlimit(resource.RLIMIT_NOFILE)[0], flush=True)
EOF
tmo 60 bash -c 'ulimit -S -n 256 && exec "$@"' _ "$SDP_RUN" $PY "$TMP/many.py" "$TMP" 150 \
	>"$TMP/many.out" 2>"$TMP/many.err"
check "many-low-nofile" "150 connection pairs under ulimit -S -n 256, all over shm, data checked ($(cat "$TMP/many.out"))" \
	file_has "$TMP/many.out" "^pairs 150 bad 0 transports shm "
# A hard limit of 256 cannot be raised: SDP takes at most half of it
# (8 descriptors a connection), the other connections go TCP, and all of
# them work, as over TCP alone.
tmo 60 bash -c 'ulimit -n 256 && exec "$@"' _ "$SDP_RUN" $PY "$TMP/many.py" "$TMP" 50 \
	>"$TMP/many-hard.out" 2>"$TMP/many-hard.err"
check "many-hard-nofile" "50 connection pairs under ulimit -n 256 (hard), part shm, part TCP, data checked ($(cat "$TMP/many-hard.out"))" \
	file_has "$TMP/many-hard.out" "^pairs 50 bad 0 transports shm,tcp "
[ "$NFAIL" -gt 0 ] && show "$TMP/many.err" "$TMP/many-hard.err"
finish
