import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';

// Starting and stopping a simulator's HTTP server, shared by the single- and the multi-account simulator.

/** A listening server: its base URL and an idempotent close. */
export interface Listening {
  url: string;
  close(): Promise<void>;
}

/** Listens on host:port (0 = random); on close, runs beforeClose (to cut injected latency) then drops connections. */
export async function listen(server: Server, host: string, port: number, beforeClose: () => void): Promise<Listening> {
  // Clients keep connections alive; outlive undici's default keep-alive so the server is not the one to drop them.
  server.keepAliveTimeout = 10_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { address, port: bound } = server.address() as AddressInfo;
  const shown = address.includes(':') ? `[${address}]` : address;

  let closed: Promise<void> | null = null;
  return {
    url: `http://${shown}:${bound}`,
    close() {
      closed ??= new Promise<void>((resolve, reject) => {
        beforeClose();
        server.close((error) => (error === undefined ? resolve() : reject(error)));
        server.closeAllConnections();
      });
      return closed;
    },
  };
}
