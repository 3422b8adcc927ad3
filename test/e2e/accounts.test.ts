import { afterEach, describe, expect, it } from 'vitest';
import { loadAccounts } from '../../src/config/accounts.js';
import { startApp, type App } from '../../src/app/app.js';
import type { ReviewEvent } from '../../src/core/events.js';
import { createLogger } from '../../src/ops/logger.js';
import { startSimulator } from '../../src/simulator/index.js';
import { eventually } from '../helpers/bridge.js';
import { accountsEnv, type Upstream } from '../helpers/accounts.js';
import { readAll } from '../helpers/kafka.js';
import { runCli, runCliFull } from '../helpers/processes.js';
import { uniqueName } from '../helpers/services.js';

// Several accounts in one deployment (BRIDGE_ACCOUNTS_FILE), end to end on the real Kafka and Redis: one process
// serving two accounts, one of them with credentials the upstream refuses; and two replicas sharing ten accounts,
// rebalancing when one stops and when it returns, with nothing lost across the handovers.

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

async function run(env: Record<string, string>): Promise<App> {
  const { accounts } = loadAccounts(env);
  const app = await startApp(accounts, createLogger(accounts[0]!.logLevel));
  cleanups.push(() => app.stop());
  return app;
}

async function upstreams(n: number, reviewCount: number, prefix: string): Promise<Upstream[]> {
  return Promise.all(
    Array.from({ length: n }, async (_, i) => {
      const sim = await startSimulator({ rateLimit: null, reviewCount, seed: 100 + i });
      cleanups.push(() => sim.close());
      return { id: `${prefix}-${String(i + 1).padStart(2, '0')}`, sim, valid: true };
    }),
  );
}

describe('several accounts in one deployment', () => {
  it('an account whose credentials are refused costs only itself: the other feed is complete and on time', async () => {
    const [good, bad] = await upstreams(2, 200, uniqueName('acct'));
    bad!.valid = false;
    const env = accountsEnv([good!, bad!], 'per-account');
    const app = await run(env);
    const goodBridge = app.accounts.get(good!.id)!;
    const badBridge = app.accounts.get(bad!.id)!;

    await eventually(
      async () => ((await goodBridge.store.checkpoint()).initialDone ? true : undefined),
      30_000,
      'initial load',
    );
    // Changes made now reach Kafka within a few polls, whatever the other account's token requests do.
    const changedAt = Date.now();
    for (let id = 1; id <= 20; id++) good!.sim.control.setStatus(id, { client: 'rejected' });
    const topics = goodBridge.config.kafka.topics;
    const changes = await readAll([topics.statusChanged], { untilCount: 20, timeoutMs: 20_000 });
    const deliveredAfterMs = Date.now() - changedAt;
    expect(changes).toHaveLength(20);
    expect(new Set(changes.map((m) => m.key))).toEqual(new Set(Array.from({ length: 20 }, (_, i) => String(i + 1))));
    const created = await readAll([topics.created], { untilCount: 200, timeoutMs: 20_000 });
    expect(created).toHaveLength(200);
    // On time: the poll interval is 500 ms; a generous bound that a stalled or shared-backoff feed would miss.
    expect(deliveredAfterMs).toBeLessThan(10_000);
    console.log(`[accounts] the good account's 20 status changes delivered after ${deliveredAfterMs} ms`);

    // The refused account: nothing published, no checkpoint, its own topics empty, and its failures in its metrics.
    expect((await badBridge.store.checkpoint()).initialDone).toBe(false);
    expect(await readAll([badBridge.config.kafka.topics.created], { idleMs: 500, timeoutMs: 5_000 })).toHaveLength(0);
    const metrics = await (await fetch(`${app.ops.url}/metrics`)).text();
    expect(metrics).toMatch(
      new RegExp(
        `reviews_bridge_token_refreshes_total\\{[^}]*outcome="unauthorized"[^}]*account="${bad!.id}"\\} [1-9]`,
      ),
    );
    expect(metrics).not.toMatch(
      new RegExp(
        `reviews_bridge_token_refreshes_total\\{[^}]*outcome="unauthorized"[^}]*account="${good!.id}"\\} [1-9]`,
      ),
    );
    // One HELP line per metric although two registries expose it (a merged exposition, valid for Prometheus).
    expect(metrics.match(/^# HELP reviews_bridge_events_published_total /gm)).toHaveLength(1);
    const ready = (await (await fetch(`${app.ops.url}/readyz`)).json()) as { checks: Record<string, string> };
    expect(ready.checks.upstream_credentials_refused).toBe(bad!.id);
    expect(JSON.stringify(ready)).not.toContain('not-the-secret');
  });

  it('two replicas split ten accounts 5/5, take over all ten when one stops, and split again when it returns', async () => {
    const ups = await upstreams(10, 30, uniqueName('fleet'));
    // Shared topics: every record key carries its account, so the accounts' rows stay apart.
    const env = accountsEnv(ups, 'shared');
    const ids = ups.map((u) => u.id);
    const a = await run(env);
    let b: App | null = await run(env);

    const led = (app: App | null) =>
      app ? [...app.accounts.values()].filter((x) => x.lease.current() > 0).map((x) => x.account) : [];
    // Never two leaders for one account: sampled every 50 ms through the whole test.
    let doubleLeadership = 0;
    const sampler = setInterval(() => {
      const both = led(a).filter((id) => led(b).includes(id));
      doubleLeadership += both.length;
    }, 50);
    cleanups.push(async () => clearInterval(sampler));
    const split = (wantA: number, wantB: number, what: string) =>
      eventually(
        async () => (led(a).length === wantA && led(b).length === wantB ? true : undefined),
        30_000,
        what,
      ).catch((err: unknown) => {
        throw new Error(`${String(err)}; leading now ${led(a).length}/${led(b).length}`);
      });

    await split(5, 5, 'a 5/5 split');
    // Changes made before an account's initial load read the review would only show in its review.created.
    await eventually(
      async () => {
        const done = await Promise.all(
          ids.map(async (id) => (await a.accounts.get(id)!.store.checkpoint()).initialDone),
        );
        return done.every(Boolean) ? true : undefined;
      },
      30_000,
      'every initial load',
    );
    // Changes across the handovers: every one must arrive.
    let changed = 0;
    const change = (round: number) => {
      for (const u of ups) {
        u.sim.control.setStatus(1 + round, { client: round % 2 === 0 ? 'rejected' : 'published' });
        changed += 1;
      }
    };
    change(0);
    await b.stop();
    b = null;
    await split(10, 0, 'replica a to lead all ten');
    change(1);
    b = await run(env);
    await split(5, 5, 'a 5/5 split again');
    change(2);
    expect(doubleLeadership).toBe(0);

    const topics = a.accounts.get(ids[0]!)!.config.kafka.topics;
    const events = await readAll([topics.created, topics.statusChanged], {
      untilCount: 10 * 30 + changed,
      idleMs: 2_000,
      timeoutMs: 60_000,
    });
    for (const id of ids) {
      const mine = events
        .filter((m) => (m.key ?? '').startsWith(`${id}:`))
        .map((m) => JSON.parse(m.value) as ReviewEvent);
      expect(new Set(mine.filter((e) => e.type === 'review.created').map((e) => e.subject)).size).toBe(30);
      // Every status change made across the handovers was delivered (events may repeat, never go missing).
      const statusChanged = mine.filter((e) => e.type === 'review.status_changed');
      for (const reviewId of ['1', '2', '3']) {
        expect(
          statusChanged.some((e) => e.subject === reviewId),
          `${id} review ${reviewId}`,
        ).toBe(true);
      }
      expect(new Set(mine.map((e) => e.source))).toEqual(new Set([`urn:reviews-bridge:${id}`]));
    }
    // `status` sees the same split through Redis: who leads which account, and the live replicas.
    expect(a.allotment!.replicas()).toHaveLength(2);
    const overview = JSON.parse(await runCli('status', env)) as {
      accounts: number;
      unled: string[];
      replicas: { replica: string; live: boolean; leads: string[] }[];
      byAccount: { account: string; leader: string | null }[];
    };
    expect(overview.accounts).toBe(10);
    expect(overview.unled).toEqual([]);
    const live = overview.replicas.filter((r) => r.live);
    expect(live.map((r) => r.replica).sort()).toEqual([a.replica, b.replica].sort());
    expect(live.map((r) => r.leads.length)).toEqual([5, 5]);
    expect(overview.byAccount.find((r) => r.account === led(a)[0])?.leader).toBe(a.replica);
    // An operator command on one account must name it.
    const refused = await runCliFull('pause', env);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('--account');
    expect(JSON.parse(await runCli(['status', '--account', ids[3]!], env))).toMatchObject({ account: ids[3] });
  });
});
