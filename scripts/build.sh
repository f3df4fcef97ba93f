#!/bin/bash
# Build encio out of tree: scripts/build.sh [DIR [configure args...]]
# (default DIR: build). Warnings are errors.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-build}
shift || true
cd "$top"
[ -x configure ] && [ configure -nt configure.ac ] && [ Makefile.in -nt Makefile.am ] ||
	./autogen.sh >/dev/null 2>&1
mkdir -p "$dir"
cd "$dir"
[ -f Makefile ] && [ Makefile -nt "$top/configure" ] ||
	"$top/configure" -q --enable-werror "$@"
make -s -j"$(nproc)" >/dev/null
