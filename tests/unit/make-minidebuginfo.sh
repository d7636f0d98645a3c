#!/bin/sh
# make-minidebuginfo.sh IN OUT - writes OUT: IN stripped of everything but
# its dynamic symbols, plus a .gnu_debugdata section holding, xz-compressed,
# an ELF file with the function symbols .dynsym lacks (MiniDebugInfo, as
# Fedora ships its binaries; the recipe is the one in gdb's manual).
set -eu
in=$1 out=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
nm -D --format=posix --defined-only "$in" | awk '{ print $1 }' | sort >"$work/dynamic"
nm --format=posix --defined-only "$in" | awk '$2 == "T" || $2 == "t" { print $1 }' | sort >"$work/functions"
comm -13 "$work/dynamic" "$work/functions" >"$work/keep"
objcopy --only-keep-debug "$in" "$work/debug"
objcopy -S --remove-section .gdb_index --remove-section .comment --keep-symbols="$work/keep" "$work/debug" \
    "$work/mini"
xz --keep "$work/mini"
strip --strip-all --remove-section .comment -o "$work/stripped" "$in"
objcopy --add-section .gnu_debugdata="$work/mini.xz" "$work/stripped" "$out"
