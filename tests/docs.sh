#!/bin/sh
# docs.sh - the documentation says what the program does: doc/metrics.md's list of the policies that
# fill the waste columns is the list of policies whose rows hold the waste identity, the man page's
# schema_version is the one the CSV prints and its word on optimal and standard input is what
# replay does, blame's help names the columns --largest writes; 'allocsim help CMD' is CMD's help;
# an unknown or misspelt option or command gets the 'allocsim: error:' prefix, a "did you mean"
# from the command's own names and exit status 64; README.md stays short and links only files
# that exist.
. "${srcdir:-.}/tests/lib.sh"
A=$ALLOCSIM
tr="$T/resnet50_train__default.pickle.gz"
# --- doc/metrics.md: which policies fill waste_* (reserved - requested = their sum, at the peak)
fills=""
for p in pytorch bestfit passthrough cuda-async cupy bfc rmm-pool rmm-arena rmm-binning optimal buddy stitch pytorch-pinned; do
	row=$("$A" replay -p "$p" --no-timing "$tr" 2>/dev/null | tail -n 1)
	f=$(printf '%s\n' "$row" | awk -F, '{ s = $28 + $29 + $30 + $31 + $32; d = $10 - $19; if (s > 0 && s == d) print "y" }')
	[ "$f" = y ] && fills="$fills${fills:+, }\`$p\`"
done
doc=$(sed -n 's/.*<!-- waste-policies -->\(.*\)<!-- \/waste-policies -->.*/\1/p' "$srcdir/doc/metrics.md")
is "$doc" "$fills" "doc/metrics.md names the policies that fill the waste columns (reserved - requested = their sum at the peak)"
# --- the man page: schema_version, optimal on standard input
sv=$("$A" replay --no-timing "$tr" | awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "schema_version") k = i } NR == 2 { print $k }')
man=$(tr '\n' ' ' < "$srcdir/doc/allocsim.1")
is "$(printf '%s' "$man" | sed -n 's/.*version of the column list, \([0-9]*\)).*/\1/p')" "$sv" "the man page's schema_version is the one the CSV prints"
"$A" replay -p optimal --no-timing "$tr" > "$TMP/opt-file.csv" 2>&1
"$A" replay -p optimal --no-timing - < "$tr" > "$TMP/opt-stdin.csv" 2>&1; st=$?
says=$(printf '%s' "$man" | grep -q 'not standard input' || printf '%s' "$man" | grep -c 'standard input (\\fB\\-\\fR) whole')
is "$st,$says,$(cut -d, -f2- "$TMP/opt-stdin.csv" | tail -n 1)" "0,1,$(cut -d, -f2- "$TMP/opt-file.csv" | tail -n 1)" \
	"optimal reads standard input (the same row as from the file), and the man page says so (not that it needs a file)"
# --- blame --largest: the help names the columns it writes
run "$A" blame --help
cols=$(printf '%s\n' "$out" | grep -o 'moment,rank,[a-z_,]*')
run "$A" blame --largest --top 1 "$T/gpt2_train_varlen__default.pickle.gz"
is "$(printf '%s\n' "$out" | head -n 1)" "$cols" "blame --help names the CSV columns --largest writes"
# --- allocsim help CMD
for c in replay sweep advise blame; do
	"$A" "$c" --help > "$TMP/h1" 2>&1; "$A" help "$c" > "$TMP/h2" 2>&1; st=$?
	cmp -s "$TMP/h1" "$TMP/h2"; ok "$([ $? = 0 ] && [ $st = 0 ] && grep -q "^usage: allocsim $c" "$TMP/h2"; echo $?)" "'allocsim help $c' prints $c's own help"
done
run "$A" help replya
is "$st|$errout" "64|allocsim: error: 'replya' is not an allocsim command: did you mean 'replay'? See 'allocsim --help'." "help of an unknown command: did you mean"
# --- unknown options: the prefix, the suggestion from the command's own option names, exit 64
for c in advise blame replay validate info convert sweep compare fit calibrate transfer; do
	run "$A" "$c" --no-such-option-here x
	is "$st|$(printf '%s\n' "$errout" | head -n 1)" "64|allocsim: error: $c: unknown option '--no-such-option-here'" "$c: an unknown option: one 'allocsim: error:' line, exit 64"
	is "$(printf '%s\n' "$errout" | grep -v -c -e '^allocsim: error: ' -e "^Try 'allocsim $c --help'.\$")" 0 "$c: no message without the prefix (getopt's own is silenced)"
done
run "$A" replay --capacty 4GiB "$tr"
is "$st|$errout" "64|allocsim: error: replay: unknown option '--capacty': did you mean '--capacity'?${nl}Try 'allocsim replay --help'." "replay --capacty: did you mean '--capacity'"
run "$A" sweep -t "$tr" --parm max_split_size_mb=none
is "$st|$(printf '%s\n' "$errout" | head -n 1)" "64|allocsim: error: sweep: unknown option '--parm': did you mean '--param'?" "sweep --parm: did you mean '--param'"
run "$A" compare --poilcy pytorch "$tr"
is "$st|$(printf '%s\n' "$errout" | head -n 1)" "64|allocsim: error: compare: unknown option '--poilcy': did you mean '--policy'?" "compare --poilcy: did you mean '--policy'"
run "$A" replay --capacity
is "$st|$(printf '%s\n' "$errout" | head -n 1)" "64|allocsim: error: replay: option '--capacity' needs a value" "an option without its value says so"
run "$A" replay --no-timing=1 "$tr"
is "$st|$(printf '%s\n' "$errout" | head -n 1)" "64|allocsim: error: replay: option '--no-timing' takes no value" "a flag given a value says so"
run "$A" replay -Z "$tr"
is "$st|$(printf '%s\n' "$errout" | head -n 1)" "64|allocsim: error: replay: unknown option '-Z'" "an unknown short option"
# --- README.md: short, and every file it links exists
R="$srcdir/README.md"
missing=$(grep -o -E '\]\([^)#]+\)|(doc|scripts|tests|traces)/[A-Za-z0-9_./-]+\.(md|py|sh|1|png|csv)' "$R" | sed -e 's/^](//' -e 's/)$//' | sort -u |
	while read -r f; do case "$f" in http*) continue;; esac; [ -e "$srcdir/$f" ] || echo "$f"; done)
nlinks=$(grep -c -E '\]\(doc/|doc/[a-z-]+\.md' "$R")
short=$([ "$(wc -l < "$R")" -lt 200 ] && echo short)
is "$short,$(printf '%s' "$missing" | grep -c .),$([ "$nlinks" -ge 5 ] && echo linked),$("$A" help replay 2>&1 | head -n 1)" "short,0,linked,usage: allocsim replay [options] TRACE" \
	"README.md is under 200 lines ($(wc -l < "$R" | tr -d ' ')), links doc/, every file it names exists${missing:+ (missing: $missing)}, and 'allocsim help CMD' it points to answers"
finish
