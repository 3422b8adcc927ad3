import { runSimulatorCli } from './cli.js';

// Standalone start: `npx tsx src/simulator/main.ts --port 8080`.
runSimulatorCli(process.argv.slice(2)).catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
