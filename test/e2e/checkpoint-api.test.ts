import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it, onTestFinished } from 'vitest';
import { SAFE_LOG_OPTIONS } from '../../src/ops/logger.js';
import { baseUpdatedDate } from '../../src/simulator/data.js';
import type { CheckpointView } from '../../src/core/checkpoint-change.js';
import {
  eventually,
  initialLoadDone,
  pollsCommitted,
  simulatorForTest,
  startTestBridge,
  testEnv,
} from '../helpers/bridge.js';
import { readAll, type ReadMessage } from '../helpers/kafka.js';
import { runCliFull } from '../helpers/processes.js';

// Issue 40 item 4: a checkpoint an operator can read and rewind, as Kafka Connect's KIP-875 alters a connector's
// offsets only while it is stopped. Against real Kafka, Redis and the simulator: GET shows where the account
// stands, PUT is refused (409) while the account runs, and a rewind while paused is committed through the changelog
// and makes the polls after resume re-read from there. What they re-read and what the snapshot already has
// derives no event (no duplicate for a read_committed reader); a change the polls could not see before (an edit
// that kept updated_date), inside the rewound range, is found once.

const SEED = 40;
const REVIEWS = 40;
const TOKEN = 'carol-admin-token-0123456789abcdef';

async function call(base: string, path: string, method = 'GET', body?: unknown) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${TOKEN}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

/**
 * The event topics' records (read_committed), once per offset: the test's consumer may be handed a batch again after
 * a rebalance on a loaded machine, which is not a second record in the log.
 */
async function events(topics: string[]): Promise<ReadMessage[]> {
  const read = await readAll(topics, { timeoutMs: 20_000 });
  return [...new Map(read.map((m) => [`${m.topic}/${m.partition}/${m.offset}`, m])).values()];
}

describe('checkpoint API', () => {
  it('reads the checkpoint, refuses a change while running (409), rewinds while paused and re-reads from there', async () => {
    const sim = await simulatorForTest({ reviewCount: REVIEWS, seed: SEED });
    const dir = mkdtempSync(join(tmpdir(), 'rb-checkpoint-e2e-'));
    const tokens = join(dir, 'tokens');
    writeFileSync(tokens, `carol:${TOKEN}\n`);
    const env = testEnv(sim.url, { ADMIN_PORT: '0', ADMIN_TOKEN_FILE: tokens });
    const account = env.BRIDGE_ACCOUNT!;
    const text: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        text.push(chunk.toString());
        done();
      },
    });
    const b = await startTestBridge(env, {}, pino({ level: 'info', ...SAFE_LOG_OPTIONS }, sink));
    onTestFinished(() => b.stop());
    const lines = () =>
      text
        .join('')
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => JSON.parse(l) as Record<string, unknown>);
    const base = b.app.admin!.url;
    const path = `/v1/accounts/${account}/checkpoint`;
    await initialLoadDone(b);
    await pollsCommitted(b, 1);

    // GET: where the account stands.
    const before = (await call(base, path)).json as unknown as CheckpointView;
    expect(before).toMatchObject({
      account,
      initialLoad: { done: true },
      sweep: null,
      paused: false,
      pendingChange: null,
    });
    expect(before.changelog.txn!).toBeGreaterThan(0);
    expect(Object.keys(before.changelog.offsets).length).toBeGreaterThan(0);
    const watermarkBefore = Date.parse(before.watermark!);
    const times = Array.from({ length: REVIEWS }, (_, i) => baseUpdatedDate(SEED, i + 1));
    // The watermark is the data's own clock: the largest updated_date read (no review changed since the load).
    expect(watermarkBefore).toBeGreaterThanOrEqual(Math.max(...times));
    // The same from the command line.
    const cliGet = await runCliFull(['checkpoint', 'get'], env);
    expect(cliGet.code).toBe(0);
    expect(JSON.parse(cliGet.stdout)).toMatchObject({ account, watermark: before.watermark });

    // The rewind target: the median updated_date; an edit that keeps updated_date above it (polls cannot see it).
    const sorted = [...times].sort((x, y) => x - y);
    const rewindTo = sorted[Math.floor(REVIEWS / 2)]! - 60_000;
    const edited = times.findIndex((t) => t > rewindTo + 60_000) + 1;
    expect(edited).toBeGreaterThan(0);
    const topics = [b.topics.created, b.topics.updated, b.topics.statusChanged, b.topics.deleted];
    const initial = await events(topics);
    expect(initial.filter((m) => m.topic === b.topics.created)).toHaveLength(REVIEWS);

    // Running: 409, nothing recorded; the command line says the same.
    const refused = await call(base, path, 'PUT', { watermark: new Date(rewindTo).toISOString() });
    expect(refused.status).toBe(409);
    expect(refused.json).toMatchObject({ error: 'conflict' });
    expect(String(refused.json.message)).toMatch(/pause/);
    const cliRefused = await runCliFull(['checkpoint', 'set', '--watermark', String(rewindTo)], env);
    expect(cliRefused.code).toBe(1);
    expect(cliRefused.stderr).toMatch(/pause it first/);
    expect(((await call(base, path)).json as unknown as CheckpointView).pendingChange).toBeNull();
    // A bad body: 400 naming the field.
    const bad = await call(base, path, 'PUT', { watermark: 'yesterday' });
    expect(bad.status).toBe(400);
    expect(bad.json).toMatchObject({ field: 'watermark' });

    // Paused: accepted, applied by the leader through the changelog, logged with the token's name.
    expect((await call(base, `/v1/accounts/${account}/pause`, 'POST')).status).toBe(200);
    // A pass in flight when the flag is set still commits: the transaction number is read once the leader has seen
    // the pause, not before it (a poll could land between that read and the pause).
    await eventually(
      async () => (lines().some((l) => l.msg === 'paused by an operator') ? true : undefined),
      20_000,
      'the leader to see the pause',
    );
    const txnPaused = ((await call(base, path)).json as unknown as CheckpointView).changelog.txn!;
    sim.control.edit(edited, { title: 'edited while the polls could not see it' });
    const accepted = await call(base, path, 'PUT', { watermark: new Date(rewindTo).toISOString() });
    expect(accepted.status).toBe(202);
    expect(accepted.json).toMatchObject({ account, requested: true, watermark: new Date(rewindTo).toISOString() });
    const applied = await eventually(
      async () => {
        const view = (await call(base, path)).json as unknown as CheckpointView;
        return view.pendingChange === null && Date.parse(view.watermark!) === rewindTo ? view : undefined;
      },
      20_000,
      'the leader to apply the rewind',
    );
    // The rewind is a commit of its own (a pass that was in flight when the pause was read may land before it).
    expect(applied.changelog.txn).toBeGreaterThan(txnPaused);
    expect(applied.paused).toBe(true);
    const logged = lines().filter((l) => l.msg === 'admin action' && l.action === 'checkpoint_set');
    expect(logged).toEqual([expect.objectContaining({ tokenName: 'carol', account })]);
    expect(lines().some((l) => String(l.msg).startsWith('checkpoint changed by an operator') && l.by === 'carol')).toBe(
      true,
    );
    // The changelog holds the rewound checkpoint (a Redis restored from it holds the rewind too).
    const changelog = await events([b.topics.changelog]);
    const checkpoints = changelog
      .filter((m) => m.key?.endsWith('checkpoint'))
      .sort((x, y) => (BigInt(x.offset) < BigInt(y.offset) ? -1 : 1));
    expect((JSON.parse(checkpoints.at(-1)!.value) as { watermark: number }).watermark).toBe(rewindTo);
    // Nothing was published while paused, and nothing committed after the rewind.
    expect(await events(topics)).toHaveLength(initial.length);
    expect(((await call(base, path)).json as unknown as CheckpointView).changelog.txn).toBe(applied.changelog.txn);

    // Resume: the polls re-read from the rewound watermark. The edit inside that range is found (one update);
    // the ~20 other reviews re-read are in the snapshot already and derive nothing.
    const resumedAt = Date.now();
    expect((await call(base, `/v1/accounts/${account}/resume`, 'POST')).status).toBe(200);
    await eventually(
      async () => {
        // The re-read range is behind the watermark again: it is now the newest updated_date the polls saw.
        const w = (await b.store.checkpoint()).watermark ?? 0;
        return w >= Math.max(...times) ? true : undefined;
      },
      30_000,
      'the polls to re-read the rewound range',
    );
    await pollsCommitted(b, 2, resumedAt);
    const after = await events(topics);
    const known = new Set(initial.map((m) => `${m.topic}/${m.partition}/${m.offset}`));
    const added = after.filter((m) => !known.has(`${m.topic}/${m.partition}/${m.offset}`));
    expect(added.map((m) => [m.topic, m.key])).toEqual([[b.topics.updated, String(edited)]]);
    // No review has two events of one sequence (no duplicate for a read_committed reader); the update is the 2nd.
    const seen = new Set<string>();
    for (const m of after) {
      const e = JSON.parse(m.value) as { subject: string; sequence: number };
      const key = `${e.subject}:${e.sequence}`;
      expect(seen.has(key), key).toBe(false);
      seen.add(key);
    }
    expect((JSON.parse(added[0]!.value) as { sequence: number }).sequence).toBe(2);
  }, 180_000);

  it('`checkpoint set` with no replica leading applies the change itself, through the changelog', async () => {
    const sim = await simulatorForTest({ reviewCount: 20, seed: SEED + 1 });
    const env = testEnv(sim.url);
    const b = await startTestBridge(env);
    onTestFinished(() => b.stop());
    await initialLoadDone(b);
    expect((await runCliFull('pause', env)).code).toBe(0);
    await b.stop();
    const before = JSON.parse((await runCliFull(['checkpoint', 'get'], env)).stdout) as CheckpointView;
    expect(before.paused).toBe(true);
    const to = '2023-06-01T00:00:00.000Z';
    const set = await runCliFull(['checkpoint', 'set', '--watermark', to], env, 90_000);
    expect(set.code, set.stderr).toBe(0);
    expect(JSON.parse(set.stdout)).toEqual({ applied: true, watermark: to });
    const after = JSON.parse((await runCliFull(['checkpoint', 'get'], env)).stdout) as CheckpointView;
    expect(after).toMatchObject({ watermark: to, pendingChange: null, paused: true });
    expect(after.changelog.txn).toBe(before.changelog.txn! + 1);
    // Redis rebuilt from the changelog (a Redis that lost the account) holds the rewound checkpoint.
    const restored = await runCliFull('restore', env, 90_000);
    expect(restored.code, restored.stderr).toBe(0);
    expect(JSON.parse(restored.stdout)).toMatchObject({ restored: true, watermark: Date.parse(to) });
    const rebuilt = JSON.parse((await runCliFull(['checkpoint', 'get'], env)).stdout) as CheckpointView;
    expect(rebuilt).toMatchObject({ watermark: to, changelog: { txn: after.changelog.txn } });
    const usage = await runCliFull(['checkpoint', 'set', '--watermark', 'soon'], env);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toMatch(/--watermark/);
    // Seven command-line processes: 103 s with two suites at once on a loaded 2-core machine (issue 50), 120 s before.
  }, 240_000);
});
