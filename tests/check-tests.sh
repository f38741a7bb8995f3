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
# make -j2 check prints whole lines: two tests of many lines at once (their TAP drivers' awk wrote
# in blocks, and one's "PASS" ended up before the other's line). Only where the build is (make check-tests).
if [ -f Makefile ] && grep -q '^check-tests:' Makefile; then
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -j2 check TESTS="tests/cli.sh tests/outputs.sh" \
		TEST_SUITE_LOG=tests/nested-test-suite.log > "$TMP/mk.out" 2>&1; s=$?
	rm -f tests/nested-test-suite.log
	bad=$(grep -v -e '^PASS: ' -e '^SKIP: ' -e '^==*$' -e '^# ' -e '^See ' -e '^Testsuite' -e '^make' -e '^$' "$TMP/mk.out")
	ok "$([ $s = 0 ] && [ "$(grep -c '^PASS: tests/' "$TMP/mk.out")" -gt 100 ] && [ -z "$bad" ]; echo $?)" \
		"make -j2 check of two tests at once: every line whole"
	[ -n "$bad" ] && printf '%s\n' "$bad" | head -5 | sed 's/^/#   spliced: /'
fi
finish
