#!/usr/bin/env bash
# Copy the jars of Apache Kafka's broker (pinned in tests/broker/pom.xml) into tests/broker/lib/
# with Maven. Idempotent: does nothing when lib/ already matches pom.xml (a stamp file holds
# the pom's checksum); Maven's ~/.m2 cache makes a rerun after a pom change cheap.
# Used by .ci/setup; the real-broker tests skip when lib/ is missing.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
lib="$here/lib"
stamp="$lib/.pom.sha256"
want="$(sha256sum "$here/pom.xml" | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
new="$lib/.new"   # inside lib/ (git-ignored) until complete
rm -rf "$new"
mkdir -p "$lib"
if ! out="$(mvn -q -B -Dstyle.color=never -f "$here/pom.xml" \
      dependency:copy-dependencies -DoutputDirectory="$new" 2>&1)"; then
  echo "$out" >&2
  echo "tests/broker/fetch.sh: Maven could not fetch the Kafka jars (see above)" >&2
  exit 1
fi
rm -f "$stamp" "$lib"/*.jar
mv "$new"/*.jar "$lib/"
rmdir "$new"
echo "$want" >"$stamp"
echo "Kafka broker jars in $lib ($(ls "$lib"/*.jar | wc -l) jars)"
