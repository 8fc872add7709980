// The numbers of the Composition view, apart from the page: the reply's nested lists laid out as
// one square matrix per kind, the colour of a score against the random baseline, and the words of
// a cell.
//
// Layout (CompositionGrid.values): n = n_layer · n_head heads per side, layer-major; row
// l1 · n_head + h1 is the sender, column l2 · n_head + h2 the receiver, so each layer is an
// n_head-wide block and only the blocks right of the diagonal (receiver in a later layer) hold a
// score. It is the reply's [l1][h1][l2][h2] flattened in order.

import { csvPreamble } from '../../lib/export';
import type { CompositionKind, CompositionResult } from '../../lib/api';
import { SEQUENTIAL_LUT } from '../../lib/colour';
import { headTag } from '../../lib/numbering';
import type { Pixels } from '../../lib/scene';

export const KINDS: readonly CompositionKind[] = ['Q', 'K', 'V'];

/** What each kind measures, in words: which input of the receiver reads what the sender writes. */
export const KIND_LABELS: Record<CompositionKind, string> = {
  Q: 'Q: the receiver’s queries read the sender’s output',
  K: 'K: the receiver’s keys read the sender’s output',
  V: 'V: the receiver’s values read the sender’s output',
};

/** The receiver's input that each kind goes through (path patching's "input"). */
export const KIND_INPUT: Record<CompositionKind, 'q' | 'k' | 'v'> = { Q: 'q', K: 'k', V: 'v' };

/** Cells with no path (the receiver is not in a later layer): a grey outside the score palette,
 *  whose lowest colour is near-white. */
export const NO_PATH_COLOUR = '#d5dae1';

export interface CompositionGrid {
  nLayer: number;
  nHead: number;
  /** Heads per side: nLayer · nHead. */
  n: number;
  /** [n · n] per kind, sender row, receiver column. */
  values: Record<CompositionKind, Float32Array>;
  /** The largest score of each kind: the dark end of its colour scale. */
  max: Record<CompositionKind, number>;
}

export function compositionGrid(r: CompositionResult): CompositionGrid {
  const [nLayer, nHead] = r.shape;
  const n = nLayer * nHead;
  const values = {} as Record<CompositionKind, Float32Array>;
  const max = {} as Record<CompositionKind, number>;
  for (const kind of KINDS) {
    const out = new Float32Array(n * n);
    let i = 0,
      m = 0;
    for (const sender of r.scores[kind])
      for (const receivers of sender)
        for (const layer of receivers)
          for (const v of layer) {
            out[i++] = v;
            m = Math.max(m, v);
          }
    if (i !== n * n) throw new Error(`composition scores of ${kind}: ${i} values for a [${r.shape.join(', ')}] shape`);
    values[kind] = out;
    max[kind] = m;
  }
  return { nLayer, nHead, n, values, max };
}

/** Whether row i (sender) reaches column j (receiver): the receiver's layer comes later. */
export function hasPath(i: number, j: number, nHead: number): boolean {
  return Math.floor(j / nHead) > Math.floor(i / nHead);
}

/** The head of a row or column: { layer, head }. */
export function headAt(index: number, nHead: number): { layer: number; head: number } {
  return { layer: Math.floor(index / nHead), head: index % nHead };
}

/** Where a score sits on the colour scale, 0..1: 0 at or below the random mean, 1 at `max`. */
export function shade(score: number, mean: number, max: number): number {
  if (!(max > mean)) return 0;
  return Math.max(0, Math.min(1, (score - mean) / (max - mean)));
}

/** A score as a multiple of the random mean ("×4.3") and in standard deviations above it. */
export function againstBaseline(score: number, base: { mean: number; std: number }): { times: number; sd: number } {
  return {
    times: base.mean > 0 ? score / base.mean : 0,
    sd: base.std > 0 ? (score - base.mean) / base.std : 0,
  };
}

const NO_PATH_RGB = [1, 3, 5].map((k) => parseInt(NO_PATH_COLOUR.slice(k, k + 2), 16));

/** One pixel per pair of heads: the kind's scores through the sequential palette (random mean →
 *  lightest, the highest score → darkest), cells without a path in grey. */
export function compositionPixels(grid: CompositionGrid, kind: CompositionKind, mean: number): Pixels {
  const { n, nHead } = grid;
  const values = grid.values[kind],
    max = grid.max[kind];
  const data = new Uint8ClampedArray(n * n * 4);
  const last = SEQUENTIAL_LUT.length / 4 - 1;
  for (let i = 0; i < n; i++)
    for (let j = 0; j < n; j++) {
      const at = (i * n + j) * 4;
      if (!hasPath(i, j, nHead)) {
        data.set(NO_PATH_RGB, at);
      } else {
        const k = Math.round(shade(values[i * n + j], mean, max) * last) * 4;
        data.set(SEQUENTIAL_LUT.subarray(k, k + 3), at);
      }
      data[at + 3] = 255;
    }
  return { width: n, height: n, data };
}

/** "L18 H9 → L19 H8" (the page's numbering, from 1). */
export function pairName(sender: { layer: number; head: number }, receiver: { layer: number; head: number }): string {
  return `${headTag(sender.layer, sender.head)} → ${headTag(receiver.layer, receiver.head)}`;
}

/** "17.8 → 18.7": the 0-based indices of the API, the CLI and Python. */
export function pairIndex(sender: { layer: number; head: number }, receiver: { layer: number; head: number }): string {
  return `${sender.layer}.${sender.head} → ${receiver.layer}.${receiver.head}`;
}

export function score3(v: number): string {
  return v.toFixed(3);
}

/** The tooltip of cell (i, j): the pair, its score against the baseline, the other two kinds, and
 *  what a group of query heads shares under grouped-query attention. */
export function describeCell(
  grid: CompositionGrid,
  result: CompositionResult,
  kind: CompositionKind,
  i: number,
  j: number,
  kvGroup: number,
): string[] {
  const sender = headAt(i, grid.nHead),
    receiver = headAt(j, grid.nHead);
  const head = [pairName(sender, receiver), `index ${pairIndex(sender, receiver)}`];
  if (!hasPath(i, j, grid.nHead))
    return [...head, 'no path: the receiver is not in a later layer, so it cannot read this output'];
  const base = result.baseline[kind];
  const v = grid.values[kind][i * grid.n + j];
  const { times, sd } = againstBaseline(v, base);
  const lines = [
    ...head,
    `${kind}-composition ${score3(v)}: ×${times.toFixed(1)} the random mean (${sd >= 0 ? '+' : ''}${sd.toFixed(0)} sd)`,
    `random heads: ${base.mean.toFixed(4)} ± ${base.std.toFixed(4)}`,
    KINDS.map((k) => `${k} ${score3(grid.values[k][i * grid.n + j])}`).join(' · '),
  ];
  if (kvGroup > 1 && kind !== 'Q')
    lines.push(
      `the receiver shares W_K and W_V with the ${kvGroup - 1} other query heads of its group (grouped-query attention)`,
    );
  return lines;
}

/** The columns of `headscope composition --csv`, one row per pair whose receiver is in a later
 *  layer, with layers and heads counted from 1 as on the page and the lines of csvPreamble first
 *  (composition reads the weights only: no text). */
export function compositionCsv(grid: CompositionGrid, modelName = ''): string {
  const { n, nHead } = grid;
  const lines = [
    ...csvPreamble('composition scores of every pair of heads (from the weights, no text)', modelName, ''),
    'sender_layer,sender_head,receiver_layer,receiver_head,q,k,v',
  ];
  for (let i = 0; i < n; i++)
    for (let j = 0; j < n; j++) {
      if (!hasPath(i, j, nHead)) continue;
      const s = headAt(i, nHead),
        r = headAt(j, nHead);
      const at = i * n + j;
      lines.push(
        [
          s.layer + 1,
          s.head + 1,
          r.layer + 1,
          r.head + 1,
          g7(grid.values.Q[at]),
          g7(grid.values.K[at]),
          g7(grid.values.V[at]),
        ].join(','),
      );
    }
  return lines.join('\n') + '\n';
}

/** Seven significant digits, as the CLI's %.7g writes a float. */
function g7(v: number): string {
  return String(Number(v.toPrecision(7)));
}
