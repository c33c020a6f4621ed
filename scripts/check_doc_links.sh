#!/usr/bin/env bash
# Checks that what the code points readers to still exists [comments that send a reader to a section that moved]:
#  - every "README.md#anchor" or "docs/NAME.md#anchor" in the sources (shim/, include/, tools/, scripts/, tests/,
#    python/, rules/, CMakeLists.txt) names a file that exists and a heading of it (GitHub's anchor of the heading)
#  - no source comment points to a section by a vague name ("the README's ...", "README section") instead
#  - every relative Markdown link of README.md and docs/ ("[text](path)", "[text](path#anchor)") names a file or
#    folder that exists, and its anchor, where it has one and names a Markdown file, a heading of it
#  - no line of README.md or docs/ is over 300 characters outside code blocks (but a table's header row)
# Usage: scripts/check_doc_links.sh [SOURCE_ROOT]
set -u
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root" || exit 1
fail=0
# GitHub's anchor of a Markdown heading: lower case, punctuation but '-' and '_' dropped, spaces to '-'.
anchors() {
  sed -n 's/^#\{1,6\} \(.*\)$/\1/p' "$1" | tr 'A-Z' 'a-z' | sed -E 's/[^a-z0-9 _-]//g; s/ /-/g'
}
sources=(shim include tools scripts tests python rules CMakeLists.txt)
refs=$(grep -rnoE --exclude-dir=gpu-runs '(README\.md|docs/[A-Za-z0-9_-]+\.md)#[A-Za-z0-9_-]+' "${sources[@]}" 2>/dev/null |
       grep -v '^scripts/check_doc_links.sh:' || true)
broken=""
count=0
while IFS= read -r line; do
  [ -n "$line" ] || continue
  count=$((count + 1))
  where=${line%%:*}; rest=${line#*:}; lineno=${rest%%:*}; ref=${rest#*:}
  file=${ref%%#*}; anchor=${ref#*#}
  if [ ! -f "$file" ]; then broken+="    $where:$lineno: $ref: no file $file"$'\n'; continue; fi
  anchors "$file" | grep -qxF "$anchor" || broken+="    $where:$lineno: $ref: $file has no heading with that anchor"$'\n'
done <<< "$refs"
if [ -z "$broken" ]; then echo "[PASS] the $count links to README.md and docs/ sections in the sources name headings that exist"
else echo "[FAIL] links to sections that do not exist:"; printf '%s' "$broken"
     echo "    fix: point them at the section's current heading (FILE.md#anchor)"; fail=1; fi
vague=$(grep -rnE "README's|README section|the README \"" shim include tools 2>/dev/null || true)
if [ -z "$vague" ]; then echo "[PASS] no comment of shim/, include/ or tools/ names a README section by a vague name"
else echo "[FAIL] comments that name a section without its file and anchor:"; echo "$vague" | sed 's/^/    /'
     echo "    fix: write FILE.md#anchor (this check then keeps it alive)"; fail=1; fi
# The docs' own links: a file moved or merged (gpu-runs/ was regrouped) leaves a link that leads nowhere.
dead=""
doc_links=0
for f in README.md docs/*.md; do
  dir=$(dirname "$f")
  while IFS= read -r hit; do
    [ -n "$hit" ] || continue
    lineno=${hit%%:*}; target=${hit#*:}; target=${target#*](}; target=${target%)}
    case "$target" in http://*|https://*|mailto:*|\#*) continue ;; esac
    doc_links=$((doc_links + 1))
    path=${target%%#*}; anchor=""; [ "$path" = "$target" ] || anchor=${target#*#}
    if [ ! -e "$dir/$path" ]; then dead+="    $f:$lineno: ($target): no file $dir/$path"$'\n'; continue; fi
    if [ -n "$anchor" ] && [ "${path%.md}" != "$path" ] && ! anchors "$dir/$path" | grep -qxF "$anchor"; then
      dead+="    $f:$lineno: ($target): $path has no heading with that anchor"$'\n'
    fi
  done < <(awk '/^```/ { code = !code; print ""; next } { print code ? "" : $0 }' "$f" | grep -noE '\]\([^) ]+\)' || true)
done
if [ -z "$dead" ]; then echo "[PASS] the $doc_links relative links of README.md and docs/ lead to files and headings that exist"
else echo "[FAIL] links of README.md or docs/ that lead nowhere:"; printf '%s' "$dead"; fail=1; fi
# Prose a reader can follow: no line of the README or docs/ over 300 characters outside code blocks (a table's header
# row of many columns, one fact each, is the one exception; docs/gpu-runs/ holds raw output, not prose).
long=$(for f in README.md docs/*.md; do
         awk -v F="$f" '{ line[NR] = $0 } END {
                          code = 0
                          for (i = 1; i <= NR; i++) {
                            if (line[i] ~ /^```/) { code = !code; continue }
                            header = line[i] ~ /^\|/ && line[i + 1] ~ /^\| *-+ *\|/
                            if (!code && length(line[i]) > 300 && !header) print "    " F ":" i ": " length(line[i]) " characters"
                          } }' "$f"
       done)
if [ -z "$long" ]; then echo "[PASS] no line of README.md or docs/ is over 300 characters outside code blocks"
else echo "[FAIL] lines over 300 characters (wrap prose; a table cell holds one fact, a list holds more):"; echo "$long"
     fail=1; fi
exit $fail
