import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { inject } from 'vitest';
import { freePort } from './processes.js';
import { pollUntil } from './wait.js';

// The schema registry of the tests that need one: a real Apicurio Registry (scripts/registry.sh) started on a free
// port by the first test that asks, once per run, whatever project and worker it runs in; the global setup stops
// it after the run (stopTestRegistry). TEST_SCHEMA_REGISTRY_URL names a registry to use instead.

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

interface RegistryState {
  port?: number;
  url?: string;
  error?: string;
}

function script(args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile('bash', ['scripts/registry.sh', ...args], { cwd: ROOT, timeout: 300_000 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`scripts/registry.sh ${args.join(' ')} failed:\n${stdout}${stderr}`));
      else resolve();
    });
  });
}

let started: Promise<string> | undefined;

/** The Confluent-compatible API base URL of the run's schema registry (started on first use). */
export function testRegistryUrl(): Promise<string> {
  const given = process.env.TEST_SCHEMA_REGISTRY_URL;
  if (given) return Promise.resolve(given.replace(/\/+$/, ''));
  started ??= (async () => {
    const state = inject('registryState');
    mkdirSync(dirname(state), { recursive: true });
    let first: boolean;
    try {
      // mkdir is atomic: one caller of the whole run starts the registry, the others wait for its state file.
      mkdirSync(`${state}.lock`);
      first = true;
    } catch {
      first = false;
    }
    if (first) {
      const port = await freePort();
      try {
        await script(['start', String(port)]);
        writeFileSync(state, JSON.stringify({ port, url: `http://127.0.0.1:${port}/apis/ccompat/v7` }));
      } catch (err) {
        writeFileSync(state, JSON.stringify({ port, error: String(err) }));
        throw err;
      }
    }
    const found = await pollUntil(
      () => (existsSync(state) ? (JSON.parse(readFileSync(state, 'utf8')) as RegistryState) : undefined),
      { timeoutMs: 300_000, what: 'the test schema registry', intervalMs: 250 },
    );
    if (found.error !== undefined || found.url === undefined) throw new Error(found.error ?? 'no registry URL');
    return found.url;
  })();
  return started;
}

/** Stops the registry a run started (global teardown); nothing when none was. */
export async function stopTestRegistry(state: string): Promise<void> {
  if (existsSync(state)) {
    const { port } = JSON.parse(readFileSync(state, 'utf8')) as RegistryState;
    if (port !== undefined) await script(['stop', String(port)]);
  }
  rmSync(state, { force: true });
  rmSync(`${state}.lock`, { recursive: true, force: true });
}
