#!/usr/bin/env bash
# Makes release VERSION in this checkout, as one commit and an annotated tag vVERSION:
#   Cargo.toml                [workspace.package] version = VERSION (every crate inherits it)
#   Cargo.lock                the workspace crates' versions (cargo update --workspace --offline)
#   CHANGELOG.md              "## Unreleased" becomes "## VERSION (YYYY-MM-DD)", a new empty
#                             "## Unreleased" goes above it
#   contrib/homebrew/kharon.rb  tag: "vVERSION"
#   contrib/arch/PKGBUILD     pkgver=VERSION, pkgrel=1
# The Homebrew formula and the PKGBUILD build from exactly that tag. Nothing is pushed: the script
# prints the push command. VERSION may be the current version (the first release).
#
# Usage: contrib/release.sh VERSION        e.g. contrib/release.sh 0.2.0
set -euo pipefail

if [ $# -ne 1 ] || ! [[ $1 =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
  echo "usage: $0 VERSION   (MAJOR.MINOR.PATCH, e.g. $0 0.2.0)" >&2
  exit 2
fi
version=$1
tag="v$version"
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"

if ! git diff --quiet || ! git diff --cached --quiet; then
  echo "$0: the checkout has uncommitted changes; commit or stash them first" >&2
  exit 1
fi
if git rev-parse -q --verify "refs/tags/$tag" >/dev/null; then
  echo "$0: tag $tag exists already" >&2
  exit 1
fi
if ! grep -qx '## Unreleased' CHANGELOG.md; then
  echo "$0: CHANGELOG.md has no '## Unreleased' section to release" >&2
  exit 1
fi

# Only the [workspace.package] table's version line.
sed -i "/^\[workspace\.package\]/,/^\[/ s/^version = \".*\"/version = \"$version\"/" Cargo.toml
cargo update --workspace --offline --quiet
sed -i "0,/^## Unreleased\$/ s//## Unreleased\n\n## $version ($(date -u +%Y-%m-%d))/" CHANGELOG.md
sed -i "s/tag: \"v[^\"]*\"/tag: \"$tag\"/" contrib/homebrew/kharon.rb
sed -i "s/^pkgver=.*/pkgver=$version/; s/^pkgrel=.*/pkgrel=1/" contrib/arch/PKGBUILD

for check in "Cargo.toml:^version = \"$version\"" "contrib/homebrew/kharon.rb:tag: \"$tag\"" \
             "contrib/arch/PKGBUILD:^pkgver=$version\$" "CHANGELOG.md:^## $version "; do
  if ! grep -q "${check#*:}" "${check%%:*}"; then
    echo "$0: ${check%%:*} was not updated (looked for ${check#*:})" >&2
    exit 1
  fi
done

git commit -q -am "Release $tag"
git tag -a "$tag" -m "kharon $version"
echo "Tagged $tag. Publish it with: git push origin HEAD $tag"
