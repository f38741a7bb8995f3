#!/bin/sh
# plots-newer.sh - tests/plots.sh again under a second matplotlib (make check-long, CI): Debian 13's
# python3-matplotlib 3.10 with numpy 2.2 and Python 3.13, which scripts/matplotlib-debian13.sh
# unpacks into _build/mpl13 (ALLOCSIM_MPL2 names another directory); the system's python3 is the
# first (Debian 12 and Ubuntu 24.04 ship 3.6.3). This test downloads nothing: it skips, saying so,
# when the directory is not there ('make check-plots-newer' makes it and runs this test).
D=${ALLOCSIM_MPL2:-$PWD/_build/mpl13}
if [ ! -x "$D/python3" ] || ! "$D/python3" -c 'import matplotlib' 2>/dev/null; then
	echo "1..0 # SKIP no second matplotlib in $D: run scripts/matplotlib-debian13.sh $D (or make check-plots-newer)"
	exit 0
fi
echo "# $("$D/python3" -c 'import sys, matplotlib, numpy; print("python", sys.version.split()[0], "matplotlib", matplotlib.__version__, "numpy", numpy.__version__)')"
PYTHON="$D/python3" exec sh "${srcdir:-.}/tests/plots.sh"
