import { describe, expect, it } from 'vitest';
import {
  dependencyOf,
  failureReason,
  nextDependencyState,
  settingsToCheck,
} from '../../../src/core/dependency-health.js';
import { BridgeError, FencedError, UpstreamError } from '../../../src/core/errors.js';

// Dependency health as data: errors of kafkajs, ioredis and the upstream client told apart by their shape, the
// reason codes operators read, and one change of state per failure (not one per retry).

const named = (name: string, message: string, extra: Record<string, unknown> = {}) =>
  Object.assign(new Error(message), { name, ...extra });

describe('failureReason', () => {
  it('reads the reason from the error and its causes', () => {
    const refused = named('KafkaJSConnectionError', 'Connection error: connect ECONNREFUSED 127.0.0.1:1', {
      code: 'ECONNREFUSED',
    });
    expect(failureReason(named('KafkaJSNonRetriableError', 'failed', { cause: refused }))).toBe('unreachable');
    expect(failureReason(named('ReplyError', "OOM command not allowed when used memory > 'maxmemory'."))).toBe('oom');
    expect(failureReason(named('ReplyError', "READONLY You can't write against a read only replica."))).toBe(
      'readonly',
    );
    expect(failureReason(named('ReplyError', 'WRONGPASS invalid username-password pair or user is disabled.'))).toBe(
      'auth_failed',
    );
    expect(failureReason(named('ReplyError', 'NOAUTH Authentication required.'))).toBe('auth_failed');
    expect(failureReason(named('KafkaJSSASLAuthenticationError', 'SASL PLAIN authentication failed'))).toBe(
      'auth_failed',
    );
    expect(failureReason(named('Error', 'self-signed certificate', { code: 'DEPTH_ZERO_SELF_SIGNED_CERT' }))).toBe(
      'tls',
    );
    expect(failureReason(new UpstreamError('auth', 'token refused', { final: true }))).toBe('auth_failed');
    expect(failureReason(new UpstreamError('network', 'connection refused'))).toBe('unreachable');
    expect(failureReason(named('Error', 'Request timed out'))).toBe('timeout');
    expect(failureReason(named('Error', 'something else'))).toBe('error');
  });
});

describe('dependencyOf', () => {
  it('names the dependency of a library error, and none for the bridge own failures', () => {
    expect(dependencyOf(named('KafkaJSNumberOfRetriesExceeded', 'x'))).toBe('kafka');
    expect(dependencyOf(named('ReplyError', 'OOM command not allowed'))).toBe('redis');
    expect(dependencyOf(named('MaxRetriesPerRequestError', 'Reached the max retries per request limit'))).toBe('redis');
    expect(dependencyOf(new UpstreamError('network', 'down'))).toBe('upstream');
    expect(dependencyOf(new UpstreamError('cursor_loop', 'loop'))).toBeNull();
    expect(dependencyOf(new FencedError('taken'))).toBeNull();
    expect(
      dependencyOf(new BridgeError('commit_unknown', 'x', { cause: named('KafkaJSRequestTimeoutError', 'x') })),
    ).toBeNull();
    expect(dependencyOf(new Error('plain'))).toBeNull();
  });
});

describe('nextDependencyState', () => {
  it('changes state once when a failure starts, not at every retry; again on a new reason and on recovery', () => {
    const first = nextDependencyState('kafka', undefined, { reason: 'unreachable' }, 1_000);
    expect(first.change).toBe('failing');
    expect(first.state).toEqual({
      status: 'failing',
      reason: 'unreachable',
      since: 1_000,
      settings: ['KAFKA_BROKERS'],
    });
    const retry = nextDependencyState('kafka', first.state, { reason: 'unreachable' }, 2_000);
    expect(retry).toEqual({ state: first.state, change: null });
    const auth = nextDependencyState('kafka', first.state, { reason: 'auth_failed' }, 3_000);
    expect(auth.change).toBe('failing');
    expect(auth.state).toMatchObject({ reason: 'auth_failed', since: 1_000 });
    const ok = nextDependencyState('kafka', auth.state, null, 4_000);
    expect(ok).toEqual({ state: { status: 'ok', since: 4_000 }, change: 'recovered' });
    expect(nextDependencyState('kafka', ok.state, null, 5_000).change).toBeNull();
    expect(nextDependencyState('kafka', undefined, null, 5_000).change).toBeNull();
  });

  it('names the settings to check for each reason, never values', () => {
    expect(settingsToCheck('redis', 'auth_failed')).toEqual(['REDIS_USERNAME', 'REDIS_PASSWORD_FILE', 'REDIS_URL']);
    expect(settingsToCheck('kafka', 'tls')).toContain('KAFKA_SSL_CA_FILE');
    expect(settingsToCheck('upstream', 'unreachable')).toEqual(['UPSTREAM_BASE_URL']);
    expect(settingsToCheck('redis', 'oom')[0]).toMatch(/maxmemory/);
    expect(settingsToCheck('schema_registry', 'unreachable')).toEqual(['SCHEMA_REGISTRY_URL']);
  });
});
