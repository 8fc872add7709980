import { describe, expect, it } from 'vitest';
import type { HeadStats, RunResult } from './api';
import { csvField, EXPORT_NUMBERING, exportName, statsToCsv, statsToJson } from './export';
import { STATISTICS_CATALOGUE } from './statistics-catalogue.fixture';
import { csvStatKeys } from './statistics';
import { sceneToSvg, MAX_VECTOR_CELLS, type Scene } from './scene';

function stats(v: number): HeadStats {
  const s = { n_queries: 3, n_duplicate_queries: 0, offset_mass: { '-1': v, '0': v, '1': v } } as unknown as Record<
    string,
    unknown
  >;
  for (const k of csvStatKeys(STATISTICS_CATALOGUE)) s[k] = v;
  s.duplicate_mass = null;
  return s as unknown as HeadStats;
}

const run: RunResult = {
  schema: 'headscope.run/2',
  text: 'a, b',
  truncated: false,
  level: 'token',
  special: 'keep',
  n_tokens: 3,
  n_units: 3,
  tokens: [],
  words: [],
  heads: [0, 1].map((head) => ({
    layer: 0,
    head,
    kv_head: head,
    stats: stats(head === 0 ? 0.125 : 0.5),
    roles: {
      primary: {
        id: 'previous_token',
        name: 'Previous token',
        score: 0.8,
        detail: '',
        label: 'Previous token',
        evidence: '80 % goes to the previous token, "a"',
      },
      secondary: { id: 'self', name: 'Self', score: 0.1, detail: '', label: 'Self', evidence: '' },
      confidence: 0.8,
      margin: 0.7,
      scores: [],
    },
  })),
};

describe('CSV export', () => {
  it('quotes fields per RFC 4180', () => {
    expect(csvField('plain')).toBe('plain');
    expect(csvField('a,b')).toBe('"a,b"');
    expect(csvField('say "hi"')).toBe('"say ""hi"""');
    expect(csvField(null)).toBe('');
    expect(csvField(NaN)).toBe('');
    expect(csvField(0.1)).toBe('0.1');
  });

  it('writes one row per head with every statistic at full precision', () => {
    const all = statsToCsv(run, STATISTICS_CATALOGUE, 'tiny-model').trimEnd().split('\r\n');
    // What the file holds, the model, the text and the numbering, before the column names.
    expect(all.slice(0, 4)).toEqual([
      '# headscope statistics of every head',
      '# model: tiny-model',
      '# text: "a, b"',
      `# numbering: ${EXPORT_NUMBERING}`,
    ]);
    expect(EXPORT_NUMBERING).toMatch(/^layers, heads and key\/value heads counted from 1/);
    const lines = all.slice(4);
    expect(lines).toHaveLength(3);
    const header = lines[0].split(',');
    expect(header.slice(0, 5)).toEqual(['layer', 'head', 'level', 'special', 'primary_role']);
    expect(header).toContain('entropy_bits');
    const first = lines[1];
    // Layer 1, head 1 as on the page (the API's layer 0, head 0).
    expect(first.startsWith('1,1,token,keep,previous_token,0.8,self,0.1,0.125,')).toBe(true);
    expect(lines[2].startsWith('1,2,')).toBe(true);
    // The evidence has a comma and quotes, so it is quoted with doubled quotes.
    expect(first.endsWith(',"80 % goes to the previous token, ""a"""')).toBe(true);
    // duplicate_mass is null → empty cell, column count stays the same.
    expect(first.match(/,,/)).not.toBeNull();
  });

  it('writes the JSON with the same numbering and tokens as text', () => {
    const model = { name: 'tiny-model', architecture: 'bert', n_layer: 1, n_head: 2, d_model: 4, d_head: 2 };
    const withTokens: RunResult = {
      ...run,
      tokens: [
        { id: 1, text: 'Ġa', display: 'a', begin: 0, end: 1, special: false, word: 0 },
        { id: 2, text: 'Ã¼', begin: 1, end: 3, special: false, word: 0 },
      ],
    };
    const json = JSON.parse(statsToJson(model as never, withTokens));
    expect(json.numbering).toBe(EXPORT_NUMBERING);
    expect(json.tokens).toEqual(['a', 'ü']);
    expect(json.heads.map((h: { layer: number; head: number }) => [h.layer, h.head])).toEqual([
      [1, 1],
      [1, 2],
    ]);
  });

  it('makes safe file names', () => {
    expect(exportName(['all-MiniLM-L6-v2', 'layer 2', 'head/5'], 'svg')).toBe(
      'headscope-all-MiniLM-L6-v2-layer_2-head_5.svg',
    );
  });
});

describe('SVG export', () => {
  const pixels = { width: 2, height: 1, data: new Uint8ClampedArray([255, 0, 0, 255, 0, 0, 255, 255]) };
  const scene: Scene = {
    width: 100,
    height: 50,
    background: '#ffffff',
    items: [
      { kind: 'text', x: 5, y: 10, text: 'Head 3 – <sink> & "more"', size: 12, fill: '#000000' },
      { kind: 'image', x: 0, y: 20, w: 20, h: 10, pixels },
      { kind: 'line', x1: 0, y1: 0, x2: 10, y2: 10, stroke: '#0000ff', width: 2, opacity: 0.5 },
    ],
  };

  it('writes small rasters as one rect per cell and escapes text', () => {
    const svg = sceneToSvg(scene, () => 'data:unused');
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg" width="100" height="50"')).toBe(true);
    expect(svg).toContain('<rect x="0" y="20" width="10" height="10" fill="#ff0000"/>');
    expect(svg).toContain('<rect x="10" y="20" width="10" height="10" fill="#0000ff"/>');
    expect(svg).toContain('Head 3 – &lt;sink&gt; &amp; &quot;more&quot;');
    expect(svg).toContain('stroke-opacity="0.500"');
    expect(svg).not.toContain('data:unused');
  });

  it('embeds large rasters as PNG', () => {
    const side = Math.ceil(Math.sqrt(MAX_VECTOR_CELLS)) + 1;
    const big = { width: side, height: side, data: new Uint8ClampedArray(side * side * 4) };
    const svg = sceneToSvg(
      { ...scene, items: [{ kind: 'image', x: 0, y: 0, w: 10, h: 10, pixels: big }] },
      (p) => `data:image/png;base64,${p.width}`,
    );
    expect(svg).toContain(`href="data:image/png;base64,${side}"`);
  });
});
