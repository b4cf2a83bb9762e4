#!/usr/bin/env bash
# Builds each named tests/go/<name>/ program against Debian's etcd 3.4 Go source, offline, in
# GOPATH mode: tests/go/build.sh SCRATCH NAME...  ->  SCRATCH/bin/NAME
set -euo pipefail
scratch=$1; shift
root=$(cd "$(dirname "$0")" && pwd)
export GOPATH=$scratch/gopath GO111MODULE=off GOFLAGS= GOPROXY=off GOCACHE=$scratch/cache
mkdir -p "$GOPATH/src/tenure" "$scratch/bin"
for d in /usr/share/gocode/src/*; do
  [[ -e $GOPATH/src/${d##*/} ]] || ln -s "$d" "$GOPATH/src/"
done
for name in "$@"; do
  ln -sfn "$root/$name" "$GOPATH/src/tenure/$name"
  (cd "$GOPATH/src/tenure/$name" && go build -o "$scratch/bin/$name" .)
done
