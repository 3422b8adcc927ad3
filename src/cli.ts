// Process entry of the `reviews-bridge` command (node dist/src/cli.js, or tsx src/cli.ts in a checkout).
import { applyHeapFlags } from './app/node-flags.js';
import { loadAccounts } from './config/accounts.js';

// `run` re-executes itself with Node's heap caps when none are given (src/app/node-flags.ts). Deciding it here,
// before the bridge's modules load (about 0.4 s of a start), spares every start loading them twice. A configuration
// that does not load is left for main() to report.
if (process.argv[2] === 'run') {
  let accounts: number | null;
  try {
    accounts = loadAccounts().accounts.length;
  } catch {
    accounts = null;
  }
  if (accounts !== null) applyHeapFlags(accounts);
}

const { main } = await import('./cli/commands.js');
main(process.argv.slice(2)).catch((err: unknown) => {
  process.stderr.write(`reviews-bridge: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
