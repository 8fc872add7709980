import { describe, expect, it } from 'vitest';
import type { LensResult } from '../../lib/api';
import { lensCsv, lensRowLabel, lensToken } from './lens-view';

describe('the logit lens table', () => {
  it('names the embeddings, each layer after which it reads, and the output', () => {
    expect(lensRowLabel(0, 30)).toBe('Embeddings');
    expect(lensRowLabel(1, 30)).toBe('after Layer 1');
    expect(lensRowLabel(30, 30)).toBe('after Layer 30 (output)');
  });

  it('shows a leading space and line breaks as visible marks', () => {
    expect(lensToken(' Paris')).toBe('␣Paris');
    expect(lensToken('\n\n')).toBe('↵↵');
    expect(lensToken('a b')).toBe('a b');
  });

  it('writes one CSV row per layer and listed token', () => {
    const r = {
      layers: [
        {
          layer: 0,
          top: [{ id: 5, text: ' is, too', logit: 1.5, probability: 0.25, rank: 0 }],
          followed: [{ id: 9, text: ' Paris', logit: -2, probability: 0.001, rank: 41 }],
        },
      ],
    } as unknown as LensResult;
    const lines = lensCsv(r, 'm', 'text').split('\r\n');
    expect(lines[1]).toBe('# model: m');
    expect(lines[3]).toMatch(/^# numbering: layer 0 is the embeddings/);
    expect(lines.slice(4).join('\r\n')).toBe(
      'layer,kind,rank,id,token,probability,logit\r\n0,top,0,5," is, too",0.25,1.5\r\n0,followed,41,9, Paris,0.001,-2\r\n',
    );
  });
});
