import type { Cluster, Redis } from 'ioredis';
import type { BridgeRedis } from './connection.js';

// Whether the Redis topology can meet REDIS_WAIT_REPLICAS at all. A replica that is away for a while is waited for
// (every write retries until one acknowledges); a topology that has no replica to wait for would make the bridge
// wait for ever, so that is said at once, naming the setting and the choices.

/** What the primary holding the account's keys has: its address and its replicas (connected, and known). */
export interface ReplicaReport {
  primary: string;
  /** Replicas acknowledging now. */
  connected: number;
  /** Replicas the topology knows of, connected or not (Cluster: the primary's replica nodes). */
  known: number;
}

/** The replicas of the primary that holds `slotKey` (any key with the account's hash tag). */
export async function replicaReport(redis: BridgeRedis, slotKey: string): Promise<ReplicaReport> {
  if ('nodes' in redis && typeof (redis as Cluster).nodes === 'function' && 'slots' in redis) {
    const cluster = redis as unknown as Cluster;
    const text = String(await cluster.call('CLUSTER', 'NODES'));
    const slot = Number(await cluster.call('CLUSTER', 'KEYSLOT', slotKey));
    const lines = text
      .trim()
      .split('\n')
      .map((l) => l.split(' '));
    const primary = lines.find((f) => f[2]?.includes('master') && ownsSlot(f.slice(8), slot));
    if (!primary) return { primary: 'unknown', connected: 0, known: 0 };
    const replicas = lines.filter((f) => f[3] === primary[0]);
    const connected = replicas.filter((f) => !f[2]?.includes('fail') && f[7] === 'connected').length;
    return { primary: primary[1]!.split('@')[0]!, connected, known: replicas.length };
  }
  const info = String(await (redis as unknown as Redis).info('replication'));
  const connected = Number(/connected_slaves:(\d+)/.exec(info)?.[1] ?? 0);
  const options = (redis as unknown as Redis).options;
  return { primary: `${options.host ?? '?'}:${options.port ?? '?'}`, connected, known: connected };
}

function ownsSlot(ranges: string[], slot: number): boolean {
  return ranges.some((r) => {
    const [from, to] = r.split('-').map(Number);
    return from !== undefined && slot >= from && slot <= (to ?? from);
  });
}

/**
 * The start-up verdict: null when the setting can be met (or waited for), else the one line to stop with. A primary
 * whose replicas are away is waited for; one without any can never acknowledge.
 */
export function durabilityProblem(report: ReplicaReport, waitReplicas: number, willWait: boolean): string | null {
  if (waitReplicas === 0 || report.known >= waitReplicas || willWait) return null;
  return (
    `REDIS_WAIT_REPLICAS=${waitReplicas} cannot be met: the primary ${report.primary} has ${report.known} replica(s). ` +
    'Lower REDIS_WAIT_REPLICAS (0 is safe: a failover that loses commits costs a restore from Kafka), add a replica, ' +
    'or set REDIS_WAIT_FOR_REPLICAS=true to wait for one'
  );
}
