import { ConfigError, loadConfig } from '../../src/config/config.js';

// Shared by the configuration tests: the smallest valid environment, and the ConfigError a bad one raises.

/** The smallest environment loadConfig accepts (placeholder addresses, nothing is contacted). */
export const MINIMAL_ENV: Readonly<Record<string, string>> = {
  UPSTREAM_BASE_URL: 'http://127.0.0.1:8080',
  UPSTREAM_CLIENT_ID: 'id',
  UPSTREAM_CLIENT_SECRET: 's3cret-value',
  KAFKA_BROKERS: '127.0.0.1:9092',
  REDIS_URL: 'redis://127.0.0.1:6379',
  // No key file to read: the explicit choice of a generated key kept in Redis only.
  FINGERPRINT_KEY_GENERATE: 'true',
};

/** The ConfigError `load` throws; fails the test when it throws something else or nothing. */
export function configErrorOf(load: () => unknown): ConfigError {
  try {
    load();
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  throw new Error('expected a ConfigError');
}

/** The ConfigError loadConfig throws for `env`. */
export function errorOf(env: Record<string, string>): ConfigError {
  return configErrorOf(() => loadConfig(env));
}
