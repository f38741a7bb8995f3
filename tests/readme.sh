#!/bin/sh
# readme.sh - README.md tells the truth: its quick-start row and its cross-setting example are what
# the commands print (regenerate them from the commands when this fails), and the example's rows are
# PyTorch's own numbers for those settings (traces/pytorch-h200/ground-truth.csv): the fast
# representative of the cross-setting replays of tests/cross.sh (make check-long).
. "${srcdir:-.}/tests/lib.sh"
R="$srcdir/README.md"
# the quick start: the replay of the README's first command, and the CSV block after it
cmd=$(sed -n 's/^    \$ //p' "$R" | sed -n 1p); cmd=${cmd##*&& }
want=$(awk '/^Output of the first/ { f = 1 } f && /^```$/ { if (b) exit; b = 1; next } b' "$R")
got=$(cd "$srcdir" && eval "\"\$ALLOCSIM\" ${cmd#./allocsim }" 2>&1)
again=$(cd "$srcdir" && eval "\"\$ALLOCSIM\" ${cmd#./allocsim }" 2>&1)
nt=1; case "$cmd" in "./allocsim replay "*"--no-timing"*) nt=0;; esac
ok "$([ $nt = 0 ] && [ -n "$got" ] && [ "$got" = "$again" ]; echo $?)" "the quick start replays with --no-timing: two runs print the same row"
is "$got" "$want" "README: the quick-start row is what '$cmd' prints"
# the cross-setting example: the loop and its output lines
awk '/^```$/ { if (b) exit; next } /^\$ for c in/ { b = 1 } b' "$R" > "$TMP/ex"
loop=$(sed -n '1s/^\$ //p; 2p' "$TMP/ex" | sed 's|\./allocsim|"$ALLOCSIM"|')
want=$(tail -n +3 "$TMP/ex")
got=$(cd "$srcdir" && eval "$loop" 2>&1)
is "$got" "$want" "README: the cross-setting example prints what the README shows"
# each of its rows is what PyTorch measured when the same program ran with that setting
gt="$T/ground-truth.csv"
printf '%s\n' "$got" | while IFS=, read -r conf pa pr nda eff; do
	w=$(awk -F, -v c="$conf" '$2 == "gpt2_train_varlen" && $4 == c && $5 == "" { print $11 "," $12 "," $17 }' "$gt")
	[ -n "$w" ] && [ "$w" = "$pa,$pr,$nda" ] && echo ok || echo "# $conf: README $pa,$pr,$nda, PyTorch $w"
done > "$TMP/gt"
is "$(grep -c '^ok$' "$TMP/gt"),$(grep -c . "$TMP/gt")" 4,4 "README: the gpt2 trace recorded under max_split_size_mb:40, replayed under 4 settings, gives PyTorch's peaks and cudaMalloc counts for each"
grep '^#' "$TMP/gt"
finish
