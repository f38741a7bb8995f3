#!/bin/sh
# layers.sh - the house's floors (scripts/layers.py): util < device, readers, gen < policies < engine <
# cli; no arrow up a floor, device and readers apart, no circle between files, in the include graph
# (#include "...") or in the call graph (nm of every object built: who defines, who uses).
. "${srcdir:-.}/tests/lib.sh"
PY=${PYTHON:-python3}
L="$srcdir/scripts/layers.py"
if ! command -v nm >/dev/null 2>&1 || ! "$PY" -c 'import sys' >/dev/null 2>&1; then
	echo "1..0 # SKIP layers.sh needs nm and python3"; exit 0
fi

# this build: the objects are in the build tree (the tests run there), the sources in srcdir; they
# are the ones the allocsim under test was linked from (else there is nothing to check: stop here)
linked=$(nm -P "$ALLOCSIM" 2>/dev/null | awk '$2 == "T" && ($1 == "as_run" || $1 == "as_source_open" || $1 == "cli_report" || $1 == "as_policy_find") { n++ } END { print n + 0 }')
is "$linked" 4 "the allocsim under test is linked from the objects checked (as_run, as_source_open, cli_report, as_policy_find)"
[ "$linked" = 4 ] || { finish; exit 1; }
run "$PY" "$L" --src "$srcdir" --build .
is "$st" 0 "the include and call graph of this tree has no circle and no upward arrow"
objs=$(printf '%s\n' "$out" | sed -n 's/^layers: [0-9]* files, \([0-9]*\) objects, .*/\1/p')
ok "$([ "${objs:-0}" -ge 60 ] && echo 0 || echo 1)" "the call graph is read from the built objects (${objs:-none} of them)"
is "$(printf '%s\n' "$out" | sed -n 's/.*, \([0-9]*\) violation(s)$/\1/p')" 0 "it reports 0 violations"

# a tree with each fault once: the checker must find each (a checker that says nothing fails here)
CC=${CC:-cc}
mkdir -p "$TMP/t/src/util" "$TMP/t/src/engine" "$TMP/t/src/device" "$TMP/t/src/readers" "$TMP/t/src/gen" "$TMP/t/src/policies"
printf 'struct g { int x; };\n' >"$TMP/t/src/gen/g_impl.h"
printf '#include "engine/e.h"\nint u(void) { return e(); }\n' >"$TMP/t/src/util/u.c"
printf 'int e(void);\n' >"$TMP/t/src/engine/e.h"
printf '#include "util/u.h"\nint e(void) { return u() + 1; }\n' >"$TMP/t/src/engine/e.c"
printf 'int u(void);\n' >"$TMP/t/src/util/u.h"
printf 'int r(void);\nint d(void) { return r(); }\n' >"$TMP/t/src/device/d.c"
printf '#include "gen/g_impl.h"\nint r(void) { return 2; }\n' >"$TMP/t/src/readers/r.c"
printf '#include "q.h"\nint q(void);\nint p(void) { return q(); }\n' >"$TMP/t/src/policies/p.h"
printf '#include "p.h"\n' >"$TMP/t/src/policies/q.h"
printf 'int q(void);\nint p(void) { return q(); }\n' >"$TMP/t/src/policies/p.c"
printf 'int p(void);\nint q(void) { return p() + 1; }\n' >"$TMP/t/src/policies/q.c"
for f in src/util/u src/engine/e src/device/d src/readers/r src/policies/p src/policies/q; do
	"$CC" -c -I"$TMP/t/src" -I"$TMP/t" -o "$TMP/t/$f.o" "$TMP/t/$f.c" || echo "# cc failed on $f.c"
done
run "$PY" "$L" --src "$TMP/t"
is "$st" 1 "a tree with faults fails"
is "$out" "layers: 11 files, 6 objects, 5 include arrows, 5 call arrows, 7 violation(s)
include: src/readers/r.c -> src/gen/g_impl.h (a header private to src/gen)
include: upward arrow src/util/u.c -> src/engine/e.h (src/util is below src/engine)
include: circle between src/policies/p.h, src/policies/q.h
call: src/device/d.c -> src/readers/r.c (r) (src/device and src/readers do not use each other)
call: upward arrow src/util/u.c -> src/engine/e.c (e) (src/util is below src/engine)
call: circle between src/engine/e.c, src/util/u.c
call: circle between src/policies/p.c, src/policies/q.c" "each upward arrow, the device-readers arrow, the private header and each circle is named, with the symbol"
finish
