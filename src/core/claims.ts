import { ConfigError } from './errors.js';
import { DEPLOYMENT_HEADER } from './identity.js';

// Who else is publishing into this account's topics right now, judged before a leadership acts on Kafka (fences
// the transactional id, writes a record, copies a key). Every leader's heartbeat names, in headers, its deployment,
// the Redis instance it keeps its state in (a random id that Redis holds under the deployment's key prefix) and the
// state topic with its key prefix. A heartbeat read back from the last few heartbeat intervals that is not this
// deployment's own (same deployment, same account, a Redis this process has used) is another installation:
// - the same deployment id with another Redis: a twin (the same settings, its own Redis), which would take the
//   transactional id the live one holds, and both would fence each other for ever;
// - another deployment publishing the same account into the same state topic: every review would be published
//   twice;
// - another account whose rows go to the same state topic under the same key prefix: compaction keeps one row of
//   each review id the two share.
// Heartbeats written before these headers existed (an earlier version) claim nothing.

/** Heartbeat headers naming who wrote it. */
export const CLAIM_HEADERS = {
  deployment: DEPLOYMENT_HEADER,
  redis: 'bridge-redis-instance',
  state: 'bridge-state',
} as const;

/** A heartbeat read back: its account (the record key) and what its headers name. */
export interface ClaimSeen {
  account: string;
  deployment: string;
  redis: string;
  /** `<state topic> <key prefix>` of the writer. */
  state: string;
  /** When it was written (the record's timestamp, ms). */
  at: number;
}

/** What this leadership would claim. */
export interface OwnClaim {
  account: string;
  deployment: string;
  /** `<state topic> <key prefix>` (see stateClaim). */
  state: string;
  /** Whether `redis` is an instance this process has kept its state in. */
  knownRedis(redis: string): boolean;
}

/** The state header of a writer: its state topic and the key prefix of its rows (blank: none). */
export function stateClaim(topic: string, keyPrefix: string | undefined): string {
  return `${topic} ${keyPrefix ?? ''}`;
}

/** Another installation's claim on this account's topics, or null when every heartbeat seen is this one's. */
export type ForeignClaim = { kind: 'twin' | 'deployment' | 'account'; seen: ClaimSeen } | null;

/** The first heartbeat (the most recent) that another installation wrote into this account's topics. */
export function foreignClaim(seen: readonly ClaimSeen[], mine: OwnClaim): ForeignClaim {
  const latest = [...seen].sort((a, b) => b.at - a.at);
  for (const h of latest) {
    if (h.state !== mine.state && h.account !== mine.account) continue;
    if (h.account === mine.account && h.deployment === mine.deployment) {
      if (!mine.knownRedis(h.redis)) return { kind: 'twin', seen: h };
      continue;
    }
    if (h.state !== mine.state) continue;
    return { kind: h.account === mine.account ? 'deployment' : 'account', seen: h };
  }
  return null;
}

/** The one-line refusal of a foreign claim (kind setting), naming the settings that tell installations apart. */
export function claimRefusal(claim: NonNullable<ForeignClaim>, mine: OwnClaim, heartbeatTopic: string): ConfigError {
  const { seen } = claim;
  const when = `a heartbeat in ${heartbeatTopic} at ${new Date(seen.at).toISOString()}`;
  const [stateTopic] = mine.state.split(' ');
  if (claim.kind === 'twin') {
    return new ConfigError(
      'BRIDGE_DEPLOYMENT_ID',
      `deployment ${mine.deployment} already runs account ${mine.account} with another Redis (instance ${seen.redis}, ${when}): ` +
        'this is a second installation with the same settings, and it would fence the first at Kafka; nothing was fenced or written. ' +
        'Give this installation its own BRIDGE_DEPLOYMENT_ID and topics (KAFKA_TOPIC_*), or stop it; ' +
        'if the other Redis is gone for good (its state lost), this clears once its heartbeats stop (3 HEARTBEAT_INTERVAL_MS)',
    );
  }
  if (claim.kind === 'deployment') {
    return new ConfigError(
      'KAFKA_TOPIC_STATE',
      `deployment ${seen.deployment} already publishes account ${mine.account} into ${stateTopic} (${when}), and this is deployment ${mine.deployment}: ` +
        'both would publish every review; nothing was fenced or written. Give this deployment its own topics (KAFKA_TOPIC_*), ' +
        `or set BRIDGE_DEPLOYMENT_ID=${seen.deployment} if it is that deployment`,
    );
  }
  return new ConfigError(
    'KAFKA_TOPIC_STATE',
    `account ${seen.account} (deployment ${seen.deployment}) already writes its rows into ${stateTopic} under the same keys (${when}): ` +
      `compaction would keep one row per review id of both accounts; nothing was fenced or written. Give account ${mine.account} its own topics (KAFKA_TOPIC_*)`,
  );
}
