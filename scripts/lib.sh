# Shared settings for rroce's scripts. Source it; do not run it.
# Everything large lives in a cache outside the git tree so that repeated
# runs (and CI on the same machine) reuse it.

set -euo pipefail

RROCE_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RROCE_CACHE=${RROCE_CACHE:-/var/cache/rroce}
RROCE_SUITE=trixie
RROCE_KVER_SERIES=7.3

log() { printf '[rroce %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

short_hash() { sha256sum | cut -c1-12; }

# The build root doubles as the guest's root file system. Its key covers the
# Debian suite and the package list, so editing the list makes a new root.
# RROCE_ROOT_FLAVOUR=distro selects the second root: the same packages plus
# Debian's own 7.3 kernel, headers and DKMS (scripts/distro-packages.txt),
# in which rroce is built the way a user's machine builds it.
RROCE_ROOT_FLAVOUR=${RROCE_ROOT_FLAVOUR:-build}
root_package_lists() {
	echo "$RROCE_TOP/scripts/root-packages.txt"
	[ "$RROCE_ROOT_FLAVOUR" = distro ] && echo "$RROCE_TOP/scripts/distro-packages.txt"
	return 0
}
root_key() {
	{
		echo "$RROCE_SUITE"
		[ "$RROCE_ROOT_FLAVOUR" = distro ] && echo distro
		root_package_lists | xargs cat
	} | short_hash
}
root_dir() {
	case $RROCE_ROOT_FLAVOUR in
	build) echo "$RROCE_CACHE/root-$(root_key)" ;;
	distro) echo "$RROCE_CACHE/distro-root-$(root_key)" ;;
	*) die "RROCE_ROOT_FLAVOUR: build or distro, not $RROCE_ROOT_FLAVOUR" ;;
	esac
}

# Run a command inside the build root in a private mount namespace, so the
# proc/sys/dev and bind mounts vanish with the command whatever happens.
# The cache and the project tree appear at the same paths as on the host.
in_root() {
	local root
	root=$(root_dir)
	[ -f "$root/.rroce-root-ready" ] || die "build root missing: run scripts/toolchain"
	unshare --mount --propagation private -- /bin/bash -euc '
		root=$1 cache=$2 top=$3; shift 3
		mount -t proc proc "$root/proc"
		mount --rbind /sys "$root/sys"
		mount --rbind /dev "$root/dev"
		mkdir -p "$root$cache" "$root$top"
		mount --bind "$cache" "$root$cache"
		mount --bind "$top" "$root$top"
		exec chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin \
			LANG=C.UTF-8 TERM=dumb "$@"
	' rroce-root "$root" "$RROCE_CACHE" "$RROCE_TOP" "$@"
}

# Debian mirror: the one this host already uses, unless overridden.
debian_mirror() {
	if [ -n "${RROCE_DEBIAN_MIRROR:-}" ]; then echo "$RROCE_DEBIAN_MIRROR"; return; fi
	local uri
	uri=$(grep -hE '^(URIs:|deb )' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null |
		grep -v -- '-security' | grep -m1 -oE 'https?://[^ ]*/debian/?' || true)
	[ -n "$uri" ] || die "no Debian mirror found in the host's apt sources; set RROCE_DEBIAN_MIRROR"
	echo "${uri%/}"
}

need_root() { [ "$(id -u)" = 0 ] || die "this step needs root (chroot, mounts, QEMU)"; }

host_install() {
	local missing=()
	for pair in "$@"; do
		command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair#*:}")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	log "installing host packages: ${missing[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

# ktap_tally DEPTH FILE: prints "PASSED FAILED SKIPPED" over the checks in
# the KTAP output FILE: result lines nested DEPTH levels ("# " each; 1 for
# selftests/run-all.sh's output, 0 for a test run on its own), and, at the
# level above, a test that failed without any failing check.
ktap_tally() {
	local prefix="" i
	for ((i = 0; i < $1; i++)); do prefix+="# "; done
	tr -d '\r' <"$2" | awk -v pre="$prefix" '
		function body(line) { return index(line, pre) == 1 ? substr(line, length(pre) + 1) : "" }
		{ l = body($0) }
		l ~ /^not ok [0-9]+ / { f++; next }
		l ~ /^ok [0-9]+ .*# SKIP/ { s++; next }
		l ~ /^ok [0-9]+ / { p++; next }
		/^not ok [0-9]+ .*no check failed/ { f++ }
		END { print p + 0, f + 0, s + 0 }'
}

# guest_tally FILE VM_STATUS: ktap_tally of selftests/run-all.sh's output in
# FILE, with one failure more when the run never reached its totals, or
# when the guest failed (a kernel report) although no check did.
guest_tally() {
	local p f s
	read -r p f s < <(ktap_tally 1 "$1")
	if ! tr -d '\r' <"$1" | grep -q '^# Totals: '; then
		log "the guest's selftests did not complete ($1, VM status $2)"
		f=$((f + 1))
	elif [ "$2" != 0 ] && [ "$f" = 0 ]; then
		log "the guest failed ($1, status $2) although no check failed: kernel reports?"
		f=1
	fi
	echo "$p $f $s"
}
