#!/bin/bash
# The host half of scripts/check-distro, run inside the distribution root
# (Debian with its 7.3 kernel headers, DKMS and the toolchain):
# scripts/dkms-make refuses, in one sentence naming what is missing, a
# kernel it cannot build for (on fake headers), then `make dkms-install`
# builds and installs rroce for Debian's kernel KERNELRELEASE.
#   RROCE_ROOT_FLAVOUR=distro in_root bash selftests/distro-host.sh KERNELRELEASE
. "$(dirname "$0")/lib.sh"
SUITE=distro-host
kver=${1:?usage: distro-host.sh KERNELRELEASE}
make_script=$(cd "$(dirname "$0")/.." && pwd)/scripts/dkms-make
real=$(ls -d /usr/src/linux-headers-*-amd64 2>/dev/null | head -1)
[ -n "$real" ] || { skip "refusals" "no Debian headers in this root"; finish; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# refuses WHAT PATTERN [sed expressions on the real .config...]
refuses() {
	local what=$1 pattern=$2; shift 2
	local h=$work/h$RANDOM
	mkdir -p "$h"
	[ "$what" = "no headers" ] || cp "$real/.config" "$h/.config"
	local e
	for e in "$@"; do sed -i "$e" "$h/.config"; done
	if RROCE_KERNEL_SOURCE=/nonexistent RROCE_DKMS_CACHE=$work/cache bash "$make_script" 9.9.9-fake "$h" >"$work/out" 2>&1; then
		fail "$what: the build went on"
	elif [ "$(wc -l <"$work/out")" = 1 ] && grep -q "^rroce-dkms: .*$pattern" "$work/out"; then
		pass "$what"; info "$(cat "$work/out")"
	else
		fail "$what: not one clear line"; sed 's/^/# | /' "$work/out" | head -5
	fi
}
refuses "no headers" "no kernel headers"
refuses "kernel without CONFIG_RUST" "without CONFIG_RUST" '/^CONFIG_RUST=/d'
refuses "kernel without the RDMA core" "no RDMA core" '/^CONFIG_INFINIBAND=/d'
refuses "kernel without UDP tunnels" "no UDP tunnel" 's/^CONFIG_NET_UDP_TUNNEL=.*/# CONFIG_NET_UDP_TUNNEL is not set/'
refuses "kernel built by another rustc" "install that rustc" 's/^CONFIG_RUSTC_VERSION_TEXT=.*/CONFIG_RUSTC_VERSION_TEXT="rustc 1.99.0 (0000000 2031-01-01)"/'
refuses "kernel built by another bindgen" "install that bindgen" 's/^CONFIG_BINDGEN_VERSION_TEXT=.*/CONFIG_BINDGEN_VERSION_TEXT="bindgen 0.99.0"/'
refuses "kernel built by a missing compiler" "gcc-99, which is not installed" 's/^CONFIG_CC_VERSION_TEXT="x86_64-linux-gnu-gcc-14/CONFIG_CC_VERSION_TEXT="x86_64-linux-gnu-gcc-99/'
refuses "headers without metadata and no source" "no kernel source to regenerate it from"

start=$SECONDS
if make -C "$(dirname "$make_script")/.." -s dkms-install KVER="$kver" >"$work/dkms" 2>&1; then
	pass "make dkms-install for $kver ($((SECONDS - start)) s)"
else
	fail "make dkms-install for $kver"
	tail -30 "$work/dkms" | sed 's/^/# | /'
fi
grep -E '^rroce-dkms:' "$work/dkms" | sed 's/^/# /'
finish
