import { z } from 'zod';
import type { SimulatorAccountSpec } from './multi.js';
import { DEFAULT_OPTIONS, SimulatorConfigError } from './options.js';
import type { SimulatorOptions } from './types.js';

// Which accounts the simulator CLI serves: N numbered ones (--accounts) or those listed in a JSON file
// (--accounts-file). Settings given as flags apply to every account; a file entry's own options win over them.

/** Options every account of a CLI run shares (host and port belong to the server). */
export type CommonAccountOptions = Omit<SimulatorOptions, 'host' | 'port'>;

const MAX_ACCOUNTS = 1000;

/** Accounts acct-01..acct-NN (zero-padded to at least two digits), account i (from 0) seeded with base seed + i. */
export function numberedAccounts(count: number, common: CommonAccountOptions = {}): SimulatorAccountSpec[] {
  if (!Number.isInteger(count) || count < 1 || count > MAX_ACCOUNTS) {
    throw new SimulatorConfigError(`--accounts must be an integer 1..${MAX_ACCOUNTS}, got ${count}`);
  }
  const width = Math.max(2, String(count).length);
  const seed = common.seed ?? DEFAULT_OPTIONS.seed;
  return Array.from({ length: count }, (_, i) => ({
    id: `acct-${String(i + 1).padStart(width, '0')}`,
    options: { ...common, seed: seed + i },
  }));
}

// Options are checked in full by resolveOptions when the account starts; here only the file's shape.
const AccountsFileSchema = z
  .array(
    z.strictObject({
      id: z.string(),
      options: z.record(z.string(), z.unknown()).optional(),
    }),
  )
  .min(1)
  .max(MAX_ACCOUNTS);

/**
 * Accounts from the text of an accounts file: a JSON array of { id, options? } (options as in SimulatorOptions).
 * An entry without a seed gets the common seed plus its index; faults merge key by key over the common ones.
 */
export function parseAccountsFile(text: string, common: CommonAccountOptions = {}): SimulatorAccountSpec[] {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new SimulatorConfigError('--accounts-file is not valid JSON');
  }
  const parsed = AccountsFileSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = (issue?.path ?? []).map(String).join('.');
    throw new SimulatorConfigError(
      `--accounts-file: ${where === '' ? '' : `${where}: `}${issue?.message ?? 'invalid'} (expected [{ "id": ..., "options": {...} }])`,
    );
  }
  const seed = common.seed ?? DEFAULT_OPTIONS.seed;
  return parsed.data.map((entry, i) => {
    const own = (entry.options ?? {}) as CommonAccountOptions;
    return {
      id: entry.id,
      options: { ...common, seed: seed + i, ...own, faults: { ...common.faults, ...own.faults } },
    };
  });
}
