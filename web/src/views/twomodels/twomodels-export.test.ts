import { describe, expect, it } from 'vitest';
import type { HeadReport, ModelInfo, RunResult } from '../../lib/api';
import { sceneToSvg } from '../../lib/scene';
import { GRID_H, twoModelsCsv, twoModelsScene, type TwoModelsSide } from './twomodels-export';

const ROLES = [
  { id: 'previous', name: 'Previous token', color: '#1f77b4' },
  { id: 'sink', name: 'Sink', color: '#7f7f7f' },
];

function model(name: string, nLayer: number, nHead: number): ModelInfo {
  return {
    name,
    architecture: 'test',
    causal: true,
    n_layer: nLayer,
    n_head: nHead,
    n_kv_head: nHead,
    roles: ROLES.map((r) => ({ ...r, description: '', typical_function: '', literature: '' })),
  } as unknown as ModelInfo;
}

function run(m: ModelInfo, role: (l: number, h: number) => string, text = 'a, "b"'): RunResult {
  const heads: HeadReport[] = [];
  for (let l = 0; l < m.n_layer; l++)
    for (let h = 0; h < m.n_head; h++) {
      const id = role(l, h);
      const primary = { id, name: id, label: id, score: 0.5, evidence: `evidence of ${l}.${h}` };
      heads.push({ layer: l, head: h, kv_head: h, roles: { primary, secondary: primary } } as unknown as HeadReport);
    }
  return { text, truncated: false, n_tokens: 4, heads } as unknown as RunResult;
}

describe('the exports of Compare models', () => {
  const a = model('ModelA', 2, 3),
    b = model('ModelB', 6, 2);
  const sides: TwoModelsSide[] = [
    { model: a, run: run(a, (l) => (l === 0 ? 'previous' : 'sink')) },
    { model: b, run: run(b, () => 'sink') },
  ];

  it('draws one cell per head in grids of one height, and the census counts', () => {
    const scene = twoModelsScene(sides, null);
    const cells = scene.items.filter((i) => i.kind === 'rect' && (i.fill === '#1f77b4' || i.fill === '#7f7f7f'));
    // 6 + 12 head cells, then the census: a swatch per role and a bar per model and role.
    expect(cells.length).toBe(6 + 12 + 2 * 3);
    const texts = scene.items.filter((i) => i.kind === 'text').map((i) => (i.kind === 'text' ? i.text : ''));
    expect(texts).toContain('ModelA');
    expect(texts).toContain('ModelB');
    expect(texts).toContain('3 (50 %)');
    expect(texts).toContain('12 (100 %)');
    // Layers are counted from 1: the first label is 1, ModelB's last (6 layers) 6.
    expect(texts).toContain('1');
    expect(texts).toContain('6');
    // Both grids span GRID_H: ModelA's rows are GRID_H / 2 tall, ModelB's GRID_H / 6.
    const heights = new Set(
      scene.items
        .filter((i) => i.kind === 'rect' && i.fill === '#7f7f7f' && i.h > 10)
        .map((i) => (i.kind === 'rect' ? Math.round(i.h + 1) : 0)),
    );
    expect(heights).toEqual(new Set([GRID_H / 2, GRID_H / 6]));
    expect(sceneToSvg(scene, () => '')).toMatch(/^<svg /);
  });

  it('lists the A → B answers when they were asked', () => {
    const heads = [{ layer: 1, head: 0, weight: 0.61, weight_no_sink: 0.7, roles: sides[0].run!.heads[3].roles }];
    const scene = twoModelsScene(sides, [{ from: 'it', to: 'trophy', heads }, null]);
    const texts = scene.items.map((i) => (i.kind === 'text' ? i.text : ''));
    expect(texts).toContain('ModelA: from ‘it’ to ‘trophy’');
    expect(texts).toContain('ModelB: no answer');
    expect(texts.some((t) => t.startsWith('L2 H1') && t.includes('0.61'))).toBe(true);
  });

  it('writes a CSV with the models and the text in its header, heads counted from 1', () => {
    const lines = twoModelsCsv(sides, 'a, "b"').split('\r\n');
    expect(lines[0]).toBe('# headscope roles of every head of two models');
    expect(lines[1]).toBe('# model: ModelA and ModelB');
    expect(lines[2]).toBe('# text: "a, \\"b\\""');
    expect(lines[3]).toMatch(/^# numbering: layers, heads and key\/value heads counted from 1/);
    expect(lines[4]).toBe(
      'model,layer,head,kv_head,primary_role,primary_score,secondary_role,secondary_score,tokens,evidence',
    );
    expect(lines[5]).toBe('ModelA,1,1,1,previous,0.5,previous,0.5,4,evidence of 0.0');
    expect(lines.filter((l) => /^Model[AB],/.test(l))).toHaveLength(6 + 12);
    expect(lines[lines.length - 2]).toBe('ModelB,6,2,2,sink,0.5,sink,0.5,4,evidence of 5.1');
  });
});
