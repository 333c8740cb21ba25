#!/bin/sh
# ZCopy sweeps: reproduce the seed paper's BCopy/ZCopy figures 5-11 with
# build/bin/sdpperf and render them as PNG with gnuplot.
#
#   scripts/bench-zcopy.sh            run the sweeps, write CSV, render PNGs
#   scripts/bench-zcopy.sh --plot     only re-render from the existing CSV
#
# Output: build/bench/zcopy-stream.csv, build/bench/zcopy-rr.csv,
#         build/bench/zcopy-crossover.md, docs/img/zcopy-*.png
#
# Modes: "bcopy" = SDP with SDP_ZCOPY_THRESH=0 (BCopy only),
#        "zcopy" = SDP with SDP_ZCOPY_THRESH=4096 (ZCopy for every message
#                  above 4 KiB, the seeds' "threshold 0"),
#        "tcp"   = kernel TCP over loopback.
# Each point is the median of 3 one-second runs (BENCH_REPEAT, BENCH_TIME,
# BENCH_WARMUP override); about 6 minutes on a 2-core machine, 2 minutes
# with BENCH_REPEAT=1. The numbers are noisy either way.
set -eu

cd "$(dirname "$0")/.."
PERF=build/bin/sdpperf
OUT=build/bench
IMG=docs/img
DAT=$OUT/zcopy-dat
TIME=${BENCH_TIME:-1}
WARMUP=${BENCH_WARMUP:-0.3}
REPEAT=${BENCH_REPEAT:-3}
STREAM_SIZES="4096 16384 65536 262144 1048576 4194304"
STREAM_CONNS="1 2 4 8"
RR_SIZES="1 1024 16384 65536 262144 1048576"
BCOPY_ENV="SDP_ZCOPY_THRESH=0"
ZCOPY_ENV="SDP_ZCOPY_THRESH=4096"

plot_only=0
[ "${1:-}" = "--plot" ] && plot_only=1

if ! command -v gnuplot >/dev/null 2>&1; then
	SDP_EXTRA_PKGS=gnuplot-nox scripts/install-deps.sh
fi
[ -x "$PERF" ] || { echo "bench-zcopy: $PERF missing; build first" >&2; exit 1; }
mkdir -p "$OUT" "$IMG" "$DAT"

# json2csv MODE: read sdpperf --json on stdin, print CSV rows for MODE.
# Stream rows: mode,conns,size,mb_per_s,cpu_s_per_gb
# RR rows:     mode,size,p50_us,p99_us
json2csv() {
	python3 -c '
import json, sys
mode = sys.argv[1]
d = json.load(sys.stdin)
for r in d["results"]:
    if not r.get("ok"):
        print("bench-zcopy: %s %s failed" % (mode, r.get("transport")), file=sys.stderr)
        continue
    m = "tcp" if r["transport"] == "tcp" else mode
    if r["workload"] == "stream":
        print("%s,%d,%d,%.1f,%.4f" % (m, d["conns"], r["msg_size"], r["mb_per_s"], r["cpu_s_per_gb"]))
    else:
        print("%s,%d,%.1f,%.1f" % (m, r["msg_size"], r["p50_us"], r["p99_us"]))
' "$1"
}

run() { # run MODE WORKLOAD TRANSPORTS SIZE CONNS ENV
	"$PERF" --workload "$2" --transports "$3" --size "$4" --conns "$5" \
		--time "$TIME" --warmup "$WARMUP" --repeat "$REPEAT" \
		--env "$6" --json | json2csv "$1"
}

if [ "$plot_only" -eq 0 ]; then
	start=$(date +%s)
	# Stream: every size for 1, 2, 4, 8 connections. This one grid feeds
	# figures 5-7 (size sweeps), 8-9 (connection sweeps) and the crossover.
	# BCopy and TCP share one sdpperf call; the modes alternate per point
	# so that slow drifts of the machine hit all three alike.
	csv=$OUT/zcopy-stream.csv
	echo "mode,conns,size,mb_per_s,cpu_s_per_gb" >"$csv"
	for c in $STREAM_CONNS; do
		for s in $STREAM_SIZES; do
			echo "bench-zcopy: stream conns=$c size=$s" >&2
			run bcopy stream sdp,tcp "$s" "$c" "$BCOPY_ENV" >>"$csv"
			run zcopy stream sdp "$s" "$c" "$ZCOPY_ENV" >>"$csv"
		done
	done
	# Request/response latency, 1 connection, ZCopy off vs on.
	csv=$OUT/zcopy-rr.csv
	echo "mode,size,p50_us,p99_us" >"$csv"
	for s in $RR_SIZES; do
		echo "bench-zcopy: rr size=$s" >&2
		run bcopy rr sdp,tcp "$s" 1 "$BCOPY_ENV" >>"$csv"
		run zcopy rr sdp "$s" 1 "$ZCOPY_ENV" >>"$csv"
	done
	echo "bench-zcopy: sweeps took $(($(date +%s) - start)) s" >&2
fi

# Per-series data files for gnuplot.
rm -f "$DAT"/*.dat
awk -F, -v d="$DAT" 'NR > 1 {
	print $3, $4, $5 >> (d "/s-" $1 "-c" $2 ".dat")   # size series
	print $2, $4 >> (d "/n-" $1 "-s" $3 ".dat")       # conns series
}' "$OUT/zcopy-stream.csv"
awk -F, -v d="$DAT" 'NR > 1 { print $2, $3, $4 >> (d "/rr-" $1 ".dat") }' "$OUT/zcopy-rr.csv"

# Crossover: for each connection count, the smallest swept size from which
# ZCopy bandwidth >= BCopy bandwidth at that size and every larger one.
python3 - "$OUT/zcopy-stream.csv" >"$OUT/zcopy-crossover.md" <<'EOF'
import csv, sys
bw = {}
for r in csv.DictReader(open(sys.argv[1])):
    bw[(r["mode"], int(r["conns"]), int(r["size"]))] = float(r["mb_per_s"])
def h(n):
    return "%d MiB" % (n >> 20) if n >= 1 << 20 else "%d KiB" % (n >> 10)
conns = sorted({k[1] for k in bw})
sizes = sorted({k[2] for k in bw})
print("| conns | ZCopy/BCopy bandwidth at " + ", ".join(h(s) for s in sizes) + " | crossover |")
print("|---|---|---|")
for c in conns:
    ratios = [bw.get(("zcopy", c, s), 0) / bw[("bcopy", c, s)] for s in sizes]
    cross = None
    for i in range(len(sizes)):
        if all(r >= 1.0 for r in ratios[i:]):
            cross = i
            break
    if cross is None:
        txt = "none up to %s" % h(sizes[-1])
    elif cross == 0:
        txt = "at or below %s" % h(sizes[0])
    else:
        txt = "between %s and %s" % (h(sizes[cross - 1]), h(sizes[cross]))
    print("| %d | %s | %s |" % (c, " / ".join("%.2f" % r for r in ratios), txt))
EOF
cat "$OUT/zcopy-crossover.md"

# Plots.
gnuplot <<EOF
D = "$DAT"
set terminal pngcairo size 1400,1000 font "DejaVu Sans,12"
set grid
set key top left box opaque
set logscale x 2
SZTICS = '("4K" 4096, "16K" 16384, "64K" 65536, "256K" 262144, "1M" 1048576, "4M" 4194304)'
set style line 1 lc rgb "#1f77b4" lw 2 pt 7 ps 1.3
set style line 2 lc rgb "#d62728" lw 2 pt 5 ps 1.3
set style line 3 lc rgb "#2ca02c" lw 2 pt 9 ps 1.4 dt 2

# Figures 5-7: bandwidth and CPU per GB vs message size, 1 and 8 connections.
set output "$IMG/zcopy-vs-size.png"
set multiplot layout 2,2 title "SDP stream over loopback: BCopy vs ZCopy vs kernel TCP (median of $REPEAT x $TIME s per point, noisy 2-core machine)"
eval("set xtics " . SZTICS)
do for [c in "1 8"] {
  set title sprintf("Bandwidth, %s connection(s)", c)
  set key top left inside vertical; set offsets 0,0,graph 0.3,0
  set xlabel "message size (bytes, log2)"
  set ylabel "bandwidth (MB/s)"
  set yrange [0:*]
  plot D."/s-bcopy-c".c.".dat" u 1:2 w lp ls 1 t "SDP BCopy (SDP\\\\_ZCOPY\\\\_THRESH=0)", \
       D."/s-zcopy-c".c.".dat" u 1:2 w lp ls 2 t "SDP ZCopy (SDP\\\\_ZCOPY\\\\_THRESH=4096)", \
       D."/s-tcp-c".c.".dat"   u 1:2 w lp ls 3 t "kernel TCP"
}
do for [c in "1 8"] {
  set title sprintf("CPU per GB moved (client+server), %s connection(s)", c)
  set xlabel "message size (bytes, log2)"
  set ylabel "CPU seconds per GB"
  set yrange [0:*]
  set key top right inside vertical; set offsets 0,0,0,0
  plot D."/s-bcopy-c".c.".dat" u 1:3 w lp ls 1 t "SDP BCopy", \
       D."/s-zcopy-c".c.".dat" u 1:3 w lp ls 2 t "SDP ZCopy", \
       D."/s-tcp-c".c.".dat"   u 1:3 w lp ls 3 t "kernel TCP"
  set key top left
}
unset multiplot

# Figures 8-9: bandwidth vs connections, 64 KiB and 1 MiB messages.
set output "$IMG/zcopy-vs-conns.png"
set terminal pngcairo size 1400,550 font "DejaVu Sans,12"
set multiplot layout 1,2 title "SDP stream over loopback: bandwidth vs number of connections (median of $REPEAT x $TIME s per point)"
set xtics ("1" 1, "2" 2, "4" 4, "8" 8)
set xrange [0.8:10]
do for [s in "65536 1048576"] {
  set title sprintf("%s messages", s eq "65536" ? "64 KiB" : "1 MiB")
  set xlabel "connections (log2)"
  set ylabel "bandwidth (MB/s)"
  set yrange [0:*]
  plot D."/n-bcopy-s".s.".dat" u 1:2 w lp ls 1 t "SDP BCopy", \
       D."/n-zcopy-s".s.".dat" u 1:2 w lp ls 2 t "SDP ZCopy", \
       D."/n-tcp-s".s.".dat"   u 1:2 w lp ls 3 t "kernel TCP"
}
unset multiplot
set xrange [*:*]

# Figures 10-11: rr latency vs message size.
set output "$IMG/zcopy-latency.png"
set terminal pngcairo size 1000,650 font "DejaVu Sans,12"
set title "Request/response latency (p50, 1 connection, ping-pong of --size bytes each way)"
set xtics ("1" 1, "16" 16, "256" 256, "1K" 1024, "4K" 4096, "16K" 16384, "64K" 65536, "256K" 262144, "1M" 1048576)
set xlabel "message size (bytes, log2)"
set ylabel "p50 latency (µs, log)"
set logscale y 10
set yrange [*:*]
set key top left
plot D."/rr-bcopy.dat" u 1:2 w lp ls 1 t "SDP, ZCopy off (THRESH=0)", \
     D."/rr-zcopy.dat" u 1:2 w lp ls 2 t "SDP, ZCopy on above 4 KiB (THRESH=4096)", \
     D."/rr-tcp.dat"   u 1:2 w lp ls 3 t "kernel TCP"
unset logscale y

# Crossover: ZCopy/BCopy bandwidth ratio vs size per connection count.
set output "$IMG/zcopy-crossover.png"
set title "ZCopy / BCopy bandwidth ratio (above 1 = ZCopy faster)"
eval("set xtics " . SZTICS)
set xlabel "message size (bytes, log2)"
set ylabel "ZCopy bandwidth / BCopy bandwidth"
set yrange [0:*]
set key top left
set arrow 1 from graph 0, first 1 to graph 1, first 1 nohead lc rgb "black" lw 1.5 dt 3
plot for [c in "1 2 4 8"] "< paste ".D."/s-zcopy-c".c.".dat ".D."/s-bcopy-c".c.".dat" \
     u 1:(\$2/\$5) w lp lw 2 pt 7 t sprintf("%s connection(s)", c)
EOF
ls -l "$IMG"/zcopy-*.png
