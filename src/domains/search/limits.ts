import { refuse } from '../../lib/errors';

/**
 * The limits every search's `q` is held to (issue 36), and their refusals, in one place for the three searches
 * (tickets, customers, articles). Only lib below it, so the customers and help-centre domains take it without
 * taking the ticket query language (query.ts) and what it imports.
 */
export interface SearchLimits {
  /** SEARCH_QUERY_MAX_CHARS: the longest query, in characters. */
  maxChars: number;
  /** SEARCH_QUERY_MAX_TERMS: the most words (the ticket language: words, phrases and operators). */
  maxTerms: number;
}

// One character against a fixed class: never a pattern run over the caller's whole text.
const LETTER_OR_DIGIT = /^[\p{L}\p{N}]$/u;
export const isLetterOrDigit = (ch: string) => LETTER_OR_DIGIT.test(ch);

/** 400 query_too_long: `chars` characters where `maxChars` are accepted. */
export const tooLong = (chars: number, maxChars: number, path = 'q') =>
  refuse('query_too_long', `The search query has ${chars} characters; at most ${maxChars} (SEARCH_QUERY_MAX_CHARS) are accepted.`, [
    { path, message: `at most ${maxChars} characters` },
  ]);

/**
 * A fragment or words search's `q` (customers, articles) as characters, with how many words (runs of letters and
 * digits) it holds. Refused: over `maxChars` characters (400 query_too_long, before anything else reads it), more
 * than `maxTerms` words (400 query_too_complex). One pass over the characters.
 */
export function boundedText(q: string, limits: SearchLimits): { chars: string[]; words: number } {
  const chars = [...q];
  if (chars.length > limits.maxChars) throw tooLong(chars.length, limits.maxChars);
  let words = 0;
  let inWord = false;
  for (const ch of chars) {
    const word = isLetterOrDigit(ch);
    if (word && !inWord) words += 1;
    inWord = word;
  }
  if (words > limits.maxTerms) {
    throw refuse('query_too_complex', `The search query holds ${words} words; at most ${limits.maxTerms} (SEARCH_QUERY_MAX_TERMS) are accepted.`, [
      { path: 'q', message: `at most ${limits.maxTerms} words` },
    ]);
  }
  return { chars, words };
}
