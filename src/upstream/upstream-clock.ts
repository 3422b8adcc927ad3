// The upstream's clock as seen through the `Date` headers of its answers. The bridge never puts its own clock in
// place of the upstream's (watermarks, the cap of a poll): a clock minutes off in either direction would otherwise
// make changes look older than the watermark, and they would wait for the next sweep.

/** Offsets above this (either direction) are logged as a warning: something is off with one of the two clocks. */
export const LARGE_OFFSET_MS = 60_000;

/** Estimates the upstream's clock offset from its `Date` headers. */
export class UpstreamClock {
  private offsetMs: number | null = null;

  constructor(private readonly onOffset?: (offsetMs: number) => void) {}

  /**
   * Takes one answer's `Date` header (RFC 7231, whole seconds) with the local send and receive times: the server
   * stamped it somewhere in between, so the midpoint is the best guess, and a half-second for the truncation.
   */
  sample(header: string | string[] | undefined, sentMs: number, receivedMs: number): void {
    const text = Array.isArray(header) ? header[0] : header;
    if (!text) return;
    const serverMs = Date.parse(text);
    if (!Number.isFinite(serverMs)) return;
    const offset = serverMs + 500 - (sentMs + receivedMs) / 2;
    // A smoothed estimate: one slow answer must not swing it by its whole round trip.
    this.offsetMs = this.offsetMs === null ? offset : this.offsetMs + (offset - this.offsetMs) * 0.2;
    this.onOffset?.(this.offsetMs);
  }

  /** The upstream's time at local time `localMs`, or null before any `Date` header was seen. */
  at(localMs: number): number | null {
    return this.offsetMs === null ? null : Math.round(localMs + this.offsetMs);
  }

  /** The current estimate (ms; positive: the upstream is ahead), or null. */
  offset(): number | null {
    return this.offsetMs;
  }
}
