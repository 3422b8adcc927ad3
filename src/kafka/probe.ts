import { Kafka, type Admin } from 'kafkajs';
import type { Logger } from 'pino';
import type { BridgeConfig } from '../config/config.js';
import { kafkaOptions } from './publisher.js';

// The process's Kafka readiness probe: one admin connection, whatever the number of accounts (their publishers
// exist only while the replica leads them, and a replica may lead none).

/** Answers whether the Kafka cluster is reachable, over one lazily opened admin connection. */
export class KafkaProbe {
  private readonly kafka: Kafka;
  private admin: Promise<Admin> | null = null;

  constructor(config: BridgeConfig['kafka'], logger: Logger) {
    // One attempt per ping: the dependency monitor pings again on its own schedule, and a refused connection must
    // read as such (unreachable), not as a probe that timed out while kafkajs retried.
    this.kafka = new Kafka({ ...kafkaOptions(config, logger), retry: { retries: 0 } });
  }

  /** Resolves when the cluster answers a metadata request; rejects otherwise. */
  async ping(): Promise<void> {
    if (!this.admin) {
      const admin = this.kafka.admin();
      const connected = admin.connect().then(() => admin);
      this.admin = connected;
      // A failed connection is retried by the next ping, not cached as a rejected promise.
      connected.catch(() => (this.admin === connected ? (this.admin = null) : undefined));
    }
    await (await this.admin).describeCluster();
  }

  /** Closes the admin connection. */
  async close(): Promise<void> {
    const admin = this.admin;
    this.admin = null;
    await admin?.then((a) => a.disconnect()).catch(() => undefined);
  }
}
