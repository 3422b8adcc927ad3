/** @type {import('dependency-cruiser').IConfiguration} */
// The layer rule of src/ (docs/architecture.md): imports go one way, and no import circle. `npm run depcheck` and
// test/unit/architecture.test.ts run it.
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'A circle makes two modules one: merge them or move what both need into a third.',
      from: { path: '^src' },
      to: { circular: true },
    },
    {
      name: 'core-is-pure',
      severity: 'error',
      comment: 'The domain imports nothing of the bridge outside src/core (no adapter, no orchestration).',
      from: { path: '^src/core/' },
      to: { path: '^src/', pathNot: '^src/core/' },
    },
    {
      name: 'adapters-import-no-orchestration',
      severity: 'error',
      comment: 'Kafka, Redis and upstream adapters serve the orchestration; they never call back into it.',
      from: { path: '^src/(kafka|redis|upstream)/' },
      to: { path: '^src/(bridge|app|cli)/' },
    },
    {
      name: 'orchestration-imports-no-composition',
      severity: 'error',
      from: { path: '^src/bridge/' },
      to: { path: '^src/(app|cli)/' },
    },
    {
      name: 'orchestration-uses-adapters-through-ports',
      severity: 'error',
      comment:
        'The orchestration may name adapter types (type-only imports), but takes no runtime value from the Kafka, ' +
        'Redis or upstream adapters: the composition (src/app) hands them in as ports (src/core/ports.ts), and ' +
        'failures are told apart by kind and retriable (src/core/errors.ts), never by an adapter class.',
      from: { path: '^src/bridge/' },
      to: { path: '^src/(kafka|redis|upstream)/', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'config-and-ops-import-no-orchestration',
      severity: 'error',
      from: { path: '^src/(config|ops)/' },
      to: { path: '^src/(bridge|app|cli|kafka|redis)/' },
    },
    {
      name: 'admin-api-is-wired-by-the-app',
      severity: 'error',
      comment:
        'The admin HTTP API (src/admin) drives Redis on behalf of operators; only src/app starts it. The domain, the adapters, the orchestration, config and ops never import it.',
      from: { path: '^src/(core|kafka|redis|upstream|bridge|config|ops|consumer|simulator)/' },
      to: { path: '^src/admin/' },
    },
    {
      name: 'admin-api-imports-no-orchestration',
      severity: 'error',
      comment: 'The admin API records requests in Redis for the leader; it never runs passes or the app itself.',
      from: { path: '^src/admin/' },
      to: { path: '^src/(app|cli|bridge)/' },
    },
    {
      name: 'simulator-stands-apart',
      severity: 'error',
      comment: 'The upstream simulator is a test double of the upstream: it knows the domain, not the bridge.',
      from: { path: '^src/simulator/' },
      to: { path: '^src/', pathNot: '^src/(simulator|core)/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.js'] },
  },
};
