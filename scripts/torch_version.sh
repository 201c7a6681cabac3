#!/usr/bin/env bash
# Sets up and runs the test suite against another torch release than the
# default (requirements.txt's pin), leaving the default .venv and build/
# untouched:
#
#   TORCH_VERSION=2.15.0 bash scripts/test.sh [pytest args]
#   bash scripts/torch_version.sh 2.14.1 [pytest args]
#
# The C++ core links against one torch, and its extension is built into the
# source tree (torch_tpu/_C*.so), so each release gets a copy of the tree in
# .torch-versions/VERSION/ with its own .venv and build/, made by the same
# scripts/setup.sh with requirements.txt's torch pin replaced. The copy is
# refreshed from this tree on every run; its venv and build are kept, so a
# second run installs nothing and rebuilds only what changed.
#
# PyPI's torch 2.14 and 2.15 wheels are CUDA builds: the first set-up
# downloads several GB of CUDA libraries (they load without a GPU), which is
# why the default run (CI) stays on the CPU wheel.
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:?usage: torch_version.sh VERSION [pytest args]}
shift
copy=.torch-versions/$version
mkdir -p "$copy"
# Tracked and untracked (not ignored) files: what a commit of this tree
# would hold; the copy's .venv and build/ are ignored by git, so they stay.
# A file whose content changed is written anew, so it is newer than the
# copy's last build even when this tree's file is older (ninja rebuilds by
# modification times); unchanged files keep theirs.
# TORCH_VERSION_FROM=HEAD (any commit) copies that commit's files instead:
# the committed state, without the edits in progress in this working tree
# (several people editing one tree: a half-made edit would stop the copy's
# build).
stage=$(mktemp -d)
if [ -n "${TORCH_VERSION_FROM:-}" ]; then
  git archive --format=tar "$TORCH_VERSION_FROM" | tar -xf - -C "$stage"
else
  git ls-files -z --cached --others --exclude-standard |
    xargs -0 sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh |
    tar --null -T - -cf - | tar -xf - -C "$stage"
fi
# A copy made before this rule (files extracted with their own, older times)
# may hold objects built from other content than its files': its first run
# under this rule writes every file anew, so everything rebuilds once
# (ccache makes that cheap); build/.synced_by_content marks it done.
marker=$copy/build/.synced_by_content
(cd "$stage" && find . -type f -print0) | while IFS= read -r -d '' f; do
  if [ ! -e "$marker" ] || ! cmp -s "$stage/$f" "$copy/$f"; then
    mkdir -p "$(dirname "$copy/$f")"
    cp "$stage/$f" "$copy/$f"
  fi
done
# A file the tree no longer has (deleted, or moved by an edit in progress)
# leaves the copy too: the build globs its sources. The copy's ignored files
# (its .venv, build/, extension, caches) stay. check-ignore exits 1 where no
# path it read is ignored (a new copy reads none): not an error.
(cd "$stage" && find . -type f | sed 's|^\./||' | sort) >"$stage.files"
(cd "$copy" && find . \( -path ./.venv -o -path ./build \) -prune -o -type f -print | sed 's|^\./||' | sort) |
  comm -23 - "$stage.files" | { git check-ignore --stdin -n -v --non-matching || [ $? -eq 1 ]; } |
  awk -F '\t' '$1 == "::" { print $2 }' | while IFS= read -r f; do rm -f "$copy/$f"; done
rm -rf "$stage" "$stage.files"
mkdir -p "$copy/build" && touch "$marker"
sed -i "s/^torch==.*/torch==$version/" "$copy/requirements.txt"
# Extras whose C++ code links against torch pair with torch releases:
# requirements.txt pins the ones that load next to the default torch, and
# these replace them for the others (docs/torch_versions.md). fbgemm 1.8.0
# does not load next to torch 2.14 (its libraries name 2.13's symbols).
# triton (TorchTitan's MoE kernels, installed without its dependencies) must
# be the one the torch wheel itself requires, or the copy would replace it.
case "$version" in
  2.13.*) extras="" ;;
  2.14.*) extras="torchrec==1.9.2 fbgemm-gpu-cpu==1.9.0" ;;
  *) extras="torchrec==1.9.2 fbgemm-gpu-cpu==1.9.0 triton==3.9.0" ;;
esac
for pin in $extras; do
  sed -i "s/^${pin%%==*}==[^ ]*/$pin/" "$copy/requirements.txt"
  sed -i "s/\"${pin%%==*}==[^\"]*\"/\"$pin\"/" "$copy/pyproject.toml"  # its extra pins the same
done
cd "$copy"
# The copy installs exactly the torch asked for: a pip constraints file of
# the machine (one that caps torch at the releases on its disk) must not
# refuse it, so the copy's installs read none.
export PIP_CONSTRAINT=/dev/null
# The copy is no git checkout (its files lie in an ignored folder of this
# one), and formatting does not depend on torch: the style test runs in the
# default suite only.
TORCH_VERSION= exec bash scripts/test.sh --ignore=tests/tools/test_style.py "$@"
