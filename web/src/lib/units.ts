// The positions a view shows: tokens, or words (pieces merged on the server by
// analysis/words.h: attention TO a word is the sum over its pieces, FROM a word the mean), with
// special tokens optionally hidden.

import type { RunResult, TokenInfo } from './api';
import type { Level } from './state';
import { tokenText } from './tokens';

export interface Units {
  level: Level;
  /** Label of every unit, in order (all units, hidden ones included). */
  labels: string[];
  special: boolean[];
  /** For each unit, the token indices it covers. */
  tokens: number[][];
}

/** The label of a token on the page: decoded (the server's `display`), its vocabulary entry
 *  decoded (lib/tokens.ts) for a server that sends none. */
export function tokenShown(t: TokenInfo): string {
  return tokenText(t);
}

export function unitsOf(run: RunResult, level: Level): Units {
  if (level === 'token') {
    return {
      level,
      labels: run.tokens.map(tokenShown),
      special: run.tokens.map((t) => t.special),
      tokens: run.tokens.map((_, i) => [i]),
    };
  }
  return {
    level,
    labels: run.words.map((w) => w.text),
    special: run.words.map((w) => w.special),
    tokens: run.words.map((w) => w.tokens.slice()),
  };
}

/** Which units stay on screen. */
export function keepMask(units: Units, hideSpecial: boolean): boolean[] {
  return units.special.map((s) => !(hideSpecial && s));
}

/** The unit that holds token `token` (-1 if none). */
export function unitOfToken(units: Units, token: number): number {
  return units.tokens.findIndex((ts) => ts.includes(token));
}
