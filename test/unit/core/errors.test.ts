import { describe, expect, it } from 'vitest';
import {
  BridgeError,
  ConfigError,
  CursorFormatError,
  FencedError,
  LimiterClosedError,
  ReplicationError,
  SecretError,
  SnapshotLostError,
  UpstreamError,
  UsageError,
  hasKind,
  isRetriable,
  kindOf,
  CommitOutcomeUnknownError,
} from '../../../src/core/errors.js';
import { ReplicationError as RedisReplicationError } from '../../../src/redis/connection.js';
import { UpstreamError as ClientUpstreamError } from '../../../src/upstream/errors.js';

// The one error model: every adapter's failure carries a kind and a retriable flag the orchestration acts on.

describe('error model', () => {
  it('gives each class its kind and retriable flag', () => {
    const table: Array<[BridgeError, string, boolean]> = [
      [new FencedError('x'), 'fenced', false],
      [new SnapshotLostError('x'), 'snapshot_lost', true],
      [new ReplicationError(1, 0, 100), 'replication', true],
      [new CommitOutcomeUnknownError('x'), 'commit_unknown', true],
      [new UpstreamError('server', 'x'), 'server', true],
      [new UpstreamError('server', 'x', { final: true }), 'server', false],
      [new UpstreamError('auth', 'x'), 'auth', false],
      [new CursorFormatError('x'), 'cursor_format', false],
      [new LimiterClosedError(), 'closed', false],
      [new ConfigError('POLL_INTERVAL_MS', 'x'), 'setting', false],
      [new SecretError('x'), 'setting', false],
      [new UsageError('x'), 'usage', false],
    ];
    for (const [err, kind, retriable] of table) {
      expect(err).toBeInstanceOf(BridgeError);
      expect([err.name, kindOf(err), isRetriable(err)]).toEqual([err.name, kind, retriable]);
    }
  });

  it('keeps class names (logs and health bodies name them) and messages free of values', () => {
    expect(new ReplicationError(2, 1, 500).message).toBe(
      'write acknowledged by 1 of 2 required replica(s) within 500 ms',
    );
    expect(new FencedError('x').name).toBe('FencedError');
    expect(new ConfigError('REDIS_URL', 'required').message).toBe('invalid configuration: REDIS_URL: required');
  });

  it('is the same class whichever adapter module re-exports it', () => {
    expect(RedisReplicationError).toBe(ReplicationError);
    expect(ClientUpstreamError).toBe(UpstreamError);
  });

  it('reads a foreign error by its own retriable flag (kafkajs), and retries anything unknown', () => {
    expect(kindOf(new Error('boom'))).toBe('other');
    expect(isRetriable(Object.assign(new Error('k'), { retriable: false }))).toBe(false);
    expect(isRetriable(Object.assign(new Error('k'), { retriable: true }))).toBe(true);
    expect(isRetriable(new Error('boom'))).toBe(true);
    expect(isRetriable('a string')).toBe(true);
  });

  it('hasKind matches any of the given kinds and nothing that is not a BridgeError', () => {
    expect(hasKind(new UpstreamError('cursor_invalid', 'x'), 'cursor_invalid')).toBe(true);
    expect(hasKind(new FencedError('x'), 'snapshot_lost', 'fenced')).toBe(true);
    expect(hasKind(new FencedError('x'), 'snapshot_lost')).toBe(false);
    expect(hasKind(Object.assign(new Error('x'), { kind: 'fenced' }), 'fenced')).toBe(false);
  });
});
