import { defineConfig } from 'vitest/config';

// Four suites: unit (pure, no I/O), integration (real Redis/Kafka/HTTP), e2e (the whole bridge), simulation (the
// real loop in a simulated world under seeded fault schedules, test/sim; no I/O, about two minutes).
// Integration and e2e share one Kafka broker and one Redis started by the global setup.
export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts'],
          environment: 'node',
          setupFiles: ['test/helpers/property-runs.ts'],
          // More property runs take longer (test/helpers/property-runs.ts).
          ...(process.env.PROPERTY_RUNS ? { testTimeout: 600_000 } : {}),
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          environment: 'node',
          globalSetup: ['test/helpers/global-setup.ts'],
          testTimeout: 60_000,
          hookTimeout: 120_000,
          fileParallelism: false,
        },
      },
      {
        test: {
          name: 'e2e',
          include: ['test/e2e/**/*.test.ts'],
          environment: 'node',
          globalSetup: ['test/helpers/global-setup.ts'],
          testTimeout: 180_000,
          hookTimeout: 180_000,
          fileParallelism: false,
        },
      },
      {
        test: {
          name: 'simulation',
          include: ['test/sim/**/*.test.ts'],
          environment: 'node',
          // A wall-clock guard, not a speed check: 300 schedules take 1.5-5 minutes by the machine's load (the e2e
          // suite runs beside them in CI).
          testTimeout: 900_000,
        },
      },
    ],
  },
});
