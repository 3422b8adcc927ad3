import { chmod, mkdir, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { SimulatorAccount } from './multi.js';

// Writes each account's credential to files, in the layout the bridge's *_FILE settings read (one value per file,
// no newline), plus a manifest so a bridge accounts file can be generated from it.

/** Where one account's credential files are. */
export interface AccountCredentialFiles {
  id: string;
  baseUrl: string;
  clientIdFile: string;
  clientSecretFile: string;
}

/** Writes <dir>/<id>.client_id, <dir>/<id>.client_secret (mode 0600) and <dir>/accounts.json; returns the entries. */
export async function writeCredentialsDir(
  dir: string,
  accounts: Iterable<SimulatorAccount>,
): Promise<AccountCredentialFiles[]> {
  const root = resolve(dir);
  await mkdir(root, { recursive: true, mode: 0o700 });
  const entries: AccountCredentialFiles[] = [];
  for (const account of accounts) {
    const entry = {
      id: account.id,
      baseUrl: account.url,
      clientIdFile: join(root, `${account.id}.client_id`),
      clientSecretFile: join(root, `${account.id}.client_secret`),
    };
    await secretFile(entry.clientIdFile, account.clientId);
    await secretFile(entry.clientSecretFile, account.clientSecret);
    entries.push(entry);
  }
  await writeFile(join(root, 'accounts.json'), `${JSON.stringify(entries, null, 2)}\n`);
  return entries;
}

// mode on writeFile applies only to a new file; chmod also tightens one left by an earlier run.
async function secretFile(path: string, value: string): Promise<void> {
  await writeFile(path, value, { mode: 0o600 });
  await chmod(path, 0o600);
}
