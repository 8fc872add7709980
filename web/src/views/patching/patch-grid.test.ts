import { describe, expect, it } from 'vitest';
import type { PatchEffect, PatchResult } from '../../lib/api';
import { effectLimit, parseLayers, patchCsv, pathGrid, sweepGrid } from './patch-grid';

// A model shaped like SmolLM2 in miniature: 3 layers, 6 query heads sharing 2 key/value heads.
const model = { n_layer: 3, n_head: 6, n_kv_head: 2, kv_head_of: [0, 0, 0, 1, 1, 1] };

function result(results: PatchEffect[], extra: Partial<PatchResult> = {}): PatchResult {
  return {
    schema: 'headscope.patch/1',
    task: 'custom',
    seed: 0,
    seconds: { wall: 1, cpu: 1 },
    n_pairs: 1,
    metric: 'logit_diff',
    direction: 'denoise',
    clean: 2,
    corrupt: -1,
    results,
    ...extra,
  };
}

const effect = (e: Partial<PatchEffect>): PatchEffect => ({
  site: 'head',
  layer: 0,
  head: null,
  position: null,
  value: 0,
  normalised: 0,
  ...e,
});

describe('sweepGrid', () => {
  it('lays heads out as every layer × every head, leaving layers not patched empty', () => {
    const r = result([
      effect({ layer: 1, head: 0, value: 0.5, normalised: 0.5 }),
      effect({ layer: 1, head: 5, value: -1, normalised: 0 }),
    ]);
    const g = sweepGrid(r, 'head', model, []);
    expect(g.rows.map((x) => x.layer)).toEqual([0, 1, 2]);
    expect(g.columns.map((c) => c.head)).toEqual([0, 1, 2, 3, 4, 5]);
    expect(g.cells).toHaveLength(18);
    expect(g.cells[1 * 6 + 0]).toEqual({ value: 0.5, normalised: 0.5 });
    expect(g.cells[1 * 6 + 5]).toEqual({ value: -1, normalised: 0 });
    expect(g.cells.filter((c) => c !== null)).toHaveLength(2);
  });

  it('gives keys and values one column per key/value head, naming the query heads that read it', () => {
    const r = result([effect({ site: 'k', layer: 2, head: 1, group: [3, 4, 5], normalised: 0.2 })]);
    const g = sweepGrid(r, 'k', model, []);
    expect(g.kind).toBe('kv');
    expect(g.columns.map((c) => c.group)).toEqual([
      [0, 1, 2],
      [3, 4, 5],
    ]);
    expect(g.columns[1].label).toBe('KV 2 · heads 4–6');
    expect(g.cells[2 * 2 + 1]?.normalised).toBe(0.2);
  });

  it('lays the residual stream out as layer × position with the tokens as column labels', () => {
    const r = result([effect({ site: 'resid', layer: 2, position: 1, normalised: 1 })]);
    const g = sweepGrid(r, 'resid', model, ['When', 'Mary']);
    expect(g.columns.map((c) => c.label)).toEqual(['When', 'Mary']);
    expect(g.cells).toHaveLength(6);
    expect(g.cells[2 * 2 + 1]?.normalised).toBe(1);
  });

  it('gives each patched head a row of positions, and each block a bar per layer', () => {
    const hp = sweepGrid(
      result([
        effect({ site: 'head_position', layer: 2, head: 4, position: 0, normalised: 0.1 }),
        effect({ site: 'head_position', layer: 2, head: 4, position: 1, normalised: 0.3 }),
      ]),
      'head_position',
      model,
      ['a', 'b'],
    );
    expect(hp.rows).toEqual([{ label: 'Layer 3 H5', layer: 2, head: 4 }]);
    expect(hp.cells.map((c) => c?.normalised)).toEqual([0.1, 0.3]);
    const mlp = sweepGrid(result([effect({ site: 'mlp', layer: 1, normalised: -0.4 })]), 'mlp', model, []);
    expect(mlp.kind).toBe('blocks');
    expect(mlp.cells.map((c) => c?.normalised ?? null)).toEqual([null, -0.4, null]);
  });
});

describe('pathGrid', () => {
  it('places each receiver of a path patch in its layer and head', () => {
    const r = result([], {
      results: undefined,
      path: {
        senders: [[0, 1]],
        receivers: [],
        input: 'q',
        results: [
          { receivers: [[1, 2]], value: 1, normalised: 0.25 },
          { receivers: [[2, 5]], value: 0, normalised: -0.1 },
        ],
      },
    });
    const g = pathGrid(r, model);
    expect(g.cells[1 * 6 + 2]?.normalised).toBe(0.25);
    expect(g.cells[2 * 6 + 5]?.normalised).toBe(-0.1);
    expect(g.cells[0]).toBeNull();
  });
});

describe('effectLimit', () => {
  it('is the largest |effect| rounded up to two digits, at least 0.05, NaN and empty cells left out', () => {
    expect(effectLimit([{ value: 0, normalised: -0.463 }, null, { value: 0, normalised: 0.2 }])).toBeCloseTo(0.47);
    expect(
      effectLimit([
        { value: 0, normalised: 0.001 },
        { value: 0, normalised: null },
      ]),
    ).toBe(0.05);
    expect(effectLimit([{ value: 0, normalised: 1.234 }])).toBeCloseTo(1.3);
  });
});

describe('patchCsv', () => {
  it('writes the columns of `headscope patch --csv`', () => {
    const csv = patchCsv(result([effect({ layer: 1, head: 2, value: 0.5, normalised: 0.25 })]));
    const [preamble, body] = [csv.split('\r\n').slice(0, 4), csv.split('\r\n').slice(4).join('\r\n')];
    expect(preamble[0]).toMatch(/^# headscope activation patching/);
    expect(preamble[3]).toMatch(/^# numbering: layers, heads and key\/value heads counted from 1/);
    // Layer index 1, head index 2 are Layer 2, head 3 on the page.
    expect(body).toBe('site,layer,head,position,value,normalised\r\nhead,2,3,,0.5,0.25\r\n');
    const path = patchCsv(
      result([], {
        results: undefined,
        path: {
          senders: [[0, 1]],
          receivers: [],
          input: 'k',
          results: [{ receivers: [[1, 2]], value: 1, normalised: null }],
        },
      }),
    );
    expect(path.split('\r\n').slice(4).join('\r\n')).toBe('receivers,input,value,normalised\r\n2.3,k,1,\r\n');
  });
});

describe('parseLayers', () => {
  it('reads layers as the page counts them (from 1) into 0-based indices', () => {
    expect(parseLayers('', 30)).toEqual([]);
    expect(parseLayers('all', 30)).toEqual([]);
    expect(parseLayers('1-3, 30', 30)).toEqual([0, 1, 2, 29]);
    expect(parseLayers('5 5', 30)).toEqual([4]);
  });
  it('says what is wrong instead of guessing', () => {
    expect(parseLayers('31', 30)).toMatch(/from 1 to 30/);
    expect(parseLayers('0', 30)).toMatch(/from 1 to 30/);
    expect(parseLayers('three', 30)).toMatch(/not a layer number/);
  });
});
