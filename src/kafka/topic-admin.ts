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

/** Kafka's own default message size limit (message.max.bytes), used when the configuration names none. */
export const DEFAULT_MAX_MESSAGE_BYTES = 1024 * 1024;

/** How long new topics may take to get a leader for every partition before connect() fails (and is retried). */
const TOPIC_LEADERS_TIMEOUT_MS = 30_000;

/**
 * Replication of the topics the bridge creates on a cluster of `brokers`: the configured factor (or min(3, brokers))
 * and min.insync.replicas 2 from a factor of 3, so acks=all survives one broker down and never rests on one copy.
 */
export function topicReplication(
  configured: number | null,
  brokers: number,
): { replicationFactor: number; minInsyncReplicas: number } {
  const replicationFactor = configured ?? Math.max(1, Math.min(3, brokers));
  if (replicationFactor > brokers) {
    throw new Error(
      `KAFKA_REPLICATION_FACTOR=${replicationFactor} is larger than the ${brokers} broker(s) the cluster has now; lower it or wait for the brokers`,
    );
  }
  return { replicationFactor, minInsyncReplicas: replicationFactor >= 3 ? 2 : 1 };
}

/** The publisher's topic administration, over one admin connection opened on first use and kept for the probes. */
export class TopicAdmin {
  private probe: Promise<Admin> | null = null;
  /** Read while prepare() has the admin connection open, so that a leadership's restore check opens none again. */
  private cluster: string | null = null;
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

  private async createTopics(admin: Admin): Promise<void> {
    const existing = new Set(await admin.listTopics());
    const wanted = Object.values(this.config.topics).filter((t) => !existing.has(t));
    if (wanted.length > 0) {
      const { brokers } = await admin.describeCluster();
      const { replicationFactor, minInsyncReplicas } = topicReplication(this.config.replicationFactor, brokers.length);
      const insync = { name: 'min.insync.replicas', value: String(minInsyncReplicas) };
      // The state topic is a table and the changelog a store's log: compaction keeps the last row of every key.
      const compacted = new Set([this.config.topics.state, this.config.topics.changelog]);
      await admin.createTopics({
        // kafkajs's own wait fails on a broker that has not heard of a new topic yet (UNKNOWN_TOPIC_OR_PARTITION,
        // common on a fresh multi-broker cluster); awaitLeaders below treats that as "not yet".
        waitForLeaders: false,
        topics: wanted.map((topic) => ({
          topic,
          numPartitions: this.config.partitions,
          replicationFactor,
          configEntries: compacted.has(topic) ? [insync, { name: 'cleanup.policy', value: 'compact' }] : [insync],
        })),
      });
      await awaitLeaders(admin, wanted, this.clock);
      this.logger.info({ topics: wanted, replicationFactor, minInsyncReplicas }, 'created topics');
    }
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
