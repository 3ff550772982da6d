#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Prints pacerd's version, the one string that --version, /status, the
# pacerd_build_info metric, the source tarball and the Debian package carry.
#
# In a git checkout it comes from `git describe` against the newest release tag
# (vX.Y.Z): "X.Y.Z" on the tagged commit, "X.Y.Z+N.gHASH" N commits after it
# (".dirty" appended when tracked files are modified; --clean leaves that out,
# for make dist, which archives the commit). Without a tag it is
# "0.0.0+N.gHASH", N the number of commits. "+" and "." keep it a valid
# Debian upstream version and a SemVer build suffix, so the package's version
# is the program's. A tree without .git (a tarball from make dist) reads the
# VERSION file make dist wrote; with neither, "unknown".
set -eu
cd "$(dirname "$0")/.."
dirty=--dirty
[ "${1:-}" = --clean ] && dirty=
if [ -e .git ] && command -v git >/dev/null 2>&1 && git rev-parse --verify -q HEAD >/dev/null 2>&1; then
	if d=$(git describe --tags --match 'v[0-9]*' --long 2>/dev/null); then
		# v0.2.0-5-gabc1234
		tag=${d%%-*}
		rest=${d#*-}
		n=${rest%%-*}
		rest=${rest#*-}
		hash=${rest%%-*}
		v=${tag#v}
		[ "$n" != 0 ] && v="$v+$n.$hash"
	else
		v="0.0.0+$(git rev-list --count HEAD).g$(git rev-parse --short=7 HEAD)"
	fi
	if [ -n "$dirty" ] && ! git diff --quiet HEAD -- 2>/dev/null; then
		case "$v" in *+*) v="$v.dirty" ;; *) v="$v+dirty" ;; esac
	fi
	echo "$v"
elif [ -s VERSION ]; then
	head -n 1 VERSION
else
	echo unknown
fi
