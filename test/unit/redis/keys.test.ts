import fc from 'fast-check';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { accountKeys } from '../../../src/redis/connection.js';

// Redis Cluster hashes only the first {...} of a key: every key of an account must have the account there, so the
// lease, checkpoint, snapshot buckets, count and dead-letter memory share one slot (scripts and pipelines need it).
const hashTag = (key: string): string | null => {
  const open = key.indexOf('{');
  const close = open < 0 ? -1 : key.indexOf('}', open + 1);
  return close > open + 1 ? key.slice(open + 1, close) : null;
};

const REDIS_SRC = join(dirname(new URL(import.meta.url).pathname), '../../../src/redis');

/** Every key the bridge writes, by the name after the account tag (`<prefix>:{<account>}:<name>`). */
const ACCOUNT_KEYS = [
  'epoch',
  'lease',
  'checkpoint',
  'count',
  'manifest',
  'sweep-request',
  'restore-request',
  'checkpoint-request',
  'paused',
  'resync-request',
  'resync-active',
  'progress',
  'refused',
  'gone',
  'dlq:<digest>',
  's:<bucket>',
] as const;

/** Keys of the whole deployment (every account under one prefix): `<prefix>:<name>`, no account tag. */
const DEPLOYMENT_KEYS = [
  'replicas',
  'fingerprint-key',
  'replica-health:<replica>',
  'write-probe',
  'redis-instance',
] as const;

describe('accountKeys', () => {
  it('puts every key of an account in the account hash tag (one Redis Cluster slot)', () => {
    const account = fc.stringMatching(/^[A-Za-z0-9_.-]{1,64}$/);
    const prefix = fc.stringMatching(/^[A-Za-z0-9_.:-]{1,32}$/);
    fc.assert(
      fc.property(account, prefix, fc.nat(), fc.stringMatching(/^[0-9a-f]{1,40}$/), (a, p, bucket, digest) => {
        const k = accountKeys(p, a);
        // Every key the layout has, so that a key added later cannot miss the tag unnoticed.
        const keys = Object.values(k).map((v) => (typeof v === 'function' ? v(digest as never) : v));
        keys.push(k.deadLettered(digest), k.bucket(bucket));
        expect(keys.length).toBe(ACCOUNT_KEYS.length + 1 + 2);
        for (const key of keys) expect(hashTag(String(key))).toBe(a);
      }),
    );
  });

  it('names exactly the keys listed here (a new key must be added to the list and checked)', () => {
    const k = accountKeys('p', 'acct');
    const names = Object.values(k)
      .map((v) => (typeof v === 'function' ? v('<x>' as never) : v))
      .map((key) => String(key).replace('p:{acct}:', ''))
      .map((name) => name.replace(/^dlq:.*/, 'dlq:<digest>').replace(/^s:.*/, 's:<bucket>'));
    expect([...new Set(names)].sort()).toEqual([...ACCOUNT_KEYS].sort());
  });

  it('every key template of the Redis adapter is one of the listed keys, deployment keys included', () => {
    // The keys are built from templates like `${base}:lease` and `${prefix}:replicas`: read them from the source, so
    // a key written anywhere in src/redis is caught even when it is not in accountKeys.
    const found = new Set<string>();
    for (const file of readdirSync(REDIS_SRC).filter((f) => f.endsWith('.ts'))) {
      const text = readFileSync(join(REDIS_SRC, file), 'utf8');
      for (const m of text.matchAll(/`\$\{(base|prefix)\}:([a-z-]+)(:\$\{[a-z]+\}|:\*)?`/g)) {
        const name = m[2]!;
        const suffix = m[3]
          ? name === 'dlq'
            ? ':<digest>'
            : name === 'replica-health'
              ? ':<replica>'
              : ':<bucket>'
          : '';
        found.add(`${m[1] === 'base' ? 'account' : 'deployment'} ${name}${suffix}`);
      }
    }
    const listed = [...ACCOUNT_KEYS.map((n) => `account ${n}`), ...DEPLOYMENT_KEYS.map((n) => `deployment ${n}`)];
    expect([...found].sort()).toEqual(listed.sort());
  });
});
