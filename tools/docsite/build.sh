#!/usr/bin/env bash
# Build the HTML docs site of gpufleet.sglang (`make docs`); warnings are errors.
#
#   1. antsibull-docs lint-collection-docs --plugin-docs: schema and markup of every module's and
#      filter's DOCUMENTATION/EXAMPLES/RETURN and every role's meta/argument_specs.yml, rstcheck on
#      the generated pages, links into this collection validated;
#   2. antsibull-docs collection --fail-on-error: the reStructuredText of the collection, its roles
#      (from their argument specs), modules and filters;
#   3. the Markdown pages of docs/ copied in as guides (rendered by MyST), the root page from
#      tools/docsite/index.rst;
#   4. sphinx-build -W --keep-going -n: every warning fails the build, broken references too.
#
# Output: $DOCS_OUT (default .cache/docs, git-ignored): rst/ (the Sphinx source) and html/.
# Needs the venv's antsibull-docs, sphinx, sphinx-ansible-theme and myst-parser on PATH
# (requirements-dev.txt) and ANSIBLE_CONFIG pointing at the repo's ansible.cfg (the Makefile
# exports both), so that ansible-doc finds gpufleet.sglang through collections/.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUT=${DOCS_OUT:-$REPO/.cache/docs}
HERE=$REPO/tools/docsite
COLLECTION=$REPO/collections/ansible_collections/gpufleet/sglang
start=$SECONDS

echo "docs: lint (antsibull-docs lint-collection-docs --plugin-docs)"
[[ -n ${DOCS_SKIP_LINT:-} ]] || antsibull-docs lint-collection-docs --plugin-docs --validate-collection-refs self "$COLLECTION"

rm -rf "$OUT/rst" "$OUT/html" "$OUT/doctrees"
mkdir -p "$OUT/rst"
chmod og-w "$OUT/rst"  # antsibull-docs wants its destination writable by its owner only

echo "docs: collection pages (antsibull-docs collection)"
antsibull-docs --config-file "$HERE/antsibull-docs.cfg" collection \
  --cleanup everything --fail-on-error --use-current --dest-dir "$OUT/rst" gpufleet.sglang

# no plugin of this collection declares environment variables: the generated index of them would
# be an empty page pointing at ansible-core's configuration reference
rm -f "$OUT/rst/collections/environment_variables.rst"
cp "$HERE/ansible-terms.rst" "$OUT/rst/"

echo "docs: guides (docs/*.md)"
mkdir -p "$OUT/rst/guides"
cp "$REPO"/docs/*.md "$OUT/rst/guides/"
fixed=(README quickstart glossary CONTRIBUTING)
facts=""
for page in "$REPO"/docs/*.md; do
  name=$(basename "$page" .md)
  [[ " ${fixed[*]} " == *" $name "* ]] || facts+="   guides/$name"$'\n'
done
for name in "${fixed[@]}"; do
  [[ -f $REPO/docs/$name.md ]] || { echo "docs: docs/$name.md is missing (tools/docsite/index.rst lists it)" >&2; exit 1; }
done
python3 - "$HERE/index.rst" "$OUT/rst/index.rst" "$facts" <<'PY'
import sys
src, dest, facts = sys.argv[1:]
text = open(src, encoding="utf-8").read()
assert "@FACT_PAGES@" in text, f"{src}: placeholder @FACT_PAGES@ missing"
open(dest, "w", encoding="utf-8").write(text.replace("@FACT_PAGES@\n", facts))
PY

echo "docs: HTML (sphinx-build -W)"
sphinx-build -q -W --keep-going -n -b html -c "$HERE" -d "$OUT/doctrees" "$OUT/rst" "$OUT/html"
echo "docs: $OUT/html/index.html built in $((SECONDS - start)) s"
