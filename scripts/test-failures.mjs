// Prints the failed tests of a vitest JSON report, one line each, so the last lines of a CI log name what failed
// (CI keeps only the tail of a long run's output, and vitest lists failures far above it).
// Usage: node scripts/test-failures.mjs <report.json> <label>
import { readFileSync, existsSync } from 'node:fs';
import { relative } from 'node:path';
import { stripVTControlCharacters } from 'node:util';

const [file, label = 'vitest'] = process.argv.slice(2);
if (!file || !existsSync(file)) {
  console.error(`${label}: no report at ${file ?? '(none)'} (vitest stopped before writing it)`);
  process.exit(0);
}
const report = JSON.parse(readFileSync(file, 'utf8'));
const firstLine = (text) =>
  stripVTControlCharacters(String(text ?? ''))
    .split('\n')
    .find((l) => l.trim()) ?? '';
// A fast-check failure's first line says only that a property failed; its seed and counterexample replay it.
const propertyDetail = (text) => {
  const all = stripVTControlCharacters(String(text ?? '')).split('\n');
  const keep = all.filter((l) => /^\s*(\{ seed:|Counterexample:|Caused by:)/.test(l)).map((l) => l.trim());
  return keep.length > 0 ? ` [${keep.join(' | ').slice(0, 600)}]` : '';
};
const lines = [];
for (const suite of report.testResults ?? []) {
  const path = relative(process.cwd(), suite.name);
  const failed = (suite.assertionResults ?? []).filter((t) => t.status === 'failed');
  for (const t of failed)
    lines.push(
      `  FAIL ${path} > ${t.fullName}: ${firstLine(t.failureMessages?.[0]).slice(0, 300)}` +
        propertyDetail(t.failureMessages?.[0]),
    );
  if (failed.length === 0 && suite.status === 'failed')
    lines.push(`  FAIL ${path}: ${firstLine(suite.message).slice(0, 300)}`);
}
console.error(
  `${label}: ${report.numPassedTests ?? '?'} passed, ${report.numFailedTests ?? '?'} failed of ${report.numTotalTests ?? '?'} tests in ${report.numTotalTestSuites ?? '?'} suites`,
);
for (const line of lines) console.error(line);
