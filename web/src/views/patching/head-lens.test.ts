import { describe, expect, it } from 'vitest';
import type { HeadLensEntry } from '../../lib/api';
import {
  directDifference,
  effectRank,
  encoderLensLine,
  HEAD_LENS_TOP_K,
  headLensRequest,
  headLensTitle,
  headLensToken,
  kvHeadText,
  signedEffect,
} from './head-lens';

const entry = (text: string, logit: number | null, rank: number): HeadLensEntry => ({
  id: 1,
  text,
  logit,
  rank,
  model_logit: 0,
});

describe('the head lens request', () => {
  it('reads the clean prompt at its last token, following the answer and then the wrong token', () => {
    const r = headLensRequest({ text: 'When Mary and John', tokens: [' Mary', ' John'] }, 23, 3);
    expect(r).toEqual({ text: 'When Mary and John', layer: 23, head: 3, tokens: [' Mary', ' John'], top_k: 8 });
    expect(HEAD_LENS_TOP_K).toBe(8);
    expect('position' in r).toBe(false);
  });

  it('names the head as the page numbers heads, with the API index', () => {
    expect(headLensTitle(23, 3)).toBe('Logit lens of L24 H4 (index 23.3)');
    expect(headLensTitle(0, 0)).toBe('Logit lens of L1 H1 (index 0.0)');
  });
});

describe('the head lens numbers', () => {
  it('writes effects with their sign and two decimals', () => {
    expect(signedEffect(0.3674818)).toBe('+0.37');
    expect(signedEffect(-2.487858)).toBe('-2.49');
    expect(signedEffect(0)).toBe('+0.00');
    expect(signedEffect(null)).toBe('–');
    expect(signedEffect(Number.NaN)).toBe('–');
  });

  it('takes answer − wrong from the two followed tokens', () => {
    const followed = [entry(' Mary', 0.3674818, 27569), entry(' John', -2.487858, 49151)];
    expect(directDifference({ followed, followed_prediction: false })).toBeCloseTo(2.8553398);
    expect(signedEffect(directDifference({ followed, followed_prediction: false }))).toBe('+2.86');
  });

  it('has no difference for the prediction, one token, or a missing effect', () => {
    const one = [entry("'s", -0.07, 46244)];
    expect(directDifference({ followed: one, followed_prediction: true })).toBeNull();
    expect(directDifference({ followed: one, followed_prediction: false })).toBeNull();
    const missing = [entry(' Mary', null, 0), entry(' John', 1, 1)];
    expect(directDifference({ followed: missing, followed_prediction: false })).toBeNull();
  });

  it('counts ranks from 1 and names the two ends of the vocabulary', () => {
    expect(effectRank(0, 49152)).toEqual(['1 of 49152', 'raised most']);
    expect(effectRank(27569, 49152)).toEqual(['27570 of 49152', '']);
    expect(effectRank(49151, 49152)).toEqual(['49152 of 49152', 'lowered most']);
  });
});

describe('the head lens words', () => {
  it('names the key/value head and the heads sharing it under grouped-query attention only', () => {
    const smol = { n_head: 9, n_kv_head: 3, kv_head_of: [0, 0, 0, 1, 1, 1, 2, 2, 2] };
    expect(kvHeadText(smol, 1)).toBe(
      'It reads key/value head 2 (index 1), shared by heads 4–6 (grouped-query attention).',
    );
    const gemma = { n_head: 4, n_kv_head: 1, kv_head_of: [0, 0, 0, 0] };
    expect(kvHeadText(gemma, 0)).toMatch(/key\/value head 1 \(index 0\), shared by heads 1–4/);
    expect(kvHeadText({ n_head: 12, n_kv_head: 12, kv_head_of: [...Array(12).keys()] }, 5)).toBeNull();
  });

  it('shows a leading space and line breaks, and cuts long tokens', () => {
    expect(headLensToken(' Mary')).toBe('␣Mary');
    expect(headLensToken('\n')).toBe('↵');
    expect(headLensToken(' a very long token indeed')).toBe('␣a very long to…');
  });

  it('tells an encoder that the logit lens needs a decoder', () => {
    expect(encoderLensLine('all-MiniLM-L6-v2')).toMatch(/^all-MiniLM-L6-v2 is an encoder: .*needs a decoder\.$/);
  });
});
