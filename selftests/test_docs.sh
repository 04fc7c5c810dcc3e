#!/bin/bash
# The documentation's commands still work: every fenced block opened with
# "```sh runnable" in README.md and docs/*.md runs here, one check per
# block, each in a fresh `bash -e` as root from /tmp (so any command that
# fails fails the check), bounded to DOCS_BLOCK_TIMEOUT seconds (default
# 60). After each block whatever it left is removed: its processes, rroce
# devices and modules (unload_all) and the network namespaces it added, so
# the next block starts as a reader's machine would. Mark a block runnable
# only if it works in this guest (its eth0, namespaces of its own) in a few
# seconds; docs/testing.md says so too.
. "$(dirname "$0")/lib.sh"
# The repository root: /rroce in the guest, where run-all.sh runs us from
# selftests/.
TOP=$(cd "$(dirname "$0")/.." && pwd)
BLOCK_TIMEOUT=${DOCS_BLOCK_TIMEOUT:-60}
work=$(mktemp -d /tmp/docs-blocks.XXXXXX)

docs=()
for f in "$TOP/README.md" "$TOP"/docs/*.md; do
	[ -f "$f" ] && docs+=("$f")
done
if [ ${#docs[@]} = 0 ]; then
	skip "runnable blocks of README.md and docs/*.md" "no README.md or docs/*.md under $TOP"
	rm -rf "$work"
	finish
fi

# One file per block: NNN.sh (its lines), NNN.where ("docs/x.md:LINE" of its
# opening fence) and NNN.end once its closing fence was seen, so a block
# left open at the end of its file is reported rather than run. Only
# unindented fences count.
awk -v out="$work" -v top="$TOP/" '
	FNR == 1 { open_block = 0; name = FILENAME; if (index(name, top) == 1) name = substr(name, length(top) + 1) }
	!open_block && /^```sh runnable[ \t]*$/ {
		n++
		base = sprintf("%s/%03d", out, n)
		print name ":" FNR > (base ".where"); close(base ".where")
		printf "" > (base ".sh")
		open_block = 1
		next
	}
	open_block && /^```[ \t]*$/ {
		close(base ".sh")
		printf "" > (base ".end"); close(base ".end")
		open_block = 0
		next
	}
	open_block { print > (base ".sh") }
' "${docs[@]}"

blocks=("$work"/*.where)
if [ ! -e "${blocks[0]}" ]; then
	skip "runnable blocks of README.md and docs/*.md" "none is marked \`\`\`sh runnable"
	rm -rf "$work"
	finish
fi
info "${#blocks[@]} runnable blocks in ${#docs[@]} files"

unload_all
for w in "${blocks[@]}"; do
	b=${w%.where}
	where=$(cat "$w")
	# The block's first command, without its comment, names the check
	# (a "#" in a KTAP description would start a directive).
	first=$(grep -v -E '^[[:space:]]*(#|$)' "$b.sh" | head -1 | sed 's/[[:space:]]*#.*//' | tr -s ' \t' '  ' | cut -c1-50)
	what="$where runs ($first ...)"
	if [ ! -e "$b.end" ]; then
		fail "$where: the runnable block has no closing fence"
		continue
	fi
	netns_before=$(ip netns list | awk '{print $1}' | sort)
	start=$SECONDS
	# timeout puts itself and the block in a process group of their own
	# (its pid): what the block leaves running is killed through it below.
	(cd /tmp && exec timeout -k 5 "$BLOCK_TIMEOUT" bash -e "$b.sh") >"$b.log" 2>&1 </dev/null &
	pid=$!
	wait $pid
	rc=$?
	kill -KILL -- -$pid 2>/dev/null
	if [ $rc = 0 ]; then
		pass "$what"
		info "$where: $((SECONDS - start)) s"
	else
		if [ $rc = 124 ] || [ $rc = 137 ]; then why="timed out after $BLOCK_TIMEOUT s"; else why="exit $rc"; fi
		fail "$what: $why"
		sed 's/^/# | /' "$b.sh" | head -40
		info "its output:"
		tail -20 "$b.log" | sed 's/^/# | /'
	fi
	unload_all
	for ns in $(comm -13 <(printf '%s\n' "$netns_before") <(ip netns list | awk '{print $1}' | sort)); do
		ip netns del "$ns" 2>/dev/null
	done
done
rm -rf "$work"
finish
