/**
 * The password rule of sign-up, `admin user create` and anything else that sets a password
 * (NIST SP 800-63B §3.1.1.2, docs/portal.md "Accounts"): 8 to 256 characters, any characters
 * (spaces and passphrases welcome, no composition rules), and not a password an attacker tries
 * first: not one of the 49,000 most common passwords of leaked-password corpora (the list of
 * @zxcvbn-ts/language-common, shipped with the package: nothing leaves the machine), not one
 * character repeated or a straight run (`aaaaaaaa`, `12345678`, `abcdefgh`), not the username
 * or a password built around it, and not a common word or name dressed the way leaked lists are
 * (`Summer2024`, `monkey123`, `Dragon!`, `P@ssw0rd1`: what cracking rules try right after the
 * list itself). Each refusal says what to do, in words written for people.
 */
export const PASSWORD_MIN_LENGTH = 8;
export const PASSWORD_MAX_LENGTH = 256;

interface Lists {
  /** The common passwords, lowercase. */
  passwords: Set<string>;
  /** Words a decorated password is built on: the common passwords and the diceware words. */
  words: Set<string>;
}
let lists: Promise<Lists> | undefined;

/** The lists of @zxcvbn-ts/language-common, loaded on first use (about 50 ms and 2 MB, once). */
function common(): Promise<Lists> {
  lists ??= import('@zxcvbn-ts/language-common').then(({ dictionary }) => {
    const passwords = new Set(dictionary['passwords-common']);
    return { passwords, words: new Set([...passwords, ...dictionary['diceware-common']]) };
  });
  return lists;
}

/**
 * A word with digits or symbols before or after it, and at most this many of them: `Summer2024`,
 * `monkey123`, `Dragon!`, `2024summer`, `Password1!`. A longer number is not the pattern.
 */
const MAX_DECORATION = 6;
const DECORATION = /[\d\p{P}\p{S}\s]/u;
/** Digits and symbols read as letters (`p@ssw0rd`, `$unsh1ne`); `1` also as `l` below. */
const LEET: Record<string, string> = { '4': 'a', '@': 'a', '3': 'e', '1': 'i', '!': 'i' };
Object.assign(LEET, { '0': 'o', $: 's', '5': 's', '7': 't', '+': 't', '8': 'b', '9': 'g' });
const LEET_CHARACTERS = /[4@31!0$57+89]/g;

/** How many of the first characters (at most MAX_DECORATION) are digits or symbols. */
function decorationLength(characters: string[]): number {
  let n = 0;
  while (n < MAX_DECORATION && n < characters.length && DECORATION.test(characters[n]!)) n++;
  return n;
}

/**
 * The common word a password is built on, if it is one: `Summer2024` -> `summer`. Every way of
 * cutting digits and symbols off its ends is tried, the word read as written and with leet
 * digits read as letters.
 */
function decoratedWord(lower: string, words: Set<string>): string | null {
  const characters = [...lower];
  const most = {
    before: decorationLength(characters),
    after: decorationLength([...characters].reverse()),
  };
  for (let before = 0; before <= most.before; before++)
    for (let after = 0; after <= most.after && before + after <= MAX_DECORATION; after++) {
      if (before + after === 0 || characters.length - before - after < 3) continue;
      const word = characters.slice(before, characters.length - after).join('');
      const readings = [
        word,
        word.replace(LEET_CHARACTERS, (c) => LEET[c]!),
        word.replace(LEET_CHARACTERS, (c) => (c === '1' ? 'l' : LEET[c]!)),
      ];
      const found = readings.find((reading) => words.has(reading));
      if (found !== undefined) return found;
    }
  return null;
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
  const { passwords, words } = await common();
  if (passwords.has(lower))
    return 'This password is one of the most common ones, found in lists of leaked passwords, so attackers try it first. Choose another: a few unrelated words make a strong one.';
  if (decoratedWord(lower, words) !== null)
    return 'This password is a common word or name with a few digits or symbols added (like Summer2024 or Password1!), the pattern of most leaked passwords, so attackers try it early. Choose another: a few unrelated words make a strong one.';
  return null;
}
