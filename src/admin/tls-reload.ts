import { readFileSync } from 'node:fs';
import { stat } from 'node:fs/promises';
import type { Server as HttpsServer } from 'node:https';
import type { Logger } from 'pino';
import { errorKind } from '../ops/logger.js';

// A renewed certificate (cert-manager rewrites the Secret) is taken without a restart: the files are checked
// every so often and loaded into the running server when they change.

/** Watches the certificate and key files of `server`; returns what stops watching. */
export async function watchTlsFiles(
  server: HttpsServer,
  files: { certFile: string; keyFile: string },
  everyMs: number,
  logger: Logger,
): Promise<() => void> {
  const { certFile, keyFile } = files;
  let version = await tlsVersion(certFile, keyFile);
  const timer = setInterval(() => {
    void tlsVersion(certFile, keyFile).then((next) => {
      if (next === version || next === null) return;
      try {
        server.setSecureContext(readTlsFiles(files));
        version = next;
        logger.info('admin API certificate reloaded');
      } catch (err) {
        logger.error({ err: errorKind(err) }, 'admin API certificate could not be reloaded; the old one stays');
      }
    });
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}

/** The certificate and key as the TLS options take them. */
export function readTlsFiles(files: { certFile: string; keyFile: string }): { cert: Buffer; key: Buffer } {
  return { cert: readFileSync(files.certFile), key: readFileSync(files.keyFile) };
}

/** Identifies the files' current contents without reading them (null: one is missing, mid-rewrite). */
async function tlsVersion(certFile: string, keyFile: string): Promise<string | null> {
  try {
    const [c, k] = await Promise.all([stat(certFile), stat(keyFile)]);
    return `${c.ino}:${c.mtimeMs}:${c.size}/${k.ino}:${k.mtimeMs}:${k.size}`;
  } catch {
    return null;
  }
}
