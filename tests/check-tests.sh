#!/bin/sh
# check-tests.sh - a test of the test suite (make check-tests): every shell test file, run against
# a stand-in allocsim that does nothing but exit 70, must pass no assertion. An assertion that
# passes here would pass against a binary that does nothing (two empty strings compared, a loop
# over nothing, "nothing was written"): it cannot fail. TAP SKIPs are allowed (no GPU, no Python).
. "${srcdir:-.}/tests/lib.sh"
printf '#!/bin/sh\nexit 70\n' > "$TMP/allocsim"; chmod +x "$TMP/allocsim"
for f in "$srcdir"/tests/*.sh; do
	b=$(basename "$f")
	case "$b" in lib.sh|check-tests.sh) continue;; esac
	mkdir -p "$TMP/run"
	ALLOCSIM="$TMP/allocsim" TMPDIR="$TMP/run" timeout -k 5 120 sh "$f" > "$TMP/$b.tap" 2>&1 < /dev/null; s=$?
	passed=$(grep '^ok ' "$TMP/$b.tap" | grep -v '# SKIP')
	v="fails or skips"; [ "$s" = 0 ] && v="exits 0"; grep -q '^1\.\.0 # SKIP' "$TMP/$b.tap" && v="fails or skips"
	[ "$s" = 124 ] || [ "$s" = 137 ] && v="timed out"
	is "$v,$(printf '%s' "$passed" | grep -c .)" "fails or skips,0" "$b: fails (or skips), and passes no assertion, against a binary that only exits 70"
	[ -n "$passed" ] && printf '%s\n' "$passed" | sed 's/^/#   passes: /'
done
finish
