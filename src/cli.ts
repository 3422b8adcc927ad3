// Process entry of the `reviews-bridge` command (node dist/src/cli.js, or tsx src/cli.ts in a checkout).
import { main } from './cli/commands.js';

main(process.argv.slice(2)).catch((err: unknown) => {
  process.stderr.write(`reviews-bridge: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
