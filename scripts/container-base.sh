#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Makes the Dockerfile's base image, debian:12-slim, locally, for machines that
# cannot pull from a registry (the development machines: podman, no registry).
#
#   scripts/container-base.sh            (make container-test runs it)
#
# Does nothing when podman already has the image (pulled, or made here before).
# Otherwise: debootstrap --variant=minbase bookworm from the Debian mirror this
# machine's own apt uses (CONTAINER_BASE_MIRROR overrides it), trimmed the way
# the official slim image is (no documentation, manual pages or locales, and a
# dpkg configuration that keeps later packages from installing them), then
# `podman import`ed as debian:12-slim. podman names an unqualified import
# localhost/debian:12-slim, and an unqualified FROM finds it there when the
# build does not pull (podman build --pull=never), so the Dockerfile keeps the
# name a Docker engine pulls. A few minutes, once; about 80 MB.
#
# Root only (debootstrap). Everything made here is in one temporary directory,
# removed on exit.
set -euo pipefail

IMAGE=${CONTAINER_BASE_IMAGE:-debian:12-slim}
SUITE=bookworm
say() { echo "container-base: $*" >&2; }
die() { say "$*"; exit 1; }

command -v podman >/dev/null || die "podman is not installed"
if podman image exists "$IMAGE"; then exit 0; fi
((EUID == 0)) || die "$IMAGE is missing and debootstrap needs root"
command -v debootstrap >/dev/null || die "$IMAGE is missing and debootstrap is not installed (apt-get install debootstrap)"

# "URI SUITE" of each enabled deb source of this machine, one-line and deb822 formats.
apt_sources() {
	local f
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[[ -r $f ]] || continue
		awk '$1 == "deb" { i = 2; if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
		                   if (i + 1 <= NF) print $i, $(i + 1) }' "$f"
	done
	for f in /etc/apt/sources.list.d/*.sources; do
		[[ -r $f ]] || continue
		awk 'function flush(  u, s) { if (types ~ /(^| )deb( |$)/ && enabled !~ /^(no|false)$/)
		                                for (u = 1; u <= nu; u++) for (s = 1; s <= ns; s++) print U[u], S[s]
		                              nu = ns = 0; types = enabled = "" }
		     /^[ \t]*#/ { next }
		     /^[ \t]*$/ { flush(); next }
		     tolower($1) == "types:"   { types = $0 }
		     tolower($1) == "uris:"    { for (i = 2; i <= NF; i++) U[++nu] = $i }
		     tolower($1) == "suites:"  { for (i = 2; i <= NF; i++) S[++ns] = $i }
		     tolower($1) == "enabled:" { enabled = tolower($2) }
		     END { flush() }' "$f"
	done
}
mirror=${CONTAINER_BASE_MIRROR:-$(apt_sources | awk -v s=$SUITE '$2 == s { print $1; exit }')}
mirror=${mirror:-http://deb.debian.org/debian}
mirror=${mirror%/}
security=$(apt_sources | awk -v s=$SUITE-security '$2 == s { print $1; exit }')
security=${security%/}
security=${security:-${mirror}-security}

# One builder at a time (two test runs would otherwise both debootstrap).
exec 9<"$0"
flock 9
if podman image exists "$IMAGE"; then exit 0; fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/pacerd-base.XXXXXX")
cleanup() {
	# debootstrap mounts proc and sys inside its target: unmount before removing,
	# and never cross a mount point.
	awk -v t="$tmp/" 'index($5, t) == 1 { print $5 }' /proc/self/mountinfo | sort -r |
		while read -r m; do umount -l "$m"; done
	rm -rf --one-file-system "$tmp"
}
trap cleanup EXIT
root=$tmp/rootfs
t0=$SECONDS
inc=()
[[ $mirror == https:* || $security == https:* ]] && inc=(--include=ca-certificates)
say "making $IMAGE: debootstrap --variant=minbase $SUITE from $mirror (a few minutes, once)"
if ! nice -n 19 debootstrap --variant=minbase "${inc[@]}" "$SUITE" "$root" "$mirror" >"$tmp/debootstrap.log" 2>&1; then
	tail -n 20 "$tmp/debootstrap.log" >&2
	die "debootstrap failed"
fi

# Slim, as the official image: what is not installed cannot be in a layer.
cat >"$root/etc/dpkg/dpkg.cfg.d/docker-slim" <<'EOF'
# As in the official debian:12-slim: no documentation, manual pages or locales.
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
EOF
find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
rm -rf "$root"/usr/share/{man,groff,info,lintian,linda,locale}/*
printf 'APT::Install-Recommends "false";\n' >"$root/etc/apt/apt.conf.d/docker-no-recommends"

rm -f "$root/etc/apt/sources.list" "$root/etc/resolv.conf" "$root/etc/hostname"
printf 'Types: deb\nURIs: %s\nSuites: %s %s-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\nTypes: deb\nURIs: %s\nSuites: %s-security\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
	"$mirror" $SUITE $SUITE "$security" $SUITE >"$root/etc/apt/sources.list.d/debian.sources"
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
	"$root"/var/log/*.log "$root"/var/log/apt/*

tar --numeric-owner -C "$root" -c . |
	podman import --quiet \
		--change 'CMD ["bash"]' \
		--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
		--message "debootstrap --variant=minbase $SUITE $mirror, slimmed" - "$IMAGE" >/dev/null ||
	die "podman import failed"
say "made $IMAGE in $((SECONDS - t0)) s ($(podman image inspect --format '{{.Size}}' "$IMAGE" | awk '{ printf "%.0f MB", $1 / 1e6 }'))"
