/** How duplicates compare addresses and phone numbers, in code as in SQL (issue 38). */

/** An address as duplicates compare it: lower case, the local part's +tag dropped (as customer_email_key in SQL). */
export function emailKey(email: string): string {
  const lower = email.toLowerCase();
  const at = lower.indexOf('@');
  if (at < 0) return lower;
  const local = lower.slice(0, at);
  const plus = local.indexOf('+');
  return `${plus < 0 ? local : local.slice(0, plus)}@${lower.slice(at + 1)}`;
}

/** A phone number's digits (as search_phone_digits in SQL). */
export const phoneDigits = (v: string) => [...v].filter((ch) => ch >= '0' && ch <= '9').join('');
