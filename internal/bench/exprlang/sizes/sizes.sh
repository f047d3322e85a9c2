#!/bin/sh
# Builds the tiny mains and prints their sizes in bytes, default
# build and stripped (-ldflags='-s -w'). Run from anywhere.
set -e
cd "$(dirname "$0")"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for m in empty json protoyaml expr cel; do
	go build -o "$out/$m" "./$m"
	go build -ldflags='-s -w' -o "$out/$m.stripped" "./$m"
	"$out/$m" >/dev/null
done
ls -l "$out" | awk 'NR>1 {print $5, $9}'
