import fc from 'fast-check';

// fast-check runs each property 100 times by default; a property that fails one run in fifty passes most CI runs
// and blocks a landing at random. PROPERTY_RUNS=5000 (the long variant, docs/testing.md) hunts such edges before
// they land; a failure prints its seed and shrunk counterexample either way.
const runs = Number(process.env.PROPERTY_RUNS ?? '');
if (Number.isInteger(runs) && runs > 0) fc.configureGlobal({ numRuns: runs });
