import { describe, expect, it } from 'vitest';
import {
  decideDurability,
  durabilityMessage,
  parseClusterNodes,
  parseConnectedReplicas,
  type DurabilityState,
} from '../../../src/redis/durability.js';

const ok: DurabilityState = { kind: 'ok' };
const T0 = Date.parse('2026-11-24T17:00:00Z');

describe('decideDurability', () => {
  it('is met with REDIS_WAIT_REPLICAS=0 whatever the topology', () => {
    expect(decideDurability(0, [{ primary: 'a:1', known: 0, connected: 0 }], ok, T0)).toEqual({ kind: 'ok' });
  });

  it('is met when every primary has enough connected replicas', () => {
    const primaries = [
      { primary: 'a:1', known: 1, connected: 1 },
      { primary: 'b:1', known: 2, connected: 1 },
    ];
    expect(decideDurability(1, primaries, ok, T0)).toEqual({ kind: 'ok' });
  });

  it('calls a primary without the replicas in the topology missing (a replica-less Cluster)', () => {
    const primaries = [
      { primary: 'a:1', known: 1, connected: 1 },
      { primary: 'b:1', known: 0, connected: 0 },
    ];
    expect(decideDurability(1, primaries, ok, T0)).toEqual({ kind: 'missing', primary: 'b:1', wanted: 1, known: 0 });
  });

  it('calls a known but disconnected replica waiting, and keeps the time it started waiting', () => {
    const away = [{ primary: 'a:1', known: 1, connected: 0 }];
    const first = decideDurability(1, away, ok, T0);
    expect(first).toMatchObject({ kind: 'waiting', primary: 'a:1', since: T0 });
    const later = decideDurability(1, away, first, T0 + 60_000);
    expect(later).toMatchObject({ kind: 'waiting', since: T0 });
    expect(decideDurability(1, [{ primary: 'a:1', known: 1, connected: 1 }], later, T0 + 90_000)).toEqual(ok);
  });

  it('prefers missing over waiting when both occur', () => {
    const primaries = [
      { primary: 'a:1', known: 1, connected: 0 },
      { primary: 'b:1', known: 1, connected: 1 },
    ];
    expect(decideDurability(2, primaries, ok, T0).kind).toBe('missing');
  });

  it('is unknown without any primary', () => {
    expect(decideDurability(1, [], ok, T0).kind).toBe('unknown');
  });
});

describe('durabilityMessage', () => {
  it('names the primary, the setting and the choices when replicas are missing', () => {
    const line = durabilityMessage({ kind: 'missing', primary: '10.0.0.1:7000', wanted: 1, known: 0 })!;
    expect(line).toContain('10.0.0.1:7000');
    expect(line).toContain('REDIS_WAIT_REPLICAS=1');
    expect(line).toContain('REDIS_WAIT_FOR_REPLICAS=true');
    expect(line).toContain('add a replica');
    expect(line).not.toContain('\n');
  });

  it('says since when it waits for a replica', () => {
    const line = durabilityMessage({
      kind: 'waiting',
      primary: 'p:6379',
      wanted: 1,
      known: 1,
      connected: 0,
      since: T0,
    })!;
    expect(line).toMatch(/^waiting for a replica since 2026-11-24T17:00:00.000Z: /);
  });

  it('is null when met', () => {
    expect(durabilityMessage(ok)).toBeNull();
  });
});

describe('parsers', () => {
  it('reads connected_slaves from INFO replication', () => {
    expect(parseConnectedReplicas('# Replication\r\nrole:master\r\nconnected_slaves:2\r\n')).toBe(2);
    expect(parseConnectedReplicas('# Replication\r\nrole:master\r\n')).toBe(0);
  });

  it('reads each slot-owning primary and its replicas from CLUSTER NODES', () => {
    const nodes = [
      'aaa 10.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460',
      'bbb 10.0.0.2:7001@17001,host-b master - 0 1 2 connected 5461-10922',
      'ccc 10.0.0.3:7002@17002 master - 0 1 3 connected 10923-16383',
      'ddd 10.0.0.4:7003@17003 slave aaa 0 1 1 connected',
      'eee 10.0.0.5:7004@17004 slave,fail bbb 0 1 2 disconnected',
      'fff 10.0.0.6:7005@17005 master - 0 1 4 connected',
      '',
    ].join('\n');
    expect(parseClusterNodes(nodes)).toEqual([
      { primary: '10.0.0.1:7000', known: 1, connected: 1 },
      { primary: '10.0.0.2:7001', known: 1, connected: 0 },
      { primary: '10.0.0.3:7002', known: 0, connected: 0 },
    ]);
  });
});
