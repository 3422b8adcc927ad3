import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import type { Simulator } from '../../src/simulator/index.js';
import { testEnv } from './bridge.js';

// Several accounts in one deployment (BRIDGE_ACCOUNTS_FILE) for end-to-end tests.

/** An account of the accounts file and the simulator it mirrors. */
export interface Upstream {
  id: string;
  sim: Simulator;
  /** Whether the credentials written for it are the simulator's. */
  valid: boolean;
}

/** An accounts file with one account per simulator (credential files beside it); resolves the environment. */
export function accountsEnv(upstreams: readonly Upstream[], topics: 'per-account' | 'shared'): Record<string, string> {
  const dir = mkdtempSync(join(tmpdir(), 'rb-accounts-'));
  const accounts = upstreams.map(({ id, sim, valid }) => {
    writeFileSync(join(dir, `${id}.secret`), valid ? 'demo-secret' : 'not-the-secret');
    return {
      id,
      upstream: { baseUrl: sim.url, clientId: 'demo-client', clientSecretFile: join(dir, `${id}.secret`) },
    };
  });
  const file = join(dir, 'accounts.yaml');
  writeFileSync(file, stringify({ accounts }));
  const base = testEnv(upstreams[0]!.sim.url, { BRIDGE_ACCOUNT: '', BRIDGE_ACCOUNTS_FILE: file });
  if (topics === 'per-account') {
    for (const [name, value] of Object.entries(base)) {
      if (name.startsWith('KAFKA_TOPIC_') && name !== 'KAFKA_TOPIC_PARTITIONS') {
        base[name] = value.replace(/^([^.]+)\./, '$1.{account}.');
      }
    }
  }
  return base;
}
