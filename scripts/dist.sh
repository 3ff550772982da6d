#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# make dist: the source tarball of HEAD (the committed tree; local changes are
# not in it), $BUILD/dist/pacerd-VERSION.tar.gz, and its SHA-256 beside it.
# Reproducible: the same commit gives the same bytes on any machine and at any
# time (names sorted, every mtime the commit's time, owner root, modes from git,
# gzip without a name or timestamp). The tarball has no .git, so it carries a
# VERSION file that scripts/version.sh reads when it is built.
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
ver=$(./scripts/version.sh --clean)
ct=$(git log -1 --format=%ct HEAD)
name=pacerd-$ver
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git archive --format=tar --prefix="$name/" HEAD | tar -x -C "$tmp"
echo "$ver" >"$tmp/$name/VERSION"
mkdir -p "$BUILD/dist"
out=$BUILD/dist/$name.tar.gz
tar --sort=name --mtime="@$ct" --owner=0 --group=0 --numeric-owner --mode='a+rX,u+w,go-w' \
	--format=gnu -C "$tmp" -cf - "$name" | gzip -n -9 >"$out.tmp"
mv "$out.tmp" "$out"
(cd "$BUILD/dist" && sha256sum "$name.tar.gz" >"$name.tar.gz.sha256")
cat "$out.sha256"
