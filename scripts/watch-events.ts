// Prints the bridge's events as they arrive (used by the demo): one line per event, from a real consumer.
import { Kafka, logLevel } from 'kafkajs';

const brokers = (process.env.KAFKA_BROKERS ?? '127.0.0.1:39092').split(',');
const topics = (
  process.env.WATCH_TOPICS ?? 'review.created,review.status_changed,review.updated,review.dead_letter'
).split(',');
const kafka = new Kafka({ clientId: 'demo-watch', brokers, logLevel: logLevel.NOTHING });
const consumer = kafka.consumer({
  groupId: `demo-watch-${Date.now()}`,
  sessionTimeout: 6_000,
  heartbeatInterval: 500,
  maxWaitTimeInMs: 100,
});
// Topics are shared by every run against the same broker; show only this bridge's events.
const account = process.env.BRIDGE_ACCOUNT;
const source = process.env.EVENT_SOURCE ?? (account ? `urn:reviews-bridge:${account}` : undefined);
const counts = new Map<string, number>();
let quietCreated = 0;
let existing = new Set<string>();

// The bridge creates its topics when it starts; wait for them rather than fail.
const admin = kafka.admin();
await admin.connect();
while (!topics.every((t) => existing.has(t))) {
  existing = new Set(await admin.listTopics());
  if (!topics.every((t) => existing.has(t))) await new Promise((r) => setTimeout(r, 500));
}
await admin.disconnect();
await consumer.connect();
await consumer.subscribe({ topics, fromBeginning: true });
await consumer.run({
  eachMessage: async ({ topic, message }) => {
    const value = JSON.parse(message.value?.toString('utf8') ?? '{}');
    if (source && (value.source ?? `urn:reviews-bridge:${value.account}`) !== source) return;
    counts.set(topic, (counts.get(topic) ?? 0) + 1);
    if (topic.endsWith('dead_letter')) {
      console.log(`[dead-letter]     key=${message.key?.toString() ?? '-'} reason=${value.reason}`);
      return;
    }
    const d = value.data ?? {};
    if (value.type === 'review.created' && d.detection === 'initial') {
      // The initial load is thousands of lines: show a counter instead.
      if (++quietCreated % 1000 === 0) console.log(`[review.created]   ${quietCreated} initial-load events so far`);
      return;
    }
    let what: string;
    if (value.type === 'review.status_changed') {
      const s = d.status;
      what = `client ${s.client_publication_status.from}→${s.client_publication_status.to}, pwr ${s.pwr_publication_status.from}→${s.pwr_publication_status.to}`;
    } else if (value.type === 'review.updated') {
      what = `changed ${d.changed_fields.join(', ')}`;
    } else {
      what = `"${String(d.review?.headline ?? '').slice(0, 40)}"`;
    }
    console.log(`[${value.type}] review ${value.subject} seq ${value.sequence} (${d.detection}) ${what}`);
  },
});

const stop = async () => {
  console.log(`watcher: ${[...counts].map(([t, n]) => `${t}=${n}`).join(' ')}`);
  await consumer.disconnect();
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
