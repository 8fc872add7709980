// The numbers of a patching reply laid out as the Patching view draws them, with no DOM: a grid
// of rows × columns whose cells hold a result (or nothing, for a site that was not patched), the
// symmetric limit of its colour scale, the CSV export, the "layers" field parsed, and the words
// the view uses for metrics and sites.
//
// Shapes (docs/api.md, POST /api/patch):
//   head, q, pattern   [n_layer, n_head]       every layer of the model; layers not patched are empty
//   k, v               [n_layer, n_kv_head]    a column per key/value head, with the query heads reading it
//   resid              [n_layer, T]            the residual stream entering each layer, per position
//   head_position      [patched heads, T]      one row per (layer, head) patched
//   attn, mlp          [n_layer, 1]            one block per layer, drawn as bars
//   path patching      [n_layer, n_head]       every head after the senders is a receiver

import type { ModelInfo, PatchEffect, PatchMetric, PatchResult, PatchSite } from '../../lib/api';
import { csvField, csvPreamble } from '../../lib/export';
import { headRange } from '../../lib/kv-groups';
import { headShort, layerName } from '../../lib/numbering';

export interface GridRow {
  label: string;
  layer: number;
  /** head_position: the head of the row. */
  head?: number;
}

export interface GridColumn {
  label: string;
  /** The query head (head, q, pattern, path) or key/value head (k, v) of the column. */
  head?: number;
  position?: number;
  /** k, v: the query heads reading this key/value head. */
  group?: number[];
}

/** One cell's numbers: the patched run's metric and its normalised effect. */
export interface GridCell {
  value: number | null;
  normalised: number | null;
}

export interface PatchGrid {
  kind: 'heads' | 'kv' | 'positions' | 'head-positions' | 'blocks' | 'path';
  rows: GridRow[];
  columns: GridColumn[];
  /** rows × columns, row-major; null where nothing was patched. */
  cells: (GridCell | null)[];
}

export const SITE_LABELS: Record<PatchSite, string> = {
  head: 'head output (every position)',
  head_position: 'head output at one position',
  q: 'query of a head',
  k: 'key of a key/value head',
  v: 'value of a key/value head',
  pattern: 'attention pattern of a head',
  resid: 'residual stream at one position',
  attn: 'attention block output',
  mlp: 'feed-forward block output',
};

/** The sites the view offers, most used first. */
export const SITES: readonly PatchSite[] = ['head', 'q', 'k', 'v', 'pattern', 'head_position', 'resid', 'attn', 'mlp'];

export const METRIC_LABELS: Record<PatchMetric, string> = {
  logit_diff: 'logit difference (answer − wrong)',
  prob: 'probability of the answer',
  loss: 'loss of the answer (nats)',
  cosine: '1 − cos of the sentence embedding',
};

/** A key/value head's column label: "KV 2 · heads 4–6". */
export function kvLabel(kv: number, group: number[]): string {
  return `KV ${kv + 1} · ${headRange(group)}`;
}

function fill(
  rows: GridRow[],
  columns: GridColumn[],
  place: (e: PatchEffect) => [number, number] | null,
  effects: readonly PatchEffect[],
  kind: PatchGrid['kind'],
): PatchGrid {
  const cells: (GridCell | null)[] = new Array(rows.length * columns.length).fill(null);
  for (const e of effects) {
    const at = place(e);
    if (at) cells[at[0] * columns.length + at[1]] = { value: e.value, normalised: e.normalised };
  }
  return { kind, rows, columns, cells };
}

const layerRows = (n: number): GridRow[] => Array.from({ length: n }, (_, l) => ({ label: layerName(l), layer: l }));

/** The grid of one site's results. `tokens`: the labels of the prompt's positions. */
export function sweepGrid(
  result: PatchResult,
  site: PatchSite,
  model: Pick<ModelInfo, 'n_layer' | 'n_head' | 'n_kv_head' | 'kv_head_of'>,
  tokens: readonly string[],
): PatchGrid {
  const effects = (result.results ?? []).filter((e) => e.site === site);
  const positions = (): GridColumn[] => tokens.map((t, i) => ({ label: t, position: i }));
  switch (site) {
    case 'head':
    case 'q':
    case 'pattern': {
      const columns = Array.from({ length: model.n_head }, (_, h) => ({ label: headShort(h), head: h }));
      return fill(layerRows(model.n_layer), columns, (e) => [e.layer, e.head ?? 0], effects, 'heads');
    }
    case 'k':
    case 'v': {
      const columns = Array.from({ length: model.n_kv_head }, (_, g) => {
        const group = model.kv_head_of.flatMap((kv, h) => (kv === g ? [h] : []));
        return { label: kvLabel(g, group), head: g, group };
      });
      return fill(layerRows(model.n_layer), columns, (e) => [e.layer, e.head ?? 0], effects, 'kv');
    }
    case 'resid':
      return fill(layerRows(model.n_layer), positions(), (e) => [e.layer, e.position ?? 0], effects, 'positions');
    case 'head_position': {
      const rows: GridRow[] = [];
      const rowOf = new Map<string, number>();
      for (const e of effects) {
        const key = `${e.layer}.${e.head}`;
        if (!rowOf.has(key)) {
          rowOf.set(key, rows.length);
          rows.push({ label: `${layerName(e.layer)} ${headShort(e.head ?? 0)}`, layer: e.layer, head: e.head ?? 0 });
        }
      }
      return fill(
        rows,
        positions(),
        (e) => [rowOf.get(`${e.layer}.${e.head}`)!, e.position ?? 0],
        effects,
        'head-positions',
      );
    }
    case 'attn':
    case 'mlp':
      return fill(layerRows(model.n_layer), [{ label: site }], (e) => [e.layer, 0], effects, 'blocks');
  }
}

/** The grid of a path-patching reply whose receivers were every later head, one at a time. */
export function pathGrid(result: PatchResult, model: Pick<ModelInfo, 'n_layer' | 'n_head'>): PatchGrid {
  const columns = Array.from({ length: model.n_head }, (_, h) => ({ label: headShort(h), head: h }));
  const cells: (GridCell | null)[] = new Array(model.n_layer * model.n_head).fill(null);
  for (const r of result.path?.results ?? [])
    if (r.receivers.length === 1) {
      const [l, h] = r.receivers[0];
      cells[l * model.n_head + h] = { value: r.value, normalised: r.normalised };
    }
  return { kind: 'path', rows: layerRows(model.n_layer), columns, cells };
}

/** The colour scale's half-width: the largest |normalised effect| shown (at least 0.05, so that
 *  noise around zero stays pale), rounded up to two significant digits. */
export function effectLimit(cells: readonly (GridCell | null)[]): number {
  let m = 0;
  for (const c of cells)
    if (c && c.normalised !== null && Number.isFinite(c.normalised)) m = Math.max(m, Math.abs(c.normalised));
  m = Math.max(m, 0.05);
  const p = 10 ** (Math.floor(Math.log10(m)) - 1);
  return Math.ceil(m / p - 1e-9) * p;
}

/** One row per result, as `headscope patch --csv` writes it: site,layer,head,position,value,normalised
 *  (path patching: receivers,input,value,normalised, receivers as "layer.head" joined by spaces).
 *  Method "both" adds estimate_value,estimate_normalised: attribution patching's estimate of the
 *  same site; method "attribution" writes the estimates as the values. */
export function patchCsv(result: PatchResult, modelName = '', text = ''): string {
  const what = {
    exact: 'activation patching',
    attribution: 'attribution patching (first-order estimates)',
    both: 'activation patching beside attribution patching’s estimates',
  }[result.method ?? 'exact'];
  const lines = csvPreamble(`${what} (${result.task}, ${result.n_pairs} pairs)`, modelName, text);
  const n = (v: number | null | undefined) => (typeof v === 'number' ? v + 1 : v);
  // Both: each exact result with the estimate of the same site beside it.
  const estimates = result.method === 'both' ? result.attribution?.results : undefined;
  const key = (e: PatchEffect) => `${e.site}|${e.layer}|${e.head ?? ''}|${e.position ?? ''}`;
  const estimateOf = new Map((estimates ?? []).map((e) => [key(e), e]));
  if (result.results) {
    lines.push(`site,layer,head,position,value,normalised${estimates ? ',estimate_value,estimate_normalised' : ''}`);
    for (const e of result.results) {
      const row = [e.site, n(e.layer), n(e.head), e.position, e.value, e.normalised];
      if (estimates) row.push(estimateOf.get(key(e))?.value ?? null, estimateOf.get(key(e))?.normalised ?? null);
      lines.push(row.map(csvField).join(','));
    }
  } else if (result.path) {
    lines.push('receivers,input,value,normalised');
    for (const r of result.path.results) {
      const who = r.receivers.length ? r.receivers.map(([l, h]) => `${l + 1}.${h + 1}`).join(' ') : 'logits';
      lines.push([who, result.path.input, r.value, r.normalised].map(csvField).join(','));
    }
  }
  return lines.join('\r\n') + '\r\n';
}

/** The "layers" field: empty or "all" for every layer, else numbers as the page counts them
 *  (from 1) and ranges, "1-3, 20". Returns 0-based indices, or a sentence saying what is wrong. */
export function parseLayers(text: string, nLayer: number): number[] | string {
  const t = text.trim().toLowerCase();
  if (t === '' || t === 'all') return [];
  const out = new Set<number>();
  for (const part of t.split(/[\s,]+/).filter(Boolean)) {
    const m = /^(\d+)(?:\s*[-–]\s*(\d+))?$/.exec(part);
    if (!m) return `“${part}” is not a layer number or a range such as 20-30`;
    const a = Number(m[1]),
      b = m[2] === undefined ? a : Number(m[2]);
    if (a < 1 || b > nLayer || a > b) return `layers run from 1 to ${nLayer}; “${part}” is outside that`;
    for (let l = a; l <= b; l++) out.add(l - 1);
  }
  return [...out].sort((x, y) => x - y);
}
