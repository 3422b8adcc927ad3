import { readFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { RECORD_SCHEMAS, type RecordType } from '../../../src/core/events.js';
import { registrySchema, releasedSchemaFileName } from '../../../src/core/json-schemas.js';
import {
  CONTRACT_TOPICS,
  IncompatibleSchemaError,
  SchemaContracts,
  SchemaRegistryClient,
  registerContracts,
  subjectOf,
} from '../../../src/kafka/schema-registry.js';
import type { BridgeConfig, SchemaRegistryConfig } from '../../../src/config/config.js';
import { testRegistryUrl } from '../../helpers/registry.js';
import { uniqueName } from '../../helpers/services.js';
import { loadConfig } from '../../../src/config/config.js';
import { MINIMAL_ENV } from '../../helpers/config.js';
import { silentLogger } from '../../helpers/fakes.js';
import { pollUntil } from '../../helpers/wait.js';

// The registration against a real schema registry (Apicurio Registry, scripts/registry.sh), and the evolution
// rule of CI: every schema the bridge registers must be compatible, under the default rule (BACKWARD), with the
// one of the last release (schemas/released/, written by `npm run schemas:release`). A change that breaks
// consumers fails here, before any deployment meets it.

const WIRES = ['structured', 'confluent'] as const;
const TYPES = Object.keys(RECORD_SCHEMAS) as RecordType[];

function settings(url: string, overrides: Partial<SchemaRegistryConfig> = {}): SchemaRegistryConfig {
  return {
    url,
    username: null,
    password: null,
    caFile: null,
    compatibility: 'BACKWARD',
    wireFormat: 'structured',
    ...overrides,
  };
}

function topics(): BridgeConfig['kafka']['topics'] {
  const id = uniqueName('registry');
  return {
    created: `${id}.created`,
    statusChanged: `${id}.status_changed`,
    updated: `${id}.updated`,
    deadLetter: `${id}.dead_letter`,
    state: `${id}.state`,
    deleted: `${id}.deleted`,
    heartbeat: `${id}.heartbeat`,
    changelog: `${id}.changelog`,
  };
}

async function get<T>(url: string): Promise<T> {
  const res = await fetch(url);
  if (!res.ok) throw new Error(`GET ${url}: HTTP ${res.status}`);
  return (await res.json()) as T;
}

function released(type: RecordType, wire: (typeof WIRES)[number]): string {
  const file = new URL(`../../../schemas/released/${releasedSchemaFileName(type, wire)}`, import.meta.url);
  return JSON.stringify(JSON.parse(readFileSync(file, 'utf8')));
}

// A fresh clone fetches the registry (about 160 MB from Maven Central) before it starts.
beforeAll(async () => {
  await testRegistryUrl();
}, 600_000);

describe('schema evolution against the last release', () => {
  it('every registered schema is BACKWARD compatible with the released one (both wire formats)', async () => {
    const url = await testRegistryUrl();
    const client = new SchemaRegistryClient(settings(url));
    try {
      for (const type of TYPES) {
        for (const wire of WIRES) {
          const subject = subjectOf(uniqueName(`evolution-${type}-${wire}`));
          await client.setSubjectRule(subject, 'BACKWARD');
          await client.register(subject, released(type, wire));
          // Throws IncompatibleSchemaError naming the change when the current schema would break consumers.
          await expect(client.register(subject, registrySchema(type, wire)), `${type} ${wire}`).resolves.toEqual(
            expect.any(Number),
          );
        }
      }
    } finally {
      await client.close();
    }
  });

  it('catches a breaking change: a field removed from the released schema is refused, naming the change', async () => {
    const url = await testRegistryUrl();
    const client = new SchemaRegistryClient(settings(url));
    try {
      const subject = subjectOf(uniqueName('evolution-broken'));
      await client.setSubjectRule(subject, 'BACKWARD');
      await client.register(subject, released('review.status_changed', 'structured'));
      const broken = JSON.parse(registrySchema('review.status_changed', 'structured')) as {
        properties: Record<string, unknown>;
        required: string[];
      };
      delete broken.properties.sequence;
      broken.required = broken.required.filter((name) => name !== 'sequence');
      const error = await client.register(subject, JSON.stringify(broken)).catch((err: unknown) => err);
      expect(error).toBeInstanceOf(IncompatibleSchemaError);
      expect((error as IncompatibleSchemaError).subject).toBe(subject);
      expect((error as IncompatibleSchemaError).change).toMatch(/narrowed|removed/i);
    } finally {
      await client.close();
    }
  });
});

describe('registration', () => {
  it('replicas starting together register each subject once, under the configured rule', async () => {
    const url = await testRegistryUrl();
    const names = topics();
    const clients = [0, 1, 2].map(() => new SchemaRegistryClient(settings(url)));
    try {
      const results = await Promise.all(
        clients.map((c) => registerContracts(c, names, { compatibility: 'BACKWARD', wireFormat: 'structured' })),
      );
      expect(results[1]).toEqual(results[0]);
      expect(results[2]).toEqual(results[0]);
      // And again later (a restart): the same ids, nothing registered.
      const again = await registerContracts(clients[0]!, names, {
        compatibility: 'BACKWARD',
        wireFormat: 'structured',
      });
      expect(again).toEqual(results[0]);
      for (const [type, key] of Object.entries(CONTRACT_TOPICS) as [RecordType, keyof typeof names][]) {
        const subject = subjectOf(names[key]);
        const ids = new Set<number>();
        for (const version of await get<number[]>(`${url}/subjects/${subject}/versions`)) {
          ids.add((await get<{ id: number }>(`${url}/subjects/${subject}/versions/${version}`)).id);
        }
        expect([...ids], subject).toEqual([results[0]!.byType[type].id]);
        expect((await get<{ compatibilityLevel: string }>(`${url}/config/${subject}`)).compatibilityLevel).toBe(
          'BACKWARD',
        );
      }
      expect(results[0]!.byType['review.created'].url).toBe(
        `${url}/schemas/ids/${results[0]!.byType['review.created'].id}`,
      );
      // The dead-letter topic and the changelog are no contract: no subject.
      const subjects = await get<string[]>(`${url}/subjects`);
      expect(subjects).not.toContain(subjectOf(names.deadLetter));
      expect(subjects).not.toContain(subjectOf(names.changelog));
    } finally {
      await Promise.all(clients.map((c) => c.close()));
    }
  });

  it("keeps a subject's own rule", async () => {
    const url = await testRegistryUrl();
    const names = topics();
    const client = new SchemaRegistryClient(settings(url));
    try {
      await client.setSubjectRule(subjectOf(names.created), 'FULL');
      await registerContracts(client, names, { compatibility: 'BACKWARD', wireFormat: 'confluent' });
      expect(await client.subjectRule(subjectOf(names.created))).toBe('FULL');
      expect(await client.subjectRule(subjectOf(names.updated))).toBe('BACKWARD');
    } finally {
      await client.close();
    }
  });

  it('an unreachable registry is a SchemaRegistryError naming the request, not the credentials', async () => {
    const client = new SchemaRegistryClient(
      settings('http://127.0.0.1:9/apis/ccompat/v7', { username: 'bridge', password: { value: 's3cret-value' } }),
    );
    try {
      const error = await client.lookup('x-value', '{}').catch((err: unknown) => err);
      expect((error as Error).name).toBe('SchemaRegistryError');
      expect((error as Error).message).toContain('ECONNREFUSED');
      expect((error as Error).message).not.toContain('s3cret');
    } finally {
      await client.close();
    }
  });

  it('a process waits, not ready, while the registry cannot be reached, and registers once it can', async () => {
    const url = await testRegistryUrl();
    const account = loadConfig({ ...MINIMAL_ENV, SCHEMA_REGISTRY_URL: url });
    const unreachable = new SchemaContracts([account], settings('http://127.0.0.1:9/apis/ccompat/v7'), silentLogger, {
      initial: 20,
      max: 50,
    });
    const waiting = unreachable.register();
    await pollUntil(() => (unreachable.state === 'unreachable' ? true : undefined), {
      timeoutMs: 10_000,
      what: 'the unreachable state',
    });
    expect(unreachable.readiness()).toMatch(/^unreachable: schema registry: POST .* failed \(ECONNREFUSED\)$/);
    const metrics = await unreachable.registry.metrics();
    expect(metrics).toContain('reviews_bridge_schema_registry_state{state="unreachable"} 1');
    await unreachable.stop();
    expect(await waiting).toBe(false);

    const names = topics();
    const reachable = new SchemaContracts(
      [{ ...account, kafka: { ...account.kafka, topics: names } }],
      settings(url),
      silentLogger,
    );
    try {
      expect(await reachable.register()).toBe(true);
      expect(reachable.readiness()).toBe(true);
      expect(reachable.of(account.account)?.byType['review.state'].url).toMatch(/\/schemas\/ids\/\d+$/);
      expect(await reachable.registry.metrics()).toContain(
        'reviews_bridge_schema_registry_state{state="registered"} 1',
      );
    } finally {
      await reachable.stop();
    }
  });
});
