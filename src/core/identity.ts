import { createHash } from 'node:crypto';

// Who wrote a changelog record or a checkpoint: the deployment (one bridge installation: its replicas and
// accounts) and the upstream (the reviews API and the API client whose reviews it mirrors). Kafka Streams names its
// changelogs after application.id and Kafka Connect keys source offsets by connector name, for the same reason: two
// installations on one cluster must never read each other's state. Both ids are hashes of settings that are no
// secrets (an API client id is not one, and only its hash is kept), short enough for headers and log lines.

/** The identity a deployment stamps on what it writes to the changelog and to Redis. */
export interface Identity {
  /** The deployment (BRIDGE_DEPLOYMENT_ID, or derived from settings that tell installations apart). */
  deployment: string;
  /** The upstream: a hash of the API's base URL and the client id. */
  upstream: string;
}

/** Header naming the deployment that wrote a changelog record. */
export const DEPLOYMENT_HEADER = 'bridge-deployment';

/** Header naming the account a changelog record belongs to. */
export const ACCOUNT_HEADER = 'bridge-account';

/** A short stable id of `parts` (hex of SHA-256, 12 characters: 48 bits, collisions out of reach in practice). */
function shortHash(parts: readonly string[]): string {
  return createHash('sha256').update(parts.join('\n')).digest('hex').slice(0, 12);
}

/** The deployment id derived from settings when BRIDGE_DEPLOYMENT_ID is not set. */
export function derivedDeploymentId(parts: readonly string[]): string {
  return `d${shortHash(['deployment', ...parts])}`;
}

/** The id of an upstream: its base URL and the API client whose reviews it serves. */
export function upstreamId(baseUrl: string, clientId: string): string {
  return `u${shortHash(['upstream', baseUrl, clientId])}`;
}

/** Whether `found` (an identity read back) was written by another deployment or upstream than `mine`. */
export function foreignIdentity(found: Identity, mine: Identity): 'deployment' | 'upstream' | null {
  if (found.deployment !== mine.deployment) return 'deployment';
  if (found.upstream !== mine.upstream) return 'upstream';
  return null;
}
