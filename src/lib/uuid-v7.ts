/**
 * UUIDv7 (RFC 9562, 5.7): the first 48 bits are the Unix time in milliseconds, then the version
 * (7), 12 random bits, the variant and 62 random bits. The request log's ids are UUIDv7 of the
 * request's time, so a lookup by id knows the partition to read (src/db/partitions.ts).
 */
import { randomUUID } from 'node:crypto';

/** A v4's random bits (and its variant) under the time and the version 7. */
export function uuidV7(ms: number): string {
  const time = ms.toString(16).padStart(12, '0');
  return `${time.slice(0, 8)}-${time.slice(8)}-7${randomUUID().slice(15)}`;
}

/** The millisecond a UUIDv7 was made at; undefined for any other UUID (as a v4 from before). */
export function uuidV7Time(id: string): number | undefined {
  if (id[14] !== '7') return undefined;
  return Number.parseInt(id.slice(0, 8) + id.slice(9, 13), 16);
}
