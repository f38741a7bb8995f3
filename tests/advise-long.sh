#!/bin/sh
# advise-long.sh (make check-long) - advise and blame on every bundled real trace: advise exits 0
# with one recommendation that replays without OOM in the capacity it says it needs; blame's
# recorded peak is PyTorch's own reserved_bytes.all.peak and its parts add up to it.
. "${srcdir:-.}/tests/lib.sh"
A=$ALLOCSIM
GT="$T/ground-truth.csv"
gt() { awk -F, -v n="$1" -v c="$2" 'NR==1{for(i=1;i<=NF;i++) if($i==c) k=i} $1==n {print $k}' "$GT"; }
for f in "$T"/*.pickle.gz; do
	b=$(basename "$f" .pickle.gz)
	cap=$(gt "$b" capacity_bytes)
	run "$A" advise --format csv ${cap:+--capacity $cap} "$f"
	is "$st" 0 "$b: advise exits 0${cap:+ at the recorded limit}"
	rec=$(printf '%s\n' "$out" | csv_bars | awk -F'|' 'NR>1 && $NF==1 {print $3 "|" $13}')
	is "$(printf '%s\n' "$rec" | grep -c .)" 1 "$b: one recommendation"
	conf=${rec%|*}; need=${rec#*|}
	r=$("$A" replay -c "$conf" --capacity "${need:-1}" --no-timing "$f")
	is "$(col "$r" num_ooms)" 0 "$b: the recommendation ('$conf') fits in what advise says it needs ($need)"
	run "$A" blame --format table "$f"
	is "$st" 0 "$b: blame exits 0"
	v=$(printf '%s\n' "$out" | sed -n '1,2p' | tr -d '()' | awk '{for(i=1;i<=NF;i++) if($i=="bytes" || $i=="bytes,") v[++n]=$(i-1)} END{printf "%.0f %.0f", v[1], v[2]+v[3]+v[4]}')
	is "${v% *}" "$(gt "$b" peak_reserved)" "$b: blame's recorded peak = PyTorch's reserved_bytes.all.peak"
	[ "$st" = 0 ] && [ -n "$out" ] && [ "${v% *}" = "${v#* }" ]; ok $? "$b: requested + fenced + cached = reserved at the peak"
done
finish
