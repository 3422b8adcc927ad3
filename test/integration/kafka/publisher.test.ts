import { Kafka } from 'kafkajs';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { connectedPublisher, uniqueTopics } from '../../helpers/publisher.js';

afterEach(() => {
  vi.restoreAllMocks();
});

describe('KafkaPublisher readiness probe', () => {
  it('reuses one admin connection across probes instead of connecting a new client each time', async () => {
    const publisher = await connectedPublisher(uniqueTopics('probe'));
    // Counts admin clients made by the real kafkajs client; the probes still talk to the real broker.
    const admins = vi.spyOn(Kafka.prototype, 'admin');
    try {
      for (let i = 0; i < 5; i++) await publisher.ping();
      // At most one (the probe's own; the publisher may already hold one from connecting), never one per probe.
      expect(admins.mock.calls.length).toBeLessThanOrEqual(1);
    } finally {
      await publisher.disconnect();
    }
  });
});
