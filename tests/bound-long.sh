#!/bin/sh
# bound-long.sh - tests/bound.sh with the bound checked against every policy on all 24 bundled traces.
BOUND_ALL=1 exec "${SHELL:-/bin/sh}" "${srcdir:-.}/tests/bound.sh"
