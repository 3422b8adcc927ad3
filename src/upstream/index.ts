// The public surface of the upstream client: what the passes, the configuration and the metrics need. Internals
// (transport, limiter, pager, cursor detection) stay importable by path for tests but are not re-exported here.

export { createUpstreamClient, UPSTREAM_DEFAULTS } from './client.js';
export type { UpstreamClient, UpstreamClientConfig } from './client.js';
export { envCredentials, fileOrEnvCredentials, CredentialsError } from './credentials.js';
export type { ClientCredentials, CredentialsProvider, SecretSource } from './credentials.js';
export { UpstreamError, isUpstreamError } from './errors.js';
export type { UpstreamErrorKind } from './errors.js';
export type { RateLimiterState } from './rate-limiter.js';
export type { HttpTimeouts } from './http.js';
export { KNOWN_STATUSES } from './validate.js';
export * from './types.js';
export * from '../core/review.js';
