/**
 * The password rule of sign-up, `admin user create` and anything else that sets a password
 * (NIST SP 800-63B §3.1.1.2, docs/portal.md "Accounts"): 8 to 256 characters, any characters
 * (spaces and passphrases welcome, no composition rules), and not a password an attacker tries
 * first: not one of the 49,000 most common passwords of leaked-password corpora (the list of
 * @zxcvbn-ts/language-common, shipped with the package: nothing leaves the machine), not one
 * character repeated or a straight run (`aaaaaaaa`, `12345678`, `abcdefgh`), and not the username
 * or a password built around it. Each refusal says what to do, in words written for people.
 */
export const PASSWORD_MIN_LENGTH = 8;
export const PASSWORD_MAX_LENGTH = 256;

let commonPasswords: Promise<Set<string>> | undefined;

/** The common-password list, loaded on first use (about 50 ms and 2 MB, once per process). */
function common(): Promise<Set<string>> {
  commonPasswords ??= import('@zxcvbn-ts/language-common').then(
    ({ dictionary }) => new Set(dictionary['passwords-common']),
  );
  return commonPasswords;
}

/** One character repeated, or a run up or down by one code point (`abcdef`, `987654`). */
function isRunOrRepeat(password: string): boolean {
  const points = [...password].map((c) => c.codePointAt(0)!);
  const steps = new Set(points.slice(1).map((p, i) => p - points[i]!));
  return steps.size === 1 && [0, 1, -1].includes([...steps][0]!);
}

/** Why this password cannot be used, for the person choosing it; null when it can. */
export async function passwordProblem(
  password: string,
  context: { username: string },
): Promise<string | null> {
  // UTF-16 code units, as the form's minlength/maxlength and the sign-in form count them.
  const length = password.length;
  if (length < PASSWORD_MIN_LENGTH)
    return `Choose a longer password: at least ${PASSWORD_MIN_LENGTH} characters. A few unrelated words make a good one.`;
  if (length > PASSWORD_MAX_LENGTH)
    return `Choose a shorter password: at most ${PASSWORD_MAX_LENGTH} characters.`;
  const lower = password.toLowerCase();
  const username = context.username.toLowerCase();
  if (username.length >= 3 && lower.includes(username))
    return 'Choose a password that does not contain your username: it is the first thing an attacker tries.';
  if (isRunOrRepeat(lower))
    return 'Choose a password that is not one character repeated or a run like 12345678 or abcdefgh.';
  if ((await common()).has(lower))
    return 'This password is one of the most common ones, found in lists of leaked passwords, so attackers try it first. Choose another: a few unrelated words make a strong one.';
  return null;
}
