/**
 * The one check of a timestamp a client sends back to be compared in SQL (every cursor that is
 * a time, `updated_since`, a search cursor's time keys): an RFC 3339 date-time that PostgreSQL's
 * timestamptz reads as written. A value PostgreSQL refuses would otherwise fail the statement (a
 * 500) instead of being a 400 naming the parameter.
 *
 * What PostgreSQL 15 refuses, checked on the server and on PGlite alike (datetime.c): the year
 * 0000 (there is no year zero; 0001 written with a positive offset is 1 BC and is read), and a
 * UTC offset of 16 hours or more (DecodeTimezone's limit, MAX_TZDISP_HOUR = 15). Within four-digit
 * years nothing else is out of its range (4713 BC to 294276 AD). A leap second (:60) is read as
 * the next minute, as PostgreSQL does, but not past midnight (23:59:60.5 is 24:00:00.5, refused);
 * 24:00:00 is not RFC 3339 and is refused here though PostgreSQL reads it. JavaScript's
 * Date.parse is no guide (it reads `1`, `2024`
 * or `+275760-09-13T00:00:00Z`, which PostgreSQL refuses).
 */
const RFC3339 =
  /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?([Zz]|[+-](\d{2}):(\d{2}))$/;

/** The refusal of a value isTimestamp refuses, after the path of its parameter. */
export const TIMESTAMP_RANGE =
  'must be an RFC 3339 date-time with a year from 0001 to 9999 and an offset within ±15:59';

/** PostgreSQL's largest UTC offset in hours (15:59). */
const MAX_OFFSET_HOURS = 15;

/**
 * An RFC 3339 date-time (`T`, `t` or a space between date and time, as RFC 3339 section 5.6
 * allows and Ajv's `date-time` format reads) whose every field is in range and whose year and
 * offset PostgreSQL accepts: year 0001-9999, offset within ±15:59.
 */
export function isTimestamp(value: unknown): value is string {
  const match = typeof value === 'string' ? RFC3339.exec(value) : null;
  if (!match) return false;
  const [year, month, day, hour, minute, second] = match.slice(1, 7).map(Number) as number[];
  const daysInMonth = new Date(Date.UTC(year!, month!, 0)).getUTCDate();
  const offsetOk =
    match[9] === undefined || (Number(match[9]) <= MAX_OFFSET_HOURS && Number(match[10]) < 60);
  // A leap second carries into the next minute; past 24:00:00 itself it is out of range.
  const pastMidnight =
    hour === 23 && minute === 59 && second === 60 && /[1-9]/.test(match[7] ?? '');
  return (
    !pastMidnight &&
    year! >= 1 &&
    month! >= 1 &&
    month! <= 12 &&
    day! >= 1 &&
    day! <= daysInMonth &&
    hour! < 24 &&
    minute! < 60 &&
    second! <= 60 &&
    offsetOk
  );
}
