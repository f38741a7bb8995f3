#!/bin/sh
# matplotlib-debian13.sh DIR - a second matplotlib for the plot tests (tests/plots-newer.sh, CI):
# Debian 13's python3-matplotlib (3.10, with numpy 2.2 and Python 3.13) unpacked into DIR, on a
# Debian 12 or Ubuntu machine whose own python3-matplotlib is 3.6. Nothing is installed and nothing
# outside DIR changes: apt-get downloads the packages (signatures and hashes checked) from the
# Debian mirror the system's apt already uses, with its own lists under DIR; dpkg -x unpacks them;
# DIR/python3 runs Debian 13's Python through Debian 13's own dynamic loader and C library.
# About 70 MB to download, 240 MB unpacked. Exit 0 and DIR/python3 prints the versions when done.
set -eu
D=${1:?usage: matplotlib-debian13.sh DIR}
mkdir -p "$D" && D=$(cd "$D" && pwd)
# the mirror: the first Debian archive URI the system's apt is configured with (no host named here)
uri=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
	sed -n -e 's/^URIs: *\([^ ]*\/debian\)\/*$/\1/p' -e 's/^deb  *\(\[[^]]*\] *\)\{0,1\}\([^ ]*\/debian\)\/* .*/\2/p' | head -1)
[ -n "$uri" ] || { echo "matplotlib-debian13.sh: no Debian archive in the apt sources" >&2; exit 1; }
mkdir -p "$D/apt/lists/partial" "$D/apt/cache/archives/partial" "$D/debs"
echo "deb $uri trixie main" > "$D/apt/sources.list"
: > "$D/apt/status"
o="-o Dir::Etc::SourceList=$D/apt/sources.list -o Dir::Etc::SourceParts=/dev/null -o Dir::State::Lists=$D/apt/lists
   -o Dir::Cache=$D/apt/cache -o Dir::State::status=$D/apt/status -o APT::Architectures=amd64 -o APT::Get::AllowUnauthenticated=false -o APT::Sandbox::User=root"
apt-get $o -qq update
# the whole closure from an empty system (our own C library and Python too), less what a headless
# Agg/PDF/SVG run never loads (Tk, SciPy, SymPy, lxml, time zones, the package tools)
apt-get $o -qq -y --no-install-recommends --print-uris install python3-matplotlib |
	sed -n "s/^'[^']*' \([^_]*\)_.*/\1/p" |
	grep -v -x -E 'python3-scipy|python3-sympy|python3-mpmath|tzdata|tk8.6-blt2.5|blt|libtk8.6|libtcl8.6|python3-tk|python3.13-tk|python3-pil.imagetk|libjs-jquery|libjs-jquery-ui|dpkg|tar|sysvinit-utils|debconf|lsb-base|x11-common|python3-lxml|libxslt1.1|libxml2|python3-fs|python3-ufolib2|python3-numpy-dev|netbase|media-types|readline-common|libreadline8t64|libncursesw6|python3-zopfli|libzopfli1' \
	> "$D/packages.txt"
(cd "$D/debs" && xargs apt-get $o -qq download < "$D/packages.txt")
rm -rf "$D/root" && mkdir "$D/root"
for f in "$D"/debs/*.deb; do dpkg -x "$f" "$D/root"; done
# Debian's matplotlib looks for its data beside the package, then in /usr/share (the system's 3.6 data)
ln -sfn "$D/root/usr/share/matplotlib/mpl-data" "$D/root/usr/lib/python3/dist-packages/matplotlib/mpl-data"
L="$D/root/usr/lib/x86_64-linux-gnu"
cat > "$D/python3" <<EOF
#!/bin/sh
# Debian 13's Python 3.13 with its matplotlib and numpy (scripts/matplotlib-debian13.sh)
PYTHONHOME="$D/root/usr" exec "$D/root/usr/lib64/ld-linux-x86-64.so.2" --library-path "$L:$L/blas:$L/lapack" \\
	--argv0 python3 "$D/root/usr/bin/python3.13" "\$@"
EOF
chmod +x "$D/python3"
"$D/python3" -c 'import sys, matplotlib, numpy; print("python", sys.version.split()[0], "matplotlib", matplotlib.__version__, "numpy", numpy.__version__)'
