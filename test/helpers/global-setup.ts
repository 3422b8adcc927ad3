import type { TestProject } from 'vitest/node';

// PLACEHOLDER (infra helper replaces it): takes service addresses from the environment only.
export default function setup(project: TestProject): void {
  project.provide('kafkaBrokers', process.env.KAFKA_BROKERS ?? '127.0.0.1:9092');
  project.provide('redisUrl', process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
}

declare module 'vitest' {
  export interface ProvidedContext {
    kafkaBrokers: string;
    redisUrl: string;
  }
}
