import { pino } from 'pino';
import { describe, expect, it, onTestFinished } from 'vitest';
import { loadAccounts } from '../../src/config/accounts.js';
import { startApp, type App } from '../../src/app/app.js';
import type { ReviewEvent } from '../../src/core/events.js';
import { accountsEnv } from '../helpers/accounts.js';
import { eventually, simulatorForTest } from '../helpers/bridge.js';
import { deleteTopic, readAll, testKafka } from '../helpers/kafka.js';
import { uniqueName } from '../helpers/services.js';

// Issue 46, item 5: a changelog topic two accounts share is deleted and created again. The busy account starts over
// on the new topic (a reset) and writes until the topic's ends pass the offsets the idle account's Redis remembers,
// so the end-offset check no longer tells. The idle account's next start must refuse that topic with one line naming
// KAFKA_TOPIC_CHANGELOG, keep its snapshot and publish nothing; trusted, the topic would later restore part of its
// snapshot (its reviews created again at sequence 1). The busy account's generated fingerprint key is copied to the
// new topic again.

/** A process serving the accounts of `env`, logging into `lines`, stopped when the test finishes. */
async function serve(env: Record<string, string>, lines: Array<Record<string, unknown>>): Promise<App> {
  const { accounts } = loadAccounts(env);
  const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
  const app = await startApp(accounts, logger);
  onTestFinished(() => app.stop());
  return app;
}

/** Waits until the account's initial load is done. */
function loaded(app: App, account: string): Promise<true> {
  return eventually(
    async () => ((await app.accounts.get(account)!.store.checkpoint()).initialDone ? true : undefined),
    60_000,
    `${account}'s initial load`,
  );
}

/** The high-water marks of `topic` per partition. */
async function ends(topic: string): Promise<Record<number, number>> {
  const admin = testKafka().admin();
  await admin.connect();
  try {
    const offsets = await admin.fetchTopicOffsets(topic);
    return Object.fromEntries(offsets.map((o) => [o.partition, Number(o.high)]));
  } finally {
    await admin.disconnect();
  }
}

describe('a shared changelog topic deleted and created again', () => {
  it("is refused for the idle account once other accounts' writes pass its offsets; nothing is rebuilt in part", async () => {
    const idleSim = await simulatorForTest({ reviewCount: 20, seed: 4651 });
    const busySim = await simulatorForTest({ reviewCount: 60, seed: 4652 });
    const idle = uniqueName('idle');
    const busy = uniqueName('busy');
    const env = accountsEnv(
      [
        { id: idle, sim: idleSim, valid: true },
        { id: busy, sim: busySim, valid: true },
      ],
      'shared',
    );
    const changelog = env.KAFKA_TOPIC_CHANGELOG!;

    const first = await serve(env, []);
    await Promise.all([loaded(first, idle), loaded(first, busy)]);
    const remembered = (await first.accounts.get(idle)!.store.changelogState()).offsets;
    const snapshot = await first.accounts.get(idle)!.store.checkpoint();
    expect(Object.keys(remembered).length).toBeGreaterThan(0);
    await first.stop();
    await deleteTopic(changelog);

    // The busy account starts over on the new topic (both are refused at first: its ends are below their offsets).
    const second = await serve(env, []);
    const store = second.accounts.get(busy)!.store;
    await store.pause();
    expect(await store.reset()).toBe(true);
    await store.resume();
    await loaded(second, busy);
    // ... and changes statuses until the new topic's ends pass every offset the idle account's Redis remembers.
    let round = 0;
    await eventually(
      async () => {
        const now = await ends(changelog);
        if (Object.entries(remembered).every(([p, o]) => (now[Number(p)] ?? 0) > o)) return true;
        round += 1;
        for (let id = 1; id <= 60; id++)
          busySim.control.setStatus(id, { client: round % 2 ? 'rejected' : 'published' });
        return undefined;
      },
      90_000,
      "the new topic's ends to pass the idle account's offsets",
    );
    await second.stop();
    // The busy account's key copy was written to the new topic (its reset's full restore read the topic again).
    const copies = await readAll([changelog], { timeoutMs: 20_000 });
    expect(copies.some((r) => (r.key ?? '').startsWith('fingerprint-key-wrapped/') && r.partition === 0)).toBe(true);

    // The idle account's next start: a change waits upstream; the topic must be refused, not trusted.
    idleSim.control.setStatus(1, { client: 'rejected' });
    const lines: Array<Record<string, unknown>> = [];
    const third = await serve(env, lines);
    const refusal = await eventually(
      async () => {
        const line = lines.find((l) => l.refused === true && String(l.msg).includes(`account ${idle}`));
        return line ? String(line.msg) : undefined;
      },
      60_000,
      "the idle account's start to be refused",
    );
    expect(refusal).toContain('KAFKA_TOPIC_CHANGELOG');
    expect(refusal).toContain(`changelog topic ${changelog}`);
    expect(refusal).toContain('deleted and created again');
    // Its Redis is kept as it was (what a restore to the right topic, or a reset, starts from).
    const kept = third.accounts.get(idle)!.store;
    expect((await kept.changelogState()).offsets).toEqual(remembered);
    expect(await kept.checkpoint()).toEqual(snapshot);
    await loaded(third, busy);

    // A read_committed reader: the idle account's 20 reviews created once each, nothing else of it published.
    const topics = third.accounts.get(idle)!.config.kafka.topics;
    const records = await readAll([topics.created, topics.statusChanged], { idleMs: 1_000, timeoutMs: 30_000 });
    const events = records
      .filter((m) => (m.key ?? '').startsWith(`${idle}:`))
      .map((m) => JSON.parse(m.value) as ReviewEvent);
    expect(
      events
        .filter((e) => e.type === 'review.created')
        .map((e) => Number(e.subject))
        .sort((a, b) => a - b),
    ).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    expect(events.filter((e) => e.type !== 'review.created')).toEqual([]);
  });
});
