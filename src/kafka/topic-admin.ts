import type { Admin, ConfigResourceTypes, Kafka } from 'kafkajs';
import type { Logger } from 'pino';
import type { BridgeConfig } from '../config/config.js';
import { systemClock, type Clock } from '../core/clock.js';
import { ConfigError } from '../core/errors.js';
import { FORMER_DEFAULT_CHANGELOG } from '../core/changelog.js';

// Topic administration of the Kafka adapter, over one admin connection: creating the bridge's topics (replication,
// compaction), reading the message limit they allow, the cluster id, and the readiness probe.

// The Kafka protocol's resource type of a topic. kafkajs is CommonJS and Node's ESM loader cannot see its
// ConfigResourceTypes export by name (vitest's transform hides this), so the enum is used as a type only.
const TOPIC_RESOURCE = 2 as ConfigResourceTypes.TOPIC;
const BROKER_RESOURCE = 4 as ConfigResourceTypes.BROKER;

/** Kafka's own default message size limit (message.max.bytes), used when the configuration names none. */
export const DEFAULT_MAX_MESSAGE_BYTES = 1024 * 1024;

/** How long new topics may take to get a leader for every partition before connect() fails (and is retried). */
const TOPIC_LEADERS_TIMEOUT_MS = 30_000;

/**
 * How long topic creation waits for the brokers that the asked replication needs (a slow start, a rolling restart)
 * before connect() fails with a line naming the setting; the leadership then retries with its backoff.
 */
export const BROKERS_WAIT_MS = 60_000;

/** What the bridge asks of the topics it creates. */
export interface TopicDurability {
  /** Copies of every partition; -1 (KIP-464) takes the broker's default.replication.factor. */
  replicationFactor: number;
  /** min.insync.replicas set on each topic; null keeps the broker's own. */
  minInsyncReplicas: number | null;
}

/**
 * Replication of the topics the bridge creates: KAFKA_REPLICATION_FACTOR exactly, with min.insync.replicas 2 from
 * 3 copies so acks=all survives one broker down; unset, the broker's own defaults, never a count of the brokers
 * that happen to be registered at that instant (one late broker would make every topic weaker for good).
 */
export function topicDurability(configured: number | null): TopicDurability {
  if (configured === null) return { replicationFactor: -1, minInsyncReplicas: null };
  return { replicationFactor: configured, minInsyncReplicas: configured >= 3 ? 2 : 1 };
}

/** Replication an existing topic has: copies of its smallest partition and its min.insync.replicas. */
export interface TopicReplicationState {
  replicas: number;
  minInsyncReplicas: number;
}

/**
 * Why an existing topic is weaker than asked (null when it is not): `asked` holds the concrete factor and
 * min.insync.replicas (the configured ones, or the broker's defaults when the factor is unset).
 */
export function durabilityShortfall(asked: TopicReplicationState, actual: TopicReplicationState): string | null {
  const gaps: string[] = [];
  if (actual.replicas < asked.replicas) gaps.push(`${actual.replicas} replicas where ${asked.replicas} are asked`);
  if (actual.minInsyncReplicas < asked.minInsyncReplicas) {
    gaps.push(`min.insync.replicas=${actual.minInsyncReplicas} where ${asked.minInsyncReplicas} is asked`);
  }
  return gaps.length > 0 ? gaps.join(', ') : null;
}

/** The publisher's topic administration, over one admin connection opened on first use and kept for the probes. */
export class TopicAdmin {
  private probe: Promise<Admin> | null = null;
  /** Read while prepare() has the admin connection open, so that a leadership's restore check opens none again. */
  private cluster: string | null = null;
  private shortfalls: ReadonlyMap<string, string> = new Map();
  /** Whether the former default changelog topic exists and this deployment uses its own default one. */
  private formerDefault = false;

  constructor(
    private readonly kafka: Kafka,
    private readonly config: BridgeConfig['kafka'],
    private readonly logger: Logger,
    /** Times the wait for the new topics' leaders (tests pass a fake). */
    private readonly clock: Clock = systemClock,
  ) {}

  /**
   * Creates the topics when allowed (idempotent) and reads their max.message.bytes; resolves the limit every
   * message is held to (the smallest of those and `current`).
   */
  async prepare(current: number): Promise<number> {
    const admin = await this.admin();
    await this.noteFormerDefault(admin);
    if (this.config.createTopics) await this.createTopics(admin);
    await this.checkDurability(admin);
    const limit = await this.readTopicLimits(admin, current);
    this.cluster = (await admin.describeCluster()).clusterId;
    return limit;
  }

  /** The id of the Kafka cluster (the one prepare() read: a publisher lives for one leadership). */
  async clusterId(): Promise<string> {
    if (this.cluster) return this.cluster;
    const admin = await this.admin();
    return (this.cluster = (await admin.describeCluster()).clusterId);
  }

  /**
   * Checks that the changelog topic keeps every key's last record for ever: cleanup.policy=compact, without
   * delete (retention would drop the entries of reviews that did not change, and a full restore would rebuild a
   * partial snapshot). Throws a ConfigError naming the topic and the setting; never alters the topic.
   */
  async verifyChangelog(): Promise<void> {
    // A leadership closes its admin connection once connected (the process probes with its own): a connection
    // opened here for the check is closed again, so that many leaderships do not keep one each.
    const opened = this.probe === null;
    try {
      await this.checkChangelogPolicy(await this.admin());
    } finally {
      if (opened) await this.close();
    }
  }

  private async checkChangelogPolicy(admin: Admin): Promise<void> {
    const topic = this.config.topics.changelog;
    let policy: string | undefined;
    try {
      const { resources } = await admin.describeConfigs({
        includeSynonyms: false,
        resources: [{ type: TOPIC_RESOURCE, name: topic, configNames: ['cleanup.policy'] }],
      });
      policy = resources[0]?.configEntries.find((e) => e.configName === 'cleanup.policy')?.configValue;
    } catch (err) {
      const reason = err instanceof Error ? err.message : String(err);
      throw new ConfigError(
        'KAFKA_TOPIC_CHANGELOG',
        `cannot read cleanup.policy of changelog topic ${topic} (${reason}): the bridge must see that it is compacted (allow DescribeConfigs on it)`,
      );
    }
    if (!changelogPolicyFits(policy)) {
      throw new ConfigError(
        'KAFKA_TOPIC_CHANGELOG',
        `changelog topic ${topic} has cleanup.policy=${policy ?? 'unknown'}: retention would drop entries of unchanged reviews; ` +
          `set cleanup.policy=compact on it (kafka-configs --alter --add-config cleanup.policy=compact) or point KAFKA_TOPIC_CHANGELOG at a compacted topic`,
      );
    }
  }

  /**
   * The default changelog topic of the versions before deployment identities when it exists on the cluster and this
   * deployment uses its own default (KAFKA_TOPIC_CHANGELOG unset), else null: a restore asks whether Redis's
   * history was written there (an upgrade) before it trusts this deployment's own topic (src/bridge/restore.ts).
   */
  formerChangelog(): string | null {
    return this.formerDefault ? FORMER_DEFAULT_CHANGELOG : null;
  }

  // An upgrade from a version whose default changelog was one topic for every deployment: with KAFKA_TOPIC_CHANGELOG
  // unset, this deployment writes its own, and the former one may hold its history (or another deployment's).
  private async noteFormerDefault(admin: Admin): Promise<void> {
    this.formerDefault =
      this.config.changelogDefaulted === true && (await admin.listTopics()).includes(FORMER_DEFAULT_CHANGELOG);
  }

  /** Cheap broker round trip for the readiness probe (no new connection per probe). */
  async ping(): Promise<void> {
    const admin = await this.admin();
    await admin.describeCluster();
  }

  /** Closes the admin connection (a later call opens one again). */
  async close(): Promise<void> {
    const probe = this.probe;
    this.probe = null;
    await probe?.then((admin) => admin.disconnect()).catch(() => undefined);
  }

  /** Why existing topics are weaker than the configuration asks, by topic (read by prepare(); empty: none). */
  durabilityShortfalls(): ReadonlyMap<string, string> {
    return this.shortfalls;
  }

  private async createTopics(admin: Admin): Promise<void> {
    const existing = new Set(await admin.listTopics());
    const wanted = Object.values(this.config.topics).filter((t) => !existing.has(t));
    if (wanted.length === 0) return;
    const durability = topicDurability(this.config.replicationFactor);
    const insync =
      durability.minInsyncReplicas === null
        ? []
        : [{ name: 'min.insync.replicas', value: String(durability.minInsyncReplicas) }];
    // The state topic is a table and the changelog a store's log: compaction keeps the last row of every key.
    const compacted = new Set([this.config.topics.state, this.config.topics.changelog]);
    await this.onceBrokersSuffice(admin, durability, () =>
      admin.createTopics({
        // kafkajs's own wait fails on a broker that has not heard of a new topic yet (UNKNOWN_TOPIC_OR_PARTITION,
        // common on a fresh multi-broker cluster); awaitLeaders below treats that as "not yet".
        waitForLeaders: false,
        topics: wanted.map((topic) => ({
          topic,
          numPartitions: this.config.partitions,
          replicationFactor: durability.replicationFactor,
          configEntries: compacted.has(topic) ? [...insync, { name: 'cleanup.policy', value: 'compact' }] : insync,
        })),
      }),
    );
    await awaitLeaders(admin, wanted, this.clock);
    this.logger.info(
      {
        topics: wanted,
        replicationFactor: durability.replicationFactor === -1 ? 'broker default' : durability.replicationFactor,
        minInsyncReplicas: durability.minInsyncReplicas ?? 'broker default',
      },
      'created topics',
    );
  }

  /**
   * Runs `create` until the brokers accept the asked copies. The broker alone knows whether it can (its default
   * factor when ours is unset; in KRaft a registered but fenced broker, one restarting, still takes replicas); one
   * that cannot refuses with INVALID_REPLICATION_FACTOR, never creates fewer. Then this waits, said once in the
   * log, and fails after BROKERS_WAIT_MS naming the setting (the leadership retries with its backoff).
   */
  private async onceBrokersSuffice(admin: Admin, durability: TopicDurability, create: () => Promise<unknown>) {
    const deadline = this.clock.now() + BROKERS_WAIT_MS;
    const asked =
      durability.replicationFactor === -1
        ? "the brokers' default.replication.factor (KAFKA_REPLICATION_FACTOR is unset)"
        : `KAFKA_REPLICATION_FACTOR=${durability.replicationFactor}`;
    let waitingSince: number | null = null;
    for (;;) {
      try {
        await create();
        if (waitingSince !== null) {
          this.logger.info({ waitedMs: this.clock.now() - waitingSince }, 'brokers registered; topics created');
        }
        return;
      } catch (err) {
        if (!isReplicationShortfall(err)) throw err;
      }
      const registered = (await admin.describeCluster()).brokers.length;
      if (this.clock.now() >= deadline) {
        throw new Error(
          `cannot create the topics with ${asked}: ${registered} broker(s) registered after ${BROKERS_WAIT_MS / 1000} s; start the missing brokers or lower the factor`,
        );
      }
      if (waitingSince === null) {
        waitingSince = this.clock.now();
        this.logger.warn(
          { registered, waitMs: BROKERS_WAIT_MS },
          `waiting for Kafka brokers: ${asked} cannot be met by the ${registered} broker(s) registered; topics are never created with fewer copies`,
        );
      }
      await this.clock.sleep(1_000);
    }
  }

  /**
   * Compares the existing topics with what the configuration asks (the configured factor, or the brokers' defaults
   * when unset) and warns once per weaker topic: a topic made by hand or by an older bridge keeps its replication.
   * Being refused the broker or topic configs (ACLs) skips the check.
   */
  private async checkDurability(admin: Admin): Promise<void> {
    const topics = Object.values(this.config.topics);
    try {
      const asked = await this.askedDurability(admin);
      if (asked === null) return;
      const [{ topics: metadata }, { resources }] = await Promise.all([
        admin.fetchTopicMetadata({ topics }),
        admin.describeConfigs({
          includeSynonyms: false,
          resources: topics.map((name) => ({ type: TOPIC_RESOURCE, name, configNames: ['min.insync.replicas'] })),
        }),
      ]);
      const insyncOf = new Map(
        resources.map((r) => [
          r.resourceName,
          Number(r.configEntries.find((e) => e.configName === 'min.insync.replicas')?.configValue),
        ]),
      );
      const shortfalls = new Map<string, string>();
      for (const t of metadata) {
        const replicas = Math.min(...t.partitions.map((p) => p.replicas.length));
        const minInsyncReplicas = insyncOf.get(t.name) ?? Number.NaN;
        if (!Number.isFinite(replicas) || !Number.isInteger(minInsyncReplicas)) continue;
        const gap = durabilityShortfall(asked, { replicas, minInsyncReplicas });
        if (gap !== null) shortfalls.set(t.name, gap);
      }
      this.shortfalls = shortfalls;
      for (const [topic, gap] of shortfalls) {
        this.logger.warn(
          { topic, gap },
          "a topic is less durable than KAFKA_REPLICATION_FACTOR (or the brokers' defaults) asks: acks=all rests on fewer copies; raise its replication (kafka-reassign-partitions) or min.insync.replicas",
        );
      }
    } catch (err) {
      this.logger.debug({ err: err instanceof Error ? err.message : String(err) }, 'topic durability not checked');
    }
  }

  /** The concrete factor and min.insync.replicas asked: configured, or read from a broker's defaults. */
  private async askedDurability(admin: Admin): Promise<TopicReplicationState | null> {
    const durability = topicDurability(this.config.replicationFactor);
    if (durability.replicationFactor !== -1 && durability.minInsyncReplicas !== null) {
      return { replicas: durability.replicationFactor, minInsyncReplicas: durability.minInsyncReplicas };
    }
    const { brokers } = await admin.describeCluster();
    const broker = brokers[0];
    if (!broker) return null;
    const { resources } = await admin.describeConfigs({
      includeSynonyms: false,
      resources: [
        {
          type: BROKER_RESOURCE,
          name: String(broker.nodeId),
          configNames: ['default.replication.factor', 'min.insync.replicas'],
        },
      ],
    });
    const value = (name: string) =>
      Number(resources[0]?.configEntries.find((e) => e.configName === name)?.configValue ?? Number.NaN);
    const replicas = value('default.replication.factor');
    const minInsyncReplicas = value('min.insync.replicas');
    return Number.isInteger(replicas) && Number.isInteger(minInsyncReplicas) ? { replicas, minInsyncReplicas } : null;
  }

  // A topic may allow less than the configured limit; a message over it would fail its page on every retry. Not
  // being allowed to describe configs (ACLs) is no reason to stop: the configured limit then stands.
  private async readTopicLimits(admin: Admin, current: number): Promise<number> {
    try {
      const { resources } = await admin.describeConfigs({
        includeSynonyms: false,
        resources: Object.values(this.config.topics).map((name) => ({
          type: TOPIC_RESOURCE,
          name,
          configNames: ['max.message.bytes'],
        })),
      });
      const limits = resources.flatMap((r) =>
        r.configEntries.filter((e) => e.configName === 'max.message.bytes').map((e) => Number(e.configValue)),
      );
      const configured = this.config.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
      const smallest = Math.min(configured, ...limits.filter((n) => Number.isInteger(n) && n > 0));
      if (smallest < current) {
        this.logger.info(
          { configured, topics: smallest },
          'a topic allows smaller messages than KAFKA_MAX_MESSAGE_BYTES: using its max.message.bytes',
        );
      }
      return smallest;
    } catch (err) {
      this.logger.warn(
        { err: err instanceof Error ? err.message : String(err) },
        "could not read the topics' max.message.bytes; using KAFKA_MAX_MESSAGE_BYTES",
      );
      return current;
    }
  }

  /** The one admin connection (topic creation and limits at connect, then the probes). */
  private admin(): Promise<Admin> {
    if (!this.probe) {
      const admin = this.kafka.admin();
      this.probe = admin.connect().then(() => admin);
      // A failed connection is retried by the next call, not cached as a rejected promise.
      this.probe.catch(() => (this.probe = null));
    }
    return this.probe;
  }
}

/** Whether a topic creation was refused because the registered brokers cannot hold the asked copies. */
function isReplicationShortfall(err: unknown): boolean {
  const typed = (e: unknown) => (e as { type?: unknown } | null)?.type === 'INVALID_REPLICATION_FACTOR';
  const nested = (err as { errors?: unknown } | null)?.errors;
  return typed(err) || (Array.isArray(nested) && nested.some(typed));
}

/** Whether a changelog's cleanup.policy keeps every key's last record: compact, and no delete. */
export function changelogPolicyFits(policy: string | undefined): boolean {
  const parts = (policy ?? '').split(',').map((p) => p.trim());
  return parts.includes('compact') && !parts.includes('delete');
}

/** Waits until every partition of the topics has a leader, as the metadata of any broker asked tells. */
async function awaitLeaders(admin: Admin, topics: readonly string[], clock: Clock): Promise<void> {
  const deadline = clock.now() + TOPIC_LEADERS_TIMEOUT_MS;
  for (;;) {
    const ready = await admin
      .fetchTopicMetadata({ topics: [...topics] })
      .then((m) => m.topics.every((t) => t.partitions.length > 0 && t.partitions.every((p) => p.leader >= 0)))
      .catch(() => false);
    if (ready) return;
    if (clock.now() > deadline) throw new Error(`new topics without a leader after ${TOPIC_LEADERS_TIMEOUT_MS} ms`);
    await clock.sleep(200);
  }
}
