#!/bin/bash
# Install what encio needs to build and test, from Debian's packages.
# Idempotent: does nothing when everything is present.
set -eu
PACKAGES=(
	autoconf automake libtool pkg-config make gcc
	liburing-dev libbtrfsutil-dev libzstd-dev zlib1g-dev liblzo2-dev
	libcmocka-dev btrfs-progs btrfs-compsize btrbk attr acl libcap2-bin
	util-linux procps e2fsprogs openssl python3 man-db zstd strace xfsprogs
)
missing=()
for p in "${PACKAGES[@]}"; do
	dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "missing packages: ${missing[*]} (run as root to install them)" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
